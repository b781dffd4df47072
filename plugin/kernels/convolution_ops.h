// Registration entry points of the convolution family's op kernels that live in their own
// files; RegisterConvolutionOps (convolution_ops.cc) calls them.
#ifndef VGPU_KERNELS_CONVOLUTION_OPS_H_
#define VGPU_KERNELS_CONVOLUTION_OPS_H_

namespace vgpu {

// MatMul and BatchMatMulV2 (convolution_matmul_ops.cc).
void RegisterMatmulOps(const char* device_type);

// BiasAdd, BiasAddV1 and BiasAddGrad (convolution_bias_ops.cc).
void RegisterBiasOps(const char* device_type);

}  // namespace vgpu

#endif  // VGPU_KERNELS_CONVOLUTION_OPS_H_
