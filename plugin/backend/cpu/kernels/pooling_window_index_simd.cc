// AVX2 and AVX-512 variants of max pooling's window-index kernels (see
// pooling_window_index_simd.h). Each function carries its own target attribute, so this file
// builds with the package's baseline flags and the variants run only where HostCpuIsa() found
// the instructions. The AVX-512 variants take their lanes' loads and stores from a `Lanes`
// class per element type: float as it is; half through vcvtph2ps / vcvtps2ph (exact for the
// values written, which are half values, ±0 or NaN); bfloat16 as the high 16 bits of a float.
//
// The forward pass finds each window's maximum and the slot the gradient takes in one pass over
// the slots, last to first, taking an element when it is >= the running maximum (ordered, so a
// NaN is never taken): the running maximum ends at the largest non-NaN element (-inf when there
// is none) and the slot at the first element equal to it, which is what the portable loops'
// two passes find (a maximum raised by `<` from -inf, then the first slot equal to it). Of equal
// elements (+0 and -0) the first one's value is kept, as there.
#include "plugin/backend/cpu/kernels/pooling_window_index_simd.h"

#include <cstring>
#include <limits>
#include <type_traits>

#include "plugin/protocol/kernels/pooling.h"
#include "unsupported/Eigen/CXX11/Tensor"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define VGPU_WINDOW_INDEX_SIMD 1
// The variants' function attributes.
#define VGPU_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define VGPU_TARGET_AVX2 __attribute__((target("avx2")))
#else
#define VGPU_WINDOW_INDEX_SIMD 0
#endif

namespace vgpu::cpu_kernels {
namespace {

#if VGPU_WINDOW_INDEX_SIMD

constexpr float kLowest = std::numeric_limits<float>::lowest();
constexpr float kInfinity = std::numeric_limits<float>::infinity();

// One row of a unit's tiling windows (output positions (b, od, oh, *)): window ow's first input
// element is at origin + ow * origin_step, its output element at position + ow * channels (both
// at channel c0). The variants loop over rows and windows themselves: a per-window lambda
// would not be inlined into them across the target attributes.
struct WindowRow {
  int64_t origin;
  int64_t origin_step;
  int64_t position;
};

inline WindowRow RowOf(const TilingWindows& t, int64_t b, int64_t c0, int64_t row) {
  const int64_t od = row / t.out[1], oh = row % t.out[1];
  const int64_t in_row = (b * t.in[0] + od * t.stride[0]) * t.in[1] + oh * t.stride[1];
  const int64_t out_row = (b * t.out[0] + od) * t.out[1] + oh;
  return {in_row * t.in[2] * t.channels + c0, t.stride[2] * t.channels,
          out_row * t.out[2] * t.channels + c0};
}

inline int64_t Rows(const TilingWindows& t) { return t.out[0] * t.out[1]; }

// One element of the forward pass, for the lanes a vector variant leaves over.
inline void ForwardElement(const TilingWindows& t, const float* x, int64_t origin, float* y,
                           uint8_t* index) {
  float best = -kInfinity;
  int slot = pooling::kNoWindowSlot;
  for (int s = t.slots - 1; s >= 0; --s) {
    const float v = x[origin + t.slot_offsets[s]];
    if (v >= best) {
      best = v;
      slot = s;
    }
  }
  *y = best < kLowest ? kLowest : best;
  *index = static_cast<uint8_t>(slot | (best > 0.0f ? 0x80 : 0));
}

// One element of the backward pass, for the lanes a vector variant leaves over.
template <bool kThroughRelu>
inline void BackwardElement(const TilingWindows& t, uint8_t index, float grad, float* dx,
                            int64_t origin) {
  const int slot = index & 0x7F;
  float routed = grad;
  if constexpr (kThroughRelu) routed = (index & 0x80) != 0 ? grad : grad * 0.0f;
  for (int s = 0; s < t.slots; ++s) dx[origin + t.slot_offsets[s]] = slot == s ? routed : 0.0f;
}

// --- AVX-512: 16 lanes, the unit's last lanes by masked loads and stores ----------------------

// The lanes of a vector that starts `remaining` channels before the unit's end.
inline __mmask16 LanesFrom(int64_t remaining) {
  return remaining >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << remaining) - 1);
}

// 16 elements of each type as float32 lanes. Load reads only the masked lanes (the others are
// 0; the zero-masking forms throughout also keep GCC from warning about undefined lanes); Store
// writes only the masked lanes, of values that are exact in the type. Lowest() is the
// type's lowest finite value, exact in float.
struct FloatLanes {
  using Element = float;
  static float Lowest() { return kLowest; }
  VGPU_TARGET_AVX512 static __m512 Load(__mmask16 lanes, const float* p) {
    return _mm512_maskz_loadu_ps(lanes, p);
  }
  VGPU_TARGET_AVX512 static void Store(float* p, __mmask16 lanes, __m512 v) {
    _mm512_mask_storeu_ps(p, lanes, v);
  }
};

struct HalfLanes {
  using Element = Eigen::half;
  static float Lowest() { return static_cast<float>(Eigen::NumTraits<Eigen::half>::lowest()); }
  VGPU_TARGET_AVX512 static __m512 Load(__mmask16 lanes, const Eigen::half* p) {
    return _mm512_maskz_cvtph_ps(lanes, _mm256_maskz_loadu_epi16(lanes, p));
  }
  VGPU_TARGET_AVX512 static void Store(Eigen::half* p, __mmask16 lanes, __m512 v) {
    _mm256_mask_storeu_epi16(
        p, lanes, _mm512_maskz_cvtps_ph(lanes, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

struct BFloat16Lanes {
  using Element = Eigen::bfloat16;
  static float Lowest() {
    return static_cast<float>(Eigen::NumTraits<Eigen::bfloat16>::lowest());
  }
  VGPU_TARGET_AVX512 static __m512 Load(__mmask16 lanes, const Eigen::bfloat16* p) {
    const __m512i wide = _mm512_maskz_cvtepu16_epi32(lanes, _mm256_maskz_loadu_epi16(lanes, p));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(lanes, wide, 16));
  }
  VGPU_TARGET_AVX512 static void Store(Eigen::bfloat16* p, __mmask16 lanes, __m512 v) {
    _mm512_mask_cvtepi32_storeu_epi16(p, lanes,
                                      _mm512_maskz_srli_epi32(lanes, _mm512_castps_si512(v), 16));
  }
};

template <typename Lanes>
VGPU_TARGET_AVX512 void ForwardUnitAvx512(
    const TilingWindows& t, const typename Lanes::Element* x, typename Lanes::Element* y,
    uint8_t* window_index, int64_t b, int64_t c0, int64_t width) {
  const __m512 minus_infinity = _mm512_set1_ps(-kInfinity);
  const __m512 lowest = _mm512_set1_ps(Lanes::Lowest());
  const __m512 zero = _mm512_setzero_ps();
  const __m512i no_slot = _mm512_set1_epi32(pooling::kNoWindowSlot);
  const __m512i positive_flag = _mm512_set1_epi32(0x80);
  for (int64_t row = 0; row < Rows(t); ++row) {
    const WindowRow r = RowOf(t, b, c0, row);
    for (int64_t ow = 0; ow < t.out[2]; ++ow) {
      const int64_t origin = r.origin + ow * r.origin_step;
      const int64_t position = r.position + ow * t.channels;
      for (int64_t c = 0; c < width; c += 16) {
        const __mmask16 lanes = LanesFrom(width - c);
        __m512 best = minus_infinity;
        __m512i slot = no_slot;
        for (int s = t.slots - 1; s >= 0; --s) {
          const __m512 v = Lanes::Load(lanes, x + origin + t.slot_offsets[s] + c);
          const __mmask16 take = _mm512_cmp_ps_mask(v, best, _CMP_GE_OQ);
          best = _mm512_mask_mov_ps(best, take, v);
          slot = _mm512_mask_mov_epi32(slot, take, _mm512_set1_epi32(s));
        }
        slot = _mm512_mask_or_epi32(slot, _mm512_cmp_ps_mask(best, zero, _CMP_GT_OQ), slot,
                                    positive_flag);
        const __m512 out =
            _mm512_mask_mov_ps(best, _mm512_cmp_ps_mask(best, lowest, _CMP_LT_OQ), lowest);
        Lanes::Store(y + position + c, lanes, out);
        _mm512_mask_cvtepi32_storeu_epi8(window_index + position + c, lanes, slot);
      }
    }
  }
}

template <typename Lanes, bool kThroughRelu>
VGPU_TARGET_AVX512 void BackwardUnitAvx512(
    const TilingWindows& t, const uint8_t* window_index, const typename Lanes::Element* dy,
    typename Lanes::Element* dx, int64_t b, int64_t c0, int64_t width) {
  const __m512i slot_bits = _mm512_set1_epi32(0x7F);
  const __m512i positive_flag = _mm512_set1_epi32(0x80);
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t row = 0; row < Rows(t); ++row) {
    const WindowRow r = RowOf(t, b, c0, row);
    for (int64_t ow = 0; ow < t.out[2]; ++ow) {
      const int64_t origin = r.origin + ow * r.origin_step;
      const int64_t position = r.position + ow * t.channels;
      for (int64_t c = 0; c < width; c += 16) {
        const __mmask16 lanes = LanesFrom(width - c);
        const __m512i index = _mm512_maskz_cvtepu8_epi32(
            lanes, _mm_maskz_loadu_epi8(lanes, window_index + position + c));
        const __m512i slot = _mm512_and_si512(index, slot_bits);
        const __m512 grad = Lanes::Load(lanes, dy + position + c);
        __m512 routed = grad;
        if constexpr (kThroughRelu) {
          // grad where the maximum was positive, else grad * 0 (NaN for a NaN or infinite grad).
          routed = _mm512_mask_mov_ps(_mm512_mul_ps(grad, zero),
                                      _mm512_test_epi32_mask(index, positive_flag), grad);
        }
        for (int s = 0; s < t.slots; ++s) {
          const __mmask16 here = _mm512_cmpeq_epi32_mask(slot, _mm512_set1_epi32(s));
          Lanes::Store(dx + origin + t.slot_offsets[s] + c, lanes,
                       _mm512_maskz_mov_ps(here, routed));
        }
      }
    }
  }
}

// --- AVX2: 8 lanes, the unit's last (width % 8) channels element by element -----------------

VGPU_TARGET_AVX2 void ForwardUnitAvx2(const TilingWindows& t, const float* x,
                                                     float* y, uint8_t* window_index, int64_t b,
                                                     int64_t c0, int64_t width) {
  const __m256 minus_infinity = _mm256_set1_ps(-kInfinity);
  const __m256 lowest = _mm256_set1_ps(kLowest);
  const __m256 zero = _mm256_setzero_ps();
  const __m256i no_slot = _mm256_set1_epi32(pooling::kNoWindowSlot);
  const __m256i positive_flag = _mm256_set1_epi32(0x80);
  const int64_t vector_width = width - width % 8;
  for (int64_t row = 0; row < Rows(t); ++row) {
    const WindowRow r = RowOf(t, b, c0, row);
    for (int64_t ow = 0; ow < t.out[2]; ++ow) {
      const int64_t origin = r.origin + ow * r.origin_step;
      const int64_t position = r.position + ow * t.channels;
      for (int64_t c = 0; c < vector_width; c += 8) {
        __m256 best = minus_infinity;
        __m256i slot = no_slot;
        for (int s = t.slots - 1; s >= 0; --s) {
          const __m256 v = _mm256_loadu_ps(x + origin + t.slot_offsets[s] + c);
          const __m256 take = _mm256_cmp_ps(v, best, _CMP_GE_OQ);
          best = _mm256_blendv_ps(best, v, take);
          slot = _mm256_castps_si256(_mm256_blendv_ps(
              _mm256_castsi256_ps(slot), _mm256_castsi256_ps(_mm256_set1_epi32(s)), take));
        }
        const __m256i positive = _mm256_castps_si256(_mm256_cmp_ps(best, zero, _CMP_GT_OQ));
        slot = _mm256_or_si256(slot, _mm256_and_si256(positive, positive_flag));
        _mm256_storeu_ps(y + position + c,
                         _mm256_blendv_ps(best, lowest, _mm256_cmp_ps(best, lowest, _CMP_LT_OQ)));
        // Eight 32-bit slots (each < 256) to eight bytes.
        const __m128i halves = _mm_packus_epi32(_mm256_castsi256_si128(slot),
                                                _mm256_extracti128_si256(slot, 1));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(window_index + position + c),
                         _mm_packus_epi16(halves, halves));
      }
      for (int64_t c = vector_width; c < width; ++c) {
        ForwardElement(t, x, origin + c, y + position + c, window_index + position + c);
      }
    }
  }
}

template <bool kThroughRelu>
VGPU_TARGET_AVX2 void BackwardUnitAvx2(const TilingWindows& t,
                                                      const uint8_t* window_index,
                                                      const float* dy, float* dx, int64_t b,
                                                      int64_t c0, int64_t width) {
  const __m256i slot_bits = _mm256_set1_epi32(0x7F);
  const __m256i positive_flag = _mm256_set1_epi32(0x80);
  const __m256 zero = _mm256_setzero_ps();
  const int64_t vector_width = width - width % 8;
  for (int64_t row = 0; row < Rows(t); ++row) {
    const WindowRow r = RowOf(t, b, c0, row);
    for (int64_t ow = 0; ow < t.out[2]; ++ow) {
      const int64_t origin = r.origin + ow * r.origin_step;
      const int64_t position = r.position + ow * t.channels;
      for (int64_t c = 0; c < vector_width; c += 8) {
        int64_t bytes;
        std::memcpy(&bytes, window_index + position + c, sizeof(bytes));
        const __m256i index = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes));
        const __m256i slot = _mm256_and_si256(index, slot_bits);
        const __m256 grad = _mm256_loadu_ps(dy + position + c);
        __m256 routed = grad;
        if constexpr (kThroughRelu) {
          const __m256i positive =
              _mm256_cmpeq_epi32(_mm256_and_si256(index, positive_flag), positive_flag);
          routed = _mm256_blendv_ps(_mm256_mul_ps(grad, zero), grad, _mm256_castsi256_ps(positive));
        }
        for (int s = 0; s < t.slots; ++s) {
          const __m256i here = _mm256_cmpeq_epi32(slot, _mm256_set1_epi32(s));
          _mm256_storeu_ps(dx + origin + t.slot_offsets[s] + c,
                           _mm256_and_ps(_mm256_castsi256_ps(here), routed));
        }
      }
      for (int64_t c = vector_width; c < width; ++c) {
        BackwardElement<kThroughRelu>(t, window_index[position + c], dy[position + c], dx,
                                      origin + c);
      }
    }
  }
}

// The AVX-512 lanes of each element type.
template <typename T>
struct LanesOf;
template <>
struct LanesOf<float> {
  using type = FloatLanes;
};
template <>
struct LanesOf<Eigen::half> {
  using type = HalfLanes;
};
template <>
struct LanesOf<Eigen::bfloat16> {
  using type = BFloat16Lanes;
};

#endif  // VGPU_WINDOW_INDEX_SIMD

}  // namespace

template <typename T>
WindowIndexForwardUnit<T> WindowIndexForwardUnitFor(CpuIsa isa) {
#if VGPU_WINDOW_INDEX_SIMD
  if (isa == CpuIsa::kAvx512) return ForwardUnitAvx512<typename LanesOf<T>::type>;
  if constexpr (std::is_same_v<T, float>) {
    if (isa == CpuIsa::kAvx2) return ForwardUnitAvx2;
  }
#endif
  (void)isa;
  return nullptr;
}

template <typename T>
WindowIndexBackwardUnit<T> WindowIndexBackwardUnitFor(CpuIsa isa, bool through_relu) {
#if VGPU_WINDOW_INDEX_SIMD
  using Lanes = typename LanesOf<T>::type;
  if (isa == CpuIsa::kAvx512) {
    return through_relu ? BackwardUnitAvx512<Lanes, true> : BackwardUnitAvx512<Lanes, false>;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (isa == CpuIsa::kAvx2) {
      return through_relu ? BackwardUnitAvx2<true> : BackwardUnitAvx2<false>;
    }
  }
#endif
  (void)isa;
  (void)through_relu;
  return nullptr;
}

template WindowIndexForwardUnit<float> WindowIndexForwardUnitFor<float>(CpuIsa);
template WindowIndexForwardUnit<Eigen::half> WindowIndexForwardUnitFor<Eigen::half>(CpuIsa);
template WindowIndexForwardUnit<Eigen::bfloat16> WindowIndexForwardUnitFor<Eigen::bfloat16>(
    CpuIsa);
template WindowIndexBackwardUnit<float> WindowIndexBackwardUnitFor<float>(CpuIsa, bool);
template WindowIndexBackwardUnit<Eigen::half> WindowIndexBackwardUnitFor<Eigen::half>(CpuIsa,
                                                                                     bool);
template WindowIndexBackwardUnit<Eigen::bfloat16> WindowIndexBackwardUnitFor<Eigen::bfloat16>(
    CpuIsa, bool);

}  // namespace vgpu::cpu_kernels
