// Kernel ids and launch layouts of the activation family (ids 100-199).
#ifndef VGPU_PROTOCOL_KERNELS_ACTIVATION_H_
#define VGPU_PROTOCOL_KERNELS_ACTIVATION_H_

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::activation {

// descriptors: [activation, tensor (x and y share it)]; buffers: [x, y]; params: none.
// y = f(x) for the activation's mode (relu, relu6, sigmoid, tanh), dtype from the tensor.
inline constexpr KernelId kForward = KernelId{100};

// descriptors: [activation, tensor]; buffers: [a, b, out]; params: none.
//   relu, relu6:    a = gradients, b = features (TensorFlow's ReluGrad/Relu6Grad order)
//   sigmoid, tanh:  a = y, b = dy                (TensorFlow's SigmoidGrad/TanhGrad order)
inline constexpr KernelId kBackward = KernelId{101};

}  // namespace vgpu::activation

#endif  // VGPU_PROTOCOL_KERNELS_ACTIVATION_H_
