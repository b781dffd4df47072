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

#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/elementwise_broadcast.h"
#include "plugin/backend/cpu/kernels/elementwise_kernels.h"
#include "plugin/backend/cpu/kernels/float_staging.h"
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
      return FloatToHalf(x + begin, y + begin, end - begin);  // F16C where the CPU has it
    }
    if constexpr (std::is_same_v<In, Eigen::half> && std::is_same_v<Out, float>) {
      return HalfToFloat(x + begin, y + begin, end - begin);
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
