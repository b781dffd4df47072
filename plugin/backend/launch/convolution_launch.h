// The convolution family's launches (protocol/kernels/convolution.h: kForward, kBackwardInput,
// kBackwardFilter, kForwardBiasActivation), read once for every executor: the x, filter,
// convolution and y descriptors, validated as a hostile client could send them, become a
// ConvolutionGeometry in TensorFlow's terms. A 2-D convolution is a 3-D one with a single plane:
// its plane extents are 1, its plane stride and dilation 1 and its plane paddings 0. Paddings
// are explicit (SAME / VALID are resolved by the client). The geometry is plain data: executors
// copy it to their devices as it is.
#ifndef VGPU_BACKEND_LAUNCH_CONVOLUTION_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_CONVOLUTION_LAUNCH_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "plugin/backend/launch/bias_launch.h"
#include "plugin/backend/launch/host_device.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu::convolution_launch {

// The spatial dimensions, outermost first: the index into ConvolutionGeometry's [3] arrays.
enum SpatialDim : int { kPlanes = 0, kRows = 1, kCols = 2 };

// Everything a convolution launch describes. Depthwise: the filter is [rows, cols, in_depth,
// multiplier] and output channel c * multiplier + m reads input channel c. Grouped: the input
// and output channels split into `groups` groups, output group k seeing input group k only.
struct ConvolutionGeometry {
  DType dtype = DType::kFloat32;
  DataFormat data_format = DataFormat::kNHWC;  // channels last or first
  int spatial_dims = 2;
  bool depthwise = false;
  int64_t groups = 1;  // filter_in_depth * groups == in_depth
  int64_t batch = 0, in_depth = 0, out_depth = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, filter[3] = {1, 1, 1};  // by SpatialDim
  int64_t filter_in_depth = 0;  // filter in_channels (of one group)
  int64_t filter_out = 0;       // filter out_channels, or the depthwise channel multiplier
  int64_t pad_before[3] = {0, 0, 0}, pad_after[3] = {0, 0, 0};
  int64_t stride[3] = {1, 1, 1}, dilation[3] = {1, 1, 1};
  // The element counts of x, y and the filter, checked against kMaxOperandElements. (The
  // products of an empty tensor's other extents are not bounded: use these counts.)
  int64_t input_elements = 0, output_elements = 0, filter_elements = 0;

  VGPU_HOST_DEVICE bool ChannelsLast() const { return data_format == DataFormat::kNHWC; }
  // Positions of one image or one filter (meaningful for non-empty tensors).
  VGPU_HOST_DEVICE int64_t InputPixels() const { return in[0] * in[1] * in[2]; }
  VGPU_HOST_DEVICE int64_t OutputPixels() const { return out[0] * out[1] * out[2]; }
  VGPU_HOST_DEVICE int64_t FilterTaps() const { return filter[0] * filter[1] * filter[2]; }
  VGPU_HOST_DEVICE bool UnitStridesAndDilations() const {
    for (int d = 0; d < 3; ++d) {
      if (stride[d] != 1 || dilation[d] != 1) return false;
    }
    return true;
  }
  VGPU_HOST_DEVICE bool NoPadding() const {
    for (int d = 0; d < 3; ++d) {
      if (pad_before[d] != 0 || pad_after[d] != 0) return false;
    }
    return true;
  }
  VGPU_HOST_DEVICE bool SymmetricPadding() const {
    for (int d = 0; d < 3; ++d) {
      if (pad_before[d] != pad_after[d]) return false;
    }
    return true;
  }
};

// TensorFlow's output size of one spatial dimension with explicit paddings. The arguments are
// those of a geometry ConvolutionGeometryOf accepted (or bounded as it bounds them).
int64_t WindowedOutputSize(int64_t input, int64_t filter, int64_t dilation, int64_t stride,
                           int64_t pad_before, int64_t pad_after);

// Validates descriptors x, filter, convolution and y (ranks, dtypes, data format, depths and
// groups, strides, dilations and paddings, the output size the window gives, element counts
// without overflow) and returns the geometry.
absl::StatusOr<ConvolutionGeometry> ConvolutionGeometryOf(
    const TensorDescriptorSettings& x, const FilterDescriptorSettings& filter,
    const ConvolutionDescriptorSettings& convolution, const TensorDescriptorSettings& y);

// kForward (buffers [x, filter, y]), kBackwardInput ([filter, dy, dx]) and kBackwardFilter
// ([x, dy, dfilter]): descriptors [x, filter, convolution, y]. Checks the buffer count and the
// descriptors; not the buffer sizes (the kernels' typed Buffer<T>() calls check those).
absl::StatusOr<ConvolutionGeometry> ReadConvolutionLaunch(const LaunchView& launch);

// kForwardBiasActivation: buffers [x, filter, bias, y], descriptors [x, filter, convolution, y,
// bias, activation (optional)]: the geometry, and the activation after the bias (none:
// identity). The bias descriptor is checked to be a vector of out_depth values of the dtype.
using ConvolutionBiasActivationLaunch = bias_launch::FusedLaunch<ConvolutionGeometry>;
absl::StatusOr<ConvolutionBiasActivationLaunch> ReadConvolutionBiasActivationLaunch(
    const LaunchView& launch);

}  // namespace vgpu::convolution_launch

#endif  // VGPU_BACKEND_LAUNCH_CONVOLUTION_LAUNCH_H_
