// The registered platform and the StreamExecutor test fixture (see se_test_support.h).
#include "se_test_support.h"

#include <algorithm>

#include "plugin/device/platform_registration.h"
#include "plugin/device/plugin_runtime.h"
#include "plugin/device/se_handles.h"

namespace vgpu_test {

std::string Describe(const TfStatus& status) {
  if (status.ok()) return "OK";
  return "code " + std::to_string(static_cast<int>(status.code())) + ": " + status.message();
}

RegisteredPlatform& RegisteredPlatform::Get() {
  static RegisteredPlatform* registered = [] {
    auto* r = new RegisteredPlatform();
    // What TensorFlow does in InitStreamExecutorPlugin: zeroed structs with their struct_size.
    r->params.struct_size = SE_PLATFORM_REGISTRATION_PARAMS_STRUCT_SIZE;
    r->platform.struct_size = SP_PLATFORM_STRUCT_SIZE;
    r->platform_fns.struct_size = SP_PLATFORM_FNS_STRUCT_SIZE;
    r->params.platform = &r->platform;
    r->params.platform_fns = &r->platform_fns;
    vgpu::FillPlatformRegistration(&r->params);

    TfStatus status;
    r->platform_fns.get_device_count(&r->platform, &r->device_count, status);
    EXPECT_TF_OK(status);
    for (int i = 0; i < std::min(r->device_count, kDeviceCount); ++i) {
      r->devices[i].struct_size = SP_DEVICE_STRUCT_SIZE;
      SE_CreateDeviceParams device_params{SE_CREATE_DEVICE_PARAMS_STRUCT_SIZE};
      device_params.ordinal = i;
      device_params.device = &r->devices[i];
      r->platform_fns.create_device(&r->platform, &device_params, status);
      EXPECT_TF_OK(status);
      r->executors[i].struct_size = SP_STREAMEXECUTOR_STRUCT_SIZE;
      SE_CreateStreamExecutorParams se_params{SE_CREATE_STREAM_EXECUTOR_PARAMS_STRUCT_SIZE};
      se_params.stream_executor = &r->executors[i];
      r->platform_fns.create_stream_executor(&r->platform, &se_params, status);
      EXPECT_TF_OK(status);
    }
    return r;
  }();
  return *registered;
}

vgpu::DeviceClient& ClientOf(int ordinal) {
  RegisteredPlatform::Get();
  return *vgpu::PluginRuntime::Get().device(ordinal);
}

vgpu::ClientStream& ClientStreamOf(SP_Stream stream) { return *stream->stream; }

absl::Status LaunchRelu(SP_Stream stream, vgpu::KernelId kernel,
                        absl::Span<const vgpu::BufferArg> buffers, uint64_t count) {
  vgpu::ClientStream& client_stream = ClientStreamOf(stream);
  vgpu::DnnApi& dnn = client_stream.device().dnn();
  vgpu::ActivationDescriptorSettings activation;
  activation.mode = vgpu::ActivationMode::kRelu;
  vgpu::TensorDescriptorSettings tensor;
  tensor.rank = 1;
  tensor.dims[0] = static_cast<int64_t>(count);
  absl::StatusOr<vgpu::ScopedDescriptor> a = vgpu::ScopedDescriptor::Make(dnn, client_stream, activation);
  if (!a.ok()) return a.status();
  absl::StatusOr<vgpu::ScopedDescriptor> t = vgpu::ScopedDescriptor::Make(dnn, client_stream, tensor);
  if (!t.ok()) return t.status();
  vgpu::Descriptor* descriptors[] = {a->get(), t->get()};
  return dnn.Launch(client_stream, kernel, descriptors, buffers, {});
}

vgpu::BufferArg Buffer(const SP_DeviceMemoryBase& memory) {
  return {reinterpret_cast<uint64_t>(memory.opaque), memory.size};
}

std::vector<uint8_t> Pattern(size_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  return bytes;
}

void StreamExecutorTest::TearDown() {
  for (auto& hold : holds_) hold->release.Open();  // never leave a stream held
  for (OwnedEvent& e : events_) se(e.ordinal).destroy_event(device(e.ordinal), e.event);
  events_.clear();
  for (OwnedStream& s : streams_) se(s.ordinal).destroy_stream(device(s.ordinal), s.stream);
  streams_.clear();  // drained: nothing writes into host or device memory any more
  for (OwnedMemory& m : memory_) se(m.ordinal).deallocate(device(m.ordinal), &m.memory);
  memory_.clear();
}

const SP_Device* StreamExecutorTest::device(int ordinal) const {
  return &RegisteredPlatform::Get().devices[ordinal];
}

const SP_StreamExecutor& StreamExecutorTest::se(int ordinal) const {
  return RegisteredPlatform::Get().executors[ordinal];
}

SP_DeviceMemoryBase StreamExecutorTest::Allocate(uint64_t size, int ordinal) {
  SP_DeviceMemoryBase memory{SP_DEVICE_MEMORY_BASE_STRUCT_SIZE};
  se(ordinal).allocate(device(ordinal), size, /*memory_space=*/0, &memory);
  if (memory.opaque != nullptr) memory_.push_back({ordinal, memory});
  return memory;
}

void StreamExecutorTest::Free(SP_DeviceMemoryBase* memory, int ordinal) {
  auto it = std::find_if(memory_.begin(), memory_.end(), [&](const OwnedMemory& m) {
    return m.ordinal == ordinal && m.memory.opaque == memory->opaque;
  });
  ASSERT_NE(it, memory_.end()) << "not allocated by this test";
  se(ordinal).deallocate(device(ordinal), memory);
  memory_.erase(it);
}

SP_DeviceMemoryBase StreamExecutorTest::AllocateHolding(const void* data, uint64_t size,
                                                        int ordinal) {
  SP_DeviceMemoryBase memory = Allocate(size, ordinal);
  if (memory.opaque != nullptr) Upload(memory, data, size, ordinal);
  return memory;
}

SP_DeviceMemoryBase StreamExecutorTest::Slice(const SP_DeviceMemoryBase& memory, uint64_t offset,
                                              uint64_t size) {
  SP_DeviceMemoryBase slice = memory;
  slice.opaque = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(memory.opaque) + offset);
  slice.size = size;
  return slice;
}

namespace {

// Calls `create(&handle, status)` (an SE create_stream or create_event) and expects it to
// succeed with a handle; returns the handle, null if it failed.
template <typename Handle, typename CreateFn>
Handle CreateExpectingSuccess(CreateFn create) {
  Handle handle = nullptr;
  TfStatus status;
  create(&handle, status.get());
  EXPECT_TF_OK(status);
  EXPECT_NE(handle, nullptr);
  return handle;
}

}  // namespace

SP_Stream StreamExecutorTest::CreateStream(int ordinal) {
  SP_Stream stream = CreateExpectingSuccess<SP_Stream>([&](SP_Stream* out, TF_Status* status) {
    se(ordinal).create_stream(device(ordinal), out, status);
  });
  if (stream != nullptr) streams_.push_back({ordinal, stream});
  return stream;
}

SP_Event StreamExecutorTest::CreateEvent(int ordinal) {
  SP_Event event = CreateExpectingSuccess<SP_Event>([&](SP_Event* out, TF_Status* status) {
    se(ordinal).create_event(device(ordinal), out, status);
  });
  if (event != nullptr) events_.push_back({ordinal, event});
  return event;
}

uint8_t* StreamExecutorTest::HostBytes(size_t size, uint8_t fill) {
  host_buffers_.emplace_back(size, fill);
  return host_buffers_.back().data();
}

StreamExecutorTest::HostTransfer StreamExecutorTest::PrepareTransfer(uint64_t size,
                                                                     uint8_t seed) {
  HostTransfer transfer{Pattern(size, seed), nullptr, nullptr};
  host_buffers_.push_back(transfer.data);
  transfer.source = host_buffers_.back().data();
  transfer.result = HostBytes(size, 0);
  return transfer;
}

StreamExecutorTest::DeviceRoundTrip StreamExecutorTest::PrepareRoundTrip(uint64_t size,
                                                                         uint8_t seed) {
  return DeviceRoundTrip{PrepareTransfer(size, seed), Allocate(size), Allocate(size)};
}

namespace {

void HoldCallback(void* arg, TF_Status* status) {
  auto* hold = static_cast<StreamHold*>(arg);
  hold->reached.Open();
  hold->release.Wait();
}

}  // namespace

StreamHold* StreamExecutorTest::HoldStream(SP_Stream stream, int ordinal) {
  holds_.push_back(std::make_unique<StreamHold>());
  StreamHold* hold = holds_.back().get();
  EXPECT_TRUE(se(ordinal).host_callback(device(ordinal), stream, HoldCallback, hold));
  return hold;
}

void StreamExecutorTest::ExpectPendingUntilReleased(StreamHold* hold, SP_Event event,
                                                    SP_Stream stream, int ordinal) {
  hold->reached.Wait();
  EXPECT_EQ(se(ordinal).get_event_status(device(ordinal), event), SE_EVENT_PENDING);
  hold->release.Open();
  TfStatus status;
  se(ordinal).block_host_until_done(device(ordinal), stream, status);
  ASSERT_TF_OK(status);
}

void StreamExecutorTest::Upload(const SP_DeviceMemoryBase& memory, const void* data,
                                uint64_t size, int ordinal) {
  SP_DeviceMemoryBase destination = memory;
  TfStatus status;
  se(ordinal).sync_memcpy_htod(device(ordinal), &destination, data, size, status);
  ASSERT_TF_OK(status);
}

std::vector<uint8_t> StreamExecutorTest::Download(const SP_DeviceMemoryBase& memory,
                                                  uint64_t size, int ordinal) {
  std::vector<uint8_t> bytes(size, 0xCD);
  TfStatus status;
  se(ordinal).sync_memcpy_dtoh(device(ordinal), bytes.data(), &memory, size, status);
  EXPECT_TF_OK(status);
  return bytes;
}

}  // namespace vgpu_test
