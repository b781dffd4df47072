// CPU kernels of the convolution family (protocol/kernels/convolution.h): 2-D and 3-D
// convolutions and their backward passes on the executor's thread pool. Channels-first tensors
// and 16-bit types are staged to channels-last in the computation's type (float for
// half/bfloat16). Ungrouped 2-D convolutions and input gradients use Eigen's spatial
// convolutions, the code TensorFlow's CPU kernels run; depthwise convolutions are dispatched to
// convolution_depthwise.cc; 3-D and grouped convolutions and every filter gradient to the
// im2col kernels of convolution_im2col.cc. Float32 convolutions go to oneDNN first
// (convolution_onednn.cc) when the build has it. Also registers the family's other kernels.
#include "plugin/backend/cpu/kernels/convolution_kernels.h"
#include "plugin/backend/cpu/kernels/onednn_kernels.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/convolution.h"
#include "tensorflow/core/kernels/eigen_backward_spatial_convolutions.h"
#include "xla/tsl/framework/convolution/eigen_spatial_convolutions.h"

namespace vgpu::cpu_kernels {
namespace {

using Index = Eigen::DenseIndex;
using ContractDims = Eigen::array<Eigen::IndexPair<Index>, 1>;
template <typename T>
using Map2 = RowMajorMap<T, 2>;
template <typename T>
using ConstMap2 = RowMajorMap<const T, 2>;

// Output size of one spatial dimension, TensorFlow's rule with explicit paddings.
int64_t WindowedOutputSize(int64_t input, int64_t filter, int64_t dilation, int64_t stride,
                           int64_t pad_before, int64_t pad_after) {
  const int64_t effective_filter = (filter - 1) * dilation + 1;
  const int64_t span = input + pad_before + pad_after - effective_filter;
  return span < 0 ? 0 : span / stride + 1;
}

// True when Eigen's backward-input convolution, which infers the forward padding from the
// sizes (as SAME or VALID would place it), reproduces `pad_before`.
bool EigenInfersPadding(int64_t input, int64_t filter, int64_t dilation, int64_t stride,
                        int64_t output, int64_t pad_before) {
  const int64_t effective_filter = (filter - 1) * dilation + 1;
  const int64_t inferred =
      std::max<int64_t>(0, ((output - 1) * stride + effective_filter - input) / 2);
  if (inferred != pad_before) return false;
  const int64_t backward_pad_before = effective_filter - 1 - inferred;
  const int64_t backward_pad_after =
      input - (output - 1) * stride - 2 - backward_pad_before + effective_filter;
  return backward_pad_before >= 0 && backward_pad_after >= 0;
}

// y = conv(x, filter) of an ungrouped 2-D convolution, NHWC, in the compute type. Uses the same
// shortcuts as TensorFlow's CPU kernel: a plain matrix product for 1x1 filters and for filters
// covering the whole input.
template <typename CT>
void ConvolveNhwc(const Eigen::ThreadPoolDevice& device, const ConvolutionGeometry& g,
                  const CT* input_data, const CT* filter_data, CT* output_data) {
  ConstMap4<CT> input(input_data, g.batch, g.in_rows, g.in_cols, g.in_depth);
  ConstMap4<CT> filter(filter_data, g.filter_rows, g.filter_cols, g.filter_in_depth,
                       g.filter_out);
  Map4<CT> output(output_data, g.batch, g.out_rows, g.out_cols, g.out_depth);
  const ContractDims matmul{Eigen::IndexPair<Index>(1, 0)};
  if (g.filter_rows == 1 && g.filter_cols == 1 && g.UnitStridesAndDilations() && g.NoPadding()) {
    const Index pixels = g.batch * g.in_rows * g.in_cols;
    Map2<CT>(output.data(), pixels, g.out_depth).device(device) =
        ConstMap2<CT>(input.data(), pixels, g.in_depth)
            .contract(ConstMap2<CT>(filter.data(), g.in_depth, g.out_depth), matmul);
  } else if (g.filter_rows == g.in_rows && g.filter_cols == g.in_cols && g.NoPadding() &&
             g.dilation_rows == 1 && g.dilation_cols == 1) {
    const Index patch = g.in_rows * g.in_cols * g.in_depth;
    Map2<CT>(output.data(), g.batch, g.out_depth).device(device) =
        ConstMap2<CT>(input.data(), g.batch, patch)
            .contract(ConstMap2<CT>(filter.data(), patch, g.out_depth), matmul);
  } else {
    // Eigen names the W dimension of a row-major NHWC tensor "rows": swap H and W throughout.
    output.device(device) = Eigen::SpatialConvolution(
        input, filter, g.stride_cols, g.stride_rows, Eigen::PADDING_VALID, g.dilation_cols,
        g.dilation_rows, Eigen::NoOpOutputKernel(), g.pad_left, g.pad_right, g.pad_top,
        g.pad_bottom);
  }
}

// dx from dy and the filter of an ungrouped 2-D convolution, NHWC, in the compute type.
template <typename CT>
void ConvolveBackwardInputNhwc(const Eigen::ThreadPoolDevice& device, const ConvolutionGeometry& g,
                               const CT* filter_data, const CT* out_backprop_data,
                               CT* in_backprop_data) {
  ConstMap4<CT> filter(filter_data, g.filter_rows, g.filter_cols, g.filter_in_depth,
                       g.filter_out);
  ConstMap4<CT> out_backprop(out_backprop_data, g.batch, g.out_rows, g.out_cols, g.out_depth);
  Map4<CT> in_backprop(in_backprop_data, g.batch, g.in_rows, g.in_cols, g.in_depth);
  if (g.filter_rows == 1 && g.filter_cols == 1 && g.UnitStridesAndDilations() && g.NoPadding()) {
    const Index pixels = g.batch * g.in_rows * g.in_cols;
    const ContractDims by_out_depth{Eigen::IndexPair<Index>(1, 1)};
    Map2<CT>(in_backprop.data(), pixels, g.in_depth).device(device) =
        ConstMap2<CT>(out_backprop.data(), pixels, g.out_depth)
            .contract(ConstMap2<CT>(filter.data(), g.in_depth, g.out_depth), by_out_depth);
    return;
  }
  if (EigenInfersPadding(g.in_rows, g.filter_rows, g.dilation_rows, g.stride_rows, g.out_rows,
                         g.pad_top) &&
      EigenInfersPadding(g.in_cols, g.filter_cols, g.dilation_cols, g.stride_cols, g.out_cols,
                         g.pad_left)) {
    in_backprop.device(device) = Eigen::SpatialConvolutionBackwardInput(
        filter, out_backprop, g.in_cols, g.in_rows, g.stride_cols, g.stride_rows,
        g.dilation_cols, g.dilation_rows);
    return;
  }
  // Other explicit paddings: the gradient of a VALID convolution of the padded input, with the
  // padding cut off again (as TensorFlow's CPU kernel does).
  const Eigen::DSizes<Index, 4> offsets{0, g.pad_top, g.pad_left, 0};
  in_backprop.device(device) =
      Eigen::SpatialConvolutionBackwardInput(
          filter, out_backprop, g.in_cols + g.pad_left + g.pad_right,
          g.in_rows + g.pad_top + g.pad_bottom, g.stride_cols, g.stride_rows, g.dilation_cols,
          g.dilation_rows)
          .eval()
          .slice(offsets, in_backprop.dimensions());
}

template <typename T>
void SetZero(const Eigen::ThreadPoolDevice& device, T* data, int64_t elements) {
  if (elements == 0) return;
  FlatMap<T> flat(data, elements);
  flat.device(device) = flat.constant(T(0));
}

// The bias and activation a fused forward launch adds to the convolution.
template <typename T>
struct Epilogue {
  const T* bias = nullptr;
  std::optional<ActivationMode> activation;
};

// True when Eigen's 2-D spatial convolutions handle the launch (ungrouped, not depthwise).
bool UsesEigenSpatialConvolution(const ConvolutionGeometry& g) {
  return g.spatial_dims == 2 && g.groups == 1 && !g.depthwise;
}

// y = conv(x, filter), then activation(y + bias) when `epilogue` is given. Buffers: x and the
// filter at 0 and 1, y at `output_buffer`.
template <typename T>
absl::Status ForwardTyped(const KernelContext& context, const ConvolutionGeometry& g,
                          size_t output_buffer, const Epilogue<T>* epilogue) {
  using CT = ComputeType<T>;
  VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, g.InputElements()));
  VGPU_ASSIGN_OR_RETURN(const T* w, context.Buffer<const T>(1, g.FilterElements()));
  VGPU_ASSIGN_OR_RETURN(T* y, context.Buffer<T>(output_buffer, g.OutputElements()));
  const Eigen::ThreadPoolDevice& device = *context.device;
  if (g.OutputElements() == 0) return absl::OkStatus();
  if constexpr (std::is_same_v<T, float>) {
    VGPU_ASSIGN_OR_RETURN(
        bool done, OnednnConvolutionForward(
                       device, g, x, w, epilogue != nullptr ? epilogue->bias : nullptr,
                       epilogue != nullptr ? epilogue->activation : std::nullopt, y));
    if (done) return absl::OkStatus();
  }
  ChannelsLastOutput<T, CT> output(y, g.data_format, g.batch, g.OutputPixels(), g.out_depth);
  if (g.InputElements() == 0 || g.FilterElements() == 0) {  // only padding is convolved
    SetZero(device, output.data(), g.OutputElements());
  } else {
    ChannelsLastInput<T, CT> input(device, x, g.data_format, g.batch, g.InputPixels(),
                                   g.in_depth);
    // The filter's layout does not depend on the data format: only its type may be staged.
    ChannelsLastInput<T, CT> filter(device, w, DataFormat::kNHWC, 1, 1, g.FilterElements());
    if (g.depthwise) {
      DepthwiseForwardNhwc<CT>(device, g, input.data(), filter.data(), output.data());
    } else if (UsesEigenSpatialConvolution(g)) {
      ConvolveNhwc<CT>(device, g, input.data(), filter.data(), output.data());
    } else {
      VGPU_RETURN_IF_ERROR(
          Im2colForward<CT>(device, g, input.data(), filter.data(), output.data()));
    }
  }
  if (epilogue != nullptr) {
    AddBiasAndActivate<CT>(device, output.data(), g.batch * g.OutputPixels(), g.out_depth,
                           epilogue->bias, epilogue->activation);
  }
  output.Finish(device);
  return absl::OkStatus();
}

template <typename T>
absl::Status BackwardInputTyped(const KernelContext& context, const ConvolutionGeometry& g) {
  using CT = ComputeType<T>;
  VGPU_ASSIGN_OR_RETURN(const T* w, context.Buffer<const T>(0, g.FilterElements()));
  VGPU_ASSIGN_OR_RETURN(const T* dy, context.Buffer<const T>(1, g.OutputElements()));
  VGPU_ASSIGN_OR_RETURN(T* dx, context.Buffer<T>(2, g.InputElements()));
  const Eigen::ThreadPoolDevice& device = *context.device;
  if (g.InputElements() == 0) return absl::OkStatus();
  if (g.OutputElements() == 0 || g.FilterElements() == 0) {
    SetZero(device, dx, g.InputElements());
    return absl::OkStatus();
  }
  if constexpr (std::is_same_v<T, float>) {
    VGPU_ASSIGN_OR_RETURN(bool done, OnednnConvolutionBackwardInput(device, g, w, dy, dx));
    if (done) return absl::OkStatus();
  }
  ChannelsLastInput<T, CT> filter(device, w, DataFormat::kNHWC, 1, 1, g.FilterElements());
  ChannelsLastInput<T, CT> out_backprop(device, dy, g.data_format, g.batch, g.OutputPixels(),
                                        g.out_depth);
  ChannelsLastOutput<T, CT> in_backprop(dx, g.data_format, g.batch, g.InputPixels(),
                                        g.in_depth);
  if (g.depthwise) {
    DepthwiseBackwardInputNhwc<CT>(device, g, filter.data(), out_backprop.data(),
                                   in_backprop.data());
  } else if (UsesEigenSpatialConvolution(g)) {
    ConvolveBackwardInputNhwc<CT>(device, g, filter.data(), out_backprop.data(),
                                  in_backprop.data());
  } else {
    VGPU_RETURN_IF_ERROR(Im2colBackwardInput<CT>(device, g, filter.data(), out_backprop.data(),
                                                 in_backprop.data()));
  }
  in_backprop.Finish(device);
  return absl::OkStatus();
}

template <typename T>
absl::Status BackwardFilterTyped(const KernelContext& context, const ConvolutionGeometry& g) {
  using CT = ComputeType<T>;
  VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, g.InputElements()));
  VGPU_ASSIGN_OR_RETURN(const T* dy, context.Buffer<const T>(1, g.OutputElements()));
  VGPU_ASSIGN_OR_RETURN(T* dw, context.Buffer<T>(2, g.FilterElements()));
  const Eigen::ThreadPoolDevice& device = *context.device;
  if (g.FilterElements() == 0) return absl::OkStatus();
  if (g.InputElements() == 0 || g.OutputElements() == 0) {
    SetZero(device, dw, g.FilterElements());
    return absl::OkStatus();
  }
  if constexpr (std::is_same_v<T, float>) {
    VGPU_ASSIGN_OR_RETURN(bool done, OnednnConvolutionBackwardFilter(device, g, x, dy, dw));
    if (done) return absl::OkStatus();
  }
  ChannelsLastInput<T, CT> input(device, x, g.data_format, g.batch, g.InputPixels(),
                                 g.in_depth);
  ChannelsLastInput<T, CT> out_backprop(device, dy, g.data_format, g.batch, g.OutputPixels(),
                                        g.out_depth);
  ChannelsLastOutput<T, CT> filter_backprop(dw, DataFormat::kNHWC, 1, 1, g.FilterElements());
  if (g.depthwise) {
    DepthwiseBackwardFilterNhwc<CT>(device, g, input.data(), out_backprop.data(),
                                    filter_backprop.data());
  } else {
    VGPU_RETURN_IF_ERROR(Im2colBackwardFilter<CT>(device, g, input.data(), out_backprop.data(),
                                                  filter_backprop.data()));
  }
  filter_backprop.Finish(device);
  return absl::OkStatus();
}

absl::Status ConvolutionForward(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(ConvolutionGeometry g, ReadConvolutionGeometry(context));
  return Dispatch::Floating(g.dtype, [&](auto zero) {
    using T = decltype(zero);
    return ForwardTyped<T>(context, g, /*output_buffer=*/2, /*epilogue=*/nullptr);
  });
}

absl::Status ConvolutionBiasActivationForward(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(4));
  VGPU_ASSIGN_OR_RETURN(ConvolutionGeometry g, ReadConvolutionGeometry(context));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings bias,
                        context.Descriptor<TensorDescriptorSettings>(4));
  if (bias.rank != 1 || bias.dims[0] != g.out_depth || bias.dtype != g.dtype) {
    return absl::InvalidArgumentError("the bias must be a vector of the output depth and dtype");
  }
  VGPU_ASSIGN_OR_RETURN(std::optional<ActivationMode> activation,
                        ReadOptionalActivation(context, 5));
  return Dispatch::Floating(g.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    Epilogue<T> epilogue;
    VGPU_ASSIGN_OR_RETURN(epilogue.bias, context.Buffer<const T>(2, g.out_depth));
    epilogue.activation = activation;
    return ForwardTyped<T>(context, g, /*output_buffer=*/3, &epilogue);
  });
}

absl::Status ConvolutionBackwardInput(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(ConvolutionGeometry g, ReadConvolutionGeometry(context));
  return Dispatch::Floating(g.dtype, [&](auto zero) {
    return BackwardInputTyped<decltype(zero)>(context, g);
  });
}

absl::Status ConvolutionBackwardFilter(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(ConvolutionGeometry g, ReadConvolutionGeometry(context));
  return Dispatch::Floating(g.dtype, [&](auto zero) {
    return BackwardFilterTyped<decltype(zero)>(context, g);
  });
}

}  // namespace

absl::StatusOr<std::optional<ActivationMode>> ReadOptionalActivation(const KernelContext& context,
                                                                     size_t index) {
  if (context.descriptors.size() <= index) return std::optional<ActivationMode>();
  VGPU_ASSIGN_OR_RETURN(ActivationDescriptorSettings activation,
                        context.Descriptor<ActivationDescriptorSettings>(index));
  switch (activation.mode) {
    case ActivationMode::kRelu:
    case ActivationMode::kRelu6:
    case ActivationMode::kSigmoid:
    case ActivationMode::kTanh:
      return std::optional<ActivationMode>(activation.mode);
  }
  return absl::InvalidArgumentError("unknown activation mode");
}

absl::StatusOr<ConvolutionGeometry> ReadConvolutionGeometry(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings x,
                        context.Descriptor<TensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(FilterDescriptorSettings filter,
                        context.Descriptor<FilterDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(ConvolutionDescriptorSettings conv,
                        context.Descriptor<ConvolutionDescriptorSettings>(2));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings y,
                        context.Descriptor<TensorDescriptorSettings>(3));
  if (conv.spatial_dims != 2 && conv.spatial_dims != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "convolutions have 2 or 3 spatial dimensions, got ", conv.spatial_dims));
  }
  const int rank = conv.spatial_dims + 2;
  if (x.rank != rank || y.rank != rank || filter.rank != rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a convolution with ", conv.spatial_dims, " spatial dimensions needs rank ", rank,
        " tensors and filter, got ", x.rank, ", ", y.rank, " and ", filter.rank));
  }
  if (filter.dtype != x.dtype || y.dtype != x.dtype) {
    return absl::InvalidArgumentError("convolution input, filter and output dtypes differ");
  }
  if (conv.data_format != DataFormat::kNHWC && conv.data_format != DataFormat::kNCHW) {
    return absl::InvalidArgumentError("unknown convolution data format");
  }
  if (conv.depthwise != 0 && (conv.spatial_dims != 2 || conv.group_count != 1)) {
    return absl::InvalidArgumentError(
        "depthwise convolutions are 2-D and have a group count of 1");
  }
  VGPU_RETURN_IF_ERROR(CheckedElementCount("convolution input", x.dims, rank).status());
  VGPU_RETURN_IF_ERROR(CheckedElementCount("convolution output", y.dims, rank).status());
  VGPU_RETURN_IF_ERROR(CheckedElementCount("convolution filter", filter.dims, rank).status());

  ConvolutionGeometry g;
  g.dtype = x.dtype;
  g.data_format = conv.data_format;
  g.spatial_dims = conv.spatial_dims;
  g.depthwise = conv.depthwise != 0;
  g.groups = conv.group_count;
  // Spatial dimensions of x and y, in order (D,) H, W; for 2-D convolutions the plane
  // dimension keeps its default of 1.
  const bool channels_last = conv.data_format == DataFormat::kNHWC;
  const int first_spatial = channels_last ? 1 : 2;
  const int offset = 3 - conv.spatial_dims;  // index into {planes, rows, cols}
  int64_t* in_sizes[3] = {&g.in_planes, &g.in_rows, &g.in_cols};
  int64_t* out_sizes[3] = {&g.out_planes, &g.out_rows, &g.out_cols};
  int64_t* filter_sizes[3] = {&g.filter_planes, &g.filter_rows, &g.filter_cols};
  for (int i = 0; i < conv.spatial_dims; ++i) {
    *in_sizes[offset + i] = x.dims[first_spatial + i];
    *out_sizes[offset + i] = y.dims[first_spatial + i];
    *filter_sizes[offset + i] = filter.dims[i];
  }
  g.batch = x.dims[0];
  g.in_depth = channels_last ? x.dims[rank - 1] : x.dims[1];
  g.out_depth = channels_last ? y.dims[rank - 1] : y.dims[1];
  g.filter_in_depth = filter.dims[rank - 2];
  g.filter_out = filter.dims[rank - 1];
  g.pad_top = conv.pad_top;
  g.pad_bottom = conv.pad_bottom;
  g.pad_left = conv.pad_left;
  g.pad_right = conv.pad_right;
  g.stride_rows = conv.stride_h;
  g.stride_cols = conv.stride_w;
  g.dilation_rows = conv.dilation_h;
  g.dilation_cols = conv.dilation_w;
  if (conv.spatial_dims == 3) {
    g.pad_front = conv.pad_front;
    g.pad_back = conv.pad_back;
    g.stride_planes = conv.stride_d;
    g.dilation_planes = conv.dilation_d;
  } else if (conv.pad_front != 0 || conv.pad_back != 0 || conv.stride_d != 1 ||
             conv.dilation_d != 1) {
    return absl::InvalidArgumentError("a 2-D convolution has no depth window");
  }

  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  for (int64_t d : {g.in_planes, g.in_rows, g.in_cols, g.out_planes, g.out_rows, g.out_cols,
                    g.filter_planes, g.filter_rows, g.filter_cols}) {
    if (d > kInt32Max) return absl::InvalidArgumentError("convolution spatial size too large");
  }
  if (y.dims[0] != g.batch) {
    return absl::InvalidArgumentError("convolution input and output batch sizes differ");
  }
  if (g.stride_planes < 1 || g.stride_rows < 1 || g.stride_cols < 1 ||
      g.dilation_planes < 1 || g.dilation_rows < 1 || g.dilation_cols < 1) {
    return absl::InvalidArgumentError("convolution strides and dilations must be positive");
  }
  if (g.pad_front < 0 || g.pad_back < 0 || g.pad_top < 0 || g.pad_bottom < 0 ||
      g.pad_left < 0 || g.pad_right < 0) {
    return absl::InvalidArgumentError("convolution paddings must not be negative");
  }
  if (g.groups < 1 || g.groups > kInt32Max) {
    return absl::InvalidArgumentError(
        absl::StrCat("convolution group count must be positive, got ", g.groups));
  }
  int64_t grouped_depth = 0, depthwise_out_depth = 0;
  if (__builtin_mul_overflow(g.filter_in_depth, g.groups, &grouped_depth) ||
      __builtin_mul_overflow(g.in_depth, g.filter_out, &depthwise_out_depth)) {
    return absl::InvalidArgumentError("convolution depths too large");
  }
  if (grouped_depth != g.in_depth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "convolution filter depth ", g.filter_in_depth, " times the group count ", g.groups,
        " differs from the input depth ", g.in_depth));
  }
  const int64_t expected_out_depth = g.depthwise ? depthwise_out_depth : g.filter_out;
  if (g.out_depth != expected_out_depth) {
    return absl::InvalidArgumentError(absl::StrCat("convolution output depth ", g.out_depth,
                                                   " should be ", expected_out_depth));
  }
  if (g.out_depth % g.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat("convolution output depth ", g.out_depth,
                                                   " is not divisible by the group count ",
                                                   g.groups));
  }
  const int64_t expected_planes = WindowedOutputSize(
      g.in_planes, g.filter_planes, g.dilation_planes, g.stride_planes, g.pad_front, g.pad_back);
  const int64_t expected_rows = WindowedOutputSize(g.in_rows, g.filter_rows, g.dilation_rows,
                                                   g.stride_rows, g.pad_top, g.pad_bottom);
  const int64_t expected_cols = WindowedOutputSize(g.in_cols, g.filter_cols, g.dilation_cols,
                                                   g.stride_cols, g.pad_left, g.pad_right);
  if (g.out_planes != expected_planes || g.out_rows != expected_rows ||
      g.out_cols != expected_cols) {
    return absl::InvalidArgumentError(absl::StrCat(
        "convolution output is ", g.out_planes, "x", g.out_rows, "x", g.out_cols,
        ", the window gives ", expected_planes, "x", expected_rows, "x", expected_cols));
  }
  return g;
}

}  // namespace vgpu::cpu_kernels

namespace vgpu {

void AddConvolutionKernels(KernelTable& table) {
  table.Add(convolution::kForward, "convolution_forward", cpu_kernels::ConvolutionForward);
  table.Add(convolution::kBackwardInput, "convolution_backward_input",
            cpu_kernels::ConvolutionBackwardInput);
  table.Add(convolution::kBackwardFilter, "convolution_backward_filter",
            cpu_kernels::ConvolutionBackwardFilter);
  table.Add(convolution::kForwardBiasActivation, "convolution_bias_activation_forward",
            cpu_kernels::ConvolutionBiasActivationForward);
  table.Add(convolution::kMatmul, "matmul", cpu_kernels::Matmul);
  table.Add(convolution::kMatmulBiasActivation, "matmul_bias_activation",
            cpu_kernels::MatmulBiasActivation);
  table.Add(convolution::kBiasAdd, "bias_add", cpu_kernels::BiasAdd);
  table.Add(convolution::kBiasAddGrad, "bias_add_grad", cpu_kernels::BiasAddGrad);
  table.Add(convolution::kRearrange, "rearrange", cpu_kernels::Rearrange);
}

}  // namespace vgpu
