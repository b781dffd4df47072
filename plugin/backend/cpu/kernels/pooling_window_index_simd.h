// Max pooling's window-index kernels (pooling::kForwardWithWindowIndex,
// kBackwardFromWindowIndex and its through-ReLU form) written with AVX2 and AVX-512 intrinsics,
// one work unit at a time: an image's windows that tile the input, over a block of channels.
// float32 has both; half and bfloat16 have AVX-512 variants, which compare and route in float32
// lanes loaded straight from the 16-bit tensors (every value they write is one they read, ±0 or
// a NaN, so nothing rounds). pooling_kernels.cc runs these instead of its portable loops when
// HostCpuIsa() (cpu_isa.h) allows; the results are the portable loops' bit for bit (the
// conformance tests run both). Pure functions of their arguments; thread-safe on disjoint
// outputs.
#ifndef VGPU_BACKEND_CPU_KERNELS_POOLING_WINDOW_INDEX_SIMD_H_
#define VGPU_BACKEND_CPU_KERNELS_POOLING_WINDOW_INDEX_SIMD_H_

#include <cstdint>

#include "plugin/backend/cpu/cpu_isa.h"

namespace Eigen {
struct half;
struct bfloat16;
}  // namespace Eigen

namespace vgpu::cpu_kernels {

// Windows that tile a channels-last input (stride = window, no padding, each window inside the
// input), described for one work unit.
struct TilingWindows {
  const int64_t* in;      // input positions per dimension (depth, height, width)
  const int64_t* out;     // output positions per dimension
  const int64_t* stride;  // = the window
  int64_t channels;       // elements per position
  const int64_t* slot_offsets;  // element offsets of a window's slots from its first element
  int slots;                    // window size, < pooling::kNoWindowSlot
};

// Writes y and window_index for image `b`, channels [c0, c0 + width) (width <= 64), as
// pooling_kernels.cc's MaxPoolForwardWithWindowIndex does. T is float, Eigen::half or
// Eigen::bfloat16.
template <typename T>
using WindowIndexForwardUnit = void (*)(const TilingWindows& windows, const T* x, T* y,
                                        uint8_t* window_index, int64_t b, int64_t c0,
                                        int64_t width);
// Writes dx at every slot of every tiling window of the unit (the routed gradient or 0), as
// MaxPoolBackwardFromWindowIndex does; positions no window covers are not touched.
template <typename T>
using WindowIndexBackwardUnit = void (*)(const TilingWindows& windows,
                                         const uint8_t* window_index, const T* dy, T* dx,
                                         int64_t b, int64_t c0, int64_t width);

// The variant of element type T for `isa`, or null where there is none (CpuIsa::kBaseline
// always; the 16-bit types below CpuIsa::kAvx512): the portable loops run then. Defined for
// float, Eigen::half and Eigen::bfloat16.
template <typename T>
WindowIndexForwardUnit<T> WindowIndexForwardUnitFor(CpuIsa isa);
template <typename T>
WindowIndexBackwardUnit<T> WindowIndexBackwardUnitFor(CpuIsa isa, bool through_relu);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_POOLING_WINDOW_INDEX_SIMD_H_
