// The CUDA executor's basics on a real GPU: memory round trips (host -> device -> host, device
// to device), both memset pattern sizes, stream-ordered frees (a block freed while queued work
// pins it returns only after SynchronizeStream), a launch of an unknown kernel, and the no-GPU
// path. On a machine without a usable GPU every test skips, naming why.
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "plugin/backend/backing_executor.h"
#include "plugin/backend/cuda/cuda_executor.h"
#include "plugin/backend/executor_registry.h"

namespace vgpu::cuda {
namespace {

constexpr uint64_t kOwner = 7;

// The executor, or the reason there is none (no GPU, or a GPU that cannot hold the memory).
struct ExecutorOrReason {
  std::unique_ptr<CudaExecutor> executor;
  absl::Status status;
};

ExecutorOrReason MakeExecutor() {
  ExecutorOptions options;
  options.memory_limit_per_device = 64ull << 20;
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor = CudaExecutor::Create(options);
  if (!executor.ok()) return {nullptr, executor.status()};
  return {*std::move(executor), absl::OkStatus()};
}

#define VGPU_SKIP_WITHOUT_GPU(made)                                                      \
  if ((made).executor == nullptr) {                                                      \
    ASSERT_EQ((made).status.code(), absl::StatusCode::kFailedPrecondition)               \
        << (made).status;                                                                \
    GTEST_SKIP() << "no usable GPU: " << (made).status.message();                       \
  }

class CudaExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    made_ = MakeExecutor();
    VGPU_SKIP_WITHOUT_GPU(made_);
    executor_ = made_.executor.get();
    absl::StatusOr<std::unique_ptr<ExecutorStream>> stream = executor_->CreateStream(0);
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = *std::move(stream);
  }
  void TearDown() override {
    if (executor_ != nullptr) {
      EXPECT_TRUE(executor_->SynchronizeStream(stream_.get()).ok());
      stream_.reset();
      executor_->arena(0).FreeAllOwnedBy(kOwner);
    }
  }

  // An allocation of `size` bytes: its tagged address and its device pointer.
  std::pair<uint64_t, uint8_t*> Allocate(uint64_t size) {
    absl::StatusOr<uint64_t> address = executor_->arena(0).Allocate(size, kOwner);
    EXPECT_TRUE(address.ok()) << address.status();
    absl::StatusOr<uint8_t*> device = executor_->arena(0).Translate(*address, size, kOwner);
    EXPECT_TRUE(device.ok()) << device.status();
    return {*address, *device};
  }

  PinnedRanges Pins(std::initializer_list<std::pair<uint64_t, uint64_t>> ranges) {
    PinnedRanges pins;
    for (auto [address, size] : ranges) {
      absl::StatusOr<DeviceArena::Pin> pin = executor_->arena(0).PinRange(address, size, kOwner);
      EXPECT_TRUE(pin.ok()) << pin.status();
      pins.push_back(*std::move(pin));
    }
    return pins;
  }

  absl::Status Copy(CommandKind kind, const uint8_t* source, bool source_on_device,
                    uint8_t* destination, bool destination_on_device, uint64_t size,
                    PinnedRanges pins = {}, bool now = false) {
    CopyRequest request;
    request.kind = kind;
    request.source = source;
    request.destination = destination;
    request.source_on_device = source_on_device;
    request.destination_on_device = destination_on_device;
    request.size = size;
    return executor_->Copy(now ? nullptr : stream_.get(), 1, request, pins);
  }

  ExecutorOrReason made_;
  CudaExecutor* executor_ = nullptr;
  std::unique_ptr<ExecutorStream> stream_;
};

TEST(CudaExecutorNoGpuTest, CreateFailsWithFailedPreconditionNamingCudaOrSucceeds) {
  ExecutorOrReason made = MakeExecutor();
  if (made.executor != nullptr) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_EQ(made.status.code(), absl::StatusCode::kFailedPrecondition) << made.status;
  EXPECT_NE(std::string(made.status.message()).find("CUDA"), std::string::npos) << made.status;
  EXPECT_NE(std::string(made.status.message()).find("cudaGetDeviceCount"), std::string::npos);
}

TEST(CudaExecutorRegistryTest, RegisteredAsCuda) {
  bool found = false;
  for (const ExecutorRegistration& r : RegisteredExecutors()) found |= r.name == "cuda";
  EXPECT_TRUE(found) << RegisteredExecutorNames();
}

TEST_F(CudaExecutorTest, HostToDeviceToHostRoundTripAcrossStagingChunks) {
  // Larger than two staging chunks, not a multiple of one.
  const uint64_t size = (9ull << 20) + 123;
  std::vector<uint8_t> input(size), output(size, 0);
  std::iota(input.begin(), input.end(), uint8_t{1});
  auto [address, device] = Allocate(size);
  ASSERT_TRUE(Copy(CommandKind::kMemcpyHtoD, input.data(), false, device, true, size,
                   Pins({{address, size}})).ok());
  ASSERT_TRUE(Copy(CommandKind::kMemcpyDtoH, device, true, output.data(), false, size,
                   Pins({{address, size}})).ok());
  EXPECT_EQ(input, output);
}

TEST_F(CudaExecutorTest, DeviceToDeviceAndSynchronousCopies) {
  const uint64_t size = 4096 + 17;
  std::vector<uint8_t> input(size), output(size, 0);
  for (uint64_t i = 0; i < size; ++i) input[i] = static_cast<uint8_t>(i * 7 + 3);
  auto [a, device_a] = Allocate(size);
  auto [b, device_b] = Allocate(size);
  ASSERT_TRUE(Copy(CommandKind::kMemcpyNow, input.data(), false, device_a, true, size, {}, true).ok());
  ASSERT_TRUE(Copy(CommandKind::kMemcpyDtoD, device_a, true, device_b, true, size,
                   Pins({{a, size}, {b, size}})).ok());
  ASSERT_TRUE(executor_->SynchronizeStream(stream_.get()).ok());
  ASSERT_TRUE(Copy(CommandKind::kMemcpyNow, device_b, true, output.data(), false, size, {}, true).ok());
  EXPECT_EQ(input, output);
}

TEST_F(CudaExecutorTest, MemsetOneAndFourBytePatterns) {
  const uint64_t size = 1024;
  auto [address, device] = Allocate(size + 8);
  std::vector<uint8_t> output(size + 8);
  MemsetRequest bytes{0, device, size + 8, 0xAB, 1};
  PinnedRanges pins = Pins({{address, size + 8}});
  ASSERT_TRUE(executor_->Memset(stream_.get(), 1, bytes, pins).ok());
  // A 4-byte pattern at an aligned and at a misaligned destination.
  for (uint64_t offset : {uint64_t{0}, uint64_t{3}}) {
    MemsetRequest words{0, device + offset, size, 0x11223344u, 4};
    PinnedRanges word_pins = Pins({{address, size + 8}});
    ASSERT_TRUE(executor_->Memset(stream_.get(), 1, words, word_pins).ok());
    ASSERT_TRUE(Copy(CommandKind::kMemcpyDtoH, device, true, output.data(), false, size + 8).ok());
    for (uint64_t i = 0; i < offset; ++i) EXPECT_EQ(output[i], 0xAB) << i;
    for (uint64_t i = 0; i < size; ++i) {
      uint32_t pattern = 0x11223344u;
      uint8_t expected;
      std::memcpy(&expected, reinterpret_cast<uint8_t*>(&pattern) + i % 4, 1);
      ASSERT_EQ(output[offset + i], expected) << "offset " << offset << " byte " << i;
    }
    for (uint64_t i = offset + size; i < size + 8; ++i) EXPECT_EQ(output[i], 0xAB) << i;
    bytes.size = size + 8;
    PinnedRanges again = Pins({{address, size + 8}});
    ASSERT_TRUE(executor_->Memset(stream_.get(), 1, bytes, again).ok());
  }
}

TEST_F(CudaExecutorTest, FreedBlockReturnsOnlyAfterStreamSynchronize) {
  const uint64_t size = 8ull << 20;
  auto [address, device] = Allocate(size);
  MemsetRequest fill{0, device, size, 0x5A, 1};
  PinnedRanges pins = Pins({{address, size}});
  ASSERT_TRUE(executor_->Memset(stream_.get(), 1, fill, pins).ok());
  EXPECT_TRUE(pins.empty()) << "the executor keeps the pins of queued work";
  ASSERT_TRUE(executor_->arena(0).Free(address, kOwner).ok());
  // The block may still be pinned by the (possibly finished) memset; after the synchronisation
  // it must be back and scrubbed.
  ASSERT_TRUE(executor_->SynchronizeStream(stream_.get()).ok());
  EXPECT_EQ(executor_->arena(0).UsageOf(kOwner).pending_free, 0u);
  EXPECT_EQ(executor_->arena(0).UsageOf(kOwner).charged, 0u);
  // And it reads as zeros when handed out again.
  auto [again, device_again] = Allocate(size);
  std::vector<uint8_t> output(4096, 1);
  ASSERT_TRUE(Copy(CommandKind::kMemcpyDtoH, device_again, true, output.data(), false,
                   output.size()).ok());
  EXPECT_EQ(output, std::vector<uint8_t>(output.size(), 0));
}

TEST_F(CudaExecutorTest, UnknownKernelIdIsInvalidArgument) {
  LaunchRequest launch;
  launch.kernel_id = 0xFFFFFFF0u;
  PinnedRanges pins;
  absl::Status status = executor_->Launch(stream_.get(), 1, launch, pins);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(executor_->KernelName(launch.kernel_id).empty());
  EXPECT_EQ(executor_->stats().launches, 1u);
}

TEST_F(CudaExecutorTest, StatsCountCopiesAndMemsets) {
  auto [address, device] = Allocate(256);
  std::vector<uint8_t> host(256, 9);
  ASSERT_TRUE(Copy(CommandKind::kMemcpyHtoD, host.data(), false, device, true, 256).ok());
  MemsetRequest fill{0, device, 256, 0, 1};
  PinnedRanges pins;
  ASSERT_TRUE(executor_->Memset(stream_.get(), 1, fill, pins).ok());
  const ExecutorStats stats = executor_->stats();
  EXPECT_EQ(stats.copies, 1u);
  EXPECT_EQ(stats.bytes_copied, 256u);
  EXPECT_EQ(stats.memsets, 1u);
}

}  // namespace
}  // namespace vgpu::cuda
