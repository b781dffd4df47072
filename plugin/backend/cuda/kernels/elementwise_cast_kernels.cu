// Cast between every pair of the protocol's dtypes (elementwise::kCast) on the CUDA executor,
// with the CPU executor's conversions (cpu/kernels/elementwise_cast_kernels.cc):
//   floating -> integer   truncation toward zero; NaN and values outside int32 (int64 for an
//                         int64 result) give the most negative integer; uint8 results are that
//                         int32 clamped to [0, 255];
//   anything -> bool      x != 0 (NaN is true);  bool -> anything: 0 or 1;
//   integer -> integer    modular (the low bits), as C++ conversions;
//   -> float16/bfloat16   via float (Eigen's half(T) converts to float first), rounded to
//                         nearest even; float64 -> float32 rounds to nearest even;
//   truncate != 0         float64->float32, float64->float16, float32->float16 and
//                         float32->bfloat16 first clear the source mantissa bits the destination
//                         lacks (NaN untouched), as TensorFlow's Cast with Truncate.
// Bits are copied unchanged for a same-dtype cast (bool canonicalised to 0/1).
//
// GPU run must confirm: all 64 dtype pairs bit-exact with the CPU executor on random inputs
// including NaN, +-inf, values out of the integer ranges, subnormals and halfway cases for the
// 16-bit types, with truncate 0 and 1. (NaN payloads may differ: the CPU's F16C conversion keeps
// the payload, CUDA's yields its canonical NaN; compared as NaN.)
#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/device_types.cuh"
#include "plugin/backend/launch/element_conversions.h"
#include "plugin/backend/launch/elementwise_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/elementwise.h"

namespace vgpu::cuda {

absl::Status CudaElementwiseCast(const CudaKernelContext& context);

namespace {

using namespace kernels;  // NOLINT: the family's own helper namespace

// Mantissa bits (hidden bit included) of the floating types a truncating cast involves.
template <typename T>
constexpr int MantissaBits() {
  if constexpr (std::is_same_v<T, double>) return 53;
  if constexpr (std::is_same_v<T, float>) return 24;
  if constexpr (std::is_same_v<T, __half>) return 11;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return 8;
  return 0;
}

template <typename In, typename Out>
inline constexpr bool kHonoursTruncate =
    (std::is_same_v<In, double> && (std::is_same_v<Out, float> || std::is_same_v<Out, __half>)) ||
    (std::is_same_v<In, float> &&
     (std::is_same_v<Out, __half> || std::is_same_v<Out, __nv_bfloat16>));

// Clears the kBits low mantissa bits of a float or double that is not NaN.
template <typename T, int kBits>
__device__ T ClearLowMantissaBits(T x) {
  if (isnan(x)) return x;
  if constexpr (sizeof(T) == 8) {
    const unsigned long long bits = static_cast<unsigned long long>(__double_as_longlong(x)) &
                                    ~((1ull << kBits) - 1);
    return __longlong_as_double(static_cast<long long>(bits));
  } else {
    const unsigned bits = static_cast<unsigned>(__float_as_int(x)) & ~((1u << kBits) - 1);
    return __int_as_float(static_cast<int>(bits));
  }
}

// One element's conversion from In's stored bits to Out's.
template <typename In, typename Out>
__device__ Storage<Out> CastValue(Storage<In> raw, bool truncate) {
  if constexpr (std::is_same_v<In, Out>) {
    if constexpr (std::is_same_v<In, bool>) {
      return raw != 0 ? 1 : 0;
    } else {
      return raw;
    }
  } else {
    const Compute<In> value = Load<In>(&raw, 0);
    if constexpr (std::is_same_v<Out, bool>) {
      if constexpr (kIsNarrowFloat<In>) {
        return value.value != 0.0f ? 1 : 0;
      } else {
        return value != In(0) ? 1 : 0;
      }
    } else if constexpr (std::is_same_v<In, bool>) {
      Storage<Out> result;
      Store<Out>(&result, 0, Compute<Out>(value ? 1 : 0));
      return result;
    } else if constexpr (kIsFloating<In> && kIsInteger<Out>) {
      return FloatingToInteger<Out>(static_cast<double>(value));  // element_conversions.h
    } else if constexpr (kIsFloating<In> && kIsFloating<Out>) {
      // The source as float (exact for the narrow types) or double.
      using Wide = std::conditional_t<std::is_same_v<In, double>, double, float>;
      Wide wide = static_cast<Wide>(value);
      if constexpr (kHonoursTruncate<In, Out>) {
        if (truncate) {
          wide = ClearLowMantissaBits<Wide, MantissaBits<In>() - MantissaBits<Out>()>(wide);
        }
      }
      Storage<Out> result;
      Store<Out>(&result, 0, Compute<Out>(wide));  // Narrow: via float, rounded to nearest even
      return result;
    } else if constexpr (kIsInteger<In> && kIsFloating<Out>) {
      Storage<Out> result;
      Store<Out>(&result, 0, Compute<Out>(value));  // Narrow: via float, rounded
      return result;
    } else {  // integer -> integer
      return static_cast<Out>(value);
    }
  }
}

template <typename In, typename Out>
__global__ void CastKernel(int64_t count, bool truncate, const Storage<In>* x, Storage<Out>* y) {
  for (int64_t i = GridStart(); i < count; i += GridStride()) {
    y[i] = CastValue<In, Out>(x[i], truncate);
  }
}

}  // namespace

// elementwise::kCast: y = cast(x), read and validated by the launch layer.
absl::Status CudaElementwiseCast(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(elementwise_launch::CastLaunch launch,
                        elementwise_launch::ReadCastLaunch(context));
  const int64_t count = launch.count;
  return Dispatch::All(launch.source, [&](auto in_zero) -> absl::Status {
    return Dispatch::All(launch.destination, [&](auto out_zero) -> absl::Status {
      using In = decltype(in_zero);
      using Out = decltype(out_zero);
      VGPU_ASSIGN_OR_RETURN(const Storage<In>* x, ConstDeviceBuffer<In>(context, 0, count));
      VGPU_ASSIGN_OR_RETURN(Storage<Out>* y, DeviceBuffer<Out>(context, 1, count));
      if (count == 0) return absl::OkStatus();
      return LaunchGrid(context, "elementwise_cast", count, CastKernel<In, Out>, count,
                        launch.truncate, x, y);
    });
  });
}

}  // namespace vgpu::cuda
