// What the activity log records of a command (see command_activity.h).
#include "plugin/protocol/command_activity.h"

namespace vgpu {

std::optional<activity::Kind> ActivityKindOf(CommandKind kind) {
  switch (kind) {
    case CommandKind::kMemcpyHtoD:
      return activity::Kind::kCopyToDevice;
    case CommandKind::kMemcpyDtoH:
      return activity::Kind::kCopyToHost;
    case CommandKind::kMemcpyDtoD:
      return activity::Kind::kCopyOnDevice;
    case CommandKind::kMemset:
      return activity::Kind::kMemset;
    case CommandKind::kLaunch:
      return activity::Kind::kKernel;
    default:
      return std::nullopt;
  }
}

std::optional<activity::Record> ActivityRecordOf(const Command& command) {
  const std::optional<activity::Kind> kind = ActivityKindOf(command.kind);
  if (!kind.has_value()) return std::nullopt;
  activity::Record record;
  record.kind = *kind;
  record.device = command.activity.device;
  record.stream = command.stream;
  record.op = command.activity.op;
  record.op_name = command.activity.op_name;
  record.bytes = command.kind == CommandKind::kLaunch ? command.params.size() : command.size;
  return record;
}

}  // namespace vgpu
