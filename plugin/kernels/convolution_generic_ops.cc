// TensorFlow's generic Conv op on the virtual GPU: a 2-D or 3-D convolution whose spatial rank
// follows from the input's rank and batch_dims (leading dimensions flattened into one batch),
// channels last or first (CHANNELS_LAST / CHANNELS_FIRST), groups = 1. Validated as
// TensorFlow's GPU ConvOp does (conv_ops_impl.h), then launched like Conv2D and Conv3D
// (convolution_ops.h). TensorFlow registers no gradient for it.
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/kernels/convolution_ops.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::conv {
namespace {

// TensorFlow's ConvOp checks of a per-dimension field (strides, dilation rates): `rank`
// values, else InvalidArgument StrCat(count_prefix, rank, count_suffix) (TensorFlow words the
// two fields' counts differently); 1 in the batch and `channel` dimensions, else
// InvalidArgument "Current implementation does not support <what> in the batch and depth
// dimensions.".
absl::Status CheckWindowField(const std::vector<int64_t>& values, int rank, int channel,
                              absl::string_view count_prefix, absl::string_view count_suffix,
                              absl::string_view what) {
  if (values.size() != static_cast<size_t>(rank)) {
    return absl::InvalidArgumentError(absl::StrCat(count_prefix, rank, count_suffix));
  }
  if (values[0] != 1 || values[channel] != 1) {
    return absl::InvalidArgumentError(absl::StrCat("Current implementation does not support ",
                                                   what, " in the batch and depth dimensions."));
  }
  return absl::OkStatus();
}

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

class GenericConvolutionOp {
 public:
  static absl::StatusOr<std::unique_ptr<GenericConvolutionOp>> Create(
      OpConstruction& construction) {
    auto op = std::make_unique<GenericConvolutionOp>();
    VGPU_ASSIGN_OR_RETURN(int64_t groups, construction.Int("groups"));
    if (groups != 1) {
      return absl::UnimplementedError("Grouped/Depthwise Convolutions are not supported yet.");
    }
    VGPU_ASSIGN_OR_RETURN(std::string format, construction.String("data_format"));
    if (format != "CHANNELS_LAST" && format != "CHANNELS_FIRST") {
      return absl::InvalidArgumentError(absl::StrCat("Unknown data format: ", format));
    }
    op->attributes_.data_format =
        format == "CHANNELS_LAST" ? DataFormat::kNHWC : DataFormat::kNCHW;
    VGPU_ASSIGN_OR_RETURN(op->batch_dims_, construction.Int("batch_dims"));
    VGPU_ASSIGN_OR_RETURN(op->strides_, construction.IntList("strides"));
    VGPU_ASSIGN_OR_RETURN(op->dilations_, construction.IntList("dilations"));
    if (construction.Has("explicit_paddings")) {
      VGPU_ASSIGN_OR_RETURN(op->attributes_.explicit_paddings,
                            construction.IntList("explicit_paddings"));
    }
    VGPU_ASSIGN_OR_RETURN(std::string padding, construction.String("padding"));
    op->attributes_.padding = padding == "VALID"  ? Padding::kValid
                              : padding == "SAME" ? Padding::kSame
                                                  : Padding::kExplicit;
    return op;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [input, filter] = inputs;
    auto [original_shape, filter_shape] = ShapesOf(inputs);
    const int64_t spatial_dims = static_cast<int64_t>(original_shape.size()) - 1 - batch_dims_;
    if (batch_dims_ < 1 || (spatial_dims != 2 && spatial_dims != 3)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "The input must have 2 or 3 spatial dimensions but got ", spatial_dims));
    }
    if (NumElements(filter_shape) == 0) {
      return absl::InvalidArgumentError(
          "filter must not have zero elements (i.e. all dimensions must be non-zero)");
    }
    // The leading batch_dims dimensions become one.
    std::vector<int64_t> input_shape = {1};
    for (int64_t i = 0; i < batch_dims_; ++i) input_shape[0] *= original_shape[i];
    input_shape.insert(input_shape.end(), original_shape.begin() + batch_dims_,
                       original_shape.end());
    if (filter_shape.size() != 4 && filter_shape.size() != 5) {
      return absl::InvalidArgumentError(
          absl::StrCat("The filter must be rank 4 or 5 but got ", filter_shape.size()));
    }
    if (static_cast<int64_t>(filter_shape.size()) != spatial_dims + 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "The filter must be rank ", spatial_dims + 2, " but got ", filter_shape.size()));
    }
    ConvAttributes a = attributes_;
    a.spatial_dims = static_cast<int>(spatial_dims);
    VGPU_RETURN_IF_ERROR(ReadWindow(a));
    const int rank = a.spatial_dims + 2;
    const int64_t in_depth = input_shape[ChannelDim(a.data_format, rank)];
    const int64_t patch_depth = filter_shape[rank - 2];
    if (in_depth > kInt32Max) return absl::InvalidArgumentError("Input depth too large");
    if (patch_depth > kInt32Max) return absl::InvalidArgumentError("Patch depth too large");
    if (patch_depth <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("filter depth must be stricly positive, got ", patch_depth));
    }
    if (in_depth != patch_depth) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Input depth must be equal to filter depth: ", in_depth, " vs ", patch_depth));
    }
    ConvolutionProblem p;
    p.dtype = TF_TensorType(input.get());
    std::vector<int64_t> output_shape = {input_shape[0]};
    if (a.data_format == DataFormat::kNCHW) output_shape.push_back(filter_shape[rank - 1]);
    for (int i = 0; i < a.spatial_dims; ++i) {
      const int64_t size = input_shape[SpatialDim(a.data_format, i)];
      if (size > kInt32Max || filter_shape[i] > kInt32Max) {
        return absl::InvalidArgumentError(
            absl::StrCat("Input spatial dimension ", i, " too large"));
      }
      VGPU_ASSIGN_OR_RETURN(p.windows[i], ComputeWindow(a, i, size, filter_shape[i]));
      output_shape.push_back(p.windows[i].output);
    }
    if (a.data_format == DataFormat::kNHWC) output_shape.push_back(filter_shape[rank - 1]);
    if (input_shape[0] > kInt32Max) return absl::InvalidArgumentError("Batch is too large");
    // The output keeps the input's leading batch dimensions.
    std::vector<int64_t> expanded_output(original_shape.begin(),
                                         original_shape.begin() + batch_dims_);
    expanded_output.insert(expanded_output.end(), output_shape.begin() + 1, output_shape.end());
    VGPU_ASSIGN_OR_RETURN(TensorPtr output,
                          context.AllocateOutput(0, p.dtype, expanded_output));
    if (NumElements(output_shape) == 0) return absl::OkStatus();
    // An empty input gives zeros (only padding is convolved); the kernel writes them.
    p.input_shape = std::move(input_shape);
    p.filter_shape = std::move(filter_shape);
    p.output_shape = std::move(output_shape);
    return LaunchConvolution(context, convolution::kForward, a, p,
                             {BufferOf(input.get()), BufferOf(filter.get()),
                              BufferOf(output.get())});
  }

 private:
  // The strides, dilations and paddings for `a`'s spatial rank, checked as TensorFlow's
  // ConvOp checks them once it knows that rank.
  absl::Status ReadWindow(ConvAttributes& a) const {
    const int rank = a.spatial_dims + 2;
    const int channel = ChannelDim(a.data_format, rank);
    VGPU_RETURN_IF_ERROR(CheckWindowField(strides_, rank, channel,
                                          "Sliding window strides field must specify ",
                                          " dimensions", "strides"));
    std::vector<int64_t> dilations = dilations_;
    if (dilations.empty()) dilations.assign(rank, 1);
    VGPU_RETURN_IF_ERROR(CheckWindowField(dilations, rank, channel,
                                          "Dilation rates field must specify", "dimensions",
                                          "dilation rates"));
    for (int i = 0; i < a.spatial_dims; ++i) {
      const int64_t stride = strides_[SpatialDim(a.data_format, i)];
      const int64_t dilation = dilations[SpatialDim(a.data_format, i)];
      if (stride <= 0) {
        return absl::InvalidArgumentError("Spatial strides should be larger than 0.");
      }
      if (dilation <= 0) {
        return absl::InvalidArgumentError("Dilated rates should be larger than 0.");
      }
      if (stride > kInt32Max || dilation > kInt32Max) {
        return absl::InvalidArgumentError("strides and dilations must fit in 32 bits");
      }
      a.strides[i] = stride;
      a.dilations[i] = dilation;
    }
    return CheckConvPadding(a);
  }

  ConvAttributes attributes_;  // data format, padding and explicit paddings
  int64_t batch_dims_ = 1;
  std::vector<int64_t> strides_, dilations_;
};

}  // namespace

void RegisterGenericConvolutionOps(const char* device_type) {
  RegisterKernelForTypes<GenericConvolutionOp>("Conv", device_type, "T",
                                               {TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE});
  DocumentOp("Conv", "CHANNELS_LAST, CHANNELS_FIRST",
             "2-D or 3-D from the input's rank and batch_dims; groups = 1 (as TensorFlow).");
}

}  // namespace vgpu::conv
