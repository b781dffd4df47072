// CPU kernels of the normalization family (protocol/kernels/normalization.h): fused batch
// normalization forward (training and inference) and backward, for float32, float16 and
// bfloat16 data with float32 per-channel parameters, in channels-last and channels-first
// layouts. Arithmetic follows TensorFlow's CPU kernel (float math per element); per-channel sums
// are accumulated in double over a fixed partition of the data, so results do not depend on the
// number of threads (and the batch statistics need one pass over x, not two). The launches are
// read and validated by the launch layer (launch/normalization_launch.h), as for the CUDA
// executor.
#define EIGEN_USE_THREADS
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/launch/normalization_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/normalization.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

using normalization_launch::BatchNormBackwardLaunch;
using normalization_launch::BatchNormForwardLaunch;
using normalization_launch::ChannelLayout;
using normalization_launch::DispatchBatchNormData;
using normalization_launch::ReadBatchNormBackwardLaunch;
using normalization_launch::ReadBatchNormForwardLaunch;

// Per channel c, sums[k][c] = sum over (o, i) of term(c, index)[k] for K terms at once, where
// index is the element's flat index. The data is cut into a partition that depends only on the
// shape; partial sums are combined in a fixed order.
template <int K, typename Term>
void ChannelSums(const Eigen::ThreadPoolDevice& device, const ChannelLayout& layout, Term term,
                 std::vector<double> (&sums)[K]) {
  const int64_t channels = layout.channels;
  for (int k = 0; k < K; ++k) sums[k].assign(channels, 0.0);
  if (layout.elements() == 0) return;
  constexpr int64_t kTargetElements = 16384;  // elements per unit of work
  if (layout.inner == 1) {
    // Channels last: blocks of whole rows [rows, channels], each with its own partial sums.
    const int64_t rows = layout.outer;
    const int64_t rows_per_block =
        std::max<int64_t>({1, kTargetElements / channels, (rows + 255) / 256});
    const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
    std::vector<double> partial(static_cast<size_t>(blocks * channels * K), 0.0);
    const double block_cost = rows_per_block * channels * 4.0;
    device.parallelFor(
        blocks, Eigen::TensorOpCost(block_cost, 0, block_cost),
        [&](Eigen::Index first, Eigen::Index last) {
          for (Eigen::Index block = first; block < last; ++block) {
            double* acc = &partial[block * channels * K];  // [K][channels]
            const int64_t row_end = std::min(rows, (block + 1) * rows_per_block);
            for (int64_t row = block * rows_per_block; row < row_end; ++row) {
              const int64_t base = row * channels;
              for (int64_t c = 0; c < channels; ++c) {
                const auto values = term(c, base + c);
                for (int k = 0; k < K; ++k) acc[k * channels + c] += values[k];
              }
            }
          }
        });
    for (int64_t block = 0; block < blocks; ++block) {
      for (int k = 0; k < K; ++k) {
        for (int64_t c = 0; c < channels; ++c) {
          sums[k][c] += partial[(block * K + k) * channels + c];
        }
      }
    }
    return;
  }
  // Channels first: runs of `inner` contiguous elements per (o, c), cut into chunks.
  const int64_t chunks_per_run = (layout.inner + kTargetElements - 1) / kTargetElements;
  const int64_t chunk_len = (layout.inner + chunks_per_run - 1) / chunks_per_run;
  const int64_t units = layout.outer * channels * chunks_per_run;
  std::vector<double> partial(static_cast<size_t>(units * K), 0.0);
  device.parallelFor(units, Eigen::TensorOpCost(chunk_len * 4.0, 0, chunk_len * 4.0),
                     [&](Eigen::Index first, Eigen::Index last) {
                       for (Eigen::Index unit = first; unit < last; ++unit) {
                         const int64_t run = unit / chunks_per_run;  // o * channels + c
                         const int64_t chunk = unit % chunks_per_run;
                         const int64_t c = run % channels;
                         const int64_t begin = chunk * chunk_len;
                         const int64_t end = std::min(layout.inner, begin + chunk_len);
                         double acc[K] = {};
                         for (int64_t i = begin; i < end; ++i) {
                           const auto values = term(c, run * layout.inner + i);
                           for (int k = 0; k < K; ++k) acc[k] += values[k];
                         }
                         for (int k = 0; k < K; ++k) partial[unit * K + k] = acc[k];
                       }
                     });
  for (int64_t unit = 0; unit < units; ++unit) {
    const int64_t c = (unit / chunks_per_run) % channels;
    for (int k = 0; k < K; ++k) sums[k][c] += partial[unit * K + k];
  }
}

// Calls map(c, index) for every element (c its channel), in parallel over runs of elements
// that share a channel (channels first) or over whole rows (channels last).
template <typename Map>
void ForEachElement(const Eigen::ThreadPoolDevice& device, const ChannelLayout& layout,
                    Map map) {
  if (layout.elements() == 0) return;
  const int64_t channels = layout.channels;
  if (layout.inner == 1) {
    device.parallelFor(layout.outer, Eigen::TensorOpCost(8.0 * channels, 4.0 * channels,
                                                         6.0 * channels),
                       [&](Eigen::Index first, Eigen::Index last) {
                         for (Eigen::Index row = first; row < last; ++row) {
                           const int64_t base = row * channels;
                           for (int64_t c = 0; c < channels; ++c) map(c, base + c);
                         }
                       });
    return;
  }
  constexpr int64_t kChunk = 16384;
  const int64_t chunks_per_run = (layout.inner + kChunk - 1) / kChunk;
  const int64_t chunk_len = (layout.inner + chunks_per_run - 1) / chunks_per_run;
  device.parallelFor(layout.outer * channels * chunks_per_run,
                     Eigen::TensorOpCost(8.0 * chunk_len, 4.0 * chunk_len, 6.0 * chunk_len),
                     [&](Eigen::Index first, Eigen::Index last) {
                       for (Eigen::Index unit = first; unit < last; ++unit) {
                         const int64_t run = unit / chunks_per_run;  // o * channels + c
                         const int64_t c = run % channels;
                         const int64_t begin = (unit % chunks_per_run) * chunk_len;
                         const int64_t end = std::min(layout.inner, begin + chunk_len);
                         for (int64_t i = begin; i < end; ++i) map(c, run * layout.inner + i);
                       }
                     });
}

template <typename T>
float ToFloat(T value) {
  return static_cast<float>(value);
}

// The forward kernels: reads the launch, dispatches x's dtype T and checks x (buffer 0) and y
// (buffer 5), then returns forward(T{}, launch, x, y).
template <typename Forward>
absl::Status RunForward(const KernelContext& context, Forward&& forward) {
  VGPU_ASSIGN_OR_RETURN(const BatchNormForwardLaunch launch, ReadBatchNormForwardLaunch(context));
  return DispatchBatchNormData<Dispatch>(launch.x.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, launch.layout.elements()));
    VGPU_ASSIGN_OR_RETURN(T* y, context.Buffer<T>(5, launch.layout.elements()));
    return forward(zero, launch, x, y);
  });
}

// normalization::kForwardTraining.
absl::Status ForwardTraining(const KernelContext& context) {
  return RunForward(context, [&](auto zero, const BatchNormForwardLaunch& launch, auto x, auto y) {
    using T = decltype(zero);
    const ChannelLayout& layout = launch.layout;
    const int64_t channels = layout.channels;
    const float epsilon = launch.params.epsilon;
    const float factor = launch.params.exponential_avg_factor;
    // mean/variance hold the old running statistics; mean_out/variance_out get the new ones.
    const float* scale = launch.channel.scale;
    const float* offset = launch.channel.offset;
    float* running_mean = launch.channel.mean_out;
    float* running_variance = launch.channel.variance_out;
    float* saved_mean = launch.channel.saved_mean;
    float* saved_variance = launch.channel.saved_variance;
    const int64_t n = layout.per_channel();
    if (layout.elements() == 0) {
      // As TensorFlow: no statistics from an empty batch.
      const float nan = std::numeric_limits<float>::quiet_NaN();
      for (int64_t c = 0; c < channels; ++c) {
        running_mean[c] = running_variance[c] = nan;
        saved_mean[c] = saved_variance[c] = 0.0f;
      }
      return absl::OkStatus();
    }
    // One pass for sum(x) and sum(x^2): in double, E[x^2] - E[x]^2 keeps float accuracy.
    std::vector<double> sums[2];
    ChannelSums<2>(*context.device, layout,
                   [&](int64_t, int64_t i) {
                     const double value = ToFloat(x[i]);
                     return std::array<double, 2>{value, value * value};
                   },
                   sums);
    std::vector<float> mean(channels), variance(channels), multiplier(channels);
    // Bessel's correction for the running variance, as TensorFlow: n / max(n - 1, 1).
    const float adjust = static_cast<float>(n) / static_cast<float>(n > 1 ? n - 1 : 1);
    for (int64_t c = 0; c < channels; ++c) {
      const double batch_mean = sums[0][c] / static_cast<double>(n);
      const double batch_variance = sums[1][c] / static_cast<double>(n) - batch_mean * batch_mean;
      mean[c] = static_cast<float>(batch_mean);
      variance[c] = static_cast<float>(std::max(batch_variance, 0.0));
      multiplier[c] = scale[c] / std::sqrt(variance[c] + epsilon);
    }
    ForEachElement(*context.device, layout, [&](int64_t c, int64_t i) {
      y[i] = static_cast<T>((ToFloat(x[i]) - mean[c]) * multiplier[c] + offset[c]);
    });
    for (int64_t c = 0; c < channels; ++c) {
      if (factor == 1.0f) {
        running_mean[c] = mean[c];
        running_variance[c] = variance[c] * adjust;
      } else {
        const float keep = 1.0f - factor;
        running_mean[c] = keep * launch.channel.mean[c] + factor * mean[c];
        running_variance[c] = keep * launch.channel.variance[c] + (factor * adjust) * variance[c];
      }
      saved_mean[c] = mean[c];
      saved_variance[c] = variance[c];
    }
    return absl::OkStatus();
  });
}

// normalization::kForwardInference.
absl::Status ForwardInference(const KernelContext& context) {
  return RunForward(context, [&](auto zero, const BatchNormForwardLaunch& launch, auto x, auto y) {
    using T = decltype(zero);
    const ChannelLayout& layout = launch.layout;
    const int64_t channels = layout.channels;
    const float epsilon = launch.params.epsilon;
    const auto& channel = launch.channel;  // mean_out and variance_out may alias mean, variance
    if (layout.elements() == 0) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      for (int64_t c = 0; c < channels; ++c) {
        channel.saved_mean[c] = channel.mean[c];
        channel.saved_variance[c] = channel.variance[c];
        channel.mean_out[c] = channel.variance_out[c] = nan;
      }
      return absl::OkStatus();
    }
    std::vector<float> multiplier(channels), shift(channels);
    for (int64_t c = 0; c < channels; ++c) {
      multiplier[c] = channel.scale[c] / std::sqrt(channel.variance[c] + epsilon);
    }
    ForEachElement(*context.device, layout, [&](int64_t c, int64_t i) {
      y[i] = static_cast<T>((ToFloat(x[i]) - channel.mean[c]) * multiplier[c] + channel.offset[c]);
    });
    for (int64_t c = 0; c < channels; ++c) {
      const float m = channel.mean[c], v = channel.variance[c];
      channel.saved_mean[c] = m;
      channel.saved_variance[c] = v;
      channel.mean_out[c] = m;
      channel.variance_out[c] = v;
    }
    return absl::OkStatus();
  });
}

// normalization::kBackwardTraining (kTraining) and kBackwardInference.
template <bool kTraining>
absl::Status Backward(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const BatchNormBackwardLaunch launch,
                        ReadBatchNormBackwardLaunch(context));
  const ChannelLayout& layout = launch.layout;
  const int64_t channels = layout.channels;
  const float* scale = launch.channel.scale;
  const float* mean = launch.channel.mean;
  const float* variance = launch.channel.variance;
  float* dscale = launch.channel.dscale;
  float* doffset = launch.channel.doffset;
  const float epsilon = launch.params.epsilon;
  return DispatchBatchNormData<Dispatch>(launch.x.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* dy, context.Buffer<const T>(0, layout.elements()));
    VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(1, layout.elements()));
    VGPU_ASSIGN_OR_RETURN(T* dx, context.Buffer<T>(5, layout.elements()));
    // sums[0] = sum(dy), sums[1] = sum(dy * (x - mean)).
    std::vector<double> sums[2];
    ChannelSums<2>(*context.device, layout,
                   [&](int64_t c, int64_t i) {
                     const float g = ToFloat(dy[i]);
                     return std::array<double, 2>{g, g * (ToFloat(x[i]) - mean[c])};
                   },
                   sums);
    std::vector<float> inv_std(channels), mean_dy(channels), projection(channels);
    const int64_t n = layout.per_channel();
    const float n_inverse = n > 0 ? 1.0f / static_cast<float>(n) : 0.0f;
    for (int64_t c = 0; c < channels; ++c) {
      inv_std[c] = 1.0f / std::sqrt(variance[c] + epsilon);
      doffset[c] = static_cast<float>(sums[0][c]);
      dscale[c] = static_cast<float>(sums[1][c]) * inv_std[c];
      mean_dy[c] = doffset[c] * n_inverse;
      // (x - mean) * projection is the part of dy along x's centred direction.
      projection[c] = inv_std[c] * inv_std[c] * static_cast<float>(sums[1][c]) * n_inverse;
    }
    if constexpr (kTraining) {
      ForEachElement(*context.device, layout, [&](int64_t c, int64_t i) {
        const float centered = ToFloat(x[i]) - mean[c];
        dx[i] = static_cast<T>(scale[c] * inv_std[c] *
                               (ToFloat(dy[i]) - mean_dy[c] - centered * projection[c]));
      });
    } else {
      ForEachElement(*context.device, layout, [&](int64_t c, int64_t i) {
        dx[i] = static_cast<T>(ToFloat(dy[i]) * (scale[c] * inv_std[c]));
      });
    }
    return absl::OkStatus();
  });
}

}  // namespace

void AddNormalizationKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kNormalization, ForwardTraining, ForwardInference,
                  Backward<true>, Backward<false>);
}

}  // namespace vgpu::cpu_kernels
