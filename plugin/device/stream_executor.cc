// SE_InitPlugin and every SP_StreamExecutor / SP_PlatformFns callback of TensorFlow's
// StreamExecutor C API. Each callback is a thin translation to the client runtime
// (client/device_client.h); statuses cross into TF_Status here and nowhere else.
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "plugin/common/log.h"
#include "plugin/device/plugin_runtime.h"
#include "plugin/device/platform_probe.h"
#include "plugin/device/platform_registration.h"
#include "plugin/device/se_handles.h"
#include "plugin/device/tf_status_bridge.h"

namespace vgpu {
namespace {

constexpr char kPlatformName[] = "VGPU";

// Set when this load of the plugin found "VGPU" already registered (the plugin was loaded
// twice). The duplicate registers an inert platform with no devices and no kernels.
bool duplicate_load = false;
std::string duplicate_name;

DeviceClient& ClientOf(const SP_Device* device) {
  return *static_cast<DeviceClient*>(device->device_handle);
}

ClientStream& StreamOf(SP_Stream stream) { return *stream->stream; }

// How much TensorFlow 2.21's PluggableDeviceFactory subtracts (MinSystemMemory) from a
// device's free memory, solved so that reported - reserve(reported) == limit.
uint64_t TensorFlowSystemReserve(uint64_t limit) {
  constexpr uint64_t kSmallReserve = 255ull << 20;  // when less than 2 GiB is available
  constexpr uint64_t kMinReserve = 300ull << 20;    // otherwise max(300 MiB, 6%)
  if (limit + kSmallReserve < (2ull << 30)) return kSmallReserve;
  if ((limit + kMinReserve) * 6 / 100 <= kMinReserve) return kMinReserve;
  return static_cast<uint64_t>(static_cast<double>(limit) / 0.94) + 1 - limit;
}

// --- memory -------------------------------------------------------------------------------

void Allocate(const SP_Device* device, uint64_t size, int64_t memory_space,
              SP_DeviceMemoryBase* mem) {
  mem->struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE;
  mem->opaque = nullptr;
  mem->size = 0;
  absl::StatusOr<uint64_t> address = ClientOf(device).Allocate(size);
  if (!address.ok()) {
    Log(LogLevel::kInfo, absl::StrCat("allocation of ", size, " bytes failed: ",
                                      address.status().message()));
    return;  // TensorFlow turns a null allocation into a ResourceExhausted (OOM) error
  }
  mem->opaque = reinterpret_cast<void*>(*address);
  mem->size = size;
}

void Deallocate(const SP_Device* device, SP_DeviceMemoryBase* memory) {
  if (memory == nullptr || memory->opaque == nullptr) return;
  absl::Status status = ClientOf(device).Free(DeviceAddress(memory), memory->size);
  if (!status.ok()) Log(LogLevel::kWarning, absl::StrCat("deallocate: ", status.message()));
  memory->opaque = nullptr;
}

void* HostMemoryAllocate(const SP_Device* device, uint64_t size) {
  const uint64_t rounded = (size + 63) / 64 * 64;
  return std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
}

void HostMemoryDeallocate(const SP_Device* device, void* mem) { std::free(mem); }

void* UnifiedMemoryAllocate(const SP_Device* device, uint64_t bytes) { return nullptr; }

void UnifiedMemoryDeallocate(const SP_Device* device, void* location) {}

TF_Bool GetAllocatorStats(const SP_Device* device, SP_AllocatorStats* stats) {
  absl::StatusOr<MemoryInfo> info = ClientOf(device).QueryMemory();
  if (!info.ok()) return false;
  stats->struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE;
  stats->num_allocs = static_cast<int64_t>(info->num_allocs);
  stats->bytes_in_use = static_cast<int64_t>(info->bytes_in_use);
  stats->peak_bytes_in_use = static_cast<int64_t>(info->peak_bytes_in_use);
  stats->largest_alloc_size = static_cast<int64_t>(info->largest_alloc_size);
  stats->has_bytes_limit = true;
  stats->bytes_limit = static_cast<int64_t>(info->limit_bytes);
  stats->bytes_reserved = 0;
  stats->peak_bytes_reserved = 0;
  stats->has_bytes_reservable_limit = false;
  stats->bytes_reservable_limit = 0;
  stats->largest_free_block_bytes = static_cast<int64_t>(info->largest_free_block);
  return true;
}

TF_Bool DeviceMemoryUsage(const SP_Device* device, int64_t* free, int64_t* total) {
  absl::StatusOr<MemoryInfo> info = ClientOf(device).QueryMemory();
  if (!info.ok()) return false;
  // TensorFlow's pluggable-device factory keeps back a "system memory" share of what a device
  // reports free (for a display, other processes...). Nothing else shares a virtual device, so
  // the share is added here: TensorFlow then uses exactly VGPU_MEMORY_LIMIT.
  const uint64_t headroom = TensorFlowSystemReserve(info->limit_bytes);
  *total = static_cast<int64_t>(info->limit_bytes + headroom);
  *free = static_cast<int64_t>(info->limit_bytes - info->bytes_in_use + headroom);
  return true;
}

// --- streams -----------------------------------------------------------------------------

void CreateStream(const SP_Device* device, SP_Stream* stream, TF_Status* status) {
  absl::StatusOr<std::unique_ptr<ClientStream>> created = ClientOf(device).CreateStream();
  if (!created.ok()) {
    *stream = nullptr;
    ToTfStatus(created.status(), status);
    return;
  }
  *stream = new SP_Stream_st{*std::move(created)};
  ToTfStatus(absl::OkStatus(), status);
}

void DestroyStream(const SP_Device* device, SP_Stream stream) {
  if (stream == nullptr) return;
  absl::Status status = ClientOf(device).DestroyStream(std::move(stream->stream));
  if (!status.ok()) Log(LogLevel::kWarning, absl::StrCat("destroy_stream: ", status.message()));
  delete stream;
}

void CreateStreamDependency(const SP_Device* device, SP_Stream dependent, SP_Stream other,
                            TF_Status* status) {
  ToTfStatus(ClientOf(device).CreateStreamDependency(StreamOf(dependent), StreamOf(other)),
             status);
}

void GetStreamStatus(const SP_Device* device, SP_Stream stream, TF_Status* status) {
  ToTfStatus(ClientOf(device).StreamStatus(StreamOf(stream)), status);
}

// --- events ------------------------------------------------------------------------------

void CreateEvent(const SP_Device* device, SP_Event* event, TF_Status* status) {
  DeviceClient& client = ClientOf(device);
  *event = new SP_Event_st{&client, client.CreateEvent()};
  ToTfStatus(absl::OkStatus(), status);
}

void DestroyEvent(const SP_Device* device, SP_Event event) {
  if (event == nullptr) return;
  absl::Status status = event->device->DestroyEvent(*event->event);
  if (!status.ok()) Log(LogLevel::kWarning, absl::StrCat("destroy_event: ", status.message()));
  delete event;
}

SE_EventStatus GetEventStatus(const SP_Device* device, SP_Event event) {
  switch (event->event->Query()) {
    case ClientEvent::State::kComplete: return SE_EVENT_COMPLETE;
    case ClientEvent::State::kPending: return SE_EVENT_PENDING;
  }
  return SE_EVENT_UNKNOWN;
}

void RecordEvent(const SP_Device* device, SP_Stream stream, SP_Event event, TF_Status* status) {
  ToTfStatus(ClientOf(device).RecordEvent(StreamOf(stream), event->event), status);
}

void WaitForEvent(const SP_Device* const device, SP_Stream stream, SP_Event event,
                  TF_Status* const status) {
  ToTfStatus(ClientOf(device).WaitForEvent(StreamOf(stream), *event->event), status);
}

void BlockHostForEvent(const SP_Device* device, SP_Event event, TF_Status* status) {
  ToTfStatus(event->event->Wait(), status);
}

// --- timers ------------------------------------------------------------------------------

void CreateTimer(const SP_Device* device, SP_Timer* timer, TF_Status* status) {
  *timer = new SP_Timer_st{std::make_shared<ClientTimer>()};
  ToTfStatus(absl::OkStatus(), status);
}

void DestroyTimer(const SP_Device* device, SP_Timer timer) { delete timer; }

void StartTimer(const SP_Device* device, SP_Stream stream, SP_Timer timer, TF_Status* status) {
  ToTfStatus(ClientOf(device).StartTimer(StreamOf(stream), timer->timer), status);
}

void StopTimer(const SP_Device* device, SP_Stream stream, SP_Timer timer, TF_Status* status) {
  ToTfStatus(ClientOf(device).StopTimer(StreamOf(stream), timer->timer), status);
}

uint64_t TimerNanoseconds(SP_Timer timer) { return timer->timer->ElapsedNanoseconds(); }

// --- copies, memsets, synchronisation ----------------------------------------------------

void MemcpyDtoH(const SP_Device* device, SP_Stream stream, void* host_dst,
                const SP_DeviceMemoryBase* device_src, uint64_t size, TF_Status* status) {
  ToTfStatus(ClientOf(device).CopyDeviceToHost(StreamOf(stream), host_dst,
                                               DeviceAddress(device_src), size),
             status);
}

void MemcpyHtoD(const SP_Device* device, SP_Stream stream, SP_DeviceMemoryBase* device_dst,
                const void* host_src, uint64_t size, TF_Status* status) {
  ToTfStatus(ClientOf(device).CopyHostToDevice(StreamOf(stream), DeviceAddress(device_dst),
                                               host_src, size),
             status);
}

void MemcpyDtoD(const SP_Device* device, SP_Stream stream, SP_DeviceMemoryBase* device_dst,
                const SP_DeviceMemoryBase* device_src, uint64_t size, TF_Status* status) {
  ToTfStatus(ClientOf(device).CopyDeviceToDevice(StreamOf(stream), DeviceAddress(device_dst),
                                                 DeviceAddress(device_src), size),
             status);
}

void SyncMemcpyDtoH(const SP_Device* device, void* host_dst,
                    const SP_DeviceMemoryBase* device_src, uint64_t size, TF_Status* status) {
  ToTfStatus(ClientOf(device).CopyNow(host_dst, 0, nullptr, DeviceAddress(device_src), size),
             status);
}

void SyncMemcpyHtoD(const SP_Device* device, SP_DeviceMemoryBase* device_dst,
                    const void* host_src, uint64_t size, TF_Status* status) {
  ToTfStatus(ClientOf(device).CopyNow(nullptr, DeviceAddress(device_dst), host_src, 0, size),
             status);
}

void SyncMemcpyDtoD(const SP_Device* device, SP_DeviceMemoryBase* device_dst,
                    const SP_DeviceMemoryBase* device_src, uint64_t size, TF_Status* status) {
  ToTfStatus(ClientOf(device).CopyNow(nullptr, DeviceAddress(device_dst), nullptr,
                                      DeviceAddress(device_src), size),
             status);
}

// TensorFlow reduces some synchronisation failures to "PluggableDevice SyncAll failed": the
// real reason is logged here so that it is never lost.
absl::Status LogIfFailed(absl::Status status) {
  if (!status.ok()) Log(LogLevel::kError, status.ToString());
  return status;
}

void BlockHostUntilDone(const SP_Device* device, SP_Stream stream, TF_Status* status) {
  ToTfStatus(LogIfFailed(ClientOf(device).SynchronizeStream(StreamOf(stream))), status);
}

void SynchronizeAllActivity(const SP_Device* device, TF_Status* status) {
  ToTfStatus(LogIfFailed(ClientOf(device).SynchronizeDevice()), status);
}

void MemZero(const SP_Device* device, SP_Stream stream, SP_DeviceMemoryBase* location,
             uint64_t size, TF_Status* status) {
  ToTfStatus(ClientOf(device).Memset(StreamOf(stream), DeviceAddress(location), 0, 1, size),
             status);
}

void Memset(const SP_Device* device, SP_Stream stream, SP_DeviceMemoryBase* location,
            uint8_t pattern, uint64_t size, TF_Status* status) {
  ToTfStatus(ClientOf(device).Memset(StreamOf(stream), DeviceAddress(location), pattern, 1, size),
             status);
}

void Memset32(const SP_Device* device, SP_Stream stream, SP_DeviceMemoryBase* location,
              uint32_t pattern, uint64_t size, TF_Status* status) {
  ToTfStatus(ClientOf(device).Memset(StreamOf(stream), DeviceAddress(location), pattern, 4, size),
             status);
}

TF_Bool HostCallback(const SP_Device* device, SP_Stream stream, SE_StatusCallbackFn callback_fn,
                     void* callback_arg) {
  absl::Status status = ClientOf(device).HostCallback(
      StreamOf(stream), [callback_fn, callback_arg](const absl::Status& stream_status) {
        TF_Status* tf_status = TF_NewStatus();
        ToTfStatus(stream_status, tf_status);
        callback_fn(callback_arg, tf_status);  // TensorFlow frees its context in here
        TF_DeleteStatus(tf_status);
      });
  if (!status.ok()) Log(LogLevel::kWarning, absl::StrCat("host_callback: ", status.message()));
  return status.ok();
}

// --- platform ----------------------------------------------------------------------------

void GetDeviceCount(const SP_Platform* platform, int* device_count, TF_Status* status) {
  // A duplicate load's inert platform has no devices; the real one keeps its own.
  const bool real = std::strcmp(platform->name, kPlatformName) == 0;
  *device_count = real ? PluginRuntime::Get().device_count() : 0;
  ToTfStatus(absl::OkStatus(), status);
}

void CreateDevice(const SP_Platform* platform, SE_CreateDeviceParams* params, TF_Status* status) {
  DeviceClient* client = PluginRuntime::Get().device(params->ordinal);
  if (client == nullptr) {
    ToTfStatus(absl::InvalidArgumentError(absl::StrCat("no virtual device ", params->ordinal)),
               status);
    return;
  }
  SP_Device* device = params->device;
  device->struct_size = SP_DEVICE_STRUCT_SIZE;
  device->ordinal = params->ordinal;
  device->device_handle = client;
  device->hardware_name = "vgpu virtual GPU";
  device->device_vendor = "tensorflow-vgpu";
  device->pci_bus_id = nullptr;
  ToTfStatus(absl::OkStatus(), status);
}

void DestroyDevice(const SP_Platform* platform, SP_Device* device) {
  device->device_handle = nullptr;
}

int32_t GetNumaNode(const SP_Device* device) { return -1; }

void CreateDeviceFns(const SP_Platform* platform, SE_CreateDeviceFnsParams* params,
                     TF_Status* status) {
  params->device_fns->struct_size = SP_DEVICE_FNS_STRUCT_SIZE;
  params->device_fns->get_numa_node = GetNumaNode;
  ToTfStatus(absl::OkStatus(), status);
}

void DestroyDeviceFns(const SP_Platform* platform, SP_DeviceFns* device_fns) {}

void CreateStreamExecutor(const SP_Platform* platform, SE_CreateStreamExecutorParams* params,
                          TF_Status* status) {
  SP_StreamExecutor* se = params->stream_executor;
  se->struct_size = SP_STREAMEXECUTOR_STRUCT_SIZE;
  se->allocate = Allocate;
  se->deallocate = Deallocate;
  se->host_memory_allocate = HostMemoryAllocate;
  se->host_memory_deallocate = HostMemoryDeallocate;
  se->unified_memory_allocate = UnifiedMemoryAllocate;
  se->unified_memory_deallocate = UnifiedMemoryDeallocate;
  se->get_allocator_stats = GetAllocatorStats;
  se->device_memory_usage = DeviceMemoryUsage;
  se->create_stream = CreateStream;
  se->destroy_stream = DestroyStream;
  se->create_stream_dependency = CreateStreamDependency;
  se->get_stream_status = GetStreamStatus;
  se->create_event = CreateEvent;
  se->destroy_event = DestroyEvent;
  se->get_event_status = GetEventStatus;
  se->record_event = RecordEvent;
  se->wait_for_event = WaitForEvent;
  se->create_timer = CreateTimer;
  se->destroy_timer = DestroyTimer;
  se->start_timer = StartTimer;
  se->stop_timer = StopTimer;
  se->memcpy_dtoh = MemcpyDtoH;
  se->memcpy_htod = MemcpyHtoD;
  se->memcpy_dtod = MemcpyDtoD;
  se->sync_memcpy_dtoh = SyncMemcpyDtoH;
  se->sync_memcpy_htod = SyncMemcpyHtoD;
  se->sync_memcpy_dtod = SyncMemcpyDtoD;
  se->block_host_for_event = BlockHostForEvent;
  se->block_host_until_done = BlockHostUntilDone;
  se->synchronize_all_activity = SynchronizeAllActivity;
  se->mem_zero = MemZero;
  se->memset = Memset;
  se->memset32 = Memset32;
  se->host_callback = HostCallback;
  ToTfStatus(absl::OkStatus(), status);
}

void DestroyStreamExecutor(const SP_Platform* platform, SP_StreamExecutor* stream_executor) {}

void CreateTimerFns(const SP_Platform* platform, SP_TimerFns* timer_fns, TF_Status* status) {
  timer_fns->struct_size = SP_TIMER_FNS_STRUCT_SIZE;
  timer_fns->nanoseconds = TimerNanoseconds;
  ToTfStatus(absl::OkStatus(), status);
}

void DestroyTimerFns(const SP_Platform* platform, SP_TimerFns* timer_fns) {}

void DestroyPlatform(SP_Platform* platform) {}

void DestroyPlatformFns(SP_PlatformFns* platform_fns) {}

}  // namespace

bool IsDuplicateLoad() { return duplicate_load; }

const char* RegisteredDeviceType() {
  return duplicate_load ? duplicate_name.c_str() : PluginRuntime::Get().device_type().c_str();
}

// Fills TensorFlow's registration tables. Used by SE_InitPlugin and by the C++ tests, which
// drive the stream executor through these tables without the TensorFlow runtime.
void FillPlatformRegistration(SE_PlatformRegistrationParams* params) {
  params->major_version = SE_MAJOR;
  params->minor_version = SE_MINOR;
  params->patch_version = SE_PATCH;
  SP_Platform* platform = params->platform;
  platform->struct_size = SP_PLATFORM_STRUCT_SIZE;
  if (!duplicate_load && IsPlatformRegistered(kPlatformName)) {
    // Names must be [A-Z_]+ and unique per load: VGPU_DUPLICATE_LOAD_A, _B, ...
    static int duplicates = 0;
    duplicate_load = true;
    duplicate_name = "VGPU_DUPLICATE_LOAD_";
    for (int n = duplicates++; ; n = n / 26 - 1) {
      duplicate_name += static_cast<char>('A' + n % 26);
      if (n < 26) break;
    }
    Log(LogLevel::kWarning,
        "the vgpu plugin was loaded twice (tensorflow-plugins/ and "
        "TF_PLUGGABLE_DEVICE_LIBRARY_PATH?); this second load is ignored");
  }
  if (duplicate_load) {
    platform->name = duplicate_name.c_str();
    platform->type = duplicate_name.c_str();
  } else {
    platform->name = kPlatformName;
    platform->type = PluginRuntime::Get().device_type().c_str();
  }
  platform->supports_unified_memory = false;
  platform->use_bfc_allocator = true;
  platform->force_memory_growth = true;

  SP_PlatformFns* fns = params->platform_fns;
  fns->struct_size = SP_PLATFORM_FNS_STRUCT_SIZE;
  fns->get_device_count = GetDeviceCount;
  fns->create_device = CreateDevice;
  fns->destroy_device = DestroyDevice;
  fns->create_device_fns = CreateDeviceFns;
  fns->destroy_device_fns = DestroyDeviceFns;
  fns->create_stream_executor = CreateStreamExecutor;
  fns->destroy_stream_executor = DestroyStreamExecutor;
  fns->create_timer_fns = CreateTimerFns;
  fns->destroy_timer_fns = DestroyTimerFns;
  params->destroy_platform = DestroyPlatform;
  params->destroy_platform_fns = DestroyPlatformFns;
}

}  // namespace vgpu

extern "C" {

// Entry point TensorFlow calls when it loads the plugin. Never reports an error: TensorFlow
// aborts the process on one, so a plugin that cannot serve offers zero devices instead.
void SE_InitPlugin(SE_PlatformRegistrationParams* params, TF_Status* status) {
  vgpu::FillPlatformRegistration(params);
  vgpu::ToTfStatus(absl::OkStatus(), status);
}

}  // extern "C"
