// Cast between every pair of the protocol's dtypes (elementwise::kCast) on the CPU backing
// executor: Eigen's conversions, which TensorFlow's CPU Cast kernel uses too, so that floating
// to integer truncates toward zero, float to half/bfloat16 rounds to nearest even, and bool
// maps to and from 0/1. With `truncate`, the narrowing floating conversions TensorFlow's Cast
// truncates first drop the source mantissa bits the destination cannot hold (NaN untouched).
#define EIGEN_USE_THREADS
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/elementwise_broadcast.h"
#include "plugin/backend/cpu/kernels/elementwise_kernels.h"
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
    output = input.template cast<Out>();
  });
  return absl::OkStatus();
}

}  // namespace

// elementwise::kCast: y = cast(x).
absl::Status ElementwiseCast(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings source,
                        context.Descriptor<TensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings destination,
                        context.Descriptor<TensorDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(const int64_t count, DenseElementCount(source));
  VGPU_ASSIGN_OR_RETURN(const int64_t destination_count, DenseElementCount(destination));
  if (count != destination_count) {
    return absl::InvalidArgumentError("cast source and destination differ in element count");
  }
  ParamReader params = context.Params();
  VGPU_ASSIGN_OR_RETURN(const uint8_t truncate, params.Get<uint8_t>());
  return DispatchAll(source.dtype, [&](auto in_zero) -> absl::Status {
    return DispatchAll(destination.dtype, [&](auto out_zero) -> absl::Status {
      return RunCast<decltype(in_zero), decltype(out_zero)>(context, count, truncate != 0);
    });
  });
}

}  // namespace vgpu::cpu_kernels
