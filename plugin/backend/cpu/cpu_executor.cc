// The CPU backing executor (see cpu_executor.h).
#include "plugin/backend/cpu/cpu_executor.h"

#define EIGEN_USE_THREADS
#include <thread>

#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/cpu_session.h"
#include "plugin/backend/cpu/device_address.h"
#include "plugin/backend/cpu/fair_compute_pool.h"
#include "unsupported/Eigen/CXX11/Tensor"
#include "unsupported/Eigen/CXX11/ThreadPool"

namespace vgpu {

// Kernels split their work for `threads` cores (the device's numThreads()). With fair
// scheduling (a shared server) the pool is a FairComputePool, which may run a few more threads
// only while a tenant would otherwise starve (see fair_compute_pool.h); without it (one tenant,
// in-process) Eigen's own pool.
struct CpuExecutor::ComputePool {
  ComputePool(int threads, int extra_threads, bool fair)
      : pool(MakePool(threads, extra_threads, fair)), device(pool.get(), threads) {}
  static std::unique_ptr<Eigen::ThreadPoolInterface> MakePool(int threads, int extra_threads,
                                                              bool fair) {
    if (!fair) return std::make_unique<Eigen::ThreadPool>(threads);
    return std::make_unique<FairComputePool>(
        FairComputePool::Options{threads, extra_threads, kDefaultStarvationSlice});
  }
  std::unique_ptr<Eigen::ThreadPoolInterface> pool;
  Eigen::ThreadPoolDevice device;
};

absl::StatusOr<std::unique_ptr<CpuExecutor>> CpuExecutor::Create(const Options& options) {
  if (options.device_count < 1 || options.device_count > static_cast<int>(kMaxDeviceIndex) + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("device count ", options.device_count, " is out of range"));
  }
  std::vector<std::unique_ptr<DeviceArena>> arenas;
  for (int i = 0; i < options.device_count; ++i) {
    absl::StatusOr<std::unique_ptr<DeviceArena>> arena =
        DeviceArena::Create(static_cast<uint32_t>(i), options.memory_limit_per_device);
    if (!arena.ok()) return arena.status();
    arenas.push_back(std::move(*arena));
  }
  int threads = options.compute_threads;
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  const SessionLimits& limits = options.session_limits;
  if (limits.max_streams < 1 || limits.max_events < 1 || limits.max_descriptors < 1 ||
      limits.pending_free_wait.count() < 0) {
    return absl::InvalidArgumentError("session limits must be positive");
  }
  int extra_threads = options.extra_compute_threads < 0 ? threads : options.extra_compute_threads;
  auto executor = std::unique_ptr<CpuExecutor>(
      new CpuExecutor(std::move(arenas), threads, extra_threads, options.shared_by_tenants));
  executor->session_limits_ = limits;
  return executor;
}

absl::StatusOr<std::unique_ptr<CpuExecutor>> CpuExecutor::Create(
    const ExecutorOptions& options) {
  Options cpu_options;
  static_cast<ExecutorOptions&>(cpu_options) = options;
  return Create(cpu_options);
}

CpuExecutor::CpuExecutor(std::vector<std::unique_ptr<DeviceArena>> arenas, int threads,
                         int extra_threads, bool fair_scheduling)
    : arenas_(std::move(arenas)),
      pool_(std::make_unique<ComputePool>(threads, extra_threads, fair_scheduling)) {}

CpuExecutor::~CpuExecutor() = default;

std::unique_ptr<ExecutorSession> CpuExecutor::OpenSession(CompletionSink* sink,
                                                          uint64_t quota_bytes) {
  return std::make_unique<CpuSession>(this, next_session_id_.fetch_add(1), sink, quota_bytes,
                                      session_limits_);
}

MemoryInfo CpuExecutor::DeviceMemoryInfo(uint32_t device) const {
  if (device >= arenas_.size()) return MemoryInfo{};
  return arenas_[device]->Info();
}

DeviceArena* CpuExecutor::ArenaForAddress(uint64_t address) {
  uint32_t device;
  uint64_t offset;
  if (!DecodeDeviceAddress(address, &device, &offset) || device >= arenas_.size()) {
    return nullptr;
  }
  return arenas_[device].get();
}

const Eigen::ThreadPoolDevice& CpuExecutor::compute_device() const { return pool_->device; }

}  // namespace vgpu
