// The pooling family's executor kernels (protocol/kernels/pooling.h) share one geometry: the
// launch's pooling and tensor descriptors, validated as a hostile client could send them, become
// a PoolGeometry in the channels-last view. 2-D pooling is 3-D pooling with a depth of 1, and a
// channels-first tensor pooled over its spatial dimensions is a channels-last tensor of
// batch * channels images with one channel each.
#ifndef VGPU_BACKEND_CPU_KERNELS_POOLING_KERNELS_H_
#define VGPU_BACKEND_CPU_KERNELS_POOLING_KERNELS_H_

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu::cpu_kernels {

// A pooling problem: `images` images of in[0] x in[1] x in[2] positions (depth, rows, columns;
// 2-D problems have in[0] = out[0] = window[0] = 1) with `channels` values each, channels last.
struct PoolGeometry {
  int spatial_dims = 2;
  int64_t images = 0, channels = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t window[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0};  // pad: before
  int64_t input_elements = 0, output_elements = 0;  // images * positions * channels

  int64_t InputPositions() const { return in[0] * in[1] * in[2]; }
  int64_t OutputPositions() const { return out[0] * out[1] * out[2]; }
};

// The input positions [begin, end) of spatial dimension `dim` covered by output position `o`.
struct WindowRange {
  int64_t begin, end;
};
inline WindowRange WindowOf(const PoolGeometry& g, int dim, int64_t o) {
  const int64_t start = o * g.stride[dim] - g.pad[dim];
  return {std::max<int64_t>(start, 0), std::min<int64_t>(start + g.window[dim], g.in[dim])};
}

// The output positions [begin, end) of spatial dimension `dim` whose windows cover input
// position `i`.
inline WindowRange OutputsCovering(const PoolGeometry& g, int dim, int64_t i) {
  const int64_t padded = i + g.pad[dim];
  const int64_t begin = padded < g.window[dim] ? 0 : (padded - g.window[dim]) / g.stride[dim] + 1;
  return {begin, std::min(padded / g.stride[dim] + 1, g.out[dim])};
}

// Validates the pooling descriptor and the x / y tensor descriptors of a launch (ranks, dtypes,
// sizes, the output size rule, element counts without overflow) and returns the geometry.
absl::StatusOr<PoolGeometry> GeometryOf(const PoolingDescriptorSettings& pooling,
                                        const TensorDescriptorSettings& x,
                                        const TensorDescriptorSettings& y);

// The argmax kernels (pooling_argmax_kernels.cc): pooling::kForwardWithArgmax,
// kBackwardWithArgmax and kGradGradWithArgmax.
absl::Status PoolingForwardWithArgmax(const KernelContext& context);
absl::Status PoolingBackwardWithArgmax(const KernelContext& context);
absl::Status PoolingGradGradWithArgmax(const KernelContext& context);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_POOLING_KERNELS_H_
