// CPU kernels of the training family: in-place optimizer updates (protocol/kernels/training.h),
// with the expressions of TensorFlow's CPU functors so that results match them.
//
// The launch layer (launch/training_launch.h) lists the family's kernels with the layout of
// their buffers, reads and validates every launch and registers the kernels; this file holds the
// arithmetic of each update (Update<id>) and the loops that apply it to typed views of the
// checked buffers. Dense kernels are Eigen expressions on the executor's thread pool. Sparse
// kernels split the columns of the variables over the pool and apply the indexed rows in index
// order within each worker, so duplicate indices update a row in the same order as
// TensorFlow's serial CPU loop.
#define EIGEN_USE_THREADS

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/launch/training_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/training.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu {
namespace {

using cpu_kernels::ConstFlatMap;
using cpu_kernels::FlatMap;
using training::SparseUpdateParams;
using training_launch::DenseUpdateLaunch;
using training_launch::SparseUpdateLaunch;
using training_launch::UpdateKernelSpec;

// The arithmetic of kernel `kId`: a dense kernel's Update has
//   template <typename Operands> static void Apply(const Operands& o)   (o: DenseOperands<T>),
// a sparse kernel's
//   static void Apply(const Operands& o, int64_t row, int64_t n, int64_t begin, int64_t end)
// (o: SparseOperands<T>), which updates columns [begin, end) of variable row `row` with
// gradient row `n`.
template <KernelId kId>
struct Update;

// The checked buffers of a dense launch, viewed as T.
template <typename T>
class DenseOperands {
 public:
  DenseOperands(const KernelContext& context, int64_t count, uint32_t flags)
      : context_(context), count_(count), flags_(flags) {}

  FlatMap<T> Var(size_t i) const { return FlatMap<T>(Ptr(i), count_); }
  ConstFlatMap<T> Grad(size_t i) const { return ConstFlatMap<T>(Ptr(i), count_); }
  T Scalar(size_t i) const { return *Ptr(i); }
  bool Flag(uint32_t bit) const { return (flags_ & bit) != 0; }
  const Eigen::ThreadPoolDevice& device() const { return *context_.device; }

 private:
  T* Ptr(size_t i) const { return reinterpret_cast<T*>(context_.buffers[i]); }
  const KernelContext& context_;
  int64_t count_;
  uint32_t flags_;
};

// kApplyGradientDescent: [var, alpha, delta].
template <>
struct Update<training::kApplyGradientDescent> {
  template <typename Operands>
  static void Apply(const Operands& o) {
    auto var = o.Var(0);
    var.device(o.device()) -= o.Grad(2) * o.Scalar(1);
  }
};

// kApplyMomentum: [var, accum, lr, grad, momentum].
template <>
struct Update<training::kApplyMomentum> {
  template <typename Operands>
  static void Apply(const Operands& o) {
    auto var = o.Var(0);
    auto accum = o.Var(1);
    const auto lr = o.Scalar(2);
    const auto grad = o.Grad(3);
    const auto momentum = o.Scalar(4);
    accum.device(o.device()) = accum * momentum + grad;
    if (o.Flag(training::kUseNesterov)) {
      var.device(o.device()) -= grad * lr + accum * momentum * lr;
    } else {
      var.device(o.device()) -= accum * lr;
    }
  }
};

// kApplyAdam: [var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad].
template <>
struct Update<training::kApplyAdam> {
  template <typename Operands>
  static void Apply(const Operands& o) {
    using T = std::remove_reference_t<decltype(o.Scalar(0))>;
    auto var = o.Var(0);
    auto m = o.Var(1);
    auto v = o.Var(2);
    const T beta1_power = o.Scalar(3), beta2_power = o.Scalar(4), lr = o.Scalar(5);
    const T beta1 = o.Scalar(6), beta2 = o.Scalar(7), epsilon = o.Scalar(8);
    const auto grad = o.Grad(9);
    const T alpha = lr * Eigen::numext::sqrt(T(1) - beta2_power) / (T(1) - beta1_power);
    m.device(o.device()) += (grad - m) * (T(1) - beta1);
    v.device(o.device()) += (grad.square() - v) * (T(1) - beta2);
    if (o.Flag(training::kUseNesterov)) {
      var.device(o.device()) -=
          ((grad * (T(1) - beta1) + m * beta1) * alpha) / (v.sqrt() + epsilon);
    } else {
      var.device(o.device()) -= (m * alpha) / (v.sqrt() + epsilon);
    }
  }
};

// kApplyAdagrad: [var, accum, lr, grad].
template <>
struct Update<training::kApplyAdagrad> {
  template <typename Operands>
  static void Apply(const Operands& o) {
    auto var = o.Var(0);
    auto accum = o.Var(1);
    const auto lr = o.Scalar(2);
    const auto grad = o.Grad(3);
    if (o.Flag(training::kUpdateSlots)) accum.device(o.device()) += grad.square();
    var.device(o.device()) -= grad * lr * accum.rsqrt();
  }
};

// kApplyAdagradV2: [var, accum, lr, epsilon, grad].
template <>
struct Update<training::kApplyAdagradV2> {
  template <typename Operands>
  static void Apply(const Operands& o) {
    auto var = o.Var(0);
    auto accum = o.Var(1);
    const auto lr = o.Scalar(2);
    const auto epsilon = o.Scalar(3);
    const auto grad = o.Grad(4);
    if (o.Flag(training::kUpdateSlots)) accum.device(o.device()) += grad.square();
    var.device(o.device()) -= grad * lr / (accum.sqrt() + epsilon);
  }
};

// The proximal step of the Fobos update shared by ProximalAdagrad and ProximalGradientDescent:
// var = sign(var) * max(|var| - rate * l1, 0) / (1 + l2 * rate) if l1 > 0, else
// var / (1 + l2 * rate). `rate` is an expression (or a constant) of var's size.
template <typename Var, typename Rate, typename T>
void ProximalStep(const Eigen::ThreadPoolDevice& device, Var& var, const Rate& rate, T l1, T l2) {
  if (l1 > T(0)) {
    var.device(device) = var.sign() * (var.abs() - rate * var.constant(l1)).cwiseMax(T(0)) /
                         (var.constant(T(1)) + var.constant(l2) * rate);
  } else {
    var.device(device) = var / (var.constant(T(1)) + var.constant(l2) * rate);
  }
}

// kApplyProximalAdagrad: [var, accum, lr, l1, l2, grad].
template <>
struct Update<training::kApplyProximalAdagrad> {
  template <typename Operands>
  static void Apply(const Operands& o) {
    auto var = o.Var(0);
    auto accum = o.Var(1);
    const auto lr = o.Scalar(2), l1 = o.Scalar(3), l2 = o.Scalar(4);
    const auto grad = o.Grad(5);
    accum.device(o.device()) += grad.square();
    const auto rate = accum.constant(lr) * accum.rsqrt();
    var.device(o.device()) -= grad * rate;
    ProximalStep(o.device(), var, rate, l1, l2);
  }
};

// kApplyProximalGradientDescent: [var, alpha, l1, l2, delta].
template <>
struct Update<training::kApplyProximalGradientDescent> {
  template <typename Operands>
  static void Apply(const Operands& o) {
    auto var = o.Var(0);
    const auto alpha = o.Scalar(1), l1 = o.Scalar(2), l2 = o.Scalar(3);
    var.device(o.device()) -= o.Grad(4) * alpha;
    ProximalStep(o.device(), var, var.constant(alpha), l1, l2);
  }
};

// kApplyAdadelta: [var, accum, accum_update, lr, rho, epsilon, grad].
template <>
struct Update<training::kApplyAdadelta> {
  template <typename Operands>
  static void Apply(const Operands& o) {
    using T = std::remove_reference_t<decltype(o.Scalar(0))>;
    auto var = o.Var(0);
    auto accum = o.Var(1);
    auto accum_update = o.Var(2);
    const T lr = o.Scalar(3), rho = o.Scalar(4), epsilon = o.Scalar(5);
    const auto grad = o.Grad(6);
    accum.device(o.device()) = accum * rho + grad.square() * (T(1) - rho);
    const auto update = (accum_update + epsilon).sqrt() * (accum + epsilon).rsqrt() * grad;
    var.device(o.device()) -= update * lr;
    accum_update.device(o.device()) = accum_update * rho + update.square() * (T(1) - rho);
  }
};

// kApplyRMSProp: [var, ms, mom, lr, rho, momentum, epsilon, grad].
template <>
struct Update<training::kApplyRMSProp> {
  template <typename Operands>
  static void Apply(const Operands& o) {
    using T = std::remove_reference_t<decltype(o.Scalar(0))>;
    auto var = o.Var(0);
    auto ms = o.Var(1);
    auto mom = o.Var(2);
    const T lr = o.Scalar(3), rho = o.Scalar(4), momentum = o.Scalar(5), epsilon = o.Scalar(6);
    const auto grad = o.Grad(7);
    ms.device(o.device()) += (grad.square() - ms) * (T(1) - rho);
    mom.device(o.device()) = mom * momentum + (grad * lr) / ((ms + epsilon).sqrt());
    var.device(o.device()) -= mom;
  }
};

// kApplyCenteredRMSProp: [var, mg, ms, mom, lr, rho, momentum, epsilon, grad].
template <>
struct Update<training::kApplyCenteredRMSProp> {
  template <typename Operands>
  static void Apply(const Operands& o) {
    using T = std::remove_reference_t<decltype(o.Scalar(0))>;
    auto var = o.Var(0);
    auto mg = o.Var(1);
    auto ms = o.Var(2);
    auto mom = o.Var(3);
    const T lr = o.Scalar(4), rho = o.Scalar(5), momentum = o.Scalar(6), epsilon = o.Scalar(7);
    const auto grad = o.Grad(8);
    ms.device(o.device()) += (grad.square() - ms) * (T(1) - rho);
    mg.device(o.device()) += (grad - mg) * (T(1) - rho);
    const auto denom = (ms - mg.square()) + epsilon;
    mom.device(o.device()) = mom * momentum + (grad * lr) / denom.sqrt();
    var.device(o.device()) -= mom;
  }
};

// kApplyAdamWithAmsgrad: [var, m, v, vhat, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
// grad].
template <>
struct Update<training::kApplyAdamWithAmsgrad> {
  template <typename Operands>
  static void Apply(const Operands& o) {
    using T = std::remove_reference_t<decltype(o.Scalar(0))>;
    auto var = o.Var(0);
    auto m = o.Var(1);
    auto v = o.Var(2);
    auto vhat = o.Var(3);
    const T beta1_power = o.Scalar(4), beta2_power = o.Scalar(5), lr = o.Scalar(6);
    const T beta1 = o.Scalar(7), beta2 = o.Scalar(8), epsilon = o.Scalar(9);
    const auto grad = o.Grad(10);
    const T alpha = lr * Eigen::numext::sqrt(T(1) - beta2_power) / (T(1) - beta1_power);
    m.device(o.device()) += (grad - m) * (T(1) - beta1);
    v.device(o.device()) += (grad.square() - v) * (T(1) - beta2);
    vhat.device(o.device()) = vhat.cwiseMax(v);
    var.device(o.device()) -= (m * alpha) / (vhat.sqrt() + epsilon);
  }
};

// kApplyAdaMax: [var, m, v, beta1_power, lr, beta1, beta2, epsilon, grad].
template <>
struct Update<training::kApplyAdaMax> {
  template <typename Operands>
  static void Apply(const Operands& o) {
    using T = std::remove_reference_t<decltype(o.Scalar(0))>;
    auto var = o.Var(0);
    auto m = o.Var(1);
    auto v = o.Var(2);
    const T beta1_power = o.Scalar(3), lr = o.Scalar(4), beta1 = o.Scalar(5);
    const T beta2 = o.Scalar(6), epsilon = o.Scalar(7);
    const auto grad = o.Grad(8);
    m.device(o.device()) += (grad - m) * (T(1) - beta1);
    v.device(o.device()) = (v * beta2).cwiseMax(grad.abs());
    var.device(o.device()) -= lr / (T(1) - beta1_power) * (m / (v + epsilon));
  }
};

// The dense Ftrl update (kApplyFtrl, kApplyFtrlV2): `shrinkage` is the l2_shrinkage scalar's
// buffer index, or 0 for none; lr is buffer 4, l1 5, l2 6 and lr_power the last one.
template <typename T>
void DenseFtrl(const DenseOperands<T>& o, size_t shrinkage, size_t lr_power_index) {
  const auto& device = o.device();
  auto var = o.Var(0);
  auto accum = o.Var(1);
  auto linear = o.Var(2);
  const auto grad = o.Grad(3);
  const T lr = o.Scalar(4), l1 = o.Scalar(5), l2 = o.Scalar(6);
  const T lr_power = o.Scalar(lr_power_index);
  const T l2_shrinkage = shrinkage != 0 ? o.Scalar(shrinkage) : T(0);
  const bool multiply = o.Flag(training::kMultiplyLinearByLr);
  const bool half_power = lr_power == T(-0.5);
  const auto new_accum = accum + grad.square();
  const auto shrunk_grad = grad + T(2) * l2_shrinkage * var;
  // linear += g' - (p(new_accum) - p(accum)) / lr * var, or g' * lr - (...) * var.
  auto update_linear = [&](const auto& g) {
    if (half_power) {
      if (multiply) {
        linear.device(device) += g * lr - (new_accum.sqrt() - accum.sqrt()) * var;
      } else {
        linear.device(device) += g - (new_accum.sqrt() - accum.sqrt()) / lr * var;
      }
    } else {
      const auto powered = new_accum.pow(-lr_power) - accum.pow(-lr_power);
      if (multiply) {
        linear.device(device) += g * lr - powered * var;
      } else {
        linear.device(device) += g - powered / lr * var;
      }
    }
  };
  if (shrinkage != 0) {
    update_linear(shrunk_grad);
  } else {
    update_linear(grad);
  }
  const T l1_threshold = multiply ? l1 * lr : l1;
  const auto x = linear.constant(l1_threshold) * linear.sign() - linear;
  auto set_var = [&](const auto& y) {
    var.device(device) = (linear.abs() > linear.constant(l1_threshold))
                             .select(x / y, var.constant(T(0)));
  };
  if (half_power) {
    if (multiply) {
      set_var(new_accum.sqrt() + linear.constant(T(2) * l2 * lr));
    } else {
      set_var(new_accum.sqrt() / new_accum.constant(lr) + linear.constant(T(2) * l2));
    }
  } else if (multiply) {
    set_var(new_accum.pow(-lr_power) + linear.constant(T(2) * l2 * lr));
  } else {
    set_var(new_accum.pow(-lr_power) / new_accum.constant(lr) + linear.constant(T(2) * l2));
  }
  accum.device(device) += grad.square();
}

// kApplyFtrl: [var, accum, linear, grad, lr, l1, l2, lr_power].
template <>
struct Update<training::kApplyFtrl> {
  template <typename Operands>
  static void Apply(const Operands& o) { DenseFtrl(o, 0, 7); }
};

// kApplyFtrlV2: [var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power].
template <>
struct Update<training::kApplyFtrlV2> {
  template <typename Operands>
  static void Apply(const Operands& o) { DenseFtrl(o, 7, 8); }
};

// kApplyKerasMomentum: [var, accum, lr, grad, momentum].
template <>
struct Update<training::kApplyKerasMomentum> {
  template <typename Operands>
  static void Apply(const Operands& o) {
    auto var = o.Var(0);
    auto accum = o.Var(1);
    const auto lr = o.Scalar(2);
    const auto grad = o.Grad(3);
    const auto momentum = o.Scalar(4);
    accum.device(o.device()) = accum * momentum - grad * lr;
    if (o.Flag(training::kUseNesterov)) {
      var.device(o.device()) += (accum * momentum - grad * lr);
    } else {
      var.device(o.device()) += accum;
    }
  }
};

// kApplyAddSign: [var, m, lr, alpha, sign_decay, beta, grad].
template <>
struct Update<training::kApplyAddSign> {
  template <typename Operands>
  static void Apply(const Operands& o) {
    using T = std::remove_reference_t<decltype(o.Scalar(0))>;
    auto var = o.Var(0);
    auto m = o.Var(1);
    const T lr = o.Scalar(2), alpha = o.Scalar(3), sign_decay = o.Scalar(4), beta = o.Scalar(5);
    const auto grad = o.Grad(6);
    m.device(o.device()) = m * beta + grad * (T(1) - beta);
    const auto sign_gm = grad.sign() * m.sign();
    var.device(o.device()) -= lr * (alpha + sign_decay * sign_gm) * grad;
  }
};

// kApplyPowerSign: [var, m, lr, logbase, sign_decay, beta, grad].
template <>
struct Update<training::kApplyPowerSign> {
  template <typename Operands>
  static void Apply(const Operands& o) {
    using T = std::remove_reference_t<decltype(o.Scalar(0))>;
    auto var = o.Var(0);
    auto m = o.Var(1);
    const T lr = o.Scalar(2), logbase = o.Scalar(3), sign_decay = o.Scalar(4), beta = o.Scalar(5);
    const auto grad = o.Grad(6);
    m.device(o.device()) = m * beta + grad * (T(1) - beta);
    const auto sign_gm = grad.sign() * m.sign();
    const auto grad_scale = (logbase * sign_decay * sign_gm).exp();
    var.device(o.device()) -= lr * grad_scale * grad;
  }
};

// ---------------------------------------------------------------------------------------------
// Sparse updates

// The checked buffers of a sparse launch. Row views cover columns [begin, end) of one row.
template <typename T>
class SparseOperands {
 public:
  SparseOperands(const KernelContext& context, const SparseUpdateParams& params)
      : context_(context), params_(params) {}

  FlatMap<T> Row(size_t i, int64_t row, int64_t begin, int64_t end) const {
    return FlatMap<T>(Ptr(i) + row * params_.inner + begin, end - begin);
  }
  ConstFlatMap<T> GradRow(size_t i, int64_t n, int64_t begin, int64_t end) const {
    return ConstFlatMap<T>(Ptr(i) + n * params_.inner + begin, end - begin);
  }
  T Scalar(size_t i) const { return *Ptr(i); }
  bool Flag(uint32_t bit) const { return (params_.flags & bit) != 0; }

 private:
  T* Ptr(size_t i) const { return reinterpret_cast<T*>(context_.buffers[i]); }
  const KernelContext& context_;
  const SparseUpdateParams& params_;
};

// kSparseApplyAdagrad: [var, accum, lr, grad, indices].
template <>
struct Update<training::kSparseApplyAdagrad> {
  template <typename Operands>
  static void Apply(const Operands& o, int64_t r, int64_t n, int64_t b, int64_t e) {
    auto var = o.Row(0, r, b, e);
    auto accum = o.Row(1, r, b, e);
    const auto lr = o.Scalar(2);
    const auto grad = o.GradRow(3, n, b, e);
    if (o.Flag(training::kUpdateSlots)) accum += grad.square();
    var -= grad.constant(lr) * grad * accum.rsqrt();
  }
};

// kSparseApplyAdagradV2: [var, accum, lr, epsilon, grad, indices].
template <>
struct Update<training::kSparseApplyAdagradV2> {
  template <typename Operands>
  static void Apply(const Operands& o, int64_t r, int64_t n, int64_t b, int64_t e) {
    auto var = o.Row(0, r, b, e);
    auto accum = o.Row(1, r, b, e);
    const auto lr = o.Scalar(2), epsilon = o.Scalar(3);
    const auto grad = o.GradRow(4, n, b, e);
    if (o.Flag(training::kUpdateSlots)) accum += grad.square();
    var -= grad.constant(lr) * grad / (accum.sqrt() + accum.constant(epsilon));
  }
};

// kSparseApplyProximalAdagrad: [var, accum, lr, l1, l2, grad, indices].
template <>
struct Update<training::kSparseApplyProximalAdagrad> {
  template <typename Operands>
  static void Apply(const Operands& o, int64_t r, int64_t n, int64_t b, int64_t e) {
    using T = std::remove_reference_t<decltype(o.Scalar(0))>;
    auto var = o.Row(0, r, b, e);
    auto accum = o.Row(1, r, b, e);
    const T lr = o.Scalar(2), l1 = o.Scalar(3), l2 = o.Scalar(4);
    const auto grad = o.GradRow(5, n, b, e);
    accum += grad.square();
    const auto rate = accum.constant(lr) * accum.rsqrt();
    var -= grad * rate;
    if (l1 > T(0)) {
      var = var.sign() * (var.abs() - rate * var.constant(l1)).cwiseMax(T(0)) /
            (var.constant(T(1)) + var.constant(l2) * rate);
    } else {
      var = var / (var.constant(T(1)) + var.constant(l2) * rate);
    }
  }
};

// The sparse Ftrl row update (TensorFlow's ComputeFtrl). `shrinkage` is the l2_shrinkage
// scalar's buffer index, or 0 for none; lr is buffer 5, l1 6, l2 7.
template <typename Operands>
void SparseFtrlRow(const Operands& o, size_t shrinkage, size_t lr_power_index, int64_t r,
                   int64_t n, int64_t b, int64_t e) {
  using T = std::remove_reference_t<decltype(o.Scalar(0))>;
  auto var = o.Row(0, r, b, e);
  auto accum = o.Row(1, r, b, e);
  auto linear = o.Row(2, r, b, e);
  const auto grad = o.GradRow(3, n, b, e);
  const T lr = o.Scalar(5), l1 = o.Scalar(6), l2 = o.Scalar(7);
  const T lr_power = o.Scalar(lr_power_index);
  const T l2_shrinkage = shrinkage != 0 ? o.Scalar(shrinkage) : T(0);
  const bool multiply = o.Flag(training::kMultiplyLinearByLr);
  const bool half_power = lr_power == T(-0.5);
  const auto new_accum = accum + grad.square();
  auto update_linear = [&](const auto& g) {
    if (half_power) {
      if (multiply) {
        linear += g * lr - (new_accum.sqrt() - accum.sqrt()) * var;
      } else {
        linear += g - (new_accum.sqrt() - accum.sqrt()) / lr * var;
      }
    } else {
      const auto powered = new_accum.pow(-lr_power) - accum.pow(-lr_power);
      if (multiply) {
        linear += g * lr - powered * var;
      } else {
        linear += g - powered / lr * var;
      }
    }
  };
  if (shrinkage != 0) {
    update_linear(grad + T(2) * l2_shrinkage * var);
  } else {
    update_linear(grad);
  }
  const T bound = multiply ? l1 * lr : l1;
  const auto x = linear.cwiseMin(bound).cwiseMax(-bound) - linear;
  if (half_power) {
    if (multiply) {
      var = x / (new_accum.sqrt() + linear.constant(T(2) * l2 * lr));
    } else {
      var = x / (new_accum.sqrt() / new_accum.constant(lr) + linear.constant(T(2) * l2));
    }
  } else if (multiply) {
    var = x / (new_accum.pow(-lr_power) + linear.constant(T(2) * l2 * lr));
  } else {
    var = x / (new_accum.pow(-lr_power) / new_accum.constant(lr) + linear.constant(T(2) * l2));
  }
  accum += grad.square();
}

// kSparseApplyFtrl: [var, accum, linear, grad, indices, lr, l1, l2, lr_power].
template <>
struct Update<training::kSparseApplyFtrl> {
  template <typename Operands>
  static void Apply(const Operands& o, int64_t r, int64_t n, int64_t b, int64_t e) {
    SparseFtrlRow(o, 0, 8, r, n, b, e);
  }
};

// kSparseApplyFtrlV2: [var, accum, linear, grad, indices, lr, l1, l2, l2_shrinkage, lr_power].
template <>
struct Update<training::kSparseApplyFtrlV2> {
  template <typename Operands>
  static void Apply(const Operands& o, int64_t r, int64_t n, int64_t b, int64_t e) {
    SparseFtrlRow(o, 8, 9, r, n, b, e);
  }
};

// kSparseApplyKerasMomentum: [var, accum, lr, grad, indices, momentum].
template <>
struct Update<training::kSparseApplyKerasMomentum> {
  template <typename Operands>
  static void Apply(const Operands& o, int64_t r, int64_t n, int64_t b, int64_t e) {
    auto var = o.Row(0, r, b, e);
    auto accum = o.Row(1, r, b, e);
    const auto lr = o.Scalar(2);
    const auto grad = o.GradRow(3, n, b, e);
    const auto momentum = o.Scalar(5);
    accum = accum * accum.constant(momentum) - grad * grad.constant(lr);
    if (o.Flag(training::kUseNesterov)) {
      var += accum * accum.constant(momentum) - grad * grad.constant(lr);
    } else {
      var += accum;
    }
  }
};

// kSparseApplyMomentum: [var, accum, lr, grad, indices, momentum].
template <>
struct Update<training::kSparseApplyMomentum> {
  template <typename Operands>
  static void Apply(const Operands& o, int64_t r, int64_t n, int64_t b, int64_t e) {
    auto var = o.Row(0, r, b, e);
    auto accum = o.Row(1, r, b, e);
    const auto lr = o.Scalar(2);
    const auto grad = o.GradRow(3, n, b, e);
    const auto momentum = o.Scalar(5);
    accum = accum * accum.constant(momentum) + grad;
    if (o.Flag(training::kUseNesterov)) {
      var -= grad.constant(lr) * grad +
             accum.constant(lr) * accum.constant(momentum) * accum;
    } else {
      var -= accum.constant(lr) * accum;
    }
  }
};

// kSparseApplyAdadelta: [var, accum, accum_update, lr, rho, epsilon, grad, indices].
template <>
struct Update<training::kSparseApplyAdadelta> {
  template <typename Operands>
  static void Apply(const Operands& o, int64_t r, int64_t n, int64_t b, int64_t e) {
    using T = std::remove_reference_t<decltype(o.Scalar(0))>;
    auto var = o.Row(0, r, b, e);
    auto accum = o.Row(1, r, b, e);
    auto accum_update = o.Row(2, r, b, e);
    const T lr = o.Scalar(3), rho = o.Scalar(4), epsilon = o.Scalar(5);
    const auto grad = o.GradRow(6, n, b, e);
    accum = accum * accum.constant(rho) + grad.square() * grad.constant(T(1) - rho);
    const auto update = (accum_update + accum_update.constant(epsilon)).sqrt() *
                        (accum + accum.constant(epsilon)).rsqrt() * grad;
    var -= update * update.constant(lr);
    accum_update =
        accum_update * accum_update.constant(rho) + update.square() * update.constant(T(1) - rho);
  }
};

// kSparseApplyRMSProp: [var, ms, mom, lr, rho, momentum, epsilon, grad, indices].
template <>
struct Update<training::kSparseApplyRMSProp> {
  template <typename Operands>
  static void Apply(const Operands& o, int64_t r, int64_t n, int64_t b, int64_t e) {
    using T = std::remove_reference_t<decltype(o.Scalar(0))>;
    auto var = o.Row(0, r, b, e);
    auto ms = o.Row(1, r, b, e);
    auto mom = o.Row(2, r, b, e);
    const T lr = o.Scalar(3), rho = o.Scalar(4), momentum = o.Scalar(5), epsilon = o.Scalar(6);
    const auto grad = o.GradRow(7, n, b, e);
    ms = ms * ms.constant(rho) + grad.square() * grad.constant(T(1) - rho);
    mom = mom * mom.constant(momentum) +
          (ms + ms.constant(epsilon)).rsqrt() * ms.constant(lr) * grad;
    var -= mom;
  }
};

// kSparseApplyCenteredRMSProp: [var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices].
template <>
struct Update<training::kSparseApplyCenteredRMSProp> {
  template <typename Operands>
  static void Apply(const Operands& o, int64_t r, int64_t n, int64_t b, int64_t e) {
    using T = std::remove_reference_t<decltype(o.Scalar(0))>;
    auto var = o.Row(0, r, b, e);
    auto mg = o.Row(1, r, b, e);
    auto ms = o.Row(2, r, b, e);
    auto mom = o.Row(3, r, b, e);
    const T lr = o.Scalar(4), rho = o.Scalar(5), momentum = o.Scalar(6), epsilon = o.Scalar(7);
    const auto grad = o.GradRow(8, n, b, e);
    ms = ms * ms.constant(rho) + grad.square() * grad.constant(T(1) - rho);
    mg = mg * mg.constant(rho) + grad * grad.constant(T(1) - rho);
    const auto denom = ms + ms.constant(epsilon) - mg.square();
    mom = mom * mom.constant(momentum) + denom.rsqrt() * ms.constant(lr) * grad;
    var -= mom;
  }
};

// kSparseApplyProximalGradientDescent: [var, alpha, l1, l2, grad, indices].
template <>
struct Update<training::kSparseApplyProximalGradientDescent> {
  template <typename Operands>
  static void Apply(const Operands& o, int64_t r, int64_t n, int64_t b, int64_t e) {
    using T = std::remove_reference_t<decltype(o.Scalar(0))>;
    auto var = o.Row(0, r, b, e);
    const T lr = o.Scalar(1), l1 = o.Scalar(2), l2 = o.Scalar(3);
    const auto grad = o.GradRow(4, n, b, e);
    const auto rate = var.constant(lr);
    var -= grad * rate;
    if (l1 > T(0)) {
      var = var.sign() * (var.abs() - rate * var.constant(l1)).cwiseMax(T(0)) /
            (var.constant(T(1)) + var.constant(l2) * rate);
    } else {
      var = var / (var.constant(T(1)) + var.constant(l2) * rate);
    }
  }
};

// How the CPU executor computes a validated, non-empty update launch (the Runner of
// training_launch::AddUpdateKernels).
struct UpdateRunner {
  using Dispatch = cpu_kernels::Dispatch;

  // A dense update: DenseUpdate's Eigen expressions over the whole variables, on the pool.
  template <typename DenseUpdate, typename T>
  static absl::Status Dense(const KernelContext& context, const UpdateKernelSpec&,
                            const DenseUpdateLaunch& launch) {
    DenseUpdate::Apply(DenseOperands<T>(context, launch.count, launch.params.flags));
    return absl::OkStatus();
  }

  // A sparse update: RowUpdate::Apply(operands, row, n, begin, end) for every index n in
  // range, in index order, on column ranges [begin, end) split over the pool.
  template <typename RowUpdate, typename T>
  static absl::Status Sparse(const KernelContext& context, const UpdateKernelSpec&,
                             const SparseUpdateLaunch& launch) {
    const SparseUpdateParams& params = launch.params;
    // The row of every index (-1: out of range, skipped), read once.
    std::vector<int64_t> rows(static_cast<size_t>(params.num_indices));
    const uint8_t* indices = context.buffers[launch.indices_buffer];
    for (int64_t n = 0; n < params.num_indices; ++n) {
      const int64_t row = params.index_dtype == DType::kInt32
                              ? reinterpret_cast<const int32_t*>(indices)[n]
                              : reinterpret_cast<const int64_t*>(indices)[n];
      rows[n] = row < 0 || row >= params.rows ? -1 : row;
    }
    const SparseOperands<T> operands(context, params);
    const double per_column = 8.0 * static_cast<double>(params.num_indices);
    context.device->parallelFor(
        params.inner, Eigen::TensorOpCost(per_column * sizeof(T), per_column, per_column),
        [&](Eigen::Index begin, Eigen::Index end) {
          for (int64_t n = 0; n < params.num_indices; ++n) {
            if (rows[n] >= 0) RowUpdate::Apply(operands, rows[n], n, begin, end);
          }
        });
    return absl::OkStatus();
  }
};

}  // namespace

void AddTrainingKernels(KernelTable& table) {
  training_launch::AddUpdateKernels<Update, UpdateRunner>(table);
}

}  // namespace vgpu
