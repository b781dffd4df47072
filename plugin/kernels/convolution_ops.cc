// TensorFlow op kernels of the convolution family on the virtual GPU: the shared convolution
// machinery (attributes, shape rules, launch; convolution_ops.h) and the 2-D convolutions:
// Conv2D (grouped when the input depth is a multiple of the filter depth), its two backprops
// and their V2 variants, DepthwiseConv2dNative with its two backprops, and _FusedConv2D.
// Written as TensorFlow's cuDNN kernels are: validate attributes and shapes with TensorFlow's
// rules and messages, compute and allocate the output, then per call create and set tensor,
// filter and convolution descriptors (SAME/VALID resolved to explicit paddings) and launch
// (protocol/kernels/convolution.h). 3-D convolutions, the generic Conv op, MatMul, the bias ops
// and Einsum live in convolution_3d_ops.cc, convolution_generic_ops.cc,
// convolution_matmul_ops.cc, convolution_bias_ops.cc and convolution_einsum_ops.cc.
#include "plugin/kernels/convolution_ops.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/graph/fused_ops.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::conv {
namespace {

constexpr std::initializer_list<TF_DataType> kConvolutionTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                                   TF_DOUBLE};
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

std::vector<int64_t> ShapeFromFormat(DataFormat format, int64_t batch,
                                     absl::Span<const int64_t> spatial, int64_t channels) {
  std::vector<int64_t> shape = {batch};
  if (format == DataFormat::kNCHW) shape.push_back(channels);
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  if (format == DataFormat::kNHWC) shape.push_back(channels);
  return shape;
}

// The messages and error classes one kind of op uses for its stride and dilation attributes.
struct WindowRules {
  const char* strides_count;        // a strides list of the wrong length
  const char* dilations_count;      // a dilations list of the wrong length
  const char* batch_depth_strides;  // a batch or depth stride other than 1
  const char* batch_depth_dilations;
  bool batch_depth_unimplemented;   // those are Unimplemented (else InvalidArgument)
  const char* nonpositive_strides;
  bool dilations_first;             // dilations are checked before strides
};

WindowRules RulesOf(ConvKind kind) {
  constexpr const char* kStrides2D = "Sliding window strides field must specify 4 dimensions";
  constexpr const char* kDilations2D =
      "Sliding window dilations field must specify 4 dimensions";
  constexpr const char* kBatchStrides =
      "Current implementation does not yet support strides in the batch and depth dimensions.";
  constexpr const char* kBatchDilations2D =
      "Current implementation does not yet support dilations in the batch and depth "
      "dimensions.";
  constexpr const char* kBatchDilations3D =
      "Current implementation does not yet support dilation rates in the batch and depth "
      "dimensions.";
  constexpr const char* kRowCol = "Row and column strides should be larger than 0.";
  switch (kind) {
    case ConvKind::kConv2D:
    case ConvKind::kConv2DBackprop:
      return {kStrides2D, kDilations2D, kBatchStrides, kBatchDilations2D, true, kRowCol, false};
    case ConvKind::kDepthwise:
      return {kStrides2D, kDilations2D, kBatchStrides, kBatchDilations2D, false, kRowCol, false};
    case ConvKind::kConv3D:
    case ConvKind::kConv3DBackprop:
      return {"Sliding window strides field must specify 5 dimensions",
              "Dilation rates field must specify 5 dimensions", kBatchStrides,
              kBatchDilations3D, false, "Spatial strides should be larger than 0.",
              kind == ConvKind::kConv3DBackprop};
  }
  return {};
}

}  // namespace

int ChannelDim(DataFormat format, int rank) {
  return format == DataFormat::kNHWC ? rank - 1 : 1;
}

int SpatialDim(DataFormat format, int spatial) {
  return format == DataFormat::kNHWC ? spatial + 1 : spatial + 2;
}

absl::Status CheckConvPadding(const ConvAttributes& a) {
  const int rank = a.spatial_dims + 2;
  if (a.padding == Padding::kExplicit) {
    if (a.explicit_paddings.size() != static_cast<size_t>(2 * rank)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "explicit_paddings attribute must contain ", 2 * rank, " values, but got: ",
          a.explicit_paddings.size()));
    }
    for (int64_t value : a.explicit_paddings) {
      if (value < 0) {
        return absl::InvalidArgumentError(
            "All elements of explicit_paddings must be nonnegative");
      }
      if (value > kInt32Max) return absl::InvalidArgumentError("explicit padding too large");
    }
    const int channel = ChannelDim(a.data_format, rank);
    if (a.explicit_paddings[0] != 0 || a.explicit_paddings[1] != 0 ||
        a.explicit_paddings[2 * channel] != 0 || a.explicit_paddings[2 * channel + 1] != 0) {
      return absl::InvalidArgumentError(
          "Nonzero explicit padding in the batch or depth dimensions is not supported");
    }
  } else if (!a.explicit_paddings.empty()) {
    return absl::InvalidArgumentError(
        "explicit_paddings attribute must be empty if the padding attribute is not EXPLICIT");
  }
  return absl::OkStatus();
}

absl::StatusOr<ConvAttributes> ReadConvAttributes(OpConstruction& construction, ConvKind kind) {
  ConvAttributes a;
  const bool three_d = kind == ConvKind::kConv3D || kind == ConvKind::kConv3DBackprop;
  a.spatial_dims = three_d ? 3 : 2;
  const int rank = a.spatial_dims + 2;
  if (construction.Has("data_format")) {  // the V1 Conv3DBackprop ops have none: NDHWC
    VGPU_ASSIGN_OR_RETURN(std::string format, construction.String("data_format"));
    if (format == (three_d ? "NDHWC" : "NHWC")) {
      a.data_format = DataFormat::kNHWC;
    } else if (format == (three_d ? "NCDHW" : "NCHW")) {
      a.data_format = DataFormat::kNCHW;
    } else {
      return absl::InvalidArgumentError("Invalid data format");
    }
  }
  VGPU_ASSIGN_OR_RETURN(a.padding, ReadPadding(construction, "Unknown padding type: "));
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> strides, construction.IntList("strides"));
  std::vector<int64_t> dilations(rank, 1);
  if (construction.Has("dilations")) {
    VGPU_ASSIGN_OR_RETURN(dilations, construction.IntList("dilations"));
  }
  if (construction.Has("explicit_paddings")) {
    VGPU_ASSIGN_OR_RETURN(a.explicit_paddings, construction.IntList("explicit_paddings"));
  }

  const WindowRules rules = RulesOf(kind);
  const int channel = ChannelDim(a.data_format, rank);
  auto batch_or_depth = [&](const char* message) {
    return rules.batch_depth_unimplemented ? absl::UnimplementedError(message)
                                           : absl::InvalidArgumentError(message);
  };
  auto check_strides = [&]() -> absl::Status {
    if (strides.size() != static_cast<size_t>(rank)) {
      return absl::InvalidArgumentError(rules.strides_count);
    }
    if (strides[0] != 1 || strides[channel] != 1) {
      return batch_or_depth(rules.batch_depth_strides);
    }
    for (int i = 0; i < a.spatial_dims; ++i) {
      if (strides[SpatialDim(a.data_format, i)] <= 0) {
        return absl::InvalidArgumentError(rules.nonpositive_strides);
      }
    }
    return absl::OkStatus();
  };
  auto check_dilations = [&]() -> absl::Status {
    if (dilations.size() != static_cast<size_t>(rank)) {
      return absl::InvalidArgumentError(rules.dilations_count);
    }
    if (dilations[0] != 1 || dilations[channel] != 1) {
      return batch_or_depth(rules.batch_depth_dilations);
    }
    for (int i = 0; i < a.spatial_dims; ++i) {
      if (dilations[SpatialDim(a.data_format, i)] <= 0) {
        return absl::InvalidArgumentError("Dilated rates should be larger than 0.");
      }
    }
    return absl::OkStatus();
  };
  if (kind == ConvKind::kConv2D && dilations.size() != static_cast<size_t>(rank)) {
    return absl::InvalidArgumentError(rules.dilations_count);  // InitConv2DParameters' order
  }
  if (rules.dilations_first) VGPU_RETURN_IF_ERROR(check_dilations());
  VGPU_RETURN_IF_ERROR(check_strides());
  if (!rules.dilations_first) VGPU_RETURN_IF_ERROR(check_dilations());
  for (int i = 0; i < a.spatial_dims; ++i) {
    a.strides[i] = strides[SpatialDim(a.data_format, i)];
    a.dilations[i] = dilations[SpatialDim(a.data_format, i)];
    if (a.strides[i] > kInt32Max || a.dilations[i] > kInt32Max) {
      return absl::InvalidArgumentError("strides and dilations must fit in 32 bits");
    }
  }
  VGPU_RETURN_IF_ERROR(CheckConvPadding(a));
  return a;
}

absl::StatusOr<SpatialWindow> ComputeWindow(const ConvAttributes& a, int spatial, int64_t input,
                                            int64_t filter) {
  const int64_t stride = a.strides[spatial];
  const int64_t dilation = a.dilations[spatial];
  // Bounds that keep the arithmetic below far from overflow.
  if (filter > kInt32Max) return absl::InvalidArgumentError("filter too large");
  if (input > std::numeric_limits<int64_t>::max() / 4) {
    return absl::InvalidArgumentError("input too large");
  }
  SpatialWindow window;
  const int64_t effective_filter = (filter - 1) * dilation + 1;
  switch (a.padding) {
    case Padding::kValid:
      window.output = (input - effective_filter + stride) / stride;
      break;
    case Padding::kExplicit: {
      const int index = SpatialDim(a.data_format, spatial);
      window.pad_before = a.explicit_paddings[2 * index];
      window.pad_after = a.explicit_paddings[2 * index + 1];
      window.output =
          (input + window.pad_before + window.pad_after - effective_filter + stride) / stride;
      break;
    }
    case Padding::kSame: {
      window.output = (input + stride - 1) / stride;
      const int64_t needed =
          std::max<int64_t>(0, (window.output - 1) * stride + effective_filter - input);
      window.pad_before = needed / 2;  // odd totals pad one more after, as TensorFlow does
      window.pad_after = needed - window.pad_before;
      break;
    }
  }
  if (window.output < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Computed output size would be negative: ", window.output, " [input_size: ", input,
        ", effective_filter_size: ", effective_filter, ", stride: ", stride, "]"));
  }
  if (window.pad_before > kInt32Max || window.pad_after > kInt32Max) {
    return absl::InvalidArgumentError("padding too large");
  }
  return window;
}

absl::StatusOr<ConvolutionProblem> ForwardProblem(ConvKind kind, const ConvAttributes& a,
                                                  const TF_Tensor* input,
                                                  const TF_Tensor* filter) {
  const TF_DataType dtype = TF_TensorType(input);
  std::vector<int64_t> input_shape = ShapeOf(input);
  std::vector<int64_t> filter_shape = ShapeOf(filter);
  const int rank = a.spatial_dims + 2;
  const bool depthwise = kind == ConvKind::kDepthwise;
  const bool three_d = kind == ConvKind::kConv3D;
  if (input_shape.size() != static_cast<size_t>(rank)) {
    if (three_d) return absl::InvalidArgumentError("input must be 5-dimensional");
    return absl::InvalidArgumentError(
        depthwise ? absl::StrCat("input must be 4-dimensional", ShapeString(input_shape))
                  : absl::StrCat("convolution input must be 4-dimensional: ",
                                 ShapeString(input_shape)));
  }
  if (filter_shape.size() != static_cast<size_t>(rank)) {
    if (three_d) return absl::InvalidArgumentError("filter must be 5-dimensional");
    return absl::InvalidArgumentError(absl::StrCat(
        depthwise ? "filter must be 4-dimensional: " : "convolution filter must be "
                                                       "4-dimensional: ",
        ShapeString(filter_shape)));
  }
  const int64_t in_depth = input_shape[ChannelDim(a.data_format, rank)];
  const int64_t filter_depth = filter_shape[rank - 2];
  int64_t out_depth = filter_shape[rank - 1];
  ConvolutionProblem p;
  p.dtype = dtype;
  p.depthwise = depthwise;
  if (depthwise) {
    if (in_depth != filter_depth) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input and filter must have the same depth: ", in_depth, " vs ", filter_depth));
    }
    if (__builtin_mul_overflow(in_depth, filter_shape[3], &out_depth)) {
      return absl::InvalidArgumentError("Output depth too large");
    }
  } else if (three_d) {
    if (filter_depth == 0) return absl::InvalidArgumentError("filter_depth must be non-zero");
    if (in_depth % filter_depth != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Input depth must be evenly divisible by filter depth: ", in_depth,
                       " vs ", filter_depth));
    }
    if (NumElements(filter_shape) == 0) {
      return absl::InvalidArgumentError(
          "filter must not have zero elements (i.e. all dimensions must be non-zero)");
    }
    p.groups = in_depth / filter_depth;
  } else {
    for (int i = 0; i < rank - 1; ++i) {
      if (filter_shape[i] > kInt32Max) return absl::InvalidArgumentError("filter too large");
    }
    if (in_depth > kInt32Max) return absl::InvalidArgumentError("Input depth too large");
    if (filter_depth > kInt32Max) return absl::InvalidArgumentError("Patch depth too large");
    if (filter_depth <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("filter depth must be stricly positive, got ", filter_depth));
    }
    if (in_depth % filter_depth != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("input depth must be evenly divisible by filter depth: ", in_depth,
                       " vs ", filter_depth));
    }
    p.groups = in_depth / filter_depth;
  }
  if (!three_d) {
    if (input_shape[SpatialDim(a.data_format, 0)] > kInt32Max) {
      return absl::InvalidArgumentError("Input rows too large");
    }
    if (input_shape[SpatialDim(a.data_format, 1)] > kInt32Max) {
      return absl::InvalidArgumentError("Input cols too large");
    }
    if (!depthwise && input_shape[0] > kInt32Max) {
      return absl::InvalidArgumentError("batch is too large");
    }
  }
  std::vector<int64_t> output_spatial(a.spatial_dims);
  for (int i = 0; i < a.spatial_dims; ++i) {
    VGPU_ASSIGN_OR_RETURN(
        p.windows[i],
        ComputeWindow(a, i, input_shape[SpatialDim(a.data_format, i)], filter_shape[i]));
    output_spatial[i] = p.windows[i].output;
  }
  // TensorFlow's CPU kernel's rule (cuDNN rejects such a grouped convolution).
  if (p.groups > 1 && out_depth % p.groups != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("output depth must be evenly divisible by number of groups: ", out_depth,
                     " vs ", p.groups));
  }
  p.output_shape = ShapeFromFormat(a.data_format, input_shape[0], output_spatial, out_depth);
  p.input_shape = std::move(input_shape);
  p.filter_shape = std::move(filter_shape);
  return p;
}

absl::StatusOr<ConvolutionProblem> BackpropProblem(const char* label, const ConvAttributes& a,
                                                   bool depthwise, TF_DataType dtype,
                                                   std::vector<int64_t> input_shape,
                                                   std::vector<int64_t> filter_shape,
                                                   std::vector<int64_t> out_backprop_shape) {
  const int rank = a.spatial_dims + 2;
  const size_t expected_rank = rank;
  if (input_shape.size() != expected_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": input must be ", rank, "-dimensional"));
  }
  if (filter_shape.size() != expected_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": filter must be ", rank, "-dimensional"));
  }
  if (out_backprop_shape.size() != expected_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": out_backprop must be ", rank, "-dimensional"));
  }
  if (input_shape[0] != out_backprop_shape[0]) {
    if (depthwise) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": input and out_backprop must have the same batch size"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        label, ": input and out_backprop must have the same batch size. Input batch: ",
        input_shape[0], ", outbackprop batch: ", out_backprop_shape[0], ", batch_dim: 0"));
  }
  const int channel = ChannelDim(a.data_format, rank);
  const int64_t in_depth = input_shape[channel];
  const int64_t out_depth = out_backprop_shape[channel];
  ConvolutionProblem p;
  p.dtype = dtype;
  p.depthwise = depthwise;
  if (depthwise) {
    if (in_depth != filter_shape[2]) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": input and filter must have the same in_depth"));
    }
    int64_t product = 0;
    if (__builtin_mul_overflow(in_depth, filter_shape[3], &product) || product != out_depth) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": depth_multiplier * in_depth not equal to out_depth"));
    }
  } else {
    const int64_t filter_depth = filter_shape[rank - 2];
    if (filter_depth <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": filter depth must be strictly greated than zero"));
    }
    if (in_depth % filter_depth != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": input depth must be evenly divisible by filter depth"));
    }
    if (filter_shape[rank - 1] != out_depth) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": filter and out_backprop must have the same out_depth"));
    }
    p.groups = in_depth / filter_depth;
    if (p.groups > 1 && out_depth % p.groups != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": output depth must be evenly divisible by number of groups: ",
                       out_depth, " vs ", p.groups));
    }
  }
  for (int i = 0; i < a.spatial_dims; ++i) {
    const int image_dim = SpatialDim(a.data_format, i);
    VGPU_ASSIGN_OR_RETURN(p.windows[i],
                          ComputeWindow(a, i, input_shape[image_dim], filter_shape[i]));
    const int64_t actual = out_backprop_shape[image_dim];
    const int64_t computed = p.windows[i].output;
    if (actual == computed) continue;
    if (depthwise) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": Number of ", i == 0 ? "rows" : "cols",
          " of out_backprop doesn't match computed: actual = ", actual, ", computed = ",
          computed));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        label, ": Size of out_backprop doesn't match computed: actual = ", actual,
        ", computed = ", computed, " spatial_dim: ", image_dim, " input: ",
        input_shape[image_dim], " filter: ", filter_shape[i], " output: ", actual,
        " stride: ", a.strides[i], " dilation: ", a.dilations[i]));
  }
  p.input_shape = std::move(input_shape);
  p.filter_shape = std::move(filter_shape);
  p.output_shape = std::move(out_backprop_shape);
  return p;
}

absl::Status LaunchConvolution(OpContext& context, KernelId kernel, const ConvAttributes& a,
                               const ConvolutionProblem& p,
                               std::initializer_list<BufferArg> buffers, const TF_Tensor* bias,
                               const FusedBiasActivation* fused) {
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings x_settings,
                        TensorSettings(p.dtype, p.input_shape));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings y_settings,
                        TensorSettings(p.dtype, p.output_shape));
  if (p.groups > kInt32Max) {
    return absl::InvalidArgumentError(absl::StrCat("too many groups: ", p.groups));
  }
  FilterDescriptorSettings filter_settings;
  filter_settings.dtype = x_settings.dtype;
  filter_settings.rank = static_cast<int32_t>(p.filter_shape.size());
  for (size_t i = 0; i < p.filter_shape.size(); ++i) filter_settings.dims[i] = p.filter_shape[i];
  ConvolutionDescriptorSettings conv_settings;
  conv_settings.data_format = a.data_format;
  conv_settings.spatial_dims = a.spatial_dims;
  conv_settings.depthwise = p.depthwise ? 1 : 0;
  conv_settings.group_count = static_cast<int32_t>(p.groups);
  // The windows in order (depth,) height, width: the last two are the rows and the columns.
  const int rows = a.spatial_dims - 2, cols = a.spatial_dims - 1;
  conv_settings.pad_top = static_cast<int32_t>(p.windows[rows].pad_before);
  conv_settings.pad_bottom = static_cast<int32_t>(p.windows[rows].pad_after);
  conv_settings.pad_left = static_cast<int32_t>(p.windows[cols].pad_before);
  conv_settings.pad_right = static_cast<int32_t>(p.windows[cols].pad_after);
  conv_settings.stride_h = static_cast<int32_t>(a.strides[rows]);
  conv_settings.stride_w = static_cast<int32_t>(a.strides[cols]);
  conv_settings.dilation_h = static_cast<int32_t>(a.dilations[rows]);
  conv_settings.dilation_w = static_cast<int32_t>(a.dilations[cols]);
  if (a.spatial_dims == 3) {
    conv_settings.pad_front = static_cast<int32_t>(p.windows[0].pad_before);
    conv_settings.pad_back = static_cast<int32_t>(p.windows[0].pad_after);
    conv_settings.stride_d = static_cast<int32_t>(a.strides[0]);
    conv_settings.dilation_d = static_cast<int32_t>(a.dilations[0]);
  }

  KernelLaunch launch(context);
  launch.Describe(x_settings).Describe(filter_settings).Describe(conv_settings).Describe(y_settings);
  if (fused != nullptr) DescribeEpilogue(launch, bias, *fused);
  return launch.Buffers(buffers).Run(kernel);
}

absl::Status AllocateAndLaunchConvolution(OpContext& context, KernelId kernel,
                                          const ConvAttributes& a, const ConvolutionProblem& p,
                                          TF_DataType dtype,
                                          absl::Span<const int64_t> output_shape,
                                          const TF_Tensor* first, const TF_Tensor* second) {
  VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.AllocateOutput(0, dtype, output_shape));
  if (NumElements(output_shape) == 0) return absl::OkStatus();
  return LaunchConvolution(context, kernel, a, p,
                           {BufferOf(first), BufferOf(second), BufferOf(output.get())});
}

absl::Status ComputeConvolutionBackprop(OpContext& context, BackpropOf of, const char* label,
                                        const ConvAttributes& a, bool depthwise,
                                        std::vector<int64_t> shape, const TF_Tensor* operand,
                                        const TF_Tensor* out_backprop) {
  const bool of_input = of == BackpropOf::kInput;
  const TF_DataType dtype = TF_TensorType(of_input ? out_backprop : operand);
  std::vector<int64_t> operand_shape = ShapeOf(operand);
  std::vector<int64_t>& input_shape = of_input ? shape : operand_shape;
  std::vector<int64_t>& filter_shape = of_input ? operand_shape : shape;
  VGPU_ASSIGN_OR_RETURN(ConvolutionProblem p,
                        BackpropProblem(label, a, depthwise, dtype, std::move(input_shape),
                                        std::move(filter_shape), ShapeOf(out_backprop)));
  return AllocateAndLaunchConvolution(
      context, of_input ? convolution::kBackwardInput : convolution::kBackwardFilter, a, p, dtype,
      of_input ? p.input_shape : p.filter_shape, operand, out_backprop);
}

namespace {

// The values of a host-memory shape input of a 2-D op (input_sizes, filter_sizes), which must
// be a vector of non-negative sizes.
absl::StatusOr<std::vector<int64_t>> ShapeInput(OpContext& context, int index, const char* label,
                                                const char* name) {
  VGPU_ASSIGN_OR_RETURN(TensorPtr sizes, context.Input(index));
  if (TF_NumDims(sizes.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": ", name,
                                                   " input must be 1-dim, not ",
                                                   TF_NumDims(sizes.get())));
  }
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> values, context.HostIntegers(index));
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Dimension ", i, " of ", name, " must be >= 0, got ", values[i]));
    }
  }
  return values;
}

// Conv2D's and _FusedConv2D's output 0 (`p`'s dtype and output shape), or null when it is empty
// and nothing is to be launched. A non-empty input with an empty filter is InvalidArgument, as
// in TensorFlow; an empty input gives zeros (only padding is convolved), which the kernel
// writes.
absl::StatusOr<TensorPtr> AllocateForwardOutput(OpContext& context, const ConvolutionProblem& p) {
  VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.AllocateOutput(0, p.dtype, p.output_shape));
  if (NumElements(p.output_shape) == 0) return TensorPtr();
  if (NumElements(p.input_shape) != 0 && NumElements(p.filter_shape) == 0) {
    return absl::InvalidArgumentError(
        "filter must not have zero elements (i.e. all dimensions must be non-zero)");
  }
  return output;
}

// Conv2D (kKind kConv2D) and DepthwiseConv2dNative (kDepthwise): inputs (input, filter).
template <ConvKind kKind>
class ConvolutionOp : public ConvolutionKernel<ConvolutionOp<kKind>, kKind> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [input, filter] = inputs;
    VGPU_ASSIGN_OR_RETURN(ConvolutionProblem p,
                          ForwardProblem(kKind, attributes_, input.get(), filter.get()));
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, AllocateForwardOutput(context, p));
    if (output == nullptr) return absl::OkStatus();
    return LaunchConvolution(context, convolution::kForward, attributes_, p,
                             {BufferOf(input.get()), BufferOf(filter.get()),
                              BufferOf(output.get())});
  }

 protected:
  using ConvolutionKernel<ConvolutionOp<kKind>, kKind>::attributes_;
};

// What distinguishes the 2-D backprop ops sharing one kernel class.
struct Conv2DBackprop {
  static constexpr ConvKind kKind = ConvKind::kConv2DBackprop;
  static constexpr bool kDepthwise = false;
};
struct DepthwiseBackprop {
  static constexpr ConvKind kKind = ConvKind::kDepthwise;
  static constexpr bool kDepthwise = true;
};

// Conv2DBackpropInput and DepthwiseConv2dNativeBackpropInput (kOf kInput; inputs: input_sizes
// in host memory, filter, out_backprop), Conv2DBackpropFilter and
// DepthwiseConv2dNativeBackpropFilter (kOf kFilter; inputs: input, filter_sizes in host memory,
// out_backprop), and Conv2DBackpropInputV2 / Conv2DBackpropFilterV2 (kShapeFromTensor: inputs
// input, filter, out_backprop; of the differentiated operand only the shape is used).
template <typename Op, BackpropOf kOf, bool kShapeFromTensor = false>
class ConvolutionBackpropOp
    : public ConvolutionKernel<ConvolutionBackpropOp<Op, kOf, kShapeFromTensor>, Op::kKind> {
 public:
  static constexpr bool kOfInput = kOf == BackpropOf::kInput;
  static constexpr const char* kLabel =
      kOfInput ? (Op::kDepthwise ? "DepthwiseConv2DBackpropInput"
                                 : (kShapeFromTensor ? "Conv2DBackpropInputV2"
                                                     : "Conv2DBackpropInput"))
               : (Op::kDepthwise ? "DepthwiseConv2DBackpropFilter"
                                 : (kShapeFromTensor ? "Conv2DBackpropFilterV2"
                                                     : "Conv2DBackpropFilter"));

  absl::Status Compute(OpContext& context) {
    // Input 0 is the input and 1 the filter; of the differentiated one only the shape is read.
    constexpr int kShaped = kOfInput ? 0 : 1;
    VGPU_ASSIGN_OR_RETURN(TensorPtr operand, context.Input(1 - kShaped));
    VGPU_ASSIGN_OR_RETURN(TensorPtr out_backprop, context.Input(2));
    std::vector<int64_t> shape;
    if constexpr (kShapeFromTensor) {
      VGPU_ASSIGN_OR_RETURN(shape, context.InputShape(kShaped));
    } else if constexpr (kOfInput) {
      VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                            ShapeInput(context, 0, "Conv2DBackpropInput", "input_sizes"));
      VGPU_ASSIGN_OR_RETURN(shape, InputShape(sizes, ShapeOf(operand.get()),
                                              ShapeOf(out_backprop.get())));
    } else {
      VGPU_ASSIGN_OR_RETURN(shape, ShapeInput(context, 1, "Conv2DBackpropFilter", "filter_sizes"));
    }
    return ComputeConvolutionBackprop(context, kOf, kLabel, attributes_, Op::kDepthwise,
                                      std::move(shape), operand.get(), out_backprop.get());
  }

 private:
  // TensorFlow's Conv2DBackpropComputeInputShape: input_sizes holds 4 values (the shape), or
  // for Conv2DBackpropInput 2 values (height and width; batch and depth from the operands).
  absl::StatusOr<std::vector<int64_t>> InputShape(const std::vector<int64_t>& sizes,
                                                  const std::vector<int64_t>& filter_shape,
                                                  const std::vector<int64_t>& out_backprop_shape) {
    if (sizes.size() == 4 || Op::kDepthwise) return sizes;
    if (sizes.size() == 2 && filter_shape.size() == 4 && out_backprop_shape.size() == 4) {
      return ShapeFromFormat(attributes_.data_format, out_backprop_shape[0], sizes,
                             filter_shape[2]);
    }
    if (out_backprop_shape.size() != 4) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input_sizes must be 4-dimensional, got: ", out_backprop_shape.size()));
    }
    if (filter_shape.size() != 4) {
      return absl::InvalidArgumentError(absl::StrCat(kLabel, ": filter must be 4-dimensional"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "Conv2DBackpropInput requires input_sizes to contain 4 values or 2 values, but got: ",
        sizes.size()));
  }

 protected:
  using ConvolutionKernel<ConvolutionBackpropOp<Op, kOf, kShapeFromTensor>,
                          Op::kKind>::attributes_;
};

// _FusedConv2D with fused_ops BiasAdd(+Relu/Relu6), which Grappler's remapper substitutes for
// Conv2D + BiasAdd + Relu on GPU devices: inputs (input, filter, bias, host_args...). Also the
// plugin's _VgpuFusedConv2D, the same fusion for bfloat16 (graph/fused_ops.h).
class FusedConvolutionOp {
 public:
  static absl::StatusOr<std::unique_ptr<FusedConvolutionOp>> Create(
      OpConstruction& construction) {
    auto op = std::make_unique<FusedConvolutionOp>();
    VGPU_ASSIGN_OR_RETURN(op->attributes_, ReadConvAttributes(construction, ConvKind::kConv2D));
    if (construction.Has("filter_format")) {
      VGPU_ASSIGN_OR_RETURN(std::string filter_format, construction.String("filter_format"));
      if (filter_format != "HWIO") {
        return absl::UnimplementedError(absl::StrCat(
            "_FusedConv2D on the virtual GPU supports only HWIO filters, got ", filter_format));
      }
    }
    VGPU_ASSIGN_OR_RETURN(op->fused_, ReadFusedBiasActivation(construction, {"Relu", "Relu6"}));
    return op;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<3>());
    const auto& [input, filter, bias] = inputs;
    VGPU_ASSIGN_OR_RETURN(ConvolutionProblem p, ForwardProblem(ConvKind::kConv2D, attributes_,
                                                               input.get(), filter.get()));
    const std::vector<int64_t> bias_shape = ShapeOf(bias.get());
    const int64_t out_depth = p.filter_shape[3];
    if (bias_shape.size() != 1 || bias_shape[0] != out_depth ||
        TF_TensorType(bias.get()) != p.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "_FusedConv2D: the bias must be a vector of the output depth ", out_depth, ", got ",
          ShapeString(bias_shape)));
    }
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, AllocateForwardOutput(context, p));
    if (output == nullptr) return absl::OkStatus();
    return LaunchConvolution(context, convolution::kForwardBiasActivation, attributes_, p,
                             {BufferOf(input.get()), BufferOf(filter.get()),
                              BufferOf(bias.get()), BufferOf(output.get())},
                             bias.get(), &fused_);
  }

 private:
  ConvAttributes attributes_;
  FusedBiasActivation fused_;
};

// The values of a list(string) attribute.
absl::StatusOr<std::vector<std::string>> StringList(OpConstruction& construction,
                                                    const char* name) {
  ScopedTfStatus status;
  int32_t count = 0;
  int32_t total_size = 0;
  TF_OpKernelConstruction_GetAttrSize(construction.raw(), name, &count, &total_size,
                                      status.get());
  VGPU_RETURN_IF_ERROR(status.ToStatus());
  if (count <= 0) return std::vector<std::string>();
  std::vector<char*> values(count);
  std::vector<size_t> lengths(count);
  std::vector<char> storage(std::max<int32_t>(total_size, 1));
  TF_OpKernelConstruction_GetAttrStringList(construction.raw(), name, values.data(),
                                            lengths.data(), count, storage.data(),
                                            storage.size(), status.get());
  VGPU_RETURN_IF_ERROR(status.ToStatus());
  std::vector<std::string> strings;
  for (int32_t i = 0; i < count; ++i) strings.emplace_back(values[i], lengths[i]);
  return strings;
}

}  // namespace

absl::StatusOr<FusedBiasActivation> ReadFusedBiasActivation(
    OpConstruction& construction, std::initializer_list<const char*> activations) {
  VGPU_ASSIGN_OR_RETURN(std::vector<std::string> fused_ops,
                        StringList(construction, "fused_ops"));
  VGPU_ASSIGN_OR_RETURN(int64_t num_args, construction.Int("num_args"));
  auto unsupported = [&] {
    return absl::UnimplementedError(absl::StrCat(
        "Unsupported fusion on the virtual GPU: [", absl::StrJoin(fused_ops, ","), "]"));
  };
  if (fused_ops.empty() || fused_ops.size() > 2 || fused_ops[0] != "BiasAdd") {
    return unsupported();
  }
  if (num_args != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Fused BiasAdd must have one extra argument: bias, got ", num_args));
  }
  FusedBiasActivation fused;
  if (fused_ops.size() == 2) {
    const std::string& name = fused_ops[1];
    bool allowed = false;
    for (const char* a : activations) allowed = allowed || name == a;
    if (!allowed) return unsupported();
    if (name == "Relu") fused.activation = ActivationMode::kRelu;
    if (name == "Relu6") fused.activation = ActivationMode::kRelu6;
    if (name == "Sigmoid") fused.activation = ActivationMode::kSigmoid;
    if (name == "Tanh") fused.activation = ActivationMode::kTanh;
  }
  return fused;
}

KernelLaunch& DescribeEpilogue(KernelLaunch& launch, const TF_Tensor* bias,
                               const FusedBiasActivation& fused) {
  launch.DescribeTensor(bias);
  if (fused.activation.has_value()) {
    ActivationDescriptorSettings activation_settings;
    activation_settings.mode = *fused.activation;
    activation_settings.dtype = ToDType(TF_TensorType(bias)).value_or(DType::kFloat32);
    launch.Describe(activation_settings);
  }
  return launch;
}

void RegisterConvolution2DOps(const char* device_type) {
  RegisterKernelForTypes<ConvolutionOp<ConvKind::kConv2D>>("Conv2D", device_type, "T",
                                                           kConvolutionTypes);
  DocumentOp("Conv2D", "NHWC, NCHW",
             "VALID/SAME/EXPLICIT padding, strides, dilations; grouped when the input depth is "
             "a multiple of the filter's in_channels (Keras Conv2D(groups=g)).");
  RegisterKernelForTypes<ConvolutionBackpropOp<Conv2DBackprop, BackpropOf::kInput>>(
      "Conv2DBackpropInput", device_type, "T", kConvolutionTypes, {"input_sizes"});
  DocumentOp("Conv2DBackpropInput", "NHWC, NCHW",
             "input_sizes: 4 values, or 2 (height, width); grouped convolutions too.");
  RegisterKernelForTypes<ConvolutionBackpropOp<Conv2DBackprop, BackpropOf::kFilter>>(
      "Conv2DBackpropFilter", device_type, "T", kConvolutionTypes, {"filter_sizes"});
  DocumentOp("Conv2DBackpropFilter", "NHWC, NCHW", "Grouped convolutions too.");
  // The V2 backprops take the differentiated operand's tensor instead of its sizes.
  RegisterKernelForTypes<ConvolutionBackpropOp<Conv2DBackprop, BackpropOf::kInput, true>>(
      "Conv2DBackpropInputV2", device_type, "T", kConvolutionTypes);
  RegisterKernelForTypes<ConvolutionBackpropOp<Conv2DBackprop, BackpropOf::kFilter, true>>(
      "Conv2DBackpropFilterV2", device_type, "T", kConvolutionTypes);
  for (auto [op, operand] : {std::pair{"Conv2DBackpropInputV2", "input"},
                             std::pair{"Conv2DBackpropFilterV2", "filter"}}) {
    DocumentOp(op, "NHWC, NCHW",
               absl::StrCat("Takes the ", operand, " tensor instead of its sizes (only its shape "
                            "is read). TensorFlow itself has no CPU or GPU kernel for it.")
                   .c_str());
  }
  RegisterKernelForTypes<ConvolutionOp<ConvKind::kDepthwise>>(
      "DepthwiseConv2dNative", device_type, "T", kConvolutionTypes);
  DocumentOp("DepthwiseConv2dNative", "NHWC, NCHW",
             "Dilations are applied (TensorFlow's kernels ignore or reject them); unequal row "
             "and column strides are computed (TensorFlow's GPU kernel rejects them).");
  RegisterKernelForTypes<ConvolutionBackpropOp<DepthwiseBackprop, BackpropOf::kInput>>(
      "DepthwiseConv2dNativeBackpropInput", device_type, "T", kConvolutionTypes,
      {"input_sizes"});
  DocumentOp("DepthwiseConv2dNativeBackpropInput", "NHWC, NCHW", "");
  RegisterKernelForTypes<ConvolutionBackpropOp<DepthwiseBackprop, BackpropOf::kFilter>>(
      "DepthwiseConv2dNativeBackpropFilter", device_type, "T", kConvolutionTypes,
      {"filter_sizes"});
  DocumentOp("DepthwiseConv2dNativeBackpropFilter", "NHWC, NCHW",
             "Sums in float for float16/bfloat16.");
  RegisterKernelForTypes<FusedConvolutionOp>("_FusedConv2D", device_type, "T",
                                             {TF_FLOAT, TF_HALF, TF_DOUBLE});
  DocumentOp("_FusedConv2D", "NHWC, NCHW",
             "Grappler's Conv2D + BiasAdd (+ Relu/Relu6) fusion; HWIO filters only.");
  RegisterKernelForTypes<FusedConvolutionOp>(fused_ops::kFusedConv2D, device_type, "T",
                                             {TF_BFLOAT16});
  DocumentOp(fused_ops::kFusedConv2D, "NHWC, NCHW",
             "The plugin's Conv2D + BiasAdd (+ Relu/Relu6) fusion for bfloat16, which Grappler "
             "leaves unfused on a GPU (docs/graph_fusions.md): one rounding to bfloat16, as "
             "TensorFlow-CPU's fused oneDNN convolution.");
}

}  // namespace vgpu::conv

namespace vgpu {

void RegisterConvolutionOps(const char* device_type) {
  conv::RegisterConvolution2DOps(device_type);
  conv::RegisterConvolution3DOps(device_type);
  conv::RegisterGenericConvolutionOps(device_type);
  conv::RegisterMatmulOps(device_type);
  conv::RegisterBiasOps(device_type);
  conv::RegisterEinsumOps(device_type);
}

}  // namespace vgpu
