// The CPU backing executor's compute thread pool, fair across tenants. It sits behind the
// executor's Eigen::ThreadPoolDevice: every task a kernel schedules (Eigen's parallelFor blocks,
// contraction blocks, memcpy blocks) is filed under the tenant that is running it — a
// thread_local set by ComputeTenantScope around each launch and inherited by tasks scheduled
// from pool threads — and idle workers take tasks from the tenant with the fewest running tasks,
// round-robin among equals. One tenant's big kernel therefore cannot queue ahead of another
// tenant's work.
//
// Eigen splits a kernel into at most a few blocks per thread, so one block of a huge kernel can
// run for seconds (or, for kernels with expensive rows, for ever). Such a task cannot be
// interrupted; instead, when a tenant has had work queued and nothing running for a whole
// `starvation_slice` while every worker was busy, the pool opens one more worker slot (up to
// `max_extra_threads`, threads created up front) so that the operating system time-slices the
// long task against the waiting tenant's. Slots close again when nobody is starving. A single
// tenant never triggers this: its own tasks queue behind its own work as on any pool.
#ifndef VGPU_BACKEND_CPU_FAIR_COMPUTE_POOL_H_
#define VGPU_BACKEND_CPU_FAIR_COMPUTE_POOL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "unsupported/Eigen/CXX11/ThreadPool"

namespace vgpu {

// How long a tenant may wait with queued work and nothing running, while every worker is busy
// with other tenants' tasks, before the pool opens an extra worker slot for it.
inline constexpr std::chrono::milliseconds kDefaultStarvationSlice{20};

// The tenant key of work that no ComputeTenantScope attributes (e.g. tests calling kernels
// directly): such work shares one queue.
inline constexpr uint64_t kUnattributedTenant = 0;

class FairComputePool final : public Eigen::ThreadPoolInterface {
 public:
  struct Options {
    int threads = 1;  // worker slots open normally (>= 1)
    // Worker slots that may open on top of `threads` while a tenant starves (>= 0).
    int max_extra_threads = 1;
    std::chrono::milliseconds starvation_slice = kDefaultStarvationSlice;
  };

  // Starts threads + max_extra_threads workers and a monitor thread.
  explicit FairComputePool(const Options& options);
  // Runs every task still queued, then joins the threads. No task may be scheduled meanwhile.
  ~FairComputePool() override;
  FairComputePool(const FairComputePool&) = delete;
  FairComputePool& operator=(const FairComputePool&) = delete;

  // Queues `fn` under the calling thread's tenant (ComputeTenantScope). Never blocks on
  // execution; thread-safe.
  void Schedule(std::function<void()> fn) override;
  // Every worker thread, extra slots included.
  int NumThreads() const override;
  // 0..NumThreads()-1 on a worker of this pool, -1 elsewhere.
  int CurrentThreadId() const override;

  // Counters for tests and logs. Thread-safe.
  struct Stats {
    uint64_t tasks_run = 0;
    uint64_t extra_slots_opened = 0;  // times a starving tenant got an extra worker slot
  };
  Stats stats() const;

 private:
  struct TenantQueue {
    uint64_t tenant = 0;
    std::deque<std::function<void()>> tasks;
    int running = 0;
    bool in_ring = false;  // has queued tasks, so it is in ready_
    std::chrono::steady_clock::time_point starving_since{};
  };

  void WorkerLoop(int index);
  void MonitorLoop();
  // The ready tenant with the fewest running tasks (the earliest in round-robin order among
  // equals), or nullptr. Caller holds mu_.
  TenantQueue* PickLocked();
  // A ready tenant with nothing running, the one waiting longest, or nullptr. Caller holds mu_.
  TenantQueue* StarvingLocked() const;
  // Forgets tenants with no queued and no running work once there are many. Caller holds mu_.
  void SweepIdleTenantsLocked();

  const int base_slots_;
  const int max_slots_;
  const std::chrono::milliseconds starvation_slice_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // base workers wait here
  std::condition_variable extra_cv_;  // extra workers wait here until their slot opens
  std::condition_variable monitor_cv_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<TenantQueue>> tenants_;
  std::deque<TenantQueue*> ready_;  // tenants with queued tasks, in round-robin order
  int open_slots_;                  // workers allowed to run tasks at once
  int running_ = 0;                 // workers running a task
  int sleeping_ = 0;                // base workers blocked on work_cv_
  // Tasks queued, readable without mu_: one idle worker polls it briefly before it sleeps, so
  // that the next kernel's tasks start without a wake-up (as Eigen's own pool spins).
  std::atomic<int> queued_{0};
  std::atomic<bool> spinning_{false};  // an idle worker is polling queued_
  bool stopping_ = false;
  Stats stats_;

  std::vector<std::thread> workers_;
  std::thread monitor_;
};

// Sets the calling thread's compute tenant for its lifetime (restoring the previous one after):
// tasks the thread schedules on a FairComputePool are filed under `tenant`. Not copyable; use
// on the stack around one launch.
class ComputeTenantScope {
 public:
  explicit ComputeTenantScope(uint64_t tenant);
  ~ComputeTenantScope();
  ComputeTenantScope(const ComputeTenantScope&) = delete;
  ComputeTenantScope& operator=(const ComputeTenantScope&) = delete;

  // The calling thread's tenant (kUnattributedTenant outside any scope).
  static uint64_t Current();

 private:
  const uint64_t previous_;
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_CPU_FAIR_COMPUTE_POOL_H_
