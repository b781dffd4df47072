// Kernel ids and launch layouts of the activation family (ids 100-199).
#ifndef VGPU_PROTOCOL_KERNELS_ACTIVATION_H_
#define VGPU_PROTOCOL_KERNELS_ACTIVATION_H_

#include <cstdint>

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::activation {

// descriptors: [activation, tensor (x and y share it)]; buffers: [x, y]; params: none.
// y = f(x) for the activation's mode, dtype from the tensor (float32, float64, float16,
// bfloat16), with TensorFlow's CPU formulas:
//   relu       max(x, 0)                       relu6     min(max(x, 0), 6)
//   sigmoid    1 / (1 + exp(-x))               tanh      tanh(x)
//   elu        x < 0 ? exp(x) - 1 : x          selu      x < 0 ? sa * (exp(x) - 1) : s * x
//   softplus   x > -t ? x : (x < t ? exp(x) : log1p(exp(x))), t = log(epsilon) + 2
//   softsign   x / (|x| + 1)                   leaky     x > 0 ? x : x * coef
// (s = 1.0507009873554805, sa = 1.7580993408473769; constants and coef rounded to the dtype).
inline constexpr KernelId kForward = KernelId{100};

// descriptors: [activation, tensor]; buffers: [a, b, out]; params: none. TensorFlow's gradient
// ops, with their input order:
//   relu, relu6, leaky: a = gradients, b = features   out = a where b is in the linear range
//                                                      (leaky: a * coef elsewhere), else 0
//   sigmoid, tanh:      a = y, b = dy                  out = dy * y * (1 - y) | dy * (1 - y^2)
//   elu, selu:          a = gradients, b = outputs     out = b < 0 ? a * (b + 1) : a
//                                                      (selu: a * (b + sa) : a * s)
//   softplus:           a = gradients, b = features    out = a / (exp(-b) + 1)
//   softsign:           a = gradients, b = features    out = a / (|b| + 1)^2
inline constexpr KernelId kBackward = KernelId{101};

// Relu of qint8 (TensorFlow's GPU kernel for Relu<qint8>, which works on 4 bytes at a time and
// so needs an element count that is a multiple of 4). descriptors: none; buffers: [x, y] of
// `count` int8 each; params: ReluInt8Params. y = max(x, 0), each byte a signed integer.
inline constexpr KernelId kReluInt8 = KernelId{102};

struct ReluInt8Params {
  int64_t count = 0;  // a multiple of 4
};

}  // namespace vgpu::activation

#endif  // VGPU_PROTOCOL_KERNELS_ACTIVATION_H_
