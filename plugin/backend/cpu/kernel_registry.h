// The CPU backing executor's kernel table: what each kernel id of protocol/kernels/*.h runs. A
// kernel receives a LaunchContext (backend/launch_context.h) over the executor's Eigen thread
// pool: host pointers the session has already validated and translated, the settings of the
// descriptors the launch carried, and its parameter block.
#ifndef VGPU_BACKEND_CPU_KERNEL_REGISTRY_H_
#define VGPU_BACKEND_CPU_KERNEL_REGISTRY_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "plugin/backend/launch_context.h"

namespace Eigen {
struct ThreadPoolDevice;
}  // namespace Eigen

namespace vgpu {

// A kernel of the CPU executor: its launch on the executor's Eigen thread pool.
using KernelContext = LaunchContext<Eigen::ThreadPoolDevice>;

using KernelFn = absl::Status (*)(const KernelContext& context);

struct KernelInfo {
  const char* name;
  KernelFn run;
};

// The kernels of the CPU backing executor. Each family adds its kernels in its Add*Kernels
// function (backend/cpu/kernels/*.cc).
class KernelTable {
 public:
  void Add(KernelId id, const char* name, KernelFn run);
  // The kernel registered for `kernel_id`, or nullptr.
  const KernelInfo* Find(uint32_t kernel_id) const;
  // Every registered kernel id, ascending (for fuzzers and exhaustive tests).
  std::vector<uint32_t> Ids() const;

 private:
  std::vector<std::pair<uint32_t, KernelInfo>> kernels_;  // sorted by id
};

// The process-wide table, built on first use. Thread-safe.
const KernelTable& Kernels();

// Runs `kernel` on `context`: the kernel dispatch every caller (sessions, tests, fuzzers) uses.
// A C++ exception escaping the kernel on the calling thread becomes this launch's error
// (std::bad_alloc -> ResourceExhausted, anything else -> Internal) instead of terminating the
// process; the error names the kernel. Thread-safe as the kernel is; blocks while it runs.
absl::Status RunKernel(const KernelInfo& kernel, const KernelContext& context);

// One function per kernel family.
void AddActivationKernels(KernelTable& table);
void AddElementwiseKernels(KernelTable& table);
void AddConvolutionKernels(KernelTable& table);
void AddPoolingKernels(KernelTable& table);
void AddReductionKernels(KernelTable& table);
void AddDataMovementKernels(KernelTable& table);
void AddRandomKernels(KernelTable& table);
void AddNormalizationKernels(KernelTable& table);
void AddTrainingKernels(KernelTable& table);
void AddRnnKernels(KernelTable& table);
void AddSparseKernels(KernelTable& table);
void AddImageTransformKernels(KernelTable& table);
void AddImageColorKernels(KernelTable& table);
void AddImageResizeKernels(KernelTable& table);

}  // namespace vgpu

#endif  // VGPU_BACKEND_CPU_KERNEL_REGISTRY_H_
