// Kernel ids and launch layouts of the random family (ids 700-799): counter-based random numbers
// that equal TensorFlow's stateless random ops bit for bit (Philox4x32-10 with TensorFlow's
// key/counter layout, its conversions from bits to numbers, and its assignment of Philox
// blocks to output elements). Launched with a parameter block, and either the key and counter
// in it or, with kKeyCounterInBuffers, in device memory (what kKeyCounterFromSeed wrote: the
// seed of a Keras layer lives in a device variable, and reading it back would stall the step).
#ifndef VGPU_PROTOCOL_KERNELS_RANDOM_H_
#define VGPU_PROTOCOL_KERNELS_RANDOM_H_

#include <cstdint>

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::random {

// The parameter block of the Philox kernels.
struct PhiloxParams {
  DType dtype = DType::kFloat32;  // the output's; which ones each kernel takes is listed there
  uint32_t flags = 0;             // 0 or kKeyCounterInBuffers
  uint64_t count = 0;             // elements of the output (at most 2^56)
  uint64_t key = 0;               // TensorFlow's key tensor (shape [1], uint64)
  uint64_t counter[2] = {0, 0};   // TensorFlow's counter tensor (shape [2], uint64)
};

// PhiloxParams::flags: the launch has two more buffers after its output, the key (8 bytes: one
// uint64) and the counter (16 bytes: two uint64), read from device memory when the kernel runs
// in its stream's order; the parameter block's key and counter are ignored.
inline constexpr uint32_t kKeyCounterInBuffers = 1;

// buffers: [y]; params: PhiloxParams (floating dtype). y = uniform [0, 1) numbers, the values
// TensorFlow's StatelessRandomUniformV2 produces for alg = Philox with this key and counter:
// Philox block b gives elements 4b..4b+3 (2b..2b+1 for float64).
inline constexpr KernelId kUniform = KernelId{700};

// buffers: [y]; params: PhiloxParams (floating dtype). y = standard normal numbers as
// StatelessRandomNormalV2: Box-Muller on pairs of words (pairs of 64-bit uniforms for float64),
// computed in float (double for float64) and rounded to the dtype; blocks as kUniform.
inline constexpr KernelId kNormal = KernelId{701};

// buffers: [y]; params: PhiloxParams (floating dtype). y = normal numbers of magnitude < 2 as
// StatelessTruncatedNormalV2: output group g (4 elements, 2 for float64) draws words from block
// g * 256 (g * 128 for float64) on, one word at a time, keeping Box-Muller results with
// |value| < 2 in order until the group is full.
inline constexpr KernelId kTruncatedNormal = KernelId{702};

// buffers: [y]; params: UniformIntParams (dtype kInt32 or kInt64).
// y = minval + (bits mod (maxval - minval)) with wrap-around, as StatelessRandomUniformIntV2:
// 32 bits per element (int32), 64 bits from two words (int64, low word first). maxval > minval.
inline constexpr KernelId kUniformInt = KernelId{703};

struct UniformIntParams {
  PhiloxParams philox;
  int64_t minval = 0;
  int64_t maxval = 0;
};

// buffers: [y]; params: PhiloxParams (dtype kInt32 or kInt64, also for uint32 / uint64: the
// bits are the same). y = the raw bits, as StatelessRandomUniformFullIntV2: one word per 32-bit
// element; for 64-bit elements word 2i is the low half and word 2i+1 the high half.
inline constexpr KernelId kUniformFullInt = KernelId{704};

// buffers: [seed, key, counter]; params: SeedParams. TensorFlow's StatelessRandomGetKeyCounter
// for Philox (the seed pair scrambled by one Philox block, common/philox.h's KeyCounterFromSeed):
// seed holds two int32 or int64 (8 or 16 bytes), key receives one uint64 (8 bytes) and counter
// two (16 bytes).
inline constexpr KernelId kKeyCounterFromSeed = KernelId{705};
struct SeedParams {
  DType dtype = DType::kInt64;  // the seed's: kInt32 or kInt64
  uint32_t reserved = 0;
};

}  // namespace vgpu::random

#endif  // VGPU_PROTOCOL_KERNELS_RANDOM_H_
