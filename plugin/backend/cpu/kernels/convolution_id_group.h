// The protocol numbers the convolution, matmul, bias and rearrange kernels in one id range
// (300-399, protocol/kernels/convolution.h), and the CPU kernel table registers that range with
// one call, AddConvolutionKernels (kernel_registry.h). It calls each family's registration,
// declared here: the families are separate (matmul_kernels.cc, bias_kernels.cc,
// rearrange_kernels.cc), the range is the protocol's.
#ifndef VGPU_BACKEND_CPU_KERNELS_CONVOLUTION_ID_GROUP_H_
#define VGPU_BACKEND_CPU_KERNELS_CONVOLUTION_ID_GROUP_H_

#include "plugin/backend/cpu/kernel_registry.h"

namespace vgpu {

// kMatmul, kMatmulBiasActivation.
void AddMatmulKernels(KernelTable& table);
// kBiasAdd, kBiasAddGrad.
void AddBiasKernels(KernelTable& table);
// kRearrange.
void AddRearrangeKernels(KernelTable& table);

}  // namespace vgpu

#endif  // VGPU_BACKEND_CPU_KERNELS_CONVOLUTION_ID_GROUP_H_
