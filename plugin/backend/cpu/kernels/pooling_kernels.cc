// Max and average pooling (forward, backward, and max pooling's second-order gradient) over 2 or
// 3 spatial dimensions on the CPU backing executor, parallelised with the executor's Eigen thread
// pool. The arithmetic follows TensorFlow's kernels element for element (same initial values,
// same accumulation order and dtype, same tie-breaking), so results match TensorFlow's CPU
// kernels bit for bit where those use plain loops; NaN handling of max pooling follows the
// descriptor's NaN propagation as cuDNN does (protocol/kernels/pooling.h).
//
// Every layout and dimensionality shares one implementation (pooling_kernels.h); kernels are
// compiled separately for single-channel images (channels-first layouts) so that the channel
// loops vanish there.
#define EIGEN_USE_THREADS

#include "plugin/backend/cpu/kernels/pooling_kernels.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/float_compute.h"
#include "plugin/backend/cpu/kernels/float_staging.h"
#include "plugin/backend/cpu/kernels/pooling_window_index_simd.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/pooling.h"
#include "unsupported/Eigen/CXX11/Tensor"

// TensorFlow's CPU kernels round every product before adding it; so must these (no fused
// multiply-add, which -march=native would otherwise allow the compiler to form).
#pragma GCC optimize("fp-contract=off")
// -O2's "very cheap" vectorisation leaves the channel loops (runtime trip counts) scalar; they
// are element-wise (no reduction is reordered), so vectorising them changes no result.
#pragma GCC optimize("vect-cost-model=dynamic")

namespace vgpu::cpu_kernels {
namespace {

Eigen::TensorOpCost Cost(double loaded, double stored, double compute) {
  return Eigen::TensorOpCost(loaded, stored, compute);
}

// Calls fn(std::integral_constant<bool, b>) for a runtime `b`.
template <typename Fn>
void WithBool(bool b, Fn&& fn) {
  if (b) {
    fn(std::true_type{});
  } else {
    fn(std::false_type{});
  }
}

template <typename T>
bool IsNan(const T& v) {
  return Eigen::numext::isnan(v);
}

// Whether `v` replaces the running maximum `best` of a max-pooling forward pass that started
// from lowest(): `best < v`, and with NaN propagation also any NaN.
template <bool kPropagateNan, typename T>
inline bool RaisesMax(const T& best, const T& v) {
  return best < v || (kPropagateNan && IsNan(v));
}

// With NaN propagation, whether `v` becomes the element holding a window's max, `have` saying
// whether one was found before: the first element, then a larger one or the first NaN.
template <typename T>
inline bool BecomesMaxElementPropagatingNan(bool have, const T& best, const T& v) {
  return !have || (!IsNan(best) && (IsNan(v) || best < v));
}

// Index of position (z, h, w) of image b in a channels-last tensor of `dims` positions.
inline int64_t PositionIndex(const int64_t* dims, int64_t b, int64_t z, int64_t h, int64_t w) {
  return ((b * dims[0] + z) * dims[1] + h) * dims[2] + w;
}

// Calls visit(input_position_index) for the input positions of output position
// (b, od, oh, ow)'s window in window order.
template <typename Visit>
inline void ForEachInWindow(const PoolGeometry& g, int64_t b, int64_t od, int64_t oh, int64_t ow,
                            Visit&& visit) {
  const WindowRange zs = WindowOf(g, 0, od), hs = WindowOf(g, 1, oh), ws = WindowOf(g, 2, ow);
  for (int64_t z = zs.begin; z < zs.end; ++z) {
    for (int64_t h = hs.begin; h < hs.end; ++h) {
      for (int64_t w = ws.begin; w < ws.end; ++w) visit(PositionIndex(g.in, b, z, h, w));
    }
  }
}

// Like ForEachInWindow, in reverse window order.
template <typename Visit>
inline void ForEachInWindowReversed(const PoolGeometry& g, int64_t b, int64_t od, int64_t oh,
                                    int64_t ow, Visit&& visit) {
  const WindowRange zs = WindowOf(g, 0, od), hs = WindowOf(g, 1, oh), ws = WindowOf(g, 2, ow);
  for (int64_t z = zs.end - 1; z >= zs.begin; --z) {
    for (int64_t h = hs.end - 1; h >= hs.begin; --h) {
      for (int64_t w = ws.end - 1; w >= ws.begin; --w) visit(PositionIndex(g.in, b, z, h, w));
    }
  }
}

// Runs fn(b, od, oh, ow, output_position_index) for every output position, in parallel over
// output rows (b, od, oh); `per_position` estimates the work of one position.
template <typename Fn>
void ParallelOverOutputRows(const Eigen::ThreadPoolDevice& device, const PoolGeometry& g,
                            double per_position, double bytes_per_position, Fn&& fn) {
  const int64_t rows = g.images * g.out[0] * g.out[1];
  const double per_row = per_position * static_cast<double>(g.out[2]);
  device.parallelFor(rows, Cost(bytes_per_position * g.out[2], bytes_per_position * g.out[2],
                                per_row),
                     [&](Eigen::Index begin, Eigen::Index end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t oh = row % g.out[1];
      const int64_t od = (row / g.out[1]) % g.out[0];
      const int64_t b = row / (g.out[1] * g.out[0]);
      for (int64_t ow = 0; ow < g.out[2]; ++ow) fn(b, od, oh, ow, row * g.out[2] + ow);
    }
  });
}

// Channels are pooled in blocks of at most this many, accumulated in a local array: stores to
// it cannot alias the input, so the channel loops vectorise (stores to the output could, and
// kept them scalar).
constexpr int64_t kChannelBlock = 64;

double WindowSize(const PoolGeometry& g) {
  return static_cast<double>(g.window[0] * g.window[1] * g.window[2]);
}

// Forward max pooling: y = max(lowest, window elements) with TensorFlow's update rule
// `y < x ? x : y` applied in window order (and NaN winning with propagation).
template <typename T, bool kSingleChannel, bool kPropagateNan>
void MaxPoolForward(const Eigen::ThreadPoolDevice& device, const PoolGeometry& g, const T* x,
                    T* y) {
  const int64_t channels = kSingleChannel ? 1 : g.channels;
  ParallelOverOutputRows(device, g, WindowSize(g) * channels, sizeof(T) * channels,
                         [&](int64_t b, int64_t od, int64_t oh, int64_t ow, int64_t position) {
    T* out = y + position * channels;
    for (int64_t c0 = 0; c0 < channels; c0 += kChannelBlock) {
      const int64_t width = std::min(kChannelBlock, channels - c0);
      T best[kChannelBlock];
      std::fill(best, best + width, Eigen::NumTraits<T>::lowest());
      ForEachInWindow(g, b, od, oh, ow, [&](int64_t input_position) {
        const T* in = x + input_position * channels + c0;
        // An unconditional select (not a conditional store) vectorises.
        for (int64_t c = 0; c < width; ++c) {
          best[c] = RaisesMax<kPropagateNan>(best[c], in[c]) ? in[c] : best[c];
        }
      });
      std::copy(best, best + width, out + c0);
    }
  });
}

// Forward average pooling: the window's elements summed in window order in T, then divided by
// their count (TensorFlow's CPU kernel accumulates the same way).
template <typename T, bool kSingleChannel>
void AvgPoolForward(const Eigen::ThreadPoolDevice& device, const PoolGeometry& g, const T* x,
                    T* y) {
  const int64_t channels = kSingleChannel ? 1 : g.channels;
  ParallelOverOutputRows(device, g, WindowSize(g) * channels, sizeof(T) * channels,
                         [&](int64_t b, int64_t od, int64_t oh, int64_t ow, int64_t position) {
    T* out = y + position * channels;
    for (int64_t c0 = 0; c0 < channels; c0 += kChannelBlock) {
      const int64_t width = std::min(kChannelBlock, channels - c0);
      T sum[kChannelBlock];
      std::fill(sum, sum + width, T(0));
      int64_t count = 0;
      ForEachInWindow(g, b, od, oh, ow, [&](int64_t input_position) {
        const T* in = x + input_position * channels + c0;
        for (int64_t c = 0; c < width; ++c) sum[c] += in[c];
        ++count;
      });
      const T divisor(static_cast<float>(count));
      for (int64_t c = 0; c < width; ++c) out[c0 + c] = sum[c] / divisor;
    }
  });
}

// The loop nest order over output positions, outermost first, in which TensorFlow's CPU kernels
// accumulate gradients: row-major for 2-D pooling, W, H, D for 3-D pooling (dimension indices
// into PoolGeometry's [D, H, W]).
struct LoopOrder {
  int dims[3];
  int operator[](int i) const { return dims[i]; }
};
LoopOrder GradientOrder(const PoolGeometry& g) {
  return g.spatial_dims == 3 ? LoopOrder{{2, 1, 0}} : LoopOrder{{0, 1, 2}};
}

// Whether the windows tile the input without overlap (stride == window, no padding, in every
// dimension): each input position then lies in at most one window, and in exactly one when
// the windows also reach the input's end (`*covers`).
bool WindowsTile(const PoolGeometry& g, bool* covers) {
  *covers = true;
  for (int d = 0; d < 3; ++d) {
    if (g.stride[d] != g.window[d] || g.pad[d] != 0) return false;
    if (g.out[d] * g.window[d] != g.in[d]) *covers = false;
  }
  return true;
}

// The offsets, in elements, of a window's input elements from its first one, in window order
// (channels-last, without clamping: for windows inside the input).
std::vector<int64_t> WindowSlotOffsets(const PoolGeometry& g, int64_t channels) {
  std::vector<int64_t> offsets;
  offsets.reserve(static_cast<size_t>(g.window[0] * g.window[1] * g.window[2]));
  for (int64_t z = 0; z < g.window[0]; ++z) {
    for (int64_t h = 0; h < g.window[1]; ++h) {
      for (int64_t w = 0; w < g.window[2]; ++w) {
        offsets.push_back(((z * g.in[1] + h) * g.in[2] + w) * channels);
      }
    }
  }
  return offsets;
}

// The number of output positions along each dimension whose windows lie inside the input
// (no clamping needed), for windows without padding before.
void PositionsWithWholeWindows(const PoolGeometry& g, int64_t whole[3]) {
  for (int d = 0; d < 3; ++d) {
    whole[d] = g.in[d] < g.window[d]
                   ? 0
                   : std::min(g.out[d], (g.in[d] - g.window[d]) / g.stride[d] + 1);
  }
}

// ReluGrad of one element: gradient * (features > 0), as TensorFlow computes it (a NaN or
// negative gradient where features <= 0 gives NaN or -0; x * 1 is x exactly). Both values are
// computed and one selected, without a branch, so that a loop calling it can vectorise.
template <typename T>
inline T ThroughRelu(T gradient, T features) {
  const T masked = gradient * T(0);
  return features > T(0) ? gradient : masked;
}

// MaxPoolBackward's work unit (image `b`, channels [c0, c0 + width)) when the windows tile the
// input and NaNs are not propagated: each window's elements are written once, in window order,
// the gradient at the first element equal to the window's maximum of non-NaN elements and 0
// elsewhere (0 everywhere for a window of NaNs). A window inside the input is walked by the
// precomputed `slot_offsets` (no clamping, divisions or per-position index arithmetic: that
// per-window cost made this kernel compute-bound, 1.2 ms on one thread for cnn's first pooling
// gradient, 12 MB of memory traffic); a window cut by the input's end (padding after, "same")
// by the offsets of its elements inside, gathered into `scratch`. kThroughRelu
// (kBackwardThroughRelu): what a window routes is first multiplied by (maximum > 0), ReLU's
// gradient at the element it goes to, which equals the maximum.
template <typename T, bool kThroughRelu>
void TiledMaxPoolBackwardUnit(const PoolGeometry& g, int64_t channels, int64_t b, int64_t c0,
                              int64_t width, const std::vector<int64_t>& slot_offsets,
                              std::vector<int64_t>& scratch, const T* x, const T* dy, T* dx) {
  T best[kChannelBlock];
  int32_t first[kChannelBlock];
  T routed[kChannelBlock];  // kThroughRelu: the gradient routed to each channel's maximum
  int64_t whole[3];
  PositionsWithWholeWindows(g, whole);
  scratch.resize(slot_offsets.size());
  for (int64_t od = 0; od < g.out[0]; ++od) {
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      for (int64_t ow = 0; ow < g.out[2]; ++ow) {
        const int64_t z0 = od * g.stride[0], h0 = oh * g.stride[1], w0 = ow * g.stride[2];
        const int64_t origin = PositionIndex(g.in, b, z0, h0, w0) * channels + c0;
        const int64_t* offsets = slot_offsets.data();
        int slots = static_cast<int>(slot_offsets.size());
        if (od >= whole[0] || oh >= whole[1] || ow >= whole[2]) {
          slots = 0;
          ForEachInWindow(g, b, od, oh, ow, [&](int64_t input_position) {
            scratch[slots++] = input_position * channels + c0 - origin;
          });
          offsets = scratch.data();
        }
        std::fill(best, best + width, -Eigen::NumTraits<T>::infinity());
        for (int s = 0; s < slots; ++s) {
          const T* __restrict in = x + origin + offsets[s];
          for (int64_t c = 0; c < width; ++c) best[c] = best[c] < in[c] ? in[c] : best[c];
        }
        // The slot of each channel's first maximum: walking backwards, keeping the last match
        // (-1 for a window of NaNs only). Unconditional selects, so the loops vectorise.
        std::fill(first, first + width, -1);
        for (int s = slots - 1; s >= 0; --s) {
          const T* __restrict in = x + origin + offsets[s];
          for (int64_t c = 0; c < width; ++c) first[c] = in[c] == best[c] ? s : first[c];
        }
        const T* __restrict grad = dy + PositionIndex(g.out, b, od, oh, ow) * channels + c0;
        if constexpr (kThroughRelu) {
          // The ReLU's gradient matters only where the gradient is routed, at an element equal
          // to the window's maximum: applied once per window to what is routed (elsewhere the
          // gradient is 0 either way).
          for (int64_t c = 0; c < width; ++c) routed[c] = ThroughRelu(grad[c], best[c]);
          grad = routed;
        }
        for (int s = 0; s < slots; ++s) {
          T* __restrict out = dx + origin + offsets[s];
          for (int64_t c = 0; c < width; ++c) out[c] = first[c] == s ? grad[c] : T(0);
        }
      }
    }
  }
}

// Max pooling gradient. Work units are (image, block of channels): every dx element receives
// its contributions from outputs of its own image and channel, in GradientOrder. When the
// windows tile the input (2x2 pooling with stride 2, the common case) and NaNs are not
// propagated, each dx element is written once, in window order: the gradient at the window's
// first maximum, 0 elsewhere (no zeroing pass and no scattered additions; the same values).
// kThroughRelu: dx is then multiplied by (x > 0), in the same pass when the windows tile the
// input, else per work unit after its additions (kBackwardThroughRelu).
template <typename T, bool kSingleChannel, bool kPropagateNan, bool kThroughRelu>
void MaxPoolBackward(const Eigen::ThreadPoolDevice& device, const PoolGeometry& g, const T* x,
                     const T* dy, T* dx) {
  const int64_t channels = kSingleChannel ? 1 : g.channels;
  const LoopOrder order = GradientOrder(g);
  const int64_t blocks_per_image = (channels + kChannelBlock - 1) / kChannelBlock;
  const int64_t units = g.images * blocks_per_image;
  const int64_t in_positions = g.InputPositions();
  const double per_unit = static_cast<double>(g.OutputPositions()) * WindowSize(g) *
                          static_cast<double>(std::min(channels, kChannelBlock));
  bool covers = false;
  const bool tiles = WindowsTile(g, &covers) && !kPropagateNan;
  const std::vector<int64_t> slot_offsets = WindowSlotOffsets(g, channels);
  device.parallelFor(units, Cost(per_unit * sizeof(T), per_unit * sizeof(T), per_unit),
                     [&](Eigen::Index begin, Eigen::Index end) {
    T best_value[kChannelBlock];
    int64_t best_index[kChannelBlock];
    std::vector<int64_t> scratch;
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t b = unit / blocks_per_image;
      const int64_t c0 = (unit % blocks_per_image) * kChannelBlock;
      const int64_t c1 = std::min(channels, c0 + kChannelBlock);
      const int64_t width = c1 - c0;
      if (!(tiles && covers)) {
        for (int64_t p = b * in_positions; p < (b + 1) * in_positions; ++p) {
          std::fill(dx + p * channels + c0, dx + p * channels + c1, T(0));
        }
      }
      if (tiles) {
        TiledMaxPoolBackwardUnit<T, kThroughRelu>(g, channels, b, c0, width, slot_offsets,
                                                  scratch, x, dy, dx);
        continue;
      }
      int64_t o[3];
      for (o[order[0]] = 0; o[order[0]] < g.out[order[0]]; ++o[order[0]]) {
        for (o[order[1]] = 0; o[order[1]] < g.out[order[1]]; ++o[order[1]]) {
          for (o[order[2]] = 0; o[order[2]] < g.out[order[2]]; ++o[order[2]]) {
            const int64_t od = o[0], oh = o[1], ow = o[2];
            std::fill(best_index, best_index + width, int64_t{-1});
            if constexpr (kPropagateNan) {
              ForEachInWindow(g, b, od, oh, ow, [&](int64_t input_position) {
                const int64_t offset = input_position * channels + c0;
                const T* in = x + offset;
                for (int64_t c = 0; c < width; ++c) {
                  if (BecomesMaxElementPropagatingNan(best_index[c] >= 0, best_value[c], in[c])) {
                    best_value[c] = in[c];
                    best_index[c] = offset + c;
                  }
                }
              });
            } else {
              // The same element in two passes of unconditional selects (they vectorise): the
              // maximum of the non-NaN elements, then the first element equal to it (found
              // walking the window backwards and keeping the last match).
              std::fill(best_value, best_value + width, -Eigen::NumTraits<T>::infinity());
              ForEachInWindow(g, b, od, oh, ow, [&](int64_t input_position) {
                const T* in = x + input_position * channels + c0;
                for (int64_t c = 0; c < width; ++c) {
                  best_value[c] = best_value[c] < in[c] ? in[c] : best_value[c];
                }
              });
              ForEachInWindowReversed(g, b, od, oh, ow, [&](int64_t input_position) {
                const int64_t offset = input_position * channels + c0;
                const T* in = x + offset;
                for (int64_t c = 0; c < width; ++c) {
                  best_index[c] = in[c] == best_value[c] ? offset + c : best_index[c];
                }
              });
            }
            const int64_t position = PositionIndex(g.out, b, od, oh, ow);
            const T* grad = dy + position * channels + c0;
            for (int64_t c = 0; c < width; ++c) {
              if (best_index[c] >= 0) dx[best_index[c]] += grad[c];
            }
          }
        }
      }
      if constexpr (kThroughRelu) {
        for (int64_t p = b * in_positions; p < (b + 1) * in_positions; ++p) {
          const T* __restrict in = x + p * channels;
          T* __restrict out = dx + p * channels;
          for (int64_t c = c0; c < c1; ++c) out[c] = ThroughRelu(out[c], in[c]);
        }
      }
    }
  });
}

// The window-index kernels' work units: (image, block of channels), as MaxPoolBackward's, over
// windows that tile the input wholly inside it (WindowIndexable), visited by `slot_offsets`.
// Calls unit(b, c0, width) once per unit, in parallel.
template <typename Fn>
void ParallelOverWindowIndexUnits(const Eigen::ThreadPoolDevice& device, const PoolGeometry& g,
                                  int64_t channels, double bytes_per_element, Fn&& unit_fn) {
  const int64_t blocks_per_image = (channels + kChannelBlock - 1) / kChannelBlock;
  const double per_unit = static_cast<double>(g.OutputPositions()) * WindowSize(g) *
                          static_cast<double>(std::min(channels, kChannelBlock));
  device.parallelFor(g.images * blocks_per_image,
                     Cost(per_unit * bytes_per_element, per_unit * bytes_per_element, per_unit),
                     [&](Eigen::Index begin, Eigen::Index end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t c0 = (unit % blocks_per_image) * kChannelBlock;
      unit_fn(unit / blocks_per_image, c0, std::min(kChannelBlock, channels - c0));
    }
  });
}

// Calls window_fn(origin, position) for each window of image `b` in row-major order: the
// element offsets of its first input element and of its output element, at channel c0.
template <typename Fn>
inline void ForEachTilingWindow(const PoolGeometry& g, int64_t channels, int64_t b, int64_t c0,
                                Fn&& window_fn) {
  for (int64_t od = 0; od < g.out[0]; ++od) {
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      for (int64_t ow = 0; ow < g.out[2]; ++ow) {
        window_fn(
            PositionIndex(g.in, b, od * g.stride[0], oh * g.stride[1], ow * g.stride[2]) *
                    channels + c0,
            PositionIndex(g.out, b, od, oh, ow) * channels + c0);
      }
    }
  }
}

// Float images of at least this many channels run the window-index kernels' AVX2 / AVX-512
// variants where the CPU has them (pooling_window_index_simd.h); narrower ones (one channel per
// image in channels-first layouts) keep the portable loops, which vectors would not shorten.
constexpr int64_t kVectorChannels = 8;

// The tiling windows of `g` as the vector variants take them.
TilingWindows TilingWindowsOf(const PoolGeometry& g, const std::vector<int64_t>& slot_offsets) {
  return {g.in, g.out, g.stride, g.channels, slot_offsets.data(),
          static_cast<int>(slot_offsets.size())};
}

template <typename T>
void MaxPoolForwardWithWindowIndex(const Eigen::ThreadPoolDevice& device, const PoolGeometry& g,
                                   const T* x, T* y, uint8_t* window_index);

// The 16-bit forward pass where no vector variant of T runs: the float kernel on float32
// copies. Exact both ways (y's values are x's), except that the float kernel raises a window of
// NaNs or -inf to float's lowest(), which is below T's: raised to T's here.
template <typename T>
void MaxPoolForwardWithWindowIndexOnFloatCopies(const Eigen::ThreadPoolDevice& device,
                                                const PoolGeometry& g, const T* x, T* y,
                                                uint8_t* window_index) {
  Scratch<float> x_staged(g.input_elements), y_staged(g.output_elements);
  WidenToFloat(device, x, x_staged.data(), g.input_elements);
  MaxPoolForwardWithWindowIndex<float>(device, g, x_staged.data(), y_staged.data(),
                                       window_index);
  const float lowest = static_cast<float>(Eigen::NumTraits<T>::lowest());
  float* staged = y_staged.data();
  ParallelBlocks(device, g.output_elements, ElementCost(4, 4, 1), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) staged[i] = staged[i] < lowest ? lowest : staged[i];
  });
  NarrowFromFloat(device, staged, y, g.output_elements);
}

// pooling::kForwardWithWindowIndex: y as MaxPoolForward<T, *, false> computes it, and the slot
// of the element TiledMaxPoolBackwardUnit routes to (found the same way) with the flag
// (maximum > 0).
template <typename T>
void MaxPoolForwardWithWindowIndex(const Eigen::ThreadPoolDevice& device, const PoolGeometry& g,
                                   const T* x, T* y, uint8_t* window_index) {
  const int64_t channels = g.channels;
  if constexpr (kIsFloat16Bit<T>) {
    if (channels < kVectorChannels || WindowIndexForwardUnitFor<T>(HostCpuIsa()) == nullptr) {
      MaxPoolForwardWithWindowIndexOnFloatCopies(device, g, x, y, window_index);
      return;
    }
  }
  const std::vector<int64_t> slot_offsets = WindowSlotOffsets(g, channels);
  const int slots = static_cast<int>(slot_offsets.size());
  if constexpr (std::is_same_v<T, float> || kIsFloat16Bit<T>) {
    const WindowIndexForwardUnit<T> vector_unit = WindowIndexForwardUnitFor<T>(HostCpuIsa());
    if (vector_unit != nullptr && channels >= kVectorChannels) {
      const TilingWindows windows = TilingWindowsOf(g, slot_offsets);
      ParallelOverWindowIndexUnits(device, g, channels, sizeof(T), [&](int64_t b, int64_t c0,
                                                                       int64_t width) {
        vector_unit(windows, x, y, window_index, b, c0, width);
      });
      return;
    }
  }
  ParallelOverWindowIndexUnits(device, g, channels, sizeof(T), [&](int64_t b, int64_t c0,
                                                                   int64_t width) {
    T best[kChannelBlock];
    uint8_t first[kChannelBlock];
    const T lowest = Eigen::NumTraits<T>::lowest();
    ForEachTilingWindow(g, channels, b, c0, [&](int64_t origin, int64_t position) {
      std::fill(best, best + width, -Eigen::NumTraits<T>::infinity());
      for (int s = 0; s < slots; ++s) {
        const T* __restrict in = x + origin + slot_offsets[s];
        for (int64_t c = 0; c < width; ++c) best[c] = best[c] < in[c] ? in[c] : best[c];
      }
      std::fill(first, first + width, static_cast<uint8_t>(pooling::kNoWindowSlot));
      for (int s = slots - 1; s >= 0; --s) {
        const T* __restrict in = x + origin + slot_offsets[s];
        for (int64_t c = 0; c < width; ++c) {
          first[c] = in[c] == best[c] ? static_cast<uint8_t>(s) : first[c];
        }
      }
      T* __restrict out = y + position;
      uint8_t* __restrict index = window_index + position;
      for (int64_t c = 0; c < width; ++c) {
        // max(lowest(), the window) by TensorFlow's rule: the non-NaN maximum, raised to
        // lowest() (a window of NaNs or of -inf gives lowest()).
        out[c] = best[c] < lowest ? lowest : best[c];
        index[c] = static_cast<uint8_t>(first[c] | (best[c] > T(0) ? 0x80 : 0));
      }
    });
  });
}

// pooling::kBackwardFromWindowIndex(ThroughRelu): each window's elements written once, the
// (masked) gradient at the slot its window_index byte names and 0 elsewhere; positions no
// window covers (the input's end, under VALID) are zeroed first.
template <typename T, bool kThroughRelu>
void MaxPoolBackwardFromWindowIndex(const Eigen::ThreadPoolDevice& device, const PoolGeometry& g,
                                    const uint8_t* window_index, const T* dy, T* dx) {
  const int64_t channels = g.channels;
  WindowIndexBackwardUnit<T> vector_unit = nullptr;
  if constexpr (std::is_same_v<T, float> || kIsFloat16Bit<T>) {
    if (channels >= kVectorChannels) {
      vector_unit = WindowIndexBackwardUnitFor<T>(HostCpuIsa(), kThroughRelu);
    }
  }
  if constexpr (kIsFloat16Bit<T>) {
    if (vector_unit == nullptr) {
      // On float32 copies, for the float kernel's units: dx's values are dy's, -0 or NaN
      // (dy * 0), each exact in T.
      Scratch<float> dy_staged(g.output_elements), dx_staged(g.input_elements);
      WidenToFloat(device, dy, dy_staged.data(), g.output_elements);
      MaxPoolBackwardFromWindowIndex<float, kThroughRelu>(device, g, window_index,
                                                          dy_staged.data(), dx_staged.data());
      NarrowFromFloat(device, dx_staged.data(), dx, g.input_elements);
      return;
    }
  }
  const std::vector<int64_t> slot_offsets = WindowSlotOffsets(g, channels);
  const int slots = static_cast<int>(slot_offsets.size());
  bool covers = false;
  WindowsTile(g, &covers);
  const int64_t in_positions = g.InputPositions();
  const TilingWindows windows = TilingWindowsOf(g, slot_offsets);
  ParallelOverWindowIndexUnits(device, g, channels, sizeof(T), [&](int64_t b, int64_t c0,
                                                                   int64_t width) {
    if (!covers) {
      for (int64_t p = b * in_positions; p < (b + 1) * in_positions; ++p) {
        std::fill(dx + p * channels + c0, dx + p * channels + c0 + width, T(0));
      }
    }
    if constexpr (std::is_same_v<T, float> || kIsFloat16Bit<T>) {
      if (vector_unit != nullptr) {
        vector_unit(windows, window_index, dy, dx, b, c0, width);
        return;
      }
    }
    uint8_t slot[kChannelBlock];
    T routed[kChannelBlock];
    ForEachTilingWindow(g, channels, b, c0, [&](int64_t origin, int64_t position) {
      const uint8_t* __restrict index = window_index + position;
      const T* __restrict grad = dy + position;
      for (int64_t c = 0; c < width; ++c) {
        slot[c] = index[c] & 0x7F;
        if constexpr (kThroughRelu) {
          const T masked = grad[c] * T(0);
          routed[c] = (index[c] & 0x80) != 0 ? grad[c] : masked;
        } else {
          routed[c] = grad[c];
        }
      }
      for (int s = 0; s < slots; ++s) {
        T* __restrict out = dx + origin + slot_offsets[s];
        for (int64_t c = 0; c < width; ++c) out[c] = slot[c] == s ? routed[c] : T(0);
      }
    });
  });
}

// Average pooling gradient, gathered per input row: dx sums dy * T(1 / window count) over the
// windows covering each element, in GradientOrder.
template <typename T, bool kSingleChannel>
void AvgPoolBackward(const Eigen::ThreadPoolDevice& device, const PoolGeometry& g, const T* dy,
                     T* dx) {
  const int64_t channels = kSingleChannel ? 1 : g.channels;
  // 1 / (number of input elements) of every window: the reciprocal computed in double, then
  // rounded to T (TensorFlow: double for 2-D, float for 3-D; both round to the same T).
  std::vector<T> scales(g.OutputPositions());
  for (int64_t od = 0; od < g.out[0]; ++od) {
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      for (int64_t ow = 0; ow < g.out[2]; ++ow) {
        const WindowRange zs = WindowOf(g, 0, od), hs = WindowOf(g, 1, oh),
                          ws = WindowOf(g, 2, ow);
        const int64_t count =
            (zs.end - zs.begin) * (hs.end - hs.begin) * (ws.end - ws.begin);
        scales[(od * g.out[1] + oh) * g.out[2] + ow] = T(1.0 / static_cast<double>(count));
      }
    }
  }
  std::vector<WindowRange> covering[3];
  for (int dim = 0; dim < 3; ++dim) {
    covering[dim].resize(g.in[dim]);
    for (int64_t i = 0; i < g.in[dim]; ++i) covering[dim][i] = OutputsCovering(g, dim, i);
  }
  const LoopOrder order = GradientOrder(g);
  const int64_t rows = g.images * g.in[0] * g.in[1];
  const double reach = std::max(1.0, WindowSize(g));
  const double per_row = static_cast<double>(g.in[2] * channels) * reach;
  device.parallelFor(rows, Cost(per_row * sizeof(T), g.in[2] * channels * sizeof(T), per_row),
                     [&](Eigen::Index begin, Eigen::Index end) {
    int64_t o[3];
    for (int64_t row = begin; row < end; ++row) {
      const int64_t h = row % g.in[1];
      const int64_t z = (row / g.in[1]) % g.in[0];
      const int64_t b = row / (g.in[1] * g.in[0]);
      for (int64_t w = 0; w < g.in[2]; ++w) {
        const WindowRange ranges[3] = {covering[0][z], covering[1][h], covering[2][w]};
        T* out = dx + (row * g.in[2] + w) * channels;
        std::fill(out, out + channels, T(0));
        const WindowRange& r0 = ranges[order[0]];
        const WindowRange& r1 = ranges[order[1]];
        const WindowRange& r2 = ranges[order[2]];
        for (o[order[0]] = r0.begin; o[order[0]] < r0.end; ++o[order[0]]) {
          for (o[order[1]] = r1.begin; o[order[1]] < r1.end; ++o[order[1]]) {
            for (o[order[2]] = r2.begin; o[order[2]] < r2.end; ++o[order[2]]) {
              const int64_t window = (o[0] * g.out[1] + o[1]) * g.out[2] + o[2];
              const T scale = scales[window];
              const T* grad = dy + (b * g.OutputPositions() + window) * channels;
              for (int64_t c = 0; c < channels; ++c) out[c] += grad[c] * scale;
            }
          }
        }
      }
    }
  });
}

// Max pooling's second-order gradient: ddy = ddx at the first element of the window equal to y
// (0 where none is), searched per channel as TensorFlow's kernels do.
template <typename T, bool kSingleChannel>
void MaxPoolGradGrad(const Eigen::ThreadPoolDevice& device, const PoolGeometry& g, const T* x,
                     const T* y, const T* ddx, T* ddy) {
  const int64_t channels = kSingleChannel ? 1 : g.channels;
  ParallelOverOutputRows(device, g, WindowSize(g) * channels, 2 * sizeof(T) * channels,
                         [&](int64_t b, int64_t od, int64_t oh, int64_t ow, int64_t position) {
    const WindowRange zs = WindowOf(g, 0, od), hs = WindowOf(g, 1, oh), ws = WindowOf(g, 2, ow);
    for (int64_t c = 0; c < channels; ++c) {
      const T max = y[position * channels + c];
      T value(0);
      bool found = false;
      for (int64_t z = zs.begin; z < zs.end && !found; ++z) {
        for (int64_t h = hs.begin; h < hs.end && !found; ++h) {
          for (int64_t w = ws.begin; w < ws.end && !found; ++w) {
            const int64_t index = PositionIndex(g.in, b, z, h, w) * channels + c;
            if (x[index] == max) {
              value = ddx[index];
              found = true;
            }
          }
        }
      }
      ddy[position * channels + c] = value;
    }
  });
}

}  // namespace

// pooling::kForward (see protocol/kernels/pooling.h).
absl::Status PoolingForward(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(PoolingLaunch launch,
                        ReadPoolingLaunch(context, pooling_launch::PoolingKernel::kForward));
  const PoolGeometry& g = launch.geometry;
  const bool propagate = launch.pooling.nan_propagation == NanPropagation::kPropagate;
  return WithPoolingBuffers<Dispatch>(context, launch, [&](auto b) -> absl::Status {
    using T = std::remove_pointer_t<decltype(b.out)>;
    if (g.output_elements == 0) return absl::OkStatus();
    const Eigen::ThreadPoolDevice& device = *context.device;
    WithBool(g.channels == 1, [&](auto single) {
      constexpr bool kSingle = decltype(single)::value;
      if (launch.pooling.mode == PoolingMode::kAverage) {
        AvgPoolForward<T, kSingle>(device, g, b.x, b.out);
        return;
      }
      WithBool(propagate, [&](auto nan) {
        MaxPoolForward<T, kSingle, decltype(nan)::value>(device, g, b.x, b.out);
      });
    });
    return absl::OkStatus();
  });
}

// pooling::kBackward and kBackwardThroughRelu (see protocol/kernels/pooling.h).
template <pooling_launch::PoolingKernel kKernel>
absl::Status PoolingBackward(const KernelContext& context) {
  constexpr bool kThroughRelu = kKernel == pooling_launch::PoolingKernel::kBackwardThroughRelu;
  VGPU_ASSIGN_OR_RETURN(PoolingLaunch launch, ReadPoolingLaunch(context, kKernel));
  const PoolGeometry& g = launch.geometry;
  const bool propagate = launch.pooling.nan_propagation == NanPropagation::kPropagate;
  return WithPoolingBuffers<Dispatch>(context, launch, [&](auto b) -> absl::Status {
    using T = std::remove_pointer_t<decltype(b.out)>;
    if (g.input_elements == 0) return absl::OkStatus();
    const Eigen::ThreadPoolDevice& device = *context.device;
    WithBool(g.channels == 1, [&](auto single) {
      constexpr bool kSingle = decltype(single)::value;
      if (launch.pooling.mode != PoolingMode::kMax) {
        AvgPoolBackward<T, kSingle>(device, g, b.dy, b.out);
        return;
      }
      WithBool(propagate, [&](auto nan) {
        MaxPoolBackward<T, kSingle, decltype(nan)::value, kThroughRelu>(device, g, b.x, b.dy,
                                                                         b.out);
      });
    });
    return absl::OkStatus();
  });
}

// pooling::kGradGrad (see protocol/kernels/pooling.h).
absl::Status PoolingGradGrad(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(PoolingLaunch launch,
                        ReadPoolingLaunch(context, pooling_launch::PoolingKernel::kGradGrad));
  const PoolGeometry& g = launch.geometry;
  return WithPoolingBuffers<Dispatch>(context, launch, [&](auto b) -> absl::Status {
    using T = std::remove_pointer_t<decltype(b.out)>;
    if (g.output_elements == 0) return absl::OkStatus();
    WithBool(g.channels == 1, [&](auto single) {
      MaxPoolGradGrad<T, decltype(single)::value>(*context.device, g, b.x, b.y, b.ddx, b.out);
    });
    return absl::OkStatus();
  });
}

// pooling::kForwardWithWindowIndex (see protocol/kernels/pooling.h).
absl::Status PoolingForwardWithWindowIndex(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(
      PoolingLaunch launch,
      ReadPoolingLaunch(context, pooling_launch::PoolingKernel::kForwardWithWindowIndex));
  return WithPoolingBuffers<Dispatch>(context, launch, [&](auto b) -> absl::Status {
    using T = std::remove_pointer_t<decltype(b.out)>;
    if (launch.geometry.output_elements == 0) return absl::OkStatus();
    MaxPoolForwardWithWindowIndex<T>(*context.device, launch.geometry, b.x, b.out,
                                     b.window_index_out);
    return absl::OkStatus();
  });
}

// pooling::kBackwardFromWindowIndex and kBackwardFromWindowIndexThroughRelu.
template <pooling_launch::PoolingKernel kKernel>
absl::Status PoolingBackwardFromWindowIndex(const KernelContext& context) {
  constexpr bool kThroughRelu =
      kKernel == pooling_launch::PoolingKernel::kBackwardFromWindowIndexThroughRelu;
  VGPU_ASSIGN_OR_RETURN(PoolingLaunch launch, ReadPoolingLaunch(context, kKernel));
  return WithPoolingBuffers<Dispatch>(context, launch, [&](auto b) -> absl::Status {
    using T = std::remove_pointer_t<decltype(b.out)>;
    if (launch.geometry.input_elements == 0) return absl::OkStatus();
    MaxPoolBackwardFromWindowIndex<T, kThroughRelu>(*context.device, launch.geometry,
                                                    b.window_index, b.dy, b.out);
    return absl::OkStatus();
  });
}

void AddPoolingKernels(KernelTable& table) {
  using pooling_launch::PoolingKernel;
  table.AddFamily(kernel_families::kPooling, PoolingForward,
                  PoolingBackward<PoolingKernel::kBackward>, PoolingForwardWithArgmax,
                  PoolingBackwardWithArgmax, PoolingGradGradWithArgmax, PoolingGradGrad,
                  PoolingBackward<PoolingKernel::kBackwardThroughRelu>,
                  PoolingForwardWithWindowIndex,
                  PoolingBackwardFromWindowIndex<PoolingKernel::kBackwardFromWindowIndex>,
                  PoolingBackwardFromWindowIndex<
                      PoolingKernel::kBackwardFromWindowIndexThroughRelu>);
}

}  // namespace vgpu::cpu_kernels
