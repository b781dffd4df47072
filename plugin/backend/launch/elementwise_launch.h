// The element-wise family's launches (protocol/kernels/elementwise.h), read once for every
// executor: the op-tensor and tensor descriptors, parameters and buffer sizes, validated as a
// hostile client could send them, become a plain description of the work (the op, the dtype,
// the element counts, the broadcast layout). The op/dtype sets the family serves are stated
// here once; an executor's kernel only dispatches on the dtype, takes its typed buffers and
// computes. Every reader checks in the order the CPU executor's kernels always did, so that a
// launch with several faults reports the same one.
#ifndef VGPU_BACKEND_LAUNCH_ELEMENTWISE_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_ELEMENTWISE_LAUNCH_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/backend/launch/broadcast_layout.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernel_ids.h"

namespace vgpu::elementwise_launch {

// --- The op sets ------------------------------------------------------------------------------

// kEqual ... kLessEqual: any dtype in, bool out.
bool IsComparison(ElementwiseOp op);
// kLogicalAnd, kLogicalOr: bool in and out.
bool IsLogical(ElementwiseOp op);
// The binary arithmetic ops served for every numeric dtype (add, sub, mul, maximum, minimum,
// squared difference, div, floor div, floor mod, pow).
bool IsNumericArithmetic(ElementwiseOp op);
// The binary arithmetic ops served for the floating dtypes only (div-no-nan, the rsqrt, sqrt and
// reciprocal gradients, atan2, xlogy, xlog1py, xdivy).
bool IsFloatingArithmetic(ElementwiseOp op);
// Whether the binary arithmetic `op` is served for `dtype` (a numeric dtype).
bool ServesBinaryArithmetic(ElementwiseOp op, DType dtype);
// The error of a binary arithmetic op that is not served for `dtype`.
absl::Status UnservedBinaryArithmetic(ElementwiseOp op, DType dtype);
// The message of the InvalidArgument an integer kDiv, kFloorDiv or kFloorMod fails with when a
// divisor is 0 (found while computing, by either executor).
inline constexpr char kIntegerDivisionByZero[] = "Integer division by zero";

// kIsFinite, kIsNan, kIsInf: a floating x, a bool y.
bool IsUnaryPredicate(ElementwiseOp op);
// Whether the unary `op` (not kLogicalNot, not a predicate) is served for `dtype` (a numeric
// dtype): every op from kNeg to kAtanh for the floating dtypes, kNeg, kAbs, kSquare, kSign and
// kRound for int32 and int64, none for uint8.
bool ServesUnaryMath(ElementwiseOp op, DType dtype);
// The error of a unary op that is not served for the operand's dtype.
absl::Status UnservedUnary(ElementwiseOp op);

// --- The launches -----------------------------------------------------------------------------

// elementwise::kBinary: descriptors [op-tensor, a, b, out], buffers [a, b, out].
enum class BinaryKind {
  kArithmetic,  // out has the operands' dtype
  kComparison,  // out is bool
  kLogical,     // bool operands, bool out
};
struct BinaryLaunch {
  ElementwiseOp op = ElementwiseOp::kAdd;
  DType dtype = DType::kFloat32;  // the operands'
  BinaryKind kind = BinaryKind::kArithmetic;
  BroadcastLayout<2> layout;
};
absl::StatusOr<BinaryLaunch> ReadBinaryLaunch(const LaunchView& launch);

// elementwise::kUnary: descriptors [op-tensor, tensor], buffers [x, y].
enum class UnaryKind {
  kLogicalNot,  // bool x, bool y
  kPredicate,   // floating x, bool y
  kMath,        // y has x's dtype (ServesUnaryMath)
};
struct UnaryLaunch {
  ElementwiseOp op = ElementwiseOp::kNeg;
  DType dtype = DType::kFloat32;  // x's
  UnaryKind kind = UnaryKind::kMath;
  int64_t count = 0;
};
absl::StatusOr<UnaryLaunch> ReadUnaryLaunch(const LaunchView& launch);

// elementwise::kSelect: descriptors [condition, then, else, out], buffers likewise.
struct SelectLaunch {
  DType dtype = DType::kFloat32;  // then's, else's and out's (any dtype)
  BroadcastLayout<3> layout;      // inputs: condition, then, else
};
absl::StatusOr<SelectLaunch> ReadSelectLaunch(const LaunchView& launch);

// elementwise::kCast: descriptors [x, y], buffers [x, y], params uint8 truncate.
struct CastLaunch {
  DType source = DType::kFloat32, destination = DType::kFloat32;  // any dtypes
  int64_t count = 0;
  bool truncate = false;
};
absl::StatusOr<CastLaunch> ReadCastLaunch(const LaunchView& launch);

// elementwise::kAddN: descriptors [tensor], buffers [input 0, ..., input n-1, out], n >= 2.
// Summed in TensorFlow's AddN association: the first `first_group` inputs (2..9) left to
// right, then out += (the sum of the next 8, left to right) until all are added.
struct AddNLaunch {
  DType dtype = DType::kFloat32;  // numeric
  int64_t count = 0;              // elements of every buffer
  size_t inputs = 0;              // n; the output is buffer n
  size_t first_group = 0;         // n - first_group is a multiple of 8
};
absl::StatusOr<AddNLaunch> ReadAddNLaunch(const LaunchView& launch);

// elementwise::kFill: descriptors [tensor out], buffers [value (one element), out].
struct FillLaunch {
  DType dtype = DType::kFloat32;  // any dtype
  int64_t count = 0;
};
absl::StatusOr<FillLaunch> ReadFillLaunch(const LaunchView& launch);

// elementwise::kSetTensor: descriptors [tensor out], buffers [out], params float64 value.
struct SetTensorLaunch {
  DType dtype = DType::kFloat32;  // any dtype
  int64_t count = 0;
  double value = 0;  // converted to the dtype by the kernel
};
absl::StatusOr<SetTensorLaunch> ReadSetTensorLaunch(const LaunchView& launch);

// elementwise::kRange: descriptors [tensor out (rank 1)], buffers [out], params uint64 start,
// uint64 delta (the value's bytes of the dtype in the low bytes).
struct RangeLaunch {
  DType dtype = DType::kFloat32;  // floating, int32 or int64 (DispatchSigned)
  int64_t count = 0;
  uint64_t start_bits = 0, delta_bits = 0;
};
absl::StatusOr<RangeLaunch> ReadRangeLaunch(const LaunchView& launch);

}  // namespace vgpu::elementwise_launch

#endif  // VGPU_BACKEND_LAUNCH_ELEMENTWISE_LAUNCH_H_
