// Binary arithmetic of the op-tensor kernel (elementwise::kBinary) on the CPU backing executor,
// with TensorFlow's CPU semantics: Eigen's own functors where TensorFlow uses them (so results
// round identically), functors written here for floating floor division/modulo, DivNoNan,
// SquaredDifference, Xlogy/Xdivy/Xlog1py and the Rsqrt/Sqrt/Reciprocal gradients, and the
// launch layer's integer arithmetic (launch/integer_arithmetic.h: division, floor division and
// modulo, powers) that the CUDA executor computes with too. The op/dtype pairs served are
// launch/elementwise_launch.h's; its reader has refused every other one.
#define EIGEN_USE_THREADS
#include <cstdint>

#include "plugin/backend/cpu/kernels/elementwise_binary.h"
#include "plugin/backend/cpu/kernels/elementwise_kernels.h"
#include "plugin/backend/launch/elementwise_launch.h"
#include "plugin/backend/launch/integer_arithmetic.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

template <typename T>
inline constexpr bool kIsFloating = !Eigen::NumTraits<T>::IsInteger;

// An integer op that can meet a zero divisor (launch/integer_arithmetic.h: IntegerDivide,
// IntegerFloorDivide, IntegerFloorModulo) as an Eigen functor: a zero divisor raises the flag.
template <typename T, T (*kCompute)(T, T, bool*)>
struct ZeroDivisorChecked {
  const ErrorFlag* error;
  T operator()(const T& a, const T& b) const {
    bool zero_divisor = false;
    const T result = kCompute(a, b, &zero_divisor);
    if (zero_divisor) error->Raise();
    return result;
  }
};

// a ** b for integers (IntegerPower: a negative exponent gives TensorFlow's CUDA kernel's 0 or
// +-1, no error).
template <typename T>
struct IntegerPowerOp {
  T operator()(const T& a, const T& b) const { return IntegerPower(a, b); }
};

// floor(a / b) for floating point (FloorDiv).
template <typename T>
struct FloatFloorDivide {
  T operator()(const T& a, const T& b) const { return Eigen::numext::floor(a / b); }
  template <typename Packet>
  Packet packetOp(const Packet& a, const Packet& b) const {
    return Eigen::internal::pfloor(Eigen::internal::pdiv(a, b));
  }
};

// fmod(a, b) moved to the sign of b (FloorMod for floating point).
template <typename T>
struct FloatFloorModulo {
  T operator()(const T& a, const T& b) const {
    const T remainder = Eigen::numext::fmod(a, b);
    return remainder != T(0) && ((b < T(0)) != (remainder < T(0))) ? T(remainder + b)
                                                                    : remainder;
  }
};

// a / b, or 0 wherever b == 0 (DivNoNan).
template <typename T>
struct DivideNoNan {
  T operator()(const T& a, const T& b) const { return b == T(0) ? T(0) : T(a / b); }
  template <typename Packet>
  Packet packetOp(const Packet& a, const Packet& b) const {
    using namespace Eigen::internal;
    return pandnot(pdiv(a, b), pcmp_eq(b, pzero(b)));
  }
};

// (a - b)^2 (SquaredDifference).
template <typename T>
struct SquaredDifference {
  T operator()(const T& a, const T& b) const {
    const T difference = a - b;
    return difference * difference;
  }
  template <typename Packet>
  Packet packetOp(const Packet& a, const Packet& b) const {
    const Packet difference = Eigen::internal::psub(a, b);
    return Eigen::internal::pmul(difference, difference);
  }
};

// x * y where y != 0, else 0 (TensorFlow's mul_no_nan), the building block of the gradients.
template <typename Packet>
Packet MultiplyNoNan(const Packet& x, const Packet& y) {
  using namespace Eigen::internal;
  return pandnot(pmul(x, y), pcmp_eq(y, pzero(y)));
}

// RsqrtGrad(y, dy) = -0.5 * dy * y^3, exactly 0 where y * dy is 0, associated as TensorFlow's
// vectorised CPU kernel does.
template <typename T>
struct RsqrtGradient {
  T operator()(const T& y, const T& dy) const {
    const T y_dy = dy == T(0) ? T(0) : T(y * dy);
    return y_dy == T(0) ? T(0) : T(T(T(-0.5) * T(y * y)) * y_dy);
  }
  template <typename Packet>
  Packet packetOp(const Packet& y, const Packet& dy) const {
    using namespace Eigen::internal;
    const Packet minus_half_y_squared = pmul(pset1<Packet>(T(-0.5)), pmul(y, y));
    return MultiplyNoNan(minus_half_y_squared, MultiplyNoNan(y, dy));
  }
};

// SqrtGrad(y, dy) = dy * 0.5 / y, exactly 0 where dy is 0, associated as TensorFlow's
// vectorised CPU kernel does.
template <typename T>
struct SqrtGradient {
  T operator()(const T& y, const T& dy) const {
    return dy == T(0) ? T(0) : T(T(T(0.5) / y) * dy);
  }
  template <typename Packet>
  Packet packetOp(const Packet& y, const Packet& dy) const {
    using namespace Eigen::internal;
    return MultiplyNoNan(pdiv(pset1<Packet>(T(0.5)), y), dy);
  }
};

// x * log(y), or 0 where x == 0 (Xlogy; Xlog1py with log1p).
template <typename T, bool kLog1p>
struct XLogY {
  T operator()(const T& x, const T& y) const {
    if (x == T(0)) return T(0);
    return x * (kLog1p ? Eigen::numext::log1p(y) : Eigen::numext::log(y));
  }
  template <typename Packet>
  Packet packetOp(const Packet& x, const Packet& y) const {
    using namespace Eigen::internal;
    const Packet log_y = kLog1p ? scalar_log1p_op<T>().packetOp(y) : scalar_log_op<T>().packetOp(y);
    return pselect(pcmp_eq(x, pzero(x)), x, pmul(x, log_y));
  }
};

// x / y, or 0 where x == 0 (Xdivy).
template <typename T>
struct XDivY {
  T operator()(const T& x, const T& y) const { return x == T(0) ? T(0) : T(x / y); }
  template <typename Packet>
  Packet packetOp(const Packet& x, const Packet& y) const {
    using namespace Eigen::internal;
    return pselect(pcmp_eq(x, pzero(x)), x, pdiv(x, y));
  }
};

// ReciprocalGrad(y, dy) = -dy * y^2, exactly 0 where dy is 0, associated as TensorFlow's
// vectorised CPU kernel does.
template <typename T>
struct ReciprocalGradient {
  T operator()(const T& y, const T& dy) const {
    return dy == T(0) ? T(0) : T(T(-y * y) * dy);
  }
  template <typename Packet>
  Packet packetOp(const Packet& y, const Packet& dy) const {
    using namespace Eigen::internal;
    return MultiplyNoNan(pnegate(pmul(y, y)), dy);
  }
};

}  // namespace
}  // namespace vgpu::cpu_kernels

namespace Eigen::internal {

template <typename T, bool kLog1p>
struct functor_traits<vgpu::cpu_kernels::XLogY<T, kLog1p>> {
  enum {
    Cost = functor_traits<scalar_log_op<T>>::Cost + NumTraits<T>::MulCost,
    PacketAccess = (kLog1p ? functor_traits<scalar_log1p_op<T>>::PacketAccess
                           : functor_traits<scalar_log_op<T>>::PacketAccess) &&
                   packet_traits<T>::HasCmp,
  };
};
template <typename T>
struct functor_traits<vgpu::cpu_kernels::XDivY<T>> {
  enum {
    Cost = NumTraits<T>::MulCost + NumTraits<T>::AddCost,
    PacketAccess = packet_traits<T>::HasDiv && packet_traits<T>::HasCmp,
  };
};
template <typename T>
struct functor_traits<vgpu::cpu_kernels::ReciprocalGradient<T>> {
  enum { Cost = 3 * NumTraits<T>::MulCost, PacketAccess = packet_traits<T>::HasCmp };
};

template <typename T>
struct functor_traits<vgpu::cpu_kernels::FloatFloorDivide<T>> {
  enum {
    Cost = 2 * NumTraits<T>::MulCost + 2 * NumTraits<T>::AddCost,
    PacketAccess = packet_traits<T>::HasDiv && packet_traits<T>::HasRound,
  };
};
template <typename T>
struct functor_traits<vgpu::cpu_kernels::FloatFloorModulo<T>> {
  enum { Cost = 13 + NumTraits<T>::AddCost, PacketAccess = false };
};
template <typename T>
struct functor_traits<vgpu::cpu_kernels::DivideNoNan<T>> {
  enum {
    Cost = 2 * NumTraits<T>::MulCost + NumTraits<T>::AddCost,
    PacketAccess = packet_traits<T>::HasDiv && packet_traits<T>::HasCmp,
  };
};
template <typename T>
struct functor_traits<vgpu::cpu_kernels::SquaredDifference<T>> {
  enum { Cost = NumTraits<T>::MulCost + NumTraits<T>::AddCost, PacketAccess = true };
};
template <typename T>
struct functor_traits<vgpu::cpu_kernels::RsqrtGradient<T>> {
  enum { Cost = 4 * NumTraits<T>::MulCost, PacketAccess = packet_traits<T>::HasCmp };
};
template <typename T>
struct functor_traits<vgpu::cpu_kernels::SqrtGradient<T>> {
  enum {
    Cost = 2 * NumTraits<T>::MulCost,
    PacketAccess = packet_traits<T>::HasDiv && packet_traits<T>::HasCmp,
  };
};

}  // namespace Eigen::internal

namespace vgpu::cpu_kernels {
namespace {

template <typename T, T (*kCompute)(T, T, bool*)>
absl::Status RunChecked(const KernelContext& context, const BroadcastLayout<2>& layout,
                        const char* error_message) {
  ErrorFlag error;
  VGPU_RETURN_IF_ERROR(
      (RunBinary<T, T>(context, layout, ZeroDivisorChecked<T, kCompute>{&error})));
  if (error.raised()) return absl::InvalidArgumentError(error_message);
  return absl::OkStatus();
}

using elementwise_launch::kIntegerDivisionByZero;

template <typename T>
absl::Status RunArithmetic(const KernelContext& context, ElementwiseOp op, DType dtype,
                           const BroadcastLayout<2>& layout) {
  namespace ei = Eigen::internal;
  switch (op) {
    case ElementwiseOp::kAdd: return RunBinary<T, T>(context, layout, ei::scalar_sum_op<T>());
    case ElementwiseOp::kSub:
      return RunBinary<T, T>(context, layout, ei::scalar_difference_op<T>());
    case ElementwiseOp::kMul: return RunBinary<T, T>(context, layout, ei::scalar_product_op<T>());
    case ElementwiseOp::kMaximum:
      return RunBinary<T, T>(context, layout, ei::scalar_max_op<T, T, Eigen::PropagateNaN>());
    case ElementwiseOp::kMinimum:
      return RunBinary<T, T>(context, layout, ei::scalar_min_op<T, T, Eigen::PropagateNaN>());
    case ElementwiseOp::kSquaredDifference:
      return RunBinary<T, T>(context, layout, SquaredDifference<T>());
    case ElementwiseOp::kDiv:
      if constexpr (kIsFloating<T>) {
        return RunBinary<T, T>(context, layout, ei::scalar_quotient_op<T>());
      } else {
        return RunChecked<T, IntegerDivide<T>>(context, layout, kIntegerDivisionByZero);
      }
    case ElementwiseOp::kFloorDiv:
      if constexpr (kIsFloating<T>) {
        return RunBinary<T, T>(context, layout, FloatFloorDivide<T>());
      } else {
        return RunChecked<T, IntegerFloorDivide<T>>(context, layout, kIntegerDivisionByZero);
      }
    case ElementwiseOp::kFloorMod:
      if constexpr (kIsFloating<T>) {
        return RunBinary<T, T>(context, layout, FloatFloorModulo<T>());
      } else {
        return RunChecked<T, IntegerFloorModulo<T>>(context, layout, kIntegerDivisionByZero);
      }
    case ElementwiseOp::kPow:
      if constexpr (kIsFloating<T>) {
        return RunBinary<T, T>(context, layout, ei::scalar_pow_op<T, T>());
      } else {
        return RunBinary<T, T>(context, layout, IntegerPowerOp<T>());
      }
    case ElementwiseOp::kDivNoNan:
      if constexpr (kIsFloating<T>) return RunBinary<T, T>(context, layout, DivideNoNan<T>());
      break;
    case ElementwiseOp::kRsqrtGrad:
      if constexpr (kIsFloating<T>) return RunBinary<T, T>(context, layout, RsqrtGradient<T>());
      break;
    case ElementwiseOp::kSqrtGrad:
      if constexpr (kIsFloating<T>) return RunBinary<T, T>(context, layout, SqrtGradient<T>());
      break;
    case ElementwiseOp::kReciprocalGrad:
      if constexpr (kIsFloating<T>) {
        return RunBinary<T, T>(context, layout, ReciprocalGradient<T>());
      }
      break;
    case ElementwiseOp::kAtan2:
      if constexpr (kIsFloating<T>) {
        return RunBinary<T, T>(context, layout, ei::scalar_atan2_op<T>());
      }
      break;
    case ElementwiseOp::kXlogy:
      if constexpr (kIsFloating<T>) return RunBinary<T, T>(context, layout, XLogY<T, false>());
      break;
    case ElementwiseOp::kXlog1py:
      if constexpr (kIsFloating<T>) return RunBinary<T, T>(context, layout, XLogY<T, true>());
      break;
    case ElementwiseOp::kXdivy:
      if constexpr (kIsFloating<T>) return RunBinary<T, T>(context, layout, XDivY<T>());
      break;
    default: break;
  }
  return elementwise_launch::UnservedBinaryArithmetic(op, dtype);  // the reader refused it
}

}  // namespace

absl::Status RunBinaryArithmetic(const KernelContext& context, ElementwiseOp op, DType dtype,
                                 const BroadcastLayout<2>& layout) {
  return Dispatch::Numeric(dtype, [&](auto zero) -> absl::Status {
    return RunArithmetic<decltype(zero)>(context, op, dtype, layout);
  });
}

}  // namespace vgpu::cpu_kernels
