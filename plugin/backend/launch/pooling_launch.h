// The pooling family's launches (protocol/kernels/pooling.h), read once for every executor: the
// pooling and tensor descriptors, validated as a hostile client could send them, become a
// PoolGeometry in the channels-last view. 2-D pooling is 3-D pooling with a depth of 1, and a
// channels-first tensor pooled over its spatial dimensions is a channels-last tensor of
// batch * channels images with one channel each. The geometry types are plain data: executors
// copy them to their devices as they are.
#ifndef VGPU_BACKEND_LAUNCH_POOLING_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_POOLING_LAUNCH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "plugin/backend/launch/host_device.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu::pooling_launch {

// A pooling problem: `images` images of in[0] x in[1] x in[2] positions (depth, rows, columns;
// 2-D problems have in[0] = out[0] = window[0] = 1) with `channels` values each, channels last.
struct PoolGeometry {
  int spatial_dims = 2;
  int64_t images = 0, channels = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t window[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0};  // pad: before
  int64_t input_elements = 0, output_elements = 0;  // images * positions * channels

  VGPU_HOST_DEVICE int64_t InputPositions() const { return in[0] * in[1] * in[2]; }
  VGPU_HOST_DEVICE int64_t OutputPositions() const { return out[0] * out[1] * out[2]; }
};

// The input positions [begin, end) of spatial dimension `dim` covered by output position `o`.
struct WindowRange {
  int64_t begin, end;
};
VGPU_HOST_DEVICE inline WindowRange WindowOf(const PoolGeometry& g, int dim, int64_t o) {
  const int64_t start = o * g.stride[dim] - g.pad[dim];
  const int64_t end = start + g.window[dim];
  return {start > 0 ? start : 0, end < g.in[dim] ? end : g.in[dim]};
}

// The output positions [begin, end) of spatial dimension `dim` whose windows cover input
// position `i`.
VGPU_HOST_DEVICE inline WindowRange OutputsCovering(const PoolGeometry& g, int dim, int64_t i) {
  const int64_t padded = i + g.pad[dim];
  const int64_t begin = padded < g.window[dim] ? 0 : (padded - g.window[dim]) / g.stride[dim] + 1;
  const int64_t end = padded / g.stride[dim] + 1;
  return {begin, end < g.out[dim] ? end : g.out[dim]};
}

// Validates the pooling descriptor and the x / y tensor descriptors of a launch (ranks, dtypes,
// sizes, the output size rule, element counts without overflow) and returns the geometry.
absl::StatusOr<PoolGeometry> PoolGeometryOf(const PoolingDescriptorSettings& pooling,
                                            const TensorDescriptorSettings& x,
                                            const TensorDescriptorSettings& y);

// pooling::kForward, kBackward, kGradGrad: descriptors [pooling, x, y].
struct PoolingLaunch {
  PoolingDescriptorSettings pooling;
  TensorDescriptorSettings x, y;
  PoolGeometry geometry;
};
absl::StatusOr<PoolingLaunch> ReadPoolingLaunch(const LaunchView& launch);

// What the argmax kernels compute with: 2-D NHWC max pooling and where argmax values point.
struct ArgmaxGeometry {
  PoolGeometry g;
  bool include_batch_in_index = false;
  int64_t input_image = 0, output_image = 0;  // elements per image of x and of y
};

// The flat index in x named by argmax value `value` of output element `i`, or -1 when it lies
// outside x (argmax values coming back from a client are untrusted).
VGPU_HOST_DEVICE inline int64_t ArgmaxTarget(const ArgmaxGeometry& a, int64_t i, int64_t value) {
  const int64_t offset = a.include_batch_in_index ? 0 : (i / a.output_image) * a.input_image;
  if (value < 0 || value >= a.g.input_elements - offset) return -1;
  return offset + value;
}

// pooling::kForwardWithArgmax, kBackwardWithArgmax, kGradGradWithArgmax: descriptors
// [pooling, x, y, argmax] and the int32 include_batch_in_index parameter, validated: 2-D NHWC
// max pooling, an int32/int64 argmax tensor of y's shape.
struct ArgmaxLaunch {
  PoolingDescriptorSettings pooling;
  TensorDescriptorSettings x, y, argmax;
  ArgmaxGeometry a;
};
absl::StatusOr<ArgmaxLaunch> ReadArgmaxLaunch(const LaunchView& launch);

}  // namespace vgpu::pooling_launch

#endif  // VGPU_BACKEND_LAUNCH_POOLING_LAUNCH_H_
