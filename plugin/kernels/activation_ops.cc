// TensorFlow op kernels of the activation family on the virtual GPU: Relu, Relu6, Sigmoid, Tanh
// and their gradients. Written as TensorFlow's cuDNN kernels are: per call, create and set an
// activation descriptor and a tensor descriptor, launch, destroy (RAII).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
                              const TF_Tensor* shape_of, std::initializer_list<BufferArg> buffers) {
  ActivationDescriptorSettings activation_settings;
  activation_settings.mode = mode;
  VGPU_ASSIGN_OR_RETURN(activation_settings.dtype, DTypeOf(TF_TensorType(shape_of)));
  return KernelLaunch(context)
      .Describe(activation_settings)
      .DescribeTensor(shape_of)
      .Buffers(buffers)
      .Run(kernel);
}

template <ActivationMode kMode>
class ActivationOp : public NoAttributes<ActivationOp<kMode>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    std::vector<int64_t> dims = ShapeOf(x.get());
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.ForwardOrAllocateOutput({0}, 0, dtype, dims));
    if (TF_TensorElementCount(x.get()) == 0) return absl::OkStatus();
    return LaunchActivation(context, activation::kForward, kMode, x.get(),
                            {BufferOf(x.get()), BufferOf(y.get())});
  }
};

// Inputs (a, b) in TensorFlow's order for the op: (gradients, features) for Relu/Relu6,
// (y, dy) for Sigmoid/Tanh.
template <ActivationMode kMode>
class ActivationGradOp : public NoAttributes<ActivationGradOp<kMode>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr a, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(TensorPtr b, context.Input(1));
    std::vector<int64_t> dims = ShapeOf(a.get());
    if (dims != ShapeOf(b.get())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the two inputs of an activation gradient must have the same shape, got [",
          absl::StrJoin(dims, ","), "] and [", absl::StrJoin(ShapeOf(b.get()), ","), "]"));
    }
    const TF_DataType dtype = TF_TensorType(a.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.ForwardOrAllocateOutput({0, 1}, 0, dtype, dims));
    if (TF_TensorElementCount(a.get()) == 0) return absl::OkStatus();
    return LaunchActivation(context, activation::kBackward, kMode, a.get(),
                            {BufferOf(a.get()), BufferOf(b.get()), BufferOf(out.get())});
  }
};

}  // namespace

void RegisterActivationOps(const char* device_type) {
  RegisterKernelForTypes<ActivationOp<ActivationMode::kRelu>>("Relu", device_type, "T",
                                                              kFloatingTypes);
  RegisterKernelForTypes<ActivationOp<ActivationMode::kRelu6>>("Relu6", device_type, "T",
                                                               kFloatingTypes);
  RegisterKernelForTypes<ActivationOp<ActivationMode::kSigmoid>>("Sigmoid", device_type, "T",
                                                                 kFloatingTypes);
  RegisterKernelForTypes<ActivationOp<ActivationMode::kTanh>>("Tanh", device_type, "T",
                                                              kFloatingTypes);
  RegisterKernelForTypes<ActivationGradOp<ActivationMode::kRelu>>("ReluGrad", device_type, "T",
                                                                  kFloatingTypes);
  RegisterKernelForTypes<ActivationGradOp<ActivationMode::kRelu6>>("Relu6Grad", device_type,
                                                                   "T", kFloatingTypes);
  RegisterKernelForTypes<ActivationGradOp<ActivationMode::kSigmoid>>(
      "SigmoidGrad", device_type, "T", kFloatingTypes);
  RegisterKernelForTypes<ActivationGradOp<ActivationMode::kTanh>>("TanhGrad", device_type, "T",
                                                                  kFloatingTypes);
}

}  // namespace vgpu
