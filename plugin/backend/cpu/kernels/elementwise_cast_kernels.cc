// Cast between every pair of the protocol's dtypes (elementwise::kCast) on the CPU backing
// executor: Eigen's conversions, which TensorFlow's CPU Cast kernel uses too, so that floating
// to integer truncates toward zero, float to half/bfloat16 rounds to nearest even, and bool
// maps to and from 0/1. With `truncate`, the narrowing floating conversions TensorFlow's Cast
// truncates first drop the source mantissa bits the destination cannot hold (NaN untouched).
// The launch layer (launch/elementwise_launch.h) reads and validates the launch.
#define EIGEN_USE_THREADS
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/elementwise_broadcast.h"
#include "plugin/backend/cpu/kernels/elementwise_kernels.h"
#include "plugin/backend/launch/element_conversions.h"
#include "plugin/backend/launch/elementwise_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/elementwise.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

// Clears the `kBits` least significant mantissa bits of a float or double that is not NaN.
template <typename T, int kBits>
struct ClearLowMantissaBits {
  T operator()(const T& x) const {
    if (Eigen::numext::isnan(x)) return x;
    using Bits = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
    Bits bits;
    std::memcpy(&bits, &x, sizeof(T));
    bits &= ~((Bits{1} << kBits) - 1);
    T cleared;
    std::memcpy(&cleared, &bits, sizeof(T));
    return cleared;
  }
};

// Mantissa bits (hidden bit included) of the floating types a truncating cast involves.
template <typename T>
constexpr int MantissaBits() {
  if constexpr (std::is_same_v<T, double>) return 53;
  if constexpr (std::is_same_v<T, float>) return 24;
  if constexpr (std::is_same_v<T, Eigen::half>) return 11;
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) return 8;
  return 0;
}

// Floating point to integer as TensorFlow's CPU Cast converts on x86
// (launch/element_conversions.h), as an Eigen functor.
template <typename In, typename Out>
struct FloatingToIntegerFunctor {
  Out operator()(const In& x) const { return FloatingToInteger<Out>(static_cast<double>(x)); }
};

template <typename T>
inline constexpr bool kIsFloating = !Eigen::NumTraits<T>::IsInteger;

// The conversions for which TensorFlow's Cast honours Truncate.
template <typename In, typename Out>
constexpr bool kHonoursTruncate =
    (std::is_same_v<In, double> &&
     (std::is_same_v<Out, float> || std::is_same_v<Out, Eigen::half>)) ||
    (std::is_same_v<In, float> &&
     (std::is_same_v<Out, Eigen::half> || std::is_same_v<Out, Eigen::bfloat16>));

#if defined(__x86_64__) || defined(__i386__)
// float <-> half with the F16C instructions (TensorFlow's wheel converts with them too; the
// results equal Eigen's round-to-nearest-even software conversion, about ten times faster).
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

template <typename In, typename Out>
absl::Status RunCast(const KernelContext& context, int64_t count, bool truncate) {
  VGPU_ASSIGN_OR_RETURN(const In* x, context.Buffer<const In>(0, count));
  VGPU_ASSIGN_OR_RETURN(Out* y, context.Buffer<Out>(1, count));
  const Eigen::TensorOpCost cost = ElementCost(sizeof(In), sizeof(Out), 1);
  ParallelBlocks(*context.device, count, cost, [&](int64_t begin, int64_t end) {
    ConstFlatMap<In> input(x + begin, end - begin);
    FlatMap<Out> output(y + begin, end - begin);
    if constexpr (kHonoursTruncate<In, Out>) {
      if (truncate) {
        constexpr int kBits = MantissaBits<In>() - MantissaBits<Out>();
        output = input.unaryExpr(ClearLowMantissaBits<In, kBits>()).template cast<Out>();
        return;
      }
    }
    if constexpr (std::is_same_v<In, float> && std::is_same_v<Out, Eigen::half>) {
      if (HasF16c()) return FloatToHalfF16c(x + begin, y + begin, end - begin);
    }
    if constexpr (std::is_same_v<In, Eigen::half> && std::is_same_v<Out, float>) {
      if (HasF16c()) return HalfToFloatF16c(x + begin, y + begin, end - begin);
    }
    if constexpr (kIsFloating<In> && !kIsFloating<Out> && !std::is_same_v<Out, bool>) {
      output = input.unaryExpr(FloatingToIntegerFunctor<In, Out>());
    } else {
      output = input.template cast<Out>();
    }
  });
  return absl::OkStatus();
}

}  // namespace

// elementwise::kCast: y = cast(x).
absl::Status ElementwiseCast(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(elementwise_launch::CastLaunch launch,
                        elementwise_launch::ReadCastLaunch(context));
  return Dispatch::All(launch.source, [&](auto in_zero) -> absl::Status {
    return Dispatch::All(launch.destination, [&](auto out_zero) -> absl::Status {
      return RunCast<decltype(in_zero), decltype(out_zero)>(context, launch.count,
                                                            launch.truncate);
    });
  });
}

}  // namespace vgpu::cpu_kernels
