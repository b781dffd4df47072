// What the CUDA executor's convolution, matmul, bias and rearrange kernels share: the type they
// accumulate T in (Acc<T>: double for double, float otherwise) with its conversions, the
// activation of the fused launches and the bias + activation epilogue kernel, and the launch of
// a grid-stride kernel and the zeroing of an output on the launch's stream. Header-only; include
// from .cu files only. Nothing here keeps state.
#ifndef VGPU_BACKEND_CUDA_KERNELS_FLOAT_COMPUTE_CUH_
#define VGPU_BACKEND_CUDA_KERNELS_FLOAT_COMPUTE_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <type_traits>

#include "absl/status/status.h"
#include "plugin/backend/cuda/cuda_descriptors.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu::cuda {

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

// activation(v) for an ActivationCode `mode` (-1: identity).
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

// The activation mode of a fused launch as the epilogue kernels take it: -1 for none (identity).
inline int ActivationCode(std::optional<ActivationMode> activation) {
  return activation.has_value() ? static_cast<int>(*activation) : -1;
}

// Runs `kernel` (a grid-stride kernel over `elements` items) with `args` on the launch's stream;
// nothing for no elements. The error of the launch names `name`.
template <typename Kernel, typename... Args>
absl::Status LaunchGridStride(const char* name, const CudaLaunchDevice& device, int64_t elements,
                              Kernel kernel, Args... args) {
  if (elements <= 0) return absl::OkStatus();
  const GridShape grid = GridFor(device, elements);
  kernel<<<grid.blocks, grid.threads, 0, device.stream>>>(args...);
  return LastLaunchStatus(name);
}

// Zeroes `bytes` bytes at device address `data` on the launch's stream.
inline absl::Status ZeroAsync(const CudaLaunchDevice& device, void* data, uint64_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  return dnn::RuntimeStatus(cudaMemsetAsync(data, 0, bytes, device.stream), "cudaMemsetAsync");
}

}  // namespace vgpu::cuda

#endif  // VGPU_BACKEND_CUDA_KERNELS_FLOAT_COMPUTE_CUH_
