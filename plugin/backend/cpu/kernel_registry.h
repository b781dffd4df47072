// The CPU backing executor's kernel table: what each kernel id of protocol/kernels/*.h runs. A
// kernel receives a LaunchContext (backend/launch/launch_context.h) over the executor's Eigen
// thread pool: host pointers the session has already validated and translated, the settings of
// the descriptors the launch carried, and its parameter block.
#ifndef VGPU_BACKEND_CPU_KERNEL_REGISTRY_H_
#define VGPU_BACKEND_CPU_KERNEL_REGISTRY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "plugin/backend/launch/kernel_table.h"
#include "plugin/backend/launch/launch_context.h"

namespace Eigen {
struct ThreadPoolDevice;
}  // namespace Eigen

namespace vgpu {

// A kernel of the CPU executor: its launch on the executor's Eigen thread pool.
using KernelContext = LaunchContext<Eigen::ThreadPoolDevice>;

// The kernels of the CPU backing executor. Each family adds its kernels in its Add*Kernels
// function (below).
using KernelTable = KernelRegistry<KernelContext>;
using KernelFn = KernelTable::Fn;
using KernelInfo = KernelTable::Entry;

// The process-wide table, built on first use. Thread-safe.
const KernelTable& Kernels();

// Runs `kernel` on `context`: the kernel dispatch every caller (sessions, tests, fuzzers) uses,
// through RunGuarded (launch/kernel_table.h: an escaping C++ exception becomes the launch's
// error). Thread-safe as the kernel is; blocks while it runs.
absl::Status RunKernel(const KernelInfo& kernel, const KernelContext& context);

namespace cpu_kernels {

// One function per kernel family of launch/kernel_families.h (backend/cpu/kernels/*.cc, the
// family's file), each adding its kernels under the family's ids and names.
void AddActivationKernels(KernelTable& table);
void AddElementwiseKernels(KernelTable& table);
void AddConvolutionKernels(KernelTable& table);
void AddMatmulKernels(KernelTable& table);
void AddBiasKernels(KernelTable& table);
void AddRearrangeKernels(KernelTable& table);
void AddPoolingKernels(KernelTable& table);
void AddReductionKernels(KernelTable& table);
void AddSoftmaxKernels(KernelTable& table);
void AddScanAndTopKKernels(KernelTable& table);
void AddDataMovementKernels(KernelTable& table);
void AddReverseKernels(KernelTable& table);
void AddMirrorPadKernels(KernelTable& table);
void AddRandomKernels(KernelTable& table);
void AddNormalizationKernels(KernelTable& table);
void AddTrainingKernels(KernelTable& table);
void AddRnnKernels(KernelTable& table);
void AddSparseKernels(KernelTable& table);
void AddImageTransformKernels(KernelTable& table);
void AddImageColorKernels(KernelTable& table);
void AddImageResizeKernels(KernelTable& table);

}  // namespace cpu_kernels

}  // namespace vgpu

#endif  // VGPU_BACKEND_CPU_KERNEL_REGISTRY_H_
