// The optimizers' update ops on the virtual GPU: every ResourceApply* op TensorFlow's GPU build
// registers (and ResourceApplyProximalGradientDescent, CPU-only there), the ResourceSparseApply*
// ops it registers for the GPU (Adagrad, AdagradV2, ProximalAdagrad, Ftrl, FtrlV2,
// KerasMomentum), and the sparse updates it only has for the CPU (Momentum, Adadelta, RMSProp,
// CenteredRMSProp, ProximalGradientDescent), with which the legacy optimizers cannot apply
// IndexedSlices gradients to GPU variables in TensorFlow's own GPU build. Variables are looked up and locked with TensorFlow's C++ kernel API
// (variable_support.h); the arithmetic runs on the backing executor in place, in stream order
// (protocol/kernels/training.h).
//
// One table describes every op: its inputs in order (variables, scalar hyper-parameters with
// TensorFlow's "is not a scalar" message for each, the gradient, the indices of a sparse
// update) and its kernel. The validation follows TensorFlow's ops: scalars, equal variable
// shapes, the gradient's shape (sparse: one gradient row per index), all before anything is
// enqueued. Hyper-parameters stay on the device, so their values are not range-checked (as on
// TensorFlow's GPU kernels).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/common/status_macros.h"
#include "plugin/graph/fused_ops.h"
#include "plugin/kernels/dtype_map.h"
#include "plugin/kernels/kernel_launch.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/kernels/status_op_kernel.h"
#include "plugin/kernels/variable_support.h"
#include "plugin/protocol/kernels/training.h"
#include "tensorflow/core/framework/types.h"

namespace vgpu {
namespace {

namespace tf = ::tensorflow;
using variables::BufferOf;
using variables::LockedVariables;

enum class Arg { kVariable, kScalar, kGradient, kIndices };

// One input of an optimizer op: what it is, its name in the op definition and, for a scalar,
// the start of TensorFlow's message when it is not one.
struct ArgSpec {
  Arg kind;
  const char* name;
  const char* not_scalar = nullptr;
};

ArgSpec Variable(const char* name) { return {Arg::kVariable, name}; }
ArgSpec Scalar(const char* name, const char* not_scalar) {
  return {Arg::kScalar, name, not_scalar};
}
ArgSpec Gradient(const char* name = "grad") { return {Arg::kGradient, name}; }
ArgSpec Indices() { return {Arg::kIndices, "indices"}; }

struct OptimizerSpec {
  const char* op_name;
  KernelId kernel;
  std::vector<ArgSpec> args;  // the op's inputs, in order
  bool sparse = false;
  bool requires_inner = true;  // sparse: "Inner dimension should be greater than zero."
  bool gpu_registered = true;  // false: TensorFlow has a CPU kernel only
  const char* note = nullptr;  // docs/ops.md's note, where the default ones do not fit
};

std::vector<int> InputsOf(const OptimizerSpec& spec, Arg kind) {
  std::vector<int> inputs;
  for (size_t i = 0; i < spec.args.size(); ++i) {
    if (spec.args[i].kind == kind) inputs.push_back(static_cast<int>(i));
  }
  return inputs;
}

// ResourceApply* / ResourceSparseApply*, driven by an OptimizerSpec.
class ApplyOptimizerOp : public StatusOpKernel {
 public:
  ApplyOptimizerOp(tf::OpKernelConstruction* context, const OptimizerSpec& spec)
      : StatusOpKernel(context), spec_(spec) {
    for (const auto& [attribute, flag] :
         {std::pair<const char*, uint32_t>{"use_nesterov", training::kUseNesterov},
          {"update_slots", training::kUpdateSlots},
          {"multiply_linear_by_lr", training::kMultiplyLinearByLr}}) {
      if (!context->HasAttr(attribute)) continue;
      bool value = false;
      OP_REQUIRES_OK(context, context->GetAttr(attribute, &value));
      if (value) flags_ |= flag;
    }
  }


 private:
  absl::Status ComputeWithStatus(tf::OpKernelContext* context) override {
    const std::vector<int> variable_inputs = InputsOf(spec_, Arg::kVariable);
    VGPU_ASSIGN_OR_RETURN(std::unique_ptr<LockedVariables> locked,
                          LockedVariables::Acquire(context, variable_inputs));
    const int grad_input = InputsOf(spec_, Arg::kGradient)[0];
    const tf::Tensor& grad = context->input(grad_input);
    const tf::DataType dtype = grad.dtype();
    for (size_t v = 0; v < variable_inputs.size(); ++v) {
      const tf::Tensor& tensor = *locked->get(v)->tensor();
      if (tensor.dtype() != dtype) {
        return absl::InvalidArgumentError(absl::StrCat(
            "variable ", requested_input(variable_inputs[v]), " has dtype ",
            tf::DataTypeString(tensor.dtype()), " but the update has dtype ",
            tf::DataTypeString(dtype)));
      }
    }
    VGPU_ASSIGN_OR_RETURN(ClientStream * stream, variables::StreamOf(context));
    return spec_.sparse ? ApplySparse(context, *locked, variable_inputs, grad, *stream)
                        : ApplyDense(context, *locked, variable_inputs, grad, *stream);
  }

  // Scalars first, in input order, then the variables' shapes against var's.
  absl::Status CheckScalarsAndSlots(tf::OpKernelContext* context, const LockedVariables& locked,
                                    const std::vector<int>& variable_inputs) const {
    for (int input : InputsOf(spec_, Arg::kScalar)) {
      const tf::TensorShape& shape = context->input(input).shape();
      if (!tf::TensorShapeUtils::IsScalar(shape)) {
        return absl::InvalidArgumentError(
            absl::StrCat(spec_.args[input].not_scalar, shape.DebugString()));
      }
    }
    return CheckSlotShapes(locked, variable_inputs);
  }

  // Each slot variable (accum, m, ...) has var's shape.
  absl::Status CheckSlotShapes(const LockedVariables& locked,
                               const std::vector<int>& variable_inputs) const {
    const tf::TensorShape& var_shape = locked.get(0)->tensor()->shape();
    for (size_t v = 1; v < variable_inputs.size(); ++v) {
      const tf::TensorShape& shape = locked.get(v)->tensor()->shape();
      if (!var_shape.IsSameSize(shape)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "var and ", spec_.args[variable_inputs[v]].name, " do not have the same shape",
            var_shape.DebugString(), " ", shape.DebugString()));
      }
    }
    return absl::OkStatus();
  }

  // The launch's buffers in the op's input order (variables: their current tensors).
  std::vector<BufferArg> Buffers(tf::OpKernelContext* context, const LockedVariables& locked) const {
    std::vector<BufferArg> buffers;
    size_t variable = 0;
    for (size_t i = 0; i < spec_.args.size(); ++i) {
      buffers.push_back(spec_.args[i].kind == Arg::kVariable
                            ? BufferOf(*locked.get(variable++)->tensor())
                            : BufferOf(context->input(static_cast<int>(i))));
    }
    return buffers;
  }

  absl::Status ApplyDense(tf::OpKernelContext* context, const LockedVariables& locked,
                          const std::vector<int>& variable_inputs, const tf::Tensor& grad,
                          ClientStream& stream) {
    VGPU_RETURN_IF_ERROR(CheckScalarsAndSlots(context, locked, variable_inputs));
    const tf::TensorShape& var_shape = locked.get(0)->tensor()->shape();
    if (!var_shape.IsSameSize(grad.shape())) {
      const int grad_input = InputsOf(spec_, Arg::kGradient)[0];
      return absl::InvalidArgumentError(absl::StrCat(
          "var and ", spec_.args[grad_input].name, " do not have the same shape",
          var_shape.DebugString(), " ", grad.shape().DebugString()));
    }
    for (size_t v = 0; v < variable_inputs.size(); ++v) {
      VGPU_RETURN_IF_ERROR(variables::PrepareToUpdate(context, locked.get(v), stream));
    }
    if (grad.NumElements() == 0) return absl::OkStatus();
    training::UpdateParams params;
    VGPU_ASSIGN_OR_RETURN(params.dtype, DTypeOfTensor(grad));
    params.flags = flags_;
    params.count = static_cast<uint64_t>(grad.NumElements());
    return KernelLaunch(stream).Buffers(Buffers(context, locked)).Param(params).Run(spec_.kernel);
  }

  absl::Status ApplySparse(tf::OpKernelContext* context, const LockedVariables& locked,
                           const std::vector<int>& variable_inputs, const tf::Tensor& grad,
                           ClientStream& stream) {
    const tf::Tensor& var = *locked.get(0)->tensor();
    const tf::TensorShape& var_shape = var.shape();
    VGPU_RETURN_IF_ERROR(CheckSlotShapes(locked, variable_inputs));
    if (!tf::TensorShapeUtils::IsVectorOrHigher(var_shape)) {
      return absl::InvalidArgumentError("var must be at least 1 dimensional");
    }
    VGPU_RETURN_IF_ERROR(CheckScalarsAndSlots(context, locked, variable_inputs));
    const tf::Tensor& indices = context->input(InputsOf(spec_, Arg::kIndices)[0]);
    if (!tf::TensorShapeUtils::IsVector(indices.shape())) {
      return absl::InvalidArgumentError("indices must be one-dimensional");
    }
    // (TensorFlow reads grad's dimensions without checking its rank; another rank is refused.)
    if (grad.dims() != var.dims()) {
      return absl::InvalidArgumentError(
          absl::StrCat("grad must have the rank of var (", var.dims(), "), got shape ",
                       grad.shape().DebugString()));
    }
    int64_t inner = 1;
    for (int d = 1; d < var.dims(); ++d) {
      if (var.dim_size(d) != grad.dim_size(d)) {
        return absl::InvalidArgumentError(
            absl::StrCat("var and grad must match in dimension ", d));
      }
      inner *= grad.dim_size(d);
    }
    const int64_t n = indices.dim_size(0);
    if (grad.dim_size(0) != n) {
      return absl::InvalidArgumentError(
          "grad must be the same size as indices in the first dimension.");
    }
    if (spec_.requires_inner && inner <= 0) {
      return absl::InvalidArgumentError("Inner dimension should be greater than zero.");
    }
    for (size_t v = 0; v < variable_inputs.size(); ++v) {
      VGPU_RETURN_IF_ERROR(variables::PrepareToUpdate(context, locked.get(v), stream));
    }
    if (n == 0 || inner == 0) return absl::OkStatus();
    training::SparseUpdateParams params;
    VGPU_ASSIGN_OR_RETURN(params.dtype, DTypeOfTensor(grad));
    if (indices.dtype() != tf::DT_INT32 && indices.dtype() != tf::DT_INT64) {
      return absl::InvalidArgumentError("indices must be int32 or int64");
    }
    params.index_dtype = indices.dtype() == tf::DT_INT32 ? DType::kInt32 : DType::kInt64;
    params.flags = flags_;
    params.rows = var.dim_size(0);
    params.inner = inner;
    params.num_indices = n;
    return KernelLaunch(stream).Buffers(Buffers(context, locked)).Param(params).Run(spec_.kernel);
  }

  static absl::StatusOr<DType> DTypeOfTensor(const tf::Tensor& tensor) {
    std::optional<DType> dtype = ToDType(static_cast<TF_DataType>(tensor.dtype()));
    if (!dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported dtype ", tf::DataTypeString(tensor.dtype())));
    }
    return *dtype;
  }

  const OptimizerSpec& spec_;
  uint32_t flags_ = 0;
};

// TensorFlow's messages for hyper-parameters that are not scalars (their exact wording, odd
// spaces included).
constexpr const char* kLr = "lr is not a scalar: ";
constexpr const char* kLrSpaced = "lr is not a scalar : ";
constexpr const char* kAlpha = "alpha is not a scalar: ";
constexpr const char* kMomentum = "momentum is not a scalar: ";
constexpr const char* kEpsilon = "epsilon is not a scalar: ";
constexpr const char* kRho = "rho is not a scalar: ";
constexpr const char* kBeta1Power = "beta1_power is not a scalar: ";
constexpr const char* kBeta2Power = "beta2_power is not a scalar: ";
constexpr const char* kBeta1 = "beta1 is not a scalar: ";
constexpr const char* kBeta2 = "beta2 is not a scalar: ";
constexpr const char* kL1 = "l1 regularization strength is not a scalar: ";
constexpr const char* kL2 = "l2 regularization strength is not a scalar: ";
constexpr const char* kPositiveLr = "lr is not a positive scalar: ";
constexpr const char* kNonNegativeL1 = "l1 regularization strength is not a non-negative scalar: ";
constexpr const char* kNonNegativeL2 = "l2 regularization strength is not a non-negative scalar: ";
constexpr const char* kShrinkage = "l2 shrinkage regularization strength is not a scalar: ";
// The sparse FTRL updates' checks (TensorFlow's SparseApplyFtrlOp).
constexpr const char* kFtrlLr =
    "lr is not a positive scalar (or zero if multiply_linear_by_lr is set): ";
constexpr const char* kFtrlLrPower = "lr_power is not a non-positive scalar: ";
constexpr const char* kNonNegativeShrinkage =
    "l2 shrinkage regularization strength is not a non-negative scalar: ";

// The optimizers (static storage: kernels keep a reference).
const std::vector<OptimizerSpec>& Optimizers() {
  static const auto* optimizers = new std::vector<OptimizerSpec>{
      {"ResourceApplyGradientDescent", training::kApplyGradientDescent,
       {Variable("var"), Scalar("alpha", kAlpha), Gradient("delta")}},
      {"ResourceApplyMomentum", training::kApplyMomentum,
       {Variable("var"), Variable("accum"), Scalar("lr", kLr), Gradient(),
        Scalar("momentum", kMomentum)}},
      {"ResourceApplyKerasMomentum", training::kApplyKerasMomentum,
       {Variable("var"), Variable("accum"), Scalar("lr", kLr), Gradient(),
        Scalar("momentum", kMomentum)}},
      {"ResourceApplyAdam", training::kApplyAdam,
       {Variable("var"), Variable("m"), Variable("v"), Scalar("beta1_power", kBeta1Power),
        Scalar("beta2_power", kBeta2Power), Scalar("lr", kLrSpaced), Scalar("beta1", kBeta1),
        Scalar("beta2", kBeta2), Scalar("epsilon", kEpsilon), Gradient()}},
      {"ResourceApplyAdamWithAmsgrad", training::kApplyAdamWithAmsgrad,
       {Variable("var"), Variable("m"), Variable("v"), Variable("vhat"),
        Scalar("beta1_power", kBeta1Power), Scalar("beta2_power", kBeta2Power),
        Scalar("lr", kLrSpaced), Scalar("beta1", kBeta1), Scalar("beta2", kBeta2),
        Scalar("epsilon", kEpsilon), Gradient()}},
      {"ResourceApplyAdaMax", training::kApplyAdaMax,
       {Variable("var"), Variable("m"), Variable("v"), Scalar("beta1_power", kBeta1Power),
        Scalar("lr", kLrSpaced), Scalar("beta1", kBeta1), Scalar("beta2", kBeta2),
        Scalar("epsilon", kEpsilon), Gradient()}},
      {"ResourceApplyAdagrad", training::kApplyAdagrad,
       {Variable("var"), Variable("accum"), Scalar("lr", kLr), Gradient()}},
      {"ResourceApplyAdagradV2", training::kApplyAdagradV2,
       {Variable("var"), Variable("accum"), Scalar("lr", kLr), Scalar("epsilon", kEpsilon),
        Gradient()}},
      {"ResourceApplyProximalAdagrad", training::kApplyProximalAdagrad,
       {Variable("var"), Variable("accum"), Scalar("lr", kPositiveLr),
        Scalar("l1", kNonNegativeL1), Scalar("l2", kNonNegativeL2), Gradient()}},
      {"ResourceApplyProximalGradientDescent", training::kApplyProximalGradientDescent,
       {Variable("var"), Scalar("alpha", kAlpha), Scalar("l1", kL1), Scalar("l2", kL2),
        Gradient("delta")}},
      {"ResourceApplyAdadelta", training::kApplyAdadelta,
       {Variable("var"), Variable("accum"), Variable("accum_update"), Scalar("lr", kLr),
        Scalar("rho", kRho), Scalar("epsilon", kEpsilon), Gradient()}},
      {"ResourceApplyRMSProp", training::kApplyRMSProp,
       {Variable("var"), Variable("ms"), Variable("mom"), Scalar("lr", kLrSpaced),
        Scalar("rho", kRho), Scalar("momentum", kMomentum), Scalar("epsilon", kEpsilon),
        Gradient()}},
      {"ResourceApplyCenteredRMSProp", training::kApplyCenteredRMSProp,
       {Variable("var"), Variable("mg"), Variable("ms"), Variable("mom"),
        Scalar("lr", kLrSpaced), Scalar("rho", kRho), Scalar("momentum", kMomentum),
        Scalar("epsilon", kEpsilon), Gradient()}},
      {"ResourceApplyFtrl", training::kApplyFtrl,
       {Variable("var"), Variable("accum"), Variable("linear"), Gradient(), Scalar("lr", kLr),
        Scalar("l1", kL1), Scalar("l2", kL2), Scalar("lr_power", "lr_power is not a scalar")}},
      {"ResourceApplyFtrlV2", training::kApplyFtrlV2,
       {Variable("var"), Variable("accum"), Variable("linear"), Gradient(), Scalar("lr", kLr),
        Scalar("l1", kL1), Scalar("l2", kL2), Scalar("l2_shrinkage", kShrinkage),
        Scalar("lr_power", "lr_power is not a scalar")}},
      {"ResourceApplyAddSign", training::kApplyAddSign,
       {Variable("var"), Variable("m"), Scalar("lr", kLr), Scalar("alpha", kAlpha),
        Scalar("sign_decay", "sign_decay is not a scalar: "),
        Scalar("beta", "beta is not a scalar: "), Gradient()}},
      {"ResourceApplyPowerSign", training::kApplyPowerSign,
       {Variable("var"), Variable("m"), Scalar("lr", kLr),
        Scalar("logbase", "logbase is not a scalar: "),
        Scalar("sign_decay", "sign_decay is not a scalar: "),
        Scalar("beta", "beta is not a scalar: "), Gradient()}},
      // Keras' Adam update step (the Keras hook makes it; fused_ops.h).
      {fused_ops::kApplyKerasAdam, training::kApplyKerasAdam,
       {Variable("var"), Variable("m"), Variable("v"), Scalar("alpha", kAlpha),
        Scalar("one_minus_beta1", "one_minus_beta1 is not a scalar: "),
        Scalar("one_minus_beta2", "one_minus_beta2 is not a scalar: "),
        Scalar("epsilon", kEpsilon), Gradient()},
       false, true, true,
       "The plugin's own op: Keras' Adam and AdamW update step for one variable in one launch "
       "(made by the Keras hook), each operation rounded as Keras' separate ops round it."},
      // Sparse updates.
      {"ResourceSparseApplyAdagrad", training::kSparseApplyAdagrad,
       {Variable("var"), Variable("accum"), Scalar("lr", kLr), Gradient(), Indices()},
       true},
      {"ResourceSparseApplyAdagradV2", training::kSparseApplyAdagradV2,
       {Variable("var"), Variable("accum"), Scalar("lr", kLr), Scalar("epsilon", kEpsilon),
        Gradient(), Indices()},
       true},
      {"ResourceSparseApplyProximalAdagrad", training::kSparseApplyProximalAdagrad,
       {Variable("var"), Variable("accum"), Scalar("lr", kPositiveLr),
        Scalar("l1", kNonNegativeL1), Scalar("l2", kNonNegativeL2), Gradient(), Indices()},
       true},
      {"ResourceSparseApplyFtrl", training::kSparseApplyFtrl,
       {Variable("var"), Variable("accum"), Variable("linear"), Gradient(), Indices(),
        Scalar("lr", kFtrlLr), Scalar("l1", kNonNegativeL1), Scalar("l2", kNonNegativeL2),
        Scalar("lr_power", kFtrlLrPower)},
       true},
      {"ResourceSparseApplyFtrlV2", training::kSparseApplyFtrlV2,
       {Variable("var"), Variable("accum"), Variable("linear"), Gradient(), Indices(),
        Scalar("lr", kFtrlLr), Scalar("l1", kNonNegativeL1), Scalar("l2", kNonNegativeL2),
        Scalar("l2_shrinkage", kNonNegativeShrinkage), Scalar("lr_power", kFtrlLrPower)},
       true},
      {"ResourceSparseApplyKerasMomentum", training::kSparseApplyKerasMomentum,
       {Variable("var"), Variable("accum"), Scalar("lr", kLrSpaced), Gradient(), Indices(),
        Scalar("momentum", kMomentum)},
       true, /*requires_inner=*/false},
      // Sparse updates TensorFlow only has for the CPU (the legacy tf.compat.v1.train
      // optimizers emit them for IndexedSlices gradients).
      {"ResourceSparseApplyMomentum", training::kSparseApplyMomentum,
       {Variable("var"), Variable("accum"), Scalar("lr", kLrSpaced), Gradient(), Indices(),
        Scalar("momentum", kMomentum)},
       true, /*requires_inner=*/false, /*gpu_registered=*/false},
      {"ResourceSparseApplyAdadelta", training::kSparseApplyAdadelta,
       {Variable("var"), Variable("accum_grad"), Variable("accum_update"), Scalar("lr", kLr),
        Scalar("rho", kRho), Scalar("epsilon", kEpsilon), Gradient(), Indices()},
       true, /*requires_inner=*/false, /*gpu_registered=*/false},
      {"ResourceSparseApplyRMSProp", training::kSparseApplyRMSProp,
       {Variable("var"), Variable("ms"), Variable("mom"), Scalar("lr", kLr), Scalar("rho", kRho),
        Scalar("momentum", kMomentum), Scalar("epsilon", kEpsilon), Gradient(), Indices()},
       true, /*requires_inner=*/false, /*gpu_registered=*/false},
      {"ResourceSparseApplyCenteredRMSProp", training::kSparseApplyCenteredRMSProp,
       {Variable("var"), Variable("mg"), Variable("ms"), Variable("mom"), Scalar("lr", kLr),
        Scalar("rho", kRho), Scalar("momentum", kMomentum), Scalar("epsilon", kEpsilon),
        Gradient(), Indices()},
       true, /*requires_inner=*/false, /*gpu_registered=*/false},
      {"ResourceSparseApplyProximalGradientDescent", training::kSparseApplyProximalGradientDescent,
       {Variable("var"), Scalar("alpha", kLr), Scalar("l1", kL1), Scalar("l2", kL2), Gradient(),
        Indices()},
       true, /*requires_inner=*/true, /*gpu_registered=*/false},
  };
  return *optimizers;
}

}  // namespace

void RegisterTrainingOps(const char* device_type) {
  for (const OptimizerSpec& spec : Optimizers()) {
    auto create = [&spec](tf::OpKernelConstruction* context) -> tf::OpKernel* {
      return new ApplyOptimizerOp(context, spec);
    };
    // The variables are resource handles in host memory, named so as in TensorFlow's dense
    // registrations.
    std::vector<const char*> host_memory;
    if (!spec.sparse) {
      for (const ArgSpec& arg : spec.args) {
        if (arg.kind == Arg::kVariable) host_memory.push_back(arg.name);
      }
    }
    for (tf::DataType dtype : {tf::DT_FLOAT, tf::DT_HALF, tf::DT_BFLOAT16, tf::DT_DOUBLE}) {
      if (!spec.sparse) {
        variables::RegisterVariableKernel(spec.op_name, device_type, {{"T", dtype}},
                                          host_memory, create);
        continue;
      }
      for (tf::DataType index : {tf::DT_INT32, tf::DT_INT64}) {
        variables::RegisterVariableKernel(spec.op_name, device_type,
                                          {{"T", dtype}, {"Tindices", index}}, {}, create);
      }
    }
    const char* note =
        spec.note != nullptr ? spec.note
        : !spec.sparse       ? "In place, with TensorFlow's CPU arithmetic; hyper-parameters are not "
                       "range-checked (they stay on the device)."
        : spec.gpu_registered
            ? "In place; rows of duplicate indices are updated in index order "
              "(deterministic); an index outside the variable is skipped, no error "
              "(TensorFlow's GPU kernel). Hyper-parameters are not range-checked."
            : "TensorFlow has a CPU kernel only. In place, with its arithmetic; rows of "
              "duplicate indices are updated in index order; an index outside the variable is "
              "skipped, no error (as the GPU kernels of the other sparse updates).";
    DocumentOp(spec.op_name, "", note);
  }
}

}  // namespace vgpu
