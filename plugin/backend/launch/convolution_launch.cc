// The convolution family's launch readers (see convolution_launch.h).
#include "plugin/backend/launch/convolution_launch.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "plugin/backend/launch/bias_launch.h"
#include "plugin/backend/launch/operand_limits.h"
#include "plugin/common/status_macros.h"

namespace vgpu::convolution_launch {

int64_t WindowedOutputSize(int64_t input, int64_t filter, int64_t dilation, int64_t stride,
                           int64_t pad_before, int64_t pad_after) {
  const int64_t effective_filter = (filter - 1) * dilation + 1;
  const int64_t span = input + pad_before + pad_after - effective_filter;
  return span < 0 ? 0 : span / stride + 1;
}

absl::StatusOr<ConvolutionGeometry> ConvolutionGeometryOf(
    const TensorDescriptorSettings& x, const FilterDescriptorSettings& filter,
    const ConvolutionDescriptorSettings& conv, const TensorDescriptorSettings& y) {
  if (conv.spatial_dims != 2 && conv.spatial_dims != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "convolutions have 2 or 3 spatial dimensions, got ", conv.spatial_dims));
  }
  const int rank = conv.spatial_dims + 2;
  if (x.rank != rank || y.rank != rank || filter.rank != rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a convolution with ", conv.spatial_dims, " spatial dimensions needs rank ", rank,
        " tensors and filter, got ", x.rank, ", ", y.rank, " and ", filter.rank));
  }
  if (filter.dtype != x.dtype || y.dtype != x.dtype) {
    return absl::InvalidArgumentError("convolution input, filter and output dtypes differ");
  }
  if (conv.data_format != DataFormat::kNHWC && conv.data_format != DataFormat::kNCHW) {
    return absl::InvalidArgumentError("unknown convolution data format");
  }
  if (conv.depthwise != 0 && (conv.spatial_dims != 2 || conv.group_count != 1)) {
    return absl::InvalidArgumentError(
        "depthwise convolutions are 2-D and have a group count of 1");
  }
  ConvolutionGeometry g;
  VGPU_ASSIGN_OR_RETURN(g.input_elements,
                        CheckedOperandElements("convolution input", x.dims, rank));
  VGPU_ASSIGN_OR_RETURN(g.output_elements,
                        CheckedOperandElements("convolution output", y.dims, rank));
  VGPU_ASSIGN_OR_RETURN(g.filter_elements,
                        CheckedOperandElements("convolution filter", filter.dims, rank));
  g.dtype = x.dtype;
  g.data_format = conv.data_format;
  g.spatial_dims = conv.spatial_dims;
  g.depthwise = conv.depthwise != 0;
  g.groups = conv.group_count;
  // Spatial dimensions of x and y, in order (D,) H, W; a 2-D convolution's plane dimension
  // keeps its default of 1.
  const bool channels_last = conv.data_format == DataFormat::kNHWC;
  const int first_spatial = channels_last ? 1 : 2;
  const int first = 3 - conv.spatial_dims;  // the first SpatialDim the launch has
  for (int i = 0; i < conv.spatial_dims; ++i) {
    g.in[first + i] = x.dims[first_spatial + i];
    g.out[first + i] = y.dims[first_spatial + i];
    g.filter[first + i] = filter.dims[i];
  }
  g.batch = x.dims[0];
  g.in_depth = channels_last ? x.dims[rank - 1] : x.dims[1];
  g.out_depth = channels_last ? y.dims[rank - 1] : y.dims[1];
  g.filter_in_depth = filter.dims[rank - 2];
  g.filter_out = filter.dims[rank - 1];
  g.pad_before[kRows] = conv.pad_top;
  g.pad_after[kRows] = conv.pad_bottom;
  g.pad_before[kCols] = conv.pad_left;
  g.pad_after[kCols] = conv.pad_right;
  g.stride[kRows] = conv.stride_h;
  g.stride[kCols] = conv.stride_w;
  g.dilation[kRows] = conv.dilation_h;
  g.dilation[kCols] = conv.dilation_w;
  if (conv.spatial_dims == 3) {
    g.pad_before[kPlanes] = conv.pad_front;
    g.pad_after[kPlanes] = conv.pad_back;
    g.stride[kPlanes] = conv.stride_d;
    g.dilation[kPlanes] = conv.dilation_d;
  } else if (conv.pad_front != 0 || conv.pad_back != 0 || conv.stride_d != 1 ||
             conv.dilation_d != 1) {
    return absl::InvalidArgumentError("a 2-D convolution has no depth window");
  }

  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  for (int d = 0; d < 3; ++d) {
    if (g.in[d] > kInt32Max || g.out[d] > kInt32Max || g.filter[d] > kInt32Max) {
      return absl::InvalidArgumentError("convolution spatial size too large");
    }
  }
  if (y.dims[0] != g.batch) {
    return absl::InvalidArgumentError("convolution input and output batch sizes differ");
  }
  for (int d = 0; d < 3; ++d) {
    if (g.stride[d] < 1 || g.dilation[d] < 1) {
      return absl::InvalidArgumentError("convolution strides and dilations must be positive");
    }
  }
  for (int d = 0; d < 3; ++d) {
    if (g.pad_before[d] < 0 || g.pad_after[d] < 0) {
      return absl::InvalidArgumentError("convolution paddings must not be negative");
    }
  }
  if (g.groups < 1 || g.groups > kInt32Max) {
    return absl::InvalidArgumentError(
        absl::StrCat("convolution group count must be positive, got ", g.groups));
  }
  int64_t grouped_depth = 0, depthwise_out_depth = 0;
  if (__builtin_mul_overflow(g.filter_in_depth, g.groups, &grouped_depth) ||
      __builtin_mul_overflow(g.in_depth, g.filter_out, &depthwise_out_depth)) {
    return absl::InvalidArgumentError("convolution depths too large");
  }
  if (grouped_depth != g.in_depth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "convolution filter depth ", g.filter_in_depth, " times the group count ", g.groups,
        " differs from the input depth ", g.in_depth));
  }
  const int64_t expected_out_depth = g.depthwise ? depthwise_out_depth : g.filter_out;
  if (g.out_depth != expected_out_depth) {
    return absl::InvalidArgumentError(absl::StrCat("convolution output depth ", g.out_depth,
                                                   " should be ", expected_out_depth));
  }
  if (g.out_depth % g.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat("convolution output depth ", g.out_depth,
                                                   " is not divisible by the group count ",
                                                   g.groups));
  }
  int64_t expected[3];
  for (int d = 0; d < 3; ++d) {
    expected[d] = WindowedOutputSize(g.in[d], g.filter[d], g.dilation[d], g.stride[d],
                                     g.pad_before[d], g.pad_after[d]);
  }
  if (g.out[kPlanes] != expected[kPlanes] || g.out[kRows] != expected[kRows] ||
      g.out[kCols] != expected[kCols]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "convolution output is ", g.out[kPlanes], "x", g.out[kRows], "x", g.out[kCols],
        ", the window gives ", expected[kPlanes], "x", expected[kRows], "x", expected[kCols]));
  }
  return g;
}

namespace {

// Descriptors [x, filter, convolution, y] of every convolution launch.
absl::StatusOr<ConvolutionGeometry> ReadGeometry(const LaunchView& launch) {
  TensorDescriptorSettings x, y;
  FilterDescriptorSettings filter;
  ConvolutionDescriptorSettings conv;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&x, &filter, &conv, &y));
  return ConvolutionGeometryOf(x, filter, conv, y);
}

}  // namespace

absl::StatusOr<ConvolutionGeometry> ReadConvolutionLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(3));
  return ReadGeometry(launch);
}

absl::StatusOr<ConvolutionBiasActivationLaunch> ReadConvolutionBiasActivationLaunch(
    const LaunchView& launch) {
  return bias_launch::ReadFusedLaunch(launch, ReadGeometry, &ConvolutionGeometry::out_depth,
                                      "the bias must be a vector of the output depth and dtype");
}

}  // namespace vgpu::convolution_launch
