// The activation family (protocol/kernels/activation.h) on the CPU backing executor,
// vectorised and multi-threaded with Eigen's tensor module on the executor's thread pool.
#include "plugin/backend/cpu/kernel_registry.h"

#define EIGEN_USE_THREADS
#include <cstring>

#include "absl/status/statusor.h"
#include "plugin/common/status_macros.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/protocol/kernels/activation.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {

// activation::kForward: y = f(x).
absl::Status ActivationForward(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(ActivationDescriptorSettings activation,
                        context.Descriptor<ActivationDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings tensor,
                        context.Descriptor<TensorDescriptorSettings>(1));
  const int64_t n = ElementCount(tensor);
  return DispatchFloating(tensor.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* x_data, context.Buffer<const T>(0, n));
    VGPU_ASSIGN_OR_RETURN(T* y_data, context.Buffer<T>(1, n));
    if (n == 0) return absl::OkStatus();
    ConstFlatMap<T> x(x_data, n);
    FlatMap<T> y(y_data, n);
    const auto& device = *context.device;
    switch (activation.mode) {
      case ActivationMode::kRelu: y.device(device) = x.cwiseMax(T(0)); break;
      case ActivationMode::kRelu6: y.device(device) = x.cwiseMax(T(0)).cwiseMin(T(6)); break;
      case ActivationMode::kSigmoid: y.device(device) = x.sigmoid(); break;
      case ActivationMode::kTanh: y.device(device) = x.tanh(); break;
      default: return absl::InvalidArgumentError("unknown activation mode");
    }
    return absl::OkStatus();
  });
}

// activation::kBackward (see protocol/kernels/activation.h for the buffer order).
absl::Status ActivationBackward(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(ActivationDescriptorSettings activation,
                        context.Descriptor<ActivationDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings tensor,
                        context.Descriptor<TensorDescriptorSettings>(1));
  const int64_t n = ElementCount(tensor);
  return DispatchFloating(tensor.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* a_data, context.Buffer<const T>(0, n));
    VGPU_ASSIGN_OR_RETURN(const T* b_data, context.Buffer<const T>(1, n));
    VGPU_ASSIGN_OR_RETURN(T* out_data, context.Buffer<T>(2, n));
    if (n == 0) return absl::OkStatus();
    ConstFlatMap<T> a(a_data, n);
    ConstFlatMap<T> b(b_data, n);
    FlatMap<T> out(out_data, n);
    const auto& device = *context.device;
    switch (activation.mode) {
      case ActivationMode::kRelu:  // a = gradients, b = features
        out.device(device) = a * (b > T(0)).template cast<T>();
        break;
      case ActivationMode::kRelu6:
        out.device(device) = a * ((b > T(0)) && (b < T(6))).template cast<T>();
        break;
      case ActivationMode::kSigmoid:  // a = y, b = dy
        out.device(device) = b * a * (T(1) - a);
        break;
      case ActivationMode::kTanh:
        out.device(device) = b * (T(1) - a * a);
        break;
      default: return absl::InvalidArgumentError("unknown activation mode");
    }
    return absl::OkStatus();
  });
}

}  // namespace vgpu::cpu_kernels

namespace vgpu {

void AddActivationKernels(KernelTable& table) {
  table.Add(activation::kForward, "activation_forward", cpu_kernels::ActivationForward);
  table.Add(activation::kBackward, "activation_backward", cpu_kernels::ActivationBackward);
}

}  // namespace vgpu
