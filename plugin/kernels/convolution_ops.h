// Registration entry points of the convolution family's op kernels that live in their own
// files; RegisterConvolutionOps (convolution_ops.cc) calls them.
#ifndef VGPU_KERNELS_CONVOLUTION_OPS_H_
#define VGPU_KERNELS_CONVOLUTION_OPS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "plugin/kernels/op_kernel.h"

namespace vgpu {

// The epilogue of TensorFlow's _FusedConv2D / _FusedMatMul as the plugin supports it: a BiasAdd
// (the op's single extra argument), then optionally an activation.
struct FusedBiasActivation {
  std::optional<ActivationMode> activation;  // none: BiasAdd only
};

// Reads the attributes fused_ops and num_args of a fused op. `activations` lists the activation
// names accepted after "BiasAdd" (a subset of Relu, Relu6, Sigmoid, Tanh); other fusions are
// Unimplemented, as in TensorFlow's kernels.
absl::StatusOr<FusedBiasActivation> ReadFusedBiasActivation(
    OpConstruction& construction, std::initializer_list<const char*> activations);

// Adds the descriptors of a fused epilogue to `launch`: a tensor descriptor for the bias and,
// if `fused` has one, an activation descriptor.
KernelLaunch& DescribeEpilogue(KernelLaunch& launch, const TF_Tensor* bias,
                               const FusedBiasActivation& fused);

// MatMul and BatchMatMulV2 (convolution_matmul_ops.cc).
void RegisterMatmulOps(const char* device_type);

// BiasAdd, BiasAddV1 and BiasAddGrad (convolution_bias_ops.cc).
void RegisterBiasOps(const char* device_type);

}  // namespace vgpu

#endif  // VGPU_KERNELS_CONVOLUTION_OPS_H_
