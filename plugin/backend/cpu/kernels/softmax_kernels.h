// Softmax, log softmax and the softmax cross-entropy losses on the CPU backing executor (kernel
// ids in protocol/kernels/reduction.h; they belong to the reduction family).
#ifndef VGPU_BACKEND_CPU_KERNELS_SOFTMAX_KERNELS_H_
#define VGPU_BACKEND_CPU_KERNELS_SOFTMAX_KERNELS_H_

#include "plugin/backend/cpu/kernel_registry.h"

namespace vgpu::cpu_kernels {

// Adds reduction::kSoftmax, kSoftmaxCrossEntropy and kSparseSoftmaxCrossEntropy to `table`
// (called from AddReductionKernels).
void AddSoftmaxKernels(KernelTable& table);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_SOFTMAX_KERNELS_H_
