// The normalization family's launch readers (see normalization_launch.h).
#include "plugin/backend/launch/normalization_launch.h"

#include <cstddef>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "plugin/common/status_macros.h"

namespace vgpu::normalization_launch {
namespace {

// Buffers `indices` as `channels` floats each (checked for size and alignment, in order), to
// out[0, indices.size()).
absl::Status ChannelBuffers(const LaunchView& launch, std::initializer_list<size_t> indices,
                            int64_t channels, float** out) {
  for (size_t index : indices) {
    VGPU_RETURN_IF_ERROR(launch.ExpectElements(index, static_cast<uint64_t>(channels),
                                               sizeof(float), alignof(float)));
    *out++ = reinterpret_cast<float*>(launch.buffers[index]);
  }
  return absl::OkStatus();
}

// The common part of every launch: `buffers` buffers, the descriptors, the parameter block.
absl::Status ReadBatchNorm(const LaunchView& launch, size_t buffers, BatchNormLaunch* read) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(buffers));
  TensorDescriptorSettings parameters;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&read->x, &parameters));
  VGPU_ASSIGN_OR_RETURN(read->params, launch.Params().Get<normalization::BatchNormParams>());
  VGPU_ASSIGN_OR_RETURN(read->layout,
                        ChannelLayoutOf(read->x, parameters, read->params.data_format));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChannelLayout> ChannelLayoutOf(const TensorDescriptorSettings& x,
                                              const TensorDescriptorSettings& parameters,
                                              DataFormat format) {
  if (x.rank != 4 && x.rank != 5) {
    return absl::InvalidArgumentError(absl::StrCat("x must be 4-D or 5-D, got rank ", x.rank));
  }
  if (parameters.dtype != DType::kFloat32 || parameters.rank != 1) {
    return absl::InvalidArgumentError("the parameter descriptor must be float32 of rank 1");
  }
  __int128 elements = 1;
  for (int d = 0; d < x.rank; ++d) {
    if (x.dims[d] < 0) return absl::InvalidArgumentError("negative dimension");
    elements *= x.dims[d];
    if (elements > kMaxLaunchElements || x.dims[d] > kMaxLaunchElements) {
      return absl::InvalidArgumentError("x is too large");
    }
  }
  ChannelLayout layout;
  if (format == DataFormat::kNHWC) {
    layout.channels = x.dims[x.rank - 1];
    layout.outer = 1;
    for (int d = 0; d < x.rank - 1; ++d) layout.outer *= x.dims[d];
    layout.inner = 1;
  } else if (format == DataFormat::kNCHW) {
    layout.outer = x.dims[0];
    layout.channels = x.dims[1];
    layout.inner = 1;
    for (int d = 2; d < x.rank; ++d) layout.inner *= x.dims[d];
  } else {
    return absl::InvalidArgumentError("unknown data format");
  }
  if (parameters.dims[0] != layout.channels) {
    return absl::InvalidArgumentError(absl::StrCat("parameters have ", parameters.dims[0],
                                                   " channels, x has ", layout.channels));
  }
  return layout;
}

absl::StatusOr<BatchNormForwardLaunch> ReadBatchNormForwardLaunch(const LaunchView& launch) {
  BatchNormForwardLaunch read;
  VGPU_RETURN_IF_ERROR(ReadBatchNorm(launch, 10, &read));
  float* p[8];
  VGPU_RETURN_IF_ERROR(
      ChannelBuffers(launch, {1, 2, 3, 4, 6, 7, 8, 9}, read.layout.channels, p));
  read.channel = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]};
  return read;
}

absl::StatusOr<BatchNormBackwardLaunch> ReadBatchNormBackwardLaunch(const LaunchView& launch) {
  BatchNormBackwardLaunch read;
  VGPU_RETURN_IF_ERROR(ReadBatchNorm(launch, 8, &read));
  float* p[5];
  VGPU_RETURN_IF_ERROR(ChannelBuffers(launch, {2, 3, 4, 6, 7}, read.layout.channels, p));
  read.channel = {p[0], p[1], p[2], p[3], p[4]};
  return read;
}

}  // namespace vgpu::normalization_launch
