// The interface every backing executor (the "physical GPU") offers one client: a session that
// handles the commands of protocol/command.h. The in-process backend implements it directly; the
// `vgpu server` hosts the same implementation behind a transport.
#ifndef VGPU_BACKEND_EXECUTOR_SESSION_H_
#define VGPU_BACKEND_EXECUTOR_SESSION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "plugin/protocol/command.h"

namespace vgpu {

// Receives the notifications a session emits when a stream reaches a kNotify or kRecordEvent
// command. Called on backend threads, in stream order for each stream; must not block for long
// and must not call back into the session synchronously on the same stream.
class CompletionSink {
 public:
  virtual ~CompletionSink() = default;
  // `stream_status` is the stream's first error so far (OK if none).
  virtual void OnNotify(uint64_t token, const absl::Status& stream_status) = 0;
  // A command tagged with Command::activity.sequence (a copy, memset or launch) ran on its
  // stream's worker from `start_ns` to `end_ns` (activity::NowNs clock); `kernel_name` is a
  // launch's kernel (empty otherwise). Called on the stream worker; must not block.
  virtual void OnExecuted(uint64_t /*sequence*/, int64_t /*start_ns*/, int64_t /*end_ns*/,
                          absl::string_view /*kernel_name*/) {}
};

// What one session has done so far, for a server's statistics and metrics. Monotonic.
struct SessionStats {
  uint64_t launches = 0;        // kernel launches run
  uint64_t kernel_ns = 0;       // time the executor spent in them (wall clock on the worker)
  uint64_t errors = 0;          // refused commands and failed stream work
  uint64_t streams = 0;         // streams open now
  uint64_t queued = 0;          // commands queued on them, not yet run
};

// One client's view of a backing executor. Thread-safe. Asynchronous commands (IsAsynchronous)
// are queued and Handle returns an OK Reply at once; calls block until answered. Destroying the
// session drains its streams and releases all memory it allocated.
class ExecutorSession {
 public:
  virtual ~ExecutorSession() = default;
  virtual Reply Handle(Command command) = 0;
  // How many stream queue entries Handle(command) would add at most, were it called now: 1,
  // except for a wait on an event recorded on several streams (one wait per recording). For
  // charging what a tenant queues before it is queued. Thread-safe.
  virtual uint64_t QueueEntries(const Command& /*command*/) const { return 1; }
  // The session is about to be destroyed (its client is gone): queued work that has not started
  // is skipped and every wait on it ends, so that neither the teardown nor a blocking call in
  // flight waits on anything the client queued (only on the commands running now). Commands
  // handled after it fail or are skipped. Thread-safe, non-blocking, irreversible.
  virtual void Cancel() {}
  // Device memory this session holds now, summed over devices (bytes). Thread-safe.
  virtual uint64_t BytesInUse() const { return 0; }
  virtual SessionStats Stats() const { return {}; }
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_EXECUTOR_SESSION_H_
