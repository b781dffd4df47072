// The legacy optimizers' update ops on the virtual GPU: ResourceApplyGradientDescent,
// ResourceApplyMomentum and ResourceApplyAdam. Variables are looked up and locked with
// TensorFlow's C++ kernel API (variable_support.h); the arithmetic runs on the backing executor
// (protocol/kernels/training.h), in place, in stream order.
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/kernels/dtype_map.h"
#include "plugin/kernels/kernel_launch.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/kernels/variable_support.h"
#include "plugin/protocol/kernels/training.h"
#include "tensorflow/core/framework/types.h"

namespace vgpu {
namespace {

namespace tf = ::tensorflow;
using variables::BufferOf;
using variables::LockedVariables;

// How one optimizer's inputs are laid out: which inputs are variables (updated in place), which
// are scalars, and which is the gradient; the kernel's buffer order follows the op's inputs.
struct OptimizerSpec {
  KernelId kernel;
  std::initializer_list<int> variable_inputs;
  std::initializer_list<int> scalar_inputs;
  int gradient_input;
  int num_inputs;
};

class ApplyOptimizerOp : public tf::OpKernel {
 public:
  ApplyOptimizerOp(tf::OpKernelConstruction* context, const OptimizerSpec& spec)
      : tf::OpKernel(context), spec_(spec) {
    if (context->HasAttr("use_nesterov")) {
      OP_REQUIRES_OK(context, context->GetAttr("use_nesterov", &use_nesterov_));
    }
  }

  void Compute(tf::OpKernelContext* context) override {
    absl::Status status = Apply(context);
    if (!status.ok()) context->SetStatus(status);
  }

 private:
  absl::Status Apply(tf::OpKernelContext* context) {
    absl::StatusOr<std::unique_ptr<LockedVariables>> locked =
        LockedVariables::Acquire(context, spec_.variable_inputs);
    if (!locked.ok()) return locked.status();
    const tf::Tensor& var = *(*locked)->get(0)->tensor();
    const tf::Tensor& grad = context->input(spec_.gradient_input);
    size_t i = 0;
    for (int input : spec_.variable_inputs) {
      const tf::Tensor& tensor = *(*locked)->get(i++)->tensor();
      if (!var.shape().IsSameSize(tensor.shape())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "var and input ", input, " do not have the same shape", var.shape().DebugString(),
            " ", tensor.shape().DebugString()));
      }
    }
    if (!var.shape().IsSameSize(grad.shape())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "var and grad do not have the same shape", var.shape().DebugString(), " ",
          grad.shape().DebugString()));
    }
    for (int input : spec_.scalar_inputs) {
      if (!tf::TensorShapeUtils::IsScalar(context->input(input).shape())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input ", input, " is not a scalar: ", context->input(input).shape().DebugString()));
      }
    }
    std::optional<DType> dtype = ToDType(static_cast<TF_DataType>(var.dtype()));
    if (!dtype) return absl::InvalidArgumentError("unsupported dtype");
    absl::StatusOr<ClientStream*> stream = variables::StreamOf(context);
    if (!stream.ok()) return stream.status();
    for (size_t v = 0; v < spec_.variable_inputs.size(); ++v) {
      absl::Status prepared =
          variables::PrepareToUpdate(context, (*locked)->get(v), **stream);
      if (!prepared.ok()) return prepared;
    }
    if (var.NumElements() == 0) return absl::OkStatus();
    // Buffers in the op's input order; variables contribute their (possibly fresh) tensors.
    std::vector<BufferArg> buffers;
    for (int input = 0; input < spec_.num_inputs; ++input) {
      bool is_variable = false;
      size_t index = 0;
      for (int v : spec_.variable_inputs) {
        if (v == input) {
          is_variable = true;
          break;
        }
        ++index;
      }
      buffers.push_back(is_variable ? BufferOf(*(*locked)->get(index)->tensor())
                                    : BufferOf(context->input(input)));
    }
    training::UpdateParams params;
    params.dtype = *dtype;
    params.use_nesterov = use_nesterov_ ? 1 : 0;
    params.count = static_cast<uint64_t>(var.NumElements());
    return KernelLaunch(**stream).Buffers(buffers).Param(params).Run(spec_.kernel);
  }

  const OptimizerSpec& spec_;
  bool use_nesterov_ = false;
};

const OptimizerSpec kGradientDescent{training::kApplyGradientDescent, {0}, {1}, 2, 3};
const OptimizerSpec kMomentum{training::kApplyMomentum, {0, 1}, {2, 4}, 3, 5};
const OptimizerSpec kAdam{training::kApplyAdam, {0, 1, 2}, {3, 4, 5, 6, 7, 8}, 9, 10};

template <const OptimizerSpec* kSpec>
void Register(const char* op_name, const char* device_type, tf::DataType dtype) {
  // Registered at TF_InitKernel time (the device type is configurable); the registrar lives
  // for the process.
  new tf::kernel_factory::OpKernelRegistrar(
      tf::KernelDefBuilder(op_name)
          .Device(device_type)
          .HostMemory("var")
          .TypeConstraint("T", dtype)
          .Build(),
      absl::StrCat("Vgpu", op_name),
      [](tf::OpKernelConstruction* context) -> tf::OpKernel* {
        return new ApplyOptimizerOp(context, *kSpec);
      });
  const CatalogConstraint constraint{"T", static_cast<TF_DataType>(dtype)};
  const char* host_memory[] = {"var"};
  CatalogKernel(op_name, {&constraint, 1}, host_memory);
}

}  // namespace

void RegisterTrainingOps(const char* device_type) {
  for (tf::DataType dtype : {tf::DT_FLOAT, tf::DT_DOUBLE, tf::DT_HALF, tf::DT_BFLOAT16}) {
    Register<&kGradientDescent>("ResourceApplyGradientDescent", device_type, dtype);
    Register<&kMomentum>("ResourceApplyMomentum", device_type, dtype);
    Register<&kAdam>("ResourceApplyAdam", device_type, dtype);
  }
}

}  // namespace vgpu
