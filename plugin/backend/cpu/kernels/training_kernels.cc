// CPU kernels of the training family: in-place optimizer updates (protocol/kernels/training.h),
// with the expressions of TensorFlow's CPU functors so that results match them.
//
// The launch layer (launch/training_launch.h) lists the family's kernels with the layout of
// their buffers, reads and validates every launch and registers the kernels; this file holds the
// arithmetic of each update (Update<id>) and the loops that apply it to typed views of the
// checked buffers. One arithmetic serves a dense kernel and its sparse twin wherever
// TensorFlow's two functors compute the same expressions. Dense kernels are Eigen expressions
// on the executor's thread pool. Sparse kernels split the columns of the variables over the
// pool and apply the indexed rows in index order within each worker, so duplicate indices
// update a row in the same order as TensorFlow's serial CPU loop.
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

// A sparse kernel's layout is its dense twin's with the indices inserted right after the
// gradient, so that an update reads every buffer by its index in the dense layout
// (SparseRowOperands skips the indices).
constexpr bool IndicesFollowGradient(const UpdateKernelSpec& kernel) {
  const size_t indices = training_launch::IndicesBuffer(kernel);
  return indices > 0 && kernel.layout[indices - 1] == 'g';
}
constexpr bool EverySparseLayoutHasIndicesAfterGradient() {
  for (const UpdateKernelSpec& kernel : training_launch::kUpdateKernels) {
    if (training_launch::IsSparse(kernel) && !IndicesFollowGradient(kernel)) return false;
  }
  return true;
}
static_assert(EverySparseLayoutHasIndicesAfterGradient());

// The arithmetic of kernel `kId`:
//   template <typename Operands> static void Apply(const Operands& o)
// with o a DenseOperands<T> (the whole variables of a dense launch) or a SparseRowOperands<T>
// (columns [begin, end) of one indexed row of a sparse launch). Both read buffers by their
// index in the dense layout and give the same interface: Var(i) a writable view, Grad(i) a
// read-only one, Scalar(i), Flag(bit), Value (the element type) and Out(view), where a result
// is written: `o.Out(var) -= ...` evaluates on the pool for a dense launch and in place on the
// calling worker for a row.
template <KernelId kId>
struct Update;

// The checked buffers of a dense launch, viewed as T.
template <typename T>
class DenseOperands {
 public:
  using Value = T;

  DenseOperands(const KernelContext& context, int64_t count, uint32_t flags)
      : context_(context), count_(count), flags_(flags) {}

  FlatMap<T> Var(size_t i) const { return FlatMap<T>(Ptr(i), count_); }
  ConstFlatMap<T> Grad(size_t i) const { return ConstFlatMap<T>(Ptr(i), count_); }
  T Scalar(size_t i) const { return *Ptr(i); }
  bool Flag(uint32_t bit) const { return (flags_ & bit) != 0; }
  auto Out(FlatMap<T>& view) const { return view.device(*context_.device); }

 private:
  T* Ptr(size_t i) const { return reinterpret_cast<T*>(context_.buffers[i]); }
  const KernelContext& context_;
  int64_t count_;
  uint32_t flags_;
};

// The checked buffers of a sparse launch as one index's update sees them: variable row `row`
// and gradient row `n`, both over columns [begin, end).
template <typename T>
class SparseRowOperands {
 public:
  using Value = T;

  SparseRowOperands(const KernelContext& context, const SparseUpdateLaunch& launch, int64_t row,
                    int64_t n, int64_t begin, int64_t end)
      : context_(context), launch_(launch), row_(row), n_(n), begin_(begin), end_(end) {}

  FlatMap<T> Var(size_t i) const { return FlatMap<T>(RowPtr(i, row_), end_ - begin_); }
  ConstFlatMap<T> Grad(size_t i) const { return ConstFlatMap<T>(RowPtr(i, n_), end_ - begin_); }
  T Scalar(size_t i) const { return *Ptr(i); }
  bool Flag(uint32_t bit) const { return (launch_.params.flags & bit) != 0; }
  FlatMap<T>& Out(FlatMap<T>& view) const { return view; }

 private:
  // Buffer `i` of the dense layout: the buffers from the indices on are one further.
  T* Ptr(size_t i) const {
    const size_t buffer = i < launch_.indices_buffer ? i : i + 1;
    return reinterpret_cast<T*>(context_.buffers[buffer]);
  }
  T* RowPtr(size_t i, int64_t row) const { return Ptr(i) + row * launch_.params.inner + begin_; }
  const KernelContext& context_;
  const SparseUpdateLaunch& launch_;
  int64_t row_, n_, begin_, end_;
};

// kApplyGradientDescent: [var, alpha, delta].
struct GradientDescentUpdate {
  template <typename Operands>
  static void Apply(const Operands& o) {
    auto var = o.Var(0);
    o.Out(var) -= o.Grad(2) * o.Scalar(1);
  }
};

// kApplyMomentum and kSparseApplyMomentum: [var, accum, lr, grad, momentum]. TensorFlow's dense
// and sparse functors differ only in the order of the Nesterov step's products
// (kSparseProductOrder: lr * momentum * accum), kept so that results match.
template <bool kSparseProductOrder>
struct MomentumUpdate {
  template <typename Operands>
  static void Apply(const Operands& o) {
    auto var = o.Var(0);
    auto accum = o.Var(1);
    const auto lr = o.Scalar(2);
    const auto grad = o.Grad(3);
    const auto momentum = o.Scalar(4);
    o.Out(accum) = accum * momentum + grad;
    if (!o.Flag(training::kUseNesterov)) {
      o.Out(var) -= accum * lr;
    } else if constexpr (kSparseProductOrder) {
      o.Out(var) -= grad * lr + accum.constant(lr) * accum.constant(momentum) * accum;
    } else {
      o.Out(var) -= grad * lr + accum * momentum * lr;
    }
  }
};

// The step size of Adam and AdamWithAmsgrad, and their moving averages m and v of the gradient
// and its square.
template <typename T>
T AdamStepSize(T beta1_power, T beta2_power, T lr) {
  return lr * Eigen::numext::sqrt(T(1) - beta2_power) / (T(1) - beta1_power);
}
template <typename Operands, typename Moment, typename Grad, typename T>
void UpdateAdamMoments(const Operands& o, Moment& m, Moment& v, const Grad& grad, T beta1,
                       T beta2) {
  o.Out(m) += (grad - m) * (T(1) - beta1);
  o.Out(v) += (grad.square() - v) * (T(1) - beta2);
}

// kApplyAdam: [var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad].
struct AdamUpdate {
  template <typename Operands>
  static void Apply(const Operands& o) {
    using T = typename Operands::Value;
    auto var = o.Var(0);
    auto m = o.Var(1);
    auto v = o.Var(2);
    const T alpha = AdamStepSize(o.Scalar(3), o.Scalar(4), o.Scalar(5));
    const T beta1 = o.Scalar(6), beta2 = o.Scalar(7), epsilon = o.Scalar(8);
    const auto grad = o.Grad(9);
    UpdateAdamMoments(o, m, v, grad, beta1, beta2);
    if (o.Flag(training::kUseNesterov)) {
      o.Out(var) -= ((grad * (T(1) - beta1) + m * beta1) * alpha) / (v.sqrt() + epsilon);
    } else {
      o.Out(var) -= (m * alpha) / (v.sqrt() + epsilon);
    }
  }
};

// kApplyKerasAdam: [var, m, v, alpha, one_minus_beta1, one_minus_beta2, epsilon, grad]. Keras'
// Adam update step op for op: each product, sum and quotient rounded as Keras' separate ops
// round it.
struct KerasAdamUpdate {
  template <typename Operands>
  static void Apply(const Operands& o) {
    using T = typename Operands::Value;
    auto var = o.Var(0);
    auto m = o.Var(1);
    auto v = o.Var(2);
    const T alpha = o.Scalar(3), one_minus_beta1 = o.Scalar(4), one_minus_beta2 = o.Scalar(5);
    const T epsilon = o.Scalar(6);
    const auto grad = o.Grad(7);
    o.Out(m) += (grad - m) * one_minus_beta1;
    o.Out(v) += (grad.square() - v) * one_minus_beta2;
    o.Out(var) -= (m * alpha) / (v.sqrt() + epsilon);
  }
};

// kApplyAdagrad and kSparseApplyAdagrad: [var, accum, lr, grad].
struct AdagradUpdate {
  template <typename Operands>
  static void Apply(const Operands& o) {
    auto var = o.Var(0);
    auto accum = o.Var(1);
    const auto lr = o.Scalar(2);
    const auto grad = o.Grad(3);
    if (o.Flag(training::kUpdateSlots)) o.Out(accum) += grad.square();
    o.Out(var) -= grad * lr * accum.rsqrt();
  }
};

// kApplyAdagradV2 and kSparseApplyAdagradV2: [var, accum, lr, epsilon, grad].
struct AdagradV2Update {
  template <typename Operands>
  static void Apply(const Operands& o) {
    auto var = o.Var(0);
    auto accum = o.Var(1);
    const auto lr = o.Scalar(2);
    const auto epsilon = o.Scalar(3);
    const auto grad = o.Grad(4);
    if (o.Flag(training::kUpdateSlots)) o.Out(accum) += grad.square();
    o.Out(var) -= grad * lr / (accum.sqrt() + epsilon);
  }
};

// The proximal step of the Fobos update shared by ProximalAdagrad and ProximalGradientDescent:
// var = sign(var) * max(|var| - rate * l1, 0) / (1 + l2 * rate) if l1 > 0, else
// var / (1 + l2 * rate). `rate` is an expression (or a constant) of var's size.
template <typename Operands, typename Var, typename Rate, typename T>
void ProximalStep(const Operands& o, Var& var, const Rate& rate, T l1, T l2) {
  if (l1 > T(0)) {
    o.Out(var) = var.sign() * (var.abs() - rate * var.constant(l1)).cwiseMax(T(0)) /
                 (var.constant(T(1)) + var.constant(l2) * rate);
  } else {
    o.Out(var) = var / (var.constant(T(1)) + var.constant(l2) * rate);
  }
}

// kApplyProximalAdagrad and kSparseApplyProximalAdagrad: [var, accum, lr, l1, l2, grad].
struct ProximalAdagradUpdate {
  template <typename Operands>
  static void Apply(const Operands& o) {
    auto var = o.Var(0);
    auto accum = o.Var(1);
    const auto lr = o.Scalar(2), l1 = o.Scalar(3), l2 = o.Scalar(4);
    const auto grad = o.Grad(5);
    o.Out(accum) += grad.square();
    const auto rate = accum.constant(lr) * accum.rsqrt();
    o.Out(var) -= grad * rate;
    ProximalStep(o, var, rate, l1, l2);
  }
};

// kApplyProximalGradientDescent and kSparseApplyProximalGradientDescent:
// [var, alpha, l1, l2, delta].
struct ProximalGradientDescentUpdate {
  template <typename Operands>
  static void Apply(const Operands& o) {
    auto var = o.Var(0);
    const auto alpha = o.Scalar(1), l1 = o.Scalar(2), l2 = o.Scalar(3);
    o.Out(var) -= o.Grad(4) * alpha;
    ProximalStep(o, var, var.constant(alpha), l1, l2);
  }
};

// kApplyAdadelta and kSparseApplyAdadelta: [var, accum, accum_update, lr, rho, epsilon, grad].
struct AdadeltaUpdate {
  template <typename Operands>
  static void Apply(const Operands& o) {
    using T = typename Operands::Value;
    auto var = o.Var(0);
    auto accum = o.Var(1);
    auto accum_update = o.Var(2);
    const T lr = o.Scalar(3), rho = o.Scalar(4), epsilon = o.Scalar(5);
    const auto grad = o.Grad(6);
    o.Out(accum) = accum * rho + grad.square() * (T(1) - rho);
    const auto update = (accum_update + epsilon).sqrt() * (accum + epsilon).rsqrt() * grad;
    o.Out(var) -= update * lr;
    o.Out(accum_update) = accum_update * rho + update.square() * (T(1) - rho);
  }
};

// The RMSProp updates, plain or centered (kCentered: with the mean gradient mg), dense or sparse:
// [var, ms, mom, lr, rho, momentum, epsilon, grad] or [var, mg, ms, mom, lr, rho, momentum,
// epsilon, grad]. ms (and mg) move towards grad^2 (and grad) at rate 1 - rho, and mom, by which
// var moves, gathers lr * grad / sqrt(denominator). Order holds the expressions in which
// TensorFlow's dense (DenseRmsPropOrder) or sparse (SparseRmsPropOrder) functor computes that.
template <bool kCentered, typename Order>
struct RmsPropUpdate {
  template <typename Operands>
  static void Apply(const Operands& o) {
    using T = typename Operands::Value;
    constexpr size_t kMs = kCentered ? 2 : 1;
    auto var = o.Var(0);
    auto ms = o.Var(kMs);
    auto mom = o.Var(kMs + 1);
    const T lr = o.Scalar(kMs + 2), rho = o.Scalar(kMs + 3);
    const T momentum = o.Scalar(kMs + 4), epsilon = o.Scalar(kMs + 5);
    const auto grad = o.Grad(kMs + 6);
    Order::Average(o, ms, grad.square(), rho);
    if constexpr (kCentered) {
      auto mg = o.Var(1);
      Order::Average(o, mg, grad, rho);
      const auto denominator = Order::CenteredDenominator(ms, mg, epsilon);
      o.Out(mom) = mom * momentum + Order::Step(grad, lr, denominator);
    } else {
      o.Out(mom) = mom * momentum + Order::Step(grad, lr, ms + epsilon);
    }
    o.Out(var) -= mom;
  }
};

// TensorFlow's dense RMSProp functors: x += (value - x) * (1 - rho), the centered denominator
// (ms - mg^2) + epsilon, the step (grad * lr) / sqrt(denominator).
struct DenseRmsPropOrder {
  template <typename Operands, typename Moment, typename Value, typename T>
  static void Average(const Operands& o, Moment& x, const Value& value, T rho) {
    o.Out(x) += (value - x) * (T(1) - rho);
  }
  template <typename Ms, typename Mg, typename T>
  static auto CenteredDenominator(const Ms& ms, const Mg& mg, T epsilon) {
    return (ms - mg.square()) + epsilon;
  }
  template <typename Grad, typename T, typename Denominator>
  static auto Step(const Grad& grad, T lr, const Denominator& denominator) {
    return (grad * lr) / denominator.sqrt();
  }
};

// TensorFlow's sparse RMSProp functors: x = x * rho + value * (1 - rho), the centered
// denominator ms + epsilon - mg^2, the step rsqrt(denominator) * lr * grad.
struct SparseRmsPropOrder {
  template <typename Operands, typename Moment, typename Value, typename T>
  static void Average(const Operands& o, Moment& x, const Value& value, T rho) {
    o.Out(x) = x * rho + value * (T(1) - rho);
  }
  template <typename Ms, typename Mg, typename T>
  static auto CenteredDenominator(const Ms& ms, const Mg& mg, T epsilon) {
    return ms + epsilon - mg.square();
  }
  template <typename Grad, typename T, typename Denominator>
  static auto Step(const Grad& grad, T lr, const Denominator& denominator) {
    return denominator.rsqrt() * grad.constant(lr) * grad;
  }
};


// kApplyAdamWithAmsgrad: [var, m, v, vhat, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
// grad].
struct AdamWithAmsgradUpdate {
  template <typename Operands>
  static void Apply(const Operands& o) {
    using T = typename Operands::Value;
    auto var = o.Var(0);
    auto m = o.Var(1);
    auto v = o.Var(2);
    auto vhat = o.Var(3);
    const T alpha = AdamStepSize(o.Scalar(4), o.Scalar(5), o.Scalar(6));
    const T beta1 = o.Scalar(7), beta2 = o.Scalar(8), epsilon = o.Scalar(9);
    UpdateAdamMoments(o, m, v, o.Grad(10), beta1, beta2);
    o.Out(vhat) = vhat.cwiseMax(v);
    o.Out(var) -= (m * alpha) / (vhat.sqrt() + epsilon);
  }
};

// kApplyAdaMax: [var, m, v, beta1_power, lr, beta1, beta2, epsilon, grad].
struct AdaMaxUpdate {
  template <typename Operands>
  static void Apply(const Operands& o) {
    using T = typename Operands::Value;
    auto var = o.Var(0);
    auto m = o.Var(1);
    auto v = o.Var(2);
    const T beta1_power = o.Scalar(3), lr = o.Scalar(4), beta1 = o.Scalar(5);
    const T beta2 = o.Scalar(6), epsilon = o.Scalar(7);
    const auto grad = o.Grad(8);
    o.Out(m) += (grad - m) * (T(1) - beta1);
    o.Out(v) = (v * beta2).cwiseMax(grad.abs());
    o.Out(var) -= lr / (T(1) - beta1_power) * (m / (v + epsilon));
  }
};

// The Ftrl update of TensorFlow's dense functor and of its sparse one (ComputeFtrl), for
// [var, accum, linear, grad, lr, l1, l2, lr_power] or, kShrinkage, [var, accum, linear, grad,
// lr, l1, l2, l2_shrinkage, lr_power]. The two functors differ only in how var's new value
// follows from linear (NewVar::Set, below).
template <bool kShrinkage, typename NewVar>
struct FtrlUpdate {
  template <typename Operands>
  static void Apply(const Operands& o) {
    using T = typename Operands::Value;
    auto var = o.Var(0);
    auto accum = o.Var(1);
    auto linear = o.Var(2);
    const auto grad = o.Grad(3);
    const T lr = o.Scalar(4), l1 = o.Scalar(5), l2 = o.Scalar(6);
    const T lr_power = o.Scalar(kShrinkage ? 8 : 7);
    const bool multiply = o.Flag(training::kMultiplyLinearByLr);
    const bool half_power = lr_power == T(-0.5);
    const auto new_accum = accum + grad.square();
    // linear += g' - (p(new_accum) - p(accum)) / lr * var, or g' * lr - (...) * var.
    auto update_linear = [&](const auto& g) {
      if (half_power) {
        if (multiply) {
          o.Out(linear) += g * lr - (new_accum.sqrt() - accum.sqrt()) * var;
        } else {
          o.Out(linear) += g - (new_accum.sqrt() - accum.sqrt()) / lr * var;
        }
      } else {
        const auto powered = new_accum.pow(-lr_power) - accum.pow(-lr_power);
        if (multiply) {
          o.Out(linear) += g * lr - powered * var;
        } else {
          o.Out(linear) += g - powered / lr * var;
        }
      }
    };
    if constexpr (kShrinkage) {
      update_linear(grad + T(2) * o.Scalar(7) * var);
    } else {
      update_linear(grad);
    }
    const T l1_threshold = multiply ? l1 * lr : l1;
    if (half_power) {
      if (multiply) {
        NewVar::Set(o, var, linear, l1_threshold,
                    new_accum.sqrt() + linear.constant(T(2) * l2 * lr));
      } else {
        NewVar::Set(o, var, linear, l1_threshold,
                    new_accum.sqrt() / new_accum.constant(lr) + linear.constant(T(2) * l2));
      }
    } else if (multiply) {
      NewVar::Set(o, var, linear, l1_threshold,
                  new_accum.pow(-lr_power) + linear.constant(T(2) * l2 * lr));
    } else {
      NewVar::Set(o, var, linear, l1_threshold,
                  new_accum.pow(-lr_power) / new_accum.constant(lr) + linear.constant(T(2) * l2));
    }
    o.Out(accum) += grad.square();
  }
};

// Var's new value in TensorFlow's dense Ftrl functor: (threshold * sign(linear) - linear) /
// denominator where |linear| > threshold, else 0.
struct FtrlSelectedVar {
  template <typename Operands, typename Var, typename Linear, typename T, typename Denominator>
  static void Set(const Operands& o, Var& var, const Linear& linear, T threshold,
                  const Denominator& denominator) {
    const auto x = linear.constant(threshold) * linear.sign() - linear;
    o.Out(var) = (linear.abs() > linear.constant(threshold))
                     .select(x / denominator, var.constant(T(0)));
  }
};

// Var's new value in TensorFlow's ComputeFtrl (the sparse functors):
// (clamp(linear, -threshold, threshold) - linear) / denominator.
struct FtrlClampedVar {
  template <typename Operands, typename Var, typename Linear, typename T, typename Denominator>
  static void Set(const Operands& o, Var& var, const Linear& linear, T threshold,
                  const Denominator& denominator) {
    o.Out(var) = (linear.cwiseMin(threshold).cwiseMax(-threshold) - linear) / denominator;
  }
};


// kApplyKerasMomentum and kSparseApplyKerasMomentum: [var, accum, lr, grad, momentum].
struct KerasMomentumUpdate {
  template <typename Operands>
  static void Apply(const Operands& o) {
    auto var = o.Var(0);
    auto accum = o.Var(1);
    const auto lr = o.Scalar(2);
    const auto grad = o.Grad(3);
    const auto momentum = o.Scalar(4);
    o.Out(accum) = accum * momentum - grad * lr;
    if (o.Flag(training::kUseNesterov)) {
      o.Out(var) += (accum * momentum - grad * lr);
    } else {
      o.Out(var) += accum;
    }
  }
};

// kApplyAddSign and kApplyPowerSign: [var, m, lr, alpha or logbase, sign_decay, beta, grad].
// Both move m towards the gradient and scale the gradient's step by a function of
// sign_decay * sign(grad) * sign(m): GradScale::Of(alpha or logbase, that product).
template <typename GradScale>
struct SignUpdate {
  template <typename Operands>
  static void Apply(const Operands& o) {
    using T = typename Operands::Value;
    auto var = o.Var(0);
    auto m = o.Var(1);
    const T lr = o.Scalar(2), base = o.Scalar(3), sign_decay = o.Scalar(4), beta = o.Scalar(5);
    const auto grad = o.Grad(6);
    o.Out(m) = m * beta + grad * (T(1) - beta);
    const auto sign_gm = grad.sign() * m.sign();
    o.Out(var) -= lr * GradScale::Of(base, sign_decay, sign_gm) * grad;
  }
};

// AddSign's scale: alpha + sign_decay * sign_gm.
struct AddSignScale {
  template <typename T, typename SignProduct>
  static auto Of(T alpha, T sign_decay, const SignProduct& sign_gm) {
    return alpha + sign_decay * sign_gm;
  }
};

// PowerSign's scale: exp(logbase * sign_decay * sign_gm).
struct PowerSignScale {
  template <typename T, typename SignProduct>
  static auto Of(T logbase, T sign_decay, const SignProduct& sign_gm) {
    return (logbase * sign_decay * sign_gm).exp();
  }
};


// Every kernel's arithmetic. TensorFlow's sparse functors compute most indexed rows as the dense
// ones compute whole variables: those sparse kernels take their dense twin's arithmetic.
template <>
struct Update<training::kApplyGradientDescent> : GradientDescentUpdate {};
template <>
struct Update<training::kApplyMomentum> : MomentumUpdate<false> {};
template <>
struct Update<training::kApplyAdam> : AdamUpdate {};
template <>
struct Update<training::kApplyAdagrad> : AdagradUpdate {};
template <>
struct Update<training::kApplyAdagradV2> : AdagradV2Update {};
template <>
struct Update<training::kApplyProximalAdagrad> : ProximalAdagradUpdate {};
template <>
struct Update<training::kApplyProximalGradientDescent> : ProximalGradientDescentUpdate {};
template <>
struct Update<training::kApplyAdadelta> : AdadeltaUpdate {};
template <>
struct Update<training::kApplyRMSProp> : RmsPropUpdate<false, DenseRmsPropOrder> {};
template <>
struct Update<training::kApplyCenteredRMSProp> : RmsPropUpdate<true, DenseRmsPropOrder> {};
template <>
struct Update<training::kApplyAdamWithAmsgrad> : AdamWithAmsgradUpdate {};
template <>
struct Update<training::kApplyAdaMax> : AdaMaxUpdate {};
template <>
struct Update<training::kApplyFtrl> : FtrlUpdate<false, FtrlSelectedVar> {};
template <>
struct Update<training::kApplyFtrlV2> : FtrlUpdate<true, FtrlSelectedVar> {};
template <>
struct Update<training::kApplyKerasMomentum> : KerasMomentumUpdate {};
template <>
struct Update<training::kApplyAddSign> : SignUpdate<AddSignScale> {};
template <>
struct Update<training::kApplyPowerSign> : SignUpdate<PowerSignScale> {};
template <>
struct Update<training::kApplyKerasAdam> : KerasAdamUpdate {};
template <>
struct Update<training::kSparseApplyAdagrad> : AdagradUpdate {};
template <>
struct Update<training::kSparseApplyAdagradV2> : AdagradV2Update {};
template <>
struct Update<training::kSparseApplyProximalAdagrad> : ProximalAdagradUpdate {};
template <>
struct Update<training::kSparseApplyFtrl> : FtrlUpdate<false, FtrlClampedVar> {};
template <>
struct Update<training::kSparseApplyFtrlV2> : FtrlUpdate<true, FtrlClampedVar> {};
template <>
struct Update<training::kSparseApplyKerasMomentum> : KerasMomentumUpdate {};
template <>
struct Update<training::kSparseApplyMomentum> : MomentumUpdate<true> {};
template <>
struct Update<training::kSparseApplyAdadelta> : AdadeltaUpdate {};
template <>
struct Update<training::kSparseApplyRMSProp> : RmsPropUpdate<false, SparseRmsPropOrder> {};
template <>
struct Update<training::kSparseApplyCenteredRMSProp>
    : RmsPropUpdate<true, SparseRmsPropOrder> {};
template <>
struct Update<training::kSparseApplyProximalGradientDescent> : ProximalGradientDescentUpdate {};

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

  // A sparse update: RowUpdate::Apply on the SparseRowOperands of every index n in range, in
  // index order, on column ranges [begin, end) split over the pool.
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
    const double per_column = 8.0 * static_cast<double>(params.num_indices);
    context.device->parallelFor(
        params.inner, Eigen::TensorOpCost(per_column * sizeof(T), per_column, per_column),
        [&](Eigen::Index begin, Eigen::Index end) {
          for (int64_t n = 0; n < params.num_indices; ++n) {
            if (rows[n] < 0) continue;
            RowUpdate::Apply(SparseRowOperands<T>(context, launch, rows[n], n, begin, end));
          }
        });
    return absl::OkStatus();
  }
};

}  // namespace

void cpu_kernels::AddTrainingKernels(KernelTable& table) {
  training_launch::AddUpdateKernels<Update, UpdateRunner>(table);
}

}  // namespace vgpu
