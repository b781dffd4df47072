// TensorFlow op kernels of the element-wise family on the virtual GPU: binary arithmetic,
// comparisons and logical ops with numpy-style broadcasting, unary math, SelectV2, Cast, AddN,
// Fill, ZerosLike and OnesLike. Written as TensorFlow's cuDNN kernels are: per call, validate
// the inputs as TensorFlow's own kernels do (same messages), allocate the output, create and
// set an op-tensor descriptor and tensor descriptors for the operands (shapes merged by
// broadcast.h), launch, destroy (RAII). The data is only ever touched by the backend kernel.
//
// int32: TensorFlow registers host-memory int32 kernels for most of these ops on every device
// (DEVICE_DEFAULT); those keep working on the virtual GPU, so int32 is registered here only
// where TensorFlow has no such kernel and its GPU build keeps int32 in device memory (SelectV2,
// Cast).
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "plugin/kernels/broadcast.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/elementwise.h"

namespace vgpu {
namespace {

constexpr std::initializer_list<TF_DataType> kFloatingTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                                TF_DOUBLE};
constexpr std::initializer_list<TF_DataType> kFloatingAndInt64 = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                                   TF_DOUBLE, TF_INT64};
constexpr std::initializer_list<TF_DataType> kOrderedTypes = {TF_FLOAT, TF_HALF,  TF_BFLOAT16,
                                                               TF_DOUBLE, TF_INT64, TF_UINT8};
constexpr std::initializer_list<TF_DataType> kEquatableTypes = {
    TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE, TF_INT64, TF_UINT8, TF_BOOL};
// Fill/ZerosLike/OnesLike (int32 has TensorFlow's host-memory kernels).
constexpr std::initializer_list<TF_DataType> kFillTypes = {
    TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE, TF_INT64, TF_UINT8, TF_BOOL};
constexpr std::initializer_list<TF_DataType> kSelectTypes = {
    TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE, TF_INT32, TF_INT64, TF_UINT8, TF_BOOL};
constexpr std::initializer_list<TF_DataType> kCastTypes = {
    TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE, TF_INT32, TF_INT64, TF_UINT8, TF_BOOL};

constexpr bool IsComparison(ElementwiseOp op) {
  return op == ElementwiseOp::kEqual || op == ElementwiseOp::kNotEqual ||
         op == ElementwiseOp::kGreater || op == ElementwiseOp::kGreaterEqual ||
         op == ElementwiseOp::kLess || op == ElementwiseOp::kLessEqual;
}

// A flat [n] shape: kernels that need only the element count are described by it, so that
// tensors of any rank fit a descriptor.
std::vector<int64_t> FlatShape(const TF_Tensor* tensor) {
  return {TF_TensorElementCount(tensor)};
}

std::string TypeName(TF_DataType dtype) {
  switch (dtype) {
    case TF_FLOAT: return "float";
    case TF_DOUBLE: return "double";
    case TF_HALF: return "half";
    case TF_BFLOAT16: return "bfloat16";
    case TF_INT32: return "int32";
    case TF_INT64: return "int64";
    case TF_UINT8: return "uint8";
    case TF_BOOL: return "bool";
    default: return absl::StrCat("dtype ", static_cast<int>(dtype));
  }
}

// Makes `output` the op's output `index` without copying (TensorFlow's set_output).
absl::Status SetOutputTo(OpContext& context, int index, const TF_Tensor* tensor) {
  ScopedTfStatus status;
  TF_SetOutput(context.raw(), index, tensor, status.get());
  return status.ToStatus();
}

// Sets every element of `tensor` to `value` (cudnnSetTensor).
absl::Status LaunchSetTensor(KernelLaunch&& launch, const TF_Tensor* tensor, double value) {
  if (TF_TensorElementCount(tensor) == 0) return absl::OkStatus();
  return launch.DescribeTensor(TF_TensorType(tensor), FlatShape(tensor))
      .Buffer(tensor)
      .Param(value)
      .Run(elementwise::kSetTensor);
}

// Binary element-wise ops (AddV2, Mul, Equal, LogicalAnd, ...) with broadcasting.
template <ElementwiseOp kOp>
class BinaryElementwiseOp {
 public:
  static absl::StatusOr<std::unique_ptr<BinaryElementwiseOp>> Create(
      OpConstruction& construction) {
    auto kernel = std::make_unique<BinaryElementwiseOp>();
    if (construction.Has("incompatible_shape_error")) {
      VGPU_ASSIGN_OR_RETURN(kernel->incompatible_shape_error_,
                            construction.Bool("incompatible_shape_error"));
    }
    return kernel;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.Input(1));
    const TF_DataType dtype = TF_TensorType(x.get());
    if (TF_TensorType(y.get()) != dtype) {
      return absl::InvalidArgumentError(absl::StrCat("Expected tensor of type ", TypeName(dtype),
                                                     " but got type ",
                                                     TypeName(TF_TensorType(y.get()))));
    }
    const Shape x_shape = ShapeOf(x.get());
    const Shape y_shape = ShapeOf(y.get());
    const std::optional<BroadcastShapes> shapes = Broadcast({x_shape, y_shape});
    if (!shapes) {
      if constexpr (kOp == ElementwiseOp::kEqual || kOp == ElementwiseOp::kNotEqual) {
        if (!incompatible_shape_error_) {
          // TensorFlow's answer for shapes that cannot be compared: a scalar "not equal".
          VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.AllocateOutput(0, TF_BOOL, {}));
          return LaunchSetTensor(KernelLaunch(context), out.get(),
                                 kOp == ElementwiseOp::kNotEqual ? 1 : 0);
        }
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "Incompatible shapes: ", ShapeString(x_shape), " vs. ", ShapeString(y_shape)));
    }
    const TF_DataType out_dtype = IsComparison(kOp) ? TF_BOOL : dtype;
    VGPU_ASSIGN_OR_RETURN(TensorPtr out,
                          context.ForwardOrAllocateOutput({0, 1}, 0, out_dtype, shapes->output));
    if (TF_TensorElementCount(out.get()) == 0) return absl::OkStatus();
    if (shapes->merged_output.size() > static_cast<size_t>(kMaxRank)) {
      return absl::UnimplementedError(absl::StrCat("Broadcast between ", ShapeString(x_shape),
                                                   " and ", ShapeString(y_shape),
                                                   " is not supported yet."));
    }
    OpTensorDescriptorSettings op_settings;
    op_settings.op = kOp;
    VGPU_ASSIGN_OR_RETURN(op_settings.dtype, DTypeOf(dtype));
    return KernelLaunch(context)
        .Describe(op_settings)
        .DescribeTensor(dtype, shapes->merged_operands[0])
        .DescribeTensor(dtype, shapes->merged_operands[1])
        .DescribeTensor(out_dtype, shapes->merged_output)
        .Buffer(x.get())
        .Buffer(y.get())
        .Buffer(out.get())
        .Run(elementwise::kBinary);
  }

 private:
  bool incompatible_shape_error_ = true;
};

// Unary element-wise ops (Neg, Sqrt, Exp, LogicalNot, ...).
template <ElementwiseOp kOp>
class UnaryElementwiseOp : public NoAttributes<UnaryElementwiseOp<kOp>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y,
                          context.ForwardOrAllocateOutput({0}, 0, dtype, ShapeOf(x.get())));
    if (TF_TensorElementCount(x.get()) == 0) return absl::OkStatus();
    OpTensorDescriptorSettings op_settings;
    op_settings.op = kOp;
    VGPU_ASSIGN_OR_RETURN(op_settings.dtype, DTypeOf(dtype));
    return KernelLaunch(context)
        .Describe(op_settings)
        .DescribeTensor(dtype, FlatShape(x.get()))
        .Buffer(x.get())
        .Buffer(y.get())
        .Run(elementwise::kUnary);
  }
};

// SelectV2(condition, t, e): element-wise choice with broadcasting of all three.
class SelectV2Op : public NoAttributes<SelectV2Op> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr condition, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(TensorPtr then_tensor, context.Input(1));
    VGPU_ASSIGN_OR_RETURN(TensorPtr else_tensor, context.Input(2));
    const TF_DataType dtype = TF_TensorType(then_tensor.get());
    const Shape condition_shape = ShapeOf(condition.get());
    const Shape then_shape = ShapeOf(then_tensor.get());
    const Shape else_shape = ShapeOf(else_tensor.get());
    const std::optional<BroadcastShapes> shapes =
        Broadcast({condition_shape, then_shape, else_shape});
    if (!shapes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "condition ", ShapeString(condition_shape), ", then ", ShapeString(then_shape),
          ", and else ", ShapeString(else_shape), " must be broadcastable"));
    }
    VGPU_ASSIGN_OR_RETURN(TensorPtr out,
                          context.ForwardOrAllocateOutput({1, 2}, 0, dtype, shapes->output));
    if (TF_TensorElementCount(out.get()) == 0) return absl::OkStatus();
    if (shapes->merged_output.size() > static_cast<size_t>(kMaxRank)) {
      return absl::UnimplementedError(absl::StrCat("Broadcast between ",
                                                   ShapeString(condition_shape), " and ",
                                                   ShapeString(then_shape),
                                                   " is not supported yet."));
    }
    return KernelLaunch(context)
        .DescribeTensor(TF_BOOL, shapes->merged_operands[0])
        .DescribeTensor(dtype, shapes->merged_operands[1])
        .DescribeTensor(dtype, shapes->merged_operands[2])
        .DescribeTensor(dtype, shapes->merged_output)
        .Buffer(condition.get())
        .Buffer(then_tensor.get())
        .Buffer(else_tensor.get())
        .Buffer(out.get())
        .Run(elementwise::kSelect);
  }
};

// Cast(x) from SrcT to DstT; Truncate as TensorFlow's attribute.
class CastOp {
 public:
  static absl::StatusOr<std::unique_ptr<CastOp>> Create(OpConstruction& construction) {
    auto kernel = std::make_unique<CastOp>();
    VGPU_ASSIGN_OR_RETURN(kernel->source_, construction.Type("SrcT"));
    VGPU_ASSIGN_OR_RETURN(kernel->destination_, construction.Type("DstT"));
    if (construction.Has("Truncate")) {
      VGPU_ASSIGN_OR_RETURN(kernel->truncate_, construction.Bool("Truncate"));
    }
    return kernel;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    if (source_ == destination_) return SetOutputTo(context, 0, x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y,
                          context.AllocateOutput(0, destination_, ShapeOf(x.get())));
    if (TF_TensorElementCount(x.get()) == 0) return absl::OkStatus();
    return KernelLaunch(context)
        .DescribeTensor(source_, FlatShape(x.get()))
        .DescribeTensor(destination_, FlatShape(x.get()))
        .Buffer(x.get())
        .Buffer(y.get())
        .Param(static_cast<uint8_t>(truncate_ ? 1 : 0))
        .Run(elementwise::kCast);
  }

 private:
  TF_DataType source_ = TF_FLOAT;
  TF_DataType destination_ = TF_FLOAT;
  bool truncate_ = false;
};

// AddN(inputs): the sum of any number of same-shape tensors.
class AddNOp : public NoAttributes<AddNOp> {
 public:
  absl::Status Compute(OpContext& context) {
    const int count = context.num_inputs();
    std::vector<TensorPtr> inputs;
    inputs.reserve(count);
    for (int i = 0; i < count; ++i) {
      VGPU_ASSIGN_OR_RETURN(TensorPtr input, context.Input(i));
      inputs.push_back(std::move(input));
    }
    const Shape shape = ShapeOf(inputs[0].get());
    for (int i = 1; i < count; ++i) {
      const Shape other = ShapeOf(inputs[i].get());
      if (other != shape) {
        const TF_StringView name = TF_GetOpKernelName(context.raw());
        return absl::InvalidArgumentError(absl::StrCat(
            "Inputs to operation ", absl::string_view(name.data, name.len),
            " of type AddN must have the same size and shape.  Input 0: ", ShapeString(shape),
            " != input ", i, ": ", ShapeString(other)));
      }
    }
    if (count == 1) return SetOutputTo(context, 0, inputs[0].get());
    const TF_DataType dtype = TF_TensorType(inputs[0].get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.ForwardOrAllocateOutput({0}, 0, dtype, shape));
    if (TF_TensorElementCount(out.get()) == 0) return absl::OkStatus();
    KernelLaunch launch(context);
    launch.DescribeTensor(dtype, FlatShape(out.get()));
    for (const TensorPtr& input : inputs) launch.Buffer(input.get());
    return launch.Buffer(out.get()).Run(elementwise::kAddN);
  }
};

// Fill(dims, value): dims in host memory, value (one element) in device memory.
class FillOp : public NoAttributes<FillOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr dims_tensor, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(TensorPtr value, context.Input(1));
    const Shape dims_shape = ShapeOf(dims_tensor.get());
    if (dims_shape.size() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("dims must represent a vector, got shape ", ShapeString(dims_shape)));
    }
    const Shape value_shape = ShapeOf(value.get());
    if (!(value_shape.empty() || (value_shape.size() == 1 && value_shape[0] == 1))) {
      return absl::InvalidArgumentError(
          absl::StrCat("value must represent a scalar, got shape ", ShapeString(value_shape)));
    }
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> dims, context.HostIntegers(0));
    constexpr int64_t kMaxElements = std::numeric_limits<int64_t>::max();
    int64_t elements = 1;
    for (int64_t d : dims) {
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat("Dimension ", d, " must be >= 0"));
      if (d != 0 && elements > kMaxElements / d) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Shape ", ShapeString(dims), " would have more than 2**63 - 1 elements"));
      }
      elements *= d;
    }
    const TF_DataType dtype = TF_TensorType(value.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.AllocateOutput(0, dtype, dims));
    if (elements == 0) return absl::OkStatus();
    return KernelLaunch(context)
        .DescribeTensor(dtype, FlatShape(out.get()))
        .Buffer(value.get())
        .Buffer(out.get())
        .Run(elementwise::kFill);
  }
};

// ZerosLike(x) / OnesLike(x): a tensor of x's shape and dtype filled with kValue.
template <int kValue>
class ConstantLikeOp : public NoAttributes<ConstantLikeOp<kValue>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.ForwardOrAllocateOutput(
                                           {0}, 0, TF_TensorType(x.get()), ShapeOf(x.get())));
    if (TF_TensorElementCount(y.get()) == 0) return absl::OkStatus();
    return LaunchSetTensor(KernelLaunch(context), y.get(), kValue);
  }
};

template <ElementwiseOp kOp>
void RegisterBinary(const char* op_name, const char* device_type,
                    std::initializer_list<TF_DataType> dtypes) {
  RegisterKernelForTypes<BinaryElementwiseOp<kOp>>(op_name, device_type, "T", dtypes);
}

template <ElementwiseOp kOp>
void RegisterUnary(const char* op_name, const char* device_type,
                   std::initializer_list<TF_DataType> dtypes) {
  RegisterKernelForTypes<UnaryElementwiseOp<kOp>>(op_name, device_type, "T", dtypes);
}

}  // namespace

void RegisterElementwiseOps(const char* device_type) {
  using Op = ElementwiseOp;
  // Arithmetic.
  RegisterBinary<Op::kAdd>("AddV2", device_type, kFloatingAndInt64);
  RegisterBinary<Op::kAdd>("Add", device_type, kFloatingAndInt64);
  RegisterBinary<Op::kSub>("Sub", device_type, kFloatingAndInt64);
  RegisterBinary<Op::kMul>("Mul", device_type, kFloatingAndInt64);
  RegisterBinary<Op::kDiv>("RealDiv", device_type, kFloatingTypes);
  RegisterBinary<Op::kDiv>("Div", device_type, kFloatingAndInt64);
  RegisterBinary<Op::kDivNoNan>("DivNoNan", device_type, kFloatingTypes);
  RegisterBinary<Op::kMaximum>("Maximum", device_type, kFloatingAndInt64);
  RegisterBinary<Op::kMinimum>("Minimum", device_type, kFloatingAndInt64);
  RegisterBinary<Op::kPow>("Pow", device_type, kFloatingAndInt64);
  RegisterBinary<Op::kSquaredDifference>("SquaredDifference", device_type, kFloatingAndInt64);
  RegisterBinary<Op::kFloorDiv>("FloorDiv", device_type, kFloatingAndInt64);
  RegisterBinary<Op::kFloorMod>("FloorMod", device_type, kFloatingAndInt64);
  RegisterBinary<Op::kRsqrtGrad>("RsqrtGrad", device_type, kFloatingTypes);
  RegisterBinary<Op::kSqrtGrad>("SqrtGrad", device_type, kFloatingTypes);
  // Comparisons and logic.
  RegisterBinary<Op::kEqual>("Equal", device_type, kEquatableTypes);
  RegisterBinary<Op::kNotEqual>("NotEqual", device_type, kEquatableTypes);
  RegisterBinary<Op::kGreater>("Greater", device_type, kOrderedTypes);
  RegisterBinary<Op::kGreaterEqual>("GreaterEqual", device_type, kOrderedTypes);
  RegisterBinary<Op::kLess>("Less", device_type, kOrderedTypes);
  RegisterBinary<Op::kLessEqual>("LessEqual", device_type, kOrderedTypes);
  RegisterKernel<BinaryElementwiseOp<Op::kLogicalAnd>>("LogicalAnd", device_type, {});
  RegisterKernel<BinaryElementwiseOp<Op::kLogicalOr>>("LogicalOr", device_type, {});
  RegisterKernel<UnaryElementwiseOp<Op::kLogicalNot>>("LogicalNot", device_type, {});
  // Unary math.
  RegisterUnary<Op::kNeg>("Neg", device_type, kFloatingAndInt64);
  RegisterUnary<Op::kAbs>("Abs", device_type, kFloatingAndInt64);
  RegisterUnary<Op::kSquare>("Square", device_type, kFloatingAndInt64);
  RegisterUnary<Op::kSign>("Sign", device_type, kFloatingAndInt64);
  // Not int64: TensorFlow's CPU kernel returns 0 for every integer there (its half-to-even
  // formula evaluated in integers); leaving it to the CPU keeps results identical.
  RegisterUnary<Op::kRound>("Round", device_type, kFloatingTypes);
  RegisterUnary<Op::kSqrt>("Sqrt", device_type, kFloatingTypes);
  RegisterUnary<Op::kRsqrt>("Rsqrt", device_type, kFloatingTypes);
  RegisterUnary<Op::kExp>("Exp", device_type, kFloatingTypes);
  RegisterUnary<Op::kLog>("Log", device_type, kFloatingTypes);
  RegisterUnary<Op::kReciprocal>("Reciprocal", device_type, kFloatingTypes);
  RegisterUnary<Op::kReciprocal>("Inv", device_type, kFloatingTypes);
  RegisterUnary<Op::kFloor>("Floor", device_type, kFloatingTypes);
  RegisterUnary<Op::kCeil>("Ceil", device_type, kFloatingTypes);
  // Selection, conversion, sums and constants.
  RegisterKernelForTypes<SelectV2Op>("SelectV2", device_type, "T", kSelectTypes);
  for (TF_DataType source : kCastTypes) {
    for (TF_DataType destination : kCastTypes) {
      RegisterKernel<CastOp>("Cast", device_type, {{"SrcT", source}, {"DstT", destination}});
    }
  }
  RegisterKernelForTypes<AddNOp>("AddN", device_type, "T", kFloatingAndInt64);
  for (TF_DataType dtype : kFillTypes) {
    for (TF_DataType index_type : {TF_INT32, TF_INT64}) {
      RegisterKernel<FillOp>("Fill", device_type, {{"T", dtype}, {"index_type", index_type}},
                             {"dims"});
    }
  }
  RegisterKernelForTypes<ConstantLikeOp<0>>("ZerosLike", device_type, "T", kFillTypes);
  RegisterKernelForTypes<ConstantLikeOp<1>>("OnesLike", device_type, "T", kFillTypes);
}

}  // namespace vgpu
