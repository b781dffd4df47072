// Helpers of the CUDA data movement, random, sparse and training kernels: the stored element
// types of the protocol dtypes (Half, BFloat16, Bool8), with arithmetic that rounds like the
// CPU executor's Eigen types, for the shared dtype dispatch; grid-stride launches; a
// stream-ordered scratch allocation; and the synchronous read-back of a device error flag. (The
// byte-generic element types of the data movement and gather kernels, word-sized when aligned
// and bytewise when a tenant placed a tensor at an odd address, are launch/element_bytes.h's;
// the element-wise, reduction and softmax families compute with device_types.cuh's Narrow types.)
#ifndef VGPU_BACKEND_CUDA_KERNELS_ELEMENT_HELPERS_CUH_
#define VGPU_BACKEND_CUDA_KERNELS_ELEMENT_HELPERS_CUH_

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/launch/dtype_dispatch.h"
#include "plugin/protocol/kernel_ids.h"

namespace vgpu::cuda::elements {

// --- 16-bit floating types ------------------------------------------------------------------
// Eigen::half and Eigen::bfloat16 (the CPU executor's types) do every operation in float and
// round the result to the 16-bit type to nearest even. These do the same. (Rounding a float
// result of one +, -, *, / or sqrt of 16-bit operands to 16 bits equals rounding the exact
// result once: float's 24 bits are at least twice the 11 (8) bits plus 2, so no double-rounding
// error arises.)
struct Half {
  __half value;
  Half() = default;
  __host__ __device__ explicit Half(float f) : value(__float2half_rn(f)) {}
  __host__ __device__ float ToFloat() const { return __half2float(value); }
};
struct BFloat16 {
  __nv_bfloat16 value;
  BFloat16() = default;
  __host__ __device__ explicit BFloat16(float f) : value(__float2bfloat16_rn(f)) {}
  __host__ __device__ float ToFloat() const { return __bfloat162float(value); }
};
static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);

// A bool element: one byte, nonzero read as true, written as 0 or 1 (the GPU's bool buffers
// are not canonicalised on the host).
struct Bool8 {
  uint8_t value;
};
static_assert(sizeof(Bool8) == 1);

template <typename T>
inline constexpr bool kIs16BitFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The arithmetic of T: float and double natively; Half and BFloat16 through float, rounded per
// operation (operator overloads below).
#define VGPU_K2_BINARY(op)                                                         \
  template <typename T, std::enable_if_t<kIs16BitFloat<T>, int> = 0>              \
  __host__ __device__ inline T operator op(T a, T b) {                            \
    return T(a.ToFloat() op b.ToFloat());                                         \
  }
VGPU_K2_BINARY(+)
VGPU_K2_BINARY(-)
VGPU_K2_BINARY(*)
VGPU_K2_BINARY(/)
#undef VGPU_K2_BINARY
#define VGPU_K2_COMPARE(op)                                                        \
  template <typename T, std::enable_if_t<kIs16BitFloat<T>, int> = 0>              \
  __host__ __device__ inline bool operator op(T a, T b) {                         \
    return a.ToFloat() op b.ToFloat();                                            \
  }
VGPU_K2_COMPARE(<)
VGPU_K2_COMPARE(>)
VGPU_K2_COMPARE(<=)
VGPU_K2_COMPARE(>=)
VGPU_K2_COMPARE(==)
VGPU_K2_COMPARE(!=)
#undef VGPU_K2_COMPARE
template <typename T, std::enable_if_t<kIs16BitFloat<T>, int> = 0>
__host__ __device__ inline T operator-(T a) {
  return T(-a.ToFloat());
}

// T from a small constant or a count (T(1), T(2), static_cast<T>(count) on the CPU), converted
// from its own type (an int64_t count is not rounded through double first).
template <typename T, typename From>
__host__ __device__ inline T Cast(From v) {
  if constexpr (kIs16BitFloat<T>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Element-wise functions as Eigen computes them for T (the 16-bit types through float).
// Correctly rounded sqrt and division need nvcc's defaults (-prec-sqrt=true -prec-div=true).
__device__ inline float Sqrt(float x) { return sqrtf(x); }
__device__ inline double Sqrt(double x) { return sqrt(x); }
template <typename T, std::enable_if_t<kIs16BitFloat<T>, int> = 0>
__device__ inline T Sqrt(T x) { return T(sqrtf(x.ToFloat())); }

// Eigen's float rsqrt packet may use an approximation plus a Newton step on the CPU; here it
// is 1 / sqrt(x), correctly rounded: within the float32 tolerance of the comparison, not bitwise.
__device__ inline float Rsqrt(float x) { return 1.0f / sqrtf(x); }
__device__ inline double Rsqrt(double x) { return 1.0 / sqrt(x); }
template <typename T, std::enable_if_t<kIs16BitFloat<T>, int> = 0>
__device__ inline T Rsqrt(T x) { return T(1.0f / sqrtf(x.ToFloat())); }

__device__ inline float Exp(float x) { return expf(x); }
__device__ inline double Exp(double x) { return exp(x); }
template <typename T, std::enable_if_t<kIs16BitFloat<T>, int> = 0>
__device__ inline T Exp(T x) { return T(expf(x.ToFloat())); }

__device__ inline float Pow(float x, float y) { return powf(x, y); }
__device__ inline double Pow(double x, double y) { return pow(x, y); }
template <typename T, std::enable_if_t<kIs16BitFloat<T>, int> = 0>
__device__ inline T Pow(T x, T y) { return T(powf(x.ToFloat(), y.ToFloat())); }

template <typename T>
__device__ inline T Abs(T x) {
  if constexpr (kIs16BitFloat<T>) {
    return T(fabsf(x.ToFloat()));
  } else {
    return x < T(0) ? -x : x;
  }
}
template <>
__device__ inline float Abs(float x) { return fabsf(x); }
template <>
__device__ inline double Abs(double x) { return fabs(x); }

// Eigen's sign: -1, 0 or 1 (0 for NaN here).
template <typename T>
__device__ inline T Sign(T x) {
  const T zero = Cast<T>(0);
  return x > zero ? Cast<T>(1) : (x < zero ? Cast<T>(-1) : zero);
}

// cwiseMax / cwiseMin as Eigen's scalar_max_op / scalar_min_op (b when a < b, else a).
template <typename T>
__device__ inline T Max(T a, T b) { return a < b ? b : a; }
template <typename T>
__device__ inline T Min(T a, T b) { return b < a ? b : a; }

// --- Dtype dispatch -------------------------------------------------------------------------

// How these kernels hold the dtypes C++ has no type for.
struct StoredElementTypes {
  using Float16 = Half;
  using BFloat16 = ::vgpu::cuda::elements::BFloat16;
  using Bool = Bool8;
};

// Dispatch::Floating, Numeric, All, Int32Or64, Index, ElementSize (launch/dtype_dispatch.h).
using Dispatch = DTypeDispatch<StoredElementTypes>;

// --- Launches ------------------------------------------------------------------------------

// The flat index of the calling thread and the stride of a grid-stride loop, in int64.
__device__ inline int64_t GridThreadIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t GridStride() {
  return static_cast<int64_t>(blockDim.x) * gridDim.x;
}

// Enqueues kernel<<<GridFor(elements)>>>(args...) on the device's stream and returns the
// launch's status (LastLaunchStatus(name)). elements > 0. Does not wait for the GPU.
template <typename... KernelArgs, typename... Args>
absl::Status Launch(const char* name, const CudaLaunchDevice& device, int64_t elements,
                    void (*kernel)(KernelArgs...), Args&&... args) {
  const GridShape grid = GridFor(device, elements);
  kernel<<<grid.blocks, grid.threads, 0, device.stream>>>(std::forward<Args>(args)...);
  return LastLaunchStatus(name);
}

inline absl::Status CudaError(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error));
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

// Device scratch memory for work enqueued on one stream: allocated and freed in stream order
// (cudaMallocAsync / cudaFreeAsync on the device's default pool), so the free is ordered after
// every kernel enqueued before the destructor runs. Movable, not copyable. After the merge this
// may draw from CudaLibraries::Workspace instead.
class StreamScratch {
 public:
  StreamScratch() = default;
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  ~StreamScratch() {
    if (pointer_ != nullptr) cudaFreeAsync(pointer_, stream_);
  }
  // Allocates `bytes` (> 0) on `stream`; the memory is usable by work enqueued after this call.
  absl::Status Allocate(cudaStream_t stream, size_t bytes) {
    stream_ = stream;
    return CudaError(cudaMallocAsync(&pointer_, bytes, stream), "cudaMallocAsync (scratch)");
  }
  template <typename T>
  T* As() const { return static_cast<T*>(pointer_); }

 private:
  void* pointer_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// Waits for the stream and copies `count` values of T from device memory at `source` to
// `destination` on the host. This is the one place these kernels block on the GPU: an error
// only the device can detect (a count that does not match, an integer division by zero among
// the updates) must fail the launch on the host, and a kernel status is returned synchronously.
template <typename T>
absl::Status ReadBack(cudaStream_t stream, const T* source, T* destination, size_t count = 1) {
  absl::Status status = CudaError(
      cudaMemcpyAsync(destination, source, count * sizeof(T), cudaMemcpyDeviceToHost, stream),
      "cudaMemcpyAsync (error flag read-back)");
  if (!status.ok()) return status;
  return CudaError(cudaStreamSynchronize(stream), "cudaStreamSynchronize (error flag read-back)");
}

}  // namespace vgpu::cuda::elements

#endif  // VGPU_BACKEND_CUDA_KERNELS_ELEMENT_HELPERS_CUH_
