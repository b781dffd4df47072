// Helpers shared by the CUDA executor's own kernels (backend/cuda/kernels/*.cu):
//   - the element types of the shared dtype dispatch (launch/dtype_dispatch.h): fn(T{}) with T
//     one of float, double, __half, __nv_bfloat16, int32_t, int64_t, uint8_t, bool; and the
//     base of the floating-point kernels of one typed body (FloatingKernel,
//     launch/typed_kernel.h);
//   - the storage type of each dtype in device memory (Storage<T>: bool is a byte, read nonzero
//     as true, written 0/1) and the type kernels compute in (Compute<T>);
//   - Narrow<S>, the compute type of __half and __nv_bfloat16: a float that always holds a value
//     of S, every arithmetic result rounded to S to nearest even, exactly as the CPU executor's
//     Eigen::half / Eigen::bfloat16 operators compute (in float, rounded per operation);
//   - device math overloads (dmath::) over float, double and Narrow, using CUDA's math library
//     (within about 1 ulp of glibc's; results are compared to the CPU executor with a tolerance);
//   - the launch layer's dense-tensor count, broadcast layout and integer arithmetic
//     (launch/dense_tensor.h, broadcast_layout.h, integer_arithmetic.h) under these kernels'
//     names;
//   - grid-stride loop and launch helpers (GridFor / LastLaunchStatus of cuda_kernel_registry.h).
// Header-only; include from .cu files only. Nothing here keeps state.
//
// GPU run must confirm: __float2half_rn / __float2bfloat16_rn round to nearest even on device
// and host alike (CUDA documents it; Eigen's software conversions do the same), including
// subnormal results.
#ifndef VGPU_BACKEND_CUDA_KERNELS_DEVICE_TYPES_CUH_
#define VGPU_BACKEND_CUDA_KERNELS_DEVICE_TYPES_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/launch/broadcast_layout.h"
#include "plugin/backend/launch/dense_tensor.h"
#include "plugin/backend/launch/dtype_dispatch.h"
#include "plugin/backend/launch/integer_arithmetic.h"
#include "plugin/backend/launch/launch_context.h"
#include "plugin/backend/launch/reader_dispatch.h"
#include "plugin/backend/launch/typed_kernel.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernel_ids.h"

namespace vgpu::cuda::kernels {

// --- Host-side dtype dispatch -----------------------------------------------------------------

// How these kernels hold the dtypes C++ has no type for.
struct CudaElementTypes {
  using Float16 = __half;
  using BFloat16 = __nv_bfloat16;
  using Bool = bool;
};

// Dispatch::Floating, Numeric, All, Int32Or64, Index, ElementSize (launch/dtype_dispatch.h).
using Dispatch = DTypeDispatch<CudaElementTypes>;

// The base of a kernel that reads its launch with kRead and runs Body::Run<T>(context, launch)
// for the launch's floating-point dtype; Body::Launch is the kernel (launch/typed_kernel.h).
template <typename Body, auto kRead>
using FloatingKernel = TypedKernelOf<Dispatch, CudaKernelContext, Body, kRead>;

// The launch readers size buffers with ReaderDispatch's storage types: these kernels' element
// types must match them in size and alignment, as LaunchContext::Buffer<T> checks with them.
static_assert(sizeof(__half) == sizeof(ReaderElementTypes::Float16) &&
              alignof(__half) == alignof(ReaderElementTypes::Float16));
static_assert(sizeof(__nv_bfloat16) == sizeof(ReaderElementTypes::BFloat16) &&
              alignof(__nv_bfloat16) == alignof(ReaderElementTypes::BFloat16));

using ::vgpu::BroadcastLayout;
using ::vgpu::DenseElementCount;

// --- Type traits --------------------------------------------------------------------------------

template <typename T>
inline constexpr bool kIsNarrowFloat =
    std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <typename T>
inline constexpr bool kIsFloating =
    std::is_same_v<T, float> || std::is_same_v<T, double> || kIsNarrowFloat<T>;
template <typename T>
inline constexpr bool kIsInteger =
    std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> || std::is_same_v<T, uint8_t>;

// How T is stored in device memory: bool as a byte (any nonzero byte reads as true).
template <typename T>
struct StorageOf { using type = T; };
template <>
struct StorageOf<bool> { using type = uint8_t; };
template <typename T>
using Storage = typename StorageOf<T>::type;

// Rounds a float to the nearest value of S (ties to even) and back.
template <typename S>
__host__ __device__ inline float RoundTo(float value) {
  if constexpr (std::is_same_v<S, __half>) {
    return __half2float(__float2half_rn(value));
  } else {
    return __bfloat162float(__float2bfloat16_rn(value));
  }
}

// The compute type of __half / __nv_bfloat16: see the file comment. Every constructor and every
// operator rounds its float result to S, as Eigen's half/bfloat16 do.
template <typename S>
struct Narrow {
  float value = 0.0f;

  __host__ __device__ Narrow() {}
  // From any arithmetic value: converted to float first, then rounded (Eigen's half(T)).
  template <typename U, typename = std::enable_if_t<std::is_arithmetic_v<U>>>
  __host__ __device__ explicit Narrow(U number)
      : value(RoundTo<S>(static_cast<float>(number))) {}
  // A float already representable in S (a value loaded from memory).
  __host__ __device__ static Narrow Exact(float f) {
    Narrow n;
    n.value = f;
    return n;
  }
  __host__ __device__ explicit operator float() const { return value; }
  __host__ __device__ explicit operator double() const { return value; }

  __device__ Narrow operator-() const { return Exact(-value); }
  __device__ Narrow& operator+=(Narrow other) { return *this = Narrow(value + other.value); }
  __device__ Narrow& operator*=(Narrow other) { return *this = Narrow(value * other.value); }
};

// __fadd_rn etc.: no contraction into a fused multiply-add, so each operation rounds as on the
// CPU (whose Eigen half operators compute a float result, then round).
template <typename S>
__device__ inline Narrow<S> operator+(Narrow<S> a, Narrow<S> b) {
  return Narrow<S>(__fadd_rn(a.value, b.value));
}
template <typename S>
__device__ inline Narrow<S> operator-(Narrow<S> a, Narrow<S> b) {
  return Narrow<S>(__fsub_rn(a.value, b.value));
}
template <typename S>
__device__ inline Narrow<S> operator*(Narrow<S> a, Narrow<S> b) {
  return Narrow<S>(__fmul_rn(a.value, b.value));
}
template <typename S>
__device__ inline Narrow<S> operator/(Narrow<S> a, Narrow<S> b) {
  return Narrow<S>(__fdiv_rn(a.value, b.value));
}
template <typename S>
__device__ inline bool operator==(Narrow<S> a, Narrow<S> b) { return a.value == b.value; }
template <typename S>
__device__ inline bool operator!=(Narrow<S> a, Narrow<S> b) { return a.value != b.value; }
template <typename S>
__device__ inline bool operator<(Narrow<S> a, Narrow<S> b) { return a.value < b.value; }
template <typename S>
__device__ inline bool operator<=(Narrow<S> a, Narrow<S> b) { return a.value <= b.value; }
template <typename S>
__device__ inline bool operator>(Narrow<S> a, Narrow<S> b) { return a.value > b.value; }
template <typename S>
__device__ inline bool operator>=(Narrow<S> a, Narrow<S> b) { return a.value >= b.value; }

template <typename T>
struct ComputeOf { using type = T; };
template <>
struct ComputeOf<__half> { using type = Narrow<__half>; };
template <>
struct ComputeOf<__nv_bfloat16> { using type = Narrow<__nv_bfloat16>; };
// The type a kernel computes T in: T itself, Narrow<T> for the 16-bit floats.
template <typename T>
using Compute = typename ComputeOf<T>::type;

// The type softmax-like kernels accumulate a row of T in: double for double, else float.
template <typename T>
using WideFloat = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Element i of a T array in device memory, as Compute<T>.
template <typename T>
__device__ inline Compute<T> Load(const Storage<T>* data, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    return data[i] != 0;
  } else if constexpr (std::is_same_v<T, __half>) {
    return Narrow<__half>::Exact(__half2float(data[i]));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return Narrow<__nv_bfloat16>::Exact(__bfloat162float(data[i]));
  } else {
    return data[i];
  }
}

// Writes `value` (a Compute<T>) to element i of a T array in device memory.
template <typename T>
__device__ inline void Store(Storage<T>* data, int64_t i, Compute<T> value) {
  if constexpr (std::is_same_v<T, bool>) {
    data[i] = value ? 1 : 0;
  } else if constexpr (std::is_same_v<T, __half>) {
    data[i] = __float2half_rn(value.value);  // exact: value is a half already
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    data[i] = __float2bfloat16_rn(value.value);
  } else {
    data[i] = value;
  }
}

// A compute value as float / double (bool: 0 or 1).
template <typename C>
__device__ inline float ToFloat(C value) { return static_cast<float>(value); }
template <typename C>
__device__ inline double ToDouble(C value) { return static_cast<double>(value); }

// Compute<T> of a float (rounded to T for the narrow types, converted otherwise).
template <typename C>
__device__ inline C FromFloat(float value) { return static_cast<C>(value); }
// Compute<T> of a double as Eigen's T(double): the narrow types go through float first.
template <typename C>
__device__ inline C FromDouble(double value) { return static_cast<C>(value); }

// --- Device math ------------------------------------------------------------------------------
// One overload set per function: float (CUDA's single-precision function), double, and Narrow
// (the float function, its result rounded to the narrow type, as Eigen's half functions).
namespace dmath {

#define VGPU_DMATH_UNARY(name, float_fn, double_fn)                                     \
  __device__ inline float name(float x) { return float_fn(x); }                         \
  __device__ inline double name(double x) { return double_fn(x); }                      \
  template <typename S>                                                                 \
  __device__ inline Narrow<S> name(Narrow<S> x) { return Narrow<S>(float_fn(x.value)); }

VGPU_DMATH_UNARY(Exp, expf, exp)
VGPU_DMATH_UNARY(Log, logf, log)
VGPU_DMATH_UNARY(Log1p, log1pf, log1p)
VGPU_DMATH_UNARY(Expm1, expm1f, expm1)
VGPU_DMATH_UNARY(Sqrt, sqrtf, sqrt)
VGPU_DMATH_UNARY(Floor, floorf, floor)
VGPU_DMATH_UNARY(Ceil, ceilf, ceil)
VGPU_DMATH_UNARY(Rint, rintf, rint)
VGPU_DMATH_UNARY(Fabs, fabsf, fabs)
VGPU_DMATH_UNARY(Erf, erff, erf)
VGPU_DMATH_UNARY(Erfc, erfcf, erfc)
VGPU_DMATH_UNARY(Sin, sinf, sin)
VGPU_DMATH_UNARY(Cos, cosf, cos)
VGPU_DMATH_UNARY(Tan, tanf, tan)
VGPU_DMATH_UNARY(Asin, asinf, asin)
VGPU_DMATH_UNARY(Acos, acosf, acos)
VGPU_DMATH_UNARY(Atan, atanf, atan)
VGPU_DMATH_UNARY(Sinh, sinhf, sinh)
VGPU_DMATH_UNARY(Cosh, coshf, cosh)
VGPU_DMATH_UNARY(Tanh, tanhf, tanh)
VGPU_DMATH_UNARY(Asinh, asinhf, asinh)
VGPU_DMATH_UNARY(Acosh, acoshf, acosh)
VGPU_DMATH_UNARY(Atanh, atanhf, atanh)
#undef VGPU_DMATH_UNARY

#define VGPU_DMATH_BINARY(name, float_fn, double_fn)                                    \
  __device__ inline float name(float x, float y) { return float_fn(x, y); }             \
  __device__ inline double name(double x, double y) { return double_fn(x, y); }         \
  template <typename S>                                                                 \
  __device__ inline Narrow<S> name(Narrow<S> x, Narrow<S> y) {                          \
    return Narrow<S>(float_fn(x.value, y.value));                                       \
  }

VGPU_DMATH_BINARY(Pow, powf, pow)
VGPU_DMATH_BINARY(Atan2, atan2f, atan2)
VGPU_DMATH_BINARY(Fmod, fmodf, fmod)
#undef VGPU_DMATH_BINARY

template <typename C>
__device__ inline bool IsNan(C x) {
  if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
    return isnan(x);
  } else if constexpr (std::is_integral_v<C>) {
    return false;
  } else {
    return isnan(x.value);
  }
}
template <typename C>
__device__ inline bool IsInf(C x) {
  if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
    return isinf(x);
  } else if constexpr (std::is_integral_v<C>) {
    return false;
  } else {
    return isinf(x.value);
  }
}
template <typename C>
__device__ inline bool SignBit(C x) {
  if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
    return signbit(x);
  } else {
    return signbit(x.value);
  }
}
template <typename C>
__device__ inline bool IsFinite(C x) {
  if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
    return isfinite(x);
  } else if constexpr (std::is_integral_v<C>) {
    return true;
  } else {
    return isfinite(x.value);
  }
}

// Machine epsilon of the compute type (Eigen::NumTraits<T>::epsilon()).
template <typename C>
__device__ inline C Epsilon() {
  if constexpr (std::is_same_v<C, float>) {
    return FLT_EPSILON;
  } else if constexpr (std::is_same_v<C, double>) {
    return DBL_EPSILON;
  } else if constexpr (std::is_same_v<C, Narrow<__half>>) {
    return C::Exact(0.0009765625f);  // 2^-10
  } else {
    return C::Exact(0.0078125f);  // 2^-7
  }
}

// Quiet NaN, +infinity of a floating compute type.
template <typename C>
__device__ inline C QuietNaN() {
  if constexpr (std::is_same_v<C, double>) {
    return __longlong_as_double(0x7ff8000000000000LL);
  } else if constexpr (std::is_same_v<C, float>) {
    return __int_as_float(0x7fc00000);
  } else {
    return C::Exact(__int_as_float(0x7fc00000));
  }
}
template <typename C>
__device__ inline C Infinity() {
  if constexpr (std::is_same_v<C, double>) {
    return __longlong_as_double(0x7ff0000000000000LL);
  } else if constexpr (std::is_same_v<C, float>) {
    return __int_as_float(0x7f800000);
  } else {
    return C::Exact(__int_as_float(0x7f800000));
  }
}

}  // namespace dmath

// a + b, a * b in the compute type C: wrapping for integers (launch/integer_arithmetic.h),
// rounded per operation otherwise.
template <typename C>
__device__ inline C Add(C a, C b) {
  if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
    return WrapAdd(a, b);
  } else if constexpr (std::is_same_v<C, float>) {
    return __fadd_rn(a, b);
  } else if constexpr (std::is_same_v<C, double>) {
    return __dadd_rn(a, b);
  } else {
    return a + b;
  }
}
template <typename C>
__device__ inline C Multiply(C a, C b) {
  if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
    return WrapMul(a, b);
  } else if constexpr (std::is_same_v<C, float>) {
    return __fmul_rn(a, b);
  } else if constexpr (std::is_same_v<C, double>) {
    return __dmul_rn(a, b);
  } else {
    return a * b;
  }
}

// --- Launching ----------------------------------------------------------------------------------

// The first index of this thread and the stride of a grid-stride loop, in 64 bits.
__device__ inline int64_t GridStart() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t GridStride() {
  return static_cast<int64_t>(blockDim.x) * gridDim.x;
}

// Enqueues kernel<<<GridFor(elements)>>>(args...) on the launch's stream and returns the launch
// status naming `name`. elements > 0. Does not wait for the GPU.
template <typename... Params, typename... Args>
absl::Status LaunchGrid(const CudaKernelContext& context, const char* name, int64_t elements,
                        void (*kernel)(Params...), Args&&... args) {
  const GridShape grid = GridFor(*context.device, elements);
  kernel<<<grid.blocks, grid.threads, 0, context.device->stream>>>(std::forward<Args>(args)...);
  return LastLaunchStatus(name);
}

// Enqueues kernel<<<blocks, threads>>>(args...) with blocks = min(rows, kMaxRowBlocks): one
// block per row (the kernel loops over rows with a block stride). rows > 0.
inline constexpr int64_t kMaxRowBlocks = 65535;
template <typename... Params, typename... Args>
absl::Status LaunchRows(const CudaKernelContext& context, const char* name, int64_t rows,
                        unsigned threads, void (*kernel)(Params...), Args&&... args) {
  const unsigned blocks = static_cast<unsigned>(rows < kMaxRowBlocks ? rows : kMaxRowBlocks);
  kernel<<<blocks, threads, 0, context.device->stream>>>(std::forward<Args>(args)...);
  return LastLaunchStatus(name);
}

// An InvalidArgument error unless buffer `index` holds `elements` values of T in device memory
// (Storage<T> for bool: a byte each). The device pointer otherwise.
template <typename T>
absl::StatusOr<Storage<T>*> DeviceBuffer(const CudaKernelContext& context, size_t index,
                                         uint64_t elements) {
  return context.Buffer<Storage<T>>(index, elements);
}
template <typename T>
absl::StatusOr<const Storage<T>*> ConstDeviceBuffer(const CudaKernelContext& context,
                                                    size_t index, uint64_t elements) {
  return context.Buffer<const Storage<T>>(index, elements);
}

}  // namespace vgpu::cuda::kernels

#endif  // VGPU_BACKEND_CUDA_KERNELS_DEVICE_TYPES_CUH_
