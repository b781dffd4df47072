// Names and classification of the commands, and the size of a resolved descriptor section
// (see command.h).
#include "plugin/protocol/command.h"

#include "plugin/protocol/descriptors.h"

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

uint64_t ResolvedDescriptorBytes(absl::Span<const uint8_t> section) {
  // uint8 count, then per entry: uint8 kind, uint16 size (little-endian), size bytes.
  if (section.empty()) return 0;
  const size_t count = section[0];
  size_t offset = 1;
  uint64_t resolved = 1;
  for (size_t i = 0; i < count; ++i) {
    if (section.size() - offset < 3) return section.size();
    const uint8_t kind = section[offset];
    const size_t size = section[offset + 1] | (static_cast<size_t>(section[offset + 2]) << 8);
    offset += 3;
    if (section.size() - offset < size) return section.size();
    offset += size;
    resolved += 3 + ((kind & kDescriptorReference) != 0 ? kMaxDescriptorSettingsSize : size);
  }
  return resolved;
}

}  // namespace vgpu
