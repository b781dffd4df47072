// One client's session on the CPU backing executor: its streams, events and the memory it owns.
// Internal to the CPU backend; clients see only ExecutorSession.
#ifndef VGPU_BACKEND_CPU_CPU_SESSION_H_
#define VGPU_BACKEND_CPU_CPU_SESSION_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "plugin/backend/cpu/cpu_executor.h"
#include "plugin/backend/cpu/cpu_stream.h"
#include "plugin/backend/executor_session.h"

namespace vgpu {

class CpuSession final : public ExecutorSession {
 public:
  // `quota_bytes` 0: no quota beyond the devices' limits.
  CpuSession(CpuExecutor* executor, uint64_t session_id, CompletionSink* sink,
             uint64_t quota_bytes = 0);
  ~CpuSession() override;

  Reply Handle(Command command) override;
  uint64_t BytesInUse() const override;

 private:
  struct EventMark {
    uint64_t stream_id = 0;
    uint64_t position = 0;
  };

  // Runs one stream-ordered command on a stream's worker thread.
  absl::Status Execute(Command& command, const absl::Status& stream_status);
  absl::Status Copy(const Command& command);
  absl::Status Memset(const Command& command);
  absl::Status Launch(const Command& command);
  absl::StatusOr<uint8_t*> Translate(uint64_t address, uint64_t size);
  absl::Status CheckDevice(uint32_t device) const;
  std::shared_ptr<CpuStream> FindStream(uint64_t id);
  // Replaces descriptor references (forward mode) in a launch by the settings they name, so
  // that the launch no longer depends on the descriptors' lifetime. Caller holds mu_.
  absl::Status ResolveDescriptorReferencesLocked(Command& command);

  CpuExecutor* const executor_;
  const uint64_t session_id_;
  CompletionSink* const sink_;
  const uint64_t quota_bytes_;

  mutable std::mutex memory_mu_;  // guards allocation_sizes_ and bytes_in_use_
  absl::flat_hash_map<uint64_t, uint64_t> allocation_sizes_;  // address -> bytes
  uint64_t bytes_in_use_ = 0;

  std::mutex mu_;  // guards streams_ and events_, and orders enqueues against event marks
  absl::flat_hash_map<uint64_t, std::shared_ptr<CpuStream>> streams_;
  absl::flat_hash_map<uint64_t, EventMark> events_;
  struct StoredDescriptor {
    uint8_t kind = 0;
    std::vector<uint8_t> settings;
  };
  // Forward mode: the executor's own descriptor objects, by client-chosen id.
  absl::flat_hash_map<uint64_t, StoredDescriptor> descriptors_;
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_CPU_CPU_SESSION_H_
