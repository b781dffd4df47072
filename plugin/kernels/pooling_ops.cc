// TensorFlow op kernels of the 2-D pooling family on the virtual GPU: MaxPool / MaxPoolV2,
// AvgPool and their gradients (MaxPoolGrad / MaxPoolGradV2, AvgPoolGrad, MaxPoolGradGrad /
// MaxPoolGradGradV2), NHWC and NCHW, VALID / SAME (and EXPLICIT for MaxPool / MaxPoolGrad), plus
// what the family's op kernels share (pooling_ops.h). Written as TensorFlow's cuDNN kernels are:
// validate the attributes and shapes as TensorFlow's GPU kernels do, then per call create and
// set a pooling descriptor and tensor descriptors, launch, destroy (RAII).
#include "plugin/kernels/pooling_ops.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/graph/fused_ops.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/pooling.h"

namespace vgpu {

absl::Status ExpectShape(const char* what, absl::Span<const int64_t> expected,
                         absl::Span<const int64_t> actual) {
  if (std::equal(expected.begin(), expected.end(), actual.begin(), actual.end())) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("Expected ", what, " shape to be ",
                                                 ShapeString(expected), ", but got ",
                                                 ShapeString(actual)));
}

absl::StatusOr<MaxPoolGradInputs> ReadMaxPoolGradInputs(const OpContext& context, int rank,
                                                        const char* grad_name) {
  VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<3>());
  auto& [orig_input, orig_output, grad] = inputs;
  const auto rank_message = [rank](const char* name) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be ", rank, "-dimensional"));
  };
  std::vector<int64_t> dims = ShapeOf(orig_input.get());
  if (dims.size() != static_cast<size_t>(rank)) return rank_message("tensor_in");
  if (TF_NumDims(orig_output.get()) != rank) return rank_message("tensor_out");
  if (TF_NumDims(grad.get()) != rank) return rank_message(grad_name);
  return MaxPoolGradInputs{std::move(orig_input), std::move(orig_output), std::move(grad),
                           std::move(dims)};
}

absl::StatusOr<PoolPlan> PlanMaxPoolGradient(const PoolWindow& window, NanPropagation nan,
                                             const MaxPoolGradInputs& in) {
  const std::string rank_message =
      absl::StrCat("tensor_in must be ", window.rank(), "-dimensional");
  VGPU_ASSIGN_OR_RETURN(PoolPlan plan, PlanPooling(window, PoolingMode::kMax, nan,
                                                   in.orig_input_dims, rank_message.c_str()));
  VGPU_RETURN_IF_ERROR(
      ExpectShape("orig_output", plan.output_dims, ShapeOf(in.orig_output.get())));
  return plan;
}

absl::Status LaunchPoolingForward(OpContext& context, const PoolPlan& plan, const TF_Tensor* x,
                                  absl::Span<const int64_t> x_dims) {
  const TF_DataType dtype = TF_TensorType(x);
  VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, plan.output_dims));
  if (TF_TensorElementCount(y.get()) == 0) return absl::OkStatus();
  return LaunchPooling(context, pooling::kForward, plan, dtype, x_dims,
                       {BufferOf(x), BufferOf(y.get())});
}

absl::Status ComputeAvgPoolingBackward(OpContext& context, const PoolWindow& window,
                                       const AvgPoolGradWording& wording) {
  VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
  const auto& [shape_tensor, grad] = inputs;
  const int rank = window.rank();
  if (TF_NumDims(shape_tensor.get()) != 1 || TF_TensorElementCount(shape_tensor.get()) != rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        wording.shape_name, " must be 1-dimensional and ", rank, " elements"));
  }
  if (TF_NumDims(grad.get()) != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("out_backprop must be ", rank, "-dimensional"));
  }
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> input_dims, context.HostIntegers(0));
  for (int64_t d : input_dims) {
    if (d < 0) return absl::InvalidArgumentError(wording.negative_dimension(d, input_dims));
  }
  const std::string rank_message = absl::StrCat("tensor_in must be ", rank, "-dimensional");
  VGPU_ASSIGN_OR_RETURN(PoolPlan plan,
                        PlanPooling(window, PoolingMode::kAverage, NanPropagation::kNotPropagate,
                                    input_dims, rank_message.c_str()));
  VGPU_RETURN_IF_ERROR(ExpectShape("grad", plan.output_dims, ShapeOf(grad.get())));
  const TF_DataType dtype = TF_TensorType(grad.get());
  VGPU_ASSIGN_OR_RETURN(TensorPtr dx, context.AllocateOutput(0, dtype, input_dims));
  if (TF_TensorElementCount(dx.get()) == 0) return absl::OkStatus();
  return LaunchPooling(context, pooling::kBackward, plan, dtype, input_dims,
                       {BufferOf(grad.get()), BufferOf(dx.get())});
}

absl::StatusOr<PoolWindow> ReadPoolLayout(OpConstruction& construction, int spatial_dims) {
  PoolWindow window;
  window.spatial_dims = spatial_dims;
  const bool three_d = spatial_dims == 3;
  std::string format = three_d ? "NDHWC" : "NHWC";
  if (construction.Has("data_format")) {
    VGPU_ASSIGN_OR_RETURN(format, construction.String("data_format"));
  }
  if (format == (three_d ? "NDHWC" : "NHWC")) {
    window.format = DataFormat::kNHWC;
  } else if (format == (three_d ? "NCDHW" : "NCHW")) {
    window.format = DataFormat::kNCHW;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "Invalid data format: ", format, " (the virtual GPU pools ",
        three_d ? "NDHWC and NCDHW" : "NHWC and NCHW", ")"));
  }
  VGPU_ASSIGN_OR_RETURN(window.padding, ReadPadding(construction, "Invalid padding: "));
  if (window.padding == Padding::kExplicit) {
    VGPU_ASSIGN_OR_RETURN(window.explicit_paddings, construction.IntList("explicit_paddings"));
  }
  return window;
}

absl::Status ReadWindowAttributes(OpConstruction& construction, PoolWindow& window) {
  VGPU_ASSIGN_OR_RETURN(window.ksize, construction.IntList("ksize"));
  VGPU_ASSIGN_OR_RETURN(window.strides, construction.IntList("strides"));
  return absl::OkStatus();
}

absl::Status ReadWindowInputs(const OpContext& context, int ksize_input, int strides_input,
                              PoolWindow& window) {
  VGPU_ASSIGN_OR_RETURN(window.ksize, context.HostIntegers(ksize_input));
  VGPU_ASSIGN_OR_RETURN(window.strides, context.HostIntegers(strides_input));
  return absl::OkStatus();
}

absl::Status CheckWindowFieldSizes(const PoolWindow& window, const char* stride_word) {
  const size_t rank = static_cast<size_t>(window.rank());
  if (window.ksize.size() != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("Sliding window ksize field must specify ", rank, " dimensions"));
  }
  if (window.strides.size() != rank) {
    return absl::InvalidArgumentError(absl::StrCat("Sliding window ", stride_word,
                                                   " field must specify ", rank, " dimensions"));
  }
  return absl::OkStatus();
}

absl::Status CheckKsizePositive(const PoolWindow& window, const char* message,
                                bool append_value) {
  for (int64_t k : window.ksize) {
    if (k <= 0) {
      return absl::InvalidArgumentError(append_value ? absl::StrCat(message, k) : message);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStridesPositive(const PoolWindow& window) {
  for (int64_t s : window.strides) {
    if (s <= 0) return absl::InvalidArgumentError(absl::StrCat("Stride must be > 0, but got ", s));
  }
  return absl::OkStatus();
}

absl::Status CheckNoBatchPooling(const PoolWindow& window) {
  if (window.ksize[0] != 1 || window.strides[0] != 1) {
    return absl::UnimplementedError("Pooling is not yet supported on the batch dimension.");
  }
  return absl::OkStatus();
}

absl::Status CheckNoDepthPooling2d(const PoolWindow& window) {
  const int c = window.ChannelDim();
  if (window.ksize[c] != 1 &&
      (window.ksize[window.SpatialDim(0)] != 1 || window.ksize[window.SpatialDim(1)] != 1)) {
    return absl::UnimplementedError(
        "MaxPooling supports exactly one of pooling across depth or pooling across "
        "width/height.");
  }
  return absl::OkStatus();
}

namespace {

// Pooling across depth (a depth window > 1), with TensorFlow's PoolParameters' checks in its
// order; TensorFlow's GPU kernels then refuse what passes them.
absl::Status CheckDepthwisePooling(const PoolWindow& window, int64_t depth) {
  const int c = window.ChannelDim();
  const int64_t depth_window = window.ksize[c];
  if (depth_window == 1) return absl::OkStatus();
  if (depth_window <= 0) return absl::InvalidArgumentError("depth_window must not be 0");
  if (depth % depth_window != 0) {
    return absl::UnimplementedError(
        "Depthwise max pooling requires the depth window to evenly divide the input depth");
  }
  if (window.strides[c] != depth_window) {
    return absl::UnimplementedError(
        "Depthwise max pooling requires the depth window to equal the depth stride");
  }
  return absl::UnimplementedError(
      "Depthwise max pooling is currently only implemented for CPU devices.");
}

}  // namespace

absl::Status CheckNoDepthPooling3d(const PoolWindow& window, const char* message) {
  const int c = window.ChannelDim();
  if (window.ksize[c] != 1 || window.strides[c] != 1) return absl::UnimplementedError(message);
  return absl::OkStatus();
}

absl::Status CheckExplicitPadding(const PoolWindow& window) {
  if (window.padding != Padding::kExplicit) return absl::OkStatus();
  const std::vector<int64_t>& p = window.explicit_paddings;
  const int rank = window.rank();
  if (p.size() != static_cast<size_t>(2 * rank)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "explicit_paddings attribute must contain ", 2 * rank, " values, but got: ", p.size()));
  }
  for (int64_t v : p) {
    if (v < 0) {
      return absl::InvalidArgumentError("All elements of explicit_paddings must be nonnegative");
    }
  }
  const int c = window.ChannelDim();
  if (p[0] != 0 || p[1] != 0 || p[2 * c] != 0 || p[2 * c + 1] != 0) {
    return absl::InvalidArgumentError(
        "Nonzero explicit padding in the batch or depth dimensions is not supported");
  }
  // TensorFlow's CheckPaddingSize: every padding smaller than the window.
  const char* names[2][2] = {{"Top", "Bottom"}, {"Left", "Right"}};
  for (int k = 0; k < window.spatial_dims && k < 2; ++k) {
    const int dim = window.SpatialDim(k);
    for (int side = 0; side < 2; ++side) {
      if (p[2 * dim + side] >= window.ksize[dim]) {
        return absl::InvalidArgumentError(
            absl::StrCat(names[k][side], " padding ", p[2 * dim + side],
                         " needs to be smaller than the window size ", window.ksize[dim]));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<NanPropagation> MaxPoolNanPropagationFromEnvironment() {
  constexpr char kName[] = "TF_ENABLE_MAXPOOL_NANPROP";
  const char* raw = std::getenv(kName);
  if (raw == nullptr) return NanPropagation::kNotPropagate;
  const std::string value = absl::AsciiStrToLower(raw);
  if (value == "1" || value == "true") return NanPropagation::kPropagate;
  if (value == "0" || value == "false") return NanPropagation::kNotPropagate;
  return absl::InvalidArgumentError(absl::StrCat("Failed to parse the env-var ${", kName,
                                                 "} into bool: ", raw,
                                                 ". Use the default value: false"));
}

namespace {

// Output size and padding of one spatial dimension (TensorFlow's GetWindowedOutputSize).
struct WindowedSize {
  int64_t out = 0, pad_before = 0, pad_after = 0;
};

absl::StatusOr<WindowedSize> WindowedOutputSize(const PoolWindow& window, int dim, int64_t in) {
  const int64_t k = window.ksize[dim], s = window.strides[dim];
  if (s <= 0) return absl::InvalidArgumentError(absl::StrCat("Stride must be > 0, but got ", s));
  WindowedSize size;
  switch (window.padding) {
    case Padding::kValid:
      size.out = (in - k + s) / s;
      break;
    case Padding::kSame: {
      size.out = (in + s - 1) / s;
      const int64_t needed = std::max<int64_t>(0, (size.out - 1) * s + k - in);
      size.pad_before = needed / 2;
      size.pad_after = needed - size.pad_before;
      break;
    }
    case Padding::kExplicit:
      size.pad_before = window.explicit_paddings[2 * dim];
      size.pad_after = window.explicit_paddings[2 * dim + 1];
      size.out = (in + size.pad_before + size.pad_after - k + s) / s;
      break;
  }
  if (size.out < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Computed output size would be negative: ", size.out, " [input_size: ", in,
        ", effective_filter_size: ", k, ", stride: ", s, "]"));
  }
  return size;
}

}  // namespace

absl::StatusOr<PoolPlan> PlanPooling(const PoolWindow& window, PoolingMode mode,
                                     NanPropagation nan_propagation,
                                     absl::Span<const int64_t> input_dims,
                                     const char* rank_message) {
  if (input_dims.size() != static_cast<size_t>(window.rank())) {
    return absl::InvalidArgumentError(rank_message);
  }
  VGPU_RETURN_IF_ERROR(CheckDepthwisePooling(window, input_dims[window.ChannelDim()]));
  PoolPlan plan;
  plan.output_dims.assign(input_dims.begin(), input_dims.end());
  PoolingDescriptorSettings& s = plan.settings;
  s.mode = mode;
  s.data_format = window.format;
  s.spatial_dims = window.spatial_dims;
  s.nan_propagation = nan_propagation;
  for (int k = 0; k < window.spatial_dims; ++k) {
    const int dim = window.SpatialDim(k);
    VGPU_ASSIGN_OR_RETURN(WindowedSize size, WindowedOutputSize(window, dim, input_dims[dim]));
    plan.output_dims[dim] = size.out;
    for (auto [value, what] : {std::pair<int64_t, const char*>{window.ksize[dim], "ksize"},
                               {window.strides[dim], "stride"},
                               {size.pad_before, "padding"},
                               {size.pad_after, "padding"}}) {
      if (value > INT32_MAX) {
        return absl::InvalidArgumentError(
            absl::StrCat("pooling ", what, " ", value, " exceeds the int32 range"));
      }
    }
    s.window[k] = static_cast<int32_t>(window.ksize[dim]);
    s.stride[k] = static_cast<int32_t>(window.strides[dim]);
    s.pad_before[k] = static_cast<int32_t>(size.pad_before);
    s.pad_after[k] = static_cast<int32_t>(size.pad_after);
  }
  return plan;
}

absl::Status LaunchPooling(OpContext& context, KernelId kernel, const PoolPlan& plan,
                           TF_DataType dtype, absl::Span<const int64_t> input_dims,
                           std::initializer_list<BufferArg> buffers) {
  return KernelLaunch(context)
      .Describe(plan.settings)
      .DescribeTensor(dtype, input_dims)
      .DescribeTensor(dtype, plan.output_dims)
      .Buffers(buffers)
      .Run(kernel);
}

namespace {

constexpr std::initializer_list<TF_DataType> kFloatingTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                                TF_DOUBLE};
constexpr char kRank4[] = "tensor_in must be 4-dimensional";
constexpr char kKsizePositive[] = "Sliding window ksize must be positive.";

// The checks TensorFlow's 2-D max/avg pooling kernels make of ksize and strides (attributes or
// V2 inputs), with their wording of the strides field and of a non-positive ksize.
absl::Status CheckWindow2d(const PoolWindow& window, const char* stride_word,
                           const char* ksize_message, bool append_ksize) {
  VGPU_RETURN_IF_ERROR(CheckWindowFieldSizes(window, stride_word));
  VGPU_RETURN_IF_ERROR(CheckKsizePositive(window, ksize_message, append_ksize));
  VGPU_RETURN_IF_ERROR(CheckNoBatchPooling(window));
  VGPU_RETURN_IF_ERROR(CheckStridesPositive(window));
  return CheckNoDepthPooling2d(window);
}

// The window checks of the 2-D gradient ops.
absl::Status CheckGradWindow2d(const PoolWindow& window) {
  return CheckWindow2d(window, "strides", kKsizePositive, false);
}

// The window of a 2-D pooling op: its ksize and strides attributes, read and checked when the
// kernel is built, or, for the V2 ops (which have no ksize attribute), its ksize and strides
// host-memory inputs, read and checked by each Compute.
class Window2dSource {
 public:
  using Check = absl::Status (*)(const PoolWindow&);

  // Reads the layout and, unless the op is a V2 op, the window attributes; `check` runs on every
  // window, CheckExplicitPadding too on attribute windows where `check_explicit_padding`.
  static absl::StatusOr<Window2dSource> Read(OpConstruction& construction, Check check,
                                             bool check_explicit_padding) {
    VGPU_ASSIGN_OR_RETURN(PoolWindow window, ReadPoolLayout(construction, 2));
    const bool dynamic = !construction.Has("ksize");
    if (!dynamic) {
      VGPU_RETURN_IF_ERROR(ReadWindowAttributes(construction, window));
      VGPU_RETURN_IF_ERROR(check(window));
      if (check_explicit_padding) VGPU_RETURN_IF_ERROR(CheckExplicitPadding(window));
    }
    return Window2dSource(std::move(window), dynamic, check);
  }

  // The window of this Compute: the attributes' or that of inputs `ksize_input` and
  // `strides_input`, checked.
  absl::StatusOr<PoolWindow> Window(const OpContext& context, int ksize_input,
                                    int strides_input) const {
    if (!dynamic_) return window_;
    PoolWindow window = window_;
    VGPU_RETURN_IF_ERROR(ReadWindowInputs(context, ksize_input, strides_input, window));
    VGPU_RETURN_IF_ERROR(check_(window));
    return window;
  }

 private:
  Window2dSource(PoolWindow window, bool dynamic, Check check)
      : window_(std::move(window)), dynamic_(dynamic), check_(check) {}
  PoolWindow window_;
  bool dynamic_;
  Check check_;
};

// MaxPool / MaxPoolV2 / AvgPool. V2 takes ksize and strides as host-memory inputs 1 and 2.
template <PoolingMode kMode>
class PoolOp {
 public:
  static absl::StatusOr<std::unique_ptr<PoolOp>> Create(OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(Window2dSource window,
                          Window2dSource::Read(construction, CheckAttributes, true));
    NanPropagation nan = NanPropagation::kNotPropagate;
    if (kMode == PoolingMode::kMax) {
      VGPU_ASSIGN_OR_RETURN(nan, MaxPoolNanPropagationFromEnvironment());
    }
    return std::unique_ptr<PoolOp>(new PoolOp(std::move(window), nan));
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(const PoolWindow window, window_.Window(context, 1, 2));
    const std::vector<int64_t> x_dims = ShapeOf(x.get());
    if (x_dims.size() != 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor_in_shape must have 2 spatial dimensions. ", x_dims.size(), " ",
                       static_cast<int>(window.format)));
    }
    VGPU_ASSIGN_OR_RETURN(PoolPlan plan, PlanPooling(window, kMode, nan_, x_dims, kRank4));
    return LaunchPoolingForward(context, plan, x.get(), x_dims);
  }

 private:
  PoolOp(Window2dSource window, NanPropagation nan) : window_(std::move(window)), nan_(nan) {}

  static absl::Status CheckAttributes(const PoolWindow& window) {
    if (kMode == PoolingMode::kMax) {
      return CheckWindow2d(window, "stride", kKsizePositive, false);
    }
    return CheckWindow2d(window, "stride", "ksize must be a positive int32 value, got:", true);
  }

  Window2dSource window_;
  NanPropagation nan_;
};

// MaxPoolGrad / MaxPoolGradV2 (orig_input, orig_output, grad[, ksize, strides]) -> the gradient
// with respect to orig_input. The maximum of each window is recomputed from orig_input.
// kThroughRelu: the graph optimizer's _VgpuMaxPoolGradWithReluGrad (graph/fused_ops.h), the
// same gradient then through the ReLU whose output orig_input is (pooling::kBackwardThroughRelu).
template <bool kThroughRelu = false>
class MaxPoolGradOp {
 public:
  static absl::StatusOr<std::unique_ptr<MaxPoolGradOp>> Create(OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(Window2dSource window,
                          Window2dSource::Read(construction, CheckGradWindow2d, true));
    VGPU_ASSIGN_OR_RETURN(NanPropagation nan, MaxPoolNanPropagationFromEnvironment());
    return std::unique_ptr<MaxPoolGradOp>(new MaxPoolGradOp(std::move(window), nan));
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(MaxPoolGradInputs in,
                          ReadMaxPoolGradInputs(context, 4, "out_backprop"));
    const auto& [x, y, dy, x_dims] = in;
    VGPU_ASSIGN_OR_RETURN(const PoolWindow window, window_.Window(context, 3, 4));
    const TF_DataType dtype = TF_TensorType(x.get());
    // Never forwarded into x: the kernel reads x while it writes dx.
    VGPU_ASSIGN_OR_RETURN(TensorPtr dx, context.AllocateOutput(0, dtype, x_dims));
    // As TensorFlow's GPU kernel: an empty input needs (and checks) nothing more.
    if (TF_TensorElementCount(dx.get()) == 0) return absl::OkStatus();
    VGPU_ASSIGN_OR_RETURN(PoolPlan plan, PlanMaxPoolGradient(window, nan_, in));
    VGPU_RETURN_IF_ERROR(ExpectShape("grad", plan.output_dims, ShapeOf(dy.get())));
    return LaunchPooling(context,
                         kThroughRelu ? pooling::kBackwardThroughRelu : pooling::kBackward, plan,
                         dtype, x_dims,
                         {BufferOf(x.get()), BufferOf(dy.get()), BufferOf(dx.get())});
  }

 private:
  MaxPoolGradOp(Window2dSource window, NanPropagation nan)
      : window_(std::move(window)), nan_(nan) {}
  Window2dSource window_;
  NanPropagation nan_;
};

// Refuses a plan the window-index kernels do not take (pooling_launch::WindowIndexable): the
// graph optimizer rewrites only VALID max pooling with strides equal to ksize, NaNs not
// propagated, so this fails only for a graph that names the ops itself.
absl::Status CheckWindowIndexable(const PoolPlan& plan) {
  const PoolingDescriptorSettings& s = plan.settings;
  int64_t slots = 1;
  bool tiles = s.nan_propagation == NanPropagation::kNotPropagate;
  for (int k = 0; k < s.spatial_dims; ++k) {
    tiles = tiles && s.window[k] == s.stride[k] && s.pad_before[k] == 0 && s.pad_after[k] == 0;
    slots *= s.window[k];
  }
  if (tiles && slots <= pooling::kMaxWindowSlots) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      fused_ops::kMaxPoolWithWindowIndex, " and ", fused_ops::kMaxPoolGradFromWindowIndex,
      " need windows that tile the input (VALID padding, strides equal to ksize) of at most ",
      pooling::kMaxWindowSlots, " elements, and NaNs not propagated"));
}

// The graph optimizer's _VgpuMaxPoolWithWindowIndex (graph/fused_ops.h): MaxPool's output and
// the window index its gradient reads (pooling::kForwardWithWindowIndex).
class MaxPoolWithWindowIndexOp {
 public:
  static absl::StatusOr<std::unique_ptr<MaxPoolWithWindowIndexOp>> Create(
      OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(Window2dSource window,
                          Window2dSource::Read(construction, CheckGradWindow2d, true));
    VGPU_ASSIGN_OR_RETURN(NanPropagation nan, MaxPoolNanPropagationFromEnvironment());
    return std::unique_ptr<MaxPoolWithWindowIndexOp>(
        new MaxPoolWithWindowIndexOp(std::move(window), nan));
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(const PoolWindow window, window_.Window(context, 1, 2));
    const std::vector<int64_t> x_dims = ShapeOf(x.get());
    VGPU_ASSIGN_OR_RETURN(PoolPlan plan,
                          PlanPooling(window, PoolingMode::kMax, nan_, x_dims, kRank4));
    VGPU_RETURN_IF_ERROR(CheckWindowIndexable(plan));
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, plan.output_dims));
    VGPU_ASSIGN_OR_RETURN(TensorPtr index, context.AllocateOutput(1, TF_UINT8, plan.output_dims));
    if (TF_TensorElementCount(y.get()) == 0) return absl::OkStatus();
    return LaunchPooling(context, pooling::kForwardWithWindowIndex, plan, dtype, x_dims,
                         {BufferOf(x.get()), BufferOf(y.get()), BufferOf(index.get())});
  }

 private:
  MaxPoolWithWindowIndexOp(Window2dSource window, NanPropagation nan)
      : window_(std::move(window)), nan_(nan) {}
  Window2dSource window_;
  NanPropagation nan_;
};

// The graph optimizer's _VgpuMaxPoolGradFromWindowIndex (orig_input, window_index, grad): the
// gradient with respect to orig_input, through a ReLU with the attribute through_relu
// (pooling::kBackwardFromWindowIndex / kBackwardFromWindowIndexThroughRelu). orig_input gives
// the shape only.
class MaxPoolGradFromWindowIndexOp {
 public:
  static absl::StatusOr<std::unique_ptr<MaxPoolGradFromWindowIndexOp>> Create(
      OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(Window2dSource window,
                          Window2dSource::Read(construction, CheckGradWindow2d, true));
    VGPU_ASSIGN_OR_RETURN(bool through_relu, construction.Bool("through_relu"));
    return std::unique_ptr<MaxPoolGradFromWindowIndexOp>(
        new MaxPoolGradFromWindowIndexOp(std::move(window), through_relu));
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<3>());
    auto& [x, index, dy] = inputs;
    VGPU_ASSIGN_OR_RETURN(const PoolWindow window, window_.Window(context, 3, 4));
    const std::vector<int64_t> x_dims = ShapeOf(x.get());
    VGPU_ASSIGN_OR_RETURN(PoolPlan plan, PlanPooling(window, PoolingMode::kMax,
                                                     NanPropagation::kNotPropagate, x_dims,
                                                     kRank4));
    VGPU_RETURN_IF_ERROR(ExpectShape("window_index", plan.output_dims, ShapeOf(index.get())));
    VGPU_RETURN_IF_ERROR(ExpectShape("grad", plan.output_dims, ShapeOf(dy.get())));
    VGPU_RETURN_IF_ERROR(CheckWindowIndexable(plan));
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr dx, context.AllocateOutput(0, dtype, x_dims));
    if (TF_TensorElementCount(dx.get()) == 0) return absl::OkStatus();
    return LaunchPooling(context,
                         through_relu_ ? pooling::kBackwardFromWindowIndexThroughRelu
                                       : pooling::kBackwardFromWindowIndex,
                         plan, dtype, x_dims,
                         {BufferOf(index.get()), BufferOf(dy.get()), BufferOf(dx.get())});
  }

 private:
  MaxPoolGradFromWindowIndexOp(Window2dSource window, bool through_relu)
      : window_(std::move(window)), through_relu_(through_relu) {}
  Window2dSource window_;
  bool through_relu_;
};

// MaxPoolGradGrad / MaxPoolGradGradV2 (orig_input, orig_output, grad[, ksize, strides]) -> the
// gradient of MaxPoolGrad with respect to its grad input, shaped like orig_output.
class MaxPoolGradGradOp {
 public:
  static absl::StatusOr<std::unique_ptr<MaxPoolGradGradOp>> Create(
      OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(Window2dSource window,
                          Window2dSource::Read(construction, CheckGradWindow2d, false));
    return std::unique_ptr<MaxPoolGradGradOp>(new MaxPoolGradGradOp(std::move(window)));
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(MaxPoolGradInputs in,
                          ReadMaxPoolGradInputs(context, 4, "out_grad_backprop"));
    const auto& [x, y, ddx, x_dims] = in;
    VGPU_ASSIGN_OR_RETURN(const PoolWindow window, window_.Window(context, 3, 4));
    VGPU_ASSIGN_OR_RETURN(PoolPlan plan,
                          PlanMaxPoolGradient(window, NanPropagation::kNotPropagate, in));
    VGPU_RETURN_IF_ERROR(ExpectShape("grad", x_dims, ShapeOf(ddx.get())));
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr ddy, context.AllocateOutput(0, dtype, plan.output_dims));
    if (TF_TensorElementCount(ddy.get()) == 0) return absl::OkStatus();
    return LaunchPooling(context, pooling::kGradGrad, plan, dtype, x_dims,
                         {BufferOf(x.get()), BufferOf(y.get()), BufferOf(ddx.get()),
                          BufferOf(ddy.get())});
  }

 private:
  explicit MaxPoolGradGradOp(Window2dSource window) : window_(std::move(window)) {}
  Window2dSource window_;
};

// AvgPoolGrad(orig_input_shape (host int32), grad) -> gradient with respect to the input.
class AvgPoolGradOp {
 public:
  static absl::StatusOr<std::unique_ptr<AvgPoolGradOp>> Create(OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(PoolWindow window, ReadPoolLayout(construction, 2));
    if (window.padding == Padding::kExplicit) {
      return absl::InvalidArgumentError("AvgPoolGrad does not support EXPLICIT padding");
    }
    VGPU_RETURN_IF_ERROR(ReadWindowAttributes(construction, window));
    VGPU_RETURN_IF_ERROR(CheckWindow2d(window, "strides", kKsizePositive, false));
    return std::unique_ptr<AvgPoolGradOp>(new AvgPoolGradOp(std::move(window)));
  }

  absl::Status Compute(OpContext& context) {
    return ComputeAvgPoolingBackward(
        context, window_,
        {"orig_input_shape", [](int64_t, absl::Span<const int64_t> shape) {
           return absl::StrCat("orig_input_shape has a negative dimension: ", ShapeString(shape));
         }});
  }

 private:
  explicit AvgPoolGradOp(PoolWindow window) : window_(std::move(window)) {}
  PoolWindow window_;
};

constexpr char kNanNote[] =
    " TF_ENABLE_MAXPOOL_NANPROP=1 (read when the kernel is built, as TensorFlow's GPU kernel "
    "does): a NaN in a window is its maximum (cuDNN's NaN propagation).";

}  // namespace

void RegisterPoolingOps(const char* device_type) {
  RegisterKernelForTypes<PoolOp<PoolingMode::kMax>>("MaxPool", device_type, "T", kFloatingTypes);
  RegisterKernelForTypes<PoolOp<PoolingMode::kMax>>("MaxPoolV2", device_type, "T",
                                                    kFloatingTypes, {"ksize", "strides"});
  RegisterKernelForTypes<PoolOp<PoolingMode::kAverage>>("AvgPool", device_type, "T",
                                                        kFloatingTypes);
  RegisterKernelForTypes<MaxPoolGradOp<>>("MaxPoolGrad", device_type, "T", kFloatingTypes);
  RegisterKernelForTypes<MaxPoolGradOp<>>("MaxPoolGradV2", device_type, "T", kFloatingTypes,
                                          {"ksize", "strides"});
  RegisterKernelForTypes<MaxPoolGradOp<true>>(fused_ops::kMaxPoolGradWithReluGrad, device_type,
                                              "T", kFloatingTypes);
  RegisterKernelForTypes<MaxPoolWithWindowIndexOp>(fused_ops::kMaxPoolWithWindowIndex,
                                                   device_type, "T", kFloatingTypes);
  RegisterKernelForTypes<MaxPoolGradFromWindowIndexOp>(fused_ops::kMaxPoolGradFromWindowIndex,
                                                       device_type, "T", kFloatingTypes);
  RegisterKernelForTypes<MaxPoolGradGradOp>("MaxPoolGradGrad", device_type, "T", kFloatingTypes);
  RegisterKernelForTypes<MaxPoolGradGradOp>("MaxPoolGradGradV2", device_type, "T",
                                            kFloatingTypes, {"ksize", "strides"});
  RegisterKernelForTypes<AvgPoolGradOp>("AvgPoolGrad", device_type, "T", kFloatingTypes,
                                        {"orig_input_shape"});

  const std::string nan_forward =
      absl::StrCat("Windows start from the dtype's lowest value; NaNs are skipped.", kNanNote);
  const std::string nan_backward = absl::StrCat(
      "Each window's gradient goes to its first maximum (row-major), recomputed from "
      "orig_input; NaNs are skipped (a window of NaNs routes nothing).",
      kNanNote);
  DocumentOp("MaxPool", "NHWC, NCHW",
             absl::StrCat("VALID, SAME, EXPLICIT padding. ", nan_forward).c_str());
  DocumentOp("MaxPoolV2", "NHWC, NCHW",
             absl::StrCat("ksize and strides as host int32 tensors (tf.raw_ops.MaxPoolV2; "
                          "TensorFlow 2.21's tf.nn.max_pool emits MaxPool). ",
                          nan_forward)
                 .c_str());
  DocumentOp("MaxPoolGrad", "NHWC, NCHW",
             absl::StrCat("VALID, SAME, EXPLICIT padding. ", nan_backward).c_str());
  DocumentOp("MaxPoolGradV2", "NHWC, NCHW",
             absl::StrCat("ksize and strides as host int32 tensors. ", nan_backward).c_str());
  DocumentOp(fused_ops::kMaxPoolGradWithReluGrad, "NHWC, NCHW",
             "The plugin's fusion of MaxPoolGrad and the ReluGrad of its orig_input "
             "(docs/graph_fusions.md): MaxPoolGrad's gradient times (orig_input > 0), in one "
             "pass.");
  DocumentOp(fused_ops::kMaxPoolWithWindowIndex, "NHWC, NCHW",
             "The plugin's MaxPool whose gradient is a MaxPoolGrad of the same graph "
             "(docs/graph_fusions.md): also outputs, per window, a byte naming the element the "
             "gradient goes to. VALID padding, strides equal to ksize, at most 127 elements.");
  DocumentOp(fused_ops::kMaxPoolGradFromWindowIndex, "NHWC, NCHW",
             "The plugin's MaxPoolGrad (or its fusion with ReluGrad, through_relu) from that "
             "window index, without reading orig_input.");
  const char* grad_grad =
      "Gradient of MaxPoolGrad: the grad value at each window's first element equal to "
      "orig_output (0 where none is, e.g. a NaN maximum).";
  DocumentOp("MaxPoolGradGrad", "NHWC, NCHW", grad_grad);
  DocumentOp("MaxPoolGradGradV2", "NHWC, NCHW",
             absl::StrCat(grad_grad, " ksize and strides as host int32 tensors.").c_str());
  DocumentOp("AvgPool", "NHWC, NCHW",
             "VALID, SAME padding; padding is excluded from each window's count.");
  DocumentOp("AvgPoolGrad", "NHWC, NCHW",
             "orig_input_shape as a host int32 tensor; accumulates in TensorFlow's CPU order.");

  RegisterPoolingArgmaxOps(device_type);
  RegisterPooling3dOps(device_type);
}

}  // namespace vgpu
