// The tenant-fair compute thread pool (see fair_compute_pool.h).
#include "plugin/backend/cpu/fair_compute_pool.h"

#include <algorithm>
#include <utility>

#include "plugin/common/denormals.h"
#include "plugin/common/thread_name.h"

namespace vgpu {
namespace {

thread_local uint64_t current_tenant = kUnattributedTenant;
// The pool whose worker this thread is, and its index there.
thread_local const FairComputePool* current_pool = nullptr;
thread_local int current_worker_index = -1;

// Tenants with no work are forgotten once more than this many are known.
constexpr size_t kIdleTenantsKept = 64;
// The monitor re-checks at least this often even without a notification.
constexpr std::chrono::seconds kMonitorRecheck{1};
// Polls of queued_ an idle worker makes before it sleeps (some tens of microseconds).
constexpr int kIdleSpins = 2000;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

ComputeTenantScope::ComputeTenantScope(uint64_t tenant) : previous_(current_tenant) {
  current_tenant = tenant;
}

ComputeTenantScope::~ComputeTenantScope() { current_tenant = previous_; }

uint64_t ComputeTenantScope::Current() { return current_tenant; }

FairComputePool::FairComputePool(const Options& options)
    : base_slots_(std::max(1, options.threads)),
      max_slots_(base_slots_ + std::max(0, options.max_extra_threads)),
      starvation_slice_(options.starvation_slice),
      open_slots_(base_slots_) {
  workers_.reserve(max_slots_);
  for (int i = 0; i < max_slots_; ++i) {
    workers_.emplace_back([this, i] {
      NameCurrentThread("vgpu-compute");
      FlushDenormalsOnThisThread();  // as TensorFlow's kernel threads (common/denormals.h)
      WorkerLoop(i);
    });
  }
  monitor_ = std::thread([this] {
    NameCurrentThread("vgpu-pool-watch");
    MonitorLoop();
  });
}

FairComputePool::~FairComputePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    open_slots_ = max_slots_;  // drain what is queued with every thread
  }
  work_cv_.notify_all();
  extra_cv_.notify_all();
  monitor_cv_.notify_all();
  for (std::thread& worker : workers_) worker.join();
  monitor_.join();
}

int FairComputePool::NumThreads() const { return max_slots_; }

int FairComputePool::CurrentThreadId() const {
  return current_pool == this ? current_worker_index : -1;
}

FairComputePool::Stats FairComputePool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void FairComputePool::Schedule(std::function<void()> fn) {
  const uint64_t tenant = current_tenant;
  bool wake_worker, wake_monitor = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto found = tenants_.find(tenant);
    if (found == tenants_.end()) {
      // Forget idle tenants before adding this one: a new queue has no work yet, so a sweep
      // after the insertion would drop it again.
      if (tenants_.size() >= kIdleTenantsKept) SweepIdleTenantsLocked();
      found = tenants_.emplace(tenant, std::make_unique<TenantQueue>()).first;
      found->second->tenant = tenant;
    }
    TenantQueue& queue = *found->second;
    queue.tasks.push_back(std::move(fn));
    queued_.fetch_add(1, std::memory_order_relaxed);
    if (!queue.in_ring) {
      queue.in_ring = true;
      ready_.push_back(&queue);
      if (queue.running == 0) {
        queue.starving_since = std::chrono::steady_clock::now();
        wake_monitor = running_ >= open_slots_;  // every slot busy with others: it may starve
      }
    }
    // A spinning worker takes the first queued task itself (it re-checks under mu_ when it
    // stops polling); waking a sleeper for it as well would only cost a context switch.
    const bool spinner_takes_it =
        spinning_.load(std::memory_order_relaxed) && queued_.load(std::memory_order_relaxed) == 1;
    wake_worker = sleeping_ > 0 && running_ < open_slots_ && !spinner_takes_it;
  }
  if (wake_worker) work_cv_.notify_one();
  if (wake_monitor) monitor_cv_.notify_one();
}

FairComputePool::TenantQueue* FairComputePool::PickLocked() {
  size_t best = 0;
  for (size_t i = 1; i < ready_.size() && ready_[best]->running > 0; ++i) {
    if (ready_[i]->running < ready_[best]->running) best = i;
  }
  TenantQueue* queue = ready_[best];
  ready_.erase(ready_.begin() + static_cast<std::ptrdiff_t>(best));
  return queue;
}

FairComputePool::TenantQueue* FairComputePool::StarvingLocked() const {
  TenantQueue* starving = nullptr;
  for (TenantQueue* queue : ready_) {
    if (queue->running == 0 &&
        (starving == nullptr || queue->starving_since < starving->starving_since)) {
      starving = queue;
    }
  }
  return starving;
}

void FairComputePool::SweepIdleTenantsLocked() {
  for (auto it = tenants_.begin(); it != tenants_.end();) {
    const TenantQueue& queue = *it->second;
    if (!queue.in_ring && queue.running == 0 && queue.tasks.empty()) {
      tenants_.erase(it++);
    } else {
      ++it;
    }
  }
}

void FairComputePool::WorkerLoop(int index) {
  current_pool = this;
  current_worker_index = index;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // Worker `index` takes tasks while its slot is open: the base workers always, an extra one
    // only while the monitor keeps that many slots open for a starving tenant.
    const bool extra = index >= base_slots_;
    auto can_run = [&] {
      return (!ready_.empty() && running_ < open_slots_ && index < open_slots_) ||
             (stopping_ && ready_.empty());
    };
    if (!can_run()) {
      // One idle worker at a time polls briefly before it sleeps (as Eigen's pool leaves one
      // thread spinning): the next kernel's first task starts without a wake-up, and the other
      // idle workers leave the cores to the threads that launch that kernel.
      if (!extra && !spinning_.exchange(true, std::memory_order_acquire)) {
        lock.unlock();
        for (int i = 0; i < kIdleSpins && queued_.load(std::memory_order_relaxed) == 0; ++i) {
          CpuRelax();
        }
        spinning_.store(false, std::memory_order_release);
        lock.lock();
      }
      if (extra) {
        extra_cv_.wait(lock, can_run);
      } else {
        ++sleeping_;
        work_cv_.wait(lock, can_run);
        --sleeping_;
      }
    }
    if (ready_.empty()) return;  // stopping, and drained

    TenantQueue* queue = PickLocked();
    std::function<void()> task = std::move(queue->tasks.front());
    queue->tasks.pop_front();
    queued_.fetch_sub(1, std::memory_order_relaxed);
    if (queue->tasks.empty()) {
      queue->in_ring = false;
    } else {
      ready_.push_back(queue);  // round-robin: behind the other ready tenants
    }
    ++queue->running;
    ++running_;
    lock.unlock();

    {
      ComputeTenantScope tenant(queue->tenant);  // tasks it schedules stay with its tenant
      task();
      task = nullptr;  // release what it captured before taking the lock
    }

    lock.lock();
    --queue->running;
    --running_;
    ++stats_.tasks_run;
    if (queue->running == 0 && queue->in_ring) {
      queue->starving_since = std::chrono::steady_clock::now();
      if (running_ >= open_slots_) monitor_cv_.notify_one();
    }
    if (open_slots_ > base_slots_ && !stopping_ && StarvingLocked() == nullptr) --open_slots_;
  }
}

void FairComputePool::MonitorLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    TenantQueue* starving = running_ >= open_slots_ ? StarvingLocked() : nullptr;
    if (starving == nullptr || open_slots_ >= max_slots_) {
      monitor_cv_.wait_for(lock, kMonitorRecheck);
      continue;
    }
    const auto due = starving->starving_since + starvation_slice_;
    if (std::chrono::steady_clock::now() < due) {
      monitor_cv_.wait_until(lock, due);
      continue;
    }
    // Every open slot has been busy with other tenants' tasks for a whole slice: let the
    // operating system share the cores with one more worker, which takes the starving tenant's
    // task (it has the fewest running). Another slot for it needs another slice.
    ++open_slots_;
    ++stats_.extra_slots_opened;
    starving->starving_since = std::chrono::steady_clock::now();
    extra_cv_.notify_all();  // the extra worker whose slot just opened
  }
}

}  // namespace vgpu
