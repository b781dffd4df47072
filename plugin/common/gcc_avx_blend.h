// Force-included into every C++ source of the project (CMakeLists.txt: vgpu_build_flags), before
// anything else. It matters only to GCC compiling for a CPU with AVX but not AVX2, which is the
// portable build's target (x86-64-v2 + AVX, as TensorFlow's wheel requires).
//
// There GCC (12 at least) folds _mm256_blendv_ps / _mm256_blendv_pd into a vector select on the
// sign of each lane of an integer vector and, without AVX2's 256-bit integer compare, lowers
// that select one lane at a time with a branch each: 8 branches per float packet, mispredicted
// half the time when the condition follows the data. Eigen's pselect for Packet8f and Packet4d
// is that intrinsic, so every select an Eigen kernel evaluated paid it: the ELU family's and
// leaky ReLU's kernels and their gradients ran 5-7x slower than TensorFlow-CPU's (built with
// clang, which keeps the one vblendvps).
//
// The replacement below is the same select as bitwise operations (and, andnot, or: three vector
// instructions, no branch). It gives the same bits as blendv wherever each mask lane is all
// ones or all zeros, as every mask Eigen passes is (a comparison's result; Eigen's generic
// pselect is this bitwise select) and as the project's own masks are (comparisons).
#ifndef VGPU_COMMON_GCC_AVX_BLEND_H_
#define VGPU_COMMON_GCC_AVX_BLEND_H_

#if defined(__cplusplus) && defined(__GNUC__) && !defined(__clang__) && defined(__AVX__) && \
    !defined(__AVX2__)
#include <immintrin.h>

// blendv(b, a, mask): a where the mask lane is set, else b.
static inline __attribute__((always_inline)) __m256 VgpuBitwiseBlendPs(__m256 b, __m256 a,
                                                                        __m256 mask) {
  return _mm256_or_ps(_mm256_and_ps(mask, a), _mm256_andnot_ps(mask, b));
}
static inline __attribute__((always_inline)) __m256d VgpuBitwiseBlendPd(__m256d b, __m256d a,
                                                                         __m256d mask) {
  return _mm256_or_pd(_mm256_and_pd(mask, a), _mm256_andnot_pd(mask, b));
}
#define _mm256_blendv_ps(b, a, mask) VgpuBitwiseBlendPs((b), (a), (mask))
#define _mm256_blendv_pd(b, a, mask) VgpuBitwiseBlendPd((b), (a), (mask))
#define VGPU_BITWISE_AVX_BLEND 1
#endif

#endif  // VGPU_COMMON_GCC_AVX_BLEND_H_
