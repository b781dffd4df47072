// TensorFlow op kernels of the element-wise family on the virtual GPU: binary arithmetic,
// comparisons and logical ops with numpy-style broadcasting, the gradient helpers of unary ops,
// unary math (erf, expm1, trigonometric, ...), the IsFinite/IsNan/IsInf predicates, SelectV2 and
// Select, ClipByValue, Cast, Bitcast, AddN, Fill, Range, ZerosLike and OnesLike. Written as
// TensorFlow's cuDNN kernels are: per call, validate the inputs as TensorFlow's own kernels do
// (same messages), allocate the output, create and set an op-tensor descriptor and tensor
// descriptors for the operands (shapes merged by broadcast.h), launch, destroy (RAII). The data
// is only ever touched by the backend kernel.
//
// int32: TensorFlow registers host-memory int32 kernels for most of these ops on every device
// (DEVICE_DEFAULT); those keep working on the virtual GPU, so int32 is registered here only
// where TensorFlow has no such kernel: in device memory where its GPU build keeps int32 there
// (Select, Cast, Bitcast), in host memory for SelectV2 (SelectV2Op).
#include <algorithm>
#include <array>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "plugin/graph/fused_ops.h"
#include "plugin/kernels/broadcast.h"
#include "plugin/kernels/elementwise_launch.h"
#include "plugin/kernels/elementwise_variant_ops.h"
#include "plugin/kernels/op_catalog.h"
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
constexpr std::initializer_list<TF_DataType> kSelectTypesButInt32 = {
    TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE, TF_INT64, TF_UINT8, TF_BOOL};
constexpr std::initializer_list<TF_DataType> kCastTypes = {
    TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE, TF_INT32, TF_INT64, TF_UINT8, TF_BOOL};

// Bitcast reinterprets bytes without touching them: every numeric type its op allows.
constexpr std::initializer_list<TF_DataType> kBitcastTypes = {
    TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE, TF_INT8,   TF_INT16,
    TF_INT32, TF_INT64, TF_UINT8,   TF_UINT16, TF_UINT32, TF_UINT64};
// Range's Tidx: the floating dtypes and int64 compute on the device (int32 has TensorFlow's
// host-memory kernel).
constexpr std::initializer_list<TF_DataType> kRangeTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                             TF_DOUBLE, TF_INT64};

constexpr bool IsPredicate(ElementwiseOp op) {
  return op == ElementwiseOp::kIsFinite || op == ElementwiseOp::kIsNan ||
         op == ElementwiseOp::kIsInf || op == ElementwiseOp::kSignBit;
}

constexpr bool IsComparison(ElementwiseOp op) {
  return op == ElementwiseOp::kEqual || op == ElementwiseOp::kNotEqual ||
         op == ElementwiseOp::kGreater || op == ElementwiseOp::kGreaterEqual ||
         op == ElementwiseOp::kLess || op == ElementwiseOp::kLessEqual;
}

// A flat [n] shape: kernels that need only the element count are described by it, so that
// tensors of any rank fit a descriptor.
std::array<int64_t, 1> FlatShape(const TF_Tensor* tensor) {
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



// Launches elementwise::kSelect: out = condition ? then : else, with the shapes merged from
// (condition, then, else); the values are of `dtype`.
absl::Status LaunchSelect(OpContext& context, TF_DataType dtype, const BroadcastShapes& shapes,
                          const TF_Tensor* condition, const TF_Tensor* then_tensor,
                          const TF_Tensor* else_tensor, const TF_Tensor* out) {
  return KernelLaunch(context)
      .DescribeTensor(TF_BOOL, shapes.merged_operands[0])
      .DescribeTensor(dtype, shapes.merged_operands[1])
      .DescribeTensor(dtype, shapes.merged_operands[2])
      .DescribeTensor(dtype, shapes.merged_output)
      .Buffer(condition)
      .Buffer(then_tensor)
      .Buffer(else_tensor)
      .Buffer(out)
      .Run(elementwise::kSelect);
}

// Unimplemented "Broadcast between <a> and <b> is not supported yet." when the merged shapes
// have more dimensions than a descriptor holds.
absl::Status CheckMergedRank(const BroadcastShapes& shapes, absl::Span<const int64_t> a,
                             absl::Span<const int64_t> b) {
  if (shapes.merged_output.size() <= static_cast<size_t>(kMaxRank)) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat("Broadcast between ", ShapeString(a), " and ",
                                               ShapeString(b), " is not supported yet."));
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
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [x, y] = inputs;
    const TF_DataType dtype = TF_TensorType(x.get());
    if (TF_TensorType(y.get()) != dtype) {
      return absl::InvalidArgumentError(absl::StrCat("Expected tensor of type ", TypeName(dtype),
                                                     " but got type ",
                                                     TypeName(TF_TensorType(y.get()))));
    }
    const BroadcastDims x_shape = InlineShapeOf(x.get());
    const BroadcastDims y_shape = InlineShapeOf(y.get());
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
                          context.ForwardHeldOrAllocateOutput({{0, &inputs[0]}, {1, &inputs[1]}},
                                                              0, out_dtype, shapes->output));
    if (TF_TensorElementCount(out.get()) == 0) return absl::OkStatus();
    VGPU_RETURN_IF_ERROR(CheckMergedRank(*shapes, x_shape, y_shape));
    return LaunchBinary(context, kOp, dtype, shapes->merged_operands[0],
                        shapes->merged_operands[1], out_dtype, shapes->merged_output, x.get(),
                        y.get(), out.get());
  }

 private:
  bool incompatible_shape_error_ = true;
};

// Unary element-wise ops (Neg, Sqrt, Exp, LogicalNot, IsFinite, ...).
template <ElementwiseOp kOp>
class UnaryElementwiseOp : public NoAttributes<UnaryElementwiseOp<kOp>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    const TF_DataType dtype = TF_TensorType(x.get());
    const TF_DataType out_dtype = IsPredicate(kOp) ? TF_BOOL : dtype;
    VGPU_ASSIGN_OR_RETURN(TensorPtr y,
                          context.ForwardHeldOrAllocateOutput({{0, &x}}, 0, out_dtype,
                                                              InlineShapeOf(x.get())));
    const int64_t count = TF_TensorElementCount(x.get());
    if (count == 0) return absl::OkStatus();
    return LaunchUnary(context, kOp, dtype, count, x.get(), y.get());
  }
};

// Select(condition, t, e), TensorFlow's v1 select (tf.compat.v1.where, used by gradients such
// as ClipByValue's): a scalar condition picks one whole input, a vector condition picks rows of
// t and e (its length their first dimension), any other condition has their shape. Launched as
// kSelect with the condition's shape aligned to the leading dimensions.
class SelectOp : public NoAttributes<SelectOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<3>());
    const auto& [condition, then_tensor, else_tensor] = inputs;
    const auto [condition_shape, then_shape, else_shape] = ShapesOf(inputs);
    // The condition as the kernel sees it: aligned to the output's trailing dimensions.
    Shape described_condition = condition_shape;
    if (condition_shape.empty() || (condition_shape.size() == 1 && then_shape.size() != 1)) {
      if (!condition_shape.empty()) {
        if (then_shape.empty()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "'then' must be at least a vector, but saw shape: ", ShapeString(then_shape)));
        }
        if (then_shape[0] != condition_shape[0]) {
          return absl::InvalidArgumentError(absl::StrCat(
              "Number of batches of 'then' must match size of 'cond', but saw: ", then_shape[0],
              " vs. ", condition_shape[0]));
        }
        described_condition.resize(then_shape.size(), 1);  // [n, 1, ..., 1]
      }
      if (then_shape != else_shape) {
        return absl::InvalidArgumentError(absl::StrCat(
            "'then' and 'else' must have the same size.  but received: ",
            ShapeString(then_shape), " vs. ", ShapeString(else_shape)));
      }
    } else {
      for (const auto& [index, shape] : {std::pair{1, &then_shape}, std::pair{2, &else_shape}}) {
        if (*shape != condition_shape) {
          const TF_StringView name = TF_GetOpKernelName(context.raw());
          return absl::InvalidArgumentError(absl::StrCat(
              "Inputs to operation ", absl::string_view(name.data, name.len),
              " of type Select must have the same size and shape.  Input 0: ",
              ShapeString(condition_shape), " != input ", index, ": ", ShapeString(*shape)));
        }
      }
    }
    const TF_DataType dtype = TF_TensorType(then_tensor.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr out,
                          context.ForwardHeldOrAllocateOutput(
                              {{1, &inputs[1]}, {2, &inputs[2]}}, 0, dtype, then_shape));
    if (TF_TensorElementCount(out.get()) == 0) return absl::OkStatus();
    const std::optional<BroadcastShapes> shapes =
        Broadcast({described_condition, then_shape, else_shape});
    if (!shapes || shapes->merged_output.size() > static_cast<size_t>(kMaxRank)) {
      return absl::UnimplementedError(absl::StrCat("Select of shape ", ShapeString(then_shape),
                                                   " is not supported on the virtual GPU"));
    }
    return LaunchSelect(context, dtype, *shapes, condition.get(), then_tensor.get(),
                        else_tensor.get(), out.get());
  }
};

// The gradient helpers of unary ops (RsqrtGrad, SqrtGrad, ReciprocalGrad): TensorFlow's
// SimpleBinaryOp, element by element without broadcasting; the inputs need equal element
// counts and the output has input 0's shape.
template <ElementwiseOp kOp>
class SimpleBinaryOp : public NoAttributes<SimpleBinaryOp<kOp>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [a, b] = inputs;
    const int64_t count = TF_TensorElementCount(a.get());
    if (TF_TensorElementCount(b.get()) != count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "The two arguments to a cwise op must have same number of elements, got ", count,
          " and ", TF_TensorElementCount(b.get())));
    }
    const TF_DataType dtype = TF_TensorType(a.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr out,
                          context.ForwardOrAllocateOutput({0, 1}, 0, dtype, ShapeOf(a.get())));
    if (count == 0) return absl::OkStatus();
    const Shape flat = {count};
    return LaunchBinary(context, kOp, dtype, flat, flat, dtype, flat, a.get(), b.get(),
                        out.get());
  }
};

// ClipByValue(t, clip_value_min, clip_value_max): min(max(t, lo), hi) as TensorFlow computes it,
// t.cwiseMin(hi).cwiseMax(lo); each bound is a scalar or has t's shape. Two op-tensor launches
// (Minimum, then Maximum in place on the output).
class ClipByValueOp : public NoAttributes<ClipByValueOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<3>());
    const auto& [t, lo, hi] = inputs;
    const auto [t_shape, lo_shape, hi_shape] = ShapesOf(inputs);
    if (!((lo_shape == t_shape || lo_shape.empty()) && (hi_shape == t_shape || hi_shape.empty()))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "clip_value_min and clip_value_max must be either of the same shape as input, or a "
          "scalar. input shape: ", ShapeString(t_shape), "clip_value_min shape: ",
          ShapeString(lo_shape), "clip_value_max shape: ", ShapeString(hi_shape)));
    }
    const TF_DataType dtype = TF_TensorType(t.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.ForwardOrAllocateOutput({0}, 0, dtype, t_shape));
    const int64_t count = TF_TensorElementCount(t.get());
    if (count == 0) return absl::OkStatus();
    // Each bound is a scalar or has count elements.
    const Shape flat = {count};
    VGPU_RETURN_IF_ERROR(LaunchBinary(context, ElementwiseOp::kMinimum, dtype, flat,
                                      FlatShape(hi.get()), dtype, flat, t.get(), hi.get(),
                                      out.get()));
    return LaunchBinary(context, ElementwiseOp::kMaximum, dtype, flat, FlatShape(lo.get()), dtype,
                        flat, out.get(), lo.get(), out.get());
  }
};

// out = condition ? then : else over `shapes` (merged frame) of int32 values in host memory.
void SelectOnHost(const BroadcastShapes& shapes, const bool* condition, const int32_t* then_values,
                  const int32_t* else_values, int32_t* out) {
  const BroadcastDims& dims = shapes.merged_output;
  const int rank = static_cast<int>(dims.size());
  // Each operand's element stride along each merged dimension: 0 where it is broadcast.
  std::array<BroadcastDims, 3> strides;
  for (int k = 0; k < 3; ++k) {
    strides[k].assign(rank, 0);
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      if (shapes.merged_operands[k][d] != 1) strides[k][d] = stride;
      stride *= shapes.merged_operands[k][d];
    }
  }
  BroadcastDims index(rank, 0);
  std::array<int64_t, 3> offset = {0, 0, 0};
  const int64_t count = NumElements(dims);
  for (int64_t i = 0; i < count; ++i) {
    out[i] = condition[offset[0]] ? then_values[offset[1]] : else_values[offset[2]];
    for (int d = rank - 1; d >= 0; --d) {  // the next index, odometer-wise
      for (int k = 0; k < 3; ++k) offset[k] += strides[k][d];
      if (++index[d] < dims[d]) break;
      for (int k = 0; k < 3; ++k) offset[k] -= strides[k][d] * dims[d];
      index[d] = 0;
    }
  }
}

// SelectV2(condition, t, e): element-wise choice with broadcasting of all three. With kOnHost,
// of int32 with every input and the output in host memory, computed on the host: Keras' `take`
// (every Embedding) wraps negative indices as where(i < 0, i + n, i) with int32 ops TensorFlow
// runs on the host; a select on the device sent the indices down and up again mid-step.
template <bool kOnHost>
class SelectV2Op : public NoAttributes<SelectV2Op<kOnHost>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<3>());
    const auto& [condition, then_tensor, else_tensor] = inputs;
    const TF_DataType dtype = TF_TensorType(then_tensor.get());
    const BroadcastDims condition_shape = InlineShapeOf(condition.get());
    const BroadcastDims then_shape = InlineShapeOf(then_tensor.get());
    const BroadcastDims else_shape = InlineShapeOf(else_tensor.get());
    const std::optional<BroadcastShapes> shapes =
        Broadcast({condition_shape, then_shape, else_shape});
    if (!shapes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "condition ", ShapeString(condition_shape), ", then ", ShapeString(then_shape),
          ", and else ", ShapeString(else_shape), " must be broadcastable"));
    }
    if constexpr (kOnHost) {
      VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.AllocateOutput(0, dtype, shapes->output));
      if (TF_TensorElementCount(out.get()) == 0) return absl::OkStatus();
      SelectOnHost(*shapes, static_cast<const bool*>(TF_TensorData(condition.get())),
                   static_cast<const int32_t*>(TF_TensorData(then_tensor.get())),
                   static_cast<const int32_t*>(TF_TensorData(else_tensor.get())),
                   static_cast<int32_t*>(TF_TensorData(out.get())));
      return absl::OkStatus();
    }
    VGPU_ASSIGN_OR_RETURN(TensorPtr out,
                          context.ForwardHeldOrAllocateOutput(
                              {{1, &inputs[1]}, {2, &inputs[2]}}, 0, dtype, shapes->output));
    if (TF_TensorElementCount(out.get()) == 0) return absl::OkStatus();
    VGPU_RETURN_IF_ERROR(CheckMergedRank(*shapes, condition_shape, then_shape));
    return LaunchSelect(context, dtype, *shapes, condition.get(), then_tensor.get(),
                        else_tensor.get(), out.get());
  }
};

// Cast's attributes (SrcT, DstT, Truncate as TensorFlow's), and its launch from a device tensor
// `x` of SrcT into `y` of DstT, the same shape. Shared by Cast and _VgpuCastFromHost.
struct CastAttributes {
  TF_DataType source = TF_FLOAT;
  TF_DataType destination = TF_FLOAT;
  bool truncate = false;

  static absl::StatusOr<CastAttributes> Read(OpConstruction& construction) {
    CastAttributes attributes;
    VGPU_ASSIGN_OR_RETURN(attributes.source, construction.Type("SrcT"));
    VGPU_ASSIGN_OR_RETURN(attributes.destination, construction.Type("DstT"));
    if (construction.Has("Truncate")) {
      VGPU_ASSIGN_OR_RETURN(attributes.truncate, construction.Bool("Truncate"));
    }
    return attributes;
  }

  absl::Status Launch(OpContext& context, const TF_Tensor* x, const TF_Tensor* y) const {
    return KernelLaunch(context)
        .DescribeTensor(source, FlatShape(x))
        .DescribeTensor(destination, FlatShape(x))
        .Buffer(x)
        .Buffer(y)
        .Param(static_cast<uint8_t>(truncate ? 1 : 0))
        .Run(elementwise::kCast);
  }
};

// Cast(x) from SrcT to DstT.
class CastOp {
 public:
  static absl::StatusOr<std::unique_ptr<CastOp>> Create(OpConstruction& construction) {
    auto kernel = std::make_unique<CastOp>();
    VGPU_ASSIGN_OR_RETURN(kernel->cast_, CastAttributes::Read(construction));
    return kernel;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    if (cast_.source == cast_.destination) return context.SetOutput(0, x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y,
                          context.AllocateOutput(0, cast_.destination, ShapeOf(x.get())));
    if (TF_TensorElementCount(x.get()) == 0) return absl::OkStatus();
    return cast_.Launch(context, x.get(), y.get());
  }

 private:
  CastAttributes cast_;
};

// _VgpuCastFromHost(x): Cast of a host-memory input (fused_ops.h; the graph optimizer puts it in
// place of a Cast whose input is computed on the host, and, with SrcT = DstT, between a tensor
// made on the host and the device's readers of it). The input's bytes are copied onto
// the op's stream, held by a reference on the input tensor until the copy has run (nothing
// waits), and cast there by the same kernel as Cast, so the values are Cast's bit for bit.
class CastFromHostOp {
 public:
  static absl::StatusOr<std::unique_ptr<CastFromHostOp>> Create(OpConstruction& construction) {
    auto kernel = std::make_unique<CastFromHostOp>();
    VGPU_ASSIGN_OR_RETURN(kernel->cast_, CastAttributes::Read(construction));
    return kernel;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    const std::vector<int64_t> dims = ShapeOf(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, cast_.destination, dims));
    const size_t bytes = TF_TensorByteSize(x.get());
    if (bytes == 0) return absl::OkStatus();
    VGPU_ASSIGN_OR_RETURN(ClientStream * stream, context.Stream());
    TensorPtr on_device;
    if (cast_.source != cast_.destination) {
      VGPU_ASSIGN_OR_RETURN(on_device, context.AllocateTemp(cast_.source, dims));
    }
    const void* host_bytes = TF_TensorData(x.get());
    // The copy owns the input tensor (a reference on its buffer) until it has run.
    std::shared_ptr<const void> owner(host_bytes, [tensor = x.release()](const void*) {
      TF_DeleteTensor(tensor);
    });
    const TF_Tensor* copied_to = on_device != nullptr ? on_device.get() : y.get();
    VGPU_RETURN_IF_ERROR(stream->device().CopyHostToDevice(*stream, BufferOf(copied_to).address,
                                                           host_bytes, bytes, std::move(owner)));
    if (on_device == nullptr) return absl::OkStatus();
    return cast_.Launch(context, on_device.get(), y.get());
  }

 private:
  CastAttributes cast_;
};

// Bitcast(input) to `type`: the same bytes seen as another element type, as TensorFlow's kernel
// does it (the output shares the input's buffer; a last dimension is added when the new type
// is narrower, removed when it is wider). Nothing is launched.
class BitcastOp {
 public:
  static absl::StatusOr<std::unique_ptr<BitcastOp>> Create(OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(TF_DataType input, construction.Type("T"));
    VGPU_ASSIGN_OR_RETURN(TF_DataType output, construction.Type("type"));
    const size_t in_size = TF_DataTypeSize(input), out_size = TF_DataTypeSize(output);
    if (in_size == 0 || out_size == 0 ||
        std::max(in_size, out_size) % std::min(in_size, out_size) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("cannot convert between datatype ",
                                                     static_cast<int>(input), " and ",
                                                     static_cast<int>(output)));
    }
    return std::unique_ptr<BitcastOp>(new BitcastOp(input, output));
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    Shape dims = ShapeOf(x.get());
    const size_t in_size = TF_DataTypeSize(input_), out_size = TF_DataTypeSize(output_);
    if (out_size > in_size) {
      const int64_t ratio = static_cast<int64_t>(out_size / in_size);
      if (dims.empty() || dims.back() != ratio) {
        return absl::InvalidArgumentError(absl::StrCat("Cannot bitcast from ",
                                                       static_cast<int>(input_), " to ",
                                                       static_cast<int>(output_)));
      }
      dims.pop_back();
    } else if (out_size < in_size) {
      dims.push_back(static_cast<int64_t>(in_size / out_size));
    }
    return context.SetOutputView(0, x.get(), output_, dims);
  }

 private:
  BitcastOp(TF_DataType input, TF_DataType output) : input_(input), output_(output) {}
  TF_DataType input_;
  TF_DataType output_;
};

// AddN(inputs): the sum of any number of same-shape tensors.
class AddNOp : public NoAttributes<AddNOp> {
 public:
  absl::Status Compute(OpContext& context) {
    const int count = context.num_inputs();
    VGPU_ASSIGN_OR_RETURN(std::vector<TensorPtr> inputs, context.InputList(count));
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
    if (count == 1) return context.SetOutput(0, inputs[0].get());
    const TF_DataType dtype = TF_TensorType(inputs[0].get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr out,
                          context.ForwardHeldOrAllocateOutput({{0, &inputs[0]}}, 0, dtype, shape));
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
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [dims_tensor, value] = inputs;
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

// Range(start, limit, delta) of Tidx T: the scalars in host memory, validated and the length
// computed as TensorFlow's kernel does (in T's arithmetic); the values are written on the
// device by elementwise::kRange.
template <typename T>
class RangeOp : public NoAttributes<RangeOp<T>> {
 public:
  absl::Status Compute(OpContext& context) {
    T values[3];
    static const char* const kNames[3] = {"start", "limit", "delta"};
    for (int i = 0; i < 3; ++i) {
      VGPU_ASSIGN_OR_RETURN(TensorPtr input, context.Input(i));
      const Shape shape = ShapeOf(input.get());
      if (!(shape.empty() || (shape.size() == 1 && shape[0] == 1))) {
        return absl::InvalidArgumentError(
            absl::StrCat(kNames[i], " must be a scalar, not shape ", ShapeString(shape)));
      }
      std::memcpy(&values[i], TF_TensorData(input.get()), sizeof(T));
    }
    const T start = values[0], limit = values[1], delta = values[2];
    if (delta == T(0)) {
      return absl::InvalidArgumentError(absl::StrCat("Requires delta != 0: ", Print(delta)));
    }
    if (delta > T(0) && !(start <= limit)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Requires start <= limit when delta > 0: ", Print(start), "/", Print(limit)));
    }
    if (delta < T(0) && !(start >= limit)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Requires start >= limit when delta < 0: ", Print(start), "/", Print(limit)));
    }
    int64_t size = 0;
    if constexpr (std::is_integral_v<T>) {
      // |limit - start| and |delta| as unsigned values, which cannot overflow.
      using U = std::make_unsigned_t<T>;
      const U span = limit >= start ? U(U(limit) - U(start)) : U(U(start) - U(limit));
      const U step = delta > 0 ? U(delta) : U(U(0) - U(delta));
      size = static_cast<int64_t>(span / step + (span % step != 0 ? 1 : 0));
    } else {
      const double size_auto =
          ToDouble(Eigen::numext::ceil(Eigen::numext::abs(T((limit - start) / delta))));
      if (!(size_auto <= static_cast<double>(std::numeric_limits<int64_t>::max()))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Requires ((limit - start) / delta) <= ", std::numeric_limits<int64_t>::max()));
      }
      size = static_cast<int64_t>(size_auto);
    }
    const TF_DataType dtype = TF_ExpectedOutputDataType(context.raw(), 0);
    VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.AllocateOutput(0, dtype, {size}));
    if (size == 0) return absl::OkStatus();
    uint64_t start_bits = 0, delta_bits = 0;
    std::memcpy(&start_bits, &start, sizeof(T));
    std::memcpy(&delta_bits, &delta, sizeof(T));
    return KernelLaunch(context)
        .DescribeTensor(dtype, {size})
        .Buffer(out.get())
        .Param(start_bits)
        .Param(delta_bits)
        .Run(elementwise::kRange);
  }

 private:
  static double ToDouble(T value) {
    if constexpr (std::is_same_v<T, Eigen::half> || std::is_same_v<T, Eigen::bfloat16>) {
      return static_cast<double>(static_cast<float>(value));
    } else {
      return static_cast<double>(value);
    }
  }

  static std::string Print(T value) {
    if constexpr (std::is_integral_v<T>) {
      return absl::StrCat(value);
    } else {
      return absl::StrCat(ToDouble(value));
    }
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
                    std::initializer_list<TF_DataType> dtypes, const char* notes) {
  RegisterKernelForTypes<BinaryElementwiseOp<kOp>>(op_name, device_type, "T", dtypes);
  DocumentOp(op_name, "", notes);
}

template <ElementwiseOp kOp>
void RegisterSimpleBinary(const char* op_name, const char* device_type, const char* notes) {
  RegisterKernelForTypes<SimpleBinaryOp<kOp>>(op_name, device_type, "T", kFloatingTypes);
  DocumentOp(op_name, "", notes);
}

template <ElementwiseOp kOp>
void RegisterUnary(const char* op_name, const char* device_type,
                   std::initializer_list<TF_DataType> dtypes, const char* notes) {
  RegisterKernelForTypes<UnaryElementwiseOp<kOp>>(op_name, device_type, "T", dtypes);
  DocumentOp(op_name, "", notes);
}

constexpr char kBroadcasts[] = "Numpy-style broadcasting (rank <= 8 after merging dimensions).";
// Unary math computed with the Eigen functor TensorFlow's CPU kernel uses.
constexpr char kEigenFunctor[] = "Eigen's functor, as TensorFlow's CPU kernel.";

}  // namespace

// The launches of elementwise_launch.h.

absl::Status LaunchSetTensor(KernelLaunch&& launch, const TF_Tensor* tensor, double value) {
  if (TF_TensorElementCount(tensor) == 0) return absl::OkStatus();
  return launch.DescribeTensor(TF_TensorType(tensor), FlatShape(tensor))
      .Buffer(tensor)
      .Param(value)
      .Run(elementwise::kSetTensor);
}

absl::Status LaunchUnary(OpContext& context, ElementwiseOp op, TF_DataType dtype, int64_t count,
                         const TF_Tensor* x, const TF_Tensor* out) {
  OpTensorDescriptorSettings op_settings;
  op_settings.op = op;
  VGPU_ASSIGN_OR_RETURN(op_settings.dtype, DTypeOf(dtype));
  const std::array<int64_t, 1> flat = {count};
  return KernelLaunch(context)
      .Describe(op_settings)
      .DescribeTensor(dtype, flat)
      .Buffer(x)
      .Buffer(out)
      .Run(elementwise::kUnary);
}

absl::Status LaunchBinary(OpContext& context, ElementwiseOp op, TF_DataType dtype,
                          absl::Span<const int64_t> a_shape, absl::Span<const int64_t> b_shape,
                          TF_DataType out_dtype, absl::Span<const int64_t> out_shape,
                          const TF_Tensor* a, const TF_Tensor* b, const TF_Tensor* out) {
  OpTensorDescriptorSettings op_settings;
  op_settings.op = op;
  VGPU_ASSIGN_OR_RETURN(op_settings.dtype, DTypeOf(dtype));
  return KernelLaunch(context)
      .Describe(op_settings)
      .DescribeTensor(dtype, a_shape)
      .DescribeTensor(dtype, b_shape)
      .DescribeTensor(out_dtype, out_shape)
      .Buffer(a)
      .Buffer(b)
      .Buffer(out)
      .Run(elementwise::kBinary);
}

void RegisterElementwiseOps(const char* device_type) {
  using Op = ElementwiseOp;
  // Arithmetic.
  RegisterBinary<Op::kAdd>("AddV2", device_type, kFloatingAndInt64, kBroadcasts);
  RegisterBinary<Op::kAdd>("Add", device_type, kFloatingAndInt64, kBroadcasts);
  RegisterBinary<Op::kSub>("Sub", device_type, kFloatingAndInt64, kBroadcasts);
  RegisterBinary<Op::kMul>("Mul", device_type, kFloatingAndInt64, kBroadcasts);
  RegisterBinary<Op::kDiv>("RealDiv", device_type, kFloatingTypes, kBroadcasts);
  RegisterBinary<Op::kDiv>("Div", device_type, kFloatingAndInt64,
                           "Broadcasts. Integer division by zero fails the stream "
                           "(InvalidArgument at the next synchronisation).");
  RegisterBinary<Op::kDivNoNan>("DivNoNan", device_type, kFloatingTypes,
                                "0 wherever the divisor is 0. Broadcasts.");
  RegisterBinary<Op::kMaximum>("Maximum", device_type, kFloatingAndInt64,
                               "NaN propagates. Broadcasts.");
  RegisterBinary<Op::kMinimum>("Minimum", device_type, kFloatingAndInt64,
                               "NaN propagates. Broadcasts.");
  RegisterBinary<Op::kPow>("Pow", device_type, kFloatingAndInt64,
                           "Broadcasts. An int64 to a negative power is 0 (+-1 for a base of +-1), as TensorFlow's CUDA kernel gives; its CPU kernel raises.");
  RegisterBinary<Op::kSquaredDifference>("SquaredDifference", device_type, kFloatingAndInt64,
                                         kBroadcasts);
  RegisterBinary<Op::kFloorDiv>("FloorDiv", device_type, kFloatingAndInt64,
                                "Broadcasts. Integer division by zero fails the stream.");
  RegisterBinary<Op::kFloorMod>("FloorMod", device_type, kFloatingAndInt64,
                                "Broadcasts. Integer division by zero fails the stream.");
  RegisterBinary<Op::kAtan2>("Atan2", device_type, kFloatingTypes, kBroadcasts);
  RegisterBinary<Op::kXlogy>("Xlogy", device_type, kFloatingTypes,
                             "x * log(y), 0 where x == 0. Broadcasts.");
  RegisterBinary<Op::kXlog1py>("Xlog1py", device_type, kFloatingTypes,
                               "x * log1p(y), 0 where x == 0. Broadcasts.");
  RegisterBinary<Op::kXdivy>("Xdivy", device_type, kFloatingTypes,
                             "x / y, 0 where x == 0. Broadcasts.");
  // Gradients of unary ops: (y, dy), equal element counts, no broadcasting.
  RegisterSimpleBinary<Op::kRsqrtGrad>("RsqrtGrad", device_type, "-0.5 * dy * y^3.");
  RegisterSimpleBinary<Op::kSqrtGrad>("SqrtGrad", device_type, "0.5 * dy / y.");
  RegisterSimpleBinary<Op::kReciprocalGrad>("ReciprocalGrad", device_type, "-dy * y^2.");
  RegisterSimpleBinary<Op::kReciprocalGrad>("InvGrad", device_type, "-dy * y^2.");
  // Comparisons and logic.
  RegisterBinary<Op::kEqual>("Equal", device_type, kEquatableTypes,
                             "Broadcasts; incompatible_shape_error=False gives a scalar false.");
  RegisterBinary<Op::kNotEqual>("NotEqual", device_type, kEquatableTypes,
                                "Broadcasts; incompatible_shape_error=False gives a scalar true.");
  RegisterBinary<Op::kGreater>("Greater", device_type, kOrderedTypes, kBroadcasts);
  RegisterBinary<Op::kGreaterEqual>("GreaterEqual", device_type, kOrderedTypes, kBroadcasts);
  RegisterBinary<Op::kLess>("Less", device_type, kOrderedTypes, kBroadcasts);
  RegisterBinary<Op::kLessEqual>("LessEqual", device_type, kOrderedTypes, kBroadcasts);
  RegisterKernel<BinaryElementwiseOp<Op::kLogicalAnd>>("LogicalAnd", device_type, {});
  RegisterKernel<BinaryElementwiseOp<Op::kLogicalOr>>("LogicalOr", device_type, {});
  RegisterKernel<UnaryElementwiseOp<Op::kLogicalNot>>("LogicalNot", device_type, {});
  DocumentOp("LogicalAnd", "", kBroadcasts);
  DocumentOp("LogicalOr", "", kBroadcasts);
  DocumentOp("LogicalNot", "", "bool.");
  // Unary math.
  RegisterUnary<Op::kNeg>("Neg", device_type, kFloatingAndInt64, "Integers wrap.");
  RegisterUnary<Op::kAbs>("Abs", device_type, kFloatingAndInt64, "Integers wrap.");
  RegisterUnary<Op::kSquare>("Square", device_type, kFloatingAndInt64, "Integers wrap.");
  RegisterUnary<Op::kSign>("Sign", device_type, kFloatingAndInt64, kEigenFunctor);
  // Not int64: TensorFlow's CPU kernel returns 0 for every integer there (its half-to-even
  // formula evaluated in integers); leaving it to the CPU keeps results identical.
  RegisterUnary<Op::kRound>("Round", device_type, kFloatingTypes, "Half to even.");
  RegisterUnary<Op::kSqrt>("Sqrt", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kRsqrt>("Rsqrt", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kExp>("Exp", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kExpm1>("Expm1", device_type, kFloatingTypes, "exp(x) - 1.");
  RegisterUnary<Op::kLog>("Log", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kLog1p>("Log1p", device_type, kFloatingTypes, "log(1 + x).");
  RegisterUnary<Op::kReciprocal>("Reciprocal", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kReciprocal>("Inv", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kFloor>("Floor", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kCeil>("Ceil", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kErf>("Erf", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kErfc>("Erfc", device_type, kFloatingTypes, "1 - erf(x) (exact GELU).");
  RegisterUnary<Op::kSin>("Sin", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kCos>("Cos", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kTan>("Tan", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kAsin>("Asin", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kAcos>("Acos", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kAtan>("Atan", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kSinh>("Sinh", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kCosh>("Cosh", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kAsinh>("Asinh", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kAcosh>("Acosh", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kAtanh>("Atanh", device_type, kFloatingTypes, kEigenFunctor);
  RegisterUnary<Op::kIsFinite>("IsFinite", device_type, kFloatingTypes,
                               "bool output (mixed precision's loss scaling).");
  RegisterUnary<Op::kIsNan>("IsNan", device_type, kFloatingTypes, "bool output.");
  RegisterUnary<Op::kIsInf>("IsInf", device_type, kFloatingTypes, "bool output.");
  RegisterUnary<Op::kSignBit>(fused_ops::kSignBit, device_type, kFloatingTypes,
                              "bool output: the sign bit (the graph optimizer's rewrite of "
                              "Keras' signbit).");
  // Selection, clipping, conversion, sums, sequences and constants.
  RegisterKernelForTypes<SelectV2Op<false>>("SelectV2", device_type, "T", kSelectTypesButInt32);
  RegisterKernel<SelectV2Op<true>>("SelectV2", device_type, {{"T", TF_INT32}},
                                   {"condition", "t", "e", "output"});
  DocumentOp("SelectV2", "",
             "Broadcasts condition, then and else. int32 (indices, shapes) in host memory, "
             "computed on the host.");
  RegisterKernelForTypes<SelectOp>("Select", device_type, "T", kSelectTypes);
  DocumentOp("Select", "", "v1 select: scalar, row-vector or same-shape condition.");
  RegisterKernelForTypes<ClipByValueOp>("ClipByValue", device_type, "T", kFloatingAndInt64);
  DocumentOp("ClipByValue", "", "Bounds are scalars or have the input's shape.");
  for (TF_DataType source : kCastTypes) {
    for (TF_DataType destination : kCastTypes) {
      RegisterKernel<CastOp>("Cast", device_type, {{"SrcT", source}, {"DstT", destination}});
    }
  }
  DocumentOp("Cast", "", "TensorFlow's CPU conversions, Truncate included.");
  for (TF_DataType source : kCastTypes) {
    for (TF_DataType destination : kCastTypes) {
      RegisterKernel<CastFromHostOp>(fused_ops::kCastFromHost, device_type,
                                     {{"SrcT", source}, {"DstT", destination}}, {"x"});
    }
  }
  DocumentOp(fused_ops::kCastFromHost, "",
             "Cast (or, SrcT = DstT, copy) of a tensor in host memory for the device (the graph "
             "optimizer's rewrite).");
  for (TF_DataType source : kBitcastTypes) {
    for (TF_DataType destination : kBitcastTypes) {
      RegisterKernel<BitcastOp>("Bitcast", device_type, {{"T", source}, {"type", destination}});
    }
  }
  DocumentOp("Bitcast", "", "Shares the input's buffer; nothing is launched.");
  RegisterKernelForTypes<AddNOp>("AddN", device_type, "T", kFloatingAndInt64);
  DocumentOp("AddN", "", "Summed in TensorFlow's CPU order.");
  for (TF_DataType dtype : kFillTypes) {
    for (TF_DataType index_type : {TF_INT32, TF_INT64}) {
      RegisterKernel<FillOp>("Fill", device_type, {{"T", dtype}, {"index_type", index_type}},
                             {"dims"});
    }
  }
  DocumentOp("Fill", "", "dims in host memory; the value stays in device memory.");
  RegisterKernel<RangeOp<float>>("Range", device_type, {{"Tidx", TF_FLOAT}},
                                 {"start", "limit", "delta"});
  RegisterKernel<RangeOp<double>>("Range", device_type, {{"Tidx", TF_DOUBLE}},
                                  {"start", "limit", "delta"});
  RegisterKernel<RangeOp<Eigen::half>>("Range", device_type, {{"Tidx", TF_HALF}},
                                       {"start", "limit", "delta"});
  RegisterKernel<RangeOp<Eigen::bfloat16>>("Range", device_type, {{"Tidx", TF_BFLOAT16}},
                                           {"start", "limit", "delta"});
  RegisterKernel<RangeOp<int64_t>>("Range", device_type, {{"Tidx", TF_INT64}},
                                   {"start", "limit", "delta"});
  DocumentOp("Range", "",
             "start + i * delta in Tidx's arithmetic; int32 uses TensorFlow's host kernel.");
  // int32 too: TensorFlow's DEVICE_DEFAULT int32 kernels keep only the output in host memory
  // and would forward a device-memory input as that output, then write it on the host.
  RegisterKernelForTypes<ConstantLikeOp<0>>("ZerosLike", device_type, "T", kFillTypes);
  RegisterKernel<ConstantLikeOp<0>>("ZerosLike", device_type, {{"T", TF_INT32}});
  RegisterVariantZerosLike(device_type);
  DocumentOp("ZerosLike", "", "Also int32 in device memory, and DT_VARIANT TensorLists "
             "(while-loop gradients).");
  RegisterKernelForTypes<ConstantLikeOp<1>>("OnesLike", device_type, "T", kFillTypes);
  RegisterKernel<ConstantLikeOp<1>>("OnesLike", device_type, {{"T", TF_INT32}});
  DocumentOp("OnesLike", "", "Also int32 in device memory.");
}

}  // namespace vgpu
