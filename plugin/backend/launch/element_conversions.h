// Conversions of one element that both executors' element-wise kernels make identically, so
// that a tenant's out-of-range values give the same bits on either: floating point to integer
// as TensorFlow's CPU Cast converts on x86 (VGPU_HOST_DEVICE: the CUDA cast runs it on the
// device), and a float64 parameter to an integer dtype, saturating (the set-tensor value,
// converted on the host). C++ leaves out-of-range conversions undefined; these are written out.
// Pure functions.
#ifndef VGPU_BACKEND_LAUNCH_ELEMENT_CONVERSIONS_H_
#define VGPU_BACKEND_LAUNCH_ELEMENT_CONVERSIONS_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "plugin/backend/launch/host_device.h"

namespace vgpu {

// A floating value (as double: exact for every floating dtype) as the integer Out (int32,
// int64 or uint8): truncation toward zero, where NaN and values outside int32 (int64 for an
// int64 result) give the most negative integer; uint8 results are that int32 clamped to
// [0, 255] (what TensorFlow's vectorised path gives; its scalar path keeps the low byte
// instead, so out-of-range floating -> uint8 casts are not reproducible there).
template <typename Out>
VGPU_HOST_DEVICE inline Out FloatingToInteger(double value) {
  if constexpr (sizeof(Out) == 8) {
    constexpr double kLimit = 9223372036854775808.0;  // 2^63
    if (!(value >= -kLimit && value < kLimit)) return static_cast<Out>(INT64_MIN);
    return static_cast<Out>(static_cast<int64_t>(value));
  } else {
    const int32_t truncated = value > -2147483649.0 && value < 2147483648.0
                                  ? static_cast<int32_t>(value)
                                  : INT32_MIN;
    if constexpr (std::is_same_v<Out, uint8_t>) {
      return static_cast<uint8_t>(truncated < 0 ? 0 : truncated > 255 ? 255 : truncated);
    } else {
      return static_cast<Out>(truncated);
    }
  }
}

// `value` as the integer T, saturating at T's limits; NaN becomes 0. Host only.
template <typename T>
inline T SaturatingInteger(double value) {
  static_assert(std::is_integral_v<T>);
  if (std::isnan(value)) return T(0);
  if (value <= static_cast<double>(std::numeric_limits<T>::min())) {
    return std::numeric_limits<T>::min();
  }
  if (value >= static_cast<double>(std::numeric_limits<T>::max())) {
    return std::numeric_limits<T>::max();
  }
  return static_cast<T>(value);
}

}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_ELEMENT_CONVERSIONS_H_
