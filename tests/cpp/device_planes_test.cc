// Activity records -> TensorFlow profiler planes (plugin/profiler/device_planes.h): a plane per
// device named as TensorFlow names a GPU's, a line per stream plus the host-side op line, events
// named by what ran with the issuing op as "tf_op", copies with their bytes, kernels with their
// parameter block's, op events with their descriptor calls and round trips, the round trips on
// their own line, dropped records reported.
#include "plugin/profiler/device_planes.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace vgpu::profiler {
namespace {

using activity::Intern;
using activity::Kind;
using activity::Record;

Record Make(Kind kind, uint32_t device, uint64_t stream, const char* name, int64_t start,
            int64_t end, uint64_t bytes = 0) {
  Record record;
  record.kind = kind;
  record.device = device;
  record.stream = stream;
  record.name = Intern(name);
  record.op = Intern("MatMul");
  record.op_name = Intern("dense/MatMul");
  record.start_ns = start;
  record.end_ns = end;
  record.bytes = bytes;
  return record;
}

// The string value of stat `name` of `event` on `plane` ("" if absent).
std::string StatString(const XPlaneBuilder& plane, const XEventRecord& event,
                       const std::string& name) {
  for (const XStatValue& stat : event.stats) {
    if (plane.StatName(stat.metadata_id) != name) continue;
    if (const auto* text = std::get_if<std::string>(&stat.value)) return *text;
    if (const auto* number = std::get_if<uint64_t>(&stat.value)) return std::to_string(*number);
  }
  return "";
}

TEST(DevicePlanesTest, APlanePerDeviceALinePerStreamAndTheHostSideOpLine) {
  const std::vector<Record> records = {
      Make(Kind::kKernel, 0, 2, "matmul", 2000, 2500),
      Make(Kind::kOp, 0, 0, "MatMul", 1500, 1900),
      Make(Kind::kCopyToDevice, 0, 1, "", 1000, 1400, 4096),
      Make(Kind::kKernel, 1, 1, "relu", 3000, 3100),
      Make(Kind::kKernel, 0, 2, "bias_add", 1800, 1900),  // earlier on the same line
  };
  XSpaceBuilder space;
  AddDevicePlanes(records, /*dropped=*/0, &space);
  ASSERT_EQ(space.planes().size(), 2u);
  EXPECT_TRUE(space.warnings().empty());
  const XPlaneBuilder& gpu0 = space.planes()[0];
  EXPECT_EQ(gpu0.name(), "/device:GPU:0");
  EXPECT_EQ(space.planes()[1].name(), "/device:GPU:1");
  ASSERT_EQ(gpu0.lines().size(), 3u);  // streams 1 and 2, then the op line
  EXPECT_EQ(gpu0.lines()[0].name(), "Stream #1");
  EXPECT_EQ(gpu0.lines()[1].name(), "Stream #2");
  EXPECT_EQ(gpu0.lines()[2].name(), kOpKernelsLineName);

  const XLineBuilder& copies = gpu0.lines()[0];
  ASSERT_EQ(copies.events().size(), 1u);
  EXPECT_EQ(gpu0.EventName(copies.events()[0].metadata_id), "MemcpyH2D");
  EXPECT_EQ(StatString(gpu0, copies.events()[0], "bytes"), "4096");

  const XLineBuilder& kernels = gpu0.lines()[1];
  EXPECT_EQ(kernels.timestamp_ns(), 1800);  // the line starts with its first event
  ASSERT_EQ(kernels.events().size(), 2u);
  EXPECT_EQ(gpu0.EventName(kernels.events()[0].metadata_id), "bias_add");
  EXPECT_EQ(kernels.events()[0].offset_ps, 0);
  EXPECT_EQ(kernels.events()[0].duration_ps, 100'000);
  EXPECT_EQ(gpu0.EventName(kernels.events()[1].metadata_id), "matmul");
  EXPECT_EQ(kernels.events()[1].offset_ps, 200'000);
  EXPECT_EQ(StatString(gpu0, kernels.events()[1], "tf_op"), "dense/MatMul:MatMul");
  EXPECT_EQ(StatString(gpu0, kernels.events()[1], "bytes"), "");
}

TEST(DevicePlanesTest, OpsCarryTheirClientCountsKernelsTheirParamsAndCallsHaveALine) {
  Record op = Make(Kind::kOp, 0, 0, "Conv2D", 100, 900);
  op.descriptor_calls_local = 7;
  op.descriptor_calls_forwarded = 1;
  op.round_trips = 2;
  const std::vector<Record> records = {
      op,
      Make(Kind::kKernel, 0, 3, "conv2d_forward", 200, 400, /*bytes=*/96),
      Make(Kind::kCall, 0, 0, "synchronize_stream", 500, 800),
  };
  XSpaceBuilder space;
  AddDevicePlanes(records, 0, &space);
  const XPlaneBuilder& plane = space.planes()[0];
  ASSERT_EQ(plane.lines().size(), 3u);  // the stream, the op line, the round-trip line
  EXPECT_EQ(plane.lines()[0].name(), "Stream #3");
  EXPECT_EQ(plane.lines()[1].name(), kOpKernelsLineName);
  EXPECT_EQ(plane.lines()[2].name(), kRoundTripsLineName);

  const XEventRecord& kernel = plane.lines()[0].events()[0];
  EXPECT_EQ(StatString(plane, kernel, "params_bytes"), "96");
  EXPECT_EQ(StatString(plane, kernel, "bytes"), "");

  const XEventRecord& op_event = plane.lines()[1].events()[0];
  EXPECT_EQ(StatString(plane, op_event, "descriptor_calls_local"), "7");
  EXPECT_EQ(StatString(plane, op_event, "descriptor_calls_forwarded"), "1");
  EXPECT_EQ(StatString(plane, op_event, "round_trips"), "2");

  const XEventRecord& call = plane.lines()[2].events()[0];
  EXPECT_EQ(plane.EventName(call.metadata_id), "synchronize_stream");
  EXPECT_EQ(call.duration_ps, 300'000);
  EXPECT_EQ(StatString(plane, call, "tf_op"), "dense/MatMul:MatMul");
}

TEST(DevicePlanesTest, QueuedCommandsCarryTheirWaitAndBlockedStreamsHaveALineOfTheirOwn) {
  Record queued = Make(Kind::kKernel, 0, 1, "relu", 5000, 5200);
  queued.queued_ns = 4000;
  Record early = Make(Kind::kCopyToDevice, 0, 1, "", 6000, 6100, 64);
  early.queued_ns = 6500;  // clocks of two threads: never a negative wait
  Record wait = Make(Kind::kEventWait, 0, 2, "wait for stream 1", 3000, 4500);
  wait.op = activity::kNoName;
  const std::vector<Record> records = {queued, early, wait,
                                       Make(Kind::kKernel, 0, 1, "add", 7000, 7100)};
  XSpaceBuilder space;
  AddDevicePlanes(records, 0, &space);
  const XPlaneBuilder& plane = space.planes()[0];
  ASSERT_EQ(plane.lines().size(), 2u);
  EXPECT_EQ(plane.lines()[0].name(), "Stream #1");
  EXPECT_EQ(plane.lines()[1].name(), kEventWaitsLineName);

  const std::vector<XEventRecord>& stream = plane.lines()[0].events();
  ASSERT_EQ(stream.size(), 3u);
  EXPECT_EQ(StatString(plane, stream[0], "queue_wait_ns"), "1000");
  EXPECT_EQ(StatString(plane, stream[1], "queue_wait_ns"), "0");
  EXPECT_EQ(StatString(plane, stream[2], "queue_wait_ns"), "");  // not known

  const XEventRecord& blocked = plane.lines()[1].events()[0];
  EXPECT_EQ(plane.EventName(blocked.metadata_id), "wait for stream 1");
  EXPECT_EQ(blocked.duration_ps, 1'500'000);
  EXPECT_EQ(StatString(plane, blocked, "stream"), "2");
  EXPECT_EQ(StatString(plane, blocked, "tf_op"), "");  // no op's device time
}

TEST(DevicePlanesTest, DroppedRecordsAreAWarningAndNoRecordsNoPlanes) {
  XSpaceBuilder space;
  AddDevicePlanes({}, /*dropped=*/12, &space);
  EXPECT_TRUE(space.planes().empty());
  ASSERT_EQ(space.warnings().size(), 1u);
  EXPECT_NE(space.warnings()[0].find("12 device events"), std::string::npos);
}

TEST(DevicePlanesTest, AnEventEndingBeforeItStartsLastsNothing) {
  XSpaceBuilder space;
  AddDevicePlanes({Make(Kind::kMemset, 0, 1, "", 500, 400, 8)}, 0, &space);
  const XEventRecord& event = space.planes()[0].lines()[0].events()[0];
  EXPECT_EQ(event.duration_ps, 0);
  EXPECT_EQ(space.planes()[0].EventName(event.metadata_id), "Memset");
}

}  // namespace
}  // namespace vgpu::profiler
