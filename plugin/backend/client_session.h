// The session layer: one client's session on any backing executor. It decodes and validates
// every command once (one small handler per command kind), keeps the client's streams
// (StreamQueue), events, forward-mode descriptors and limits, and calls the executor's typed
// operations (backing_executor.h) with validated, pinned memory. Executors implement no
// command handling of their own; BackingExecutor::OpenSession creates one of these.
//
// Isolation: every device range a stream command names is validated and pinned when the command
// is queued (a bad address fails the stream in order, before anything runs); a Free is ordered
// after the queued work that uses the memory (DeviceArena::Pin); memory is charged as the arena
// takes it; streams, events and descriptors are capped per session (SessionLimits).
#ifndef VGPU_BACKEND_CLIENT_SESSION_H_
#define VGPU_BACKEND_CLIENT_SESSION_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "plugin/backend/cpu/cpu_executor.h"
#include "plugin/backend/stream_queue.h"
#include "plugin/backend/executor_session.h"

namespace vgpu {

class ClientSession final : public ExecutorSession {
 public:
  // `executor` must outlive the session; `session_id` is unique among the executor's sessions
  // (it owns the session's memory in the arenas); `quota_bytes` 0: no quota beyond the devices'
  // limits.
  ClientSession(BackingExecutor* executor, uint64_t session_id, CompletionSink* sink,
                uint64_t quota_bytes = 0, SessionLimits limits = {},
                std::shared_ptr<SharedQuota> shared_quota = nullptr);
  ~ClientSession() override;

  Reply Handle(Command command) override;
  uint64_t QueueEntries(const Command& command) const override;
  void Cancel() override;
  uint64_t BytesInUse() const override;
  SessionStats Stats() const override;

  // Whether a launch (or, with SessionLimits::inline_copies, a copy, memset or event
  // recording) is small enough to run on the submitting thread when its stream is idle
  // (nothing does when inline_launch_bytes is 0): a launch's buffers total at most
  // `limits.inline_launch_bytes`, each byte counted kernel_families::ByteWorkWeight(kernel)
  // times (a costly kernel holds the thread longer per byte). Pure.
  static bool RunsInline(const Command& command, const SessionLimits& limits);

  // Threads blocked now until work of the client's stream `stream` completes (a waiting
  // stream's worker, a synchronisation); 0 for an unknown stream. For tests, which order
  // themselves on it instead of sleeping. Thread-safe.
  size_t WaitersOn(uint64_t stream);

 private:
  // Where an event was recorded: the stream by its serial (a client's stream ids can be reused
  // after DestroyStream; serials never are) and the record command's position on it.
  struct EventMark {
    uint64_t stream_serial = 0;
    uint64_t position = 0;
  };
  // An event's recordings that a wait must cover: the last one of each stream, as long as it
  // has not been reached. A wait covers every one of them, not only the last recording as on
  // a GPU: the client completes some recordings early (DeviceClient::RecordEvent) and orders
  // other streams after them by waits naming the event, and TensorFlow may record the event
  // again, on another stream, before such a wait arrives. Waiting for more work that was queued
  // before the wait cannot form a cycle.
  using EventMarks = absl::InlinedVector<EventMark, 2>;
  // A virtual stream: the session's queue and the executor's state for it. The queue is
  // destroyed (drained) first.
  struct Stream {
    uint64_t serial = 0;  // unique in the session, never reused
    std::unique_ptr<ExecutorStream> executor_stream;
    std::unique_ptr<StreamQueue> queue;
    // The server-wide thread this stream took (SessionLimits::stream_threads), if any: given
    // back once its worker has ended.
    std::shared_ptr<StreamThreadBudget> thread_budget;
    ~Stream() {
      queue.reset();
      if (thread_budget != nullptr) thread_budget->Give();
    }
  };

  // Runs one stream-ordered command on a stream's worker thread, on the memory pinned for it,
  // by calling the executor (ExecuteCommand); while a profile is taken, records a command the
  // client tagged (Command::activity) in the activity log with its start and end.
  absl::Status Execute(ExecutorStream* stream, StreamQueue::Work& work,
                       const absl::Status& stream_status);
  absl::Status ExecuteCommand(ExecutorStream* stream, StreamQueue::Work& work,
                              const absl::Status& stream_status);
  // A copy with both ends resolved: the pinned executor addresses of command.src / command.dst,
  // or the command's host pointers where it names host memory.
  absl::Status Copy(ExecutorStream* stream, const Command& command, PinnedRanges& pins);
  absl::Status Memset(ExecutorStream* stream, const Command& command, PinnedRanges& pins);
  absl::Status Launch(ExecutorStream* stream, const Command& command, PinnedRanges& pins);
  // Validates and pins every device range of a stream command (one Pin per range, in order:
  // src then dst for copies, dst for a memset, the buffers for a launch). Blocking: only on the
  // arena's lock.
  absl::Status PinCommandRanges(const Command& command, PinnedRanges* pins);
  absl::Status PinRanges(absl::Span<const BufferArg> ranges, PinnedRanges* pins);
  // One handler per command kind (HandlerTable); each validates its own fields. The
  // stream-ordered kinds share EnqueueOnStream, which validates and pins what they name.
  using Handler = Reply (ClientSession::*)(Command& command);
  static const Handler* HandlerTable();
  Reply HandleAllocate(Command& command);
  Reply HandleFree(Command& command);
  Reply HandleMemoryInfo(Command& command);
  Reply HandleCreateStream(Command& command);
  Reply HandleDestroyStream(Command& command);
  Reply HandleStreamStatus(Command& command);  // kSynchronizeStream and kStreamStatus
  Reply HandleSynchronizeDevice(Command& command);
  Reply HandleMemcpyNow(Command& command);
  Reply HandleDestroyEvent(Command& command);
  Reply HandleDescriptorCreate(Command& command);
  Reply HandleDescriptorSet(Command& command);
  Reply HandleDescriptorDestroy(Command& command);
  Reply EnqueueOnStream(Command& command);
  // Tries one allocation against the quota and the arena. Takes memory_mu_.
  absl::StatusOr<uint64_t> TryAllocate(uint32_t device, uint64_t size);
  // This session's memory summed over devices; UsageOf: any session's of this executor.
  DeviceArena::Usage TotalUsage() const;
  DeviceArena::Usage UsageOf(uint64_t session_id) const;
  // What the members of the shared budget hold together.
  DeviceArena::Usage SharedQuotaUsage() const;
  // The shared budget's check for `size` more bytes (caller holds its allocation mutex).
  absl::Status CheckSharedQuota(uint64_t size) const;
  // Waits until `stream` has run what is queued on it now and the executor has finished it;
  // returns (and clears) the stream's first error, else the executor's.
  absl::Status SynchronizeStream(Stream& stream);
  // Waits (at most `timeout`) until every stream has run what is queued on it now.
  void WaitForQueuedWork(std::chrono::milliseconds timeout);
  absl::Status CheckDevice(uint32_t device) const;
  std::shared_ptr<Stream> FindStream(uint64_t id);
  // The stream of `serial`, live or being destroyed (null: gone, its work all completed).
  // streams_'s queues, each once (with one queue per device, several ids name one Stream).
  std::vector<const Stream*> DistinctStreamsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<Stream> FindStreamBySerial(uint64_t serial);
  std::shared_ptr<Stream> FindStreamBySerialLocked(uint64_t serial) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the stream `mark` names has run its recording (true when that stream is gone).
  bool ReachedLocked(const EventMark& mark) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds a recording of `event_id` to its marks, dropping those reached and an earlier one of
  // the same stream.
  void AddRecordingLocked(uint64_t event_id, const EventMark& mark)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The executor's name for a kernel id (empty: it has no such kernel), and the name for
  // messages ("kernel N" if it has none).
  absl::string_view KernelName(uint64_t kernel_id) const;
  std::string KernelLabel(uint64_t kernel_id) const;
  // Replaces descriptor references (forward mode) in a launch by the settings they name, so
  // that the launch no longer depends on the descriptors' lifetime. Caller holds mu_.
  absl::Status ResolveDescriptorReferencesLocked(Command& command)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  BackingExecutor* const executor_;
  const uint64_t session_id_;
  CompletionSink* const sink_;
  const uint64_t quota_bytes_;
  const SessionLimits limits_;
  const std::shared_ptr<SharedQuota> shared_quota_;  // null: none

  std::atomic<uint64_t> launches_{0};
  std::atomic<uint64_t> kernel_ns_{0};
  std::atomic<uint64_t> errors_{0};

  // Serialises allocations, so that the quota check and the allocation are one step (the
  // arenas keep what each session is charged).
  std::mutex memory_mu_;

  mutable std::mutex mu_;  // also orders enqueues against event marks
  absl::flat_hash_map<uint64_t, std::shared_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  // Streams a DestroyStream is draining (gone from streams_, still counted and cancellable).
  std::vector<std::shared_ptr<Stream>> draining_ ABSL_GUARDED_BY(mu_);
  uint64_t next_stream_serial_ ABSL_GUARDED_BY(mu_) = 1;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<uint64_t, EventMarks> events_ ABSL_GUARDED_BY(mu_);
  // Forward mode: the executor's own descriptor objects, by client-chosen id.
  absl::flat_hash_map<uint64_t, std::unique_ptr<ExecutorDescriptor>> descriptors_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_CLIENT_SESSION_H_
