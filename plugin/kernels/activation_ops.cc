// TensorFlow op kernels of the activation family on the virtual GPU: Relu, Relu6, Sigmoid, Tanh,
// Elu, Selu, Softplus, Softsign, LeakyRelu and their gradients. Written as TensorFlow's cuDNN
// kernels are: per call, create and set an activation descriptor (mode, and the leaky relu's
// alpha as its coefficient, like cudnnSetActivationDescriptor's coef) and a tensor descriptor,
// launch, destroy (RAII). Inputs are validated as TensorFlow's kernels do, with their messages.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "plugin/kernels/broadcast.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/activation.h"

namespace vgpu {
namespace {

constexpr std::initializer_list<TF_DataType> kFloatingTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                                TF_DOUBLE};

// Launches `kernel` with an activation descriptor and a tensor descriptor of `shape_of` (the
// activation family's layout, protocol/kernels/activation.h).
absl::Status LaunchActivation(OpContext& context, KernelId kernel, ActivationMode mode,
                              double coef, const TF_Tensor* shape_of,
                              std::initializer_list<BufferArg> buffers) {
  ActivationDescriptorSettings activation_settings;
  activation_settings.mode = mode;
  activation_settings.coef = coef;
  VGPU_ASSIGN_OR_RETURN(activation_settings.dtype, DTypeOf(TF_TensorType(shape_of)));
  return KernelLaunch(context)
      .Describe(activation_settings)
      .DescribeTensor(shape_of)
      .Buffers(buffers)
      .Run(kernel);
}

// The activation's parameter: LeakyRelu's float attribute "alpha", 0 for the other modes.
template <ActivationMode kMode>
absl::StatusOr<double> CoefficientOf(OpConstruction& construction) {
  if (kMode != ActivationMode::kLeakyRelu) return 0.0;
  VGPU_ASSIGN_OR_RETURN(float alpha, construction.Float("alpha"));
  return static_cast<double>(alpha);
}

// The base of an activation kernel class K of `kMode`: its attributes_ are the coefficient.
template <typename K, ActivationMode kMode>
using ActivationKernel = WithAttributes<K, double, CoefficientOf<kMode>>;

template <ActivationMode kMode>
class ActivationOp : public ActivationKernel<ActivationOp<kMode>, kMode> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y,
                          context.ForwardHeldOrAllocateOutput({{0, &x}}, 0, dtype,
                                                              ShapeOf(x.get())));
    if (TF_TensorElementCount(x.get()) == 0) return absl::OkStatus();
    return LaunchActivation(context, activation::kForward, kMode, this->attributes_, x.get(),
                            {BufferOf(x.get()), BufferOf(y.get())});
  }
};

// How TensorFlow's kernel for a gradient op compares its two inputs.
enum class SizeCheck {
  kSameShape,         // BinaryElementWiseOp (ReluGrad, EluGrad, ...): identical shapes
  kSameElementCount,  // SimpleBinaryOp (SigmoidGrad, TanhGrad): equal element counts
};

// Inputs (a, b) in TensorFlow's order for the op (protocol/kernels/activation.h): (gradients,
// features or outputs) for the relu family, Elu, Selu, Softplus, Softsign; (y, dy) for
// Sigmoid/Tanh. The output has a's shape.
template <ActivationMode kMode, SizeCheck kCheck>
class ActivationGradOp : public ActivationKernel<ActivationGradOp<kMode, kCheck>, kMode> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [a, b] = inputs;
    const auto [a_shape, b_shape] = ShapesOf(inputs);
    if constexpr (kCheck == SizeCheck::kSameShape) {
      if (a_shape != b_shape) {
        const TF_StringView name = TF_GetOpKernelName(context.raw());
        const std::string node(name.data, name.len);
        return absl::InvalidArgumentError(absl::StrCat(
            "Inputs to operation ", node, " of type ", OpType(), " must have the same size and "
            "shape.  Input 0: ", ShapeString(a_shape), " != input 1: ", ShapeString(b_shape)));
      }
    } else {
      if (TF_TensorElementCount(a.get()) != TF_TensorElementCount(b.get())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "The two arguments to a cwise op must have same number of elements, got ",
            TF_TensorElementCount(a.get()), " and ", TF_TensorElementCount(b.get())));
      }
    }
    const TF_DataType dtype = TF_TensorType(a.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr out,
                          context.ForwardHeldOrAllocateOutput(
                              {{0, &inputs[0]}, {1, &inputs[1]}}, 0, dtype, a_shape));
    if (TF_TensorElementCount(a.get()) == 0) return absl::OkStatus();
    return LaunchActivation(context, activation::kBackward, kMode, this->attributes_, a.get(),
                            {BufferOf(a.get()), BufferOf(b.get()), BufferOf(out.get())});
  }

 private:
  static const char* OpType() {
    switch (kMode) {
      case ActivationMode::kRelu: return "ReluGrad";
      case ActivationMode::kRelu6: return "Relu6Grad";
      case ActivationMode::kElu: return "EluGrad";
      case ActivationMode::kSelu: return "SeluGrad";
      case ActivationMode::kSoftplus: return "SoftplusGrad";
      case ActivationMode::kSoftsign: return "SoftsignGrad";
      case ActivationMode::kLeakyRelu: return "LeakyReluGrad";
      default: return "an activation gradient";
    }
  }
};

// Relu of qint8, as TensorFlow's GPU kernel for it: the element count must be a multiple of 4
// (that kernel works on 4 bytes at a time; TensorFlow's CPU build has no qint8 Relu).
class ReluInt8Op {
 public:
  static absl::StatusOr<std::unique_ptr<ReluInt8Op>> Create(OpConstruction&) {
    return std::unique_ptr<ReluInt8Op>(new ReluInt8Op());
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    const int64_t count = TF_TensorElementCount(x.get());
    if (count % 4 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Tensor size must be a multiple of 4 for Relu<qint8>. Got ", count));
    }
    VGPU_ASSIGN_OR_RETURN(TensorPtr y,
                          context.ForwardOrAllocateOutput({0}, 0, TF_QINT8, ShapeOf(x.get())));
    if (count == 0) return absl::OkStatus();
    activation::ReluInt8Params params;
    params.count = count;
    return KernelLaunch(context)
        .Buffer(x.get())
        .Buffer(y.get())
        .Param(params)
        .Run(activation::kReluInt8);
  }
};

template <ActivationMode kMode>
void RegisterActivation(const char* op, const char* grad_op, const char* device_type,
                        const char* notes, const char* grad_notes) {
  constexpr SizeCheck kCheck =
      kMode == ActivationMode::kSigmoid || kMode == ActivationMode::kTanh
          ? SizeCheck::kSameElementCount
          : SizeCheck::kSameShape;
  RegisterKernelForTypes<ActivationOp<kMode>>(op, device_type, "T", kFloatingTypes);
  RegisterKernelForTypes<ActivationGradOp<kMode, kCheck>>(grad_op, device_type, "T",
                                                          kFloatingTypes);
  DocumentOp(op, "", notes);
  DocumentOp(grad_op, "", grad_notes);
}

}  // namespace

void RegisterActivationOps(const char* device_type) {
  using Mode = ActivationMode;
  RegisterActivation<Mode::kRelu>("Relu", "ReluGrad", device_type,
                                  "max(x, 0); NaN propagates. qint8 (TensorFlow's GPU kernel): the element count must be a multiple of 4.",
                                  "gradients where features > 0, else 0.");
  RegisterKernel<ReluInt8Op>("Relu", device_type, {{"T", TF_QINT8}});
  RegisterActivation<Mode::kRelu6>("Relu6", "Relu6Grad", device_type,
                                   "min(max(x, 0), 6); NaN propagates.",
                                   "gradients where 0 < features < 6, else 0.");
  RegisterActivation<Mode::kSigmoid>("Sigmoid", "SigmoidGrad", device_type,
                                     "1 / (1 + exp(-x)).",
                                     "dy * y * (1 - y); y and dy need equal element counts.");
  RegisterActivation<Mode::kTanh>("Tanh", "TanhGrad", device_type, "tanh(x).",
                                  "dy * (1 - y^2); y and dy need equal element counts.");
  RegisterActivation<Mode::kElu>("Elu", "EluGrad", device_type, "x < 0 ? exp(x) - 1 : x.",
                                 "From the Elu outputs: outputs < 0 ? gradients * (outputs + 1)"
                                 " : gradients.");
  RegisterActivation<Mode::kSelu>("Selu", "SeluGrad", device_type,
                                  "scale * (x < 0 ? alpha * (exp(x) - 1) : x) with SELU's "
                                  "constants.",
                                  "From the Selu outputs.");
  RegisterActivation<Mode::kSoftplus>("Softplus", "SoftplusGrad", device_type,
                                      "log(1 + exp(x)) with TensorFlow's thresholds for large "
                                      "and small x.",
                                      "gradients / (1 + exp(-features)).");
  RegisterActivation<Mode::kSoftsign>("Softsign", "SoftsignGrad", device_type, "x / (|x| + 1).",
                                      "gradients / (|features| + 1)^2.");
  RegisterActivation<Mode::kLeakyRelu>("LeakyRelu", "LeakyReluGrad", device_type,
                                       "x > 0 ? x : alpha * x (alpha: the activation "
                                       "descriptor's coefficient).",
                                       "features > 0 ? gradients : alpha * gradients.");
}

}  // namespace vgpu
