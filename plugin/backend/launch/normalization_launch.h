// The normalization family's launches (protocol/kernels/normalization.h), read once for every
// executor: the x and parameter tensor descriptors and the BatchNormParams of a fused batch
// normalization, validated as a hostile client could send them, become a ChannelLayout (x as
// [outer, channels, inner]) with the per-channel float32 buffers checked and typed. What is left
// to an executor is x's dtype (DispatchBatchNormData) and its x-shaped buffers, then the
// arithmetic.
#ifndef VGPU_BACKEND_LAUNCH_NORMALIZATION_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_NORMALIZATION_LAUNCH_H_

#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/backend/launch/host_device.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/normalization.h"

namespace vgpu::normalization_launch {

// x viewed as [outer, channels, inner]: element (o, c, i) at (o * channels + c) * inner + i.
// Channels last: outer = all other dimensions, inner = 1. Channels first: outer = batch,
// inner = spatial size. Plain data; elements() is at most kMaxLaunchElements.
struct ChannelLayout {
  int64_t outer = 0, channels = 0, inner = 0;
  VGPU_HOST_DEVICE int64_t per_channel() const { return outer * inner; }  // n, per statistic
  VGPU_HOST_DEVICE int64_t elements() const { return outer * channels * inner; }
};

// Validates x (4-D or 5-D, dimensions non-negative, at most kMaxLaunchElements elements), the
// parameter descriptor (float32 of rank 1, one value per channel) and `format` (kNHWC or kNCHW),
// and returns x's layout.
absl::StatusOr<ChannelLayout> ChannelLayoutOf(const TensorDescriptorSettings& x,
                                              const TensorDescriptorSettings& parameters,
                                              DataFormat format);

// What every batch normalization launch carries: descriptors [tensor x, tensor parameters],
// params BatchNormParams.
struct BatchNormLaunch {
  TensorDescriptorSettings x;  // x's shape and dtype, which y, dy and dx share
  ChannelLayout layout;
  normalization::BatchNormParams params;
};

// The per-channel buffers of kForwardTraining and kForwardInference (buffers 1-4 and 6-9), each
// checked for `channels` aligned floats. Training reads the old running statistics from
// mean/variance (only when exponential_avg_factor != 1) and writes the new ones to
// mean_out/variance_out; inference reads the population statistics and copies them out (the
// outputs may alias the inputs).
struct ForwardChannelBuffers {
  const float* scale;
  const float* offset;
  const float* mean;
  const float* variance;
  float* mean_out;
  float* variance_out;
  float* saved_mean;
  float* saved_variance;
};

struct BatchNormForwardLaunch : BatchNormLaunch {
  ForwardChannelBuffers channel;
};

// Reads a forward launch: buffers [x, scale, offset, mean, variance, y, mean_out, variance_out,
// saved_mean, saved_variance]. Checks, in this order, the buffer count, the descriptors, the
// parameter block, the layout (ChannelLayoutOf) and the per-channel buffers; x and y (buffers 0
// and 5, of x's dtype) are left to the executor.
absl::StatusOr<BatchNormForwardLaunch> ReadBatchNormForwardLaunch(const LaunchView& launch);

// The per-channel buffers of kBackwardTraining and kBackwardInference (buffers 2-4, 6 and 7),
// each checked for `channels` aligned floats: the statistics are the saved (training) or
// population (inference) ones the forward pass used.
struct BackwardChannelBuffers {
  const float* scale;
  const float* mean;
  const float* variance;
  float* dscale;
  float* doffset;
};

struct BatchNormBackwardLaunch : BatchNormLaunch {
  BackwardChannelBuffers channel;
};

// Reads a backward launch: buffers [dy, x, scale, mean, variance, dx, dscale, doffset]. Checks
// as ReadBatchNormForwardLaunch; dy, x and dx (buffers 0, 1 and 5) are left to the executor.
absl::StatusOr<BatchNormBackwardLaunch> ReadBatchNormBackwardLaunch(const LaunchView& launch);

// fn(T{}) for the data dtypes of batch normalization (float32, float16, bfloat16), T as the
// executor's dispatch `Dispatch` (a DTypeDispatch) names it. float64 is refused as not
// supported (InvalidArgument), any other dtype as Dispatch refuses it.
template <typename Dispatch, typename Fn>
absl::Status DispatchBatchNormData(DType dtype, Fn&& fn) {
  if (dtype == DType::kFloat64) {
    return absl::InvalidArgumentError("batch normalization of float64 is not supported");
  }
  return Dispatch::Floating(dtype, [&](auto zero) -> absl::Status {
    if constexpr (std::is_same_v<decltype(zero), double>) {
      return absl::InternalError("batch normalization: float64 passed the dtype check");
    } else {
      return fn(zero);
    }
  });
}

}  // namespace vgpu::normalization_launch

#endif  // VGPU_BACKEND_LAUNCH_NORMALIZATION_LAUNCH_H_
