// Kernel ids and launch layouts of the training family (ids 900-999): the optimizers' in-place
// variable updates (ResourceApply*, ResourceSparseApply*), with the arithmetic of TensorFlow's
// CPU functors (training_ops.cc), expression for expression.
//
// Buffers follow the op's inputs in order. Dense kernels: every variable and the gradient hold
// `count` elements; hyper-parameters are scalars (one element). Sparse kernels: the variables
// are [rows, inner], the gradient [num_indices, inner], the indices [num_indices] (int32 or
// int64); the rows named by the indices are updated one index after the other, in index order
// (duplicates update a row several times, as TensorFlow's serial CPU loops do), and an index
// outside [0, rows) is skipped (TensorFlow's GPU kernels). dtype: the floating-point types.
#ifndef VGPU_PROTOCOL_KERNELS_TRAINING_H_
#define VGPU_PROTOCOL_KERNELS_TRAINING_H_

#include <cstdint>

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::training {

// Bits of the `flags` field (the ops' boolean attributes).
inline constexpr uint32_t kUseNesterov = 1u << 0;          // use_nesterov
inline constexpr uint32_t kUpdateSlots = 1u << 1;          // update_slots (Adagrad)
inline constexpr uint32_t kMultiplyLinearByLr = 1u << 2;   // multiply_linear_by_lr (Ftrl)

// Parameter block of every dense kernel.
struct UpdateParams {
  DType dtype = DType::kFloat32;
  uint32_t flags = 0;
  uint64_t count = 0;
};

// Parameter block of every sparse kernel.
struct SparseUpdateParams {
  DType dtype = DType::kFloat32;
  DType index_dtype = DType::kInt32;
  uint32_t flags = 0;
  uint32_t reserved = 0;
  int64_t rows = 0;
  int64_t inner = 0;
  int64_t num_indices = 0;
};

// Dense kernels. "buffers" lists the op's inputs; the formula is TensorFlow's CPU functor.

// buffers: [var, alpha, delta]; var -= delta * alpha.
inline constexpr KernelId kApplyGradientDescent = KernelId{900};

// buffers: [var, accum, lr, grad, momentum]; accum = accum * momentum + grad;
// var -= accum * lr (Nesterov: var -= grad * lr + accum * momentum * lr).
inline constexpr KernelId kApplyMomentum = KernelId{901};

// buffers: [var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad];
// alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power); m += (grad - m) * (1 - beta1);
// v += (grad^2 - v) * (1 - beta2); var -= m * alpha / (sqrt(v) + epsilon)
// (Nesterov: var -= (grad * (1 - beta1) + beta1 * m) * alpha / (sqrt(v) + epsilon)).
inline constexpr KernelId kApplyAdam = KernelId{902};

// buffers: [var, accum, lr, grad]; accum += grad^2 (if kUpdateSlots);
// var -= grad * lr * rsqrt(accum).
inline constexpr KernelId kApplyAdagrad = KernelId{903};

// buffers: [var, accum, lr, epsilon, grad]; accum += grad^2 (if kUpdateSlots);
// var -= grad * lr / (sqrt(accum) + epsilon).
inline constexpr KernelId kApplyAdagradV2 = KernelId{904};

// buffers: [var, accum, lr, l1, l2, grad]; accum += grad^2; rate = lr * rsqrt(accum);
// var -= grad * rate; var = sign(var) * max(|var| - rate * l1, 0) / (1 + l2 * rate) if l1 > 0,
// else var / (1 + l2 * rate).
inline constexpr KernelId kApplyProximalAdagrad = KernelId{905};

// buffers: [var, alpha, l1, l2, delta]; as kApplyProximalAdagrad with rate = alpha and no
// accumulator.
inline constexpr KernelId kApplyProximalGradientDescent = KernelId{906};

// buffers: [var, accum, accum_update, lr, rho, epsilon, grad];
// accum = accum * rho + grad^2 * (1 - rho);
// update = sqrt(accum_update + epsilon) * rsqrt(accum + epsilon) * grad; var -= update * lr;
// accum_update = accum_update * rho + update^2 * (1 - rho).
inline constexpr KernelId kApplyAdadelta = KernelId{907};

// buffers: [var, ms, mom, lr, rho, momentum, epsilon, grad];
// ms += (grad^2 - ms) * (1 - rho); mom = mom * momentum + grad * lr / sqrt(ms + epsilon);
// var -= mom.
inline constexpr KernelId kApplyRMSProp = KernelId{908};

// buffers: [var, mg, ms, mom, lr, rho, momentum, epsilon, grad];
// ms += (grad^2 - ms) * (1 - rho); mg += (grad - mg) * (1 - rho);
// mom = mom * momentum + grad * lr / sqrt(ms - mg^2 + epsilon); var -= mom.
inline constexpr KernelId kApplyCenteredRMSProp = KernelId{909};

// buffers: [var, m, v, vhat, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad];
// as kApplyAdam (no Nesterov), then vhat = max(vhat, v) and var -= m * alpha / (sqrt(vhat) +
// epsilon).
inline constexpr KernelId kApplyAdamWithAmsgrad = KernelId{910};

// buffers: [var, m, v, beta1_power, lr, beta1, beta2, epsilon, grad];
// m += (grad - m) * (1 - beta1); v = max(beta2 * v, |grad|);
// var -= lr / (1 - beta1_power) * (m / (v + epsilon)).
inline constexpr KernelId kApplyAdaMax = KernelId{911};

// buffers: [var, accum, linear, grad, lr, l1, l2, lr_power] (flags: kMultiplyLinearByLr).
// new_accum = accum + grad^2; p(x) = sqrt(x) if lr_power == -0.5 else x^-lr_power;
// linear += grad - (p(new_accum) - p(accum)) / lr * var
//   (kMultiplyLinearByLr: linear += grad * lr - (p(new_accum) - p(accum)) * var);
// var = (sign(linear) * l1 - linear) / (p(new_accum) / lr + 2 * l2) where |linear| > l1, else 0
//   (kMultiplyLinearByLr: l1 * lr in place of l1 and p(new_accum) + 2 * l2 * lr as divisor);
// accum = new_accum.
inline constexpr KernelId kApplyFtrl = KernelId{912};

// buffers: [var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power]; as kApplyFtrl with
// grad + 2 * l2_shrinkage * var in place of grad in the linear update.
inline constexpr KernelId kApplyFtrlV2 = KernelId{913};

// buffers: [var, accum, lr, grad, momentum]; accum = accum * momentum - grad * lr;
// var += accum (Nesterov: var += accum * momentum - grad * lr).
inline constexpr KernelId kApplyKerasMomentum = KernelId{914};

// buffers: [var, m, lr, alpha, sign_decay, beta, grad]; m = m * beta + grad * (1 - beta);
// var -= lr * (alpha + sign_decay * sign(grad) * sign(m)) * grad.
inline constexpr KernelId kApplyAddSign = KernelId{915};

// buffers: [var, m, lr, logbase, sign_decay, beta, grad]; m = m * beta + grad * (1 - beta);
// var -= lr * exp(logbase * sign_decay * sign(grad) * sign(m)) * grad.
inline constexpr KernelId kApplyPowerSign = KernelId{916};

// buffers: [var, m, v, alpha, one_minus_beta1, one_minus_beta2, epsilon, grad]; Keras' Adam
// (and AdamW) update step, whose step size and (1 - beta) factors Keras computes itself:
// m += (grad - m) * one_minus_beta1; v += (grad^2 - v) * one_minus_beta2;
// var -= m * alpha / (sqrt(v) + epsilon).
inline constexpr KernelId kApplyKerasAdam = KernelId{917};

// Sparse kernels (SparseUpdateParams): per index i in order, row r = indices[i], g = grad[i].

// buffers: [var, accum, lr, grad, indices]; accum[r] += g^2 (if kUpdateSlots);
// var[r] -= lr * g * rsqrt(accum[r]).
inline constexpr KernelId kSparseApplyAdagrad = KernelId{950};

// buffers: [var, accum, lr, epsilon, grad, indices]; accum[r] += g^2 (if kUpdateSlots);
// var[r] -= lr * g / (sqrt(accum[r]) + epsilon).
inline constexpr KernelId kSparseApplyAdagradV2 = KernelId{951};

// buffers: [var, accum, lr, l1, l2, grad, indices]; kApplyProximalAdagrad on row r.
inline constexpr KernelId kSparseApplyProximalAdagrad = KernelId{952};

// buffers: [var, accum, linear, grad, indices, lr, l1, l2, lr_power] (kMultiplyLinearByLr);
// kApplyFtrl on row r, the l1 term as TensorFlow's sparse functor writes it:
// var = (clamp(linear, -l1, l1) - linear) / divisor.
inline constexpr KernelId kSparseApplyFtrl = KernelId{953};

// buffers: [var, accum, linear, grad, indices, lr, l1, l2, l2_shrinkage, lr_power];
// kSparseApplyFtrl with the shrinkage gradient of kApplyFtrlV2.
inline constexpr KernelId kSparseApplyFtrlV2 = KernelId{954};

// buffers: [var, accum, lr, grad, indices, momentum] (kUseNesterov); kApplyKerasMomentum on
// row r.
inline constexpr KernelId kSparseApplyKerasMomentum = KernelId{955};

// Sparse updates TensorFlow has as CPU kernels only (its GPU build cannot apply them to a GPU
// variable); the formulas are those CPU kernels'.

// buffers: [var, accum, lr, grad, indices, momentum] (kUseNesterov); accum[r] =
// accum[r] * momentum + g; var[r] -= lr * accum[r] (Nesterov: var[r] -= lr * g +
// lr * momentum * accum[r]).
inline constexpr KernelId kSparseApplyMomentum = KernelId{956};

// buffers: [var, accum, accum_update, lr, rho, epsilon, grad, indices]; kApplyAdadelta on row r.
inline constexpr KernelId kSparseApplyAdadelta = KernelId{957};

// buffers: [var, ms, mom, lr, rho, momentum, epsilon, grad, indices];
// ms[r] = ms[r] * rho + g^2 * (1 - rho); mom[r] = mom[r] * momentum +
// rsqrt(ms[r] + epsilon) * lr * g; var[r] -= mom[r].
inline constexpr KernelId kSparseApplyRMSProp = KernelId{958};

// buffers: [var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices]; as
// kSparseApplyRMSProp with mg[r] = mg[r] * rho + g * (1 - rho) and rsqrt(ms[r] + epsilon -
// mg[r]^2) in place of rsqrt(ms[r] + epsilon).
inline constexpr KernelId kSparseApplyCenteredRMSProp = KernelId{959};

// buffers: [var, alpha, l1, l2, grad, indices]; kApplyProximalGradientDescent on row r.
inline constexpr KernelId kSparseApplyProximalGradientDescent = KernelId{960};

}  // namespace vgpu::training

#endif  // VGPU_PROTOCOL_KERNELS_TRAINING_H_
