// Kernel ids and launch layouts of the random family (ids 700-799): counter-based random numbers
// that equal TensorFlow's stateless random ops bit for bit (Philox4x32-10 with TensorFlow's
// key/counter layout and its uint -> float conversions). Launched with a parameter block only.
#ifndef VGPU_PROTOCOL_KERNELS_RANDOM_H_
#define VGPU_PROTOCOL_KERNELS_RANDOM_H_

#include <cstdint>

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::random {

// The parameter block of the Philox kernels.
struct PhiloxParams {
  DType dtype = DType::kFloat32;  // kFloat32, kFloat64, kFloat16 or kBFloat16
  uint32_t reserved = 0;
  uint64_t count = 0;             // elements of the output
  uint64_t key = 0;               // TensorFlow's key tensor (shape [1], uint64)
  uint64_t counter[2] = {0, 0};   // TensorFlow's counter tensor (shape [2], uint64)
};

// buffers: [y]; params: PhiloxParams. y = uniform [0, 1) numbers of `dtype`, the values
// TensorFlow's StatelessRandomUniformV2 produces for alg = Philox with this key and counter.
inline constexpr KernelId kUniform = KernelId{700};

}  // namespace vgpu::random

#endif  // VGPU_PROTOCOL_KERNELS_RANDOM_H_
