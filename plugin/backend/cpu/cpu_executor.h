// The CPU backing executor: the "physical GPU" that runs in host memory on host cores. It owns
// the devices' memory arenas and one compute thread pool shared by all kernels — fair across
// sessions (fair_compute_pool.h) when a server shares it — and opens one session per client (the in-process plugin, or
// each connection of a `vgpu server`).
#ifndef VGPU_BACKEND_CPU_CPU_EXECUTOR_H_
#define VGPU_BACKEND_CPU_CPU_EXECUTOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "plugin/backend/cpu/device_arena.h"
#include "plugin/backend/executor_session.h"

namespace Eigen {
struct ThreadPoolDevice;
}  // namespace Eigen

namespace vgpu {

// What one session (client) may hold at once. Exceeding a limit is a ResourceExhausted error for
// that client only.
struct CpuSessionLimits {
  static constexpr int kDefaultMaxStreams = 256;
  static constexpr int kDefaultMaxEvents = 1 << 16;
  static constexpr int kDefaultMaxDescriptors = 1 << 16;
  static constexpr std::chrono::milliseconds kDefaultPendingFreeWait{10'000};

  int max_streams = kDefaultMaxStreams;          // each is a worker thread
  int max_events = kDefaultMaxEvents;            // recorded, not yet destroyed events
  int max_descriptors = kDefaultMaxDescriptors;  // forward-mode descriptor objects
  // An allocation that fails for lack of memory while the client has frees waiting for its own
  // queued work waits at most this long for that work, then retries once.
  std::chrono::milliseconds pending_free_wait = kDefaultPendingFreeWait;
};

class CpuExecutor {
 public:
  struct Options {
    int device_count = 1;
    uint64_t memory_limit_per_device = 1ull << 30;
    int compute_threads = 0;  // 0: one per host core
    CpuSessionLimits session_limits;
    // Threads the compute pool may add while a session's work starves behind another's long
    // kernel tasks (FairComputePool::Options::max_extra_threads); -1: compute_threads.
    int extra_compute_threads = -1;
    // Share the compute pool fairly among sessions (FairComputePool): for a server shared by
    // tenants. Off: Eigen's own pool (one tenant, in-process), which costs less per task.
    bool fair_scheduling = false;
  };

  static absl::StatusOr<std::unique_ptr<CpuExecutor>> Create(const Options& options);
  ~CpuExecutor();
  CpuExecutor(const CpuExecutor&) = delete;
  CpuExecutor& operator=(const CpuExecutor&) = delete;

  // Opens a session for one client; `sink` (may be null) receives its notifications and must
  // outlive the session. `quota_bytes` > 0 caps the device memory the session may hold at once
  // (summed over devices); allocations beyond it fail with ResourceExhausted. Every session must
  // be destroyed before the executor. Thread-safe.
  std::unique_ptr<ExecutorSession> OpenSession(CompletionSink* sink, uint64_t quota_bytes = 0);

  int device_count() const { return static_cast<int>(arenas_.size()); }
  // The arena of `device` (< device_count()).
  DeviceArena& arena(uint32_t device) { return *arenas_[device]; }
  // The arena that `address` belongs to, or nullptr if it names no device of this executor.
  DeviceArena* ArenaForAddress(uint64_t address);
  // The device every kernel runs on. Work it schedules is filed under the calling thread's
  // ComputeTenantScope (sessions set it to their id around each launch and copy).
  const Eigen::ThreadPoolDevice& compute_device() const;

 private:
  struct ComputePool;
  CpuExecutor(std::vector<std::unique_ptr<DeviceArena>> arenas, int threads, int extra_threads,
              bool fair_scheduling);

  std::vector<std::unique_ptr<DeviceArena>> arenas_;
  CpuSessionLimits session_limits_;
  std::unique_ptr<ComputePool> pool_;
  std::atomic<uint64_t> next_session_id_{1};
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_CPU_CPU_EXECUTOR_H_
