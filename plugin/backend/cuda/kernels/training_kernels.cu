// CUDA kernels of the training family (protocol/kernels/training.h): the optimizers' in-place
// variable updates, dense (Apply*) and sparse (SparseApply*), for float32, float64, float16 and
// bfloat16, with the CPU executor's expressions (cpu/kernels/training_kernels.cc, TensorFlow's
// CPU functors) evaluated per element in the same order of operations. The 16-bit types round
// after every operation as Eigen::half / Eigen::bfloat16 do (element_helpers.cuh).
//
// Dense kernels: one grid-stride kernel per optimizer, one thread per element, running the
// CPU's statements in order for that element (the CPU evaluates each statement over all
// elements before the next, but every statement is element-wise, so the per-element sequence
// is the same). Hyper-parameters are one-element device buffers, read by every thread; the
// CPU's host-side branches on their values (l1 > 0, lr_power == -0.5) are taken per thread on
// the same values.
// Sparse kernels: one thread per column, applying every in-range index's row in index order,
// exactly the CPU's split (columns over workers, indices in order within one), so duplicate
// indices update a row in TensorFlow's serial order, deterministically. The parallelism is the
// row width (`inner`); a launch with narrow rows and many indices runs long serial loops.
//
// The launch layer (launch/training_launch.h) lists the family's kernels with the layout of
// their buffers ('v' variable, 'g' gradient, 's' scalar, 'i' indices), reads and validates every
// launch (buffer count, alignment and size of every buffer) before anything is enqueued, as for
// the CPU executor, and registers the kernels: this file holds the arithmetic (one step per
// optimizer, bound to each kernel's buffers as Update<id>) and the grid loops that apply it.
//
// What the GPU run must confirm: every id against the CPU executor for all four dtypes and
// every flag (use_nesterov, update_slots, multiply_linear_by_lr, lr_power == -0.5 or not,
// l1 == 0 or > 0), float32 within rtol 1e-3 (nvcc contracts a * b + c into FMAs and computes
// rsqrt as a correctly rounded 1 / sqrt, pow/exp with CUDA's libm, so results are close, not
// bitwise); sparse updates with duplicate and out-of-range indices, int32 and int64 indices.
#include <cstdint>
#include <type_traits>

#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/element_helpers.cuh"
#include "plugin/backend/launch/training_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/training.h"

namespace vgpu::cuda {
namespace {

using namespace elements;  // NOLINT: the element types and functions of this family's helpers
using training_launch::DenseUpdateLaunch;
using training_launch::SparseUpdateLaunch;
using training_launch::UpdateKernelSpec;

// Every buffer of any kernel of the family (kApplyAdamWithAmsgrad has the most, 11).
constexpr size_t kMaxOperands = training_launch::MaxUpdateBuffers();

// The launch's buffers as T, passed by value. V(k, offset) is element `offset` of buffer k (a
// variable or the gradient), S(k) the scalar in buffer k.
template <typename T>
struct Operands {
  T* buffer[kMaxOperands];
  uint32_t flags;
  __device__ T& V(int k, int64_t offset) const { return buffer[k][offset]; }
  __device__ T S(int k) const { return buffer[k][0]; }
  __device__ bool Flag(uint32_t bit) const { return (flags & bit) != 0; }
};

template <typename T>
Operands<T> OperandsOf(const CudaKernelContext& context, uint32_t flags) {
  Operands<T> operands{};
  for (size_t i = 0; i < context.buffers.size() && i < kMaxOperands; ++i) {
    operands.buffer[i] = reinterpret_cast<T*>(context.buffers[i]);
  }
  operands.flags = flags;
  return operands;
}

// The arithmetic of kernel `kId`, for one element: Update<kId>::Apply(o, v, g) updates element
// v of the variables with element g of the gradient (v == g for a dense kernel).
template <KernelId kId>
struct Update;

// --- Binding an optimizer step to the launch's buffers -----------------------------------------
// Each optimizer's arithmetic is a step, Step::Apply(args...), on plain values: the variables it
// updates by reference, then the hyper-parameters and the gradient by value, then its flags.
// Bind<Step, Args...> reads each argument from the launch's buffers for one element (Args name
// the buffer of each) and applies the step, so that one step serves a dense and a sparse kernel
// whose buffers are laid out differently. Every argument is read before the step runs.

// Element v of variable buffer k, by reference.
template <int k>
struct VarArg {
  template <typename T>
  __device__ static T& Get(const Operands<T>& o, int64_t v, int64_t) { return o.V(k, v); }
};
// Element g of gradient buffer k.
template <int k>
struct GradArg {
  template <typename T>
  __device__ static T Get(const Operands<T>& o, int64_t, int64_t g) { return o.V(k, g); }
};
// The scalar in buffer k.
template <int k>
struct ScalarArg {
  template <typename T>
  __device__ static T Get(const Operands<T>& o, int64_t, int64_t) { return o.S(k); }
};
// Zero, for an argument a kernel has no buffer for.
struct ZeroArg {
  template <typename T>
  __device__ static T Get(const Operands<T>&, int64_t, int64_t) { return Cast<T>(0); }
};
// Whether the launch's flags have `bit`.
template <uint32_t bit>
struct FlagArg {
  template <typename T>
  __device__ static bool Get(const Operands<T>& o, int64_t, int64_t) { return o.Flag(bit); }
};

template <typename Step, typename... Args>
struct Bind {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    Step::Apply(Args::template Get<T>(o, v, g)...);
  }
};

// Shorter names for the bindings below.
template <int k>
using Var = VarArg<k>;
template <int k>
using Grad = GradArg<k>;
template <int k>
using Scalar = ScalarArg<k>;
using UseNesterov = FlagArg<training::kUseNesterov>;
using UpdateSlots = FlagArg<training::kUpdateSlots>;
using MultiplyLinearByLr = FlagArg<training::kMultiplyLinearByLr>;

// ---------------------------------------------------------------------------------------------
// The steps, with the CPU functors' expressions (dense, and sparse where the CPU's sparse
// kernel writes its own).

template <typename T>
__device__ inline T One() { return Cast<T>(1); }

// The proximal (Fobos) step: sign(var) * max(|var| - rate * l1, 0) / (1 + l2 * rate) if
// l1 > 0, else var / (1 + l2 * rate).
template <typename T>
__device__ inline T ProximalStep(T var, T rate, T l1, T l2) {
  const T zero = Cast<T>(0);
  if (l1 > zero) {
    return Sign(var) * Max(Abs(var) - rate * l1, zero) / (One<T>() + l2 * rate);
  }
  return var / (One<T>() + l2 * rate);
}

struct GradientDescentStep {
  template <typename T>
  __device__ static void Apply(T& var, T alpha, T delta) { var = var - delta * alpha; }
};

// Momentum; kSparse: the sparse functor's association of the Nesterov term.
template <bool kSparse>
struct MomentumStep {
  template <typename T>
  __device__ static void Apply(T& var, T& accum, T lr, T grad, T momentum, bool nesterov) {
    accum = accum * momentum + grad;
    if (nesterov) {
      const T look_ahead = kSparse ? lr * momentum * accum : accum * momentum * lr;
      var = var - (grad * lr + look_ahead);
    } else {
      var = var - accum * lr;
    }
  }
};

struct KerasMomentumStep {
  template <typename T>
  __device__ static void Apply(T& var, T& accum, T lr, T grad, T momentum, bool nesterov) {
    accum = accum * momentum - grad * lr;
    if (nesterov) {
      var = var + (accum * momentum - grad * lr);
    } else {
      var = var + accum;
    }
  }
};

// Adam (the Nesterov form when `nesterov`).
struct AdamStep {
  template <typename T>
  __device__ static void Apply(T& var, T& m, T& v, T beta1_power, T beta2_power, T lr, T beta1,
                               T beta2, T epsilon, T grad, bool nesterov) {
    const T alpha = lr * Sqrt(One<T>() - beta2_power) / (One<T>() - beta1_power);
    m = m + (grad - m) * (One<T>() - beta1);
    v = v + (grad * grad - v) * (One<T>() - beta2);
    if (nesterov) {
      var = var - ((grad * (One<T>() - beta1) + m * beta1) * alpha) / (Sqrt(v) + epsilon);
    } else {
      var = var - (m * alpha) / (Sqrt(v) + epsilon);
    }
  }
};

// a * b and a + b, each rounded on its own (never contracted into a fused multiply-add); the
// 16-bit types compute each operation in float and round it anyway.
template <typename T>
__device__ T RoundedMul(T a, T b) {
  if constexpr (std::is_same_v<T, float>) {
    return __fmul_rn(a, b);
  } else if constexpr (std::is_same_v<T, double>) {
    return __dmul_rn(a, b);
  } else {
    return a * b;
  }
}
template <typename T>
__device__ T RoundedAdd(T a, T b) {
  if constexpr (std::is_same_v<T, float>) {
    return __fadd_rn(a, b);
  } else if constexpr (std::is_same_v<T, double>) {
    return __dadd_rn(a, b);
  } else {
    return a + b;
  }
}

// Keras' Adam update step, its step size and (1 - beta) factors given, rounded operation by
// operation as Keras' separate ops round it.
struct KerasAdamStep {
  template <typename T>
  __device__ static void Apply(T& var, T& m, T& v, T alpha, T one_minus_beta1,
                               T one_minus_beta2, T epsilon, T grad) {
    m = RoundedAdd(m, RoundedMul(grad - m, one_minus_beta1));
    v = RoundedAdd(v, RoundedMul(RoundedMul(grad, grad) - v, one_minus_beta2));
    var = var - RoundedMul(m, alpha) / (Sqrt(v) + epsilon);
  }
};

struct AdamWithAmsgradStep {
  template <typename T>
  __device__ static void Apply(T& var, T& m, T& v, T& vhat, T beta1_power, T beta2_power, T lr,
                               T beta1, T beta2, T epsilon, T grad) {
    const T alpha = lr * Sqrt(One<T>() - beta2_power) / (One<T>() - beta1_power);
    m = m + (grad - m) * (One<T>() - beta1);
    v = v + (grad * grad - v) * (One<T>() - beta2);
    vhat = Max(vhat, v);
    var = var - (m * alpha) / (Sqrt(vhat) + epsilon);
  }
};

struct AdaMaxStep {
  template <typename T>
  __device__ static void Apply(T& var, T& m, T& v, T beta1_power, T lr, T beta1, T beta2,
                               T epsilon, T grad) {
    m = m + (grad - m) * (One<T>() - beta1);
    v = Max(v * beta2, Abs(grad));
    var = var - lr / (One<T>() - beta1_power) * (m / (v + epsilon));
  }
};

// Adagrad, dense and sparse (the sparse functor's lr * grad is the same product).
struct AdagradStep {
  template <typename T>
  __device__ static void Apply(T& var, T& accum, T lr, T grad, bool update_slots) {
    if (update_slots) accum = accum + grad * grad;
    var = var - grad * lr * Rsqrt(accum);
  }
};

struct AdagradV2Step {
  template <typename T>
  __device__ static void Apply(T& var, T& accum, T lr, T epsilon, T grad, bool update_slots) {
    if (update_slots) accum = accum + grad * grad;
    var = var - grad * lr / (Sqrt(accum) + epsilon);
  }
};

struct ProximalAdagradStep {
  template <typename T>
  __device__ static void Apply(T& var, T& accum, T lr, T l1, T l2, T grad) {
    accum = accum + grad * grad;
    const T rate = lr * Rsqrt(accum);
    var = var - grad * rate;
    var = ProximalStep(var, rate, l1, l2);
  }
};

struct ProximalGradientDescentStep {
  template <typename T>
  __device__ static void Apply(T& var, T alpha, T l1, T l2, T delta) {
    var = var - delta * alpha;
    var = ProximalStep(var, alpha, l1, l2);
  }
};

struct AdadeltaStep {
  template <typename T>
  __device__ static void Apply(T& var, T& accum, T& accum_update, T lr, T rho, T epsilon,
                               T grad) {
    accum = accum * rho + grad * grad * (One<T>() - rho);
    const T update = Sqrt(accum_update + epsilon) * Rsqrt(accum + epsilon) * grad;
    var = var - update * lr;
    accum_update = accum_update * rho + update * update * (One<T>() - rho);
  }
};

struct RMSPropStep {
  template <typename T>
  __device__ static void Apply(T& var, T& ms, T& mom, T lr, T rho, T momentum, T epsilon,
                               T grad) {
    ms = ms + (grad * grad - ms) * (One<T>() - rho);
    mom = mom * momentum + (grad * lr) / Sqrt(ms + epsilon);
    var = var - mom;
  }
};

struct SparseRMSPropStep {
  template <typename T>
  __device__ static void Apply(T& var, T& ms, T& mom, T lr, T rho, T momentum, T epsilon,
                               T grad) {
    ms = ms * rho + grad * grad * (One<T>() - rho);
    mom = mom * momentum + Rsqrt(ms + epsilon) * lr * grad;
    var = var - mom;
  }
};

struct CenteredRMSPropStep {
  template <typename T>
  __device__ static void Apply(T& var, T& mg, T& ms, T& mom, T lr, T rho, T momentum, T epsilon,
                               T grad) {
    ms = ms + (grad * grad - ms) * (One<T>() - rho);
    mg = mg + (grad - mg) * (One<T>() - rho);
    const T denom = (ms - mg * mg) + epsilon;
    mom = mom * momentum + (grad * lr) / Sqrt(denom);
    var = var - mom;
  }
};

struct SparseCenteredRMSPropStep {
  template <typename T>
  __device__ static void Apply(T& var, T& mg, T& ms, T& mom, T lr, T rho, T momentum, T epsilon,
                               T grad) {
    ms = ms * rho + grad * grad * (One<T>() - rho);
    mg = mg * rho + grad * (One<T>() - rho);
    const T denom = ms + epsilon - mg * mg;
    mom = mom * momentum + Rsqrt(denom) * lr * grad;
    var = var - mom;
  }
};

// AddSign and PowerSign: m's update and the sign agreement of grad and m are shared.
template <typename T>
__device__ inline T UpdateMomentAndSignAgreement(T& m, T beta, T grad) {
  m = m * beta + grad * (One<T>() - beta);
  return Sign(grad) * Sign(m);
}

struct AddSignStep {
  template <typename T>
  __device__ static void Apply(T& var, T& m, T lr, T alpha, T sign_decay, T beta, T grad) {
    const T sign_gm = UpdateMomentAndSignAgreement(m, beta, grad);
    var = var - lr * (alpha + sign_decay * sign_gm) * grad;
  }
};

struct PowerSignStep {
  template <typename T>
  __device__ static void Apply(T& var, T& m, T lr, T logbase, T sign_decay, T beta, T grad) {
    const T sign_gm = UpdateMomentAndSignAgreement(m, beta, grad);
    const T grad_scale = Exp(logbase * sign_decay * sign_gm);
    var = var - lr * grad_scale * grad;
  }
};

// Ftrl, dense and sparse, with or without l2 shrinkage (`l2_shrinkage` is not used without).
// kSparseL1: the sparse functor's clamp form of the l1 term.
template <bool kShrinkage, bool kSparseL1>
struct FtrlStep {
  template <typename T>
  __device__ static void Apply(T& var, T& accum, T& linear, T grad, T lr, T l1, T l2,
                               T l2_shrinkage, T lr_power, bool multiply) {
    const T zero = Cast<T>(0), two = Cast<T>(2);
    const bool half_power = lr_power == Cast<T>(-0.5);
    const T new_accum = accum + grad * grad;
    const T gradient = kShrinkage ? grad + two * l2_shrinkage * var : grad;
    if (half_power) {
      if (multiply) {
        linear = linear + (gradient * lr - (Sqrt(new_accum) - Sqrt(accum)) * var);
      } else {
        linear = linear + (gradient - (Sqrt(new_accum) - Sqrt(accum)) / lr * var);
      }
    } else {
      const T powered = Pow(new_accum, -lr_power) - Pow(accum, -lr_power);
      if (multiply) {
        linear = linear + (gradient * lr - powered * var);
      } else {
        linear = linear + (gradient - powered / lr * var);
      }
    }
    T divisor;
    if (half_power) {
      divisor = multiply ? Sqrt(new_accum) + two * l2 * lr : Sqrt(new_accum) / lr + two * l2;
    } else {
      divisor = multiply ? Pow(new_accum, -lr_power) + two * l2 * lr
                         : Pow(new_accum, -lr_power) / lr + two * l2;
    }
    if constexpr (kSparseL1) {
      const T bound = multiply ? l1 * lr : l1;
      const T x = Max(Min(linear, bound), -bound) - linear;
      var = x / divisor;
    } else {
      const T threshold = multiply ? l1 * lr : l1;
      const T x = threshold * Sign(linear) - linear;
      var = Abs(linear) > threshold ? x / divisor : zero;
    }
    accum = accum + grad * grad;
  }
};

// Ftrl's arguments: [var, accum, linear, grad], then lr, l1, l2, (l2_shrinkage,) lr_power from
// buffer kLr on (l2_shrinkage zero without).
template <int kLr, bool kShrinkage, bool kSparseL1>
using Ftrl = Bind<FtrlStep<kShrinkage, kSparseL1>, Var<0>, Var<1>, Var<2>, Grad<3>, Scalar<kLr>,
                  Scalar<kLr + 1>, Scalar<kLr + 2>,
                  std::conditional_t<kShrinkage, Scalar<kLr + 3>, ZeroArg>,
                  Scalar<kShrinkage ? kLr + 4 : kLr + 3>, MultiplyLinearByLr>;

// ---------------------------------------------------------------------------------------------
// The kernels' buffers (protocol/kernels/training.h) bound to their steps.

// [var, alpha, delta]
template <>
struct Update<training::kApplyGradientDescent>
    : Bind<GradientDescentStep, Var<0>, Scalar<1>, Grad<2>> {};
// [var, accum, lr, grad, momentum]
template <>
struct Update<training::kApplyMomentum>
    : Bind<MomentumStep<false>, Var<0>, Var<1>, Scalar<2>, Grad<3>, Scalar<4>, UseNesterov> {};
// [var, accum, lr, grad, indices, momentum]
template <>
struct Update<training::kSparseApplyMomentum>
    : Bind<MomentumStep<true>, Var<0>, Var<1>, Scalar<2>, Grad<3>, Scalar<5>, UseNesterov> {};
// [var, accum, lr, grad, momentum]
template <>
struct Update<training::kApplyKerasMomentum>
    : Bind<KerasMomentumStep, Var<0>, Var<1>, Scalar<2>, Grad<3>, Scalar<4>, UseNesterov> {};
// [var, accum, lr, grad, indices, momentum]
template <>
struct Update<training::kSparseApplyKerasMomentum>
    : Bind<KerasMomentumStep, Var<0>, Var<1>, Scalar<2>, Grad<3>, Scalar<5>, UseNesterov> {};
// [var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad]
template <>
struct Update<training::kApplyAdam>
    : Bind<AdamStep, Var<0>, Var<1>, Var<2>, Scalar<3>, Scalar<4>, Scalar<5>, Scalar<6>,
           Scalar<7>, Scalar<8>, Grad<9>, UseNesterov> {};
// [var, m, v, vhat, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad]
template <>
struct Update<training::kApplyAdamWithAmsgrad>
    : Bind<AdamWithAmsgradStep, Var<0>, Var<1>, Var<2>, Var<3>, Scalar<4>, Scalar<5>, Scalar<6>,
           Scalar<7>, Scalar<8>, Scalar<9>, Grad<10>> {};
// [var, m, v, beta1_power, lr, beta1, beta2, epsilon, grad]
template <>
struct Update<training::kApplyAdaMax>
    : Bind<AdaMaxStep, Var<0>, Var<1>, Var<2>, Scalar<3>, Scalar<4>, Scalar<5>, Scalar<6>,
           Scalar<7>, Grad<8>> {};
// [var, accum, lr, grad(, indices)]
template <>
struct Update<training::kApplyAdagrad>
    : Bind<AdagradStep, Var<0>, Var<1>, Scalar<2>, Grad<3>, UpdateSlots> {};
template <>
struct Update<training::kSparseApplyAdagrad> : Update<training::kApplyAdagrad> {};
// [var, accum, lr, epsilon, grad(, indices)]
template <>
struct Update<training::kApplyAdagradV2>
    : Bind<AdagradV2Step, Var<0>, Var<1>, Scalar<2>, Scalar<3>, Grad<4>, UpdateSlots> {};
template <>
struct Update<training::kSparseApplyAdagradV2> : Update<training::kApplyAdagradV2> {};
// [var, accum, lr, l1, l2, grad(, indices)]
template <>
struct Update<training::kApplyProximalAdagrad>
    : Bind<ProximalAdagradStep, Var<0>, Var<1>, Scalar<2>, Scalar<3>, Scalar<4>, Grad<5>> {};
template <>
struct Update<training::kSparseApplyProximalAdagrad> : Update<training::kApplyProximalAdagrad> {};
// [var, alpha, l1, l2, delta(, indices)]
template <>
struct Update<training::kApplyProximalGradientDescent>
    : Bind<ProximalGradientDescentStep, Var<0>, Scalar<1>, Scalar<2>, Scalar<3>, Grad<4>> {};
template <>
struct Update<training::kSparseApplyProximalGradientDescent>
    : Update<training::kApplyProximalGradientDescent> {};
// [var, accum, accum_update, lr, rho, epsilon, grad(, indices)]
template <>
struct Update<training::kApplyAdadelta>
    : Bind<AdadeltaStep, Var<0>, Var<1>, Var<2>, Scalar<3>, Scalar<4>, Scalar<5>, Grad<6>> {};
template <>
struct Update<training::kSparseApplyAdadelta> : Update<training::kApplyAdadelta> {};
// [var, ms, mom, lr, rho, momentum, epsilon, grad(, indices)]
template <>
struct Update<training::kApplyRMSProp>
    : Bind<RMSPropStep, Var<0>, Var<1>, Var<2>, Scalar<3>, Scalar<4>, Scalar<5>, Scalar<6>,
           Grad<7>> {};
template <>
struct Update<training::kSparseApplyRMSProp>
    : Bind<SparseRMSPropStep, Var<0>, Var<1>, Var<2>, Scalar<3>, Scalar<4>, Scalar<5>,
           Scalar<6>, Grad<7>> {};
// [var, mg, ms, mom, lr, rho, momentum, epsilon, grad(, indices)]
template <>
struct Update<training::kApplyCenteredRMSProp>
    : Bind<CenteredRMSPropStep, Var<0>, Var<1>, Var<2>, Var<3>, Scalar<4>, Scalar<5>, Scalar<6>,
           Scalar<7>, Grad<8>> {};
template <>
struct Update<training::kSparseApplyCenteredRMSProp>
    : Bind<SparseCenteredRMSPropStep, Var<0>, Var<1>, Var<2>, Var<3>, Scalar<4>, Scalar<5>,
           Scalar<6>, Scalar<7>, Grad<8>> {};
// [var, m, lr, alpha, sign_decay, beta, grad]
template <>
struct Update<training::kApplyAddSign>
    : Bind<AddSignStep, Var<0>, Var<1>, Scalar<2>, Scalar<3>, Scalar<4>, Scalar<5>, Grad<6>> {};
// [var, m, lr, logbase, sign_decay, beta, grad]
template <>
struct Update<training::kApplyPowerSign>
    : Bind<PowerSignStep, Var<0>, Var<1>, Scalar<2>, Scalar<3>, Scalar<4>, Scalar<5>, Grad<6>> {};
// [var, m, v, alpha, one_minus_beta1, one_minus_beta2, epsilon, grad]
template <>
struct Update<training::kApplyKerasAdam>
    : Bind<KerasAdamStep, Var<0>, Var<1>, Var<2>, Scalar<3>, Scalar<4>, Scalar<5>, Scalar<6>,
           Grad<7>> {};
// Dense Ftrl: [var, accum, linear, grad, lr, l1, l2, (l2_shrinkage,) lr_power]; sparse Ftrl:
// [var, accum, linear, grad, indices, lr, l1, l2, (l2_shrinkage,) lr_power].
template <>
struct Update<training::kApplyFtrl> : Ftrl<4, false, false> {};
template <>
struct Update<training::kApplyFtrlV2> : Ftrl<4, true, false> {};
template <>
struct Update<training::kSparseApplyFtrl> : Ftrl<5, false, true> {};
template <>
struct Update<training::kSparseApplyFtrlV2> : Ftrl<5, true, true> {};

// ---------------------------------------------------------------------------------------------
// Kernels and launchers

template <typename T, typename ElementUpdate>
__global__ void DenseUpdateKernel(Operands<T> operands, int64_t count) {
  for (int64_t i = GridThreadIndex(); i < count; i += GridStride()) {
    ElementUpdate::Apply(operands, i, i);
  }
}

template <typename T, typename Index, typename ElementUpdate>
__global__ void SparseUpdateKernel(Operands<T> operands, const Index* __restrict__ indices,
                                   int64_t rows, int64_t inner, int64_t num_indices) {
  for (int64_t column = GridThreadIndex(); column < inner; column += GridStride()) {
    for (int64_t n = 0; n < num_indices; ++n) {
      const int64_t row = static_cast<int64_t>(indices[n]);
      if (row < 0 || row >= rows) continue;  // out of range: skipped
      ElementUpdate::Apply(operands, row * inner + column, n * inner + column);
    }
  }
}

// How the CUDA executor computes a validated, non-empty update launch (the Runner of
// training_launch::AddUpdateKernels): one kernel on the stream.
struct UpdateRunner {
  using Dispatch = elements::Dispatch;

  // A dense update: one thread per element.
  template <typename DenseUpdate, typename T>
  static absl::Status Dense(const CudaKernelContext& context, const UpdateKernelSpec& kernel,
                            const DenseUpdateLaunch& launch) {
    return Launch(kernel.name, *context.device, launch.count, DenseUpdateKernel<T, DenseUpdate>,
                  OperandsOf<T>(context, launch.params.flags), launch.count);
  }

  // A sparse update: one thread per column, applying the indices in order.
  template <typename RowUpdate, typename T>
  static absl::Status Sparse(const CudaKernelContext& context, const UpdateKernelSpec& kernel,
                             const SparseUpdateLaunch& launch) {
    const training::SparseUpdateParams& params = launch.params;
    const Operands<T> operands = OperandsOf<T>(context, params.flags);
    return Dispatch::Index(params.index_dtype, [&](auto index_zero) -> absl::Status {
      using Index = decltype(index_zero);
      return Launch(kernel.name, *context.device, params.inner,
                    SparseUpdateKernel<T, Index, RowUpdate>, operands,
                    reinterpret_cast<const Index*>(context.buffers[launch.indices_buffer]),
                    params.rows, params.inner, params.num_indices);
    });
  }
};

}  // namespace

void AddCudaTrainingKernels(CudaKernelTable& table) {
  training_launch::AddUpdateKernels<Update, UpdateRunner>(table);
}

}  // namespace vgpu::cuda
