// The bias family's kernels (protocol/kernels/convolution.h: kBiasAdd, kBiasAddGrad) on the CPU
// backing executor, as the Eigen broadcasts and reductions TensorFlow's CPU kernels use, from
// the geometry launch/bias_launch.h reads: the value tensor viewed as [outer, channels, inner],
// inner being 1 for NHWC, the product of the spatial dimensions for NCHW. The NHWC bias
// gradient is a column sum in one pass over memory (row_sums.h).
#include "plugin/backend/cpu/kernels/float_compute.h"  // first: EIGEN_USE_THREADS

#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
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

// convolution::kBiasAdd: out = value + bias, the bias broadcast along the channel dimension.
struct BiasAdd : FloatingKernel<BiasAdd, ReadBiasAddLaunch> {
  template <typename T>
  static absl::Status Run(const KernelContext& context, const BiasGeometry& s) {
    VGPU_ASSIGN_OR_RETURN(const T* value, context.Buffer<const T>(0, s.Elements()));
    VGPU_ASSIGN_OR_RETURN(const T* bias, context.Buffer<const T>(1, s.channels));
    VGPU_ASSIGN_OR_RETURN(T* out, context.Buffer<T>(2, s.Elements()));
    if (s.Elements() == 0) return absl::OkStatus();
    const Eigen::ThreadPoolDevice& device = *context.device;
    if (s.inner == 1) {
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
