// CPU kernels of the convolution family (protocol/kernels/convolution.h): 2-D convolution and
// its backward passes with Eigen's spatial convolutions on the executor's thread pool, the
// same code TensorFlow's CPU kernels run. NCHW tensors and 16-bit types are staged to NHWC in
// the computation's type (float for half/bfloat16); depthwise convolutions are dispatched to
// convolution_depthwise.cc. Also registers the matmul and bias kernels of the family.
#include "plugin/backend/cpu/kernels/convolution_kernels.h"

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

// Scratch budget of the im2col buffer of the filter gradient, in elements.
constexpr int64_t kColumnBufferElements = int64_t{8} << 20;

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

// y = conv(x, filter), NHWC, in the compute type. Uses the same shortcuts as TensorFlow's CPU
// kernel: a plain matrix product for 1x1 filters and for filters covering the whole input.
template <typename CT>
void ConvolveNhwc(const Eigen::ThreadPoolDevice& device, const ConvolutionGeometry& g,
                  ConstMap4<CT> input, ConstMap4<CT> filter, Map4<CT> output) {
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

// dx from dy and the filter, NHWC, in the compute type.
template <typename CT>
void ConvolveBackwardInputNhwc(const Eigen::ThreadPoolDevice& device, const ConvolutionGeometry& g,
                               ConstMap4<CT> filter, ConstMap4<CT> out_backprop,
                               Map4<CT> in_backprop) {
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

// Copies the image patches of output pixel rows [first_row, first_row + rows) (a row being one
// output row of one image, batch-major) into `columns`, one row of [filter_rows, filter_cols,
// in_depth] values per output pixel (im2col), with zeros where the window reaches into the
// padding. Rows are spread over the thread pool.
template <typename CT>
void ExtractPatches(const Eigen::ThreadPoolDevice& device, const ConvolutionGeometry& g,
                    const CT* input, Index first_row, Index rows, CT* columns) {
  const Index patch = g.filter_rows * g.filter_cols * g.in_depth;
  const Index depth_bytes = g.in_depth * sizeof(CT);
  const Eigen::TensorOpCost row_cost(g.out_cols * patch * sizeof(CT),
                                     g.out_cols * patch * sizeof(CT), g.out_cols * patch);
  device.parallelFor(rows, row_cost, [&](Index first, Index last) {
    for (Index row = first; row < last; ++row) {
      const Index n = (first_row + row) / g.out_rows;
      const Index oh = (first_row + row) % g.out_rows;
      for (Index ow = 0; ow < g.out_cols; ++ow) {
        CT* out = columns + (row * g.out_cols + ow) * patch;
        for (Index kh = 0; kh < g.filter_rows; ++kh) {
          const Index ih = oh * g.stride_rows - g.pad_top + kh * g.dilation_rows;
          for (Index kw = 0; kw < g.filter_cols; ++kw, out += g.in_depth) {
            const Index iw = ow * g.stride_cols - g.pad_left + kw * g.dilation_cols;
            if (ih < 0 || ih >= g.in_rows || iw < 0 || iw >= g.in_cols) {
              std::memset(out, 0, depth_bytes);
            } else {
              std::memcpy(out, input + ((n * g.in_rows + ih) * g.in_cols + iw) * g.in_depth,
                          depth_bytes);
            }
          }
        }
      }
    }
  });
}

// dfilter from x and dy, NHWC, in the compute type: the image patches of a group of output
// pixel rows (im2col, about kColumnBufferElements at a time) contracted with dy over the
// pixels, as TensorFlow's custom CPU filter gradient does. Covers every combination of
// strides, dilations and paddings.
template <typename CT>
void ConvolveBackwardFilterNhwc(const Eigen::ThreadPoolDevice& device,
                                const ConvolutionGeometry& g, ConstMap4<CT> input,
                                ConstMap4<CT> out_backprop, Map4<CT> filter_backprop) {
  const ContractDims by_pixels{Eigen::IndexPair<Index>(0, 0)};
  if (g.filter_rows == 1 && g.filter_cols == 1 && g.UnitStridesAndDilations() && g.NoPadding()) {
    const Index pixels = g.batch * g.in_rows * g.in_cols;
    Map2<CT>(filter_backprop.data(), g.in_depth, g.out_depth).device(device) =
        ConstMap2<CT>(input.data(), pixels, g.in_depth)
            .contract(ConstMap2<CT>(out_backprop.data(), pixels, g.out_depth), by_pixels);
    return;
  }
  const Index patch = g.filter_rows * g.filter_cols * g.in_depth;
  const Index total_rows = g.batch * g.out_rows;
  const Index per_row = std::max<Index>(1, g.out_cols * patch);
  const Index rows_per_chunk = std::clamp<Index>(kColumnBufferElements / per_row, 1, total_rows);
  Scratch<CT> columns(rows_per_chunk * g.out_cols * patch);
  Map2<CT> result(filter_backprop.data(), patch, g.out_depth);
  for (Index first = 0; first < total_rows; first += rows_per_chunk) {
    const Index rows = std::min(rows_per_chunk, total_rows - first);
    const Index pixels = rows * g.out_cols;
    ExtractPatches(device, g, input.data(), first, rows, columns.data());
    ConstMap2<CT> patches(columns.data(), pixels, patch);
    // dy's rows of output pixels are contiguous in NHWC, like the patches'.
    ConstMap2<CT> gradients(out_backprop.data() + first * g.out_cols * g.out_depth, pixels,
                            g.out_depth);
    if (first == 0) {
      result.device(device) = patches.contract(gradients, by_pixels);
    } else {
      result.device(device) += patches.contract(gradients, by_pixels);
    }
  }
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
  NhwcOutput<T, CT> output(y, g.data_format, g.batch, g.out_rows, g.out_cols, g.out_depth);
  if (g.InputElements() == 0 || g.FilterElements() == 0) {  // only padding is convolved
    SetZero(device, output.data(), g.OutputElements());
  } else {
    NhwcInput<T, CT> input(device, x, g.data_format, g.batch, g.in_rows, g.in_cols, g.in_depth);
    NhwcInput<T, CT> filter(device, w, DataFormat::kNHWC, g.filter_rows, g.filter_cols,
                            g.filter_in_depth, g.filter_out);
    if (g.depthwise) {
      DepthwiseForwardNhwc<CT>(device, g, input.data(), filter.data(), output.data());
    } else {
      ConvolveNhwc<CT>(device, g, input.tensor(), filter.tensor(), output.tensor());
    }
  }
  if (epilogue != nullptr) {
    AddBiasAndActivate<CT>(device, output.data(), g.batch * g.out_rows * g.out_cols, g.out_depth,
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
  NhwcInput<T, CT> filter(device, w, DataFormat::kNHWC, g.filter_rows, g.filter_cols,
                          g.filter_in_depth, g.filter_out);
  NhwcInput<T, CT> out_backprop(device, dy, g.data_format, g.batch, g.out_rows, g.out_cols,
                                g.out_depth);
  NhwcOutput<T, CT> in_backprop(dx, g.data_format, g.batch, g.in_rows, g.in_cols, g.in_depth);
  if (g.depthwise) {
    DepthwiseBackwardInputNhwc<CT>(device, g, filter.data(), out_backprop.data(),
                                   in_backprop.data());
  } else {
    ConvolveBackwardInputNhwc<CT>(device, g, filter.tensor(), out_backprop.tensor(),
                                  in_backprop.tensor());
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
  NhwcInput<T, CT> input(device, x, g.data_format, g.batch, g.in_rows, g.in_cols, g.in_depth);
  NhwcInput<T, CT> out_backprop(device, dy, g.data_format, g.batch, g.out_rows, g.out_cols,
                                g.out_depth);
  // The filter is HWIO whatever the data format: only the element type may need staging.
  NhwcOutput<T, CT> filter_backprop(dw, DataFormat::kNHWC, g.filter_rows, g.filter_cols,
                                    g.filter_in_depth, g.filter_out);
  if (g.depthwise) {
    DepthwiseBackwardFilterNhwc<CT>(device, g, input.data(), out_backprop.data(),
                                    filter_backprop.data());
  } else {
    ConvolveBackwardFilterNhwc<CT>(device, g, input.tensor(), out_backprop.tensor(),
                                   filter_backprop.tensor());
  }
  filter_backprop.Finish(device);
  return absl::OkStatus();
}

absl::Status ConvolutionForward(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(ConvolutionGeometry g, ReadConvolutionGeometry(context));
  return DispatchFloating(g.dtype, [&](auto zero) {
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
  return DispatchFloating(g.dtype, [&](auto zero) -> absl::Status {
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
  return DispatchFloating(g.dtype, [&](auto zero) {
    return BackwardInputTyped<decltype(zero)>(context, g);
  });
}

absl::Status ConvolutionBackwardFilter(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(ConvolutionGeometry g, ReadConvolutionGeometry(context));
  return DispatchFloating(g.dtype, [&](auto zero) {
    return BackwardFilterTyped<decltype(zero)>(context, g);
  });
}

}  // namespace

absl::StatusOr<int64_t> CheckedElementCount(const char* what, const int64_t* dims, int rank) {
  constexpr int64_t kMaxElements = int64_t{1} << 48;
  int64_t elements = 1;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has a negative dimension"));
    }
    if (dims[i] != 0 && elements > kMaxElements / dims[i]) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is too large"));
    }
    elements *= dims[i];
  }
  // A zero dimension makes the count 0 whatever the others are; they must still be sane.
  for (int i = 0; i < rank; ++i) {
    if (dims[i] > kMaxElements) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is too large"));
    }
  }
  return elements;
}

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
  if (x.rank != 4 || y.rank != 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "convolution tensors must have rank 4, got ", x.rank, " and ", y.rank));
  }
  if (filter.dtype != x.dtype || y.dtype != x.dtype) {
    return absl::InvalidArgumentError("convolution input, filter and output dtypes differ");
  }
  if (conv.data_format != DataFormat::kNHWC && conv.data_format != DataFormat::kNCHW) {
    return absl::InvalidArgumentError("unknown convolution data format");
  }
  ConvolutionGeometry g;
  g.dtype = x.dtype;
  g.data_format = conv.data_format;
  g.depthwise = conv.depthwise != 0;
  const bool nhwc = conv.data_format == DataFormat::kNHWC;
  g.batch = x.dims[0];
  g.in_rows = nhwc ? x.dims[1] : x.dims[2];
  g.in_cols = nhwc ? x.dims[2] : x.dims[3];
  g.in_depth = nhwc ? x.dims[3] : x.dims[1];
  g.out_rows = nhwc ? y.dims[1] : y.dims[2];
  g.out_cols = nhwc ? y.dims[2] : y.dims[3];
  g.out_depth = nhwc ? y.dims[3] : y.dims[1];
  g.filter_rows = filter.dims[0];
  g.filter_cols = filter.dims[1];
  g.filter_in_depth = filter.dims[2];
  g.filter_out = filter.dims[3];
  g.pad_top = conv.pad_top;
  g.pad_bottom = conv.pad_bottom;
  g.pad_left = conv.pad_left;
  g.pad_right = conv.pad_right;
  g.stride_rows = conv.stride_h;
  g.stride_cols = conv.stride_w;
  g.dilation_rows = conv.dilation_h;
  g.dilation_cols = conv.dilation_w;

  VGPU_RETURN_IF_ERROR(CheckedElementCount("convolution input", x.dims, 4).status());
  VGPU_RETURN_IF_ERROR(CheckedElementCount("convolution output", y.dims, 4).status());
  VGPU_RETURN_IF_ERROR(CheckedElementCount("convolution filter", filter.dims, 4).status());
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  for (int64_t d : {g.in_rows, g.in_cols, g.out_rows, g.out_cols, g.filter_rows, g.filter_cols}) {
    if (d > kInt32Max) return absl::InvalidArgumentError("convolution spatial size too large");
  }
  if (y.dims[0] != g.batch) {
    return absl::InvalidArgumentError("convolution input and output batch sizes differ");
  }
  if (g.stride_rows < 1 || g.stride_cols < 1 || g.dilation_rows < 1 || g.dilation_cols < 1) {
    return absl::InvalidArgumentError("convolution strides and dilations must be positive");
  }
  if (g.pad_top < 0 || g.pad_bottom < 0 || g.pad_left < 0 || g.pad_right < 0) {
    return absl::InvalidArgumentError("convolution paddings must not be negative");
  }
  if (g.filter_in_depth != g.in_depth) {
    return absl::InvalidArgumentError(absl::StrCat("convolution filter depth ", g.filter_in_depth,
                                                   " differs from the input depth ", g.in_depth,
                                                   " (grouped convolutions are not supported)"));
  }
  const int64_t expected_out_depth = g.depthwise ? g.in_depth * g.filter_out : g.filter_out;
  if (g.out_depth != expected_out_depth) {
    return absl::InvalidArgumentError(absl::StrCat("convolution output depth ", g.out_depth,
                                                   " should be ", expected_out_depth));
  }
  const int64_t expected_rows = WindowedOutputSize(g.in_rows, g.filter_rows, g.dilation_rows,
                                                   g.stride_rows, g.pad_top, g.pad_bottom);
  const int64_t expected_cols = WindowedOutputSize(g.in_cols, g.filter_cols, g.dilation_cols,
                                                   g.stride_cols, g.pad_left, g.pad_right);
  if (g.out_rows != expected_rows || g.out_cols != expected_cols) {
    return absl::InvalidArgumentError(absl::StrCat(
        "convolution output is ", g.out_rows, "x", g.out_cols, ", the window gives ",
        expected_rows, "x", expected_cols));
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
}

}  // namespace vgpu
