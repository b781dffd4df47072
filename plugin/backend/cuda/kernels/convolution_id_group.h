// The protocol numbers the convolution, matmul, bias and rearrange kernels in one id range
// (300-399, protocol/kernels/convolution.h), and the CUDA kernel table registers that range
// with one call, AddCudaConvolutionKernels (cuda_kernel_registry.h). It calls each family's
// registration, declared here: the families are separate (matmul_kernels.cu, bias_kernels.cu,
// rearrange_kernels.cu), the range is the protocol's.
#ifndef VGPU_BACKEND_CUDA_KERNELS_CONVOLUTION_ID_GROUP_H_
#define VGPU_BACKEND_CUDA_KERNELS_CONVOLUTION_ID_GROUP_H_

#include "plugin/backend/cuda/cuda_kernel_registry.h"

namespace vgpu::cuda {

// kMatmul, kMatmulBiasActivation.
void AddCudaMatmulKernels(CudaKernelTable& table);
// kBiasAdd, kBiasAddGrad.
void AddCudaBiasKernels(CudaKernelTable& table);
// kRearrange.
void AddCudaRearrangeKernels(CudaKernelTable& table);

}  // namespace vgpu::cuda

#endif  // VGPU_BACKEND_CUDA_KERNELS_CONVOLUTION_ID_GROUP_H_
