// CPU implementations of element-wise arithmetic kernels.
#ifndef VGPU_BACKEND_CPU_KERNELS_ELEMENTWISE_KERNELS_H_
#define VGPU_BACKEND_CPU_KERNELS_ELEMENTWISE_KERNELS_H_

#include "plugin/backend/cpu/kernel_registry.h"

namespace vgpu::cpu_kernels {

// kBinaryElementwise: same-shape add/sub in every numeric dtype.
absl::Status BinaryElementwise(const KernelContext& context);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_ELEMENTWISE_KERNELS_H_
