// Max and average pooling (forward and backward) on the CPU backing executor, parallelised over
// output rows / images with the executor's Eigen thread pool. The arithmetic follows
// TensorFlow's CPU kernels element for element (same initial values, same accumulation order,
// same tie-breaking), so results match them bit for bit where TensorFlow uses its Eigen kernels.
//
// Both layouts share one implementation: an NCHW tensor pooled over H and W is an NHWC tensor of
// N*C images with one channel each (compiled separately, kPlanes, so that the channel loops
// vanish).
#define EIGEN_USE_THREADS

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/pooling.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

// A pooling problem in the channels-last view: `images` images of in_h x in_w x depth.
struct PoolGeometry {
  int64_t images = 0, in_h = 0, in_w = 0, depth = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t window_h = 1, window_w = 1, stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0;

  int64_t InputElements() const { return images * in_h * in_w * depth; }
  int64_t OutputElements() const { return images * out_h * out_w * depth; }
};

// The input rows [begin, end) covered by output row `out` of a window (clipped to the input).
struct Span1D {
  int64_t begin, end;
};
inline Span1D WindowSpan(int64_t out, int64_t stride, int64_t pad, int64_t window,
                         int64_t in_size) {
  const int64_t start = out * stride - pad;
  return {std::max<int64_t>(start, 0), std::min<int64_t>(start + window, in_size)};
}

// Validates the descriptors of a pooling launch and derives the geometry. `x` is the pooled
// input's descriptor, `y` the pooled output's.
absl::StatusOr<PoolGeometry> GeometryOf(const PoolingDescriptorSettings& pooling,
                                        const TensorDescriptorSettings& x,
                                        const TensorDescriptorSettings& y) {
  if (x.rank != 4 || y.rank != 4) {
    return absl::InvalidArgumentError("pooling tensors must be 4-dimensional");
  }
  if (x.dtype != y.dtype) {
    return absl::InvalidArgumentError("pooling input and output dtypes differ");
  }
  if (pooling.window_h <= 0 || pooling.window_w <= 0 || pooling.stride_h <= 0 ||
      pooling.stride_w <= 0 || pooling.pad_top < 0 || pooling.pad_bottom < 0 ||
      pooling.pad_left < 0 || pooling.pad_right < 0) {
    return absl::InvalidArgumentError("pooling window, strides and padding must be positive");
  }
  for (int i = 0; i < 4; ++i) {
    if (x.dims[i] < 0 || y.dims[i] < 0) {
      return absl::InvalidArgumentError("negative pooling tensor dimension");
    }
  }
  const bool nchw = pooling.data_format == DataFormat::kNCHW;
  if (!nchw && pooling.data_format != DataFormat::kNHWC) {
    return absl::InvalidArgumentError("unknown pooling data format");
  }
  const int h = nchw ? 2 : 1, w = nchw ? 3 : 2, c = nchw ? 1 : 3;
  PoolGeometry g;
  g.in_h = x.dims[h];
  g.in_w = x.dims[w];
  g.out_h = y.dims[h];
  g.out_w = y.dims[w];
  g.window_h = pooling.window_h;
  g.window_w = pooling.window_w;
  g.stride_h = pooling.stride_h;
  g.stride_w = pooling.stride_w;
  g.pad_top = pooling.pad_top;
  g.pad_left = pooling.pad_left;
  if (y.dims[0] != x.dims[0] || y.dims[c] != x.dims[c]) {
    return absl::InvalidArgumentError("pooling output batch/channels differ from the input's");
  }
  // TensorFlow's output size rule: (in + padding - window + stride) / stride, never negative.
  const int64_t expect_h =
      (g.in_h + pooling.pad_top + pooling.pad_bottom - g.window_h + g.stride_h) / g.stride_h;
  const int64_t expect_w =
      (g.in_w + pooling.pad_left + pooling.pad_right - g.window_w + g.stride_w) / g.stride_w;
  if (g.out_h != expect_h || g.out_w != expect_w) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pooling output is ", g.out_h, "x", g.out_w, ", the window geometry gives ", expect_h,
        "x", expect_w));
  }
  if (nchw) {
    g.images = x.dims[0] * x.dims[1];
    g.depth = 1;
  } else {
    g.images = x.dims[0];
    g.depth = x.dims[3];
  }
  return g;
}

Eigen::TensorOpCost Cost(double loaded, double stored, double compute) {
  return Eigen::TensorOpCost(loaded, stored, compute);
}

// Forward max pooling: out = max(lowest, window elements) with TensorFlow's update rule
// `out < in ? in : out` applied in row-major window order.
template <typename T, bool kPlanes>
void MaxPoolForward(const Eigen::ThreadPoolDevice& device, const PoolGeometry& g, const T* x,
                    T* y) {
  const int64_t depth = kPlanes ? 1 : g.depth;  // kPlanes: one channel per image
  const int64_t rows = g.images * g.out_h;
  const double per_row = static_cast<double>(g.out_w * g.window_h * g.window_w * depth);
  device.parallelFor(rows, Cost(per_row * sizeof(T), g.out_w * depth * sizeof(T), per_row),
                     [&](Eigen::Index begin, Eigen::Index end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / g.out_h, oh = row % g.out_h;
      const Span1D hs = WindowSpan(oh, g.stride_h, g.pad_top, g.window_h, g.in_h);
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        const Span1D ws = WindowSpan(ow, g.stride_w, g.pad_left, g.window_w, g.in_w);
        T* out = y + (row * g.out_w + ow) * depth;
        std::fill(out, out + depth, Eigen::NumTraits<T>::lowest());
        for (int64_t h = hs.begin; h < hs.end; ++h) {
          for (int64_t w = ws.begin; w < ws.end; ++w) {
            const T* in = x + ((b * g.in_h + h) * g.in_w + w) * depth;
            for (int64_t d = 0; d < depth; ++d) out[d] = out[d] < in[d] ? in[d] : out[d];
          }
        }
      }
    }
  });
}

// Forward average pooling: the window's elements summed in row-major order in T, then divided
// by their count (TensorFlow's CPU kernel accumulates the same way).
template <typename T, bool kPlanes>
void AvgPoolForward(const Eigen::ThreadPoolDevice& device, const PoolGeometry& g, const T* x,
                    T* y) {
  const int64_t depth = kPlanes ? 1 : g.depth;  // kPlanes: one channel per image
  const int64_t rows = g.images * g.out_h;
  const double per_row = static_cast<double>(g.out_w * g.window_h * g.window_w * depth);
  device.parallelFor(rows, Cost(per_row * sizeof(T), g.out_w * depth * sizeof(T), per_row),
                     [&](Eigen::Index begin, Eigen::Index end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / g.out_h, oh = row % g.out_h;
      const Span1D hs = WindowSpan(oh, g.stride_h, g.pad_top, g.window_h, g.in_h);
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        const Span1D ws = WindowSpan(ow, g.stride_w, g.pad_left, g.window_w, g.in_w);
        T* out = y + (row * g.out_w + ow) * depth;
        std::fill(out, out + depth, T(0));
        for (int64_t h = hs.begin; h < hs.end; ++h) {
          for (int64_t w = ws.begin; w < ws.end; ++w) {
            const T* in = x + ((b * g.in_h + h) * g.in_w + w) * depth;
            for (int64_t d = 0; d < depth; ++d) out[d] += in[d];
          }
        }
        const T count(static_cast<float>((hs.end - hs.begin) * (ws.end - ws.begin)));
        for (int64_t d = 0; d < depth; ++d) out[d] /= count;
      }
    }
  });
}

// Max pooling gradient. Work units are (image, block of channels): every dx element receives
// its contributions from outputs of its own image and channel, in output order, as in
// TensorFlow's CPU kernel, so the sums are the same.
template <typename T, bool kPlanes>
void MaxPoolBackward(const Eigen::ThreadPoolDevice& device, const PoolGeometry& g, const T* x,
                     const T* dy, T* dx) {
  const int64_t depth = kPlanes ? 1 : g.depth;  // kPlanes: one channel per image
  constexpr int64_t kChannelBlock = 64;
  const int64_t blocks_per_image = (depth + kChannelBlock - 1) / kChannelBlock;
  const int64_t units = g.images * blocks_per_image;
  const double per_unit = static_cast<double>(g.out_h * g.out_w * g.window_h * g.window_w *
                                              std::min(depth, kChannelBlock));
  device.parallelFor(units, Cost(per_unit * sizeof(T), per_unit * sizeof(T), per_unit),
                     [&](Eigen::Index begin, Eigen::Index end) {
    T best_value[kChannelBlock];
    int64_t best_offset[kChannelBlock];
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t b = unit / blocks_per_image;
      const int64_t d0 = (unit % blocks_per_image) * kChannelBlock;
      const int64_t d1 = std::min(depth, d0 + kChannelBlock);
      const int64_t width = d1 - d0;
      const int64_t image_offset = b * g.in_h * g.in_w * depth;
      for (int64_t p = 0; p < g.in_h * g.in_w; ++p) {
        std::fill(dx + image_offset + p * depth + d0, dx + image_offset + p * depth + d1,
                  T(0));
      }
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        const Span1D hs = WindowSpan(oh, g.stride_h, g.pad_top, g.window_h, g.in_h);
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          const Span1D ws = WindowSpan(ow, g.stride_w, g.pad_left, g.window_w, g.in_w);
          std::fill(best_offset, best_offset + width, int64_t{-1});
          for (int64_t h = hs.begin; h < hs.end; ++h) {
            for (int64_t w = ws.begin; w < ws.end; ++w) {
              const int64_t offset = image_offset + (h * g.in_w + w) * depth + d0;
              const T* in = x + offset;
              for (int64_t d = 0; d < width; ++d) {
                if (best_offset[d] < 0 || best_value[d] < in[d]) {
                  best_value[d] = in[d];
                  best_offset[d] = offset + d;
                }
              }
            }
          }
          const T* grad = dy + ((b * g.out_h + oh) * g.out_w + ow) * depth + d0;
          for (int64_t d = 0; d < width; ++d) {
            if (best_offset[d] >= 0) dx[best_offset[d]] += grad[d];
          }
        }
      }
    }
  });
}

// Average pooling gradient, gathered per input row: dx[h, w] sums dy * (1 / window count) over
// the windows containing (h, w) in row-major window order (the order of TensorFlow's scatter).
template <typename T, bool kPlanes>
void AvgPoolBackward(const Eigen::ThreadPoolDevice& device, const PoolGeometry& g, const T* dy,
                     T* dx) {
  const int64_t depth = kPlanes ? 1 : g.depth;  // kPlanes: one channel per image
  const int64_t rows = g.images * g.in_h;
  const int64_t reach_h = (g.window_h + g.stride_h - 1) / g.stride_h;
  const int64_t reach_w = (g.window_w + g.stride_w - 1) / g.stride_w;
  const double per_row = static_cast<double>(g.in_w * reach_h * reach_w * depth);
  // 1 / (number of input elements) of every window: as TensorFlow, the reciprocal computed in
  // double, then rounded to T.
  std::vector<T> scales(g.out_h * g.out_w);
  for (int64_t oh = 0; oh < g.out_h; ++oh) {
    const Span1D hs = WindowSpan(oh, g.stride_h, g.pad_top, g.window_h, g.in_h);
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const Span1D ws = WindowSpan(ow, g.stride_w, g.pad_left, g.window_w, g.in_w);
      scales[oh * g.out_w + ow] =
          T(1.0 / static_cast<double>((hs.end - hs.begin) * (ws.end - ws.begin)));
    }
  }
  // The output columns [begin, end) whose windows cover input column w.
  std::vector<Span1D> covering_columns(g.in_w);
  for (int64_t w = 0; w < g.in_w; ++w) {
    const int64_t wpad = w + g.pad_left;
    covering_columns[w] = {wpad < g.window_w ? 0 : (wpad - g.window_w) / g.stride_w + 1,
                           std::min(wpad / g.stride_w + 1, g.out_w)};
  }
  device.parallelFor(rows, Cost(per_row * sizeof(T), g.in_w * depth * sizeof(T), per_row),
                     [&](Eigen::Index begin, Eigen::Index end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / g.in_h, h = row % g.in_h;
      // Output rows whose window covers input row h.
      const int64_t hpad = h + g.pad_top;
      const int64_t oh_begin = hpad < g.window_h ? 0 : (hpad - g.window_h) / g.stride_h + 1;
      const int64_t oh_end = std::min(hpad / g.stride_h + 1, g.out_h);
      for (int64_t w = 0; w < g.in_w; ++w) {
        const int64_t ow_begin = covering_columns[w].begin, ow_end = covering_columns[w].end;
        T* out = dx + (row * g.in_w + w) * depth;
        std::fill(out, out + depth, T(0));
        for (int64_t oh = oh_begin; oh < oh_end; ++oh) {
          for (int64_t ow = ow_begin; ow < ow_end; ++ow) {
            const T scale = scales[oh * g.out_w + ow];
            const T* grad = dy + ((b * g.out_h + oh) * g.out_w + ow) * depth;
            for (int64_t d = 0; d < depth; ++d) out[d] += grad[d] * scale;
          }
        }
      }
    }
  });
}

}  // namespace

// pooling::kForward (see protocol/kernels/pooling.h).
absl::Status PoolingForward(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(PoolingDescriptorSettings pooling,
                        context.Descriptor<PoolingDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings x_desc,
                        context.Descriptor<TensorDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings y_desc,
                        context.Descriptor<TensorDescriptorSettings>(2));
  VGPU_ASSIGN_OR_RETURN(PoolGeometry g, GeometryOf(pooling, x_desc, y_desc));
  return DispatchFloating(x_desc.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, g.InputElements()));
    VGPU_ASSIGN_OR_RETURN(T* y, context.Buffer<T>(1, g.OutputElements()));
    if (g.OutputElements() == 0) return absl::OkStatus();
    const bool planes = g.depth == 1;
    switch (pooling.mode) {
      case PoolingMode::kMax:
        planes ? MaxPoolForward<T, true>(*context.device, g, x, y)
               : MaxPoolForward<T, false>(*context.device, g, x, y);
        break;
      case PoolingMode::kAverage:
        planes ? AvgPoolForward<T, true>(*context.device, g, x, y)
               : AvgPoolForward<T, false>(*context.device, g, x, y);
        break;
      default: return absl::InvalidArgumentError("unknown pooling mode");
    }
    return absl::OkStatus();
  });
}

// pooling::kBackward (see protocol/kernels/pooling.h).
absl::Status PoolingBackward(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(PoolingDescriptorSettings pooling,
                        context.Descriptor<PoolingDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings x_desc,
                        context.Descriptor<TensorDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings y_desc,
                        context.Descriptor<TensorDescriptorSettings>(2));
  VGPU_ASSIGN_OR_RETURN(PoolGeometry g, GeometryOf(pooling, x_desc, y_desc));
  const bool max_mode = pooling.mode == PoolingMode::kMax;
  if (!max_mode && pooling.mode != PoolingMode::kAverage) {
    return absl::InvalidArgumentError("unknown pooling mode");
  }
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(max_mode ? 3 : 2));
  return DispatchFloating(x_desc.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    size_t next = 0;
    const T* x = nullptr;
    if (max_mode) {
      VGPU_ASSIGN_OR_RETURN(x, context.Buffer<const T>(next++, g.InputElements()));
    }
    VGPU_ASSIGN_OR_RETURN(const T* dy, context.Buffer<const T>(next++, g.OutputElements()));
    VGPU_ASSIGN_OR_RETURN(T* dx, context.Buffer<T>(next++, g.InputElements()));
    if (g.InputElements() == 0) return absl::OkStatus();
    const bool planes = g.depth == 1;
    if (max_mode) {
      planes ? MaxPoolBackward<T, true>(*context.device, g, x, dy, dx)
             : MaxPoolBackward<T, false>(*context.device, g, x, dy, dx);
    } else {
      planes ? AvgPoolBackward<T, true>(*context.device, g, dy, dx)
             : AvgPoolBackward<T, false>(*context.device, g, dy, dx);
    }
    return absl::OkStatus();
  });
}

}  // namespace vgpu::cpu_kernels

namespace vgpu {

void AddPoolingKernels(KernelTable& table) {
  table.Add(pooling::kForward, "pooling_forward", cpu_kernels::PoolingForward);
  table.Add(pooling::kBackward, "pooling_backward", cpu_kernels::PoolingBackward);
}

}  // namespace vgpu
