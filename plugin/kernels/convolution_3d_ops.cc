// TensorFlow's 3-D convolutions on the virtual GPU: Conv3D, Conv3DBackpropInputV2 and
// Conv3DBackpropFilterV2 (NDHWC and NCDHW, strides, dilations, SAME/VALID, grouped when the
// input depth is a multiple of the filter's in_channels), and the deprecated V1 backprops
// (NDHWC, shapes taken from tensors) that TensorFlow's GPU build still registers. Validated as
// TensorFlow's GPU kernels do (conv_ops_3d.cc, conv_grad_ops_3d.cc), then launched like the 2-D
// convolutions with rank-5 tensor and filter descriptors (convolution_ops.h).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/kernels/convolution_ops.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::conv {
namespace {

constexpr std::initializer_list<TF_DataType> kConvolution3DTypes = {TF_FLOAT, TF_HALF,
                                                                     TF_BFLOAT16, TF_DOUBLE};
// The V1 backprops' op definitions allow these only.
constexpr std::initializer_list<TF_DataType> kConvolution3DV1Types = {TF_FLOAT, TF_HALF,
                                                                       TF_DOUBLE};

// TensorFlow's MakeShape for a host-memory shape input (input_sizes, filter_sizes).
absl::StatusOr<std::vector<int64_t>> ShapeFromSizes(OpContext& context, int index) {
  VGPU_ASSIGN_OR_RETURN(TensorPtr sizes, context.Input(index));
  if (TF_NumDims(sizes.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shape must be a vector of {int32,int64}, got shape ", ShapeString(ShapeOf(sizes.get()))));
  }
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> values, context.HostIntegers(index));
  for (int64_t value : values) {
    if (value < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Dimension ", value, " must be >= 0"));
    }
  }
  return values;
}

// The shape of input `index`: of the sizes it holds (V2), or of the tensor itself (V1).
absl::StatusOr<std::vector<int64_t>> ShapeArgument(OpContext& context, int index,
                                                   bool from_tensor) {
  if (!from_tensor) return ShapeFromSizes(context, index);
  return context.InputShape(index);
}

// Conv3D: inputs (input, filter).
class Convolution3DOp : public ConvolutionKernel<Convolution3DOp, ConvKind::kConv3D> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [input, filter] = inputs;
    VGPU_ASSIGN_OR_RETURN(ConvolutionProblem p, ForwardProblem(ConvKind::kConv3D, attributes_,
                                                               input.get(), filter.get()));
    // An empty input gives zeros (only padding is convolved).
    return AllocateAndLaunchConvolution(context, convolution::kForward, attributes_, p, p.dtype,
                                        p.output_shape, input.get(), filter.get());
  }
};

// Conv3DBackpropInputV2 (inputs: input_sizes in host memory, filter, out_backprop) and
// Conv3DBackpropInput (kV1: inputs input, filter, out_backprop; the input's shape is used).
template <bool kV1>
class Convolution3DBackpropInputOp
    : public ConvolutionKernel<Convolution3DBackpropInputOp<kV1>, ConvKind::kConv3DBackprop> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr filter, context.Input(1));
    VGPU_ASSIGN_OR_RETURN(TensorPtr out_backprop, context.Input(2));
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> input_shape, ShapeArgument(context, 0, kV1));
    const TF_DataType dtype = TF_TensorType(out_backprop.get());
    VGPU_ASSIGN_OR_RETURN(
        ConvolutionProblem p,
        BackpropProblem("Conv3DBackpropInputOp", this->attributes_, /*depthwise=*/false, dtype,
                        std::move(input_shape), ShapeOf(filter.get()),
                        ShapeOf(out_backprop.get())));
    // An empty out_backprop or filter gives zeros.
    return AllocateAndLaunchConvolution(context, convolution::kBackwardInput, this->attributes_,
                                        p, dtype, p.input_shape, filter.get(),
                                        out_backprop.get());
  }
};

// Conv3DBackpropFilterV2 (inputs: input, filter_sizes in host memory, out_backprop) and
// Conv3DBackpropFilter (kV1: inputs input, filter, out_backprop; the filter's shape is used).
template <bool kV1>
class Convolution3DBackpropFilterOp
    : public ConvolutionKernel<Convolution3DBackpropFilterOp<kV1>, ConvKind::kConv3DBackprop> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr input, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(TensorPtr out_backprop, context.Input(2));
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> filter_shape, ShapeArgument(context, 1, kV1));
    const TF_DataType dtype = TF_TensorType(input.get());
    VGPU_ASSIGN_OR_RETURN(
        ConvolutionProblem p,
        BackpropProblem("Conv3DBackpropFilterOp", this->attributes_, /*depthwise=*/false, dtype,
                        ShapeOf(input.get()), std::move(filter_shape),
                        ShapeOf(out_backprop.get())));
    // An empty input or out_backprop gives zeros.
    return AllocateAndLaunchConvolution(context, convolution::kBackwardFilter,
                                        this->attributes_, p, dtype, p.filter_shape, input.get(),
                                        out_backprop.get());
  }
};

}  // namespace

void RegisterConvolution3DOps(const char* device_type) {
  RegisterKernelForTypes<Convolution3DOp>("Conv3D", device_type, "T", kConvolution3DTypes);
  DocumentOp("Conv3D", "NDHWC, NCDHW",
             "VALID/SAME padding, strides, dilations; grouped when the input depth is a "
             "multiple of the filter's in_channels.");
  RegisterKernelForTypes<Convolution3DBackpropInputOp<false>>(
      "Conv3DBackpropInputV2", device_type, "T", kConvolution3DTypes, {"input_sizes"});
  DocumentOp("Conv3DBackpropInputV2", "NDHWC, NCDHW", "Grouped convolutions too.");
  RegisterKernelForTypes<Convolution3DBackpropFilterOp<false>>(
      "Conv3DBackpropFilterV2", device_type, "T", kConvolution3DTypes, {"filter_sizes"});
  DocumentOp("Conv3DBackpropFilterV2", "NDHWC, NCDHW", "Grouped convolutions too.");
  RegisterKernelForTypes<Convolution3DBackpropInputOp<true>>(
      "Conv3DBackpropInput", device_type, "T", kConvolution3DV1Types);
  DocumentOp("Conv3DBackpropInput", "NDHWC",
             "Deprecated (GraphDef version 10); runs only in graphs of older versions.");
  RegisterKernelForTypes<Convolution3DBackpropFilterOp<true>>(
      "Conv3DBackpropFilter", device_type, "T", kConvolution3DV1Types);
  DocumentOp("Conv3DBackpropFilter", "NDHWC",
             "Deprecated (GraphDef version 10); runs only in graphs of older versions.");
}

}  // namespace vgpu::conv
