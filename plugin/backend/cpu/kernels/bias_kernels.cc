// The bias family's kernels (protocol/kernels/convolution.h: kBiasAdd, kBiasAddGrad) on the CPU
// backing executor, as the Eigen broadcasts and reductions TensorFlow's CPU kernels use, from
// the geometry launch/bias_launch.h reads: the value tensor viewed as [outer, channels, inner],
// inner being 1 for NHWC, the product of the spatial dimensions for NCHW. The NHWC bias
// gradient is a column sum in one pass over memory (row_sums.h); the 16-bit BiasAdd adds in
// float32 run by run (float_staging.h).
#include "plugin/backend/cpu/kernels/float_compute.h"  // first: EIGEN_USE_THREADS

#include <algorithm>
#include <array>
#include <vector>

#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/float_staging.h"
#include "plugin/backend/cpu/kernels/row_sums.h"
#include "plugin/backend/launch/bias_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::cpu_kernels {
namespace {

using bias_launch::BiasGeometry;
using bias_launch::ReadBiasAddGradLaunch;
using bias_launch::ReadBiasAddLaunch;
using Index = Eigen::DenseIndex;

// values[i] += bias[channel of element begin + i] for i < count, the value tensor viewed as
// [outer, channels, inner]: runs along a row of channels (inner == 1) or of one channel's inner
// elements, each a loop the compiler vectorises.
__attribute__((optimize("vect-cost-model=dynamic"))) void AddBiasToRun(
    float* __restrict values, int64_t begin, int64_t count, const float* __restrict bias,
    const BiasGeometry& s) {
  int64_t channel = (begin / s.inner) % s.channels;
  int64_t offset = begin % s.inner;
  for (int64_t i = 0; i < count;) {
    if (s.inner == 1) {
      const int64_t run = std::min(count - i, s.channels - channel);
      for (int64_t k = 0; k < run; ++k) values[i + k] += bias[channel + k];
      i += run;
      channel = 0;
    } else {
      const int64_t run = std::min(count - i, s.inner - offset);
      const float b = bias[channel];
      for (int64_t k = 0; k < run; ++k) values[i + k] += b;
      i += run;
      offset = 0;
      channel = channel + 1 == s.channels ? 0 : channel + 1;
    }
  }
}

// The 16-bit BiasAdd: each sum in float32, rounded once to T, as Eigen's half and bfloat16
// additions round it, but in float32 vector code (TransformThroughFloat) instead of Eigen's
// broadcast in T (for bfloat16 ~4x as long over cnn's first layer).
template <typename T>
void AddBiasThroughFloat(const Eigen::ThreadPoolDevice& device, const BiasGeometry& s,
                         const T* value, const T* bias, T* out) {
  std::vector<float> bias32(static_cast<size_t>(s.channels));
  WidenOnThisThread(bias, bias32.data(), s.channels);
  TransformThroughFloat<T, 1>(device, {value}, out, s.Elements(), 1,
                              [&](const std::array<float*, 1>& values, int64_t begin,
                                  int64_t count) {
    AddBiasToRun(values[0], begin, count, bias32.data(), s);
  });
}

// convolution::kBiasAdd: out = value + bias, the bias broadcast along the channel dimension.
struct BiasAdd : FloatingKernel<BiasAdd, ReadBiasAddLaunch> {
  template <typename T>
  static absl::Status Run(const KernelContext& context, const BiasGeometry& s) {
    VGPU_ASSIGN_OR_RETURN(const T* value, context.Buffer<const T>(0, s.Elements()));
    VGPU_ASSIGN_OR_RETURN(const T* bias, context.Buffer<const T>(1, s.channels));
    VGPU_ASSIGN_OR_RETURN(T* out, context.Buffer<T>(2, s.Elements()));
    if (s.Elements() == 0) return absl::OkStatus();
    const Eigen::ThreadPoolDevice& device = *context.device;
    if constexpr (kIsFloat16Bit<T>) {
      AddBiasThroughFloat(device, s, value, bias, out);
    } else if (s.inner == 1) {
      const Eigen::array<Index, 2> rows{s.outer, 1};
      RowMajorMap<T, 2>(out, s.outer, s.channels).device(device) =
          RowMajorMap<const T, 2>(value, s.outer, s.channels) +
          RowMajorMap<const T, 2>(bias, 1, s.channels).broadcast(rows);
    } else {
      const Eigen::array<Index, 3> spread{s.outer, 1, s.inner};
      RowMajorMap<T, 3>(out, s.outer, s.channels, s.inner).device(device) =
          RowMajorMap<const T, 3>(value, s.outer, s.channels, s.inner) +
          RowMajorMap<const T, 3>(bias, 1, s.channels, 1).broadcast(spread);
    }
    return absl::OkStatus();
  }
};

// convolution::kBiasAddGrad: the sum of the gradient over all but the channel dimension.
struct BiasAddGrad : FloatingKernel<BiasAddGrad, ReadBiasAddGradLaunch> {
  template <typename T>
  static absl::Status Run(const KernelContext& context, const BiasGeometry& s) {
    using CT = ComputeType<T>;
    VGPU_ASSIGN_OR_RETURN(const T* gradient, context.Buffer<const T>(0, s.Elements()));
    VGPU_ASSIGN_OR_RETURN(T* bias_gradient, context.Buffer<T>(1, s.channels));
    if (s.channels == 0) return absl::OkStatus();
    const Eigen::ThreadPoolDevice& device = *context.device;
    RowMajorMap<T, 1> result(bias_gradient, s.channels);
    if (s.Elements() == 0) {
      result.device(device) = result.constant(T(0));
    } else if (s.inner == 1) {
      SumColumns<T, CT>(device, gradient, s.outer, s.channels, bias_gradient,
                        [](CT sum) { return static_cast<T>(sum); });
    } else {
      Eigen::IndexList<Eigen::type2index<0>, Eigen::type2index<2>> over_outer_and_inner;
      result.device(device) = RowMajorMap<const T, 3>(gradient, s.outer, s.channels, s.inner)
                                  .template cast<CT>()
                                  .sum(over_outer_and_inner)
                                  .template cast<T>();
    }
    return absl::OkStatus();
  }
};

}  // namespace

void AddBiasKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kBias, BiasAdd::Launch, BiasAddGrad::Launch);
}

}  // namespace vgpu::cpu_kernels
