// The CPU backing executor ("cpu" in the executor registry): the "physical GPU" that runs in
// host memory on host cores. It owns the devices' memory arenas (over host storage) and one
// compute thread pool shared by all kernels — fair across sessions (fair_compute_pool.h) when a
// server shares it — and runs copies, memsets and the kernel table (kernel_registry.h). Streams
// need no state of their own: each operation completes before it returns.
#ifndef VGPU_BACKEND_CPU_CPU_EXECUTOR_H_
#define VGPU_BACKEND_CPU_CPU_EXECUTOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "plugin/backend/arena_backed_executor.h"
#include "plugin/backend/device_arena.h"

namespace Eigen {
struct ThreadPoolDevice;
}  // namespace Eigen

namespace vgpu {

class CpuExecutor final : public ArenaBackedExecutor {
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
  absl::string_view KernelName(uint32_t kernel_id) const override;
  ExecutorStats stats() const override;

  // No per-stream state (returns null).
  absl::StatusOr<std::unique_ptr<ExecutorStream>> CreateStream(uint32_t device) override;
  // Each runs to completion before it returns, its work filed under `tenant` in the compute pool.
  absl::Status Copy(ExecutorStream* stream, uint64_t tenant, const CopyRequest& request,
                    PinnedRanges& pins) override;
  absl::Status Memset(ExecutorStream* stream, uint64_t tenant, const MemsetRequest& request,
                      PinnedRanges& pins) override;
  absl::Status Launch(ExecutorStream* stream, uint64_t tenant, const LaunchRequest& request,
                      PinnedRanges& pins) override;

  // The device kernels run on. Work it schedules is filed under the calling thread's
  // ComputeTenantScope (Copy and Launch set it to their tenant). A launch whose buffers total
  // less than SerialLaunchBytes(threads) runs on a device of one thread instead: the stream's
  // worker alone.
  const Eigen::ThreadPoolDevice& compute_device() const;

  // The buffer bytes under which a launch runs on the stream's worker thread alone, for a pool
  // of `threads`: 4 MiB with two threads or fewer, 0 (every launch may split) with more. On two
  // cores the thread that submits the work (TensorFlow's, issuing the next ops) shares a core
  // with one of the pool's two threads, and a kernel split in two waits for its slower half:
  // measured on a two-core Xeon, an mlp step took 4.3-4.8 ms with every launch split and
  // 3.3-3.4 ms with those under 4 MiB on one thread (cnn, resnet and mobilenetv2: unchanged,
  // their large kernels still split). Not measured with more cores, so not applied there. A
  // function of the launch's size only: a kernel's results do not depend on timing. Pure.
  static uint64_t SerialLaunchBytes(int threads);
  // Whether `request` runs on the stream's worker alone under `serial_launch_bytes`: its
  // buffers total less, each byte counted kernel_families::ByteWorkWeight(kernel) times (a matrix
  // product or convolution never does: its oneDNN team is sized by its multiply-adds). Pure.
  static bool RunsSerially(const LaunchRequest& request, uint64_t serial_launch_bytes);

 private:
  struct ComputePool;
  CpuExecutor(std::vector<std::unique_ptr<DeviceArena>> arenas, int threads, int extra_threads,
              bool fair_scheduling);

  std::unique_ptr<ComputePool> pool_;
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_CPU_CPU_EXECUTOR_H_
