// Tests of kernel launches through the client runtime on a stream created by the SE tables (as op
// kernels launch them), against a host computation, and of the counters `vgpu.stats()` reports:
// commands by kind, round trips only where an answer is needed, bytes moved.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/device/plugin_runtime.h"
#include "se_test_support.h"

namespace vgpu_test {
namespace {

using vgpu::BufferArg;
using vgpu::CommandKind;
using vgpu::KernelId;

// Deterministic values in [-2, 2), with exact zeros sprinkled in.
std::vector<float> Features(size_t count, uint32_t seed) {
  std::vector<float> values(count);
  uint32_t state = seed;
  for (size_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    values[i] = (i % 17 == 0) ? 0.0f : static_cast<float>(state >> 8) / (1 << 24) * 4.0f - 2.0f;
  }
  return values;
}

class DeviceKernels : public StreamExecutorTest {
 protected:
  SP_DeviceMemoryBase UploadFloats(const std::vector<float>& values) {
    SP_DeviceMemoryBase memory = AllocateHolding(values.data(), values.size() * sizeof(float));
    EXPECT_NE(memory.opaque, nullptr);
    return memory;
  }
  std::vector<float> DownloadFloats(const SP_DeviceMemoryBase& memory, size_t count) {
    std::vector<uint8_t> bytes = Download(memory, count * sizeof(float));
    std::vector<float> values(count);
    std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
  }

  // Relu over elements 1..1001 of two buffers (addresses 4 bytes past a 256-byte boundary).
  // Returns 0 if the result matches the host, another number naming what went wrong.
  int ReluAtFloatOffset() {
    constexpr size_t kCount = 1001;
    const std::vector<float> input = Features(kCount + 1, 6);
    SP_DeviceMemoryBase in = UploadFloats(input);
    SP_DeviceMemoryBase out = Allocate((kCount + 1) * sizeof(float));
    if (in.opaque == nullptr || out.opaque == nullptr) return 1;
    SP_Stream stream = CreateStream();
    const BufferArg buffers[] = {
        {reinterpret_cast<uint64_t>(in.opaque) + sizeof(float), kCount * sizeof(float)},
        {reinterpret_cast<uint64_t>(out.opaque) + sizeof(float), kCount * sizeof(float)}};
    if (!LaunchRelu(stream, vgpu::activation::kForward, buffers, kCount).ok()) return 2;
    TfStatus status;
    se().block_host_until_done(device(), stream, status);
    if (!status.ok()) return 3;
    std::vector<float> result = DownloadFloats(out, kCount + 1);
    for (size_t i = 1; i <= kCount; ++i) {
      if (result[i] != std::max(input[i], 0.0f)) return 4;
    }
    return 0;
  }
};

TEST_F(DeviceKernels, ReluMatchesTheHostComputation) {
  for (size_t count : {size_t{1}, size_t{7}, size_t{1001}, size_t{100003}}) {
    SCOPED_TRACE(count);
    const std::vector<float> input = Features(count, 1);
    SP_DeviceMemoryBase in = UploadFloats(input);
    SP_DeviceMemoryBase out = Allocate(count * sizeof(float));
    ASSERT_TRUE(in.opaque && out.opaque);
    SP_Stream stream = CreateStream();
    const BufferArg buffers[] = {Buffer(in), Buffer(out)};
    ASSERT_TRUE(LaunchRelu(stream, vgpu::activation::kForward, buffers, count).ok());
    TfStatus status;
    se().block_host_until_done(device(), stream, status);
    ASSERT_TF_OK(status);
    std::vector<float> expected(count);
    for (size_t i = 0; i < count; ++i) expected[i] = std::max(input[i], 0.0f);
    EXPECT_EQ(DownloadFloats(out, count), expected);
  }
}

TEST_F(DeviceKernels, ReluGradMatchesTheHostComputation) {
  constexpr size_t kCount = 50021;
  const std::vector<float> gradients = Features(kCount, 2);
  const std::vector<float> features = Features(kCount, 3);
  SP_DeviceMemoryBase g = UploadFloats(gradients);
  SP_DeviceMemoryBase f = UploadFloats(features);
  SP_DeviceMemoryBase out = Allocate(kCount * sizeof(float));
  ASSERT_TRUE(g.opaque && f.opaque && out.opaque);
  SP_Stream stream = CreateStream();
  const BufferArg buffers[] = {Buffer(g), Buffer(f), Buffer(out)};
  ASSERT_TRUE(LaunchRelu(stream, vgpu::activation::kBackward, buffers, kCount).ok());
  TfStatus status;
  se().block_host_until_done(device(), stream, status);
  ASSERT_TF_OK(status);
  std::vector<float> expected(kCount);
  // TensorFlow's rule: the gradient passes where the feature is strictly positive.
  for (size_t i = 0; i < kCount; ++i) expected[i] = features[i] > 0.0f ? gradients[i] : 0.0f;
  EXPECT_EQ(DownloadFloats(out, kCount), expected);
}

TEST_F(DeviceKernels, KernelsRunInStreamOrderWithCopies) {
  // relu(x) then relu_grad(dy, relu(x)) on one stream, the second reading the first's output.
  constexpr size_t kCount = 4096;
  const std::vector<float> x = Features(kCount, 4);
  const std::vector<float> dy = Features(kCount, 5);
  SP_DeviceMemoryBase dx = Allocate(kCount * sizeof(float));
  SP_DeviceMemoryBase y = Allocate(kCount * sizeof(float));
  SP_DeviceMemoryBase x_dev = Allocate(kCount * sizeof(float));
  SP_DeviceMemoryBase dy_dev = Allocate(kCount * sizeof(float));
  ASSERT_TRUE(dx.opaque && y.opaque && x_dev.opaque && dy_dev.opaque);
  float* x_host = Host<float>(kCount);
  float* dy_host = Host<float>(kCount);
  float* dx_host = Host<float>(kCount);
  std::copy(x.begin(), x.end(), x_host);
  std::copy(dy.begin(), dy.end(), dy_host);
  SP_Stream stream = CreateStream();
  TfStatus status;
  se().memcpy_htod(device(), stream, &x_dev, x_host, kCount * sizeof(float), status);
  se().memcpy_htod(device(), stream, &dy_dev, dy_host, kCount * sizeof(float), status);
  const BufferArg relu[] = {Buffer(x_dev), Buffer(y)};
  ASSERT_TRUE(LaunchRelu(stream, vgpu::activation::kForward, relu, kCount).ok());
  const BufferArg grad[] = {Buffer(dy_dev), Buffer(y), Buffer(dx)};
  ASSERT_TRUE(LaunchRelu(stream, vgpu::activation::kBackward, grad, kCount).ok());
  se().memcpy_dtoh(device(), stream, dx_host, &dx, kCount * sizeof(float), status);
  se().block_host_until_done(device(), stream, status);
  ASSERT_TF_OK(status);
  for (size_t i = 0; i < kCount; ++i) {
    const float expected = std::max(x[i], 0.0f) > 0.0f ? dy[i] : 0.0f;
    ASSERT_EQ(dx_host[i], expected) << "element " << i;
  }
}

TEST_F(DeviceKernels, ZeroCountLaunchIsANoOp) {
  // Empty tensors: no memory at all.
  SP_Stream stream = CreateStream();
  const BufferArg empty[] = {{0, 0}, {0, 0}};
  ASSERT_TRUE(LaunchRelu(stream, vgpu::activation::kForward, empty, 0).ok());
  const BufferArg empty_grad[] = {{0, 0}, {0, 0}, {0, 0}};
  ASSERT_TRUE(LaunchRelu(stream, vgpu::activation::kBackward, empty_grad, 0).ok());
  // Real buffers with a count of zero: nothing is written.
  const std::vector<float> input(16, -1.0f);
  const std::vector<float> sentinel(16, 42.0f);
  SP_DeviceMemoryBase in = UploadFloats(input);
  SP_DeviceMemoryBase out = UploadFloats(sentinel);
  ASSERT_TRUE(in.opaque && out.opaque);
  const BufferArg buffers[] = {Buffer(in), Buffer(out)};
  ASSERT_TRUE(LaunchRelu(stream, vgpu::activation::kForward, buffers, 0).ok());
  TfStatus status;
  se().block_host_until_done(device(), stream, status);
  EXPECT_TF_OK(status);
  EXPECT_EQ(DownloadFloats(out, 16), sentinel);
}

TEST_F(DeviceKernels, LaunchWithTooSmallABufferFailsTheStream) {
  SP_DeviceMemoryBase in = Allocate(64 * sizeof(float));
  SP_DeviceMemoryBase out = Allocate(32 * sizeof(float));
  ASSERT_TRUE(in.opaque && out.opaque);
  SP_Stream stream = CreateStream();
  const BufferArg buffers[] = {Buffer(in), Buffer(out)};
  ASSERT_TRUE(LaunchRelu(stream, vgpu::activation::kForward, buffers, 64).ok());
  TfStatus status;
  se().block_host_until_done(device(), stream, status);
  EXPECT_EQ(status.code(), TF_INVALID_ARGUMENT) << Describe(status);
  EXPECT_NE(status.message().find("activation_forward"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("buffer 1"), std::string::npos) << status.message();
}

TEST_F(DeviceKernels, ReluAcceptsBuffersAtUnalignedOffsets) {
  // A launch may name a sub-buffer at any float offset (a slice of a larger tensor). Run it in a
  // child process: a misaligned vector load would kill the process instead of failing a check.
  EXPECT_EXIT(std::exit(ReluAtFloatOffset()), testing::ExitedWithCode(0), "");
}

// --- counters --------------------------------------------------------------------------------

using ClientCounters = StreamExecutorTest;

TEST_F(ClientCounters, PostedWorkCostsNoRoundTripAndSynchronisationCostsOne) {
  vgpu::ClientCounters& counters = ClientOf(0).counters();
  // A training step after warm-up: the launch's descriptor calls are answered locally.
  ClientOf(0).dnn().MarkStep();
  constexpr uint64_t kSize = 8192;
  SP_DeviceMemoryBase x = Allocate(kSize);
  ASSERT_NE(x.opaque, nullptr);
  uint8_t* host = HostBytes(kSize, 3);
  SP_Stream stream = CreateStream();
  SP_Event event = CreateEvent();
  TfStatus status;

  const uint64_t round_trips = counters.round_trips();
  const uint64_t htod = counters.commands(CommandKind::kMemcpyHtoD);
  const uint64_t dtoh = counters.commands(CommandKind::kMemcpyDtoH);
  const uint64_t memsets = counters.commands(CommandKind::kMemset);
  const uint64_t launches = counters.commands(CommandKind::kLaunch);
  const uint64_t records = counters.commands(CommandKind::kRecordEvent);
  const uint64_t notifies = counters.commands(CommandKind::kNotify);
  const uint64_t syncs = counters.commands(CommandKind::kSynchronizeStream);
  const uint64_t to_device = counters.bytes_to_device();
  const uint64_t from_device = counters.bytes_from_device();

  se().memcpy_htod(device(), stream, &x, host, kSize, status);
  se().memset(device(), stream, &x, 0, kSize, status);
  const BufferArg buffers[] = {Buffer(x), Buffer(x)};
  ASSERT_TRUE(LaunchRelu(stream, vgpu::activation::kForward, buffers, kSize / 4).ok());
  se().memcpy_dtoh(device(), stream, host, &x, 1000, status);
  se().record_event(device(), stream, event, status);
  ASSERT_TRUE(se().host_callback(device(), stream, [](void*, TF_Status*) {}, nullptr));
  se().get_event_status(device(), event);
  ASSERT_TF_OK(status);
  EXPECT_EQ(counters.round_trips(), round_trips) << "posted work or an event query waited";
  EXPECT_EQ(counters.commands(CommandKind::kMemcpyHtoD), htod + 1);
  EXPECT_EQ(counters.commands(CommandKind::kMemset), memsets + 1);
  EXPECT_EQ(counters.commands(CommandKind::kLaunch), launches + 1);
  EXPECT_EQ(counters.commands(CommandKind::kMemcpyDtoH), dtoh + 1);
  EXPECT_EQ(counters.commands(CommandKind::kRecordEvent), records + 1);
  EXPECT_EQ(counters.commands(CommandKind::kNotify), notifies + 1);
  EXPECT_EQ(counters.bytes_to_device(), to_device + kSize);
  EXPECT_EQ(counters.bytes_from_device(), from_device + 1000);

  se().block_host_until_done(device(), stream, status);
  ASSERT_TF_OK(status);
  EXPECT_EQ(counters.round_trips(), round_trips + 1);
  EXPECT_EQ(counters.commands(CommandKind::kSynchronizeStream), syncs + 1);
}

TEST_F(ClientCounters, CallsThatNeedAnAnswerAreRoundTrips) {
  vgpu::ClientCounters& counters = ClientOf(0).counters();
  const uint64_t round_trips = counters.round_trips();
  const uint64_t allocations = counters.commands(CommandKind::kAllocate);
  const int64_t in_use = counters.bytes_in_use();

  SP_DeviceMemoryBase x = Allocate(4096);
  ASSERT_NE(x.opaque, nullptr);
  EXPECT_EQ(counters.round_trips(), round_trips + 1);
  EXPECT_EQ(counters.commands(CommandKind::kAllocate), allocations + 1);
  EXPECT_EQ(counters.bytes_in_use(), in_use + 4096);

  std::vector<uint8_t> host(4096, 1);
  Upload(x, host.data(), host.size());  // a synchronous copy waits for its answer
  EXPECT_EQ(counters.round_trips(), round_trips + 2);
  SP_AllocatorStats stats{SP_ALLOCATORSTATS_STRUCT_SIZE};
  ASSERT_TRUE(se().get_allocator_stats(device(), &stats));
  EXPECT_EQ(counters.round_trips(), round_trips + 3);
  Free(&x);
  EXPECT_EQ(counters.round_trips(), round_trips + 4);
  EXPECT_EQ(counters.bytes_in_use(), in_use);
}

TEST_F(ClientCounters, EachDeviceCountsItsOwnCommands) {
  vgpu::ClientCounters& counters0 = ClientOf(0).counters();
  vgpu::ClientCounters& counters1 = ClientOf(1).counters();
  const uint64_t allocations0 = counters0.commands(CommandKind::kAllocate);
  const uint64_t allocations1 = counters1.commands(CommandKind::kAllocate);
  SP_DeviceMemoryBase x = Allocate(256, 1);
  ASSERT_NE(x.opaque, nullptr);
  EXPECT_EQ(counters0.commands(CommandKind::kAllocate), allocations0);
  EXPECT_EQ(counters1.commands(CommandKind::kAllocate), allocations1 + 1);
}

// The number after `"key": ` in the part of `json` that starts at `from`.
uint64_t JsonNumber(const std::string& json, const std::string& key, size_t from = 0) {
  const std::string needle = "\"" + key + "\": ";
  const size_t at = json.find(needle, from);
  EXPECT_NE(at, std::string::npos) << key << " missing in " << json;
  if (at == std::string::npos) return 0;
  return std::strtoull(json.c_str() + at + needle.size(), nullptr, 10);
}

TEST_F(ClientCounters, StatsJsonReportsEveryDevicesCounters) {
  RegisteredPlatform::Get();
  vgpu::PluginRuntime& runtime = vgpu::PluginRuntime::Get();
  SP_DeviceMemoryBase x = Allocate(4096, 1);
  ASSERT_NE(x.opaque, nullptr);
  uint8_t* host = HostBytes(4096, 1);
  SP_Stream stream = CreateStream(1);
  TfStatus status;
  se(1).memcpy_htod(device(1), stream, &x, host, 4096, status);
  se(1).block_host_until_done(device(1), stream, status);
  ASSERT_TF_OK(status);

  const std::string json = runtime.StatsJson();
  const size_t device1 = json.find("\"ordinal\": 1");
  ASSERT_NE(device1, std::string::npos) << json;
  EXPECT_NE(json.find("\"ordinal\": 0"), std::string::npos) << json;
  EXPECT_NE(json.find("\"backend\": \"inproc\""), std::string::npos) << json;
  vgpu::ClientCounters& counters = ClientOf(1).counters();
  EXPECT_EQ(JsonNumber(json, "memcpy_htod", device1), counters.commands(CommandKind::kMemcpyHtoD));
  EXPECT_EQ(JsonNumber(json, "round_trips", device1), counters.round_trips());
  EXPECT_EQ(JsonNumber(json, "bytes_to_device", device1), counters.bytes_to_device());
  EXPECT_GE(JsonNumber(json, "bytes_in_use", device1), 4096u);
}

TEST_F(ClientCounters, ResetZeroesCountersButKeepsMemoryInUse) {
  RegisteredPlatform::Get();
  SP_DeviceMemoryBase x = Allocate(8192);
  ASSERT_NE(x.opaque, nullptr);
  vgpu::ClientCounters& counters = ClientOf(0).counters();
  const int64_t in_use = counters.bytes_in_use();
  vgpu::PluginRuntime::Get().ResetStats();
  EXPECT_EQ(counters.round_trips(), 0u);
  EXPECT_EQ(counters.commands(CommandKind::kAllocate), 0u);
  EXPECT_EQ(counters.bytes_to_device(), 0u);
  EXPECT_EQ(counters.bytes_in_use(), in_use);
  EXPECT_GE(in_use, 8192);
}

}  // namespace
}  // namespace vgpu_test
