// The pooling family's launch readers (see pooling_launch.h).
#include "plugin/backend/launch/pooling_launch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/pooling.h"

namespace vgpu::pooling_launch {

absl::StatusOr<PoolGeometry> PoolGeometryOf(const PoolingDescriptorSettings& pooling,
                                            const TensorDescriptorSettings& x,
                                            const TensorDescriptorSettings& y) {
  const int spatial = pooling.spatial_dims;
  if (spatial != 2 && spatial != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("pooling over ", spatial, " spatial dimensions is not supported"));
  }
  if (pooling.mode != PoolingMode::kMax && pooling.mode != PoolingMode::kAverage) {
    return absl::InvalidArgumentError("unknown pooling mode");
  }
  if (pooling.nan_propagation != NanPropagation::kNotPropagate &&
      pooling.nan_propagation != NanPropagation::kPropagate) {
    return absl::InvalidArgumentError("unknown pooling NaN propagation");
  }
  const bool channels_first = pooling.data_format == DataFormat::kNCHW;
  if (!channels_first && pooling.data_format != DataFormat::kNHWC) {
    return absl::InvalidArgumentError("unknown pooling data format");
  }
  if (x.rank != spatial + 2 || y.rank != spatial + 2) {
    return absl::InvalidArgumentError(absl::StrCat("pooling tensors must be ", spatial + 2,
                                                   "-dimensional for ", spatial,
                                                   " spatial dimensions"));
  }
  if (x.dtype != y.dtype) {
    return absl::InvalidArgumentError("pooling input and output dtypes differ");
  }
  for (int i = 0; i < x.rank; ++i) {
    if (x.dims[i] < 0 || y.dims[i] < 0 || x.dims[i] > kMaxLaunchElements ||
        y.dims[i] > kMaxLaunchElements) {
      return absl::InvalidArgumentError("pooling tensor dimension out of range");
    }
  }
  for (int k = 0; k < kMaxPoolingSpatialDims; ++k) {
    if (k >= spatial) {
      if (pooling.window[k] != 1 || pooling.stride[k] != 1 || pooling.pad_before[k] != 0 ||
          pooling.pad_after[k] != 0) {
        return absl::InvalidArgumentError(
            "pooling descriptor entries past its spatial dimensions must keep their defaults");
      }
      continue;
    }
    if (pooling.window[k] <= 0 || pooling.stride[k] <= 0 || pooling.pad_before[k] < 0 ||
        pooling.pad_after[k] < 0) {
      return absl::InvalidArgumentError(
          "pooling windows and strides must be positive and paddings non-negative");
    }
    if (pooling.pad_before[k] >= pooling.window[k] || pooling.pad_after[k] >= pooling.window[k]) {
      return absl::InvalidArgumentError("pooling paddings must be smaller than the window");
    }
    // Bounded as tensor dimensions are, so that the output size rule below cannot overflow.
    if (pooling.window[k] > kMaxLaunchElements || pooling.stride[k] > kMaxLaunchElements) {
      return absl::InvalidArgumentError("pooling window or stride out of range");
    }
  }
  const int batch_dim = 0, channel_dim = channels_first ? 1 : spatial + 1;
  const int first_spatial = channels_first ? 2 : 1;
  if (y.dims[batch_dim] != x.dims[batch_dim] || y.dims[channel_dim] != x.dims[channel_dim]) {
    return absl::InvalidArgumentError("pooling output batch/channels differ from the input's");
  }
  PoolGeometry g;
  g.spatial_dims = spatial;
  const int skipped = kMaxPoolingSpatialDims - spatial;  // leading size-1 dimensions
  for (int k = 0; k < spatial; ++k) {
    const int dim = skipped + k;
    g.in[dim] = x.dims[first_spatial + k];
    g.out[dim] = y.dims[first_spatial + k];
    g.window[dim] = pooling.window[k];
    g.stride[dim] = pooling.stride[k];
    g.pad[dim] = pooling.pad_before[k];
    // TensorFlow's output size rule: (in + padding - window + stride) / stride.
    const int64_t expected = (g.in[dim] + pooling.pad_before[k] + pooling.pad_after[k] -
                              g.window[dim] + g.stride[dim]) /
                             g.stride[dim];
    if (g.out[dim] != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pooling output size ", g.out[dim], " of spatial dimension ", k,
          " differs from the window geometry's ", expected));
    }
  }
  if (channels_first) {
    VGPU_ASSIGN_OR_RETURN(g.images, CheckedProduct({x.dims[0], x.dims[1]}, "pooling tensor"));
    g.channels = 1;
  } else {
    g.images = x.dims[0];
    g.channels = x.dims[spatial + 1];
  }
  VGPU_ASSIGN_OR_RETURN(g.input_elements,
                        CheckedProduct({g.images, g.in[0], g.in[1], g.in[2], g.channels},
                                       "pooling tensor"));
  VGPU_ASSIGN_OR_RETURN(g.output_elements,
                        CheckedProduct({g.images, g.out[0], g.out[1], g.out[2], g.channels},
                                       "pooling tensor"));
  return g;
}

bool WindowIndexable(const PoolGeometry& g) {
  for (int d = 0; d < 3; ++d) {
    if (g.stride[d] != g.window[d] || g.pad[d] != 0) return false;
  }
  return g.window[0] * g.window[1] * g.window[2] <= pooling::kMaxWindowSlots;
}

namespace {

bool UsesWindowIndex(PoolingKernel kernel) {
  return kernel == PoolingKernel::kForwardWithWindowIndex ||
         kernel == PoolingKernel::kBackwardFromWindowIndex ||
         kernel == PoolingKernel::kBackwardFromWindowIndexThroughRelu;
}

}  // namespace

absl::StatusOr<PoolingLaunch> ReadPoolingLaunch(const LaunchView& launch, PoolingKernel kernel) {
  if (kernel == PoolingKernel::kForward) VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(2));
  if (kernel == PoolingKernel::kGradGrad) VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(4));
  if (kernel == PoolingKernel::kBackwardThroughRelu || UsesWindowIndex(kernel)) {
    VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(3));
  }
  PoolingLaunch read;
  read.kernel = kernel;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&read.pooling, &read.x, &read.y));
  VGPU_ASSIGN_OR_RETURN(read.geometry, PoolGeometryOf(read.pooling, read.x, read.y));
  if (kernel == PoolingKernel::kBackward) {
    VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(read.pooling.mode == PoolingMode::kMax ? 3 : 2));
  }
  if (kernel == PoolingKernel::kGradGrad && read.pooling.mode != PoolingMode::kMax) {
    return absl::InvalidArgumentError("the second-order pooling gradient needs max pooling");
  }
  if (kernel == PoolingKernel::kBackwardThroughRelu && read.pooling.mode != PoolingMode::kMax) {
    return absl::InvalidArgumentError("the pooling gradient through a ReLU needs max pooling");
  }
  if (UsesWindowIndex(kernel)) {
    // Padding after is checked too: PoolGeometry keeps only the padding before.
    bool padded_after = false;
    for (int k = 0; k < read.pooling.spatial_dims; ++k) {
      padded_after = padded_after || read.pooling.pad_after[k] != 0;
    }
    if (read.pooling.mode != PoolingMode::kMax ||
        read.pooling.nan_propagation != NanPropagation::kNotPropagate ||
        !WindowIndexable(read.geometry) || padded_after) {
      return absl::InvalidArgumentError(absl::StrCat(
          "window-index pooling needs max pooling without NaN propagation over windows that "
          "tile the input (stride equal to the window, no padding) of at most ",
          pooling::kMaxWindowSlots, " elements"));
    }
  }
  return read;
}

absl::StatusOr<ArgmaxLaunch> ReadArgmaxLaunch(const LaunchView& launch, ArgmaxKernel kernel) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(3));
  ArgmaxLaunch read;
  read.kernel = kernel;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&read.pooling, &read.x, &read.y, &read.argmax));
  VGPU_ASSIGN_OR_RETURN(read.a.g, PoolGeometryOf(read.pooling, read.x, read.y));
  if (read.pooling.mode != PoolingMode::kMax || read.pooling.spatial_dims != 2 ||
      read.pooling.data_format != DataFormat::kNHWC) {
    return absl::InvalidArgumentError("argmax pooling kernels need 2-D NHWC max pooling");
  }
  if (read.argmax.dtype != DType::kInt64 && read.argmax.dtype != DType::kInt32) {
    return absl::InvalidArgumentError("argmax must be int64 or int32");
  }
  if (read.argmax.rank != read.y.rank ||
      !std::equal(read.y.dims, read.y.dims + read.y.rank, read.argmax.dims)) {
    return absl::InvalidArgumentError("argmax must have the pooled output's shape");
  }
  ParamReader params = launch.Params();
  VGPU_ASSIGN_OR_RETURN(int32_t include_batch, params.Get<int32_t>());
  if (include_batch != 0 && include_batch != 1) {
    return absl::InvalidArgumentError("include_batch_in_index must be 0 or 1");
  }
  read.a.include_batch_in_index = include_batch == 1;
  if (kernel != ArgmaxKernel::kForward && read.argmax.dtype != DType::kInt64) {
    return absl::InvalidArgumentError(kernel == ArgmaxKernel::kBackward
                                          ? "MaxPoolGradWithArgmax needs an int64 argmax"
                                          : "MaxPoolGradGradWithArgmax needs an int64 argmax");
  }
  read.a.input_image = read.a.g.InputPositions() * read.a.g.channels;
  read.a.output_image = read.a.g.OutputPositions() * read.a.g.channels;
  return read;
}

}  // namespace vgpu::pooling_launch
