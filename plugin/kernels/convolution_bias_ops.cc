// TensorFlow's BiasAdd, BiasAddV1 and BiasAddGrad on the virtual GPU: validated as
// TensorFlow's kernels do, then launched with tensor descriptors for the value and the bias,
// created and destroyed per call (protocol/kernels/convolution.h, kBiasAdd / kBiasAddGrad).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/kernels/convolution_ops.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::conv {
namespace {

constexpr std::initializer_list<TF_DataType> kBiasTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                           TF_DOUBLE};

// Reads the optional data_format attribute (BiasAddV1 has none: NHWC).
absl::StatusOr<DataFormat> ReadDataFormat(OpConstruction& construction) {
  if (!construction.Has("data_format")) return DataFormat::kNHWC;
  VGPU_ASSIGN_OR_RETURN(std::string format, construction.String("data_format"));
  if (format == "NHWC") return DataFormat::kNHWC;
  if (format == "NCHW") return DataFormat::kNCHW;
  return absl::InvalidArgumentError("Invalid data format");
}

// The channel dimension of a value of `rank` (NCHW: 1 whatever the rank; NHWC: the last).
int ChannelDim(DataFormat format, size_t rank) {
  return format == DataFormat::kNCHW ? 1 : static_cast<int>(rank) - 1;
}

absl::Status LaunchBias(OpContext& context, KernelId kernel, DataFormat format,
                        const TensorDescriptorSettings& value_settings,
                        const TensorDescriptorSettings& bias_settings,
                        std::initializer_list<BufferArg> buffers) {
  convolution::BiasParams bias_params;
  bias_params.data_format = static_cast<int32_t>(format);
  return KernelLaunch(context)
      .Describe(value_settings)
      .Describe(bias_settings)
      .Buffers(buffers)
      .Param(bias_params)
      .Run(kernel);
}

// BiasAdd / BiasAddV1: inputs (value, bias). Its attributes_ are the data format.
class BiasAddOp : public WithAttributes<BiasAddOp, DataFormat, ReadDataFormat> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [value, bias] = inputs;
    const auto [value_shape, bias_shape] = ShapesOf(inputs);
    if (value_shape.size() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("Input tensor must be at least 2D: ", ShapeString(value_shape)));
    }
    if (bias_shape.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("Biases must be 1D: ", ShapeString(bias_shape)));
    }
    const int channel_dim = ChannelDim(attributes_, value_shape.size());
    if (bias_shape[0] != value_shape[channel_dim]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Must provide as many biases as the last dimension of the input tensor: ",
          ShapeString(bias_shape), " vs. ", ShapeString(value_shape)));
    }
    const TF_DataType dtype = TF_TensorType(value.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr out,
                          context.ForwardHeldOrAllocateOutput({{0, &inputs[0]}}, 0, dtype,
                                                              value_shape));
    if (TF_TensorElementCount(value.get()) == 0) return absl::OkStatus();
    VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings value_settings, TensorSettings(value.get()));
    VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings bias_settings, TensorSettings(bias.get()));
    return LaunchBias(context, convolution::kBiasAdd, attributes_, value_settings, bias_settings,
                      {BufferOf(value.get()), BufferOf(bias.get()), BufferOf(out.get())});
  }
};

// BiasAddGrad: input out_backprop; output the sum over every dimension but the channel one.
// Its attributes_ are the data format.
class BiasAddGradOp : public WithAttributes<BiasAddGradOp, DataFormat, ReadDataFormat> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr gradient, context.Input(0));
    const std::vector<int64_t> shape = ShapeOf(gradient.get());
    if (shape.size() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("Input tensor must be at least 2D: ", ShapeString(shape)));
    }
    const int64_t channels = shape[ChannelDim(attributes_, shape.size())];
    const TF_DataType dtype = TF_TensorType(gradient.get());
    const std::vector<int64_t> bias_shape = {channels};
    VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.AllocateOutput(0, dtype, bias_shape));
    if (channels == 0) return absl::OkStatus();
    // An empty gradient gives zeros; the kernel writes them.
    VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings gradient_settings,
                          TensorSettings(gradient.get()));
    VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings bias_settings,
                          TensorSettings(dtype, bias_shape));
    return LaunchBias(context, convolution::kBiasAddGrad, attributes_, gradient_settings,
                      bias_settings, {BufferOf(gradient.get()), BufferOf(out.get())});
  }
};

}  // namespace

void RegisterBiasOps(const char* device_type) {
  RegisterKernelForTypes<BiasAddOp>("BiasAdd", device_type, "T", kBiasTypes);
  DocumentOp("BiasAdd", "NHWC, NCHW", "Any rank >= 2; NCHW means the channels are dimension 1.");
  RegisterKernelForTypes<BiasAddOp>("BiasAddV1", device_type, "T", kBiasTypes);
  DocumentOp("BiasAddV1", "NHWC", "");
  RegisterKernelForTypes<BiasAddGradOp>("BiasAddGrad", device_type, "T", kBiasTypes);
  DocumentOp("BiasAddGrad", "NHWC, NCHW", "Sums in float for float16/bfloat16.");
}

}  // namespace vgpu::conv
