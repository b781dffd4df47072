// CPU implementations of activation kernels (Relu family).
#ifndef VGPU_BACKEND_CPU_KERNELS_ACTIVATION_KERNELS_H_
#define VGPU_BACKEND_CPU_KERNELS_ACTIVATION_KERNELS_H_

#include "plugin/backend/cpu/kernel_registry.h"

namespace vgpu::cpu_kernels {

absl::Status ReluF32(const KernelContext& context);
absl::Status ReluGradF32(const KernelContext& context);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_ACTIVATION_KERNELS_H_
