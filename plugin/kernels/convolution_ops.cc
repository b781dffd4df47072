// TensorFlow op kernels of the convolution family on the virtual GPU: Conv2D,
// Conv2DBackpropInput, Conv2DBackpropFilter and DepthwiseConv2dNative with its two backprops.
// Written as TensorFlow's cuDNN kernels are: validate attributes and shapes with TensorFlow's
// rules and messages, compute and allocate the output, then per call create and set tensor,
// filter and convolution descriptors (SAME/VALID resolved to explicit paddings) and launch
// (protocol/kernels/convolution.h). MatMul and the bias ops live in convolution_matmul_ops.cc
// and convolution_bias_ops.cc.
#include "plugin/kernels/convolution_ops.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu {
namespace {

constexpr std::initializer_list<TF_DataType> kConvolutionTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                                   TF_DOUBLE};

enum class Padding { kValid, kSame, kExplicit };

// Whose validation rules (and messages) an op follows.
enum class ConvKind { kConv2D, kConv2DBackprop, kDepthwise };

// Positions of the batch, height, width and channel dimensions of a 4-D tensor.
struct DimIndex {
  int n, h, w, c;
};

DimIndex IndexOf(DataFormat format) {
  return format == DataFormat::kNHWC ? DimIndex{0, 1, 2, 3} : DimIndex{0, 2, 3, 1};
}

std::vector<int64_t> ShapeFromFormat(DataFormat format, int64_t n, int64_t h, int64_t w,
                                     int64_t c) {
  if (format == DataFormat::kNHWC) return {n, h, w, c};
  return {n, c, h, w};
}

std::string ShapeString(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

int64_t NumElements(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

struct ConvAttributes {
  DataFormat data_format = DataFormat::kNHWC;
  Padding padding = Padding::kValid;
  std::vector<int64_t> explicit_paddings;  // 8 values in data-format order when EXPLICIT
  int64_t stride_rows = 1, stride_cols = 1;
  int64_t dilation_rows = 1, dilation_cols = 1;
};

// TensorFlow's CheckValidPadding for 4-D tensors.
absl::Status CheckValidPadding(const ConvAttributes& a) {
  if (a.padding == Padding::kExplicit) {
    if (a.explicit_paddings.size() != 8) {
      return absl::InvalidArgumentError(
          absl::StrCat("explicit_paddings attribute must contain 8 values, but got: ",
                       a.explicit_paddings.size()));
    }
    for (int64_t value : a.explicit_paddings) {
      if (value < 0) {
        return absl::InvalidArgumentError(
            "All elements of explicit_paddings must be nonnegative");
      }
      if (value > std::numeric_limits<int32_t>::max()) {
        return absl::InvalidArgumentError("explicit padding too large");
      }
    }
    const DimIndex d = IndexOf(a.data_format);
    if (a.explicit_paddings[2 * d.n] != 0 || a.explicit_paddings[2 * d.n + 1] != 0 ||
        a.explicit_paddings[2 * d.c] != 0 || a.explicit_paddings[2 * d.c + 1] != 0) {
      return absl::InvalidArgumentError(
          "Nonzero explicit padding in the batch or depth dimensions is not supported");
    }
  } else if (!a.explicit_paddings.empty()) {
    return absl::InvalidArgumentError(
        "explicit_paddings attribute must be empty if the padding attribute is not EXPLICIT");
  }
  return absl::OkStatus();
}

// Reads and validates the attributes of a convolution op the way TensorFlow's kernel for
// `kind` does (InitConv2DParameters, Conv2DBackprop*Op, DepthwiseConv2dNativeOp).
absl::StatusOr<ConvAttributes> ReadConvAttributes(OpConstruction& construction, ConvKind kind) {
  ConvAttributes a;
  VGPU_ASSIGN_OR_RETURN(std::string format, construction.String("data_format"));
  if (format == "NHWC") {
    a.data_format = DataFormat::kNHWC;
  } else if (format == "NCHW") {
    a.data_format = DataFormat::kNCHW;
  } else {
    return absl::InvalidArgumentError("Invalid data format");
  }
  VGPU_ASSIGN_OR_RETURN(std::string padding, construction.String("padding"));
  if (padding == "VALID") {
    a.padding = Padding::kValid;
  } else if (padding == "SAME") {
    a.padding = Padding::kSame;
  } else if (padding == "EXPLICIT") {
    a.padding = Padding::kExplicit;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("Unknown padding type: ", padding));
  }
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> strides, construction.IntList("strides"));
  std::vector<int64_t> dilations(4, 1);
  if (construction.Has("dilations")) {
    VGPU_ASSIGN_OR_RETURN(dilations, construction.IntList("dilations"));
  }
  if (construction.Has("explicit_paddings")) {
    VGPU_ASSIGN_OR_RETURN(a.explicit_paddings, construction.IntList("explicit_paddings"));
  }
  // TensorFlow's backprop kernels report unsupported batch/depth strides as Unimplemented.
  auto batch_or_depth_error = [kind](const char* what) {
    std::string message = absl::StrCat("Current implementation does not yet support ", what,
                                       " in the batch and depth dimensions.");
    return kind == ConvKind::kConv2DBackprop ? absl::UnimplementedError(message)
                                             : absl::InvalidArgumentError(message);
  };
  if (kind != ConvKind::kDepthwise && dilations.size() != 4) {
    return absl::InvalidArgumentError(
        "Sliding window dilations field must specify 4 dimensions");
  }
  if (strides.size() != 4) {
    return absl::InvalidArgumentError("Sliding window strides field must specify 4 dimensions");
  }
  const DimIndex d = IndexOf(a.data_format);
  if (kind == ConvKind::kDepthwise && strides[d.h] != strides[d.w]) {
    return absl::InvalidArgumentError(
        "Current implementation only supports equal length strides in the row and column "
        "dimensions.");
  }
  if (strides[d.n] != 1 || strides[d.c] != 1) return batch_or_depth_error("strides");
  if (strides[d.h] <= 0 || strides[d.w] <= 0) {
    return absl::InvalidArgumentError("Row and column strides should be larger than 0.");
  }
  if (dilations.size() != 4) {
    return absl::InvalidArgumentError(
        "Sliding window dilations field must specify 4 dimensions");
  }
  if (dilations[d.n] != 1 || dilations[d.c] != 1) return batch_or_depth_error("dilations");
  if (dilations[d.h] <= 0 || dilations[d.w] <= 0) {
    return absl::InvalidArgumentError("Dilated rates should be larger than 0.");
  }
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  if (strides[d.h] > kInt32Max || strides[d.w] > kInt32Max || dilations[d.h] > kInt32Max ||
      dilations[d.w] > kInt32Max) {
    return absl::InvalidArgumentError("strides and dilations must fit in 32 bits");
  }
  a.stride_rows = strides[d.h];
  a.stride_cols = strides[d.w];
  a.dilation_rows = dilations[d.h];
  a.dilation_cols = dilations[d.w];
  VGPU_RETURN_IF_ERROR(CheckValidPadding(a));
  return a;
}

// Output size and paddings of one spatial dimension.
struct SpatialWindow {
  int64_t output = 0, pad_before = 0, pad_after = 0;
};

// TensorFlow's GetWindowedOutputSizeVerbose for dimension 'H' or 'W'.
absl::StatusOr<SpatialWindow> ComputeWindow(const ConvAttributes& a, char dim, int64_t input,
                                            int64_t filter) {
  const bool rows = dim == 'H';
  const int64_t stride = rows ? a.stride_rows : a.stride_cols;
  const int64_t dilation = rows ? a.dilation_rows : a.dilation_cols;
  SpatialWindow window;
  const int64_t effective_filter = (filter - 1) * dilation + 1;
  switch (a.padding) {
    case Padding::kValid:
      window.output = (input - effective_filter + stride) / stride;
      break;
    case Padding::kExplicit: {
      const DimIndex d = IndexOf(a.data_format);
      const int index = rows ? d.h : d.w;
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
  if (window.pad_before > std::numeric_limits<int32_t>::max() ||
      window.pad_after > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError("padding too large");
  }
  return window;
}

// One convolution as the launch describes it: TensorFlow shapes of x, the filter and y, and
// the resolved windows of the two spatial dimensions.
struct ConvolutionProblem {
  TF_DataType dtype = TF_FLOAT;
  bool depthwise = false;
  std::vector<int64_t> input_shape, filter_shape, output_shape;
  SpatialWindow rows, cols;
};

// Creates and sets descriptors [x tensor, filter, convolution, y tensor] for `p` (followed by
// the epilogue's bias and activation descriptors when `fused` is given), launches `kernel` with
// `buffers`, and destroys the descriptors.
absl::Status LaunchConvolution(OpContext& context, KernelId kernel, const ConvAttributes& a,
                               const ConvolutionProblem& p,
                               std::initializer_list<BufferArg> buffers,
                               const TF_Tensor* bias = nullptr,
                               const FusedBiasActivation* fused = nullptr) {
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings x_settings,
                        TensorSettings(p.dtype, p.input_shape));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings y_settings,
                        TensorSettings(p.dtype, p.output_shape));
  FilterDescriptorSettings filter_settings;
  filter_settings.dtype = x_settings.dtype;
  for (int i = 0; i < 4; ++i) filter_settings.dims[i] = p.filter_shape[i];
  ConvolutionDescriptorSettings conv_settings;
  conv_settings.data_format = a.data_format;
  conv_settings.pad_top = static_cast<int32_t>(p.rows.pad_before);
  conv_settings.pad_bottom = static_cast<int32_t>(p.rows.pad_after);
  conv_settings.pad_left = static_cast<int32_t>(p.cols.pad_before);
  conv_settings.pad_right = static_cast<int32_t>(p.cols.pad_after);
  conv_settings.stride_h = static_cast<int32_t>(a.stride_rows);
  conv_settings.stride_w = static_cast<int32_t>(a.stride_cols);
  conv_settings.dilation_h = static_cast<int32_t>(a.dilation_rows);
  conv_settings.dilation_w = static_cast<int32_t>(a.dilation_cols);
  conv_settings.depthwise = p.depthwise ? 1 : 0;

  KernelLaunch launch(context);
  launch.Describe(x_settings).Describe(filter_settings).Describe(conv_settings).Describe(y_settings);
  if (fused != nullptr) DescribeEpilogue(launch, bias, *fused);
  return launch.Buffers(buffers).Run(kernel);
}

// The forward problem of Conv2D (depthwise = false) or DepthwiseConv2dNative, validated with
// TensorFlow's rules.
absl::StatusOr<ConvolutionProblem> ForwardProblem(const ConvAttributes& a, bool depthwise,
                                                  TF_DataType dtype,
                                                  std::vector<int64_t> input_shape,
                                                  std::vector<int64_t> filter_shape) {
  if (input_shape.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("convolution input must be 4-dimensional: ", ShapeString(input_shape)));
  }
  if (filter_shape.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("filter must be 4-dimensional: ", ShapeString(filter_shape)));
  }
  const DimIndex d = IndexOf(a.data_format);
  const int64_t in_depth = input_shape[d.c];
  int64_t out_depth = filter_shape[3];
  if (depthwise) {
    if (in_depth != filter_shape[2]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input and filter must have the same depth: ", in_depth, " vs ", filter_shape[2]));
    }
    out_depth = in_depth * filter_shape[3];
  } else {
    const int64_t patch_depth = filter_shape[2];
    if (patch_depth <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("filter depth must be stricly positive, got ", patch_depth));
    }
    if (in_depth % patch_depth != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("input depth must be evenly divisible by filter depth: ", in_depth,
                       " vs ", patch_depth));
    }
    if (in_depth != patch_depth) {
      return absl::UnimplementedError(absl::StrCat(
          "grouped convolutions (input depth ", in_depth, ", filter depth ", patch_depth,
          ") are not supported on the virtual GPU"));
    }
  }
  ConvolutionProblem p;
  p.dtype = dtype;
  p.depthwise = depthwise;
  VGPU_ASSIGN_OR_RETURN(p.rows, ComputeWindow(a, 'H', input_shape[d.h], filter_shape[0]));
  VGPU_ASSIGN_OR_RETURN(p.cols, ComputeWindow(a, 'W', input_shape[d.w], filter_shape[1]));
  p.output_shape =
      ShapeFromFormat(a.data_format, input_shape[d.n], p.rows.output, p.cols.output, out_depth);
  p.input_shape = std::move(input_shape);
  p.filter_shape = std::move(filter_shape);
  return p;
}

// The backward problem of Conv2DBackprop{Input,Filter} or DepthwiseConv2dNativeBackprop*,
// validated with TensorFlow's rules (ConvBackpropComputeDimensionsV2, and the depthwise
// kernels' EXTRACT_AND_VERIFY_DIMENSIONS).
absl::StatusOr<ConvolutionProblem> BackpropProblem(const char* label, const ConvAttributes& a,
                                                   bool depthwise, TF_DataType dtype,
                                                   std::vector<int64_t> input_shape,
                                                   std::vector<int64_t> filter_shape,
                                                   std::vector<int64_t> out_backprop_shape) {
  if (input_shape.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": input must be 4-dimensional"));
  }
  if (filter_shape.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": filter must be 4-dimensional"));
  }
  if (out_backprop_shape.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": out_backprop must be 4-dimensional"));
  }
  const DimIndex d = IndexOf(a.data_format);
  if (input_shape[d.n] != out_backprop_shape[d.n]) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": input and out_backprop must have the same batch size, input batch: ",
                     input_shape[d.n], ", out_backprop batch: ", out_backprop_shape[d.n]));
  }
  const int64_t in_depth = input_shape[d.c];
  if (depthwise) {
    if (in_depth != filter_shape[2]) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": input and filter must have the same in_depth"));
    }
    if (in_depth * filter_shape[3] != out_backprop_shape[d.c]) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": depth_multiplier * in_depth not equal to out_depth"));
    }
  } else {
    if (filter_shape[2] <= 0 || in_depth % filter_shape[2] != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": input depth must be evenly divisible by filter depth"));
    }
    if (filter_shape[3] != out_backprop_shape[d.c]) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": filter and out_backprop must have the same out_depth"));
    }
    if (in_depth != filter_shape[2]) {
      return absl::UnimplementedError(
          absl::StrCat(label, ": grouped convolutions are not supported on the virtual GPU"));
    }
  }
  ConvolutionProblem p;
  p.dtype = dtype;
  p.depthwise = depthwise;
  VGPU_ASSIGN_OR_RETURN(p.rows, ComputeWindow(a, 'H', input_shape[d.h], filter_shape[0]));
  VGPU_ASSIGN_OR_RETURN(p.cols, ComputeWindow(a, 'W', input_shape[d.w], filter_shape[1]));
  const int64_t actual_rows = out_backprop_shape[d.h];
  const int64_t actual_cols = out_backprop_shape[d.w];
  for (int spatial = 0; spatial < 2; ++spatial) {
    const int64_t actual = spatial == 0 ? actual_rows : actual_cols;
    const int64_t computed = spatial == 0 ? p.rows.output : p.cols.output;
    if (actual == computed) continue;
    if (depthwise) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": Number of ", spatial == 0 ? "rows" : "cols",
          " of out_backprop doesn't match computed: actual = ", actual, ", computed = ",
          computed));
    }
    const int image_dim = spatial == 0 ? d.h : d.w;
    return absl::InvalidArgumentError(absl::StrCat(
        label, ": Size of out_backprop doesn't match computed: actual = ", actual,
        ", computed = ", computed, " spatial_dim: ", image_dim, " input: ",
        input_shape[image_dim], " filter: ", filter_shape[spatial], " output: ", actual,
        " stride: ", spatial == 0 ? a.stride_rows : a.stride_cols,
        " dilation: ", spatial == 0 ? a.dilation_rows : a.dilation_cols));
  }
  p.input_shape = std::move(input_shape);
  p.filter_shape = std::move(filter_shape);
  p.output_shape = std::move(out_backprop_shape);
  return p;
}

// The values of a host-memory shape input (input_sizes, filter_sizes), which must be a vector
// of non-negative sizes.
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

// Conv2D (kDepthwise = false) and DepthwiseConv2dNative: inputs (input, filter).
template <bool kDepthwise>
class ConvolutionOp {
 public:
  static absl::StatusOr<std::unique_ptr<ConvolutionOp>> Create(OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(
        ConvAttributes attributes,
        ReadConvAttributes(construction, kDepthwise ? ConvKind::kDepthwise : ConvKind::kConv2D));
    auto op = std::make_unique<ConvolutionOp>();
    op->attributes_ = std::move(attributes);
    return op;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr input, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(TensorPtr filter, context.Input(1));
    const TF_DataType dtype = TF_TensorType(input.get());
    VGPU_ASSIGN_OR_RETURN(ConvolutionProblem p,
                          ForwardProblem(attributes_, kDepthwise, dtype, ShapeOf(input.get()),
                                         ShapeOf(filter.get())));
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.AllocateOutput(0, dtype, p.output_shape));
    if (NumElements(p.output_shape) == 0) return absl::OkStatus();
    // An empty input gives zeros (only padding is convolved); the kernel writes them.
    if (NumElements(p.input_shape) != 0 && NumElements(p.filter_shape) == 0) {
      return absl::InvalidArgumentError(
          "filter must not have zero elements (i.e. all dimensions must be non-zero)");
    }
    return LaunchConvolution(context, convolution::kForward, attributes_, p,
                             {BufferOf(input.get()), BufferOf(filter.get()),
                              BufferOf(output.get())});
  }

 private:
  ConvAttributes attributes_;
};

// Conv2DBackpropInput and DepthwiseConv2dNativeBackpropInput: inputs (input_sizes in host
// memory, filter, out_backprop).
template <bool kDepthwise>
class ConvolutionBackpropInputOp {
 public:
  static constexpr const char* kLabel =
      kDepthwise ? "DepthwiseConv2DBackpropInput" : "Conv2DBackpropInput";

  static absl::StatusOr<std::unique_ptr<ConvolutionBackpropInputOp>> Create(
      OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(ConvAttributes attributes,
                          ReadConvAttributes(construction, kDepthwise ? ConvKind::kDepthwise
                                                                      : ConvKind::kConv2DBackprop));
    auto op = std::make_unique<ConvolutionBackpropInputOp>();
    op->attributes_ = std::move(attributes);
    return op;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                          ShapeInput(context, 0, "Conv2DBackpropInput", "input_sizes"));
    VGPU_ASSIGN_OR_RETURN(TensorPtr filter, context.Input(1));
    VGPU_ASSIGN_OR_RETURN(TensorPtr out_backprop, context.Input(2));
    const TF_DataType dtype = TF_TensorType(out_backprop.get());
    std::vector<int64_t> filter_shape = ShapeOf(filter.get());
    std::vector<int64_t> out_backprop_shape = ShapeOf(out_backprop.get());
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> input_shape,
                          InputShape(sizes, filter_shape, out_backprop_shape));
    VGPU_ASSIGN_OR_RETURN(ConvolutionProblem p,
                          BackpropProblem(kLabel, attributes_, kDepthwise, dtype,
                                          std::move(input_shape), std::move(filter_shape),
                                          std::move(out_backprop_shape)));
    VGPU_ASSIGN_OR_RETURN(TensorPtr in_backprop,
                          context.AllocateOutput(0, dtype, p.input_shape));
    if (NumElements(p.input_shape) == 0) return absl::OkStatus();
    // An empty out_backprop gives zeros; the kernel writes them.
    return LaunchConvolution(context, convolution::kBackwardInput, attributes_, p,
                             {BufferOf(filter.get()), BufferOf(out_backprop.get()),
                              BufferOf(in_backprop.get())});
  }

 private:
  // TensorFlow's Conv2DBackpropComputeInputShape: input_sizes holds 4 values (the shape), or
  // for Conv2DBackpropInput 2 values (height and width; batch and depth from the operands).
  absl::StatusOr<std::vector<int64_t>> InputShape(const std::vector<int64_t>& sizes,
                                                  const std::vector<int64_t>& filter_shape,
                                                  const std::vector<int64_t>& out_backprop_shape) {
    if (sizes.size() == 4 || kDepthwise) return sizes;
    if (sizes.size() == 2 && filter_shape.size() == 4 && out_backprop_shape.size() == 4) {
      const DimIndex d = IndexOf(attributes_.data_format);
      return ShapeFromFormat(attributes_.data_format, out_backprop_shape[d.n], sizes[0],
                             sizes[1], filter_shape[2]);
    }
    if (out_backprop_shape.size() != 4) {
      return absl::InvalidArgumentError(absl::StrCat(
          "out_backprop must be 4-dimensional, got: ", out_backprop_shape.size()));
    }
    if (filter_shape.size() != 4) {
      return absl::InvalidArgumentError(absl::StrCat(kLabel, ": filter must be 4-dimensional"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "Conv2DBackpropInput requires input_sizes to contain 4 values or 2 values, but got: ",
        sizes.size()));
  }

  ConvAttributes attributes_;
};

// Conv2DBackpropFilter and DepthwiseConv2dNativeBackpropFilter: inputs (input, filter_sizes
// in host memory, out_backprop).
template <bool kDepthwise>
class ConvolutionBackpropFilterOp {
 public:
  static constexpr const char* kLabel =
      kDepthwise ? "DepthwiseConv2DBackpropFilter" : "Conv2DBackpropFilter";

  static absl::StatusOr<std::unique_ptr<ConvolutionBackpropFilterOp>> Create(
      OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(ConvAttributes attributes,
                          ReadConvAttributes(construction, kDepthwise ? ConvKind::kDepthwise
                                                                      : ConvKind::kConv2DBackprop));
    auto op = std::make_unique<ConvolutionBackpropFilterOp>();
    op->attributes_ = std::move(attributes);
    return op;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr input, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> filter_shape,
                          ShapeInput(context, 1, "Conv2DBackpropFilter", "filter_sizes"));
    VGPU_ASSIGN_OR_RETURN(TensorPtr out_backprop, context.Input(2));
    const TF_DataType dtype = TF_TensorType(input.get());
    VGPU_ASSIGN_OR_RETURN(ConvolutionProblem p,
                          BackpropProblem(kLabel, attributes_, kDepthwise, dtype,
                                          ShapeOf(input.get()), std::move(filter_shape),
                                          ShapeOf(out_backprop.get())));
    VGPU_ASSIGN_OR_RETURN(TensorPtr filter_backprop,
                          context.AllocateOutput(0, dtype, p.filter_shape));
    if (NumElements(p.filter_shape) == 0) return absl::OkStatus();
    // An empty input or out_backprop gives zeros; the kernel writes them.
    return LaunchConvolution(context, convolution::kBackwardFilter, attributes_, p,
                             {BufferOf(input.get()), BufferOf(out_backprop.get()),
                              BufferOf(filter_backprop.get())});
  }

 private:
  ConvAttributes attributes_;
};

// _FusedConv2D with fused_ops BiasAdd(+Relu/Relu6), which Grappler's remapper substitutes for
// Conv2D + BiasAdd + Relu on GPU devices: inputs (input, filter, bias, host_args...).
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
    VGPU_ASSIGN_OR_RETURN(TensorPtr input, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(TensorPtr filter, context.Input(1));
    VGPU_ASSIGN_OR_RETURN(TensorPtr bias, context.Input(2));
    const TF_DataType dtype = TF_TensorType(input.get());
    VGPU_ASSIGN_OR_RETURN(ConvolutionProblem p,
                          ForwardProblem(attributes_, /*depthwise=*/false, dtype,
                                         ShapeOf(input.get()), ShapeOf(filter.get())));
    const std::vector<int64_t> bias_shape = ShapeOf(bias.get());
    const int64_t out_depth = p.filter_shape[3];
    if (bias_shape.size() != 1 || bias_shape[0] != out_depth ||
        TF_TensorType(bias.get()) != dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "_FusedConv2D: the bias must be a vector of the output depth ", out_depth, ", got ",
          ShapeString(bias_shape)));
    }
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.AllocateOutput(0, dtype, p.output_shape));
    if (NumElements(p.output_shape) == 0) return absl::OkStatus();
    if (NumElements(p.input_shape) != 0 && NumElements(p.filter_shape) == 0) {
      return absl::InvalidArgumentError(
          "filter must not have zero elements (i.e. all dimensions must be non-zero)");
    }
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

void RegisterConvolutionOps(const char* device_type) {
  RegisterKernelForTypes<ConvolutionOp<false>>("Conv2D", device_type, "T", kConvolutionTypes);
  RegisterKernelForTypes<ConvolutionBackpropInputOp<false>>(
      "Conv2DBackpropInput", device_type, "T", kConvolutionTypes, {"input_sizes"});
  RegisterKernelForTypes<ConvolutionBackpropFilterOp<false>>(
      "Conv2DBackpropFilter", device_type, "T", kConvolutionTypes, {"filter_sizes"});
  RegisterKernelForTypes<ConvolutionOp<true>>("DepthwiseConv2dNative", device_type, "T",
                                              kConvolutionTypes);
  RegisterKernelForTypes<ConvolutionBackpropInputOp<true>>(
      "DepthwiseConv2dNativeBackpropInput", device_type, "T", kConvolutionTypes,
      {"input_sizes"});
  RegisterKernelForTypes<ConvolutionBackpropFilterOp<true>>(
      "DepthwiseConv2dNativeBackpropFilter", device_type, "T", kConvolutionTypes,
      {"filter_sizes"});
  RegisterKernelForTypes<FusedConvolutionOp>("_FusedConv2D", device_type, "T",
                                             {TF_FLOAT, TF_HALF, TF_DOUBLE});
  RegisterMatmulOps(device_type);
  RegisterBiasOps(device_type);
}

}  // namespace vgpu
