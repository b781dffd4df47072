// Support for the tests that drive the plugin through TensorFlow's StreamExecutor C API tables
// without the TensorFlow runtime: the registered platform and its devices (built once per process,
// as TensorFlow does), a TF_Status wrapper, and a fixture that owns every stream, event, buffer,
// gate and host buffer a test creates and releases them in a safe order (open gates, drain
// streams, then free memory), so a failing assertion never leaves a stream writing into freed
// memory or held forever.
#ifndef VGPU_TESTS_CPP_SE_TEST_SUPPORT_H_
#define VGPU_TESTS_CPP_SE_TEST_SUPPORT_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "plugin/client/device_client.h"
#include "plugin/device/tf_status_bridge.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/protocol/kernels/activation.h"
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"
#include "tensorflow/c/tf_status.h"
#include "test_sync.h"

namespace vgpu_test {

// The configuration main() puts in the environment before the plugin reads it.
inline constexpr uint64_t kMemoryLimit = 64ull << 20;
inline constexpr int kDeviceCount = 2;

// An owned TF_Status (the plugin's ScopedTfStatus), with what assertions read of it.
class TfStatus {
 public:
  TF_Status* get() const { return status_.get(); }
  operator TF_Status*() const { return get(); }
  TF_Code code() const { return TF_GetCode(get()); }
  bool ok() const { return code() == TF_OK; }
  std::string message() const { return TF_Message(get()); }

 private:
  mutable vgpu::ScopedTfStatus status_;
};

// "OK" or "code N: message", for assertion output.
std::string Describe(const TfStatus& status);

#define EXPECT_TF_OK(status) EXPECT_TRUE((status).ok()) << ::vgpu_test::Describe(status)
#define ASSERT_TF_OK(status) ASSERT_TRUE((status).ok()) << ::vgpu_test::Describe(status)

// The platform as TensorFlow sees it after SE_InitPlugin, with every device created and its
// stream executor filled in. Built on first use; lives for the process (like the plugin).
struct RegisteredPlatform {
  SE_PlatformRegistrationParams params{};
  SP_Platform platform{};
  SP_PlatformFns platform_fns{};
  int device_count = 0;
  SP_Device devices[kDeviceCount]{};
  SP_StreamExecutor executors[kDeviceCount]{};

  static RegisteredPlatform& Get();
};

// A one-shot hold on a stream: a host callback that blocks until `release` opens. `reached`
// opens when the stream gets to it.
struct StreamHold {
  Gate reached;
  Gate release;
};

class StreamExecutorTest : public testing::Test {
 protected:
  void TearDown() override;

  const SP_Device* device(int ordinal = 0) const;
  const SP_StreamExecutor& se(int ordinal = 0) const;

  // Device memory freed by TearDown (or earlier by Free). Asserts nothing: a failed allocation
  // has opaque == nullptr.
  SP_DeviceMemoryBase Allocate(uint64_t size, int ordinal = 0);
  void Free(SP_DeviceMemoryBase* memory, int ordinal = 0);
  // Device memory like Allocate(size) that holds a copy of the `size` bytes at `data` (uploaded,
  // asserting success, when the allocation succeeded).
  SP_DeviceMemoryBase AllocateHolding(const void* data, uint64_t size, int ordinal = 0);
  // `size` bytes at `offset` inside `memory` (device addresses are linear within an allocation).
  static SP_DeviceMemoryBase Slice(const SP_DeviceMemoryBase& memory, uint64_t offset,
                                   uint64_t size);

  SP_Stream CreateStream(int ordinal = 0);
  SP_Event CreateEvent(int ordinal = 0);

  // Host memory that outlives every stream of the test (async copies may still target it).
  uint8_t* HostBytes(size_t size, uint8_t fill = 0);
  // What a copy test moves through the device: `data` (Pattern(size, seed)), host memory
  // `source` holding it and a zeroed host `result` of the same size, both like HostBytes().
  struct HostTransfer {
    std::vector<uint8_t> data;
    uint8_t* source;
    uint8_t* result;
  };
  HostTransfer PrepareTransfer(uint64_t size, uint8_t seed);
  // A HostTransfer and two device buffers of its size, `a` and `b`, to pass it through (like
  // Allocate's: a failed allocation has opaque == nullptr).
  struct DeviceRoundTrip : HostTransfer {
    SP_DeviceMemoryBase a;
    SP_DeviceMemoryBase b;
  };
  DeviceRoundTrip PrepareRoundTrip(uint64_t size, uint8_t seed);
  template <typename T>
  T* Host(size_t count) {
    return reinterpret_cast<T*>(HostBytes(count * sizeof(T)));
  }

  // Puts a host callback on `stream` that holds it until the returned hold's `release` opens.
  StreamHold* HoldStream(SP_Stream stream, int ordinal = 0);
  // Once the stream `hold` holds has reached it, expects `event` (recorded after the hold) to be
  // pending still, opens the hold and synchronises `stream`, asserting success.
  void ExpectPendingUntilReleased(StreamHold* hold, SP_Event event, SP_Stream stream,
                                  int ordinal = 0);

  // Synchronous helpers (sync_memcpy_*), asserting success.
  void Upload(const SP_DeviceMemoryBase& memory, const void* data, uint64_t size, int ordinal = 0);
  std::vector<uint8_t> Download(const SP_DeviceMemoryBase& memory, uint64_t size,
                                int ordinal = 0);

 private:
  struct OwnedStream {
    int ordinal;
    SP_Stream stream;
  };
  struct OwnedEvent {
    int ordinal;
    SP_Event event;
  };
  struct OwnedMemory {
    int ordinal;
    SP_DeviceMemoryBase memory;
  };
  std::vector<OwnedStream> streams_;
  std::vector<OwnedEvent> events_;
  std::vector<OwnedMemory> memory_;
  std::deque<std::vector<uint8_t>> host_buffers_;
  std::deque<std::unique_ptr<StreamHold>> holds_;
};

// The client runtime behind a device and a stream, for what the SE tables do not offer (kernel
// launches, counters): op kernels reach the device the same way, through TF_GetStream.
vgpu::DeviceClient& ClientOf(int ordinal);
vgpu::ClientStream& ClientStreamOf(SP_Stream stream);

// Launches Relu (activation::kForward, buffers [x, y]) or ReluGrad (activation::kBackward,
// buffers [dy, x, dx]) over `count` float32 elements, as an op kernel does: through the DNN API
// with an activation and a tensor descriptor.
absl::Status LaunchRelu(SP_Stream stream, vgpu::KernelId kernel,
                        absl::Span<const vgpu::BufferArg> buffers, uint64_t count);
// The BufferArg of a whole allocation.
vgpu::BufferArg Buffer(const SP_DeviceMemoryBase& memory);

// A byte pattern that differs from zero and from its neighbours.
std::vector<uint8_t> Pattern(size_t size, uint8_t seed);

}  // namespace vgpu_test

#endif  // VGPU_TESTS_CPP_SE_TEST_SUPPORT_H_
