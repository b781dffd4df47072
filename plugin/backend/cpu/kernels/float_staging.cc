// half <-> float array conversions of float_staging.h: F16C where the CPU has it.
#include "plugin/backend/cpu/kernels/float_staging.h"

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

}  // namespace vgpu::cpu_kernels
