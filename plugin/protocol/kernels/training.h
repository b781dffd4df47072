// Kernel ids and launch layouts of the training family (ids 900-999): the legacy optimizers'
// in-place variable updates (ResourceApply*).
#ifndef VGPU_PROTOCOL_KERNELS_TRAINING_H_
#define VGPU_PROTOCOL_KERNELS_TRAINING_H_

#include <cstdint>

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::training {

// Parameter block of every kernel of the family: the element type, the element count of the
// variable (and of every same-shape buffer), and whether Nesterov momentum is used.
struct UpdateParams {
  DType dtype = DType::kFloat32;
  uint32_t use_nesterov = 0;
  uint64_t count = 0;
};

// buffers: [var, alpha (scalar), delta]; var -= alpha * delta.
inline constexpr KernelId kApplyGradientDescent = KernelId{900};

// buffers: [var, accum, lr (scalar), grad, momentum (scalar)];
// accum = accum * momentum + grad; var -= lr * accum
// (Nesterov: var -= grad * lr + accum * momentum * lr).
inline constexpr KernelId kApplyMomentum = KernelId{901};

// buffers: [var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon (scalars), grad];
// alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power); m += (grad - m) * (1 - beta1);
// v += (grad^2 - v) * (1 - beta2); var -= m * alpha / (sqrt(v) + epsilon)
// (Nesterov: var -= (grad * (1 - beta1) + beta1 * m) * alpha / (sqrt(v) + epsilon)).
inline constexpr KernelId kApplyAdam = KernelId{902};

}  // namespace vgpu::training

#endif  // VGPU_PROTOCOL_KERNELS_TRAINING_H_
