// The CPU backing executor (see cpu_executor.h).
#include "plugin/common/cpu_count.h"
#include "plugin/backend/cpu/cpu_executor.h"

#define EIGEN_USE_THREADS
#include <cstring>
#include <functional>
#include <thread>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/fair_compute_pool.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/onednn_primitives.h"
#include "plugin/backend/launch/kernel_families.h"
#include "plugin/common/denormals.h"
#include "plugin/common/status_macros.h"
#include "plugin/common/thread_name.h"
#include "unsupported/Eigen/CXX11/Tensor"
#include "unsupported/Eigen/CXX11/ThreadPool"

namespace vgpu {

// Eigen's thread environment, with the pool's threads named "vgpu-compute".
struct NamedComputeThreads : Eigen::StlThreadEnvironment {
  EnvThread* CreateThread(std::function<void()> body) {
    return Eigen::StlThreadEnvironment::CreateThread([body = std::move(body)] {
      NameCurrentThread("vgpu-compute");
      FlushDenormalsOnThisThread();  // as TensorFlow's kernel threads (common/denormals.h)
      body();
    });
  }
};

// Kernels split their work for `threads` cores (the device's numThreads()). With fair
// scheduling (a shared server) the pool is a FairComputePool, which may run a few more threads
// only while a tenant would otherwise starve (see fair_compute_pool.h); without it (one tenant,
// in-process) Eigen's own pool.
struct CpuExecutor::ComputePool {
  ComputePool(int threads, int extra_threads, bool fair)
      : pool(MakePool(threads, extra_threads, fair)),
        device(pool.get(), threads),
        serial(pool.get(), 1),
        serial_launch_bytes(SerialLaunchBytes(threads)) {}
  static std::unique_ptr<Eigen::ThreadPoolInterface> MakePool(int threads, int extra_threads,
                                                              bool fair) {
    if (!fair) return std::make_unique<Eigen::ThreadPoolTempl<NamedComputeThreads>>(threads);
    return std::make_unique<FairComputePool>(
        FairComputePool::Options{threads, extra_threads, kDefaultStarvationSlice});
  }
  std::unique_ptr<Eigen::ThreadPoolInterface> pool;
  Eigen::ThreadPoolDevice device;
  Eigen::ThreadPoolDevice serial;  // numThreads() 1: parallelFor runs on the calling thread
  uint64_t serial_launch_bytes;
};

absl::StatusOr<std::unique_ptr<CpuExecutor>> CpuExecutor::Create(const Options& options) {
  VGPU_RETURN_IF_ERROR(CheckDeviceCount(options));
  std::vector<std::unique_ptr<DeviceArena>> arenas;
  for (int i = 0; i < options.device_count; ++i) {
    absl::StatusOr<std::unique_ptr<DeviceArena>> arena =
        DeviceArena::Create(static_cast<uint32_t>(i), options.memory_limit_per_device);
    if (!arena.ok()) return arena.status();
    arenas.push_back(std::move(*arena));
  }
  int threads = options.compute_threads;
  if (threads <= 0) threads = UsableCpuCount();  // affinity and cgroup quota, not host cores
  const SessionLimits& limits = options.session_limits;
  VGPU_RETURN_IF_ERROR(CheckSessionLimits(limits));
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
    : ArenaBackedExecutor(std::move(arenas)),
      pool_(std::make_unique<ComputePool>(threads, extra_threads, fair_scheduling)) {}

CpuExecutor::~CpuExecutor() = default;

absl::string_view CpuExecutor::KernelName(uint32_t kernel_id) const {
  return NameOf(Kernels().Find(kernel_id));
}

ExecutorStats CpuExecutor::stats() const {
  ExecutorStats stats = CountedStats();
  // oneDNN primitives: one cache serves the process's CPU executors (onednn_primitives.h), so
  // these counts are the process's.
  const ExecutorPrimitiveCounts primitives = ExecutorPrimitiveCounters();
  stats.primitives_created = primitives.created;
  stats.primitives_reused = primitives.reused;
  return stats;
}

absl::StatusOr<std::unique_ptr<ExecutorStream>> CpuExecutor::CreateStream(uint32_t) {
  return std::unique_ptr<ExecutorStream>();
}

absl::Status CpuExecutor::Copy(ExecutorStream*, uint64_t tenant, const CopyRequest& request,
                               PinnedRanges&) {
  ComputeTenantScope compute_tenant(tenant);  // fair share of the compute pool
  copies_.fetch_add(1, std::memory_order_relaxed);
  bytes_copied_.fetch_add(request.size, std::memory_order_relaxed);
  compute_device().memcpy(request.destination, request.source, request.size);
  return absl::OkStatus();
}

absl::Status CpuExecutor::Memset(ExecutorStream*, uint64_t, const MemsetRequest& request,
                                 PinnedRanges&) {
  memsets_.fetch_add(1, std::memory_order_relaxed);
  if (request.pattern_bytes == 1) {
    std::memset(request.destination, static_cast<int>(request.pattern & 0xFF), request.size);
    return absl::OkStatus();
  }
  // A 4-byte pattern (the session checked the size is a multiple of 4). The destination may be
  // any byte of the tenant's memory: store through memcpy, never a misaligned word pointer.
  for (uint64_t offset = 0; offset < request.size; offset += 4) {
    std::memcpy(request.destination + offset, &request.pattern, 4);
  }
  return absl::OkStatus();
}

absl::Status CpuExecutor::Launch(ExecutorStream*, uint64_t tenant, const LaunchRequest& request,
                                 PinnedRanges&) {
  ComputeTenantScope compute_tenant(tenant);  // fair share of the compute pool
  // Denormals flushed, as TensorFlow-CPU's kernels run, whichever thread runs the launch (a
  // stream's worker, or inline the submitting thread); the pool's threads flush always.
  ScopedFlushDenormals flush_denormals;
  launches_.fetch_add(1, std::memory_order_relaxed);
  const KernelInfo* kernel = Kernels().Find(request.kernel_id);
  if (kernel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown kernel id ", request.kernel_id));
  }
  const Eigen::ThreadPoolDevice* device =
      RunsSerially(request, pool_->serial_launch_bytes) ? &pool_->serial : &pool_->device;
  return RunKernel(*kernel, KernelContext(request.launch, device));
}

bool CpuExecutor::RunsSerially(const LaunchRequest& request, uint64_t serial_launch_bytes) {
  // Each byte counts as much work as it stands for (a random generator's 16 times; a matrix
  // product's or convolution's without bound, so never).
  const uint64_t bound =
      serial_launch_bytes / kernel_families::ByteWorkWeight(KernelId{request.kernel_id});
  uint64_t bytes = 0;
  for (const uint64_t size : request.launch.buffer_sizes) {
    if (size >= bound - bytes) return false;
    bytes += size;
  }
  return true;
}

uint64_t CpuExecutor::SerialLaunchBytes(int threads) {
  return threads <= 2 ? uint64_t{4} << 20 : 0;
}

const Eigen::ThreadPoolDevice& CpuExecutor::compute_device() const { return pool_->device; }

}  // namespace vgpu
