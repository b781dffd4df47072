// Comparisons (bool results) and logical ops of the op-tensor kernel (elementwise::kBinary) on
// the CPU backing executor. Floating comparisons follow IEEE rules (NaN compares unequal and
// unordered), as TensorFlow's CPU kernels do. The launch layer's reader has checked the
// operands (launch/elementwise_launch.h: bool for the logical ops).
//
// The comparisons have no packet form, so RunBinary runs them as plain loops
// (elementwise_binary.h), and -O2's "very cheap" vectorisation would leave loops that narrow a float comparison to a
// bool byte scalar (a dropout mask's GreaterEqual over 102400 floats took 0.2 ms). Set before
// any include, so that every function of this file, the header's templates included, has it.
// Comparisons reorder nothing.
#pragma GCC optimize("vect-cost-model=dynamic")
#define EIGEN_USE_THREADS
#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernels/elementwise_binary.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

template <typename T>
struct EqualTo {
  bool operator()(const T& a, const T& b) const { return a == b; }
};
template <typename T>
struct NotEqualTo {
  bool operator()(const T& a, const T& b) const { return a != b; }
};
template <typename T>
struct GreaterThan {
  bool operator()(const T& a, const T& b) const { return a > b; }
};
template <typename T>
struct GreaterOrEqual {
  bool operator()(const T& a, const T& b) const { return a >= b; }
};
template <typename T>
struct LessThan {
  bool operator()(const T& a, const T& b) const { return a < b; }
};
template <typename T>
struct LessOrEqual {
  bool operator()(const T& a, const T& b) const { return a <= b; }
};
struct LogicalAnd {
  bool operator()(bool a, bool b) const { return a && b; }
};
struct LogicalOr {
  bool operator()(bool a, bool b) const { return a || b; }
};

template <typename T>
absl::Status RunComparison(const KernelContext& context, ElementwiseOp op,
                           const BroadcastLayout<2>& layout) {
  switch (op) {
    case ElementwiseOp::kEqual: return RunBinary<T, bool>(context, layout, EqualTo<T>());
    case ElementwiseOp::kNotEqual: return RunBinary<T, bool>(context, layout, NotEqualTo<T>());
    case ElementwiseOp::kGreater: return RunBinary<T, bool>(context, layout, GreaterThan<T>());
    case ElementwiseOp::kGreaterEqual:
      return RunBinary<T, bool>(context, layout, GreaterOrEqual<T>());
    case ElementwiseOp::kLess: return RunBinary<T, bool>(context, layout, LessThan<T>());
    case ElementwiseOp::kLessEqual: return RunBinary<T, bool>(context, layout, LessOrEqual<T>());
    default: break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("element-wise op ", static_cast<int>(op), " is not a comparison"));
}

}  // namespace

absl::Status RunBinaryPredicate(const KernelContext& context, ElementwiseOp op, DType dtype,
                                const BroadcastLayout<2>& layout) {
  if (op == ElementwiseOp::kLogicalAnd) return RunBinary<bool, bool>(context, layout, LogicalAnd());
  if (op == ElementwiseOp::kLogicalOr) return RunBinary<bool, bool>(context, layout, LogicalOr());
  return Dispatch::All(dtype, [&](auto zero) -> absl::Status {
    return RunComparison<decltype(zero)>(context, op, layout);
  });
}

}  // namespace vgpu::cpu_kernels
