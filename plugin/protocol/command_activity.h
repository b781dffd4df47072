// What the activity log (plugin/common/activity.h) records of a command the client tagged while a
// profile is taken: its kind of record, device, stream, issuing op and size. Shared by the
// in-process session (which times the command on its stream worker) and the socket transport
// (which joins a server's times with the commands it sent).
#ifndef VGPU_PROTOCOL_COMMAND_ACTIVITY_H_
#define VGPU_PROTOCOL_COMMAND_ACTIVITY_H_

#include <optional>

#include "plugin/common/activity.h"
#include "plugin/protocol/command.h"

namespace vgpu {

// The record kind of a command that moves or computes data (copies, memsets, launches);
// nullopt for the commands that are not recorded (calls, events, notifications, waits).
std::optional<activity::Kind> ActivityKindOf(CommandKind kind);

// The record of `command` (tagged: command.activity.recorded) without its times and, for a
// launch, without its kernel's name (the executor knows it); `bytes` is a copy's or memset's
// size, a launch's parameter block. nullopt for a command ActivityKindOf does not record.
std::optional<activity::Record> ActivityRecordOf(const Command& command);

}  // namespace vgpu

#endif  // VGPU_PROTOCOL_COMMAND_ACTIVITY_H_
