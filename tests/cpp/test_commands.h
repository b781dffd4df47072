// Commands as the tests write them by hand: one builder per kind of command, taking the fields
// that kind reads; every field a builder does not name stays zero (Command's defaults).
#ifndef VGPU_TESTS_CPP_TEST_COMMANDS_H_
#define VGPU_TESTS_CPP_TEST_COMMANDS_H_

#include <cstdint>

#include "plugin/protocol/command.h"

namespace vgpu_test {

// A command of `kind` for `stream` of `device`, over `size` bytes.
inline vgpu::Command MakeCommand(vgpu::CommandKind kind, uint64_t stream = 0, uint64_t size = 0,
                                 uint32_t device = 0) {
  vgpu::Command command;
  command.kind = kind;
  command.device = device;
  command.stream = stream;
  command.size = size;
  return command;
}

// Copies `size` bytes from host `source` to device address `dst`: kMemcpyHtoD queued on
// `stream`, or kMemcpyNow (stream 0) at once.
inline vgpu::Command CopyIn(vgpu::CommandKind kind, uint64_t stream, uint64_t dst,
                            const void* source, uint64_t size, uint32_t device = 0) {
  vgpu::Command command = MakeCommand(kind, stream, size, device);
  command.dst = dst;
  command.host_src = source;
  return command;
}

// Copies `size` bytes from device address `src` to host `destination`: kMemcpyDtoH queued on
// `stream`, or kMemcpyNow (stream 0) at once.
inline vgpu::Command CopyOut(vgpu::CommandKind kind, uint64_t stream, uint64_t src,
                             void* destination, uint64_t size, uint32_t device = 0) {
  vgpu::Command command = MakeCommand(kind, stream, size, device);
  command.src = src;
  command.host_dst = destination;
  return command;
}

// Frees the allocation at device address `address`.
inline vgpu::Command FreeCommand(uint64_t address, uint32_t device = 0) {
  vgpu::Command command = MakeCommand(vgpu::CommandKind::kFree, 0, 0, device);
  command.dst = address;
  return command;
}

// Asks for a notification of `token` once `stream` reaches it.
inline vgpu::Command NotifyCommand(uint64_t stream, uint64_t token) {
  vgpu::Command command = MakeCommand(vgpu::CommandKind::kNotify, stream);
  command.token = token;
  return command;
}

// A kRecordEvent, kWaitEvent or kDestroyEvent of `event` on `stream` (0 for kDestroyEvent).
inline vgpu::Command EventCommand(vgpu::CommandKind kind, uint64_t stream, uint64_t event) {
  vgpu::Command command = MakeCommand(kind, stream);
  command.object = event;
  return command;
}

}  // namespace vgpu_test

#endif  // VGPU_TESTS_CPP_TEST_COMMANDS_H_
