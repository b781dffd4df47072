// Unary ops of the op-tensor kernel (elementwise::kUnary) on the CPU backing executor, with
// Eigen's own functors where TensorFlow's CPU kernels use them (so results round identically):
// arithmetic, exponentials and logarithms, erf/erfc, trigonometric and hyperbolic functions, and
// the IsFinite/IsNan/IsInf predicates (bool results). Round is half-to-even (rint); integer
// Neg/Abs wrap at the most negative value. The launch layer (launch/elementwise_launch.h) reads
// and validates the launch, with the op/dtype pairs served; these only compute.
//
// A functor Eigen has no packet form of (the predicates, logical not, integer neg/abs, identity)
// runs as a plain loop, which the compiler vectorises with the cost model set here, before any
// include, for every function of the file: Eigen would call it one element at a time. The same
// scalar operator() on every element, nothing reordered: the same results.
#pragma GCC optimize("vect-cost-model=dynamic")
#define EIGEN_USE_THREADS
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/elementwise_broadcast.h"
#include "plugin/backend/cpu/kernels/elementwise_kernels.h"
#include "plugin/backend/launch/elementwise_launch.h"
#include "plugin/backend/launch/integer_arithmetic.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/elementwise.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {

using elementwise_launch::ReadUnaryLaunch;
using elementwise_launch::UnaryKind;
using elementwise_launch::UnaryLaunch;
using elementwise_launch::UnservedUnary;

namespace {

template <typename T>
inline constexpr bool kIsFloating = !Eigen::NumTraits<T>::IsInteger;

template <typename T>
struct IntegerNegate {
  T operator()(const T& a) const { return WrapNegate(a); }
};
template <typename T>
struct IntegerAbs {
  T operator()(const T& a) const { return a < 0 ? WrapNegate(a) : a; }
};
template <typename T>
struct Identity {
  T operator()(const T& a) const { return a; }
};
struct LogicalNot {
  bool operator()(bool a) const { return !a; }
};
template <typename T>
struct IsFinite {
  bool operator()(const T& a) const { return (Eigen::numext::isfinite)(a); }
};
template <typename T>
struct IsNan {
  bool operator()(const T& a) const { return (Eigen::numext::isnan)(a); }
};
template <typename T>
struct IsInf {
  bool operator()(const T& a) const { return (Eigen::numext::isinf)(a); }
};
template <typename T>
struct SignBit {  // 16-bit floats widen to float exactly, sign and NaN payload included
  bool operator()(const T& a) const {
    if constexpr (std::is_same_v<T, double>) {
      uint64_t bits;
      std::memcpy(&bits, &a, sizeof(bits));
      return (bits >> 63) != 0;
    } else {
      const float value = static_cast<float>(a);
      uint32_t bits;
      std::memcpy(&bits, &value, sizeof(bits));
      return (bits >> 31) != 0;
    }
  }
};

// y = functor(x) over `count` elements, in parallel blocks of flat Eigen expressions; x is of
// type T, y of type Tout.
template <typename T, typename Functor, typename Tout = T>
absl::Status RunUnary(const KernelContext& context, int64_t count, const Functor& functor) {
  VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, count));
  VGPU_ASSIGN_OR_RETURN(Tout* y, context.Buffer<Tout>(1, count));
  const Eigen::TensorOpCost cost =
      ElementCost(sizeof(T), sizeof(Tout), Eigen::internal::functor_traits<Functor>::Cost);
  ParallelBlocks(*context.device, count, cost, [&](int64_t begin, int64_t end) {
    if constexpr (Eigen::internal::functor_traits<Functor>::PacketAccess) {
      FlatMap<Tout>(y + begin, end - begin) =
          ConstFlatMap<T>(x + begin, end - begin).unaryExpr(functor);
    } else {
      const T* in = x + begin;  // may be y itself: a forwarded input
      Tout* out = y + begin;
      for (int64_t i = 0; i < end - begin; ++i) out[i] = functor(in[i]);
    }
  });
  return absl::OkStatus();
}

template <typename T>
absl::Status RunUnaryOp(const KernelContext& context, ElementwiseOp op, int64_t count) {
  namespace ei = Eigen::internal;
  if constexpr (kIsFloating<T>) {
    switch (op) {
      case ElementwiseOp::kNeg: return RunUnary<T>(context, count, ei::scalar_opposite_op<T>());
      case ElementwiseOp::kAbs: return RunUnary<T>(context, count, ei::scalar_abs_op<T>());
      case ElementwiseOp::kSqrt: return RunUnary<T>(context, count, ei::scalar_sqrt_op<T>());
      case ElementwiseOp::kRsqrt: return RunUnary<T>(context, count, ei::scalar_rsqrt_op<T>());
      case ElementwiseOp::kSquare: return RunUnary<T>(context, count, ei::scalar_square_op<T>());
      case ElementwiseOp::kExp: return RunUnary<T>(context, count, ei::scalar_exp_op<T>());
      case ElementwiseOp::kLog: return RunUnary<T>(context, count, ei::scalar_log_op<T>());
      case ElementwiseOp::kSign: return RunUnary<T>(context, count, ei::scalar_sign_op<T>());
      case ElementwiseOp::kReciprocal:
        return RunUnary<T>(context, count, ei::scalar_inverse_op<T>());
      case ElementwiseOp::kFloor: return RunUnary<T>(context, count, ei::scalar_floor_op<T>());
      case ElementwiseOp::kCeil: return RunUnary<T>(context, count, ei::scalar_ceil_op<T>());
      case ElementwiseOp::kRound: return RunUnary<T>(context, count, ei::scalar_rint_op<T>());
      case ElementwiseOp::kErf: return RunUnary<T>(context, count, ei::scalar_erf_op<T>());
      case ElementwiseOp::kErfc: return RunUnary<T>(context, count, ei::scalar_erfc_op<T>());
      case ElementwiseOp::kExpm1: return RunUnary<T>(context, count, ei::scalar_expm1_op<T>());
      case ElementwiseOp::kLog1p: return RunUnary<T>(context, count, ei::scalar_log1p_op<T>());
      case ElementwiseOp::kSin: return RunUnary<T>(context, count, ei::scalar_sin_op<T>());
      case ElementwiseOp::kCos: return RunUnary<T>(context, count, ei::scalar_cos_op<T>());
      case ElementwiseOp::kTan: return RunUnary<T>(context, count, ei::scalar_tan_op<T>());
      case ElementwiseOp::kAsin: return RunUnary<T>(context, count, ei::scalar_asin_op<T>());
      case ElementwiseOp::kAcos: return RunUnary<T>(context, count, ei::scalar_acos_op<T>());
      case ElementwiseOp::kAtan: return RunUnary<T>(context, count, ei::scalar_atan_op<T>());
      case ElementwiseOp::kSinh: return RunUnary<T>(context, count, ei::scalar_sinh_op<T>());
      case ElementwiseOp::kCosh: return RunUnary<T>(context, count, ei::scalar_cosh_op<T>());
      case ElementwiseOp::kAsinh: return RunUnary<T>(context, count, ei::scalar_asinh_op<T>());
      case ElementwiseOp::kAcosh: return RunUnary<T>(context, count, ei::scalar_acosh_op<T>());
      case ElementwiseOp::kAtanh: return RunUnary<T>(context, count, ei::scalar_atanh_op<T>());
      default: break;
    }
  } else if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
    switch (op) {
      case ElementwiseOp::kNeg: return RunUnary<T>(context, count, IntegerNegate<T>());
      case ElementwiseOp::kAbs: return RunUnary<T>(context, count, IntegerAbs<T>());
      case ElementwiseOp::kSquare: return RunUnary<T>(context, count, ei::scalar_square_op<T>());
      case ElementwiseOp::kSign: return RunUnary<T>(context, count, ei::scalar_sign_op<T>());
      case ElementwiseOp::kRound: return RunUnary<T>(context, count, Identity<T>());
      default: break;
    }
  }
  return UnservedUnary(op);  // the reader refused it
}

// The predicates (bool y) of a floating x.
template <typename T>
absl::Status RunPredicate(const KernelContext& context, ElementwiseOp op, int64_t count) {
  if constexpr (kIsFloating<T>) {
    switch (op) {
      case ElementwiseOp::kIsFinite: return RunUnary<T, IsFinite<T>, bool>(context, count, {});
      case ElementwiseOp::kIsNan: return RunUnary<T, IsNan<T>, bool>(context, count, {});
      case ElementwiseOp::kIsInf: return RunUnary<T, IsInf<T>, bool>(context, count, {});
      case ElementwiseOp::kSignBit: return RunUnary<T, SignBit<T>, bool>(context, count, {});
      default: break;
    }
  }
  return UnservedUnary(op);  // the reader refused it
}

}  // namespace

// elementwise::kUnary: y = op(x).
absl::Status ElementwiseUnary(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(UnaryLaunch launch, ReadUnaryLaunch(context));
  switch (launch.kind) {
    case UnaryKind::kLogicalNot: return RunUnary<bool>(context, launch.count, LogicalNot());
    case UnaryKind::kPredicate:
      return Dispatch::Floating(launch.dtype, [&](auto zero) -> absl::Status {
        return RunPredicate<decltype(zero)>(context, launch.op, launch.count);
      });
    case UnaryKind::kMath: break;
  }
  return Dispatch::Numeric(launch.dtype, [&](auto zero) -> absl::Status {
    return RunUnaryOp<decltype(zero)>(context, launch.op, launch.count);
  });
}

}  // namespace vgpu::cpu_kernels
