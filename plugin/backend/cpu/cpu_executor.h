// The CPU backing executor ("cpu" in the executor registry): the "physical GPU" that runs in
// host memory on host cores. It owns the devices' memory arenas and one compute thread pool
// shared by all kernels — fair across sessions (fair_compute_pool.h) when a server shares it —
// and opens one CpuSession per client (the in-process plugin, or each connection of a `vgpu
// server`).
#ifndef VGPU_BACKEND_CPU_CPU_EXECUTOR_H_
#define VGPU_BACKEND_CPU_CPU_EXECUTOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "plugin/backend/cpu/device_arena.h"
#include "plugin/backend/backing_executor.h"

namespace Eigen {
struct ThreadPoolDevice;
}  // namespace Eigen

namespace vgpu {

class CpuExecutor final : public BackingExecutor {
 public:
  struct Options : ExecutorOptions {
    // Threads the compute pool may add while a session's work starves behind another's long
    // kernel tasks (FairComputePool::Options::max_extra_threads); -1: compute_threads. Only
    // with shared_by_tenants, which selects the fair pool (FairComputePool); without it Eigen's
    // own pool (one tenant, in-process), which costs less per task.
    int extra_compute_threads = -1;
  };

  static absl::StatusOr<std::unique_ptr<CpuExecutor>> Create(const Options& options);
  static absl::StatusOr<std::unique_ptr<CpuExecutor>> Create(const ExecutorOptions& options);
  ~CpuExecutor() override;
  CpuExecutor(const CpuExecutor&) = delete;
  CpuExecutor& operator=(const CpuExecutor&) = delete;

  absl::string_view name() const override { return "cpu"; }
  int device_count() const override { return static_cast<int>(arenas_.size()); }
  MemoryInfo DeviceMemoryInfo(uint32_t device) const override;
  std::unique_ptr<ExecutorSession> OpenSession(CompletionSink* sink,
                                               uint64_t quota_bytes = 0) override;

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
  SessionLimits session_limits_;
  std::unique_ptr<ComputePool> pool_;
  std::atomic<uint64_t> next_session_id_{1};
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_CPU_CPU_EXECUTOR_H_
