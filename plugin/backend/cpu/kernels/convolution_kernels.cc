// CPU kernels of the convolution family (protocol/kernels/convolution.h): 2-D and 3-D
// convolutions, their backward passes and the fused forward with bias and activation on the
// executor's thread pool, from the geometry launch/convolution_launch.h reads. Channels-first
// tensors and 16-bit types are staged to channels-last in the computation's type (float for
// half/bfloat16). Ungrouped 2-D convolutions and input gradients use Eigen's spatial
// convolutions, the code TensorFlow's CPU kernels run; depthwise convolutions are dispatched to
// convolution_depthwise.cc; 3-D and grouped convolutions and every filter gradient to the
// im2col kernels of convolution_im2col.cc. Float32 convolutions go to oneDNN first
// (convolution_onednn.cc) when the build has it, bfloat16 ones too where the CPU has bfloat16
// math, and so do the float32 staged copies of the other half/bfloat16 ones (Keras' mixed
// precision). The other families of the protocol's
// convolution id range are matmul_kernels.cc, bias_kernels.cc and rearrange_kernels.cc.
#include "plugin/backend/cpu/kernels/convolution_kernels.h"

#include <algorithm>
#include <optional>

#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/onednn_kernels.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/convolution.h"
#include "tensorflow/core/kernels/eigen_backward_spatial_convolutions.h"
#include "xla/tsl/framework/convolution/eigen_spatial_convolutions.h"

namespace vgpu::cpu_kernels {
namespace {

using convolution_launch::ConvolutionBiasActivationLaunch;
using convolution_launch::ReadConvolutionBiasActivationLaunch;
using convolution_launch::ReadConvolutionLaunch;

// True when Eigen's backward-input convolution, which infers the forward padding of spatial
// dimension `dim` from the sizes (as SAME or VALID would place it), reproduces its padding.
bool EigenInfersPadding(const ConvolutionGeometry& g, int dim) {
  const int64_t input = g.in[dim], filter = g.filter[dim], dilation = g.dilation[dim];
  const int64_t stride = g.stride[dim], output = g.out[dim], pad_before = g.pad_before[dim];
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
  ConstMap4<CT> input(input_data, g.batch, g.in[kRows], g.in[kCols], g.in_depth);
  ConstMap4<CT> filter(filter_data, g.filter[kRows], g.filter[kCols], g.filter_in_depth,
                       g.filter_out);
  Map4<CT> output(output_data, g.batch, g.out[kRows], g.out[kCols], g.out_depth);
  const ContractDims matmul{Eigen::IndexPair<Index>(1, 0)};
  if (g.filter[kRows] == 1 && g.filter[kCols] == 1 && g.UnitStridesAndDilations() &&
      g.NoPadding()) {
    const Index pixels = g.batch * g.in[kRows] * g.in[kCols];
    Map2<CT>(output.data(), pixels, g.out_depth).device(device) =
        ConstMap2<CT>(input.data(), pixels, g.in_depth)
            .contract(ConstMap2<CT>(filter.data(), g.in_depth, g.out_depth), matmul);
  } else if (g.filter[kRows] == g.in[kRows] && g.filter[kCols] == g.in[kCols] && g.NoPadding() &&
             g.dilation[kRows] == 1 && g.dilation[kCols] == 1) {
    const Index patch = g.in[kRows] * g.in[kCols] * g.in_depth;
    Map2<CT>(output.data(), g.batch, g.out_depth).device(device) =
        ConstMap2<CT>(input.data(), g.batch, patch)
            .contract(ConstMap2<CT>(filter.data(), patch, g.out_depth), matmul);
  } else {
    // Eigen names the W dimension of a row-major NHWC tensor "rows": swap H and W throughout.
    output.device(device) = Eigen::SpatialConvolution(
        input, filter, g.stride[kCols], g.stride[kRows], Eigen::PADDING_VALID, g.dilation[kCols],
        g.dilation[kRows], Eigen::NoOpOutputKernel(), g.pad_before[kCols], g.pad_after[kCols],
        g.pad_before[kRows], g.pad_after[kRows]);
  }
}

// dx from dy and the filter of an ungrouped 2-D convolution, NHWC, in the compute type.
template <typename CT>
void ConvolveBackwardInputNhwc(const Eigen::ThreadPoolDevice& device, const ConvolutionGeometry& g,
                               const CT* filter_data, const CT* out_backprop_data,
                               CT* in_backprop_data) {
  ConstMap4<CT> filter(filter_data, g.filter[kRows], g.filter[kCols], g.filter_in_depth,
                       g.filter_out);
  ConstMap4<CT> out_backprop(out_backprop_data, g.batch, g.out[kRows], g.out[kCols], g.out_depth);
  Map4<CT> in_backprop(in_backprop_data, g.batch, g.in[kRows], g.in[kCols], g.in_depth);
  if (g.filter[kRows] == 1 && g.filter[kCols] == 1 && g.UnitStridesAndDilations() &&
      g.NoPadding()) {
    const Index pixels = g.batch * g.in[kRows] * g.in[kCols];
    const ContractDims by_out_depth{Eigen::IndexPair<Index>(1, 1)};
    Map2<CT>(in_backprop.data(), pixels, g.in_depth).device(device) =
        ConstMap2<CT>(out_backprop.data(), pixels, g.out_depth)
            .contract(ConstMap2<CT>(filter.data(), g.in_depth, g.out_depth), by_out_depth);
    return;
  }
  if (EigenInfersPadding(g, kRows) && EigenInfersPadding(g, kCols)) {
    in_backprop.device(device) = Eigen::SpatialConvolutionBackwardInput(
        filter, out_backprop, g.in[kCols], g.in[kRows], g.stride[kCols], g.stride[kRows],
        g.dilation[kCols], g.dilation[kRows]);
    return;
  }
  // Other explicit paddings: the gradient of a VALID convolution of the padded input, with the
  // padding cut off again (as TensorFlow's CPU kernel does).
  const Eigen::DSizes<Index, 4> offsets{0, g.pad_before[kRows], g.pad_before[kCols], 0};
  in_backprop.device(device) =
      Eigen::SpatialConvolutionBackwardInput(
          filter, out_backprop, g.in[kCols] + g.pad_before[kCols] + g.pad_after[kCols],
          g.in[kRows] + g.pad_before[kRows] + g.pad_after[kRows], g.stride[kCols],
          g.stride[kRows], g.dilation[kCols], g.dilation[kRows])
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

// The types oneDNN's kernels take as they are: float32, and bfloat16 where the CPU has
// bfloat16 math (onednn_kernels.h; elsewhere bfloat16 is staged as float32 like half).
template <typename T>
constexpr bool kOnednnNative = std::is_same_v<T, float> || std::is_same_v<T, Eigen::bfloat16>;

// The geometry of staged copies: g's, float32 and channels-last.
ConvolutionGeometry StagedGeometry(const ConvolutionGeometry& g) {
  ConvolutionGeometry staged = g;
  staged.dtype = DType::kFloat32;
  staged.data_format = DataFormat::kNHWC;
  return staged;
}

// The three directions on channels-last buffers of the compute type CT (x, y, dx, dy NHWC;
// filters as TensorFlow lays them out): oneDNN's float32 kernel first when the buffers are
// `staged` copies of a 16-bit launch and oneDNN serves the geometry, else the kernels
// TensorFlow's CPU kernels run (depthwise, Eigen's spatial convolutions or im2col).
template <typename CT>
absl::Status ForwardChannelsLast(const Eigen::ThreadPoolDevice& device,
                                 const ConvolutionGeometry& g, bool staged, const CT* x,
                                 const CT* filter, CT* y) {
  if constexpr (std::is_same_v<CT, float>) {
    if (staged) {
      VGPU_ASSIGN_OR_RETURN(bool done,
                            OnednnConvolutionForward<float>(device, StagedGeometry(g), x, filter,
                                                            nullptr, std::nullopt, y));
      if (done) return absl::OkStatus();
    }
  }
  if (g.depthwise) {
    DepthwiseNhwc<CT>::Forward(device, g, x, filter, y);
  } else if (UsesEigenSpatialConvolution(g)) {
    ConvolveNhwc<CT>(device, g, x, filter, y);
  } else {
    return Im2col<CT>::Forward(device, g, x, filter, y);
  }
  return absl::OkStatus();
}

template <typename CT>
absl::Status BackwardInputChannelsLast(const Eigen::ThreadPoolDevice& device,
                                       const ConvolutionGeometry& g, bool staged,
                                       const CT* filter, const CT* dy, CT* dx) {
  if constexpr (std::is_same_v<CT, float>) {
    if (staged) {
      VGPU_ASSIGN_OR_RETURN(bool done, OnednnConvolutionBackwardInput(
                                           device, StagedGeometry(g), filter, dy, dx));
      if (done) return absl::OkStatus();
    }
  }
  if (g.depthwise) {
    DepthwiseNhwc<CT>::BackwardInput(device, g, filter, dy, dx);
  } else if (UsesEigenSpatialConvolution(g)) {
    ConvolveBackwardInputNhwc<CT>(device, g, filter, dy, dx);
  } else {
    return Im2col<CT>::BackwardInput(device, g, filter, dy, dx);
  }
  return absl::OkStatus();
}

template <typename CT>
absl::Status BackwardFilterChannelsLast(const Eigen::ThreadPoolDevice& device,
                                        const ConvolutionGeometry& g, bool staged, const CT* x,
                                        const CT* dy, CT* dfilter) {
  if constexpr (std::is_same_v<CT, float>) {
    if (staged) {
      VGPU_ASSIGN_OR_RETURN(bool done, OnednnConvolutionBackwardFilter(
                                           device, StagedGeometry(g), x, dy, dfilter));
      if (done) return absl::OkStatus();
    }
  }
  if (g.depthwise) {
    DepthwiseNhwc<CT>::BackwardFilter(device, g, x, dy, dfilter);
    return absl::OkStatus();
  }
  return Im2col<CT>::BackwardFilter(device, g, x, dy, dfilter);
}

// y = conv(x, filter), then activation(y + bias) when `epilogue` is given. Buffers: x and the
// filter at 0 and 1, y at `output_buffer`.
template <typename T>
absl::Status ForwardTyped(const KernelContext& context, const ConvolutionGeometry& g,
                          size_t output_buffer, const Epilogue<T>* epilogue) {
  using CT = ComputeType<T>;
  VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, g.input_elements));
  VGPU_ASSIGN_OR_RETURN(const T* w, context.Buffer<const T>(1, g.filter_elements));
  VGPU_ASSIGN_OR_RETURN(T* y, context.Buffer<T>(output_buffer, g.output_elements));
  const Eigen::ThreadPoolDevice& device = *context.device;
  if (g.output_elements == 0) return absl::OkStatus();
  if constexpr (kOnednnNative<T>) {
    VGPU_ASSIGN_OR_RETURN(
        bool done, OnednnConvolutionForward(
                       device, g, x, w, epilogue != nullptr ? epilogue->bias : nullptr,
                       epilogue != nullptr ? epilogue->activation : std::nullopt, y));
    if (done) return absl::OkStatus();
  }
  ChannelsLastOutput<T, CT> output(y, g.data_format, g.batch, g.OutputPixels(), g.out_depth);
  if (g.input_elements == 0 || g.filter_elements == 0) {  // only padding is convolved
    SetZero(device, output.data(), g.output_elements);
  } else {
    ChannelsLastInput<T, CT> input(device, x, g.data_format, g.batch, g.InputPixels(),
                                   g.in_depth);
    // The filter's layout does not depend on the data format: only its type may be staged.
    ChannelsLastInput<T, CT> filter(device, w, DataFormat::kNHWC, 1, 1, g.filter_elements);
    // Staged: the bias and the activation are added below, in float.
    VGPU_RETURN_IF_ERROR(ForwardChannelsLast<CT>(device, g, kIsFloat16Bit<T>, input.data(),
                                                 filter.data(), output.data()));
  }
  if (epilogue != nullptr) {
    AddBiasAndActivate<CT>(device, output.data(), g.batch * g.OutputPixels(), g.out_depth,
                           epilogue->bias, epilogue->activation);
  }
  output.Finish(device);
  return absl::OkStatus();
}

// convolution::kBackwardInput: dx from the filter and dy (oneDNN for float32 when it serves).
struct BackwardInput : FloatingKernel<BackwardInput, ReadConvolutionLaunch> {
  template <typename T>
  static absl::Status Run(const KernelContext& context, const ConvolutionGeometry& g) {
    using CT = ComputeType<T>;
    VGPU_ASSIGN_OR_RETURN(const T* w, context.Buffer<const T>(0, g.filter_elements));
    VGPU_ASSIGN_OR_RETURN(const T* dy, context.Buffer<const T>(1, g.output_elements));
    VGPU_ASSIGN_OR_RETURN(T* dx, context.Buffer<T>(2, g.input_elements));
    const Eigen::ThreadPoolDevice& device = *context.device;
    if (g.input_elements == 0) return absl::OkStatus();
    if (g.output_elements == 0 || g.filter_elements == 0) {
      SetZero(device, dx, g.input_elements);
      return absl::OkStatus();
    }
    if constexpr (kOnednnNative<T>) {
      VGPU_ASSIGN_OR_RETURN(bool done, OnednnConvolutionBackwardInput(device, g, w, dy, dx));
      if (done) return absl::OkStatus();
    }
    ChannelsLastInput<T, CT> filter(device, w, DataFormat::kNHWC, 1, 1, g.filter_elements);
    ChannelsLastInput<T, CT> out_backprop(device, dy, g.data_format, g.batch, g.OutputPixels(),
                                          g.out_depth);
    ChannelsLastOutput<T, CT> in_backprop(dx, g.data_format, g.batch, g.InputPixels(),
                                          g.in_depth);
    VGPU_RETURN_IF_ERROR(BackwardInputChannelsLast<CT>(device, g, kIsFloat16Bit<T>,
                                                       filter.data(), out_backprop.data(),
                                                       in_backprop.data()));
    in_backprop.Finish(device);
    return absl::OkStatus();
  }
};

// convolution::kBackwardFilter: dw from x and dy (oneDNN for float32 when it serves).
struct BackwardFilter : FloatingKernel<BackwardFilter, ReadConvolutionLaunch> {
  template <typename T>
  static absl::Status Run(const KernelContext& context, const ConvolutionGeometry& g) {
    using CT = ComputeType<T>;
    VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, g.input_elements));
    VGPU_ASSIGN_OR_RETURN(const T* dy, context.Buffer<const T>(1, g.output_elements));
    VGPU_ASSIGN_OR_RETURN(T* dw, context.Buffer<T>(2, g.filter_elements));
    const Eigen::ThreadPoolDevice& device = *context.device;
    if (g.filter_elements == 0) return absl::OkStatus();
    if (g.input_elements == 0 || g.output_elements == 0) {
      SetZero(device, dw, g.filter_elements);
      return absl::OkStatus();
    }
    if constexpr (kOnednnNative<T>) {
      VGPU_ASSIGN_OR_RETURN(bool done, OnednnConvolutionBackwardFilter(device, g, x, dy, dw));
      if (done) return absl::OkStatus();
    }
    ChannelsLastInput<T, CT> input(device, x, g.data_format, g.batch, g.InputPixels(),
                                   g.in_depth);
    ChannelsLastInput<T, CT> out_backprop(device, dy, g.data_format, g.batch, g.OutputPixels(),
                                          g.out_depth);
    ChannelsLastOutput<T, CT> filter_backprop(dw, DataFormat::kNHWC, 1, 1, g.filter_elements);
    VGPU_RETURN_IF_ERROR(BackwardFilterChannelsLast<CT>(device, g, kIsFloat16Bit<T>,
                                                        input.data(), out_backprop.data(),
                                                        filter_backprop.data()));
    filter_backprop.Finish(device);
    return absl::OkStatus();
  }
};

// convolution::kForward: y from x and the filter.
struct Forward : FloatingKernel<Forward, ReadConvolutionLaunch> {
  template <typename T>
  static absl::Status Run(const KernelContext& context, const ConvolutionGeometry& g) {
    return ForwardTyped<T>(context, g, /*output_buffer=*/2, /*epilogue=*/nullptr);
  }
};

// convolution::kForwardBiasActivation: kForward, then the bias and the activation.
struct ForwardBiasActivation
    : FloatingKernel<ForwardBiasActivation, ReadConvolutionBiasActivationLaunch> {
  template <typename T>
  static absl::Status Run(const KernelContext& context,
                          const ConvolutionBiasActivationLaunch& launch) {
    Epilogue<T> epilogue;
    VGPU_ASSIGN_OR_RETURN(epilogue.bias, context.Buffer<const T>(2, launch.geometry.out_depth));
    epilogue.activation = launch.activation;
    return ForwardTyped<T>(context, launch.geometry, /*output_buffer=*/3, &epilogue);
  }
};

}  // namespace

void AddConvolutionKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kConvolution, Forward::Launch, BackwardInput::Launch,
                  BackwardFilter::Launch, ForwardBiasActivation::Launch);
}

}  // namespace vgpu::cpu_kernels
