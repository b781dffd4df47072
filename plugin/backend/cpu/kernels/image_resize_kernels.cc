// The image resize family (protocol/kernels/image_resize.h) on the CPU backing executor:
// bilinear, nearest neighbour, bicubic and area resizing and their gradients (ScaleAndTranslate:
// image_scale_translate_kernels.cc). Every kernel reads its launch with the launch layer
// (launch/image_resize_launch.h), turns the geometry into per-row and per-column tables (source
// indices, always clamped into the image, and weights), computed once per launch with
// TensorFlow's float arithmetic, then runs one parallelFor over output rows. The gradients are
// written in gather form: each row of the image gradient collects, from a table of the resized
// rows that touched it, exactly the terms TensorFlow's CPU kernel scatters into it, in the same
// order, so results are deterministic and match TensorFlow's additions.
#define EIGEN_USE_THREADS
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/image_resampling.h"
#include "plugin/backend/launch/image_resize_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/image_resize.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

using namespace image_resampling;  // NOLINT: the family's shared helpers
using image_resize_launch::ReadResizeGeometry;
using image_resize_launch::RejectAlignedHalfPixel;
using image_resize_launch::RequireImagePixels;

// A resize launch's parameter block, read: the element type, then the geometry.
struct ResizeLaunch {
  uint32_t type = 0;  // a PixelType, a DType or an element size, as the kernel's protocol says
  ResizeGeometry g;
};

// Reads the launch of a resize kernel (two buffers: its input, its output). With
// `reject_aligned_half_pixel` also refuses align_corners with half_pixel_centers
// (RejectAlignedHalfPixel).
absl::StatusOr<ResizeLaunch> ReadResizeLaunch(const KernelContext& context,
                                              bool reject_aligned_half_pixel) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  ParamReader reader = context.Params();
  ResizeLaunch launch;
  VGPU_ASSIGN_OR_RETURN(launch.type, reader.Get<uint32_t>());
  VGPU_ASSIGN_OR_RETURN(launch.g, ReadResizeGeometry(reader));
  if (reject_aligned_half_pixel) VGPU_RETURN_IF_ERROR(RejectAlignedHalfPixel(launch.g));
  return launch;
}

// One dimension of a resize: the resized and the image size along it and its scale
// (ResizeScale).
struct ResizeAxis {
  int64_t resized_size = 0, image_size = 0;
  float scale = 0;
};

// The height and the width of a resize.
ResizeAxis Rows(const ResizeGeometry& g) {
  return {g.resized_height, g.image_height,
          ResizeScale(g.image_height, g.resized_height, g.align_corners)};
}
ResizeAxis Columns(const ResizeGeometry& g) {
  return {g.resized_width, g.image_width,
          ResizeScale(g.image_width, g.resized_width, g.align_corners)};
}

// --- Bilinear ----------------------------------------------------------------------------------

// The two taps of a resized index along one dimension (TensorFlow's CachedInterpolation).
struct LinearTap {
  int64_t lower = 0, upper = 0;
  float lerp = 0;  // weight of `upper`
};

std::vector<LinearTap> LinearTaps(const ResizeAxis& axis, bool half_pixel_centers) {
  std::vector<LinearTap> taps(axis.resized_size);
  for (int64_t i = 0; i < axis.resized_size; ++i) {
    const float in = SourceCoordinate(i, axis.scale, half_pixel_centers);
    const float in_floor = std::floor(in);
    taps[i].lower = ClampIndex(ToIndex(in_floor), axis.image_size);
    taps[i].upper = ClampIndex(ToIndex(std::ceil(in)), axis.image_size);
    taps[i].lerp = in - in_floor;
  }
  return taps;
}

// image_resize::kResizeBilinear.
absl::Status ResizeBilinear(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const ResizeLaunch launch, ReadResizeLaunch(context, true));
  const ResizeGeometry& g = launch.g;
  return ForwardResize(context, launch.type, g, [&](auto zero, const auto& io) -> absl::Status {
    using E = decltype(zero);
    const Eigen::ThreadPoolDevice& device = *context.device;
    const int64_t channels = g.channels;
    if (g.image_height == g.resized_height && g.image_width == g.resized_width) {
      // TensorFlow's no-op resize: a conversion (so an infinity stays one).
      device.parallelFor(g.resized_count, Eigen::TensorOpCost(sizeof(E), 4, 1),
                         [&](Eigen::Index first, Eigen::Index end) {
                           for (int64_t i = first; i < end; ++i) {
                             io.resized[i] = static_cast<float>(io.image[i]);
                           }
                         });
      return absl::OkStatus();
    }
    const std::vector<LinearTap> ys = LinearTaps(Rows(g), g.half_pixel_centers);
    const std::vector<LinearTap> xs = LinearTaps(Columns(g), g.half_pixel_centers);
    const int64_t image_row = g.image_width * channels;
    const int64_t resized_row = g.resized_width * channels;
    ForEachRow(device, g.batch, g.resized_height, 8.0 * resized_row, [&](int64_t b, int64_t y) {
      const E* image = io.image + b * g.image_height * image_row;
      const E* top = image + ys[y].lower * image_row;
      const E* bottom = image + ys[y].upper * image_row;
      const float y_lerp = ys[y].lerp;
      float* out = io.resized + (b * g.resized_height + y) * resized_row;
      for (int64_t x = 0; x < g.resized_width; ++x) {
        const int64_t left = xs[x].lower * channels, right = xs[x].upper * channels;
        const float x_lerp = xs[x].lerp;
        for (int64_t c = 0; c < channels; ++c) {
          const float top_left = static_cast<float>(top[left + c]);
          const float top_right = static_cast<float>(top[right + c]);
          const float bottom_left = static_cast<float>(bottom[left + c]);
          const float bottom_right = static_cast<float>(bottom[right + c]);
          const float upper = top_left + (top_right - top_left) * x_lerp;
          const float lower = bottom_left + (bottom_right - bottom_left) * x_lerp;
          out[x * channels + c] = upper + (lower - upper) * y_lerp;
        }
      }
    });
    return absl::OkStatus();
  });
}

// The resized rows that touch each image row, in ascending order, with which taps do (bit 0:
// the row is their first tap, bit 1: their second, and so on): a compressed table, row r's
// entries at [offsets[r], offsets[r + 1]).
struct RowSources {
  struct Entry {
    int64_t resized_row;
    uint32_t taps;
  };
  std::vector<int64_t> offsets;
  std::vector<Entry> entries;
};

// `tap_rows(i, k)` is the image row of tap k of resized row i (k < tap_count, rows clamped).
template <typename TapRow>
RowSources CollectRowSources(int64_t resized_rows, int64_t image_rows, int tap_count,
                             TapRow&& tap_rows) {
  RowSources sources;
  sources.offsets.assign(image_rows + 1, 0);
  // Count the distinct (image row, resized row) pairs, then fill in resized-row order.
  auto for_each_pair = [&](auto&& visit) {
    for (int64_t i = 0; i < resized_rows; ++i) {
      for (int k = 0; k < tap_count; ++k) {
        const int64_t row = tap_rows(i, k);
        uint32_t taps = 0;
        bool seen_before = false;
        for (int j = 0; j < tap_count; ++j) {
          if (tap_rows(i, j) != row) continue;
          if (j < k) seen_before = true;
          taps |= 1u << j;
        }
        if (!seen_before) visit(row, i, taps);
      }
    }
  };
  for_each_pair([&](int64_t row, int64_t, uint32_t) { ++sources.offsets[row + 1]; });
  for (int64_t r = 0; r < image_rows; ++r) sources.offsets[r + 1] += sources.offsets[r];
  sources.entries.resize(sources.offsets[image_rows]);
  std::vector<int64_t> next(sources.offsets.begin(), sources.offsets.end() - 1);
  for_each_pair([&](int64_t row, int64_t i, uint32_t taps) {
    sources.entries[next[row]++] = RowSources::Entry{i, taps};
  });
  return sources;
}

// image_resize::kResizeBilinearGrad.
absl::Status ResizeBilinearGrad(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const ResizeLaunch launch, ReadResizeLaunch(context, true));
  const ResizeGeometry& g = launch.g;
  return Dispatch::Floating(static_cast<DType>(launch.type), [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    // TensorFlow sums in float (double for a double image) and converts at the end.
    using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
    using Buffers = GradBuffers<float, T>;
    VGPU_ASSIGN_OR_RETURN(Buffers io, (GetGradBuffers<float, T>(context, g)));
    if (g.image_count == 0 || g.resized_count == 0) return absl::OkStatus();
    const std::vector<LinearTap> ys = LinearTaps(Rows(g), g.half_pixel_centers);
    const std::vector<LinearTap> xs = LinearTaps(Columns(g), g.half_pixel_centers);
    const RowSources sources = CollectRowSources(
        g.resized_height, g.image_height, 2,
        [&](int64_t i, int k) { return k == 0 ? ys[i].lower : ys[i].upper; });
    const int64_t channels = g.channels;
    const int64_t image_row = g.image_width * channels;
    const int64_t resized_row = g.resized_width * channels;
    const double row_cost = 8.0 * resized_row * (static_cast<double>(sources.entries.size()) /
                                                 static_cast<double>(g.image_height));
    context.device->parallelFor(
        g.batch * g.image_height, Eigen::TensorOpCost(row_cost, row_cost, row_cost),
        [&](Eigen::Index first, Eigen::Index end) {
          std::vector<Acc> scratch;
          if constexpr (!std::is_same_v<T, Acc>) scratch.resize(image_row);
          for (int64_t index = first; index < end; ++index) {
            const int64_t b = index / g.image_height, r = index % g.image_height;
            T* out = io.image_grad + index * image_row;
            Acc* acc = nullptr;
            if constexpr (std::is_same_v<T, Acc>) {
              acc = out;
            } else {
              acc = scratch.data();
            }
            std::fill(acc, acc + image_row, Acc(0));
            for (int64_t e = sources.offsets[r]; e < sources.offsets[r + 1]; ++e) {
              const RowSources::Entry& entry = sources.entries[e];
              const float y_lerp = ys[entry.resized_row].lerp;
              const float weights[2] = {1.0f - y_lerp, y_lerp};  // top, bottom
              const float* grad =
                  io.resized_grad + (b * g.resized_height + entry.resized_row) * resized_row;
              for (int64_t x = 0; x < g.resized_width; ++x) {
                const int64_t left = xs[x].lower * channels, right = xs[x].upper * channels;
                const float x_lerp = xs[x].lerp, inverse_x_lerp = 1.0f - x_lerp;
                const float* pixel = grad + x * channels;
                for (int tap = 0; tap < 2; ++tap) {
                  if ((entry.taps & (1u << tap)) == 0) continue;
                  const float y_weight = weights[tap];
                  for (int64_t c = 0; c < channels; ++c) {
                    acc[left + c] += static_cast<Acc>(pixel[c] * y_weight * inverse_x_lerp);
                    acc[right + c] += static_cast<Acc>(pixel[c] * y_weight * x_lerp);
                  }
                }
              }
            }
            if constexpr (!std::is_same_v<T, Acc>) {
              for (int64_t k = 0; k < image_row; ++k) out[k] = static_cast<T>(acc[k]);
            }
          }
        });
    return absl::OkStatus();
  });
}

// --- Nearest neighbour -------------------------------------------------------------------------

// The source index of resized index `i` (see kResizeNearestNeighbor in the protocol header).
std::vector<int64_t> NearestSources(const ResizeAxis& axis, bool half_pixel_centers,
                                    bool align_corners) {
  std::vector<int64_t> sources(axis.resized_size);
  for (int64_t i = 0; i < axis.resized_size; ++i) {
    float source = 0;
    if (half_pixel_centers) {
      source = std::floor((static_cast<float>(i) + 0.5f) * axis.scale);
    } else {
      const float coordinate = static_cast<float>(i) * axis.scale;
      source = align_corners ? std::round(coordinate) : std::floor(coordinate);
    }
    sources[i] = ClampIndex(ToIndex(source), axis.image_size);
  }
  return sources;
}

// image_resize::kResizeNearestNeighbor.
absl::Status ResizeNearestNeighbor(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const ResizeLaunch launch, ReadResizeLaunch(context, true));
  const ResizeGeometry& g = launch.g;
  auto run = [&](auto zero) -> absl::Status {
    using E = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const E* image, context.Buffer<const E>(0, g.image_count));
    VGPU_ASSIGN_OR_RETURN(E* resized, context.Buffer<E>(1, g.resized_count));
    if (g.resized_count == 0) return absl::OkStatus();
    VGPU_RETURN_IF_ERROR(RequireImagePixels(g));
    const std::vector<int64_t> ys =
        NearestSources(Rows(g), g.half_pixel_centers, g.align_corners);
    const std::vector<int64_t> xs =
        NearestSources(Columns(g), g.half_pixel_centers, g.align_corners);
    const int64_t channels = g.channels;
    const int64_t image_row = g.image_width * channels;
    const int64_t resized_row = g.resized_width * channels;
    ForEachRow(*context.device, g.batch, g.resized_height, 1.0 * resized_row * sizeof(E),
               [&](int64_t b, int64_t y) {
                 const E* source = image + (b * g.image_height + ys[y]) * image_row;
                 E* out = resized + (b * g.resized_height + y) * resized_row;
                 for (int64_t x = 0; x < g.resized_width; ++x) {
                   std::memcpy(out + x * channels, source + xs[x] * channels,
                               channels * sizeof(E));
                 }
               });
    return absl::OkStatus();
  };
  return Dispatch::ElementSize(launch.type, run);
}

// image_resize::kResizeNearestNeighborGrad. Both flags may be set here (TensorFlow does not
// refuse them for the gradient); the index rule is then the CUDA kernel's.
absl::Status ResizeNearestNeighborGrad(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const ResizeLaunch launch, ReadResizeLaunch(context, false));
  const ResizeGeometry& g = launch.g;
  return Dispatch::Floating(static_cast<DType>(launch.type), [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    using Buffers = GradBuffers<T, T>;
    VGPU_ASSIGN_OR_RETURN(Buffers io, (GetGradBuffers<T, T>(context, g)));
    if (g.image_count == 0 || g.resized_count == 0) return absl::OkStatus();
    const std::vector<int64_t> ys =
        NearestSources(Rows(g), g.half_pixel_centers, g.align_corners);
    const std::vector<int64_t> xs =
        NearestSources(Columns(g), g.half_pixel_centers, g.align_corners);
    const RowSources sources = CollectRowSources(g.resized_height, g.image_height, 1,
                                                 [&](int64_t i, int) { return ys[i]; });
    const int64_t channels = g.channels;
    const int64_t image_row = g.image_width * channels;
    const int64_t resized_row = g.resized_width * channels;
    const double row_cost = 1.0 * resized_row * (static_cast<double>(sources.entries.size()) /
                                                 static_cast<double>(g.image_height));
    ForEachRow(*context.device, g.batch, g.image_height, row_cost, [&](int64_t b, int64_t r) {
      T* out = io.image_grad + (b * g.image_height + r) * image_row;
      std::fill(out, out + image_row, T(0));
      for (int64_t e = sources.offsets[r]; e < sources.offsets[r + 1]; ++e) {
        const T* grad = io.resized_grad +
                        (b * g.resized_height + sources.entries[e].resized_row) * resized_row;
        for (int64_t x = 0; x < g.resized_width; ++x) {
          T* target = out + xs[x] * channels;
          const T* pixel = grad + x * channels;
          for (int64_t c = 0; c < channels; ++c) target[c] = target[c] + pixel[c];
        }
      }
    });
    return absl::OkStatus();
  });
}

// --- Bicubic -----------------------------------------------------------------------------------

constexpr int64_t kCubicTableSize = 1024;

// Keys' cubic kernel with parameter `a` sampled at kCubicTableSize + 1 fractions: entry 2i is
// the weight of a tap at distance i / size, entry 2i + 1 of one at 1 + i / size. Computed in
// double and stored in float, as TensorFlow's table is.
std::vector<float> CubicTable(double a) {
  std::vector<float> table((kCubicTableSize + 1) * 2);
  for (int64_t i = 0; i <= kCubicTableSize; ++i) {
    float x = static_cast<float>(static_cast<double>(i) / kCubicTableSize);
    table[i * 2] = static_cast<float>(((a + 2) * x - (a + 3)) * x * x + 1);
    x = static_cast<float>(x + 1.0);
    table[i * 2 + 1] = static_cast<float>(((a * x - 5 * a) * x + 8 * a) * x - 4 * a);
  }
  return table;
}

// The table of the half-pixel scheme (Keys, a = -0.5) or of the legacy one (a = -0.75).
const std::vector<float>& CubicCoefficients(bool half_pixel_centers) {
  static const std::vector<float>* const keys = new std::vector<float>(CubicTable(-0.5));
  static const std::vector<float>* const legacy = new std::vector<float>(CubicTable(-0.75));
  return half_pixel_centers ? *keys : *legacy;
}

// The four taps of a resized index along one dimension.
struct CubicTaps {
  int64_t index[4];
  float weight[4];
};

std::vector<CubicTaps> CubicTapsOf(const ResizeAxis& axis, bool half_pixel_centers) {
  const std::vector<float>& table = CubicCoefficients(half_pixel_centers);
  std::vector<CubicTaps> all(axis.resized_size);
  for (int64_t i = 0; i < axis.resized_size; ++i) {
    CubicTaps& taps = all[i];
    const float location = SourceCoordinate(i, axis.scale, half_pixel_centers);
    const float location_floor = std::floor(location);
    const int64_t base = ToIndex(location_floor);
    const float delta = location - static_cast<float>(base);
    const int64_t offset =
        std::clamp<int64_t>(std::lrint(delta * static_cast<float>(kCubicTableSize)), 0,
                            kCubicTableSize);
    const float coefficients[4] = {table[offset * 2 + 1], table[offset * 2],
                                   table[(kCubicTableSize - offset) * 2],
                                   table[(kCubicTableSize - offset) * 2 + 1]};
    for (int k = 0; k < 4; ++k) {
      taps.index[k] = ClampIndex(base - 1 + k, axis.image_size);
      taps.weight[k] = coefficients[k];
      // Half-pixel centres: a tap outside the image weighs nothing (then renormalised).
      if (half_pixel_centers && taps.index[k] != base - 1 + k) taps.weight[k] = 0.0f;
    }
    if (half_pixel_centers) {
      const float sum = taps.weight[0] + taps.weight[1] + taps.weight[2] + taps.weight[3];
      if (std::abs(sum) >= 1000.0f * std::numeric_limits<float>::min()) {
        const float inverse = 1.0f / sum;
        for (float& w : taps.weight) w *= inverse;
      }
    }
  }
  return all;
}

// image_resize::kResizeBicubic.
absl::Status ResizeBicubic(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const ResizeLaunch launch, ReadResizeLaunch(context, true));
  const ResizeGeometry& g = launch.g;
  return ForwardResize(context, launch.type, g, [&](auto zero, const auto& io) -> absl::Status {
    using E = decltype(zero);
    const std::vector<CubicTaps> ys = CubicTapsOf(Rows(g), g.half_pixel_centers);
    const std::vector<CubicTaps> xs = CubicTapsOf(Columns(g), g.half_pixel_centers);
    const int64_t channels = g.channels;
    const int64_t image_row = g.image_width * channels;
    const int64_t resized_row = g.resized_width * channels;
    ForEachRow(*context.device, g.batch, g.resized_height, 40.0 * resized_row,
               [&](int64_t b, int64_t y) {
                 const CubicTaps& ty = ys[y];
                 const E* image = io.image + b * g.image_height * image_row;
                 const E* rows[4];
                 for (int k = 0; k < 4; ++k) rows[k] = image + ty.index[k] * image_row;
                 float* out = io.resized + (b * g.resized_height + y) * resized_row;
                 for (int64_t x = 0; x < g.resized_width; ++x) {
                   const CubicTaps& tx = xs[x];
                   for (int64_t c = 0; c < channels; ++c) {
                     float columns[4];  // each tap column interpolated along y first
                     for (int j = 0; j < 4; ++j) {
                       const int64_t at = tx.index[j] * channels + c;
                       columns[j] = static_cast<float>(rows[0][at]) * ty.weight[0] +
                                    static_cast<float>(rows[1][at]) * ty.weight[1] +
                                    static_cast<float>(rows[2][at]) * ty.weight[2] +
                                    static_cast<float>(rows[3][at]) * ty.weight[3];
                     }
                     out[x * channels + c] = columns[0] * tx.weight[0] +
                                             columns[1] * tx.weight[1] +
                                             columns[2] * tx.weight[2] +
                                             columns[3] * tx.weight[3];
                   }
                 }
               });
    return absl::OkStatus();
  });
}

// image_resize::kResizeBicubicGrad.
absl::Status ResizeBicubicGrad(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const ResizeLaunch launch, ReadResizeLaunch(context, true));
  const ResizeGeometry& g = launch.g;
  auto run = [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    using Buffers = GradBuffers<float, T>;
    VGPU_ASSIGN_OR_RETURN(Buffers io, (GetGradBuffers<float, T>(context, g)));
    if (g.image_count == 0 || g.resized_count == 0) return absl::OkStatus();
    const std::vector<CubicTaps> ys = CubicTapsOf(Rows(g), g.half_pixel_centers);
    const std::vector<CubicTaps> xs = CubicTapsOf(Columns(g), g.half_pixel_centers);
    const RowSources sources = CollectRowSources(
        g.resized_height, g.image_height, 4, [&](int64_t i, int k) { return ys[i].index[k]; });
    const int64_t channels = g.channels;
    const int64_t image_row = g.image_width * channels;
    const int64_t resized_row = g.resized_width * channels;
    const double row_cost = 8.0 * resized_row * (static_cast<double>(sources.entries.size()) /
                                                 static_cast<double>(g.image_height));
    ForEachRow(*context.device, g.batch, g.image_height, row_cost, [&](int64_t b, int64_t r) {
      T* out = io.image_grad + (b * g.image_height + r) * image_row;
      std::fill(out, out + image_row, T(0));
      for (int64_t e = sources.offsets[r]; e < sources.offsets[r + 1]; ++e) {
        const RowSources::Entry& entry = sources.entries[e];
        const CubicTaps& ty = ys[entry.resized_row];
        const float* grad =
            io.resized_grad + (b * g.resized_height + entry.resized_row) * resized_row;
        for (int64_t x = 0; x < g.resized_width; ++x) {
          const CubicTaps& tx = xs[x];
          for (int64_t c = 0; c < channels; ++c) {
            const T value = static_cast<T>(grad[x * channels + c]);
            for (int k = 0; k < 4; ++k) {
              if ((entry.taps & (1u << k)) == 0) continue;
              for (int j = 0; j < 4; ++j) {
                out[tx.index[j] * channels + c] +=
                    static_cast<T>(value * ty.weight[k] * tx.weight[j]);
              }
            }
          }
        }
      }
    });
    return absl::OkStatus();
  };
  switch (static_cast<DType>(launch.type)) {
    case DType::kFloat32: return run(float{});
    case DType::kFloat64: return run(double{});
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("resize bicubic grad: dtype ", launch.type,
                       " is not float32 or float64"));
  }
}

// --- Area ----------------------------------------------------------------------------------------

// The source cells of one resized index along a dimension: it covers [from, to) of the image,
// so cells [start, end), the first and last weighted by the fraction of them it covers
// (TensorFlow's CachedInterpolation of ResizeArea; cells are clamped into the image when read).
struct AreaSpan {
  float from = 0, to = 0;
  int64_t start = 0, end = 0;
  float start_weight = 0, end_weight = 0;  // of `start` and of `end - 1`
};

// The weight of `cell` in the span [from, to) of a dimension with `scale` (as TensorFlow
// computes it: the covered fraction of the cell, or `scale` for a cell the span lies within).
float AreaCellWeight(int64_t cell, float from, float to, float scale) {
  if (static_cast<float>(cell) < from) {
    return static_cast<float>(cell + 1) > to ? scale : static_cast<float>(cell + 1) - from;
  }
  return static_cast<float>(cell + 1) > to ? to - static_cast<float>(cell) : 1.0f;
}

std::vector<AreaSpan> AreaSpans(int64_t resized_size, float scale) {
  std::vector<AreaSpan> spans(resized_size);
  for (int64_t i = 0; i < resized_size; ++i) {
    AreaSpan& span = spans[i];
    span.from = static_cast<float>(i) * scale;
    span.to = static_cast<float>(i + 1) * scale;
    span.start = ToIndex(std::floor(span.from));
    span.end = ToIndex(std::ceil(span.to));
    span.start_weight = AreaCellWeight(span.start, span.from, span.to, scale);
    span.end_weight = AreaCellWeight(span.end - 1, span.from, span.to, scale);
  }
  return spans;
}

// image_resize::kResizeArea.
absl::Status ResizeArea(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const ResizeLaunch launch, ReadResizeLaunch(context, false));
  const ResizeGeometry& g = launch.g;
  if (g.half_pixel_centers) {
    return absl::InvalidArgumentError("resize area: half_pixel_centers is not an option");
  }
  return ForwardResize(context, launch.type, g, [&](auto zero, const auto& io) -> absl::Status {
    using E = decltype(zero);
    const float height_scale = ResizeScale(g.image_height, g.resized_height, g.align_corners);
    const float width_scale = ResizeScale(g.image_width, g.resized_width, g.align_corners);
    const std::vector<AreaSpan> ys = AreaSpans(g.resized_height, height_scale);
    const std::vector<AreaSpan> xs = AreaSpans(g.resized_width, width_scale);
    const float scale =
        static_cast<float>(1.0 / static_cast<double>(height_scale * width_scale));
    const int64_t channels = g.channels;
    const int64_t image_row = g.image_width * channels;
    const int64_t resized_row = g.resized_width * channels;
    const double cells_per_output =
        (static_cast<double>(height_scale) + 2) * (static_cast<double>(width_scale) + 2);
    ForEachRow(
        *context.device, g.batch, g.resized_height, cells_per_output * resized_row,
        [&](int64_t b, int64_t y) {
          const AreaSpan& span_y = ys[y];
          const E* image = io.image + b * g.image_height * image_row;
          float* out = io.resized + (b * g.resized_height + y) * resized_row;
          for (int64_t x = 0; x < g.resized_width; ++x) {
            const AreaSpan& span_x = xs[x];
            for (int64_t c = 0; c < channels; ++c) {
              auto at = [&](const E* row, int64_t cell) {
                return static_cast<float>(row[ClampIndex(cell, g.image_width) * channels + c]);
              };
              float sum = 0;
              for (int64_t cell_y = span_y.start; cell_y < span_y.end; ++cell_y) {
                const E* row = image + ClampIndex(cell_y, g.image_height) * image_row;
                float row_sum = at(row, span_x.start) * span_x.start_weight;
                if (span_x.start + 1 != span_x.end) {
                  for (int64_t cell_x = span_x.start + 1; cell_x < span_x.end - 1; ++cell_x) {
                    row_sum += at(row, cell_x);
                  }
                  row_sum += at(row, span_x.end - 1) * span_x.end_weight;
                }
                sum += row_sum *
                       AreaCellWeight(cell_y, span_y.from, span_y.to, height_scale);
              }
              out[x * channels + c] = sum * scale;
            }
          }
        });
    return absl::OkStatus();
  });
}

}  // namespace

// Adds the nine kernels of protocol/kernels/image_resize.h to `table`.
void AddImageResizeKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kImageResize, ResizeBilinear, ResizeBilinearGrad,
                  ResizeNearestNeighbor, ResizeNearestNeighborGrad, ResizeBicubic,
                  ResizeBicubicGrad, ResizeArea, ScaleAndTranslate, ScaleAndTranslateGrad);
}

}  // namespace vgpu::cpu_kernels
