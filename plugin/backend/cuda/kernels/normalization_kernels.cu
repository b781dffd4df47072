// CUDA kernels of the normalization family (protocol/kernels/normalization.h) on the CUDA
// executor: fused batch normalization forward (training, inference) and backward (training,
// inference) for float32, float16 and bfloat16 data with float32 per-channel parameters, both
// layouts.
//
// These are this file's own kernels rather than cudnnBatchNormalization*: the protocol's
// semantics differ from cuDNN's conventions — the saved statistics are the batch mean and the
// biased variance (cuDNN saves the inverse standard deviation), the running variance takes
// TensorFlow's n / max(n - 1, 1) correction, any epsilon is accepted (cuDNN refuses one below
// CUDNN_BN_MIN_EPSILON), empty batches give NaN running statistics — and the CPU executor's
// arithmetic is followed: per-channel sums in double in one pass (sum x, sum x^2), the
// per-element math in float.
//
// Three steps per launch, all on the stream: a per-channel sum kernel (one block per channel,
// double accumulation, a fixed tree reduction: deterministic), a per-channel finalisation
// kernel (statistics and the outputs of C floats), and an element-wise kernel.
//
// The launch layer (launch/normalization_launch.h) reads and validates every launch, as for the
// CPU executor; these kernels only compute.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/backend/cuda/cuda_descriptors.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/float_compute.cuh"
#include "plugin/backend/cuda/cuda_libraries.h"
#include "plugin/backend/cuda/kernels/device_types.cuh"
#include "plugin/backend/launch/normalization_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/normalization.h"

namespace vgpu::cuda {
namespace {

using kernels::Dispatch;

using normalization_launch::BackwardChannelBuffers;
using normalization_launch::BatchNormBackwardLaunch;
using normalization_launch::BatchNormForwardLaunch;
using normalization_launch::ChannelLayout;
using normalization_launch::DispatchBatchNormData;
using normalization_launch::ForwardChannelBuffers;
using normalization_launch::ReadBatchNormBackwardLaunch;
using normalization_launch::ReadBatchNormForwardLaunch;

// Every dtype batch normalization takes (no float64) computes in float: float_compute.cuh's
// ToAcc and FromAcc convert to and from it.

constexpr int kSumThreads = 256;

// Terms of the forward statistics: x and x^2.
template <typename T>
struct StatisticTerms {
  const T* x;
  __device__ void operator()(int64_t, int64_t i, double* out) const {
    const double v = ToAcc(x[i]);
    out[0] = v;
    out[1] = v * v;
  }
};
// Terms of the backward pass: dy and dy * (x - mean), the product in float as on the CPU.
template <typename T>
struct GradientTerms {
  const T* dy;
  const T* x;
  const float* mean;
  __device__ void operator()(int64_t c, int64_t i, double* out) const {
    const float g = ToAcc(dy[i]);
    out[0] = g;
    out[1] = g * (ToAcc(x[i]) - mean[c]);
  }
};

// sums[k * channels + c] = sum over channel c's elements of term k. One block per channel.
template <typename Terms>
__global__ void ChannelSumsKernel(ChannelLayout layout, Terms terms, double* sums) {
  __shared__ double partial[2][kSumThreads];
  const int64_t n = layout.per_channel();
  for (int64_t c = blockIdx.x; c < layout.channels; c += gridDim.x) {
    double acc[2] = {0.0, 0.0};
    for (int64_t t = threadIdx.x; t < n; t += blockDim.x) {
      const int64_t o = t / layout.inner, j = t % layout.inner;
      double values[2];
      terms(c, (o * layout.channels + c) * layout.inner + j, values);
      acc[0] += values[0];
      acc[1] += values[1];
    }
    partial[0][threadIdx.x] = acc[0];
    partial[1][threadIdx.x] = acc[1];
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
      if (threadIdx.x < stride) {
        partial[0][threadIdx.x] += partial[0][threadIdx.x + stride];
        partial[1][threadIdx.x] += partial[1][threadIdx.x + stride];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      sums[c] = partial[0][0];
      sums[layout.channels + c] = partial[1][0];
    }
    __syncthreads();
  }
}

// The per-channel buffers of a forward launch and the workspace of its element-wise pass.
struct ForwardChannels {
  ForwardChannelBuffers buffer;  // the launch's (training: the running statistics in and out)
  float* mean;        // workspace: the mean y subtracts (for inference a copy, as mean_out may
                      // alias the input mean)
  float* multiplier;  // workspace
};

__global__ void FinalizeTrainingKernel(ChannelLayout layout, const double* sums, float epsilon,
                                       float factor, ForwardChannels out) {
  const int64_t channels = layout.channels;
  const int64_t n = layout.per_channel();
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < channels;
       c += int64_t{blockDim.x} * gridDim.x) {
    if (n == 0) {
      out.buffer.mean_out[c] = out.buffer.variance_out[c] = __int_as_float(0x7fc00000);
      out.buffer.saved_mean[c] = out.buffer.saved_variance[c] = 0.0f;
      continue;
    }
    const float adjust = static_cast<float>(n) / static_cast<float>(n > 1 ? n - 1 : 1);
    const double batch_mean = sums[c] / static_cast<double>(n);
    const double batch_variance =
        sums[channels + c] / static_cast<double>(n) - batch_mean * batch_mean;
    const float mean = static_cast<float>(batch_mean);
    const float variance = static_cast<float>(batch_variance > 0.0 ? batch_variance : 0.0);
    out.mean[c] = mean;
    out.multiplier[c] = out.buffer.scale[c] / sqrtf(variance + epsilon);
    if (factor == 1.0f) {
      out.buffer.mean_out[c] = mean;
      out.buffer.variance_out[c] = variance * adjust;
    } else {
      const float keep = 1.0f - factor;
      out.buffer.mean_out[c] = keep * out.buffer.mean[c] + factor * mean;
      out.buffer.variance_out[c] = keep * out.buffer.variance[c] + (factor * adjust) * variance;
    }
    out.buffer.saved_mean[c] = mean;
    out.buffer.saved_variance[c] = variance;
  }
}

__global__ void FinalizeInferenceKernel(ChannelLayout layout, float epsilon, bool empty,
                                        ForwardChannels out) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < layout.channels;
       c += int64_t{blockDim.x} * gridDim.x) {
    const float m = out.buffer.mean[c], v = out.buffer.variance[c];
    out.buffer.saved_mean[c] = m;
    out.buffer.saved_variance[c] = v;
    if (empty) {
      out.buffer.mean_out[c] = out.buffer.variance_out[c] = __int_as_float(0x7fc00000);
      continue;
    }
    out.mean[c] = m;
    out.multiplier[c] = out.buffer.scale[c] / sqrtf(v + epsilon);
    out.buffer.mean_out[c] = m;
    out.buffer.variance_out[c] = v;
  }
}

// y = (x - mean[c]) * multiplier[c] + offset[c].
template <typename T>
__global__ void NormalizeKernel(ChannelLayout layout, const T* x, const float* mean,
                                const float* multiplier, const float* offset, T* y) {
  const int64_t elements = layout.elements();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < elements;
       i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t c = (i / layout.inner) % layout.channels;
    y[i] = FromAcc<T>((ToAcc(x[i]) - mean[c]) * multiplier[c] + offset[c]);
  }
}

// The per-channel buffers of a backward launch and the workspace of its element-wise pass.
struct BackwardChannels {
  BackwardChannelBuffers buffer;  // the launch's
  float* inv_std;     // workspace
  float* mean_dy;     // workspace
  float* projection;  // workspace
};

__global__ void FinalizeBackwardKernel(ChannelLayout layout, const double* sums, float epsilon,
                                       BackwardChannels out) {
  const int64_t channels = layout.channels;
  const int64_t n = layout.per_channel();
  const float n_inverse = n > 0 ? 1.0f / static_cast<float>(n) : 0.0f;
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < channels;
       c += int64_t{blockDim.x} * gridDim.x) {
    const float inv_std = 1.0f / sqrtf(out.buffer.variance[c] + epsilon);
    const float doffset = static_cast<float>(sums[c]);
    const float projected = static_cast<float>(sums[channels + c]);
    out.inv_std[c] = inv_std;
    out.buffer.doffset[c] = doffset;
    out.buffer.dscale[c] = projected * inv_std;
    out.mean_dy[c] = doffset * n_inverse;
    out.projection[c] = inv_std * inv_std * projected * n_inverse;
  }
}

template <typename T, bool kTraining>
__global__ void BackwardElementsKernel(ChannelLayout layout, const T* dy, const T* x,
                                       const float* mean, BackwardChannels channels, T* dx) {
  const int64_t elements = layout.elements();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < elements;
       i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t c = (i / layout.inner) % layout.channels;
    if (kTraining) {
      const float centered = ToAcc(x[i]) - mean[c];
      dx[i] = FromAcc<T>(channels.buffer.scale[c] * channels.inv_std[c] *
                           (ToAcc(dy[i]) - channels.mean_dy[c] -
                            centered * channels.projection[c]));
    } else {
      dx[i] = FromAcc<T>(ToAcc(dy[i]) * (channels.buffer.scale[c] * channels.inv_std[c]));
    }
  }
}

// --- Launches --------------------------------------------------------------------------------

// Workspace of `doubles` doubles followed by `floats` floats (both 256-byte aligned).
struct Scratch {
  double* doubles;
  float* floats;
};
absl::StatusOr<Scratch> ScratchFor(const CudaLaunchDevice& device, int64_t doubles,
                                   int64_t floats) {
  const size_t double_bytes = (static_cast<size_t>(doubles) * sizeof(double) + 255) / 256 * 256;
  VGPU_ASSIGN_OR_RETURN(void* workspace,
                        device.libraries->Workspace(double_bytes + floats * sizeof(float)));
  auto* base = static_cast<uint8_t*>(workspace);
  return Scratch{reinterpret_cast<double*>(base), reinterpret_cast<float*>(base + double_bytes)};
}

unsigned ChannelBlocks(int64_t channels) {
  return static_cast<unsigned>(std::clamp<int64_t>(channels, 1, int64_t{1} << 16));
}

// The forward pass: the channels' mean and multiplier (in training from x's sums, which also
// update the running statistics; in inference from the running statistics), then y.
template <bool kTraining>
absl::Status Forward(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const BatchNormForwardLaunch launch, ReadBatchNormForwardLaunch(context));
  const ChannelLayout layout = launch.layout;
  const int64_t channels = layout.channels;
  return DispatchBatchNormData<Dispatch>(launch.x.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, layout.elements()));
    VGPU_ASSIGN_OR_RETURN(T* y, context.Buffer<T>(5, layout.elements()));
    if (channels == 0) return absl::OkStatus();
    const CudaLaunchDevice& device = *context.device;
    VGPU_ASSIGN_OR_RETURN(Scratch scratch,
                          ScratchFor(device, kTraining ? 2 * channels : 0, 2 * channels));
    const ForwardChannels out{launch.channel, scratch.floats, scratch.floats + channels};
    if constexpr (kTraining) {
      if (layout.elements() > 0) {
        ChannelSumsKernel<<<ChannelBlocks(channels), kSumThreads, 0, device.stream>>>(
            layout, StatisticTerms<T>{x}, scratch.doubles);
        VGPU_RETURN_IF_ERROR(LastLaunchStatus("batch_norm_forward_training sums"));
      }
      VGPU_RETURN_IF_ERROR(LaunchGridStride(
          "batch_norm_forward_training statistics", device, channels, FinalizeTrainingKernel,
          layout, static_cast<const double*>(scratch.doubles), launch.params.epsilon,
          launch.params.exponential_avg_factor, out));
    } else {
      VGPU_RETURN_IF_ERROR(LaunchGridStride(
          "batch_norm_forward_inference statistics", device, channels, FinalizeInferenceKernel,
          layout, launch.params.epsilon, layout.elements() == 0, out));
    }
    return LaunchGridStride(
        kTraining ? "batch_norm_forward_training" : "batch_norm_forward_inference", device,
        layout.elements(), NormalizeKernel<T>, layout, x, static_cast<const float*>(out.mean),
        static_cast<const float*>(out.multiplier), launch.channel.offset, y);
  });
}

template <bool kTraining>
absl::Status Backward(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const BatchNormBackwardLaunch launch,
                        ReadBatchNormBackwardLaunch(context));
  const ChannelLayout layout = launch.layout;
  const int64_t channels = layout.channels;
  const float* mean = launch.channel.mean;
  return DispatchBatchNormData<Dispatch>(launch.x.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* dy, context.Buffer<const T>(0, layout.elements()));
    VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(1, layout.elements()));
    VGPU_ASSIGN_OR_RETURN(T* dx, context.Buffer<T>(5, layout.elements()));
    if (channels == 0) return absl::OkStatus();
    const CudaLaunchDevice& device = *context.device;
    VGPU_ASSIGN_OR_RETURN(Scratch scratch, ScratchFor(device, 2 * channels, 3 * channels));
    const BackwardChannels out{launch.channel, scratch.floats, scratch.floats + channels,
                               scratch.floats + 2 * channels};
    if (layout.elements() > 0) {
      ChannelSumsKernel<<<ChannelBlocks(channels), kSumThreads, 0, device.stream>>>(
          layout, GradientTerms<T>{dy, x, mean}, scratch.doubles);
      VGPU_RETURN_IF_ERROR(LastLaunchStatus("batch_norm_backward sums"));
    } else {
      VGPU_RETURN_IF_ERROR(dnn::RuntimeStatus(
          cudaMemsetAsync(scratch.doubles, 0, 2 * channels * sizeof(double), device.stream),
          "cudaMemsetAsync"));
    }
    VGPU_RETURN_IF_ERROR(LaunchGridStride("batch_norm_backward statistics", device, channels,
                                          FinalizeBackwardKernel, layout,
                                          static_cast<const double*>(scratch.doubles),
                                          launch.params.epsilon, out));
    return LaunchGridStride(
        kTraining ? "batch_norm_backward_training" : "batch_norm_backward_inference", device,
        layout.elements(), BackwardElementsKernel<T, kTraining>, layout, dy, x, mean, out, dx);
  });
}

}  // namespace

void AddCudaNormalizationKernels(CudaKernelTable& table) {
  table.AddFamily(kernel_families::kNormalization, Forward<true>, Forward<false>, Backward<true>,
                  Backward<false>);
}

}  // namespace vgpu::cuda
