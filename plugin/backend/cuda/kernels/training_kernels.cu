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
// the CPU executor, and registers the kernels: this file holds each kernel's arithmetic
// (Update<id>) and the grid loops that apply it.
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

// ---------------------------------------------------------------------------------------------
// Dense updates: Apply(o, e, e) for element e. The sparse ones reuse some with (row element,
// gradient element).

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

// kApplyGradientDescent: [var, alpha, delta].
template <>
struct Update<training::kApplyGradientDescent> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    o.V(0, v) = o.V(0, v) - o.V(2, g) * o.S(1);
  }
};

// kApplyMomentum: [var, accum, lr, grad, momentum].
template <>
struct Update<training::kApplyMomentum> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    T& accum = o.V(1, v);
    const T lr = o.S(2), grad = o.V(3, g), momentum = o.S(4);
    accum = accum * momentum + grad;
    if (o.Flag(training::kUseNesterov)) {
      var = var - (grad * lr + accum * momentum * lr);
    } else {
      var = var - accum * lr;
    }
  }
};

// kApplyAdam: [var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad].
template <>
struct Update<training::kApplyAdam> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t e, int64_t g) {
    T& var = o.V(0, e);
    T& m = o.V(1, e);
    T& v = o.V(2, e);
    const T beta1_power = o.S(3), beta2_power = o.S(4), lr = o.S(5);
    const T beta1 = o.S(6), beta2 = o.S(7), epsilon = o.S(8);
    const T grad = o.V(9, g);
    const T alpha = lr * Sqrt(One<T>() - beta2_power) / (One<T>() - beta1_power);
    m = m + (grad - m) * (One<T>() - beta1);
    v = v + (grad * grad - v) * (One<T>() - beta2);
    if (o.Flag(training::kUseNesterov)) {
      var = var - ((grad * (One<T>() - beta1) + m * beta1) * alpha) / (Sqrt(v) + epsilon);
    } else {
      var = var - (m * alpha) / (Sqrt(v) + epsilon);
    }
  }
};

// kApplyAdagrad: [var, accum, lr, grad].
template <>
struct Update<training::kApplyAdagrad> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    T& accum = o.V(1, v);
    const T lr = o.S(2), grad = o.V(3, g);
    if (o.Flag(training::kUpdateSlots)) accum = accum + grad * grad;
    var = var - grad * lr * Rsqrt(accum);
  }
};

// kApplyAdagradV2: [var, accum, lr, epsilon, grad].
template <>
struct Update<training::kApplyAdagradV2> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    T& accum = o.V(1, v);
    const T lr = o.S(2), epsilon = o.S(3), grad = o.V(4, g);
    if (o.Flag(training::kUpdateSlots)) accum = accum + grad * grad;
    var = var - grad * lr / (Sqrt(accum) + epsilon);
  }
};

// kApplyProximalAdagrad: [var, accum, lr, l1, l2, grad].
template <>
struct Update<training::kApplyProximalAdagrad> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    T& accum = o.V(1, v);
    const T lr = o.S(2), l1 = o.S(3), l2 = o.S(4), grad = o.V(5, g);
    accum = accum + grad * grad;
    const T rate = lr * Rsqrt(accum);
    var = var - grad * rate;
    var = ProximalStep(var, rate, l1, l2);
  }
};

// kApplyProximalGradientDescent: [var, alpha, l1, l2, delta].
template <>
struct Update<training::kApplyProximalGradientDescent> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    const T alpha = o.S(1), l1 = o.S(2), l2 = o.S(3), grad = o.V(4, g);
    var = var - grad * alpha;
    var = ProximalStep(var, alpha, l1, l2);
  }
};

// kApplyAdadelta: [var, accum, accum_update, lr, rho, epsilon, grad].
template <>
struct Update<training::kApplyAdadelta> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    T& accum = o.V(1, v);
    T& accum_update = o.V(2, v);
    const T lr = o.S(3), rho = o.S(4), epsilon = o.S(5), grad = o.V(6, g);
    accum = accum * rho + grad * grad * (One<T>() - rho);
    const T update = Sqrt(accum_update + epsilon) * Rsqrt(accum + epsilon) * grad;
    var = var - update * lr;
    accum_update = accum_update * rho + update * update * (One<T>() - rho);
  }
};

// kApplyRMSProp: [var, ms, mom, lr, rho, momentum, epsilon, grad].
template <>
struct Update<training::kApplyRMSProp> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    T& ms = o.V(1, v);
    T& mom = o.V(2, v);
    const T lr = o.S(3), rho = o.S(4), momentum = o.S(5), epsilon = o.S(6), grad = o.V(7, g);
    ms = ms + (grad * grad - ms) * (One<T>() - rho);
    mom = mom * momentum + (grad * lr) / Sqrt(ms + epsilon);
    var = var - mom;
  }
};

// kApplyCenteredRMSProp: [var, mg, ms, mom, lr, rho, momentum, epsilon, grad].
template <>
struct Update<training::kApplyCenteredRMSProp> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    T& mg = o.V(1, v);
    T& ms = o.V(2, v);
    T& mom = o.V(3, v);
    const T lr = o.S(4), rho = o.S(5), momentum = o.S(6), epsilon = o.S(7), grad = o.V(8, g);
    ms = ms + (grad * grad - ms) * (One<T>() - rho);
    mg = mg + (grad - mg) * (One<T>() - rho);
    const T denom = (ms - mg * mg) + epsilon;
    mom = mom * momentum + (grad * lr) / Sqrt(denom);
    var = var - mom;
  }
};

// kApplyAdamWithAmsgrad: [var, m, v, vhat, beta1_power, beta2_power, lr, beta1, beta2,
// epsilon, grad].
template <>
struct Update<training::kApplyAdamWithAmsgrad> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t e, int64_t g) {
    T& var = o.V(0, e);
    T& m = o.V(1, e);
    T& v = o.V(2, e);
    T& vhat = o.V(3, e);
    const T beta1_power = o.S(4), beta2_power = o.S(5), lr = o.S(6);
    const T beta1 = o.S(7), beta2 = o.S(8), epsilon = o.S(9);
    const T grad = o.V(10, g);
    const T alpha = lr * Sqrt(One<T>() - beta2_power) / (One<T>() - beta1_power);
    m = m + (grad - m) * (One<T>() - beta1);
    v = v + (grad * grad - v) * (One<T>() - beta2);
    vhat = Max(vhat, v);
    var = var - (m * alpha) / (Sqrt(vhat) + epsilon);
  }
};

// kApplyAdaMax: [var, m, v, beta1_power, lr, beta1, beta2, epsilon, grad].
template <>
struct Update<training::kApplyAdaMax> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t e, int64_t g) {
    T& var = o.V(0, e);
    T& m = o.V(1, e);
    T& v = o.V(2, e);
    const T beta1_power = o.S(3), lr = o.S(4), beta1 = o.S(5), beta2 = o.S(6), epsilon = o.S(7);
    const T grad = o.V(8, g);
    m = m + (grad - m) * (One<T>() - beta1);
    v = Max(v * beta2, Abs(grad));
    var = var - lr / (One<T>() - beta1_power) * (m / (v + epsilon));
  }
};

// The Ftrl update shared by the dense and sparse kernels. Buffers: var 0, accum 1, linear 2,
// grad 3; `lr`, `l1`, `l2` and `lr_power` at the given buffers; `shrinkage` the l2_shrinkage
// buffer or 0 for none. `sparse_l1`: the sparse functor's clamp form of the l1 term.
template <int kLr, int kL1, int kL2, int kShrinkage, int kLrPower, bool kSparseL1>
struct Ftrl {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t e, int64_t g) {
    T& var = o.V(0, e);
    T& accum = o.V(1, e);
    T& linear = o.V(2, e);
    const T grad = o.V(3, g);
    const T lr = o.S(kLr), l1 = o.S(kL1), l2 = o.S(kL2), lr_power = o.S(kLrPower);
    const T zero = Cast<T>(0), two = Cast<T>(2);
    const T l2_shrinkage = kShrinkage != 0 ? o.S(kShrinkage) : zero;
    const bool multiply = o.Flag(training::kMultiplyLinearByLr);
    const bool half_power = lr_power == Cast<T>(-0.5);
    const T new_accum = accum + grad * grad;
    const T gradient = kShrinkage != 0 ? grad + two * l2_shrinkage * var : grad;
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

// kApplyKerasMomentum: [var, accum, lr, grad, momentum] (sparse: momentum at buffer 5).
template <int kMomentum>
struct KerasMomentum {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    T& accum = o.V(1, v);
    const T lr = o.S(2), grad = o.V(3, g), momentum = o.S(kMomentum);
    accum = accum * momentum - grad * lr;
    if (o.Flag(training::kUseNesterov)) {
      var = var + (accum * momentum - grad * lr);
    } else {
      var = var + accum;
    }
  }
};

// Dense Ftrl: [var, accum, linear, grad, lr, l1, l2, (l2_shrinkage,) lr_power]; sparse Ftrl:
// [var, accum, linear, grad, indices, lr, l1, l2, (l2_shrinkage,) lr_power].
template <>
struct Update<training::kApplyFtrl> : Ftrl<4, 5, 6, 0, 7, false> {};
template <>
struct Update<training::kApplyFtrlV2> : Ftrl<4, 5, 6, 7, 8, false> {};
template <>
struct Update<training::kSparseApplyFtrl> : Ftrl<5, 6, 7, 0, 8, true> {};
template <>
struct Update<training::kSparseApplyFtrlV2> : Ftrl<5, 6, 7, 8, 9, true> {};
template <>
struct Update<training::kApplyKerasMomentum> : KerasMomentum<4> {};
template <>
struct Update<training::kSparseApplyKerasMomentum> : KerasMomentum<5> {};

// kApplyAddSign: [var, m, lr, alpha, sign_decay, beta, grad].
template <>
struct Update<training::kApplyAddSign> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    T& m = o.V(1, v);
    const T lr = o.S(2), alpha = o.S(3), sign_decay = o.S(4), beta = o.S(5), grad = o.V(6, g);
    m = m * beta + grad * (One<T>() - beta);
    const T sign_gm = Sign(grad) * Sign(m);
    var = var - lr * (alpha + sign_decay * sign_gm) * grad;
  }
};

// kApplyPowerSign: [var, m, lr, logbase, sign_decay, beta, grad].
template <>
struct Update<training::kApplyPowerSign> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    T& m = o.V(1, v);
    const T lr = o.S(2), logbase = o.S(3), sign_decay = o.S(4), beta = o.S(5), grad = o.V(6, g);
    m = m * beta + grad * (One<T>() - beta);
    const T sign_gm = Sign(grad) * Sign(m);
    const T grad_scale = Exp(logbase * sign_decay * sign_gm);
    var = var - lr * grad_scale * grad;
  }
};

// ---------------------------------------------------------------------------------------------
// Sparse-only row updates (formulas of the CPU's sparse kernels). Buffers as training.h lists.

// kSparseApplyAdagrad: [var, accum, lr, grad, indices].
template <>
struct Update<training::kSparseApplyAdagrad> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    T& accum = o.V(1, v);
    const T lr = o.S(2), grad = o.V(3, g);
    if (o.Flag(training::kUpdateSlots)) accum = accum + grad * grad;
    var = var - lr * grad * Rsqrt(accum);
  }
};

// kSparseApplyAdagradV2: [var, accum, lr, epsilon, grad, indices].
template <>
struct Update<training::kSparseApplyAdagradV2> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    T& accum = o.V(1, v);
    const T lr = o.S(2), epsilon = o.S(3), grad = o.V(4, g);
    if (o.Flag(training::kUpdateSlots)) accum = accum + grad * grad;
    var = var - lr * grad / (Sqrt(accum) + epsilon);
  }
};

// kSparseApplyProximalAdagrad: [var, accum, lr, l1, l2, grad, indices] (same arithmetic as
// the dense kernel).
template <>
struct Update<training::kSparseApplyProximalAdagrad> : Update<training::kApplyProximalAdagrad> {};

// kSparseApplyMomentum: [var, accum, lr, grad, indices, momentum].
template <>
struct Update<training::kSparseApplyMomentum> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    T& accum = o.V(1, v);
    const T lr = o.S(2), grad = o.V(3, g), momentum = o.S(5);
    accum = accum * momentum + grad;
    if (o.Flag(training::kUseNesterov)) {
      var = var - (lr * grad + lr * momentum * accum);
    } else {
      var = var - lr * accum;
    }
  }
};

// kSparseApplyAdadelta: [var, accum, accum_update, lr, rho, epsilon, grad, indices].
template <>
struct Update<training::kSparseApplyAdadelta> : Update<training::kApplyAdadelta> {};

// kSparseApplyRMSProp: [var, ms, mom, lr, rho, momentum, epsilon, grad, indices].
template <>
struct Update<training::kSparseApplyRMSProp> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    T& ms = o.V(1, v);
    T& mom = o.V(2, v);
    const T lr = o.S(3), rho = o.S(4), momentum = o.S(5), epsilon = o.S(6), grad = o.V(7, g);
    ms = ms * rho + grad * grad * (One<T>() - rho);
    mom = mom * momentum + Rsqrt(ms + epsilon) * lr * grad;
    var = var - mom;
  }
};

// kSparseApplyCenteredRMSProp: [var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices].
template <>
struct Update<training::kSparseApplyCenteredRMSProp> {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    T& mg = o.V(1, v);
    T& ms = o.V(2, v);
    T& mom = o.V(3, v);
    const T lr = o.S(4), rho = o.S(5), momentum = o.S(6), epsilon = o.S(7), grad = o.V(8, g);
    ms = ms * rho + grad * grad * (One<T>() - rho);
    mg = mg * rho + grad * (One<T>() - rho);
    const T denom = ms + epsilon - mg * mg;
    mom = mom * momentum + Rsqrt(denom) * lr * grad;
    var = var - mom;
  }
};

// kSparseApplyProximalGradientDescent: [var, alpha, l1, l2, grad, indices].
template <>
struct Update<training::kSparseApplyProximalGradientDescent>
    : Update<training::kApplyProximalGradientDescent> {};

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
