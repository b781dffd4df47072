// Kernel ids and launch layouts of the normalization family (ids 800-899): fused batch
// normalization, shaped like cudnnBatchNormalization*: a tensor descriptor for x (and y, dy, dx,
// which share x's shape and dtype) and one for the per-channel parameters (scale, offset, means,
// variances: float32 of shape [C]), the layout and constants in the parameter block.
//
// x is 4-D or 5-D. With kNHWC the channels are the last dimension (NHWC, NDHWC), with kNCHW the
// second (NCHW, NCDHW). Per channel, the statistics run over all other dimensions: n elements.
#ifndef VGPU_PROTOCOL_KERNELS_NORMALIZATION_H_
#define VGPU_PROTOCOL_KERNELS_NORMALIZATION_H_

#include <cstdint>

#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernel_ids.h"

namespace vgpu::normalization {

struct BatchNormParams {
  DataFormat data_format = DataFormat::kNHWC;
  float epsilon = 0.001f;
  float exponential_avg_factor = 1.0f;  // training only
  int32_t reserved = 0;
};

// descriptors: [tensor x, tensor parameters]; params: BatchNormParams;
// buffers: [x, scale, offset, old_mean, old_variance, y, running_mean, running_variance,
//           saved_mean, saved_variance].
//   mean, var = batch statistics (var biased: divided by n)
//   y = (x - mean) * rsqrt(var + epsilon) * scale + offset
//   running_mean = (1 - f) * old_mean + f * mean
//   running_variance = (1 - f) * old_variance + f * var * n / max(n - 1, 1)
//     with f = exponential_avg_factor; with f == 1 old_mean/old_variance are not read (any
//     buffers of C floats will do)
//   saved_mean = mean, saved_variance = var (what kBackwardTraining expects)
// With n == 0 (empty x) running_mean and running_variance are NaN, saved_mean and
// saved_variance 0, and y is empty.
inline constexpr KernelId kForwardTraining = KernelId{800};

// descriptors: [tensor x, tensor parameters]; params: BatchNormParams;
// buffers: [x, scale, offset, mean, variance, y, mean_out, variance_out, saved_mean,
//           saved_variance].
//   y = (x - mean) * rsqrt(variance + epsilon) * scale + offset;
//   mean_out = saved_mean = mean, variance_out = saved_variance = variance (mean_out and
//   variance_out may alias their inputs); mean_out and variance_out are NaN when x is empty.
inline constexpr KernelId kForwardInference = KernelId{801};

// descriptors: [tensor x, tensor parameters]; params: BatchNormParams;
// buffers: [dy, x, scale, saved_mean, saved_variance, dx, dscale, doffset].
// The gradient of kForwardTraining's y with the batch statistics it saved:
//   dx = scale * rsqrt(var + eps)
//        * (dy - mean(dy) - (x - mean) * mean(dy * (x - mean)) / (var + eps))
//   dscale = sum(dy * (x - mean) * rsqrt(var + eps)), doffset = sum(dy).
inline constexpr KernelId kBackwardTraining = KernelId{802};

// descriptors and buffers as kBackwardTraining, with the population mean and variance that
// kForwardInference used: dx = dy * scale * rsqrt(var + eps), dscale and doffset as above.
inline constexpr KernelId kBackwardInference = KernelId{803};

}  // namespace vgpu::normalization

#endif  // VGPU_PROTOCOL_KERNELS_NORMALIZATION_H_
