// The element-wise family's launch readers and op sets (see elementwise_launch.h).
#include "plugin/backend/launch/elementwise_launch.h"

#include "absl/strings/str_cat.h"
#include "plugin/backend/launch/dense_tensor.h"
#include "plugin/backend/launch/dtype_sets.h"
#include "plugin/backend/launch/reader_dispatch.h"
#include "plugin/common/status_macros.h"

namespace vgpu::elementwise_launch {

bool IsComparison(ElementwiseOp op) {
  switch (op) {
    case ElementwiseOp::kEqual: case ElementwiseOp::kNotEqual: case ElementwiseOp::kGreater:
    case ElementwiseOp::kGreaterEqual: case ElementwiseOp::kLess: case ElementwiseOp::kLessEqual:
      return true;
    default: return false;
  }
}

bool IsLogical(ElementwiseOp op) {
  return op == ElementwiseOp::kLogicalAnd || op == ElementwiseOp::kLogicalOr;
}

bool IsNumericArithmetic(ElementwiseOp op) {
  switch (op) {
    case ElementwiseOp::kAdd: case ElementwiseOp::kSub: case ElementwiseOp::kMul:
    case ElementwiseOp::kMaximum: case ElementwiseOp::kMinimum:
    case ElementwiseOp::kSquaredDifference: case ElementwiseOp::kDiv:
    case ElementwiseOp::kFloorDiv: case ElementwiseOp::kFloorMod: case ElementwiseOp::kPow:
      return true;
    default: return false;
  }
}

bool IsFloatingArithmetic(ElementwiseOp op) {
  switch (op) {
    case ElementwiseOp::kDivNoNan: case ElementwiseOp::kRsqrtGrad: case ElementwiseOp::kSqrtGrad:
    case ElementwiseOp::kReciprocalGrad: case ElementwiseOp::kAtan2: case ElementwiseOp::kXlogy:
    case ElementwiseOp::kXlog1py: case ElementwiseOp::kXdivy:
      return true;
    default: return false;
  }
}

namespace {

bool IsFloatingDType(DType dtype) {
  return ReaderDispatch::Floating(dtype, AcceptDType()).ok();
}

}  // namespace

bool ServesBinaryArithmetic(ElementwiseOp op, DType dtype) {
  return IsNumericArithmetic(op) || (IsFloatingDType(dtype) && IsFloatingArithmetic(op));
}

absl::Status UnservedBinaryArithmetic(ElementwiseOp op, DType dtype) {
  return absl::InvalidArgumentError(absl::StrCat("element-wise op ", static_cast<int>(op),
                                                 " is not a binary arithmetic op for dtype ",
                                                 static_cast<uint32_t>(dtype)));
}

bool IsUnaryPredicate(ElementwiseOp op) {
  return op == ElementwiseOp::kIsFinite || op == ElementwiseOp::kIsNan ||
         op == ElementwiseOp::kIsInf || op == ElementwiseOp::kSignBit;
}

bool ServesUnaryMath(ElementwiseOp op, DType dtype) {
  if (IsFloatingDType(dtype)) {
    const int value = static_cast<int>(op);
    return value >= static_cast<int>(ElementwiseOp::kNeg) &&
           value <= static_cast<int>(ElementwiseOp::kAtanh) && op != ElementwiseOp::kLogicalNot;
  }
  if (dtype == DType::kInt32 || dtype == DType::kInt64) {
    switch (op) {
      case ElementwiseOp::kNeg: case ElementwiseOp::kAbs: case ElementwiseOp::kSquare:
      case ElementwiseOp::kSign: case ElementwiseOp::kRound:
        return true;
      default: return false;
    }
  }
  return false;
}

absl::Status UnservedUnary(ElementwiseOp op) {
  return absl::InvalidArgumentError(absl::StrCat(
      "element-wise op ", static_cast<int>(op), " is not a unary op for this dtype"));
}

absl::StatusOr<BinaryLaunch> ReadBinaryLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(3));
  OpTensorDescriptorSettings op;
  TensorDescriptorSettings a, b, out;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&op, &a, &b, &out));
  if (a.dtype != op.dtype || b.dtype != op.dtype) {
    return absl::InvalidArgumentError("the operands' dtypes differ from the op-tensor's");
  }
  BinaryLaunch read;
  read.op = op.op;
  read.dtype = op.dtype;
  read.kind = IsLogical(op.op)      ? BinaryKind::kLogical
              : IsComparison(op.op) ? BinaryKind::kComparison
                                    : BinaryKind::kArithmetic;
  const bool predicate = read.kind != BinaryKind::kArithmetic;
  if (out.dtype != (predicate ? DType::kBool : op.dtype)) {
    return absl::InvalidArgumentError("the output descriptor has the wrong dtype for the op");
  }
  VGPU_ASSIGN_OR_RETURN(read.layout, MakeBroadcastLayout<2>(out, {a, b}));
  switch (read.kind) {
    case BinaryKind::kLogical:
      if (op.dtype != DType::kBool) {
        return absl::InvalidArgumentError("logical ops take bool operands");
      }
      break;
    case BinaryKind::kComparison:
      VGPU_RETURN_IF_ERROR(ReaderDispatch::All(op.dtype, AcceptDType()));
      break;
    case BinaryKind::kArithmetic:
      VGPU_RETURN_IF_ERROR(ReaderDispatch::Numeric(op.dtype, AcceptDType()));
      if (!ServesBinaryArithmetic(op.op, op.dtype)) {
        return UnservedBinaryArithmetic(op.op, op.dtype);
      }
      break;
  }
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffers(
      launch, op.dtype, {read.layout.input_counts[0], read.layout.input_counts[1]}));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 2, read.layout.output_count, out.dtype));
  return read;
}

absl::StatusOr<UnaryLaunch> ReadUnaryLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(2));
  OpTensorDescriptorSettings op;
  TensorDescriptorSettings tensor;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&op, &tensor));
  if (tensor.dtype != op.dtype) {
    return absl::InvalidArgumentError("the op-tensor and tensor descriptors disagree on dtype");
  }
  UnaryLaunch read;
  read.op = op.op;
  read.dtype = op.dtype;
  VGPU_ASSIGN_OR_RETURN(read.count, DenseElementCount(tensor));
  DType y_dtype = DType::kBool;
  if (op.op == ElementwiseOp::kLogicalNot) {
    if (op.dtype != DType::kBool) return absl::InvalidArgumentError("LogicalNot takes bool");
    read.kind = UnaryKind::kLogicalNot;
  } else if (IsUnaryPredicate(op.op)) {
    VGPU_RETURN_IF_ERROR(ReaderDispatch::Floating(op.dtype, AcceptDType()));
    read.kind = UnaryKind::kPredicate;
  } else {
    VGPU_RETURN_IF_ERROR(ReaderDispatch::Numeric(op.dtype, AcceptDType()));
    if (!ServesUnaryMath(op.op, op.dtype)) return UnservedUnary(op.op);
    read.kind = UnaryKind::kMath;
    y_dtype = op.dtype;
  }
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 0, read.count, op.dtype));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 1, read.count, y_dtype));
  return read;
}

absl::StatusOr<SelectLaunch> ReadSelectLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(4));
  TensorDescriptorSettings condition, then_tensor, else_tensor, out;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&condition, &then_tensor, &else_tensor, &out));
  if (condition.dtype != DType::kBool) {
    return absl::InvalidArgumentError("select's condition must be bool");
  }
  if (then_tensor.dtype != out.dtype || else_tensor.dtype != out.dtype) {
    return absl::InvalidArgumentError("select's then, else and output dtypes differ");
  }
  SelectLaunch read;
  read.dtype = out.dtype;
  VGPU_ASSIGN_OR_RETURN(read.layout,
                        MakeBroadcastLayout<3>(out, {condition, then_tensor, else_tensor}));
  VGPU_RETURN_IF_ERROR(ReaderDispatch::All(out.dtype, AcceptDType()));
  const BroadcastLayout<3>& layout = read.layout;
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 0, layout.input_counts[0], DType::kBool));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 1, layout.input_counts[1], out.dtype));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 2, layout.input_counts[2], out.dtype));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 3, layout.output_count, out.dtype));
  return read;
}

absl::StatusOr<CastLaunch> ReadCastLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(2));
  TensorDescriptorSettings source, destination;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&source, &destination));
  CastLaunch read;
  read.source = source.dtype;
  read.destination = destination.dtype;
  VGPU_ASSIGN_OR_RETURN(read.count, DenseElementCount(source));
  VGPU_ASSIGN_OR_RETURN(const int64_t destination_count, DenseElementCount(destination));
  if (read.count != destination_count) {
    return absl::InvalidArgumentError("cast source and destination differ in element count");
  }
  ParamReader params = launch.Params();
  VGPU_ASSIGN_OR_RETURN(const uint8_t truncate, params.Get<uint8_t>());
  read.truncate = truncate != 0;
  VGPU_RETURN_IF_ERROR(ReaderDispatch::All(source.dtype, AcceptDType()));
  VGPU_RETURN_IF_ERROR(ReaderDispatch::All(destination.dtype, AcceptDType()));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 0, read.count, source.dtype));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 1, read.count, destination.dtype));
  return read;
}

absl::StatusOr<AddNLaunch> ReadAddNLaunch(const LaunchView& launch) {
  if (launch.buffers.size() < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("add-n needs at least 2 inputs and an output, got ", launch.buffers.size(),
                     " buffers"));
  }
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings tensor,
                        launch.Descriptor<TensorDescriptorSettings>(0));
  AddNLaunch read;
  read.dtype = tensor.dtype;
  read.inputs = launch.buffers.size() - 1;
  read.first_group = read.inputs % 8;
  if (read.first_group == 0) read.first_group = 8;
  if (read.first_group == 1) read.first_group = 9;
  if (read.first_group > read.inputs) read.first_group = read.inputs;
  VGPU_ASSIGN_OR_RETURN(read.count, DenseElementCount(tensor));
  VGPU_RETURN_IF_ERROR(ReaderDispatch::Numeric(tensor.dtype, AcceptDType()));
  for (size_t i = 0; i <= read.inputs; ++i) {  // the inputs, then the output
    VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, i, read.count, tensor.dtype));
  }
  return read;
}

namespace {

// `buffers` buffers and descriptors [tensor] (the fill and set-tensor launches): the tensor,
// whose dtype and element count go into *read.
template <typename Launch>
absl::StatusOr<TensorDescriptorSettings> ReadOneTensor(const LaunchView& launch, size_t buffers,
                                                       Launch* read) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(buffers));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings tensor,
                        launch.Descriptor<TensorDescriptorSettings>(0));
  read->dtype = tensor.dtype;
  VGPU_ASSIGN_OR_RETURN(read->count, DenseElementCount(tensor));
  return tensor;
}

}  // namespace

absl::StatusOr<FillLaunch> ReadFillLaunch(const LaunchView& launch) {
  FillLaunch read;
  VGPU_ASSIGN_OR_RETURN(const TensorDescriptorSettings tensor, ReadOneTensor(launch, 2, &read));
  VGPU_RETURN_IF_ERROR(ReaderDispatch::All(tensor.dtype, AcceptDType()));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffers(launch, tensor.dtype, {1, read.count}));
  return read;
}

absl::StatusOr<SetTensorLaunch> ReadSetTensorLaunch(const LaunchView& launch) {
  SetTensorLaunch read;
  VGPU_ASSIGN_OR_RETURN(const TensorDescriptorSettings tensor, ReadOneTensor(launch, 1, &read));
  ParamReader params = launch.Params();
  VGPU_ASSIGN_OR_RETURN(read.value, params.Get<double>());
  VGPU_RETURN_IF_ERROR(ReaderDispatch::All(tensor.dtype, AcceptDType()));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 0, read.count, tensor.dtype));
  return read;
}

absl::StatusOr<RangeLaunch> ReadRangeLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(1));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings tensor,
                        launch.Descriptor<TensorDescriptorSettings>(0));
  if (tensor.rank != 1) return absl::InvalidArgumentError("range takes a rank-1 output");
  RangeLaunch read;
  read.dtype = tensor.dtype;
  VGPU_ASSIGN_OR_RETURN(read.count, DenseElementCount(tensor));
  ParamReader params = launch.Params();
  VGPU_ASSIGN_OR_RETURN(read.start_bits, params.Get<uint64_t>());
  VGPU_ASSIGN_OR_RETURN(read.delta_bits, params.Get<uint64_t>());
  if (tensor.dtype == DType::kUInt8) {
    return absl::InvalidArgumentError("range takes floating, int32 or int64 dtypes");
  }
  VGPU_RETURN_IF_ERROR(DispatchSigned<ReaderDispatch>(tensor.dtype, AcceptDType()));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 0, read.count, tensor.dtype));
  return read;
}

}  // namespace vgpu::elementwise_launch
