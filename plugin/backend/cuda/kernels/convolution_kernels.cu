// CUDA kernels of the convolution family (protocol/kernels/convolution.h) on the CUDA executor:
// 2-D and 3-D convolutions (regular, grouped, depthwise) and their two backward passes through
// cuDNN's legacy convolution API, the fused forward with bias and activation
// (cudnnConvolutionBiasActivationForward for float32 + relu, otherwise the cuDNN forward then
// this file's bias/activation kernel), matrix products through cuBLASLt (float32 / float16
// / bfloat16, float32 accumulation, TF32 off) and cuBLAS (float64, and operand broadcasts that
// are not a uniform stride), BiasAdd, BiasAddGrad and Rearrange (Einsum's permutations,
// diagonals and sums) as this file's own kernels.
//
// Layout decisions (to be confirmed by the GPU run, see the report of branch cuda-dnn):
// * Tensors: cuDNN gets dims in N, C, spatial order with strides that describe the stored
//   layout (channels last for kNHWC, channels first for kNCHW); nothing is transposed.
// * Filters: the protocol's filters are TensorFlow's HWIO ([taps..., I, O], I being one group's
//   input depth). cuDNN accepts only KCRS (CUDNN_TENSOR_NCHW) and KRSC (CUDNN_TENSOR_NHWC)
//   filters, K = O first, so the filter is transposed on the device into the workspace before
//   every launch that reads it: to KRSC for channels-last data, KCRS for channels-first data (the
//   format cuDNN's kernels for that data layout prefer). A filter gradient is computed in that
//   layout into the workspace and transposed back to HWIO. Depthwise filters [H, W, C, M] are
//   HWIO filters with I = 1, O = C * M (output channel c * M + m reads input channel c) and run
//   as a grouped convolution of C groups: cuDNN's group g of K / groups = M output channels reads
//   input channel g, the same mapping.
// * Padding: cuDNN pads symmetrically. When a launch's paddings are symmetric they go to the
//   convolution descriptor; when any dimension's before / after paddings differ (TensorFlow's
//   SAME with an odd total), the input is copied into a zero-padded buffer in the workspace and
//   cuDNN runs with no padding (the backward input pass computes the padded input's gradient
//   and crops it). This is the explicit-padding route, not the CPU kernels' offset one.
// * Math: float32 convolutions use CUDNN_FMA_MATH (no TF32), float16 / bfloat16 tensor-op math
//   with float accumulation, float64 the default math with double accumulation.
// * Algorithms: cudnnGet*Algorithm_v7 heuristics (no trial runs), once per distinct launch
//   settings, kept with the descriptors in the executor's PrimitiveCache.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cuda/cuda_descriptors.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/device_types.cuh"
#include "plugin/backend/cuda/cuda_libraries.h"
#include "plugin/backend/cuda/primitive_cache.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::cuda {
namespace {

using kernels::Dispatch;

using dnn::CudnnStatus;
using dnn::CublasStatus;
using dnn::RuntimeStatus;

// --- Element types ---------------------------------------------------------------------------

// The arithmetic type of T: double for double, float for everything else.
template <typename T>
struct AccumulatorOf {
  using type = float;
};
template <>
struct AccumulatorOf<double> {
  using type = double;
};
template <typename T>
using Acc = typename AccumulatorOf<T>::type;

template <typename T>
__device__ __forceinline__ Acc<T> ToAcc(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return v;
  }
}
template <typename T>
__device__ __forceinline__ T FromAcc(Acc<T> v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    return v;
  }
}

const CudaLaunchDevice& DeviceOf(const CudaKernelContext& context) { return *context.device; }

// --- Small kernels ---------------------------------------------------------------------------

template <typename A>
__device__ __forceinline__ A Activate(A v, int mode) {
  switch (mode) {
    case static_cast<int>(ActivationMode::kRelu): return v > A(0) ? v : A(0);
    case static_cast<int>(ActivationMode::kRelu6): return v > A(0) ? (v < A(6) ? v : A(6)) : A(0);
    case static_cast<int>(ActivationMode::kSigmoid): return A(1) / (A(1) + exp(-v));
    case static_cast<int>(ActivationMode::kTanh): return tanh(v);
    default: return v;
  }
}

// data[i] = activation(data[i] + bias[channel of i]) for data viewed as [outer, channels,
// inner], in Acc<T>; `bias` null means no bias, mode -1 no activation.
template <typename T>
__global__ void BiasActivationKernel(T* data, int64_t elements, int64_t channels, int64_t inner,
                                     const T* bias, int mode) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < elements;
       i += int64_t{blockDim.x} * gridDim.x) {
    Acc<T> v = ToAcc(data[i]);
    if (bias != nullptr) v += ToAcc(bias[(i / inner) % channels]);
    data[i] = FromAcc<T>(Activate(v, mode));
  }
}

// out[i] = value[i] + bias[channel of i] in T's rounding (BiasAdd).
template <typename T>
__global__ void BiasAddKernel(const T* value, const T* bias, T* out, int64_t elements,
                              int64_t channels, int64_t inner) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < elements;
       i += int64_t{blockDim.x} * gridDim.x) {
    out[i] = FromAcc<T>(ToAcc(value[i]) + ToAcc(bias[(i / inner) % channels]));
  }
}

// bias_gradient[c] = sum over (o, j) of gradient[o, c, j], accumulated in Acc<T>: one block
// per channel (grid-stride over channels), a block-wide tree reduction.
template <typename T>
__global__ void BiasAddGradKernel(const T* gradient, T* bias_gradient, int64_t outer,
                                  int64_t channels, int64_t inner) {
  __shared__ Acc<T> partial[256];
  const int64_t per_channel = outer * inner;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    Acc<T> sum = 0;
    for (int64_t t = threadIdx.x; t < per_channel; t += blockDim.x) {
      const int64_t o = t / inner, j = t % inner;
      sum += ToAcc(gradient[(o * channels + c) * inner + j]);
    }
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
      if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
      __syncthreads();
    }
    if (threadIdx.x == 0) bias_gradient[c] = FromAcc<T>(partial[0]);
    __syncthreads();
  }
}

// Filter layout change between TensorFlow's HWIO, viewed as [taps, in, out], and cuDNN's KRSC
// ([out, taps, in], channels_last) or KCRS ([out, in, taps]). to_cudnn: HWIO -> cuDNN;
// otherwise cuDNN -> HWIO. Indexed by the HWIO element, so each direction is a plain gather or
// scatter of distinct elements.
template <typename T>
__global__ void FilterTransposeKernel(const T* source, T* destination, int64_t taps,
                                      int64_t in, int64_t out, bool channels_last,
                                      bool to_cudnn) {
  const int64_t elements = taps * in * out;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < elements;
       i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t o = i % out, c = (i / out) % in, t = i / (out * in);
    const int64_t cudnn = channels_last ? (o * taps + t) * in + c : (o * in + c) * taps + t;
    if (to_cudnn) {
      destination[cudnn] = source[i];
    } else {
      destination[i] = source[cudnn];
    }
  }
}

// A 5-D image tensor [N, C, D, H, W] in either layout (channels_last: stored N, D, H, W, C).
struct ImageShape {
  int64_t batch, channels, spatial[3];  // D, H, W (2-D: D = 1)
  bool channels_last;
  __host__ __device__ int64_t Elements() const {
    return batch * channels * spatial[0] * spatial[1] * spatial[2];
  }
};

// destination[n, c, p] = source[n, c, p + offset] where that lies inside source, else 0: pads
// (negative offsets, source smaller) or crops (positive offsets) the spatial dimensions.
template <typename T>
__global__ void WindowCopyKernel(const T* source, ImageShape source_shape, T* destination,
                                 ImageShape destination_shape, int64_t offset0, int64_t offset1,
                                 int64_t offset2) {
  const int64_t elements = destination_shape.Elements();
  const int64_t* ds = destination_shape.spatial;
  const int64_t* ss = source_shape.spatial;
  const int64_t channels = destination_shape.channels;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < elements;
       i += int64_t{blockDim.x} * gridDim.x) {
    int64_t n, c, z, h, w, rest = i;
    if (destination_shape.channels_last) {
      c = rest % channels; rest /= channels;
      w = rest % ds[2]; rest /= ds[2];
      h = rest % ds[1]; rest /= ds[1];
      z = rest % ds[0]; n = rest / ds[0];
    } else {
      w = rest % ds[2]; rest /= ds[2];
      h = rest % ds[1]; rest /= ds[1];
      z = rest % ds[0]; rest /= ds[0];
      c = rest % channels; n = rest / channels;
    }
    const int64_t sz = z + offset0, sh = h + offset1, sw = w + offset2;
    T value = FromAcc<T>(Acc<T>(0));
    if (sz >= 0 && sz < ss[0] && sh >= 0 && sh < ss[1] && sw >= 0 && sw < ss[2]) {
      const int64_t index = source_shape.channels_last
                                ? (((n * ss[0] + sz) * ss[1] + sh) * ss[2] + sw) * channels + c
                                : (((n * channels + c) * ss[0] + sz) * ss[1] + sh) * ss[2] + sw;
      value = source[index];
    }
    destination[i] = value;
  }
}

template <typename Kernel, typename... Args>
absl::Status Launch(const char* name, const CudaLaunchDevice& device, int64_t elements,
                    Kernel kernel, Args... args) {
  if (elements <= 0) return absl::OkStatus();
  const GridShape grid = GridFor(device, elements);
  kernel<<<grid.blocks, grid.threads, 0, device.stream>>>(args...);
  return LastLaunchStatus(name);
}

absl::Status Zero(const CudaLaunchDevice& device, void* data, uint64_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  return RuntimeStatus(cudaMemsetAsync(data, 0, bytes, device.stream), "cudaMemsetAsync");
}

// Offsets into one workspace block, each 256-byte aligned.
class WorkspaceLayout {
 public:
  size_t Add(size_t bytes) {
    const size_t offset = total_;
    total_ += (bytes + 255) / 256 * 256;
    return offset;
  }
  size_t total() const { return total_; }

 private:
  size_t total_ = 0;
};

// --- Convolution geometry --------------------------------------------------------------------

// Everything a convolution launch describes, as the CPU executor reads it: 2-D convolutions
// are 3-D ones with one plane.
struct ConvolutionGeometry {
  DType dtype = DType::kFloat32;
  DataFormat data_format = DataFormat::kNHWC;
  int spatial_dims = 2;
  bool depthwise = false;
  int64_t groups = 1;
  int64_t batch = 0, in_depth = 0, out_depth = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, filter[3] = {1, 1, 1};  // D, H, W
  int64_t filter_in_depth = 0, filter_out = 0;
  int64_t pad_before[3] = {}, pad_after[3] = {}, stride[3] = {1, 1, 1}, dilation[3] = {1, 1, 1};

  int64_t InputElements() const { return batch * in[0] * in[1] * in[2] * in_depth; }
  int64_t OutputElements() const { return batch * out[0] * out[1] * out[2] * out_depth; }
  int64_t FilterTaps() const { return filter[0] * filter[1] * filter[2]; }
  int64_t FilterElements() const { return FilterTaps() * filter_in_depth * filter_out; }
  bool channels_last() const { return data_format == DataFormat::kNHWC; }
  bool SymmetricPadding() const {
    for (int i = 0; i < 3; ++i) {
      if (pad_before[i] != pad_after[i]) return false;
    }
    return true;
  }
  // cuDNN's view of the filter: K output channels, C = one group's input depth.
  int64_t CudnnK() const { return depthwise ? in_depth * filter_out : filter_out; }
  int64_t CudnnC() const { return depthwise ? 1 : filter_in_depth; }
  int64_t CudnnGroups() const { return depthwise ? in_depth : groups; }
};

constexpr int64_t kMaxConvolutionElements = int64_t{1} << 48;

int64_t WindowedOutputSize(int64_t input, int64_t filter, int64_t dilation, int64_t stride,
                           int64_t pad_before, int64_t pad_after) {
  const int64_t effective_filter = (filter - 1) * dilation + 1;
  const int64_t span = input + pad_before + pad_after - effective_filter;
  return span < 0 ? 0 : span / stride + 1;
}

// Descriptors [x tensor, filter, convolution, y tensor], validated as the CPU executor does.
absl::StatusOr<ConvolutionGeometry> ReadConvolutionGeometry(const CudaKernelContext& context) {
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
  VGPU_RETURN_IF_ERROR(
      CheckedElementCount("convolution input", x.dims, rank, kMaxConvolutionElements).status());
  VGPU_RETURN_IF_ERROR(
      CheckedElementCount("convolution output", y.dims, rank, kMaxConvolutionElements).status());
  VGPU_RETURN_IF_ERROR(CheckedElementCount("convolution filter", filter.dims, rank,
                                           kMaxConvolutionElements)
                           .status());
  ConvolutionGeometry g;
  g.dtype = x.dtype;
  g.data_format = conv.data_format;
  g.spatial_dims = conv.spatial_dims;
  g.depthwise = conv.depthwise != 0;
  g.groups = conv.group_count;
  const bool channels_last = conv.data_format == DataFormat::kNHWC;
  const int first_spatial = channels_last ? 1 : 2;
  const int offset = 3 - conv.spatial_dims;
  for (int i = 0; i < conv.spatial_dims; ++i) {
    g.in[offset + i] = x.dims[first_spatial + i];
    g.out[offset + i] = y.dims[first_spatial + i];
    g.filter[offset + i] = filter.dims[i];
  }
  g.batch = x.dims[0];
  g.in_depth = channels_last ? x.dims[rank - 1] : x.dims[1];
  g.out_depth = channels_last ? y.dims[rank - 1] : y.dims[1];
  g.filter_in_depth = filter.dims[rank - 2];
  g.filter_out = filter.dims[rank - 1];
  g.pad_before[1] = conv.pad_top, g.pad_after[1] = conv.pad_bottom;
  g.pad_before[2] = conv.pad_left, g.pad_after[2] = conv.pad_right;
  g.stride[1] = conv.stride_h, g.stride[2] = conv.stride_w;
  g.dilation[1] = conv.dilation_h, g.dilation[2] = conv.dilation_w;
  if (conv.spatial_dims == 3) {
    g.pad_before[0] = conv.pad_front, g.pad_after[0] = conv.pad_back;
    g.stride[0] = conv.stride_d, g.dilation[0] = conv.dilation_d;
  } else if (conv.pad_front != 0 || conv.pad_back != 0 || conv.stride_d != 1 ||
             conv.dilation_d != 1) {
    return absl::InvalidArgumentError("a 2-D convolution has no depth window");
  }
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  for (int i = 0; i < 3; ++i) {
    if (g.in[i] > kInt32Max || g.out[i] > kInt32Max || g.filter[i] > kInt32Max) {
      return absl::InvalidArgumentError("convolution spatial size too large");
    }
  }
  if (y.dims[0] != g.batch) {
    return absl::InvalidArgumentError("convolution input and output batch sizes differ");
  }
  for (int i = 0; i < 3; ++i) {
    if (g.stride[i] < 1 || g.dilation[i] < 1) {
      return absl::InvalidArgumentError("convolution strides and dilations must be positive");
    }
  }
  for (int i = 0; i < 3; ++i) {
    if (g.pad_before[i] < 0 || g.pad_after[i] < 0) {
      return absl::InvalidArgumentError("convolution paddings must not be negative");
    }
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
  int64_t expected[3];
  for (int i = 0; i < 3; ++i) {
    expected[i] = WindowedOutputSize(g.in[i], g.filter[i], g.dilation[i], g.stride[i],
                                     g.pad_before[i], g.pad_after[i]);
  }
  if (g.out[0] != expected[0] || g.out[1] != expected[1] || g.out[2] != expected[2]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "convolution output is ", g.out[0], "x", g.out[1], "x", g.out[2], ", the window gives ",
        expected[0], "x", expected[1], "x", expected[2]));
  }
  return g;
}

// The activation of a fused launch (descriptor `index` if present), restricted to the modes the
// CPU executor's fused kernels take; -1 is identity.
absl::StatusOr<int> ReadOptionalActivation(const CudaKernelContext& context, size_t index) {
  if (context.descriptors.size() <= index) return -1;
  VGPU_ASSIGN_OR_RETURN(ActivationDescriptorSettings activation,
                        context.Descriptor<ActivationDescriptorSettings>(index));
  switch (activation.mode) {
    case ActivationMode::kRelu:
    case ActivationMode::kRelu6:
    case ActivationMode::kSigmoid:
    case ActivationMode::kTanh:
      return static_cast<int>(activation.mode);
    default:
      break;
  }
  return absl::InvalidArgumentError("unknown activation mode");
}

// --- cuDNN convolution plans -----------------------------------------------------------------

enum class Direction : uint8_t { kForward = 0, kBackwardInput = 1, kBackwardFilter = 2 };

// The cuDNN objects of one convolution launch shape and direction, with the algorithm chosen
// for it and its workspace size. Read-only after creation (shared by streams).
class ConvolutionPlan : public Primitive {
 public:
  dnn::TensorDescriptor x;  // the (padded, when explicit padding is needed) input
  dnn::TensorDescriptor y;
  dnn::FilterDescriptor filter;
  dnn::ConvolutionDescriptor convolution;
  int algorithm = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t of the direction
  size_t workspace_bytes = 0;
  bool explicit_padding = false;
  ImageShape input_shape{}, padded_shape{};
  // cudnnConvolutionBiasActivationForward's extra descriptors (float32 with relu only).
  bool fused_relu = false;
  dnn::TensorDescriptor bias;
  dnn::ActivationDescriptor activation;
};

constexpr size_t kMaxAlgorithmWorkspace = size_t{1} << 30;

template <typename Perf>
absl::StatusOr<const Perf*> ChooseAlgorithm(const Perf* results, int count, DType dtype,
                                            const char* what) {
  const Perf* fallback = nullptr;
  for (int i = 0; i < count; ++i) {
    const Perf& perf = results[i];
    if (perf.status != CUDNN_STATUS_SUCCESS || perf.memory > kMaxAlgorithmWorkspace) continue;
    // float32 must not run on TF32 tensor cores (1e-3 of the CPU): FMA math only.
    if (dtype == DType::kFloat32 && perf.mathType != CUDNN_FMA_MATH &&
        perf.mathType != CUDNN_DEFAULT_MATH) {
      continue;
    }
    if (dtype == DType::kFloat32 && perf.mathType == CUDNN_DEFAULT_MATH) {
      if (fallback == nullptr) fallback = &perf;
      continue;
    }
    return &perf;
  }
  if (fallback != nullptr) return fallback;
  return absl::UnimplementedError(
      absl::StrCat(what, ": cuDNN has no algorithm for this convolution"));
}

absl::StatusOr<std::unique_ptr<ConvolutionPlan>> MakeConvolutionPlan(
    const CudaKernelContext& context, const ConvolutionGeometry& g, Direction direction,
    bool fused_relu) {
  cudnnHandle_t handle = DeviceOf(context).libraries->cudnn();
  auto plan = std::make_unique<ConvolutionPlan>();
  VGPU_ASSIGN_OR_RETURN(cudnnDataType_t type, dnn::CudnnDataType(g.dtype));
  VGPU_ASSIGN_OR_RETURN(plan->x, dnn::MakeTensorDescriptor());
  VGPU_ASSIGN_OR_RETURN(plan->y, dnn::MakeTensorDescriptor());
  VGPU_ASSIGN_OR_RETURN(plan->filter, dnn::MakeFilterDescriptor());
  VGPU_ASSIGN_OR_RETURN(plan->convolution, dnn::MakeConvolutionDescriptor());
  const int nd = g.spatial_dims;
  const int first = 3 - nd;  // index of the first used spatial dimension in g's arrays
  plan->explicit_padding = !g.SymmetricPadding();
  plan->input_shape = ImageShape{g.batch, g.in_depth, {g.in[0], g.in[1], g.in[2]},
                                 g.channels_last()};
  plan->padded_shape = plan->input_shape;
  if (plan->explicit_padding) {
    for (int i = 0; i < 3; ++i) {
      plan->padded_shape.spatial[i] = g.in[i] + g.pad_before[i] + g.pad_after[i];
    }
  }
  VGPU_RETURN_IF_ERROR(dnn::SetImageTensor(plan->x.get(), type, g.batch, g.in_depth,
                                           plan->padded_shape.spatial + first, nd,
                                           g.channels_last()));
  VGPU_RETURN_IF_ERROR(dnn::SetImageTensor(plan->y.get(), type, g.batch, g.out_depth,
                                           g.out + first, nd, g.channels_last()));
  int filter_dims[5] = {static_cast<int>(g.CudnnK()), static_cast<int>(g.CudnnC()), 1, 1, 1};
  for (int i = 0; i < nd; ++i) filter_dims[2 + i] = static_cast<int>(g.filter[first + i]);
  if (g.CudnnK() > std::numeric_limits<int>::max() ||
      g.CudnnC() > std::numeric_limits<int>::max()) {
    return absl::UnimplementedError("convolution: too many channels for cuDNN");
  }
  VGPU_RETURN_IF_ERROR(CudnnStatus(
      cudnnSetFilterNdDescriptor(plan->filter.get(), type,
                                 g.channels_last() ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                 nd + 2, filter_dims),
      "cudnnSetFilterNdDescriptor"));
  int pads[3], strides[3], dilations[3];
  for (int i = 0; i < nd; ++i) {
    const int64_t pad = plan->explicit_padding ? 0 : g.pad_before[first + i];
    if (pad > std::numeric_limits<int>::max() || g.stride[first + i] > std::numeric_limits<int>::max() ||
        g.dilation[first + i] > std::numeric_limits<int>::max()) {
      return absl::UnimplementedError("convolution window too large for cuDNN");
    }
    pads[i] = static_cast<int>(pad);
    strides[i] = static_cast<int>(g.stride[first + i]);
    dilations[i] = static_cast<int>(g.dilation[first + i]);
  }
  VGPU_RETURN_IF_ERROR(CudnnStatus(
      cudnnSetConvolutionNdDescriptor(plan->convolution.get(), nd, pads, strides, dilations,
                                      CUDNN_CROSS_CORRELATION, dnn::CudnnComputeType(g.dtype)),
      "cudnnSetConvolutionNdDescriptor"));
  VGPU_RETURN_IF_ERROR(CudnnStatus(
      cudnnSetConvolutionGroupCount(plan->convolution.get(), static_cast<int>(g.CudnnGroups())),
      "cudnnSetConvolutionGroupCount"));
  const cudnnMathType_t math = g.dtype == DType::kFloat32   ? CUDNN_FMA_MATH
                               : g.dtype == DType::kFloat64 ? CUDNN_DEFAULT_MATH
                                                            : CUDNN_TENSOR_OP_MATH;
  VGPU_RETURN_IF_ERROR(CudnnStatus(cudnnSetConvolutionMathType(plan->convolution.get(), math),
                                   "cudnnSetConvolutionMathType"));
  constexpr int kRequested = 16;
  int returned = 0;
  cudnnMathType_t chosen_math = math;
  switch (direction) {
    case Direction::kForward: {
      cudnnConvolutionFwdAlgoPerf_t results[kRequested];
      VGPU_RETURN_IF_ERROR(CudnnStatus(
          cudnnGetConvolutionForwardAlgorithm_v7(handle, plan->x.get(), plan->filter.get(),
                                                 plan->convolution.get(), plan->y.get(),
                                                 kRequested, &returned, results),
          "cudnnGetConvolutionForwardAlgorithm_v7"));
      VGPU_ASSIGN_OR_RETURN(const cudnnConvolutionFwdAlgoPerf_t* perf,
                            ChooseAlgorithm(results, returned, g.dtype, "convolution_forward"));
      plan->algorithm = perf->algo;
      chosen_math = perf->mathType;
      break;
    }
    case Direction::kBackwardInput: {
      cudnnConvolutionBwdDataAlgoPerf_t results[kRequested];
      VGPU_RETURN_IF_ERROR(CudnnStatus(
          cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, plan->filter.get(), plan->y.get(),
                                                      plan->convolution.get(), plan->x.get(),
                                                      kRequested, &returned, results),
          "cudnnGetConvolutionBackwardDataAlgorithm_v7"));
      VGPU_ASSIGN_OR_RETURN(
          const cudnnConvolutionBwdDataAlgoPerf_t* perf,
          ChooseAlgorithm(results, returned, g.dtype, "convolution_backward_input"));
      plan->algorithm = perf->algo;
      chosen_math = perf->mathType;
      break;
    }
    case Direction::kBackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t results[kRequested];
      VGPU_RETURN_IF_ERROR(CudnnStatus(
          cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, plan->x.get(), plan->y.get(),
                                                        plan->convolution.get(),
                                                        plan->filter.get(), kRequested,
                                                        &returned, results),
          "cudnnGetConvolutionBackwardFilterAlgorithm_v7"));
      VGPU_ASSIGN_OR_RETURN(
          const cudnnConvolutionBwdFilterAlgoPerf_t* perf,
          ChooseAlgorithm(results, returned, g.dtype, "convolution_backward_filter"));
      plan->algorithm = perf->algo;
      chosen_math = perf->mathType;
      break;
    }
  }
  // float32 keeps CUDNN_FMA_MATH whatever the heuristic reported (DEFAULT_MATH would allow
  // TF32 on this GPU).
  if (chosen_math != math && g.dtype != DType::kFloat32) {
    VGPU_RETURN_IF_ERROR(
        CudnnStatus(cudnnSetConvolutionMathType(plan->convolution.get(), chosen_math),
                    "cudnnSetConvolutionMathType"));
  }
  if (fused_relu) {
    // The bias as a [1, K, 1, 1(, 1)] tensor, the activation relu (cuDNN's fused call admits
    // relu with any algorithm).
    plan->fused_relu = true;
    VGPU_ASSIGN_OR_RETURN(plan->bias, dnn::MakeTensorDescriptor());
    const int64_t ones[3] = {1, 1, 1};
    VGPU_RETURN_IF_ERROR(dnn::SetImageTensor(plan->bias.get(), type, 1, g.out_depth, ones, nd,
                                             /*channels_last=*/false));
    VGPU_ASSIGN_OR_RETURN(plan->activation, dnn::MakeActivationDescriptor());
    VGPU_RETURN_IF_ERROR(CudnnStatus(
        cudnnSetActivationDescriptor(plan->activation.get(), CUDNN_ACTIVATION_RELU,
                                     CUDNN_NOT_PROPAGATE_NAN, 0.0),
        "cudnnSetActivationDescriptor"));
  }
  switch (direction) {
    case Direction::kForward:
      VGPU_RETURN_IF_ERROR(CudnnStatus(
          cudnnGetConvolutionForwardWorkspaceSize(
              handle, plan->x.get(), plan->filter.get(), plan->convolution.get(), plan->y.get(),
              static_cast<cudnnConvolutionFwdAlgo_t>(plan->algorithm), &plan->workspace_bytes),
          "cudnnGetConvolutionForwardWorkspaceSize"));
      break;
    case Direction::kBackwardInput:
      VGPU_RETURN_IF_ERROR(CudnnStatus(
          cudnnGetConvolutionBackwardDataWorkspaceSize(
              handle, plan->filter.get(), plan->y.get(), plan->convolution.get(), plan->x.get(),
              static_cast<cudnnConvolutionBwdDataAlgo_t>(plan->algorithm),
              &plan->workspace_bytes),
          "cudnnGetConvolutionBackwardDataWorkspaceSize"));
      break;
    case Direction::kBackwardFilter:
      VGPU_RETURN_IF_ERROR(CudnnStatus(
          cudnnGetConvolutionBackwardFilterWorkspaceSize(
              handle, plan->x.get(), plan->y.get(), plan->convolution.get(), plan->filter.get(),
              static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan->algorithm),
              &plan->workspace_bytes),
          "cudnnGetConvolutionBackwardFilterWorkspaceSize"));
      break;
  }
  return plan;
}

absl::StatusOr<std::shared_ptr<ConvolutionPlan>> PlanFor(const CudaKernelContext& context,
                                                         uint32_t kernel_id,
                                                         const ConvolutionGeometry& g,
                                                         Direction direction,
                                                         bool fused_relu = false) {
  PlanKey key = PlanKey::ForLaunch(kernel_id, context);
  key.AddValue(direction);
  key.AddValue(fused_relu);
  return DeviceOf(context).primitives->GetOrCreate<ConvolutionPlan>(
      key, [&]() { return MakeConvolutionPlan(context, g, direction, fused_relu); });
}

// alpha / beta of cuDNN calls: double for double tensors, float otherwise.
struct Scaling {
  float f[2] = {1.0f, 0.0f};
  double d[2] = {1.0, 0.0};
  const void* alpha(DType t) const { return t == DType::kFloat64 ? (const void*)&d[0] : &f[0]; }
  const void* beta(DType t) const { return t == DType::kFloat64 ? (const void*)&d[1] : &f[1]; }
};

template <typename T>
absl::Status TransposeFilter(const CudaLaunchDevice& device, const ConvolutionGeometry& g,
                             const T* source, T* destination, bool to_cudnn) {
  // HWIO as [taps, I, O] with I, O of cuDNN's view (depthwise: I = 1, O = C * M).
  return Launch("convolution filter transpose", device, g.FilterElements(),
                FilterTransposeKernel<T>, source, destination, g.FilterTaps(), g.CudnnC(),
                g.CudnnK(), g.channels_last(), to_cudnn);
}

template <typename T>
absl::Status ForwardTyped(const CudaKernelContext& context, const ConvolutionGeometry& g,
                          uint32_t kernel_id, size_t output_buffer, const T* bias,
                          int activation) {
  const CudaLaunchDevice& device = DeviceOf(context);
  VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, g.InputElements()));
  VGPU_ASSIGN_OR_RETURN(const T* w, context.Buffer<const T>(1, g.FilterElements()));
  VGPU_ASSIGN_OR_RETURN(T* y, context.Buffer<T>(output_buffer, g.OutputElements()));
  if (g.OutputElements() == 0) return absl::OkStatus();
  bool epilogue = bias != nullptr || activation >= 0;
  const int64_t inner = g.channels_last() ? 1 : g.out[0] * g.out[1] * g.out[2];
  if (g.InputElements() == 0 || g.FilterElements() == 0) {
    // Only padding is convolved: zeros (then the bias and activation, as the CPU kernel does).
    VGPU_RETURN_IF_ERROR(Zero(device, y, g.OutputElements() * sizeof(T)));
  } else {
    // float32 + bias + relu: cuDNN's fused call. Other epilogues: this file's kernel after the
    // convolution (cuDNN fuses only relu / identity, identity only with one algorithm).
    const bool fused_relu = std::is_same_v<T, float> && bias != nullptr &&
                            activation == static_cast<int>(ActivationMode::kRelu);
    VGPU_ASSIGN_OR_RETURN(std::shared_ptr<ConvolutionPlan> plan,
                          PlanFor(context, kernel_id, g, Direction::kForward, fused_relu));
    WorkspaceLayout layout;
    const size_t filter_offset = layout.Add(g.FilterElements() * sizeof(T));
    const size_t padded_offset =
        layout.Add(plan->explicit_padding ? plan->padded_shape.Elements() * sizeof(T) : 0);
    const size_t scratch_offset = layout.Add(plan->workspace_bytes);
    VGPU_ASSIGN_OR_RETURN(void* workspace, device.libraries->Workspace(layout.total()));
    uint8_t* base = static_cast<uint8_t*>(workspace);
    T* filter = reinterpret_cast<T*>(base + filter_offset);
    VGPU_RETURN_IF_ERROR(TransposeFilter(device, g, w, filter, /*to_cudnn=*/true));
    const T* input = x;
    if (plan->explicit_padding) {
      T* padded = reinterpret_cast<T*>(base + padded_offset);
      VGPU_RETURN_IF_ERROR(Launch("convolution input padding", device,
                                  plan->padded_shape.Elements(), WindowCopyKernel<T>, x,
                                  plan->input_shape, padded, plan->padded_shape,
                                  -g.pad_before[0], -g.pad_before[1], -g.pad_before[2]));
      input = padded;
    }
    Scaling scaling;
    if (plan->fused_relu) {
      // y = relu(conv(x) + 0 * z + bias) with z = y, as TensorFlow passes the output as the
      // side input when its scale is 0.
      VGPU_RETURN_IF_ERROR(CudnnStatus(
          cudnnConvolutionBiasActivationForward(
              device.libraries->cudnn(), scaling.alpha(g.dtype), plan->x.get(), input,
              plan->filter.get(), filter, plan->convolution.get(),
              static_cast<cudnnConvolutionFwdAlgo_t>(plan->algorithm), base + scratch_offset,
              plan->workspace_bytes, scaling.beta(g.dtype), plan->y.get(), y, plan->bias.get(),
              bias, plan->activation.get(), plan->y.get(), y),
          "cudnnConvolutionBiasActivationForward"));
      epilogue = false;
    } else {
      VGPU_RETURN_IF_ERROR(CudnnStatus(
          cudnnConvolutionForward(device.libraries->cudnn(), scaling.alpha(g.dtype),
                                  plan->x.get(), input, plan->filter.get(), filter,
                                  plan->convolution.get(),
                                  static_cast<cudnnConvolutionFwdAlgo_t>(plan->algorithm),
                                  base + scratch_offset, plan->workspace_bytes,
                                  scaling.beta(g.dtype), plan->y.get(), y),
          "cudnnConvolutionForward"));
    }
  }
  if (epilogue) {
    VGPU_RETURN_IF_ERROR(Launch("convolution bias activation", device, g.OutputElements(),
                                BiasActivationKernel<T>, y, g.OutputElements(), g.out_depth,
                                inner, bias, activation));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status BackwardInputTyped(const CudaKernelContext& context, const ConvolutionGeometry& g) {
  const CudaLaunchDevice& device = DeviceOf(context);
  VGPU_ASSIGN_OR_RETURN(const T* w, context.Buffer<const T>(0, g.FilterElements()));
  VGPU_ASSIGN_OR_RETURN(const T* dy, context.Buffer<const T>(1, g.OutputElements()));
  VGPU_ASSIGN_OR_RETURN(T* dx, context.Buffer<T>(2, g.InputElements()));
  if (g.InputElements() == 0) return absl::OkStatus();
  if (g.OutputElements() == 0 || g.FilterElements() == 0) {
    return Zero(device, dx, g.InputElements() * sizeof(T));
  }
  VGPU_ASSIGN_OR_RETURN(std::shared_ptr<ConvolutionPlan> plan,
                        PlanFor(context, static_cast<uint32_t>(convolution::kBackwardInput), g,
                                Direction::kBackwardInput));
  WorkspaceLayout layout;
  const size_t filter_offset = layout.Add(g.FilterElements() * sizeof(T));
  const size_t padded_offset =
      layout.Add(plan->explicit_padding ? plan->padded_shape.Elements() * sizeof(T) : 0);
  const size_t scratch_offset = layout.Add(plan->workspace_bytes);
  VGPU_ASSIGN_OR_RETURN(void* workspace, device.libraries->Workspace(layout.total()));
  uint8_t* base = static_cast<uint8_t*>(workspace);
  T* filter = reinterpret_cast<T*>(base + filter_offset);
  VGPU_RETURN_IF_ERROR(TransposeFilter(device, g, w, filter, /*to_cudnn=*/true));
  T* gradient = plan->explicit_padding ? reinterpret_cast<T*>(base + padded_offset) : dx;
  Scaling scaling;
  VGPU_RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionBackwardData(device.libraries->cudnn(), scaling.alpha(g.dtype),
                                   plan->filter.get(), filter, plan->y.get(), dy,
                                   plan->convolution.get(),
                                   static_cast<cudnnConvolutionBwdDataAlgo_t>(plan->algorithm),
                                   base + scratch_offset, plan->workspace_bytes,
                                   scaling.beta(g.dtype), plan->x.get(), gradient),
      "cudnnConvolutionBackwardData"));
  if (plan->explicit_padding) {
    // dx is the padded input's gradient without its padding.
    VGPU_RETURN_IF_ERROR(Launch("convolution input gradient crop", device, g.InputElements(),
                                WindowCopyKernel<T>, static_cast<const T*>(gradient),
                                plan->padded_shape, dx, plan->input_shape, g.pad_before[0],
                                g.pad_before[1], g.pad_before[2]));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status BackwardFilterTyped(const CudaKernelContext& context,
                                 const ConvolutionGeometry& g) {
  const CudaLaunchDevice& device = DeviceOf(context);
  VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, g.InputElements()));
  VGPU_ASSIGN_OR_RETURN(const T* dy, context.Buffer<const T>(1, g.OutputElements()));
  VGPU_ASSIGN_OR_RETURN(T* dw, context.Buffer<T>(2, g.FilterElements()));
  if (g.FilterElements() == 0) return absl::OkStatus();
  if (g.InputElements() == 0 || g.OutputElements() == 0) {
    return Zero(device, dw, g.FilterElements() * sizeof(T));
  }
  VGPU_ASSIGN_OR_RETURN(std::shared_ptr<ConvolutionPlan> plan,
                        PlanFor(context, static_cast<uint32_t>(convolution::kBackwardFilter), g,
                                Direction::kBackwardFilter));
  WorkspaceLayout layout;
  const size_t filter_offset = layout.Add(g.FilterElements() * sizeof(T));
  const size_t padded_offset =
      layout.Add(plan->explicit_padding ? plan->padded_shape.Elements() * sizeof(T) : 0);
  const size_t scratch_offset = layout.Add(plan->workspace_bytes);
  VGPU_ASSIGN_OR_RETURN(void* workspace, device.libraries->Workspace(layout.total()));
  uint8_t* base = static_cast<uint8_t*>(workspace);
  T* filter_gradient = reinterpret_cast<T*>(base + filter_offset);
  const T* input = x;
  if (plan->explicit_padding) {
    T* padded = reinterpret_cast<T*>(base + padded_offset);
    VGPU_RETURN_IF_ERROR(Launch("convolution input padding", device,
                                plan->padded_shape.Elements(), WindowCopyKernel<T>, x,
                                plan->input_shape, padded, plan->padded_shape, -g.pad_before[0],
                                -g.pad_before[1], -g.pad_before[2]));
    input = padded;
  }
  Scaling scaling;
  VGPU_RETURN_IF_ERROR(CudnnStatus(
      cudnnConvolutionBackwardFilter(
          device.libraries->cudnn(), scaling.alpha(g.dtype), plan->x.get(), input,
          plan->y.get(), dy, plan->convolution.get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan->algorithm), base + scratch_offset,
          plan->workspace_bytes, scaling.beta(g.dtype), plan->filter.get(), filter_gradient),
      "cudnnConvolutionBackwardFilter"));
  return TransposeFilter(device, g, static_cast<const T*>(filter_gradient), dw,
                         /*to_cudnn=*/false);
}

absl::Status ConvolutionForward(const CudaKernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(ConvolutionGeometry g, ReadConvolutionGeometry(context));
  return Dispatch::Floating(g.dtype, [&](auto zero) {
    using T = decltype(zero);
    return ForwardTyped<T>(context, g, static_cast<uint32_t>(convolution::kForward), 2, nullptr, -1);
  });
}

absl::Status ConvolutionBiasActivationForward(const CudaKernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(4));
  VGPU_ASSIGN_OR_RETURN(ConvolutionGeometry g, ReadConvolutionGeometry(context));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings bias,
                        context.Descriptor<TensorDescriptorSettings>(4));
  if (bias.rank != 1 || bias.dims[0] != g.out_depth || bias.dtype != g.dtype) {
    return absl::InvalidArgumentError("the bias must be a vector of the output depth and dtype");
  }
  VGPU_ASSIGN_OR_RETURN(int activation, ReadOptionalActivation(context, 5));
  return Dispatch::Floating(g.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* bias_data, context.Buffer<const T>(2, g.out_depth));
    return ForwardTyped<T>(context, g, static_cast<uint32_t>(convolution::kForwardBiasActivation), 3, bias_data,
                           activation);
  });
}

absl::Status ConvolutionBackwardInput(const CudaKernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(ConvolutionGeometry g, ReadConvolutionGeometry(context));
  return Dispatch::Floating(g.dtype, [&](auto zero) {
    return BackwardInputTyped<decltype(zero)>(context, g);
  });
}

absl::Status ConvolutionBackwardFilter(const CudaKernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(ConvolutionGeometry g, ReadConvolutionGeometry(context));
  return Dispatch::Floating(g.dtype, [&](auto zero) {
    return BackwardFilterTyped<decltype(zero)>(context, g);
  });
}


// --- Matrix products -------------------------------------------------------------------------

// The shape of a (batched) product, as the CPU executor reads it: batch dimensions
// right-aligned and padded with 1s to the output's batch rank; a dimension of 1 broadcasts.
struct MatmulShape {
  bool transpose_a = false, transpose_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t a_matrices = 1, b_matrices = 1, batches = 1;
  std::vector<int64_t> a_dims, b_dims, out_dims;

  // The a and b matrices output matrix `batch` reads.
  std::pair<int64_t, int64_t> Operands(int64_t batch) const {
    int64_t a_index = 0, b_index = 0, a_stride = 1, b_stride = 1;
    for (int i = static_cast<int>(out_dims.size()) - 1; i >= 0; --i) {
      const int64_t position = batch % out_dims[i];
      batch /= out_dims[i];
      if (a_dims[i] != 1) a_index += position * a_stride;
      if (b_dims[i] != 1) b_index += position * b_stride;
      a_stride *= a_dims[i];
      b_stride *= b_dims[i];
    }
    return {a_index, b_index};
  }
  // Whether every output matrix reads a and b at a uniform stride (0 for an operand of one
  // matrix): a strided-batched product.
  bool UniformBatches() const {
    return (a_matrices == 1 || a_matrices == batches) && (b_matrices == 1 || b_matrices == batches);
  }
};

int64_t Product(const int64_t* dims, int count) {
  int64_t product = 1;
  for (int i = 0; i < count; ++i) product *= dims[i];
  return product;
}

absl::StatusOr<MatmulShape> ReadMatmulShape(const MatmulDescriptorSettings& matmul,
                                            const TensorDescriptorSettings& a,
                                            const TensorDescriptorSettings& b,
                                            const TensorDescriptorSettings& c) {
  if (a.rank < 2 || b.rank < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("matmul operands must have rank >= 2, got ", a.rank, " and ", b.rank));
  }
  if (a.dtype != matmul.dtype || b.dtype != matmul.dtype || c.dtype != matmul.dtype) {
    return absl::InvalidArgumentError("matmul operand and result dtypes differ");
  }
  if (a.rank > kMaxRank || b.rank > kMaxRank || c.rank > kMaxRank) {
    return absl::InvalidArgumentError("matmul tensor rank too large");
  }
  VGPU_RETURN_IF_ERROR(
      CheckedElementCount("matmul a", a.dims, a.rank, kMaxConvolutionElements).status());
  VGPU_RETURN_IF_ERROR(
      CheckedElementCount("matmul b", b.dims, b.rank, kMaxConvolutionElements).status());
  VGPU_RETURN_IF_ERROR(
      CheckedElementCount("matmul c", c.dims, c.rank, kMaxConvolutionElements).status());
  MatmulShape shape;
  shape.transpose_a = matmul.transpose_a != 0;
  shape.transpose_b = matmul.transpose_b != 0;
  const int64_t a_rows = a.dims[a.rank - 2], a_cols = a.dims[a.rank - 1];
  const int64_t b_rows = b.dims[b.rank - 2], b_cols = b.dims[b.rank - 1];
  shape.m = shape.transpose_a ? a_cols : a_rows;
  shape.k = shape.transpose_a ? a_rows : a_cols;
  const int64_t b_k = shape.transpose_b ? b_cols : b_rows;
  shape.n = shape.transpose_b ? b_rows : b_cols;
  if (b_k != shape.k) {
    return absl::InvalidArgumentError(
        absl::StrCat("matmul inner dimensions differ: ", shape.k, " vs ", b_k));
  }
  const int a_batch_rank = a.rank - 2, b_batch_rank = b.rank - 2;
  const int batch_rank = std::max(a_batch_rank, b_batch_rank);
  if (c.rank != batch_rank + 2 || c.dims[c.rank - 2] != shape.m ||
      c.dims[c.rank - 1] != shape.n) {
    return absl::InvalidArgumentError("matmul result shape does not match its operands");
  }
  shape.a_dims.assign(batch_rank, 1);
  shape.b_dims.assign(batch_rank, 1);
  shape.out_dims.resize(batch_rank);
  for (int i = 0; i < a_batch_rank; ++i) shape.a_dims[batch_rank - a_batch_rank + i] = a.dims[i];
  for (int i = 0; i < b_batch_rank; ++i) shape.b_dims[batch_rank - b_batch_rank + i] = b.dims[i];
  for (int i = 0; i < batch_rank; ++i) {
    const int64_t a_dim = shape.a_dims[i], b_dim = shape.b_dims[i];
    if (a_dim != b_dim && a_dim != 1 && b_dim != 1) {
      return absl::InvalidArgumentError("matmul batch dimensions do not broadcast");
    }
    shape.out_dims[i] = a_dim == 1 ? b_dim : a_dim;
    if (c.dims[i] != shape.out_dims[i]) {
      return absl::InvalidArgumentError("matmul result batch dimensions do not match");
    }
  }
  shape.a_matrices = Product(a.dims, a_batch_rank);
  shape.b_matrices = Product(b.dims, b_batch_rank);
  shape.batches = Product(c.dims, batch_rank);
  return shape;
}

absl::StatusOr<MatmulShape> ReadMatmulLaunch(const CudaKernelContext& context, DType* dtype) {
  VGPU_ASSIGN_OR_RETURN(MatmulDescriptorSettings matmul,
                        context.Descriptor<MatmulDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings a, context.Descriptor<TensorDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings b, context.Descriptor<TensorDescriptorSettings>(2));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings c, context.Descriptor<TensorDescriptorSettings>(3));
  *dtype = matmul.dtype;
  return ReadMatmulShape(matmul, a, b, c);
}

// The largest power of two (at most 256) dividing a device address: what cuBLASLt may assume.
uint32_t AlignmentOf(const void* pointer) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && (address & (alignment - 1)) != 0) alignment /= 2;
  return alignment;
}

constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;

// A cuBLASLt product of one launch shape: the row-major c = op(a) op(b) as the column-major
// c^T = op(b)^T op(a)^T (Lt's A is the launch's b, Lt's B the launch's a; c is n x m with
// leading dimension n), strided over the batch (stride 0 for a one-matrix operand), with the
// heuristic's algorithm. The bias epilogue (bias of Lt's M = n rows) is set when the launch has
// one matrix; the bias pointer is set per call under `mutex` (the plan is shared by streams).
class MatmulPlan : public Primitive {
 public:
  dnn::MatmulDesc desc;
  dnn::MatrixLayout a, b, c;
  cublasLtMatmulHeuristicResult_t heuristic{};
  bool bias_epilogue = false;
  bool relu_in_epilogue = false;
  std::mutex mutex;
};

absl::Status SetLayoutBatch(cublasLtMatrixLayout_t layout, int32_t batches, int64_t stride) {
  VGPU_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batches,
                                       sizeof(batches)),
      "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)"));
  return CublasStatus(
      cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                       &stride, sizeof(stride)),
      "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
}

absl::StatusOr<dnn::MatrixLayout> MakeLayout(cudaDataType_t type, int64_t rows, int64_t cols,
                                             int32_t batches, int64_t stride) {
  cublasLtMatrixLayout_t handle = nullptr;
  VGPU_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatrixLayoutCreate(&handle, type, static_cast<uint64_t>(rows),
                                 static_cast<uint64_t>(cols), std::max<int64_t>(rows, 1)),
      "cublasLtMatrixLayoutCreate"));
  dnn::MatrixLayout layout(handle);
  if (batches > 1) VGPU_RETURN_IF_ERROR(SetLayoutBatch(handle, batches, stride));
  return layout;
}

absl::StatusOr<std::unique_ptr<MatmulPlan>> MakeMatmulPlan(const CudaKernelContext& context,
                                                           const MatmulShape& s, DType dtype,
                                                           bool with_bias, int activation,
                                                           const uint32_t alignments[4]) {
  VGPU_ASSIGN_OR_RETURN(cudaDataType_t type, dnn::CudaDataType(dtype));
  auto plan = std::make_unique<MatmulPlan>();
  cublasLtMatmulDesc_t desc = nullptr;
  VGPU_RETURN_IF_ERROR(CublasStatus(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                                    "cublasLtMatmulDescCreate"));
  plan->desc = dnn::MatmulDesc(desc);
  const cublasOperation_t op_first = s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  VGPU_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                     sizeof(op_first)),
      "cublasLtMatmulDescSetAttribute(TRANSA)"));
  VGPU_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                     sizeof(op_second)),
      "cublasLtMatmulDescSetAttribute(TRANSB)"));
  if (with_bias && s.batches == 1) {
    plan->bias_epilogue = true;
    plan->relu_in_epilogue = activation == static_cast<int>(ActivationMode::kRelu);
    const cublasLtEpilogue_t epilogue =
        plan->relu_in_epilogue ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    VGPU_RETURN_IF_ERROR(CublasStatus(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                       sizeof(epilogue)),
        "cublasLtMatmulDescSetAttribute(EPILOGUE)"));
    VGPU_RETURN_IF_ERROR(CublasStatus(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type,
                                       sizeof(type)),
        "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)"));
  }
  const int32_t batches = static_cast<int32_t>(s.batches);
  VGPU_ASSIGN_OR_RETURN(plan->a, MakeLayout(type, s.transpose_b ? s.k : s.n,
                                            s.transpose_b ? s.n : s.k, batches,
                                            s.b_matrices == 1 ? 0 : s.k * s.n));
  VGPU_ASSIGN_OR_RETURN(plan->b, MakeLayout(type, s.transpose_a ? s.m : s.k,
                                            s.transpose_a ? s.k : s.m, batches,
                                            s.a_matrices == 1 ? 0 : s.m * s.k));
  VGPU_ASSIGN_OR_RETURN(plan->c, MakeLayout(type, s.n, s.m, batches, s.m * s.n));
  cublasLtMatmulPreference_t preference_handle = nullptr;
  VGPU_RETURN_IF_ERROR(CublasStatus(cublasLtMatmulPreferenceCreate(&preference_handle),
                                    "cublasLtMatmulPreferenceCreate"));
  dnn::MatmulPreference preference(preference_handle);
  const uint64_t workspace = kLtWorkspaceBytes;
  VGPU_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatmulPreferenceSetAttribute(preference_handle,
                                           CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                           sizeof(workspace)),
      "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)"));
  const cublasLtMatmulPreferenceAttributes_t alignment_attributes[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    VGPU_RETURN_IF_ERROR(CublasStatus(
        cublasLtMatmulPreferenceSetAttribute(preference_handle, alignment_attributes[i],
                                             &alignments[i], sizeof(alignments[i])),
        "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)"));
  }
  int found = 0;
  VGPU_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatmulAlgoGetHeuristic(DeviceOf(context).libraries->cublas_lt(), desc,
                                     plan->a.get(), plan->b.get(), plan->c.get(), plan->c.get(),
                                     preference_handle, 1, &plan->heuristic, &found),
      "cublasLtMatmulAlgoGetHeuristic"));
  if (found == 0) {
    return absl::UnimplementedError("matmul: cuBLASLt has no algorithm for this product");
  }
  return plan;
}

// c (buffer c_buffer) = op(a) op(b) [+ bias, activation]. `bias` null: none; activation -1:
// identity.
template <typename T>
absl::Status MatmulTyped(const CudaKernelContext& context, const MatmulShape& s, DType dtype,
                         uint32_t kernel_id, size_t c_buffer, const T* bias, int activation) {
  const CudaLaunchDevice& device = DeviceOf(context);
  VGPU_ASSIGN_OR_RETURN(const T* a, context.Buffer<const T>(0, s.a_matrices * s.m * s.k));
  VGPU_ASSIGN_OR_RETURN(const T* b, context.Buffer<const T>(1, s.b_matrices * s.k * s.n));
  VGPU_ASSIGN_OR_RETURN(T* c, context.Buffer<T>(c_buffer, s.batches * s.m * s.n));
  const int64_t c_elements = s.batches * s.m * s.n;
  if (c_elements == 0) return absl::OkStatus();
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  bool epilogue_done = false;   // bias added by the library
  bool activation_done = false; // activation applied by the library
  if (s.k == 0) {
    VGPU_RETURN_IF_ERROR(Zero(device, c, c_elements * sizeof(T)));
  } else if (!std::is_same_v<T, double> && s.UniformBatches() && s.batches <= kIntMax) {
    const uint32_t alignments[4] = {AlignmentOf(b), AlignmentOf(a), AlignmentOf(c),
                                    AlignmentOf(c)};
    // The bias epilogue only for a 16-byte aligned bias (an assumption on cuBLASLt's needs);
    // otherwise this file's kernel adds it.
    const bool bias_in_library = bias != nullptr && AlignmentOf(bias) >= 16;
    PlanKey key = PlanKey::ForLaunch(kernel_id, context);
    key.AddValue(alignments);
    key.AddValue(bias_in_library);
    VGPU_ASSIGN_OR_RETURN(std::shared_ptr<MatmulPlan> plan,
                          device.primitives->GetOrCreate<MatmulPlan>(key, [&]() {
                            return MakeMatmulPlan(context, s, dtype, bias_in_library, activation,
                                                  alignments);
                          }));
    VGPU_ASSIGN_OR_RETURN(void* workspace, device.libraries->Workspace(kLtWorkspaceBytes));
    const float alpha = 1.0f, beta = 0.0f;
    std::lock_guard<std::mutex> lock(plan->mutex);
    if (plan->bias_epilogue) {
      const void* bias_pointer = bias;
      VGPU_RETURN_IF_ERROR(CublasStatus(
          cublasLtMatmulDescSetAttribute(plan->desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                         &bias_pointer, sizeof(bias_pointer)),
          "cublasLtMatmulDescSetAttribute(BIAS_POINTER)"));
      epilogue_done = true;
      activation_done = plan->relu_in_epilogue;
    }
    VGPU_RETURN_IF_ERROR(CublasStatus(
        cublasLtMatmul(device.libraries->cublas_lt(), plan->desc.get(), &alpha, b, plan->a.get(),
                       a, plan->b.get(), &beta, c, plan->c.get(), c, plan->c.get(),
                       &plan->heuristic.algo, workspace, kLtWorkspaceBytes, device.stream),
        "cublasLtMatmul"));
  } else {
    // cuBLAS: float64, or batch broadcasts that are not a uniform stride (one product per
    // output matrix).
    if (s.m > kIntMax || s.n > kIntMax || s.k > kIntMax || s.batches > kIntMax) {
      return absl::UnimplementedError("matmul: a product too large for cuBLAS's int extents");
    }
    VGPU_ASSIGN_OR_RETURN(cudaDataType_t type, dnn::CudaDataType(dtype));
    const bool is_double = std::is_same_v<T, double>;
    const cublasComputeType_t compute = is_double ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
    const float alpha_f = 1.0f, beta_f = 0.0f;
    const double alpha_d = 1.0, beta_d = 0.0;
    const void* alpha = is_double ? static_cast<const void*>(&alpha_d) : &alpha_f;
    const void* beta = is_double ? static_cast<const void*>(&beta_d) : &beta_f;
    const cublasOperation_t op_first = s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_second = s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int M = static_cast<int>(s.n), N = static_cast<int>(s.m), K = static_cast<int>(s.k);
    const int ld_first = static_cast<int>(std::max<int64_t>(s.transpose_b ? s.k : s.n, 1));
    const int ld_second = static_cast<int>(std::max<int64_t>(s.transpose_a ? s.m : s.k, 1));
    cublasHandle_t handle = device.libraries->cublas();
    if (s.UniformBatches()) {
      VGPU_RETURN_IF_ERROR(CublasStatus(
          cublasGemmStridedBatchedEx(handle, op_first, op_second, M, N, K, alpha, b, type,
                                     ld_first, s.b_matrices == 1 ? 0 : s.k * s.n, a, type,
                                     ld_second, s.a_matrices == 1 ? 0 : s.m * s.k, beta, c, type,
                                     M, s.m * s.n, static_cast<int>(s.batches), compute,
                                     CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx"));
    } else {
      for (int64_t batch = 0; batch < s.batches; ++batch) {
        const auto [a_index, b_index] = s.Operands(batch);
        VGPU_RETURN_IF_ERROR(CublasStatus(
            cublasGemmEx(handle, op_first, op_second, M, N, K, alpha, b + b_index * s.k * s.n,
                         type, ld_first, a + a_index * s.m * s.k, type, ld_second, beta,
                         c + batch * s.m * s.n, type, M, compute, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx"));
      }
    }
  }
  const T* remaining_bias = epilogue_done ? nullptr : bias;
  const int remaining_activation = activation_done ? -1 : activation;
  if (remaining_bias != nullptr || remaining_activation >= 0) {
    VGPU_RETURN_IF_ERROR(Launch("matmul bias activation", device, c_elements,
                                BiasActivationKernel<T>, c, c_elements, s.n, int64_t{1},
                                remaining_bias, remaining_activation));
  }
  return absl::OkStatus();
}

absl::Status Matmul(const CudaKernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  DType dtype;
  VGPU_ASSIGN_OR_RETURN(MatmulShape shape, ReadMatmulLaunch(context, &dtype));
  return Dispatch::Floating(dtype, [&](auto zero) {
    using T = decltype(zero);
    return MatmulTyped<T>(context, shape, dtype, static_cast<uint32_t>(convolution::kMatmul), 2,
                          nullptr, -1);
  });
}

absl::Status MatmulBiasActivation(const CudaKernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(4));
  DType dtype;
  VGPU_ASSIGN_OR_RETURN(MatmulShape shape, ReadMatmulLaunch(context, &dtype));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings bias,
                        context.Descriptor<TensorDescriptorSettings>(4));
  if (bias.rank != 1 || bias.dims[0] != shape.n || bias.dtype != dtype) {
    return absl::InvalidArgumentError("the bias must be a vector of the product's columns");
  }
  VGPU_ASSIGN_OR_RETURN(int activation, ReadOptionalActivation(context, 5));
  return Dispatch::Floating(dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* bias_data, context.Buffer<const T>(2, shape.n));
    return MatmulTyped<T>(context, shape, dtype,
                          static_cast<uint32_t>(convolution::kMatmulBiasActivation), 3,
                          bias_data, activation);
  });
}

// --- Bias ------------------------------------------------------------------------------------

struct BiasShape {
  DType dtype = DType::kFloat32;
  int64_t outer = 1, channels = 0, inner = 1;
  int64_t Elements() const { return outer * channels * inner; }
};

absl::StatusOr<BiasShape> ReadBiasShape(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings value,
                        context.Descriptor<TensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings bias,
                        context.Descriptor<TensorDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(convolution::BiasParams params,
                        context.Params().Get<convolution::BiasParams>());
  if (value.rank < 2 || value.rank > kMaxRank || bias.rank != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bias needs a value of rank >= 2 and a vector bias, got ranks ", value.rank, " and ",
        bias.rank));
  }
  if (value.dtype != bias.dtype) {
    return absl::InvalidArgumentError("bias and value dtypes differ");
  }
  const auto format = static_cast<DataFormat>(params.data_format);
  if (format != DataFormat::kNHWC && format != DataFormat::kNCHW) {
    return absl::InvalidArgumentError("unknown bias data format");
  }
  const int channel_dim = format == DataFormat::kNCHW ? 1 : value.rank - 1;
  VGPU_RETURN_IF_ERROR(
      CheckedElementCount("bias value", value.dims, value.rank, kMaxConvolutionElements).status());
  BiasShape shape;
  shape.dtype = value.dtype;
  for (int i = 0; i < value.rank; ++i) {
    if (i < channel_dim) shape.outer *= value.dims[i];
    if (i > channel_dim) shape.inner *= value.dims[i];
  }
  shape.channels = value.dims[channel_dim];
  if (bias.dims[0] != shape.channels) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bias has ", bias.dims[0], " elements for ", shape.channels, " channels"));
  }
  return shape;
}

absl::Status BiasAdd(const CudaKernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(BiasShape s, ReadBiasShape(context));
  return Dispatch::Floating(s.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* value, context.Buffer<const T>(0, s.Elements()));
    VGPU_ASSIGN_OR_RETURN(const T* bias, context.Buffer<const T>(1, s.channels));
    VGPU_ASSIGN_OR_RETURN(T* out, context.Buffer<T>(2, s.Elements()));
    // out may alias value: each element is read and written by one thread.
    return Launch("bias_add", DeviceOf(context), s.Elements(), BiasAddKernel<T>, value, bias,
                  out, s.Elements(), s.channels, s.inner);
  });
}

absl::Status BiasAddGrad(const CudaKernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(BiasShape s, ReadBiasShape(context));
  return Dispatch::Floating(s.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* gradient, context.Buffer<const T>(0, s.Elements()));
    VGPU_ASSIGN_OR_RETURN(T* bias_gradient, context.Buffer<T>(1, s.channels));
    if (s.channels == 0) return absl::OkStatus();
    const CudaLaunchDevice& device = DeviceOf(context);
    // Zero elements give zero sums (the kernel's empty loops).
    const unsigned blocks =
        static_cast<unsigned>(std::min<int64_t>(s.channels, int64_t{1} << 16));
    BiasAddGradKernel<T><<<blocks, 256, 0, device.stream>>>(gradient, bias_gradient, s.outer,
                                                            s.channels, s.inner);
    return LastLaunchStatus("bias_add_grad");
  });
}

// --- Rearrange (Einsum's permutations, diagonals and summed dimensions) ----------------------

// A checked rearrangement (the CPU executor's Rearrangement), passed to the kernel by value.
struct Rearrangement {
  int rank = 0;  // y's
  int summed_rank = 0;
  int64_t y_dims[kMaxRank] = {};
  int32_t ties[kMaxRank] = {};
  int64_t x_strides[kMaxRank] = {};
  int64_t summed_sizes[kMaxRank] = {};
  int64_t summed_strides[kMaxRank] = {};
  int64_t x_elements = 0, y_elements = 0, summed_count = 1;
};

// (size - 1) * stride added to *bound, or false on overflow.
bool AddSpan(int64_t size, int64_t stride, int64_t* bound) {
  int64_t span = 0;
  return !__builtin_mul_overflow(size - 1, stride, &span) &&
         !__builtin_add_overflow(*bound, span, bound);
}

absl::StatusOr<Rearrangement> ReadRearrangement(const TensorDescriptorSettings& x,
                                                const TensorDescriptorSettings& y,
                                                const convolution::RearrangeParams& params) {
  if (x.dtype != y.dtype) return absl::InvalidArgumentError("rearrange x and y dtypes differ");
  if (x.rank < 0 || x.rank > kMaxRank || y.rank < 0 || y.rank > kMaxRank) {
    return absl::InvalidArgumentError("rearrange tensor rank out of range");
  }
  if (params.summed_rank < 0 || params.summed_rank > kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrCat("rearrange summed rank out of range: ", params.summed_rank));
  }
  Rearrangement r;
  r.rank = y.rank;
  r.summed_rank = params.summed_rank;
  VGPU_ASSIGN_OR_RETURN(r.x_elements, CheckedElementCount("rearrange x", x.dims, x.rank,
                                                          kMaxConvolutionElements));
  VGPU_ASSIGN_OR_RETURN(r.y_elements, CheckedElementCount("rearrange y", y.dims, y.rank,
                                                          kMaxConvolutionElements));
  VGPU_ASSIGN_OR_RETURN(r.summed_count,
                        CheckedElementCount("rearrange summed dimensions", params.summed_sizes,
                                            params.summed_rank, kMaxConvolutionElements));
  for (int k = 0; k < kMaxRank; ++k) {
    const bool used = k < y.rank;
    if (!used && (params.ties[k] != -1 || params.x_strides[k] != 0)) {
      return absl::InvalidArgumentError("rearrange parameters beyond y's rank must be unset");
    }
    if (used && (params.ties[k] < -1 || params.ties[k] >= k)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rearrange tie of dimension ", k, " must be -1 or an earlier dimension"));
    }
    if (params.x_strides[k] < 0) {
      return absl::InvalidArgumentError("rearrange strides must not be negative");
    }
    if (used) {
      r.y_dims[k] = y.dims[k];
      r.ties[k] = params.ties[k];
      r.x_strides[k] = params.x_strides[k];
    }
  }
  for (int m = 0; m < kMaxRank; ++m) {
    const bool used = m < params.summed_rank;
    if (params.summed_strides[m] < 0 ||
        (!used && (params.summed_sizes[m] != 0 || params.summed_strides[m] != 0))) {
      return absl::InvalidArgumentError("rearrange summed dimensions are malformed");
    }
    if (used) {
      r.summed_sizes[m] = params.summed_sizes[m];
      r.summed_strides[m] = params.summed_strides[m];
    }
  }
  if (r.summed_count > std::max<int64_t>(r.x_elements, 1)) {
    return absl::InvalidArgumentError(absl::StrCat("rearrange sums ", r.summed_count,
                                                   " terms, more than x's ", r.x_elements,
                                                   " elements"));
  }
  if (r.y_elements > 0 && r.summed_count > 0) {
    int64_t last = 0;
    bool ok = true;
    for (int k = 0; k < r.rank; ++k) ok = ok && AddSpan(r.y_dims[k], r.x_strides[k], &last);
    for (int m = 0; m < r.summed_rank; ++m) {
      ok = ok && AddSpan(r.summed_sizes[m], r.summed_strides[m], &last);
    }
    if (!ok || last >= r.x_elements) {
      return absl::InvalidArgumentError(
          absl::StrCat("rearrange reads beyond x's ", r.x_elements, " elements"));
    }
  }
  return r;
}

// One thread per y element: 0 off the diagonals the ties name, else the sum (in Acc<T>, in the
// CPU kernel's order: the summed dimensions row-major) of x over the summed dimensions.
template <typename T>
__global__ void RearrangeKernel(Rearrangement r, const T* x, T* y) {
  for (int64_t element = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; element < r.y_elements;
       element += int64_t{blockDim.x} * gridDim.x) {
    int64_t index[kMaxRank];
    int64_t rest = element;
    for (int k = r.rank - 1; k >= 0; --k) {
      index[k] = rest % r.y_dims[k];
      rest /= r.y_dims[k];
    }
    bool on_diagonal = true;
    int64_t offset = 0;
    for (int k = 0; k < r.rank; ++k) {
      if (r.ties[k] >= 0 && index[k] != index[r.ties[k]]) on_diagonal = false;
      offset += index[k] * r.x_strides[k];
    }
    Acc<T> total = 0;
    if (on_diagonal) {
      if (r.summed_rank == 0) {
        total = ToAcc(x[offset]);
      } else if (r.summed_count > 0) {
        int64_t position[kMaxRank] = {};
        int64_t at = offset;
        for (int64_t term = 0; term < r.summed_count; ++term) {
          total += ToAcc(x[at]);
          for (int m = r.summed_rank - 1; m >= 0; --m) {
            at += r.summed_strides[m];
            if (++position[m] < r.summed_sizes[m]) break;
            at -= position[m] * r.summed_strides[m];
            position[m] = 0;
          }
        }
      }
    }
    y[element] = FromAcc<T>(total);
  }
}

absl::Status Rearrange(const CudaKernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings x,
                        context.Descriptor<TensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings y,
                        context.Descriptor<TensorDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(convolution::RearrangeParams params,
                        context.Params().Get<convolution::RearrangeParams>());
  VGPU_ASSIGN_OR_RETURN(Rearrangement r, ReadRearrangement(x, y, params));
  return Dispatch::Floating(x.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* x_data, context.Buffer<const T>(0, r.x_elements));
    VGPU_ASSIGN_OR_RETURN(T* y_data, context.Buffer<T>(1, r.y_elements));
    return Launch("rearrange", DeviceOf(context), r.y_elements, RearrangeKernel<T>, r, x_data,
                  y_data);
  });
}

}  // namespace

void AddCudaConvolutionKernels(CudaKernelTable& table) {
  table.Add(convolution::kForward, "convolution_forward", ConvolutionForward);
  table.Add(convolution::kBackwardInput, "convolution_backward_input", ConvolutionBackwardInput);
  table.Add(convolution::kBackwardFilter, "convolution_backward_filter",
            ConvolutionBackwardFilter);
  table.Add(convolution::kForwardBiasActivation, "convolution_bias_activation_forward",
            ConvolutionBiasActivationForward);
  table.Add(convolution::kMatmul, "matmul", Matmul);
  table.Add(convolution::kMatmulBiasActivation, "matmul_bias_activation", MatmulBiasActivation);
  table.Add(convolution::kBiasAdd, "bias_add", BiasAdd);
  table.Add(convolution::kBiasAddGrad, "bias_add_grad", BiasAddGrad);
  table.Add(convolution::kRearrange, "rearrange", Rearrange);
}

}  // namespace vgpu::cuda
