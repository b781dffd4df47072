// The bias family's kernels (protocol/kernels/convolution.h: kBiasAdd, kBiasAddGrad) on the CUDA
// executor, from the geometry launch/bias_launch.h reads: the value tensor viewed as [outer,
// channels, inner]; BiasAdd one thread per element, BiasAddGrad one block per channel with a
// tree reduction in Acc<T>.
#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/device_types.cuh"
#include "plugin/backend/cuda/kernels/float_compute.cuh"
#include "plugin/backend/launch/bias_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::cuda {
namespace {

using bias_launch::BiasGeometry;
using bias_launch::ReadBiasAddGradLaunch;
using bias_launch::ReadBiasAddLaunch;
using kernels::Dispatch;

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

absl::Status BiasAdd(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(BiasGeometry s, ReadBiasAddLaunch(context));
  return Dispatch::Floating(s.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* value, context.Buffer<const T>(0, s.Elements()));
    VGPU_ASSIGN_OR_RETURN(const T* bias, context.Buffer<const T>(1, s.channels));
    VGPU_ASSIGN_OR_RETURN(T* out, context.Buffer<T>(2, s.Elements()));
    // out may alias value: each element is read and written by one thread.
    return LaunchGridStride("bias_add", *context.device, s.Elements(), BiasAddKernel<T>, value,
                            bias, out, s.Elements(), s.channels, s.inner);
  });
}

absl::Status BiasAddGrad(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(BiasGeometry s, ReadBiasAddGradLaunch(context));
  return Dispatch::Floating(s.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* gradient, context.Buffer<const T>(0, s.Elements()));
    VGPU_ASSIGN_OR_RETURN(T* bias_gradient, context.Buffer<T>(1, s.channels));
    if (s.channels == 0) return absl::OkStatus();
    const CudaLaunchDevice& device = *context.device;
    // Zero elements give zero sums (the kernel's empty loops).
    const unsigned blocks =
        static_cast<unsigned>(std::min<int64_t>(s.channels, int64_t{1} << 16));
    BiasAddGradKernel<T><<<blocks, 256, 0, device.stream>>>(gradient, bias_gradient, s.outer,
                                                            s.channels, s.inner);
    return LastLaunchStatus("bias_add_grad");
  });
}

}  // namespace

void AddCudaBiasKernels(CudaKernelTable& table) {
  table.AddFamily(kernel_families::kBias, BiasAdd, BiasAddGrad);
}

}  // namespace vgpu::cuda
