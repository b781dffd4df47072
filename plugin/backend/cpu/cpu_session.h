// One client's session on the CPU backing executor: its streams, events and the memory it owns.
// Internal to the CPU backend; clients see only ExecutorSession.
//
// Isolation: every device range a stream command names is validated and pinned when the command
// is queued (a bad address fails the stream in order, before anything runs); a Free is ordered
// after the queued work that uses the memory (DeviceArena::Pin); memory is charged as the arena
// takes it; streams, events and descriptors are capped per session (SessionLimits).
#ifndef VGPU_BACKEND_CPU_CPU_SESSION_H_
#define VGPU_BACKEND_CPU_CPU_SESSION_H_

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "plugin/backend/cpu/cpu_executor.h"
#include "plugin/backend/cpu/cpu_stream.h"
#include "plugin/backend/executor_session.h"

namespace vgpu {

class CpuSession final : public ExecutorSession {
 public:
  // `quota_bytes` 0: no quota beyond the devices' limits.
  CpuSession(CpuExecutor* executor, uint64_t session_id, CompletionSink* sink,
             uint64_t quota_bytes = 0, SessionLimits limits = {});
  ~CpuSession() override;

  Reply Handle(Command command) override;
  uint64_t BytesInUse() const override;

 private:
  struct EventMark {
    uint64_t stream_id = 0;
    uint64_t position = 0;
  };

  // Runs one stream-ordered command on a stream's worker thread, on the memory pinned for it.
  absl::Status Execute(CpuStream::Work& work, const absl::Status& stream_status);
  // `device_src` / `device_dst`: the pinned host addresses of command.src / command.dst (null
  // where the command names host memory instead).
  absl::Status Copy(const Command& command, const uint8_t* device_src, uint8_t* device_dst);
  absl::Status Memset(const Command& command, uint8_t* device_dst);
  absl::Status Launch(const Command& command, const PinnedRanges& pins);
  // Validates and pins every device range of a stream command (one Pin per range, in order:
  // src then dst for copies, dst for a memset, the buffers for a launch). Blocking: only on the
  // arena's lock.
  absl::Status PinCommandRanges(const Command& command, PinnedRanges* pins);
  absl::Status PinRanges(absl::Span<const BufferArg> ranges, PinnedRanges* pins);
  // One handler per command kind (HandlerTable); each validates its own fields. The
  // stream-ordered kinds share EnqueueOnStream, which validates and pins what they name.
  using Handler = Reply (CpuSession::*)(Command& command);
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
  // This session's memory summed over devices.
  DeviceArena::Usage TotalUsage() const;
  // Waits (at most `timeout`) until every stream has run what is queued on it now.
  void WaitForQueuedWork(std::chrono::milliseconds timeout);
  absl::Status CheckDevice(uint32_t device) const;
  std::shared_ptr<CpuStream> FindStream(uint64_t id);
  // Replaces descriptor references (forward mode) in a launch by the settings they name, so
  // that the launch no longer depends on the descriptors' lifetime. Caller holds mu_.
  absl::Status ResolveDescriptorReferencesLocked(Command& command)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  CpuExecutor* const executor_;
  const uint64_t session_id_;
  CompletionSink* const sink_;
  const uint64_t quota_bytes_;
  const SessionLimits limits_;

  // Serialises allocations, so that the quota check and the allocation are one step (the
  // arenas keep what each session is charged).
  std::mutex memory_mu_;

  std::mutex mu_;  // also orders enqueues against event marks
  absl::flat_hash_map<uint64_t, std::shared_ptr<CpuStream>> streams_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, EventMark> events_ ABSL_GUARDED_BY(mu_);
  struct StoredDescriptor {
    uint8_t kind = 0;
    std::vector<uint8_t> settings;
  };
  // Forward mode: the executor's own descriptor objects, by client-chosen id.
  absl::flat_hash_map<uint64_t, StoredDescriptor> descriptors_ ABSL_GUARDED_BY(mu_);
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_CPU_CPU_SESSION_H_
