// Names and classification of the commands (see command.h).
#include "plugin/protocol/command.h"

namespace vgpu {

const char* CommandKindName(CommandKind kind) {
  switch (kind) {
    case CommandKind::kAllocate: return "allocate";
    case CommandKind::kFree: return "free";
    case CommandKind::kMemoryInfo: return "memory_info";
    case CommandKind::kCreateStream: return "create_stream";
    case CommandKind::kDestroyStream: return "destroy_stream";
    case CommandKind::kSynchronizeStream: return "synchronize_stream";
    case CommandKind::kSynchronizeDevice: return "synchronize_device";
    case CommandKind::kStreamStatus: return "stream_status";
    case CommandKind::kMemcpyNow: return "memcpy_sync";
    case CommandKind::kDescriptorCreate: return "descriptor_create";
    case CommandKind::kDescriptorSet: return "descriptor_set";
    case CommandKind::kDescriptorDestroy: return "descriptor_destroy";
    case CommandKind::kMemcpyHtoD: return "memcpy_htod";
    case CommandKind::kMemcpyDtoH: return "memcpy_dtoh";
    case CommandKind::kMemcpyDtoD: return "memcpy_dtod";
    case CommandKind::kMemset: return "memset";
    case CommandKind::kLaunch: return "launch";
    case CommandKind::kRecordEvent: return "record_event";
    case CommandKind::kWaitEvent: return "wait_event";
    case CommandKind::kDestroyEvent: return "destroy_event";
    case CommandKind::kNotify: return "notify";
    case CommandKind::kNumKinds: break;
  }
  return "unknown";
}

bool IsAsynchronous(CommandKind kind) {
  switch (kind) {
    case CommandKind::kMemcpyHtoD:
    case CommandKind::kMemcpyDtoH:
    case CommandKind::kMemcpyDtoD:
    case CommandKind::kMemset:
    case CommandKind::kLaunch:
    case CommandKind::kRecordEvent:
    case CommandKind::kWaitEvent:
    case CommandKind::kDestroyEvent:
    case CommandKind::kNotify:
      return true;
    default:
      return false;
  }
}

}  // namespace vgpu
