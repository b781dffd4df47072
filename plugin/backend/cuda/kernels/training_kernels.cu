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
// Validation is the CPU's CheckLayout: buffer count, alignment and size of every buffer
// ('v' variable, 'g' gradient, 's' scalar, 'i' indices) before anything is enqueued.
//
// What the GPU run must confirm: every id against the CPU executor for all four dtypes and
// every flag (use_nesterov, update_slots, multiply_linear_by_lr, lr_power == -0.5 or not,
// l1 == 0 or > 0), float32 within rtol 1e-3 (nvcc contracts a * b + c into FMAs and computes
// rsqrt as a correctly rounded 1 / sqrt, pow/exp with CUDA's libm, so results are close, not
// bitwise); sparse updates with duplicate and out-of-range indices, int32 and int64 indices.
#include <cstdint>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/element_helpers.cuh"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/training.h"

namespace vgpu::cuda {
namespace {

using namespace elements;  // NOLINT: the element types and functions of this family's helpers
using training::SparseUpdateParams;
using training::UpdateParams;

constexpr int64_t kMaxElements = kMaxLaunchElements;
constexpr int kMaxOperands = 11;  // kApplyAdamWithAmsgrad

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

// Checks every buffer against `layout` (the CPU executor's CheckLayout).
absl::Status CheckLayout(const CudaKernelContext& context, absl::string_view layout,
                         uint64_t element_size, int64_t count, int64_t grad_count,
                         int64_t index_count, uint64_t index_size) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(layout.size()));
  for (size_t i = 0; i < layout.size(); ++i) {
    uint64_t bytes = 0;
    uint64_t alignment = element_size;
    switch (layout[i]) {
      case 'v': bytes = static_cast<uint64_t>(count) * element_size; break;
      case 'g': bytes = static_cast<uint64_t>(grad_count) * element_size; break;
      case 's': bytes = element_size; break;
      case 'i':
        bytes = static_cast<uint64_t>(index_count) * index_size;
        alignment = index_size;
        break;
      default: return absl::InternalError("bad operand layout");
    }
    VGPU_RETURN_IF_ERROR(context.ExpectAligned(i, alignment));
    VGPU_RETURN_IF_ERROR(context.Buffer<uint8_t>(i, bytes).status());
  }
  return absl::OkStatus();
}

template <typename T>
Operands<T> OperandsOf(const CudaKernelContext& context, uint32_t flags) {
  Operands<T> operands{};
  for (size_t i = 0; i < context.buffers.size() && i < kMaxOperands; ++i) {
    operands.buffer[i] = reinterpret_cast<T*>(context.buffers[i]);
  }
  operands.flags = flags;
  return operands;
}

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
struct GradientDescent {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    o.V(0, v) = o.V(0, v) - o.V(2, g) * o.S(1);
  }
};

// kApplyMomentum: [var, accum, lr, grad, momentum].
struct Momentum {
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
struct Adam {
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
struct Adagrad {
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
struct AdagradV2 {
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
struct ProximalAdagrad {
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
struct ProximalGradientDescent {
  template <typename T>
  __device__ static void Apply(const Operands<T>& o, int64_t v, int64_t g) {
    T& var = o.V(0, v);
    const T alpha = o.S(1), l1 = o.S(2), l2 = o.S(3), grad = o.V(4, g);
    var = var - grad * alpha;
    var = ProximalStep(var, alpha, l1, l2);
  }
};

// kApplyAdadelta: [var, accum, accum_update, lr, rho, epsilon, grad].
struct Adadelta {
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
struct RMSProp {
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
struct CenteredRMSProp {
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
struct AdamWithAmsgrad {
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
struct AdaMax {
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

// kApplyAddSign: [var, m, lr, alpha, sign_decay, beta, grad].
struct AddSign {
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
struct PowerSign {
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
struct SparseAdagrad {
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
struct SparseAdagradV2 {
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
using SparseProximalAdagrad = ProximalAdagrad;

// kSparseApplyMomentum: [var, accum, lr, grad, indices, momentum].
struct SparseMomentum {
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
using SparseAdadelta = Adadelta;

// kSparseApplyRMSProp: [var, ms, mom, lr, rho, momentum, epsilon, grad, indices].
struct SparseRMSProp {
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
struct SparseCenteredRMSProp {
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
using SparseProximalGradientDescent = ProximalGradientDescent;

// ---------------------------------------------------------------------------------------------
// Kernels and launchers

template <typename T, typename Update>
__global__ void DenseUpdateKernel(Operands<T> operands, int64_t count) {
  for (int64_t i = GridThreadIndex(); i < count; i += GridStride()) {
    Update::Apply(operands, i, i);
  }
}

template <typename T, typename Index, typename Update>
__global__ void SparseUpdateKernel(Operands<T> operands, const Index* __restrict__ indices,
                                   int64_t rows, int64_t inner, int64_t num_indices) {
  for (int64_t column = GridThreadIndex(); column < inner; column += GridStride()) {
    for (int64_t n = 0; n < num_indices; ++n) {
      const int64_t row = static_cast<int64_t>(indices[n]);
      if (row < 0 || row >= rows) continue;  // out of range: skipped
      Update::Apply(operands, row * inner + column, n * inner + column);
    }
  }
}

// A dense update: UpdateParams, CheckLayout, then one kernel.
template <typename Update>
absl::Status RunDense(const CudaKernelContext& context, absl::string_view layout,
                      const char* name) {
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(UpdateParams params, reader.Get<UpdateParams>());
  if (params.count > static_cast<uint64_t>(kMaxElements)) {
    return absl::InvalidArgumentError("variable has too many elements");
  }
  const int64_t count = static_cast<int64_t>(params.count);
  return Dispatch::Floating(params.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_RETURN_IF_ERROR(CheckLayout(context, layout, sizeof(T), count, count, 0, 0));
    if (count == 0) return absl::OkStatus();
    return Launch(name, *context.device, count, DenseUpdateKernel<T, Update>,
                  OperandsOf<T>(context, params.flags), count);
  });
}

// A sparse update: SparseUpdateParams, CheckLayout (indices at `indices_index`), one kernel.
template <typename Update>
absl::Status RunSparse(const CudaKernelContext& context, absl::string_view layout,
                       size_t indices_index, const char* name) {
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(SparseUpdateParams params, reader.Get<SparseUpdateParams>());
  if (params.rows < 0 || params.inner < 0 || params.num_indices < 0) {
    return absl::InvalidArgumentError("negative sparse update size");
  }
  const __int128 var_count = static_cast<__int128>(params.rows) * params.inner;
  const __int128 grad_count = static_cast<__int128>(params.num_indices) * params.inner;
  if (var_count > kMaxElements || grad_count > kMaxElements || params.num_indices > kMaxElements) {
    return absl::InvalidArgumentError("sparse update has too many elements");
  }
  if (params.index_dtype != DType::kInt32 && params.index_dtype != DType::kInt64) {
    return absl::InvalidArgumentError("indices must be int32 or int64");
  }
  const uint64_t index_size = DTypeSize(params.index_dtype);
  return Dispatch::Floating(params.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_RETURN_IF_ERROR(CheckLayout(context, layout, sizeof(T), static_cast<int64_t>(var_count),
                                     static_cast<int64_t>(grad_count), params.num_indices,
                                     index_size));
    if (grad_count == 0) return absl::OkStatus();
    const Operands<T> operands = OperandsOf<T>(context, params.flags);
    return Dispatch::Index(params.index_dtype, [&](auto index_zero) -> absl::Status {
      using Index = decltype(index_zero);
      return Launch(name, *context.device, params.inner, SparseUpdateKernel<T, Index, Update>,
                    operands, reinterpret_cast<const Index*>(context.buffers[indices_index]),
                    params.rows, params.inner, params.num_indices);
    });
  });
}

// Dense Ftrl: [var, accum, linear, grad, lr, l1, l2, (l2_shrinkage,) lr_power]; sparse Ftrl:
// [var, accum, linear, grad, indices, lr, l1, l2, (l2_shrinkage,) lr_power].
using DenseFtrl = Ftrl<4, 5, 6, 0, 7, false>;
using DenseFtrlV2 = Ftrl<4, 5, 6, 7, 8, false>;
using SparseFtrl = Ftrl<5, 6, 7, 0, 8, true>;
using SparseFtrlV2 = Ftrl<5, 6, 7, 8, 9, true>;

#define VGPU_DENSE_KERNEL(Function, Update, layout, name)       \
  absl::Status Function(const CudaKernelContext& context) {      \
    return RunDense<Update>(context, layout, name);              \
  }
#define VGPU_SPARSE_KERNEL(Function, Update, layout, indices, name) \
  absl::Status Function(const CudaKernelContext& context) {          \
    return RunSparse<Update>(context, layout, indices, name);        \
  }

VGPU_DENSE_KERNEL(ApplyGradientDescent, GradientDescent, "vsg", "apply_gradient_descent")
VGPU_DENSE_KERNEL(ApplyMomentum, Momentum, "vvsgs", "apply_momentum")
VGPU_DENSE_KERNEL(ApplyAdam, Adam, "vvvssssssg", "apply_adam")
VGPU_DENSE_KERNEL(ApplyAdagrad, Adagrad, "vvsg", "apply_adagrad")
VGPU_DENSE_KERNEL(ApplyAdagradV2, AdagradV2, "vvssg", "apply_adagrad_v2")
VGPU_DENSE_KERNEL(ApplyProximalAdagrad, ProximalAdagrad, "vvsssg", "apply_proximal_adagrad")
VGPU_DENSE_KERNEL(ApplyProximalGradientDescent, ProximalGradientDescent, "vsssg",
                  "apply_proximal_gradient_descent")
VGPU_DENSE_KERNEL(ApplyAdadelta, Adadelta, "vvvsssg", "apply_adadelta")
VGPU_DENSE_KERNEL(ApplyRMSProp, RMSProp, "vvvssssg", "apply_rms_prop")
VGPU_DENSE_KERNEL(ApplyCenteredRMSProp, CenteredRMSProp, "vvvvssssg", "apply_centered_rms_prop")
VGPU_DENSE_KERNEL(ApplyAdamWithAmsgrad, AdamWithAmsgrad, "vvvvssssssg",
                  "apply_adam_with_amsgrad")
VGPU_DENSE_KERNEL(ApplyAdaMax, AdaMax, "vvvsssssg", "apply_ada_max")
VGPU_DENSE_KERNEL(ApplyFtrl, DenseFtrl, "vvvgssss", "apply_ftrl")
VGPU_DENSE_KERNEL(ApplyFtrlV2, DenseFtrlV2, "vvvgsssss", "apply_ftrl_v2")
VGPU_DENSE_KERNEL(ApplyKerasMomentum, KerasMomentum<4>, "vvsgs", "apply_keras_momentum")
VGPU_DENSE_KERNEL(ApplyAddSign, AddSign, "vvssssg", "apply_add_sign")
VGPU_DENSE_KERNEL(ApplyPowerSign, PowerSign, "vvssssg", "apply_power_sign")

VGPU_SPARSE_KERNEL(SparseApplyAdagrad, SparseAdagrad, "vvsgi", 4, "sparse_apply_adagrad")
VGPU_SPARSE_KERNEL(SparseApplyAdagradV2, SparseAdagradV2, "vvssgi", 5, "sparse_apply_adagrad_v2")
VGPU_SPARSE_KERNEL(SparseApplyProximalAdagrad, SparseProximalAdagrad, "vvsssgi", 6,
                   "sparse_apply_proximal_adagrad")
VGPU_SPARSE_KERNEL(SparseApplyFtrl, SparseFtrl, "vvvgissss", 4,
                   "sparse_apply_ftrl")
VGPU_SPARSE_KERNEL(SparseApplyFtrlV2, SparseFtrlV2, "vvvgisssss", 4,
                   "sparse_apply_ftrl_v2")
VGPU_SPARSE_KERNEL(SparseApplyKerasMomentum, KerasMomentum<5>, "vvsgis", 4,
                   "sparse_apply_keras_momentum")
VGPU_SPARSE_KERNEL(SparseApplyMomentum, SparseMomentum, "vvsgis", 4, "sparse_apply_momentum")
VGPU_SPARSE_KERNEL(SparseApplyAdadelta, SparseAdadelta, "vvvsssgi", 7, "sparse_apply_adadelta")
VGPU_SPARSE_KERNEL(SparseApplyRMSProp, SparseRMSProp, "vvvssssgi", 8, "sparse_apply_rms_prop")
VGPU_SPARSE_KERNEL(SparseApplyCenteredRMSProp, SparseCenteredRMSProp, "vvvvssssgi", 9,
                   "sparse_apply_centered_rms_prop")
VGPU_SPARSE_KERNEL(SparseApplyProximalGradientDescent, SparseProximalGradientDescent, "vsssgi",
                   5, "sparse_apply_proximal_gradient_descent")

#undef VGPU_DENSE_KERNEL
#undef VGPU_SPARSE_KERNEL

}  // namespace

void AddCudaTrainingKernels(CudaKernelTable& table) {
  table.Add(training::kApplyGradientDescent, "apply_gradient_descent", ApplyGradientDescent);
  table.Add(training::kApplyMomentum, "apply_momentum", ApplyMomentum);
  table.Add(training::kApplyAdam, "apply_adam", ApplyAdam);
  table.Add(training::kApplyAdagrad, "apply_adagrad", ApplyAdagrad);
  table.Add(training::kApplyAdagradV2, "apply_adagrad_v2", ApplyAdagradV2);
  table.Add(training::kApplyProximalAdagrad, "apply_proximal_adagrad", ApplyProximalAdagrad);
  table.Add(training::kApplyProximalGradientDescent, "apply_proximal_gradient_descent",
            ApplyProximalGradientDescent);
  table.Add(training::kApplyAdadelta, "apply_adadelta", ApplyAdadelta);
  table.Add(training::kApplyRMSProp, "apply_rms_prop", ApplyRMSProp);
  table.Add(training::kApplyCenteredRMSProp, "apply_centered_rms_prop", ApplyCenteredRMSProp);
  table.Add(training::kApplyAdamWithAmsgrad, "apply_adam_with_amsgrad", ApplyAdamWithAmsgrad);
  table.Add(training::kApplyAdaMax, "apply_ada_max", ApplyAdaMax);
  table.Add(training::kApplyFtrl, "apply_ftrl", ApplyFtrl);
  table.Add(training::kApplyFtrlV2, "apply_ftrl_v2", ApplyFtrlV2);
  table.Add(training::kApplyKerasMomentum, "apply_keras_momentum", ApplyKerasMomentum);
  table.Add(training::kApplyAddSign, "apply_add_sign", ApplyAddSign);
  table.Add(training::kApplyPowerSign, "apply_power_sign", ApplyPowerSign);
  table.Add(training::kSparseApplyAdagrad, "sparse_apply_adagrad", SparseApplyAdagrad);
  table.Add(training::kSparseApplyAdagradV2, "sparse_apply_adagrad_v2", SparseApplyAdagradV2);
  table.Add(training::kSparseApplyProximalAdagrad, "sparse_apply_proximal_adagrad",
            SparseApplyProximalAdagrad);
  table.Add(training::kSparseApplyFtrl, "sparse_apply_ftrl", SparseApplyFtrl);
  table.Add(training::kSparseApplyFtrlV2, "sparse_apply_ftrl_v2", SparseApplyFtrlV2);
  table.Add(training::kSparseApplyKerasMomentum, "sparse_apply_keras_momentum",
            SparseApplyKerasMomentum);
  table.Add(training::kSparseApplyMomentum, "sparse_apply_momentum", SparseApplyMomentum);
  table.Add(training::kSparseApplyAdadelta, "sparse_apply_adadelta", SparseApplyAdadelta);
  table.Add(training::kSparseApplyRMSProp, "sparse_apply_rms_prop", SparseApplyRMSProp);
  table.Add(training::kSparseApplyCenteredRMSProp, "sparse_apply_centered_rms_prop",
            SparseApplyCenteredRMSProp);
  table.Add(training::kSparseApplyProximalGradientDescent,
            "sparse_apply_proximal_gradient_descent", SparseApplyProximalGradientDescent);
}

}  // namespace vgpu::cuda
