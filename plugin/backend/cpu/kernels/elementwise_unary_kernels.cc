// Unary ops of the op-tensor kernel (elementwise::kUnary) on the CPU backing executor, with
// Eigen's own functors where TensorFlow's CPU kernels use them (so results round identically).
// Round is half-to-even (rint); integer Neg/Abs wrap at the most negative value.
#define EIGEN_USE_THREADS
#include <cstdint>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/elementwise_broadcast.h"
#include "plugin/backend/cpu/kernels/elementwise_kernels.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/elementwise.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

template <typename T>
inline constexpr bool kIsFloating = !Eigen::NumTraits<T>::IsInteger;

template <typename T>
T WrappingNegateValue(T a) {
  using Unsigned = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<Unsigned>(Unsigned{0} - static_cast<Unsigned>(a)));
}

template <typename T>
struct IntegerNegate {
  T operator()(const T& a) const { return WrappingNegateValue(a); }
};
template <typename T>
struct IntegerAbs {
  T operator()(const T& a) const { return a < 0 ? WrappingNegateValue(a) : a; }
};
template <typename T>
struct Identity {
  T operator()(const T& a) const { return a; }
};
struct LogicalNot {
  bool operator()(bool a) const { return !a; }
};

// y = functor(x) over `count` elements, in parallel blocks of flat Eigen expressions.
template <typename T, typename Functor>
absl::Status RunUnary(const KernelContext& context, int64_t count, const Functor& functor) {
  VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, count));
  VGPU_ASSIGN_OR_RETURN(T* y, context.Buffer<T>(1, count));
  const Eigen::TensorOpCost cost =
      ElementCost(sizeof(T), sizeof(T), Eigen::internal::functor_traits<Functor>::Cost);
  ParallelBlocks(*context.device, count, cost, [&](int64_t begin, int64_t end) {
    FlatMap<T>(y + begin, end - begin) =
        ConstFlatMap<T>(x + begin, end - begin).unaryExpr(functor);
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
  return absl::InvalidArgumentError(absl::StrCat(
      "element-wise op ", static_cast<int>(op), " is not a unary op for this dtype"));
}

}  // namespace

// elementwise::kUnary: y = op(x).
absl::Status ElementwiseUnary(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(OpTensorDescriptorSettings op,
                        context.Descriptor<OpTensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings tensor,
                        context.Descriptor<TensorDescriptorSettings>(1));
  if (tensor.dtype != op.dtype) {
    return absl::InvalidArgumentError("the op-tensor and tensor descriptors disagree on dtype");
  }
  VGPU_ASSIGN_OR_RETURN(const int64_t count, DenseElementCount(tensor));
  if (op.op == ElementwiseOp::kLogicalNot) {
    if (op.dtype != DType::kBool) return absl::InvalidArgumentError("LogicalNot takes bool");
    return RunUnary<bool>(context, count, LogicalNot());
  }
  return DispatchNumeric(op.dtype, [&](auto zero) -> absl::Status {
    return RunUnaryOp<decltype(zero)>(context, op.op, count);
  });
}

}  // namespace vgpu::cpu_kernels
