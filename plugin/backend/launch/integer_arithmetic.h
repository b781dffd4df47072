// Integer element arithmetic as every executor's element-wise kernels compute it (TensorFlow's
// semantics as its kernels behave in practice): two's-complement wrap-around without signed-
// overflow undefined behaviour, truncating and flooring division that report a zero divisor
// instead of trapping (INT_MIN / -1 wraps), and integer powers by repeated squaring.
// VGPU_HOST_DEVICE: the CPU kernels call these on the host, the CUDA kernels on the device; no
// std:: algorithm, only type traits. Pure functions.
#ifndef VGPU_BACKEND_LAUNCH_INTEGER_ARITHMETIC_H_
#define VGPU_BACKEND_LAUNCH_INTEGER_ARITHMETIC_H_

#include <type_traits>

#include "plugin/backend/launch/host_device.h"

namespace vgpu {

// a + b, a - b, a * b and -a in T, wrapping.
template <typename T>
VGPU_HOST_DEVICE inline T WrapAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <typename T>
VGPU_HOST_DEVICE inline T WrapSub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <typename T>
VGPU_HOST_DEVICE inline T WrapMul(T a, T b) {
  // uint8 and the like promote to int: multiply in a wide unsigned type.
  using U = std::make_unsigned_t<std::common_type_t<T, unsigned>>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}
template <typename T>
VGPU_HOST_DEVICE inline T WrapNegate(T a) {
  return WrapSub(T(0), a);
}

// Whether b is 0; sets *zero_divisor when it is.
template <typename T>
VGPU_HOST_DEVICE inline bool IsZeroDivisor(T b, bool* zero_divisor) {
  if (b != T(0)) return false;
  *zero_divisor = true;
  return true;
}

// a / b truncated toward zero (Div). A zero divisor sets *zero_divisor and gives 0.
template <typename T>
VGPU_HOST_DEVICE inline T IntegerDivide(T a, T b, bool* zero_divisor) {
  if (IsZeroDivisor(b, zero_divisor)) return T(0);
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return WrapNegate(a);
  }
  return static_cast<T>(a / b);
}

// a / b rounded toward negative infinity (FloorDiv). A zero divisor as IntegerDivide.
template <typename T>
VGPU_HOST_DEVICE inline T IntegerFloorDivide(T a, T b, bool* zero_divisor) {
  if (IsZeroDivisor(b, zero_divisor)) return T(0);
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return WrapNegate(a);
    const T quotient = static_cast<T>(a / b);
    const bool inexact = static_cast<T>(quotient * b) != a;
    return inexact && ((a < 0) != (b < 0)) ? static_cast<T>(quotient - 1) : quotient;
  } else {
    return static_cast<T>(a / b);
  }
}

// The remainder of a / b with the divisor's sign (FloorMod). A zero divisor as IntegerDivide.
template <typename T>
VGPU_HOST_DEVICE inline T IntegerFloorModulo(T a, T b, bool* zero_divisor) {
  if (IsZeroDivisor(b, zero_divisor)) return T(0);
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return T(0);
    const T remainder = static_cast<T>(a % b);
    return remainder != 0 && ((remainder < 0) != (b < 0)) ? static_cast<T>(remainder + b)
                                                           : remainder;
  } else {
    return static_cast<T>(a % b);
  }
}

// a ** b by repeated squaring, wrapping on overflow. A negative exponent gives what
// TensorFlow's CUDA kernel gives (its safe_pow_ignore_error: a GPU kernel cannot raise): 1 for
// a base of 1, +-1 for a base of -1 (by the exponent's parity), else 0. TensorFlow's CPU kernel
// refuses it; the virtual GPU behaves like a GPU, and an error found while the stream runs could
// only surface as a failed synchronisation.
template <typename T>
VGPU_HOST_DEVICE inline T IntegerPower(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b < 0) {
      if (a == T(1)) return T(1);
      if (a == T(-1)) return (b % 2 == 0) ? T(1) : T(-1);
      return T(0);
    }
  }
  using Unsigned = std::make_unsigned_t<std::common_type_t<T, unsigned>>;
  Unsigned base = static_cast<Unsigned>(a);
  Unsigned result = 1;
  for (std::make_unsigned_t<T> exponent = static_cast<std::make_unsigned_t<T>>(b); exponent != 0;
       exponent >>= 1) {
    if (exponent & 1) result *= base;
    base *= base;
  }
  return static_cast<T>(result);
}

}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_INTEGER_ARITHMETIC_H_
