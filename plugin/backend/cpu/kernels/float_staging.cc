// The array conversions of float_staging.h: half <-> float with F16C where the CPU has it,
// bfloat16 <-> float on the bits.
#include "plugin/backend/cpu/kernels/float_staging.h"

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace vgpu::cpu_kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// Compiled for F16C only here; called only when the CPU has it.
__attribute__((target("avx,f16c"))) void FloatToHalfF16c(const float* in, Eigen::half* out,
                                                         int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i halves =
        _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), halves);
  }
  for (; i < n; ++i) out[i] = Eigen::half(in[i]);
}

__attribute__((target("avx,f16c"))) void HalfToFloatF16c(const Eigen::half* in, float* out,
                                                         int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(halves));
  }
  for (; i < n; ++i) out[i] = static_cast<float>(in[i]);
}

bool HasF16c() {
  // F16C from CPUID leaf 1 (ECX bit 29): not every compiler knows "f16c" as a feature name.
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    return __builtin_cpu_supports("avx") && (ecx & (1u << 29)) != 0;
  }();
  return has;
}
#else
constexpr bool HasF16c() { return false; }
void FloatToHalfF16c(const float*, Eigen::half*, int64_t) {}
void HalfToFloatF16c(const Eigen::half*, float*, int64_t) {}
#endif

}  // namespace

void HalfToFloat(const Eigen::half* in, float* out, int64_t n) {
  if (HasF16c()) return HalfToFloatF16c(in, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
}

void FloatToHalf(const float* in, Eigen::half* out, int64_t n) {
  if (HasF16c()) return FloatToHalfF16c(in, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = Eigen::half(in[i]);
}

// The bfloat16 loops are integer work, which the package's baseline (AVX, no AVX2) vectorises
// 128 bits at a time: GCC compiles each for AVX2 and AVX-512 as well and picks the clone for
// the CPU when the library loads (an ifunc).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VGPU_INTEGER_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VGPU_INTEGER_VECTOR_CLONES
#endif

// A bfloat16 is the high half of a float's bits: widening is exact.
VGPU_INTEGER_VECTOR_CLONES __attribute__((optimize("vect-cost-model=dynamic"))) void BFloat16ToFloat(
    const Eigen::bfloat16* in, float* out, int64_t n) {
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(in);
  uint32_t* wide = reinterpret_cast<uint32_t*>(out);
  for (int64_t i = 0; i < n; ++i) wide[i] = static_cast<uint32_t>(bits[i]) << 16;
}

// Round to nearest even on the bits; a NaN becomes bfloat16's quiet NaN of its sign (Eigen's
// rule).
VGPU_INTEGER_VECTOR_CLONES __attribute__((optimize("vect-cost-model=dynamic"))) void FloatToBFloat16(
    const float* in, Eigen::bfloat16* out, int64_t n) {
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(in);
  uint16_t* narrow = reinterpret_cast<uint16_t*>(out);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t b = bits[i];
    const bool nan = (b & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
    narrow[i] = static_cast<uint16_t>(nan ? (((b >> 16) & 0x8000u) | 0x7fc0u) : rounded);
  }
}

}  // namespace vgpu::cpu_kernels
