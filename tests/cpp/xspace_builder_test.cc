// The XSpace builder's protobuf encoding (plugin/profiler/xspace_builder.h), against bytes that
// TensorFlow's own xplane_pb2 parses into the message this test builds (checked when the test
// was written: XSpace.ParseFromString(bytes) equals the message built field by field in Python),
// and the builder's bookkeeping: interned metadata ids, clamped offsets, line extents.
#include "plugin/profiler/xspace_builder.h"

#include <string>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace vgpu::profiler {
namespace {

std::string Hex(const std::string& bytes) { return absl::BytesToHexString(bytes); }

TEST(XSpaceBuilderTest, SerialisesPlanesLinesEventsStatsAndMetadataAsXplaneProto) {
  XSpaceBuilder space;
  XPlaneBuilder& plane = space.AddPlane(7, "/device:GPU:0");
  const int64_t relu = plane.EventMetadataId("relu");
  const int64_t memcpy = plane.EventMetadataId("memcpy");
  const int64_t bytes = plane.StatMetadataId("bytes");
  const int64_t ratio = plane.StatMetadataId("ratio");
  const int64_t op = plane.StatMetadataId("op");
  XLineBuilder& line = plane.AddLine(3, "stream 3", /*timestamp_ns=*/1000);
  XEventRecord& first = line.AddEvent(relu, /*start_ns=*/1000, /*duration_ps=*/4000);
  first.stats.push_back({bytes, uint64_t{300}});
  first.stats.push_back({op, std::string("dense/Relu")});
  XEventRecord& second = line.AddEvent(memcpy, /*start_ns=*/1005, /*duration_ps=*/4000);
  second.stats.push_back({ratio, 0.5});
  second.stats.push_back({bytes, int64_t{-2}});
  plane.AddStat({bytes, uint64_t{0}});
  space.AddWarning("w");

  EXPECT_EQ(Hex(space.Serialize()),
            "0abb010807120d2f6465766963653a4750553a301a5a0803120873747265616d203318e807221e08"
            "01100018a01f2205080118ac02220e08032a0a64656e73652f52656c752224080210882718a01f22"
            "0b080211000000000000e03f220d080120feffffffffffffffff0148a8465003220c080112080801"
            "120472656c75220e0802120a080212066d656d6370792a0d080112090801120562797465732a0d08"
            "02120908021205726174696f2a0a08031206080312026f703204080118001a0177");
}

TEST(XSpaceBuilderTest, MetadataIdsAreInternedPerPlaneFromOne) {
  XSpaceBuilder space;
  XPlaneBuilder& a = space.AddPlane(1, "a");
  XPlaneBuilder& b = space.AddPlane(2, "b");
  EXPECT_EQ(a.EventMetadataId("k"), 1);
  EXPECT_EQ(a.EventMetadataId("m"), 2);
  EXPECT_EQ(a.EventMetadataId("k"), 1);
  EXPECT_EQ(b.EventMetadataId("m"), 1);  // each plane has its own ids
  EXPECT_EQ(a.StatMetadataId("k"), 1);   // events and stats are named apart
}

TEST(XSpaceBuilderTest, AnEventBeforeItsLinesTimestampStartsAtTheLineAndNegativeDurationsAreZero) {
  XPlaneBuilder plane(1, "p");
  XLineBuilder& line = plane.AddLine(1, "l", /*timestamp_ns=*/500);
  EXPECT_EQ(line.AddEvent(1, /*start_ns=*/100, 2000).offset_ps, 0);
  EXPECT_EQ(line.AddEvent(1, /*start_ns=*/502, -5).duration_ps, 0);
  EXPECT_EQ(line.AddEvent(1, /*start_ns=*/502, 7).offset_ps, 2000);
  EXPECT_EQ(line.event_count(), 3u);
}

TEST(XSpaceBuilderTest, AnEmptySpaceSerialisesToNothing) {
  EXPECT_EQ(XSpaceBuilder().Serialize(), "");
}

}  // namespace
}  // namespace vgpu::profiler
