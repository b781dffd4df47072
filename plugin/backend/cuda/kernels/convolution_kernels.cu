// CUDA kernels of the convolution family (protocol/kernels/convolution.h) on the CUDA executor,
// from the geometry launch/convolution_launch.h reads: 2-D and 3-D convolutions (regular,
// grouped, depthwise) and their two backward passes through cuDNN's legacy convolution API, and
// the fused forward with bias and activation (cudnnConvolutionBiasActivationForward for float32
// + relu, otherwise the cuDNN forward then float_compute.cuh's bias/activation kernel). The
// other kernels of the protocol's convolution id range are matmul_kernels.cu, bias_kernels.cu
// and rearrange_kernels.cu.
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

#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cuda/cuda_descriptors.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/cuda_libraries.h"
#include "plugin/backend/cuda/kernels/device_types.cuh"
#include "plugin/backend/cuda/kernels/float_compute.cuh"
#include "plugin/backend/cuda/primitive_cache.h"
#include "plugin/backend/launch/convolution_launch.h"
#include "plugin/backend/launch/plan_cache.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::cuda {
namespace {

using convolution_launch::ConvolutionBiasActivationLaunch;
using convolution_launch::ConvolutionGeometry;
using convolution_launch::ReadConvolutionBiasActivationLaunch;
using convolution_launch::ReadConvolutionLaunch;
using dnn::CudnnStatus;
using kernels::Dispatch;
using kernels::FloatingKernel;

// --- Layout kernels --------------------------------------------------------------------------

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

// cuDNN's view of a convolution's filter: K output channels, C = one group's input depth, in
// CudnnGroups groups (a depthwise convolution is a grouped one of in_depth groups).
int64_t CudnnK(const ConvolutionGeometry& g) {
  return g.depthwise ? g.in_depth * g.filter_out : g.filter_out;
}
int64_t CudnnC(const ConvolutionGeometry& g) { return g.depthwise ? 1 : g.filter_in_depth; }
int64_t CudnnGroups(const ConvolutionGeometry& g) { return g.depthwise ? g.in_depth : g.groups; }

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
  cudnnHandle_t handle = context.device->libraries->cudnn();
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
                                 g.ChannelsLast()};
  plan->padded_shape = plan->input_shape;
  if (plan->explicit_padding) {
    for (int i = 0; i < 3; ++i) {
      plan->padded_shape.spatial[i] = g.in[i] + g.pad_before[i] + g.pad_after[i];
    }
  }
  VGPU_RETURN_IF_ERROR(dnn::SetImageTensor(plan->x.get(), type, g.batch, g.in_depth,
                                           plan->padded_shape.spatial + first, nd,
                                           g.ChannelsLast()));
  VGPU_RETURN_IF_ERROR(dnn::SetImageTensor(plan->y.get(), type, g.batch, g.out_depth,
                                           g.out + first, nd, g.ChannelsLast()));
  int filter_dims[5] = {static_cast<int>(CudnnK(g)), static_cast<int>(CudnnC(g)), 1, 1, 1};
  for (int i = 0; i < nd; ++i) filter_dims[2 + i] = static_cast<int>(g.filter[first + i]);
  if (CudnnK(g) > std::numeric_limits<int>::max() ||
      CudnnC(g) > std::numeric_limits<int>::max()) {
    return absl::UnimplementedError("convolution: too many channels for cuDNN");
  }
  VGPU_RETURN_IF_ERROR(CudnnStatus(
      cudnnSetFilterNdDescriptor(plan->filter.get(), type,
                                 g.ChannelsLast() ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                 nd + 2, filter_dims),
      "cudnnSetFilterNdDescriptor"));
  int pads[3], strides[3], dilations[3];
  for (int i = 0; i < nd; ++i) {
    const int64_t pad = plan->explicit_padding ? 0 : g.pad_before[first + i];
    constexpr int64_t kIntMax = std::numeric_limits<int>::max();
    if (pad > kIntMax || g.stride[first + i] > kIntMax || g.dilation[first + i] > kIntMax) {
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
      cudnnSetConvolutionGroupCount(plan->convolution.get(), static_cast<int>(CudnnGroups(g))),
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
  return context.device->primitives->GetOrCreate<ConvolutionPlan>(
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
  return LaunchGridStride("convolution filter transpose", device, g.filter_elements,
                          FilterTransposeKernel<T>, source, destination, g.FilterTaps(),
                          CudnnC(g), CudnnK(g), g.ChannelsLast(), to_cudnn);
}

// The stream workspace of one cuDNN call of `plan`: the filter (or its gradient) in cuDNN's
// layout, the zero-padded input (or its gradient; explicit padding only, else null) and cuDNN's
// own scratch of plan.workspace_bytes.
template <typename T>
struct ConvolutionWorkspace {
  T* filter;
  T* padded;
  void* scratch;
};
template <typename T>
absl::StatusOr<ConvolutionWorkspace<T>> WorkspaceFor(const CudaLaunchDevice& device,
                                                     const ConvolutionGeometry& g,
                                                     const ConvolutionPlan& plan) {
  WorkspaceLayout layout;
  const size_t filter_offset = layout.Add(g.filter_elements * sizeof(T));
  const size_t padded_offset =
      layout.Add(plan.explicit_padding ? plan.padded_shape.Elements() * sizeof(T) : 0);
  const size_t scratch_offset = layout.Add(plan.workspace_bytes);
  VGPU_ASSIGN_OR_RETURN(void* workspace, device.libraries->Workspace(layout.total()));
  uint8_t* base = static_cast<uint8_t*>(workspace);
  return ConvolutionWorkspace<T>{
      reinterpret_cast<T*>(base + filter_offset),
      plan.explicit_padding ? reinterpret_cast<T*>(base + padded_offset) : nullptr,
      base + scratch_offset};
}

// The input cuDNN reads: x itself, or (explicit padding) x copied into the zero-padded
// workspace.padded.
template <typename T>
absl::StatusOr<const T*> CudnnInput(const CudaLaunchDevice& device, const ConvolutionGeometry& g,
                                    const ConvolutionPlan& plan,
                                    const ConvolutionWorkspace<T>& workspace, const T* x) {
  if (!plan.explicit_padding) return x;
  VGPU_RETURN_IF_ERROR(LaunchGridStride(
      "convolution input padding", device, plan.padded_shape.Elements(), WindowCopyKernel<T>, x,
      plan.input_shape, workspace.padded, plan.padded_shape, -g.pad_before[0], -g.pad_before[1],
      -g.pad_before[2]));
  return static_cast<const T*>(workspace.padded);
}

template <typename T>
absl::Status ForwardTyped(const CudaKernelContext& context, const ConvolutionGeometry& g,
                          uint32_t kernel_id, size_t output_buffer, const T* bias,
                          int activation) {
  const CudaLaunchDevice& device = *context.device;
  VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, g.input_elements));
  VGPU_ASSIGN_OR_RETURN(const T* w, context.Buffer<const T>(1, g.filter_elements));
  VGPU_ASSIGN_OR_RETURN(T* y, context.Buffer<T>(output_buffer, g.output_elements));
  if (g.output_elements == 0) return absl::OkStatus();
  bool epilogue = bias != nullptr || activation >= 0;
  const int64_t inner = g.ChannelsLast() ? 1 : g.OutputPixels();
  if (g.input_elements == 0 || g.filter_elements == 0) {
    // Only padding is convolved: zeros (then the bias and activation, as the CPU kernel does).
    VGPU_RETURN_IF_ERROR(ZeroAsync(device, y, g.output_elements * sizeof(T)));
  } else {
    // float32 + bias + relu: cuDNN's fused call. Other epilogues: this file's kernel after the
    // convolution (cuDNN fuses only relu / identity, identity only with one algorithm).
    const bool fused_relu = std::is_same_v<T, float> && bias != nullptr &&
                            activation == static_cast<int>(ActivationMode::kRelu);
    VGPU_ASSIGN_OR_RETURN(std::shared_ptr<ConvolutionPlan> plan,
                          PlanFor(context, kernel_id, g, Direction::kForward, fused_relu));
    VGPU_ASSIGN_OR_RETURN(ConvolutionWorkspace<T> workspace, WorkspaceFor<T>(device, g, *plan));
    const T* filter = workspace.filter;
    VGPU_RETURN_IF_ERROR(TransposeFilter(device, g, w, workspace.filter, /*to_cudnn=*/true));
    VGPU_ASSIGN_OR_RETURN(const T* input, CudnnInput(device, g, *plan, workspace, x));
    Scaling scaling;
    if (plan->fused_relu) {
      // y = relu(conv(x) + 0 * z + bias) with z = y, as TensorFlow passes the output as the
      // side input when its scale is 0.
      VGPU_RETURN_IF_ERROR(CudnnStatus(
          cudnnConvolutionBiasActivationForward(
              device.libraries->cudnn(), scaling.alpha(g.dtype), plan->x.get(), input,
              plan->filter.get(), filter, plan->convolution.get(),
              static_cast<cudnnConvolutionFwdAlgo_t>(plan->algorithm), workspace.scratch,
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
                                  workspace.scratch, plan->workspace_bytes,
                                  scaling.beta(g.dtype), plan->y.get(), y),
          "cudnnConvolutionForward"));
    }
  }
  if (epilogue) {
    VGPU_RETURN_IF_ERROR(LaunchGridStride("convolution bias activation", device,
                                          g.output_elements, BiasActivationKernel<T>, y,
                                          g.output_elements, g.out_depth, inner, bias,
                                          activation));
  }
  return absl::OkStatus();
}

// convolution::kBackwardInput: dx from the filter and dy (cudnnConvolutionBackwardData).
struct BackwardInput : FloatingKernel<BackwardInput, ReadConvolutionLaunch> {
  template <typename T>
  static absl::Status Run(const CudaKernelContext& context, const ConvolutionGeometry& g) {
    const CudaLaunchDevice& device = *context.device;
    VGPU_ASSIGN_OR_RETURN(const T* w, context.Buffer<const T>(0, g.filter_elements));
    VGPU_ASSIGN_OR_RETURN(const T* dy, context.Buffer<const T>(1, g.output_elements));
    VGPU_ASSIGN_OR_RETURN(T* dx, context.Buffer<T>(2, g.input_elements));
    if (g.input_elements == 0) return absl::OkStatus();
    if (g.output_elements == 0 || g.filter_elements == 0) {
      return ZeroAsync(device, dx, g.input_elements * sizeof(T));
    }
    VGPU_ASSIGN_OR_RETURN(std::shared_ptr<ConvolutionPlan> plan,
                          PlanFor(context, static_cast<uint32_t>(convolution::kBackwardInput), g,
                                  Direction::kBackwardInput));
    VGPU_ASSIGN_OR_RETURN(ConvolutionWorkspace<T> workspace, WorkspaceFor<T>(device, g, *plan));
    const T* filter = workspace.filter;
    VGPU_RETURN_IF_ERROR(TransposeFilter(device, g, w, workspace.filter, /*to_cudnn=*/true));
    T* gradient = plan->explicit_padding ? workspace.padded : dx;
    Scaling scaling;
    VGPU_RETURN_IF_ERROR(CudnnStatus(
        cudnnConvolutionBackwardData(
            device.libraries->cudnn(), scaling.alpha(g.dtype), plan->filter.get(), filter,
            plan->y.get(), dy, plan->convolution.get(),
            static_cast<cudnnConvolutionBwdDataAlgo_t>(plan->algorithm), workspace.scratch,
            plan->workspace_bytes, scaling.beta(g.dtype), plan->x.get(), gradient),
        "cudnnConvolutionBackwardData"));
    if (plan->explicit_padding) {
      // dx is the padded input's gradient without its padding.
      VGPU_RETURN_IF_ERROR(LaunchGridStride(
          "convolution input gradient crop", device, g.input_elements, WindowCopyKernel<T>,
          static_cast<const T*>(gradient), plan->padded_shape, dx, plan->input_shape,
          g.pad_before[0], g.pad_before[1], g.pad_before[2]));
    }
    return absl::OkStatus();
  }
};

// convolution::kBackwardFilter: dw from x and dy (cudnnConvolutionBackwardFilter).
struct BackwardFilter : FloatingKernel<BackwardFilter, ReadConvolutionLaunch> {
  template <typename T>
  static absl::Status Run(const CudaKernelContext& context, const ConvolutionGeometry& g) {
    const CudaLaunchDevice& device = *context.device;
    VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, g.input_elements));
    VGPU_ASSIGN_OR_RETURN(const T* dy, context.Buffer<const T>(1, g.output_elements));
    VGPU_ASSIGN_OR_RETURN(T* dw, context.Buffer<T>(2, g.filter_elements));
    if (g.filter_elements == 0) return absl::OkStatus();
    if (g.input_elements == 0 || g.output_elements == 0) {
      return ZeroAsync(device, dw, g.filter_elements * sizeof(T));
    }
    VGPU_ASSIGN_OR_RETURN(std::shared_ptr<ConvolutionPlan> plan,
                          PlanFor(context, static_cast<uint32_t>(convolution::kBackwardFilter), g,
                                  Direction::kBackwardFilter));
    VGPU_ASSIGN_OR_RETURN(ConvolutionWorkspace<T> workspace, WorkspaceFor<T>(device, g, *plan));
    T* filter_gradient = workspace.filter;
    VGPU_ASSIGN_OR_RETURN(const T* input, CudnnInput(device, g, *plan, workspace, x));
    Scaling scaling;
    VGPU_RETURN_IF_ERROR(CudnnStatus(
        cudnnConvolutionBackwardFilter(
            device.libraries->cudnn(), scaling.alpha(g.dtype), plan->x.get(), input,
            plan->y.get(), dy, plan->convolution.get(),
            static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan->algorithm), workspace.scratch,
            plan->workspace_bytes, scaling.beta(g.dtype), plan->filter.get(), filter_gradient),
        "cudnnConvolutionBackwardFilter"));
    return TransposeFilter(device, g, static_cast<const T*>(filter_gradient), dw,
                           /*to_cudnn=*/false);
  }
};

// convolution::kForward: y from x and the filter (cudnnConvolutionForward).
struct Forward : FloatingKernel<Forward, ReadConvolutionLaunch> {
  template <typename T>
  static absl::Status Run(const CudaKernelContext& context, const ConvolutionGeometry& g) {
    return ForwardTyped<T>(context, g, static_cast<uint32_t>(convolution::kForward),
                           /*output_buffer=*/2, /*bias=*/nullptr, /*activation=*/-1);
  }
};

// convolution::kForwardBiasActivation: kForward, then the bias and the activation.
struct ForwardBiasActivation
    : FloatingKernel<ForwardBiasActivation, ReadConvolutionBiasActivationLaunch> {
  template <typename T>
  static absl::Status Run(const CudaKernelContext& context,
                          const ConvolutionBiasActivationLaunch& launch) {
    const ConvolutionGeometry& g = launch.geometry;
    VGPU_ASSIGN_OR_RETURN(const T* bias_data, context.Buffer<const T>(2, g.out_depth));
    return ForwardTyped<T>(context, g,
                           static_cast<uint32_t>(convolution::kForwardBiasActivation),
                           /*output_buffer=*/3, bias_data, ActivationCode(launch.activation));
  }
};

}  // namespace

void AddCudaConvolutionKernels(CudaKernelTable& table) {
  table.AddFamily(kernel_families::kConvolution, Forward::Launch, BackwardInput::Launch,
                  BackwardFilter::Launch, ForwardBiasActivation::Launch);
}

}  // namespace vgpu::cuda
