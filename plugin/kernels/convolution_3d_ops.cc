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

// Conv3DBackpropInputV2 (kOf kInput; inputs: input_sizes in host memory, filter, out_backprop),
// Conv3DBackpropFilterV2 (kOf kFilter; inputs: input, filter_sizes in host memory,
// out_backprop), and the deprecated Conv3DBackpropInput / Conv3DBackpropFilter (kV1: inputs
// input, filter, out_backprop; the differentiated operand's tensor gives its shape).
template <BackpropOf kOf, bool kV1>
class Convolution3DBackpropOp
    : public ConvolutionKernel<Convolution3DBackpropOp<kOf, kV1>, ConvKind::kConv3DBackprop> {
 public:
  absl::Status Compute(OpContext& context) {
    // Input 0 is the input and 1 the filter; of the differentiated one only the shape is read.
    constexpr int kShaped = kOf == BackpropOf::kInput ? 0 : 1;
    VGPU_ASSIGN_OR_RETURN(TensorPtr operand, context.Input(1 - kShaped));
    VGPU_ASSIGN_OR_RETURN(TensorPtr out_backprop, context.Input(2));
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ShapeArgument(context, kShaped, kV1));
    return ComputeConvolutionBackprop(
        context, kOf,
        kOf == BackpropOf::kInput ? "Conv3DBackpropInputOp" : "Conv3DBackpropFilterOp",
        this->attributes_, /*depthwise=*/false, std::move(shape), operand.get(),
        out_backprop.get());
  }
};

}  // namespace

void RegisterConvolution3DOps(const char* device_type) {
  RegisterKernelForTypes<Convolution3DOp>("Conv3D", device_type, "T", kConvolution3DTypes);
  DocumentOp("Conv3D", "NDHWC, NCDHW",
             "VALID/SAME padding, strides, dilations; grouped when the input depth is a "
             "multiple of the filter's in_channels.");
  RegisterKernelForTypes<Convolution3DBackpropOp<BackpropOf::kInput, false>>(
      "Conv3DBackpropInputV2", device_type, "T", kConvolution3DTypes, {"input_sizes"});
  DocumentOp("Conv3DBackpropInputV2", "NDHWC, NCDHW", "Grouped convolutions too.");
  RegisterKernelForTypes<Convolution3DBackpropOp<BackpropOf::kFilter, false>>(
      "Conv3DBackpropFilterV2", device_type, "T", kConvolution3DTypes, {"filter_sizes"});
  DocumentOp("Conv3DBackpropFilterV2", "NDHWC, NCDHW", "Grouped convolutions too.");
  RegisterKernelForTypes<Convolution3DBackpropOp<BackpropOf::kInput, true>>(
      "Conv3DBackpropInput", device_type, "T", kConvolution3DV1Types);
  DocumentOp("Conv3DBackpropInput", "NDHWC",
             "Deprecated (GraphDef version 10); runs only in graphs of older versions.");
  RegisterKernelForTypes<Convolution3DBackpropOp<BackpropOf::kFilter, true>>(
      "Conv3DBackpropFilter", device_type, "T", kConvolution3DV1Types);
  DocumentOp("Conv3DBackpropFilter", "NDHWC",
             "Deprecated (GraphDef version 10); runs only in graphs of older versions.");
}

}  // namespace vgpu::conv
