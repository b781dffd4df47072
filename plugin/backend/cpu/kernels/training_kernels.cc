// CPU kernels of the training family: in-place optimizer updates (see
// protocol/kernels/training.h), with the same arithmetic as TensorFlow's CPU functors.
#include "plugin/backend/cpu/kernel_registry.h"

#define EIGEN_USE_THREADS
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/training.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu {
namespace {

using training::UpdateParams;

absl::StatusOr<UpdateParams> ReadParams(const KernelContext& context, size_t buffers) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(buffers));
  ParamReader reader = context.Params();
  return reader.Get<UpdateParams>();
}

template <typename T>
absl::StatusOr<T> Scalar(const KernelContext& context, size_t index) {
  VGPU_ASSIGN_OR_RETURN(const T* value, context.Buffer<const T>(index, 1));
  return *value;
}

absl::Status ApplyGradientDescent(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(UpdateParams params, ReadParams(context, 3));
  const int64_t n = static_cast<int64_t>(params.count);
  return cpu_kernels::DispatchFloating(params.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(T* var_data, context.Buffer<T>(0, n));
    VGPU_ASSIGN_OR_RETURN(T alpha, Scalar<T>(context, 1));
    VGPU_ASSIGN_OR_RETURN(const T* delta_data, context.Buffer<const T>(2, n));
    cpu_kernels::FlatMap<T> var(var_data, n);
    cpu_kernels::ConstFlatMap<T> delta(delta_data, n);
    var.device(*context.device) -= delta * alpha;
    return absl::OkStatus();
  });
}

absl::Status ApplyMomentum(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(UpdateParams params, ReadParams(context, 5));
  const int64_t n = static_cast<int64_t>(params.count);
  return cpu_kernels::DispatchFloating(params.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(T* var_data, context.Buffer<T>(0, n));
    VGPU_ASSIGN_OR_RETURN(T* accum_data, context.Buffer<T>(1, n));
    VGPU_ASSIGN_OR_RETURN(T lr, Scalar<T>(context, 2));
    VGPU_ASSIGN_OR_RETURN(const T* grad_data, context.Buffer<const T>(3, n));
    VGPU_ASSIGN_OR_RETURN(T momentum, Scalar<T>(context, 4));
    cpu_kernels::FlatMap<T> var(var_data, n);
    cpu_kernels::FlatMap<T> accum(accum_data, n);
    cpu_kernels::ConstFlatMap<T> grad(grad_data, n);
    const auto& device = *context.device;
    accum.device(device) = accum * momentum + grad;
    if (params.use_nesterov) {
      var.device(device) -= grad * lr + accum * momentum * lr;
    } else {
      var.device(device) -= accum * lr;
    }
    return absl::OkStatus();
  });
}

absl::Status ApplyAdam(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(UpdateParams params, ReadParams(context, 10));
  const int64_t n = static_cast<int64_t>(params.count);
  return cpu_kernels::DispatchFloating(params.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(T* var_data, context.Buffer<T>(0, n));
    VGPU_ASSIGN_OR_RETURN(T* m_data, context.Buffer<T>(1, n));
    VGPU_ASSIGN_OR_RETURN(T* v_data, context.Buffer<T>(2, n));
    VGPU_ASSIGN_OR_RETURN(T beta1_power, Scalar<T>(context, 3));
    VGPU_ASSIGN_OR_RETURN(T beta2_power, Scalar<T>(context, 4));
    VGPU_ASSIGN_OR_RETURN(T lr, Scalar<T>(context, 5));
    VGPU_ASSIGN_OR_RETURN(T beta1, Scalar<T>(context, 6));
    VGPU_ASSIGN_OR_RETURN(T beta2, Scalar<T>(context, 7));
    VGPU_ASSIGN_OR_RETURN(T epsilon, Scalar<T>(context, 8));
    VGPU_ASSIGN_OR_RETURN(const T* grad_data, context.Buffer<const T>(9, n));
    cpu_kernels::FlatMap<T> var(var_data, n);
    cpu_kernels::FlatMap<T> m(m_data, n);
    cpu_kernels::FlatMap<T> v(v_data, n);
    cpu_kernels::ConstFlatMap<T> grad(grad_data, n);
    const auto& device = *context.device;
    const T alpha = lr * Eigen::numext::sqrt(T(1) - beta2_power) / (T(1) - beta1_power);
    m.device(device) += (grad - m) * (T(1) - beta1);
    v.device(device) += (grad.square() - v) * (T(1) - beta2);
    if (params.use_nesterov) {
      var.device(device) -= ((grad * (T(1) - beta1) + m * beta1) * alpha) / (v.sqrt() + epsilon);
    } else {
      var.device(device) -= (m * alpha) / (v.sqrt() + epsilon);
    }
    return absl::OkStatus();
  });
}

}  // namespace

void AddTrainingKernels(KernelTable& table) {
  table.Add(training::kApplyGradientDescent, "apply_gradient_descent", ApplyGradientDescent);
  table.Add(training::kApplyMomentum, "apply_momentum", ApplyMomentum);
  table.Add(training::kApplyAdam, "apply_adam", ApplyAdam);
}

}  // namespace vgpu
