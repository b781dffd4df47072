// The command set that crosses the boundary between the client runtime and a backing executor
// (the "physical GPU"). The in-process backend executes these very structures; a remote
// transport serialises them. There is no other way to reach a backing executor, so every counter
// (commands, round trips, bytes) means the same thing in every mode.
//
// Asynchronous commands (IsAsynchronous) are queued on a stream and answered by nobody: their
// errors become the stream's first error, reported (once) at the stream's next synchronisation
// point; until then the stream skips data commands.
// The others are calls: the sender waits for a Reply (one round trip).
#ifndef VGPU_PROTOCOL_COMMAND_H_
#define VGPU_PROTOCOL_COMMAND_H_

#include <cstdint>
#include <memory>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/types/span.h"

namespace vgpu {

enum class CommandKind : uint16_t {
  // Calls (the sender waits for a Reply).
  kAllocate = 0,        // device, size -> Reply.value = device address
  kFree,                // device, dst = address
  kMemoryInfo,          // device -> Reply.memory
  kCreateStream,        // device, stream = client-chosen id
  kDestroyStream,       // stream (drains it first)
  kSynchronizeStream,   // stream -> Reply.status = the stream's first error (then cleared)
  kSynchronizeDevice,   // device -> first error of any of the device's streams (then cleared)
  kStreamStatus,        // stream -> its first error, without waiting
  kMemcpyNow,           // synchronous copy outside any stream: dst/src/size/host_src/host_dst
  // Forward-mode descriptor calls (classic API remoting; VGPU_DESCRIPTOR_MODE=forward): the
  // executor keeps its own descriptor objects, named by client-chosen ids (object).
  kDescriptorCreate,    // object = id, params = [uint8 kind]
  kDescriptorSet,       // object = id, params = settings bytes
  kDescriptorDestroy,   // object = id
  // Asynchronous, stream-ordered commands.
  kMemcpyHtoD,          // stream, dst, size, host_src
  kMemcpyDtoH,          // stream, src, size, host_dst
  kMemcpyDtoD,          // stream, dst, src, size (dst may live on another device)
  kMemset,              // stream, dst, size, pattern, pattern_bytes (1 or 4)
  kLaunch,              // stream, kernel, buffers, params
  kRecordEvent,         // stream, object = event id, token: notified when reached
  kWaitEvent,           // stream, object = event id: waits for its last recording
  kDestroyEvent,        // object = event id
  kNotify,              // stream, token: notified when reached (host callbacks, timers)
  kNumKinds
};

// Stable, human-readable command names, as shown in `vgpu.stats()`.
const char* CommandKindName(CommandKind kind);

// True for commands that are queued and never answered.
bool IsAsynchronous(CommandKind kind);

// A device memory range named by a launch; the backend validates and translates each one.
// Flag on a descriptor entry's kind byte: the entry is a uint64 id, not settings.
inline constexpr uint8_t kDescriptorReference = 0x80;

// The bytes a launch's descriptor section (Command::descriptors) holds once the executor has
// resolved its references: a kDescriptorReference entry is an 8-byte id on the wire and up to
// kMaxDescriptorSettingsSize bytes of settings after. A malformed section counts its own size
// (the executor refuses it). What a server charges a queued launch for its descriptors.
uint64_t ResolvedDescriptorBytes(absl::Span<const uint8_t> section);

struct BufferArg {
  uint64_t address = 0;
  uint64_t size = 0;
};

struct Command {
  CommandKind kind = CommandKind::kNumKinds;
  uint32_t device = 0;       // device index within the backing executor
  uint64_t stream = 0;       // stream id (client-chosen, unique per session)
  uint64_t object = 0;       // event id; kernel id for kLaunch
  uint64_t token = 0;        // notification token for kRecordEvent / kNotify
  uint64_t dst = 0;          // device address
  uint64_t src = 0;          // device address
  uint64_t size = 0;         // bytes
  uint32_t pattern = 0;      // kMemset
  uint8_t pattern_bytes = 0; // kMemset: 1 or 4
  // Host memory. In-process these are referenced directly; a remote transport copies host_src
  // into the frame and host_dst out of the reply. The caller keeps them valid until the command
  // completes (for async commands: until the stream reaches it).
  const void* host_src = nullptr;
  void* host_dst = nullptr;
  // Keeps host_src's bytes alive while the command waits in a stream (a decoded remote command
  // points into its frame); null in-process, where the caller keeps the memory valid.
  std::shared_ptr<const void> host_storage;
  absl::InlinedVector<BufferArg, 4> buffers;  // kLaunch
  absl::InlinedVector<uint8_t, 64> params;    // kLaunch: the kernel's parameter block
  // kLaunch: the settings of the descriptors the kernel uses, in the kernel's order:
  // uint8 count, then per descriptor uint8 kind, uint16 size (little-endian), settings bytes.
  // In forward mode an entry names an executor-side descriptor instead: kind | 0x80, size 8,
  // uint64 id (kDescriptorReference).
  absl::InlinedVector<uint8_t, 128> descriptors;
  // While a profile is taken (plugin/common/activity.h): the TensorFlow op that issued the
  // command and the TensorFlow device it was issued for, so that the executor's record of it
  // names them. Set by the client, read by an in-process session; never encoded. In a server,
  // `sequence` is set instead (the command's frame sequence, while its connection profiles):
  // the session reports the command's execution to its CompletionSink::OnExecuted.
  struct ActivityTag {
    bool recorded = false;  // record this command's execution
    uint32_t op = 0;        // activity::NameId of the op type
    uint32_t op_name = 0;   // activity::NameId of the node name
    uint32_t device = 0;    // the TensorFlow device ordinal
    uint64_t sequence = 0;  // a server's: report to the sink under this sequence
  } activity;
};

// Device memory accounting of one device, as the backing executor sees it.
struct MemoryInfo {
  uint64_t limit_bytes = 0;
  uint64_t bytes_in_use = 0;
  uint64_t peak_bytes_in_use = 0;
  uint64_t num_allocs = 0;
  uint64_t largest_alloc_size = 0;
  uint64_t largest_free_block = 0;
};

struct Reply {
  absl::Status status;
  uint64_t value = 0;
  MemoryInfo memory;
};

}  // namespace vgpu

#endif  // VGPU_PROTOCOL_COMMAND_H_
