// The convolution family's shared pieces (kernels/convolution*_ops.cc), in namespace vgpu::conv
// so that they never meet another family's names: TensorFlow's convolution attributes and
// shape rules for 2-D and 3-D convolutions, the problem a convolution launch describes, the
// launch itself, and the registration entry points of the family's files, which
// RegisterConvolutionOps (convolution_ops.cc, declared in op_registration.h) calls.
#ifndef VGPU_KERNELS_CONVOLUTION_OPS_H_
#define VGPU_KERNELS_CONVOLUTION_OPS_H_

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugin/kernels/op_kernel.h"

namespace vgpu::conv {

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

// Whose attribute rules and error messages an op follows: TensorFlow's Conv2D (and
// _FusedConv2D), Conv2DBackprop*, DepthwiseConv2dNative*, Conv3D and Conv3DBackprop* kernels.
enum class ConvKind { kConv2D, kConv2DBackprop, kDepthwise, kConv3D, kConv3DBackprop };

// A convolution's attributes. Tensors have rank spatial_dims + 2 in data_format (kNHWC: NHWC or
// NDHWC; kNCHW: NCHW or NCDHW); strides and dilations are those of the spatial dimensions in
// order ((depth,) height, width).
struct ConvAttributes {
  DataFormat data_format = DataFormat::kNHWC;
  int spatial_dims = 2;
  Padding padding = Padding::kValid;
  std::vector<int64_t> explicit_paddings;  // 2 per dimension, data-format order, when EXPLICIT
  int64_t strides[3] = {1, 1, 1};
  int64_t dilations[3] = {1, 1, 1};
};

// Reads and validates the attributes of a convolution op of `kind` as TensorFlow's GPU kernel
// does (same conditions, error classes and messages).
absl::StatusOr<ConvAttributes> ReadConvAttributes(OpConstruction& construction, ConvKind kind);

// TensorFlow's CheckValidPadding for `a`'s padding and explicit paddings (tensors of rank
// a.spatial_dims + 2).
absl::Status CheckConvPadding(const ConvAttributes& a);

// Positions of the channel and of spatial dimension `spatial` in a tensor of `rank`.
int ChannelDim(DataFormat format, int rank);
int SpatialDim(DataFormat format, int spatial);

// Output size and paddings of one spatial dimension.
struct SpatialWindow {
  int64_t output = 0, pad_before = 0, pad_after = 0;
};

// TensorFlow's GetWindowedOutputSizeVerboseV2 for spatial dimension `spatial` (0-based, in the
// attributes' order).
absl::StatusOr<SpatialWindow> ComputeWindow(const ConvAttributes& a, int spatial, int64_t input,
                                            int64_t filter);

// One convolution as its launch describes it: TensorFlow shapes of x, the filter and y, the
// resolved window of each spatial dimension, and the group count (input depth / filter depth).
struct ConvolutionProblem {
  TF_DataType dtype = TF_FLOAT;
  bool depthwise = false;
  int64_t groups = 1;
  std::vector<int64_t> input_shape, filter_shape, output_shape;
  SpatialWindow windows[3];
};

// The forward problem of a Conv2D, DepthwiseConv2dNative or Conv3D (`kind`) of `input` by
// `filter` (the problem's dtype is the input's), validated with TensorFlow's rules and
// messages. A zero-element filter is left to the caller (TensorFlow checks it at different
// points per op).
absl::StatusOr<ConvolutionProblem> ForwardProblem(ConvKind kind, const ConvAttributes& a,
                                                  const TF_Tensor* input,
                                                  const TF_Tensor* filter);

// The backward problem of a Conv2DBackprop*, Conv3DBackprop* or (depthwise)
// DepthwiseConv2dNativeBackprop* op, validated with TensorFlow's rules
// (ConvBackpropComputeDimensionsV2, and the depthwise kernels' own checks); `label` prefixes
// the messages.
absl::StatusOr<ConvolutionProblem> BackpropProblem(const char* label, const ConvAttributes& a,
                                                   bool depthwise, TF_DataType dtype,
                                                   std::vector<int64_t> input_shape,
                                                   std::vector<int64_t> filter_shape,
                                                   std::vector<int64_t> out_backprop_shape);

// Creates and sets descriptors [x tensor, filter, convolution, y tensor] for `p` (followed by
// the epilogue's bias and activation descriptors when `fused` is given), launches `kernel` with
// `buffers`, and destroys the descriptors.
absl::Status LaunchConvolution(OpContext& context, KernelId kernel, const ConvAttributes& a,
                               const ConvolutionProblem& p,
                               std::initializer_list<BufferArg> buffers,
                               const TF_Tensor* bias = nullptr,
                               const FusedBiasActivation* fused = nullptr);

// Allocates output 0, of `dtype` and `output_shape`, and unless it is empty launches `kernel`
// for `p` with the buffers of `first` and `second`, then the output's (an empty operand gives
// zeros, which the kernel writes).
absl::Status AllocateAndLaunchConvolution(OpContext& context, KernelId kernel,
                                          const ConvAttributes& a, const ConvolutionProblem& p,
                                          TF_DataType dtype,
                                          absl::Span<const int64_t> output_shape,
                                          const TF_Tensor* first, const TF_Tensor* second);

// The operand whose gradient a convolution backprop op computes (its output has that shape).
enum class BackpropOf { kInput, kFilter };

// The rest of a Conv2DBackprop*, Conv3DBackprop* or DepthwiseConv2dNativeBackprop* op once it
// has the shape of the operand it differentiates (`of`): `operand` is the other operand (the
// filter for kInput, the input for kFilter) and `out_backprop` the gradient of the output.
// Validates the problem with BackpropProblem (`label`, `depthwise`), allocates output 0 of
// `shape` and launches kBackwardInput or kBackwardFilter with (operand, out_backprop); an
// empty operand or out_backprop gives zeros. The dtype is out_backprop's for kInput and the
// input's for kFilter, as in TensorFlow's kernels.
absl::Status ComputeConvolutionBackprop(OpContext& context, BackpropOf of, const char* label,
                                        const ConvAttributes& a, bool depthwise,
                                        std::vector<int64_t> shape, const TF_Tensor* operand,
                                        const TF_Tensor* out_backprop);

// ReadConvAttributes with the rules of `kKind`.
template <ConvKind kKind>
absl::StatusOr<ConvAttributes> ReadConvAttributesOf(OpConstruction& construction) {
  return ReadConvAttributes(construction, kKind);
}

// The base of a convolution kernel class K whose state is its attributes, read with the rules
// of `kKind`.
template <typename K, ConvKind kKind>
using ConvolutionKernel = WithAttributes<K, ConvAttributes, ReadConvAttributesOf<kKind>>;

// The family's files (each registers its ops and documents them with DocumentOp); the op
// registration's RegisterConvolutionOps calls them all.
void RegisterConvolution2DOps(const char* device_type);  // convolution_ops.cc
void RegisterConvolution3DOps(const char* device_type);  // convolution_3d_ops.cc
void RegisterGenericConvolutionOps(const char* device_type);  // convolution_generic_ops.cc
void RegisterMatmulOps(const char* device_type);         // convolution_matmul_ops.cc
void RegisterBiasOps(const char* device_type);           // convolution_bias_ops.cc
void RegisterEinsumOps(const char* device_type);         // convolution_einsum_ops.cc

}  // namespace vgpu::conv

#endif  // VGPU_KERNELS_CONVOLUTION_OPS_H_
