// The colour kernels of the image transform family (protocol/kernels/image_transform.h) on the
// CPU backing executor: contrast, hue and saturation adjustments and the RGB <-> HSV
// conversions. Float32 follows TensorFlow's CPU kernels operation by operation (bit for bit);
// float16 follows TensorFlow's GPU kernels (computed in float32 and rounded, the contrast mean
// rounded to float16 first), as TensorFlow has no CPU kernel for it. The one place the CPU and
// GPU kernels of TensorFlow disagree, a hue rotation of a pixel whose largest channel is <= 0,
// follows the GPU. Loops that TensorFlow's CPU kernels run without bound on a non-finite hue
// are bounded here.
#define EIGEN_USE_THREADS

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/launch/image_transform_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/image_transform.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

using image_transform::AdjustContrastParams;
using image_transform::AdjustHsvParams;
using image_transform::ColorSpaceParams;
using image_transform::HsvAdjustment;

// Invokes fn(T{}) for float32 and float16, the types of the adjustment kernels.
template <typename Fn>
absl::Status DispatchAdjustable(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat16: return fn(Eigen::half{});
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "colour adjustment: dtype ", static_cast<uint32_t>(dtype), " is not float32/16"));
  }
}

// What AdjustContrast and AdjustHsv do once their launch is read: dispatch its dtype, check the
// buffers (launch.count image elements of T, the float amount, the output of launch.count
// elements), then return adjust(T{}, images, amount, output).
template <typename Launch, typename Adjust>
absl::Status RunAdjustment(const KernelContext& context, const Launch& launch, Adjust&& adjust) {
  return DispatchAdjustable(launch.p.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* images, context.Buffer<const T>(0, launch.count));
    VGPU_ASSIGN_OR_RETURN(const float* amount, context.Buffer<const float>(1, 1));
    VGPU_ASSIGN_OR_RETURN(T* output, context.Buffer<T>(2, launch.count));
    return adjust(zero, images, *amount, output);
  });
}

// ---------------------------------------------------------------------------------------------
// Contrast

// Sums each channel of one [pixels, channels] image into sums[0 .. channels) in TensorFlow's
// CPU order: the pixel range is halved repeatedly, the upper half added onto the lower one
// (pixels >= 1). `scratch` holds ceil(pixels / 2) * channels floats.
template <typename T>
void SumByHalving(const T* image, int64_t pixels, int64_t channels, float* scratch, float* sums) {
  if (pixels == 1) {
    for (int64_t c = 0; c < channels; ++c) sums[c] = static_cast<float>(image[c]);
    return;
  }
  int64_t remaining = pixels;
  bool first_round = true;
  do {
    const int64_t upper = remaining / 2;
    const int64_t lower = remaining - upper;
    if (first_round) {
      for (int64_t i = 0; i < upper * channels; ++i) {
        scratch[i] = static_cast<float>(image[lower * channels + i]) + static_cast<float>(image[i]);
      }
      if (lower > upper) {  // the middle pixel of an odd range is carried over
        for (int64_t c = 0; c < channels; ++c) {
          scratch[upper * channels + c] = static_cast<float>(image[upper * channels + c]);
        }
      }
      first_round = false;
    } else {
      for (int64_t i = 0; i < upper * channels; ++i) scratch[i] += scratch[lower * channels + i];
    }
    remaining = lower;
  } while (remaining > 1);
  std::copy(scratch, scratch + channels, sums);
}

// image_transform::kAdjustContrast.
absl::Status AdjustContrast(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(auto launch, image_transform_launch::ReadAdjustContrastLaunch(context));
  const AdjustContrastParams& p = launch.p;
  const int64_t count = launch.count;
  return RunAdjustment(context, launch, [&](auto zero, auto images, float factor, auto output) {
    using T = decltype(zero);
    if (count == 0) return absl::OkStatus();
    const int64_t plane = p.pixels * p.channels;
    // Per-image channel means first (the output may alias nothing but is written only after).
    std::vector<float> means(static_cast<size_t>(p.batch * p.channels));
    context.device->parallelFor(
        p.batch, Eigen::TensorOpCost(plane * sizeof(T), p.channels * sizeof(float), plane),
        [&](Eigen::Index first, Eigen::Index end) {
          std::vector<float> scratch(static_cast<size_t>(((p.pixels + 1) / 2) * p.channels));
          for (int64_t b = first; b < end; ++b) {
            float* mean = means.data() + b * p.channels;
            SumByHalving(images + b * plane, p.pixels, p.channels, scratch.data(), mean);
            if constexpr (std::is_same_v<T, float>) {
              const float scaling = 1.0f / static_cast<float>(p.pixels);
              for (int64_t c = 0; c < p.channels; ++c) mean[c] *= scaling;
            } else {
              const float pixels = static_cast<float>(p.pixels);
              for (int64_t c = 0; c < p.channels; ++c) mean[c] = mean[c] / pixels;
            }
          }
        });
    context.device->parallelFor(
        count, Eigen::TensorOpCost(sizeof(T), sizeof(T), 3),
        [&](Eigen::Index first, Eigen::Index end) {
          for (int64_t i = first; i < end; ++i) {
            const int64_t b = i / plane, c = i % p.channels;
            const float mean = means[b * p.channels + c];
            if constexpr (std::is_same_v<T, float>) {
              output[i] = mean + factor * (images[i] - mean);
            } else {
              const T rounded_mean = static_cast<T>(mean);
              const T difference = images[i] - rounded_mean;
              output[i] = rounded_mean + static_cast<T>(static_cast<float>(difference) * factor);
            }
          }
        });
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------------------------
// Hue and saturation

// TensorFlow's CPU hue representation: the largest and smallest channel and the hue as a
// position in [0, 6) around the colour circle.
struct HueRange {
  float hue, low, high;
};

HueRange ToHueRange(float r, float g, float b) {
  float high, middle, low;
  int sector;
  if (r < g) {
    if (b < r) {
      high = g, middle = r, low = b, sector = 1;
    } else if (b > g) {
      high = b, middle = g, low = r, sector = 3;
    } else {
      high = g, middle = b, low = r, sector = 2;
    }
  } else {
    if (b < g) {
      high = r, middle = g, low = b, sector = 0;
    } else if (b > r) {
      high = b, middle = r, low = g, sector = 4;
    } else {
      high = r, middle = b, low = g, sector = 5;
    }
  }
  if (high == low) return HueRange{0, low, high};
  const float ratio = (middle - low) / (high - low);
  const bool increasing = (sector & 1) == 0;
  return HueRange{static_cast<float>(sector) + (increasing ? ratio : 1 - ratio), low, high};
}

// The sector of a hue position: int(position) for positions in [0, 7), else -1, which (as the
// x86 result of TensorFlow's undefined conversion of a NaN) selects the last sector's layout.
int SectorOf(float position) {
  return (position >= 0 && position < 7) ? static_cast<int>(position) : -1;
}

void FromHueRange(const HueRange& h, float* rgb) {
  const int sector = SectorOf(h.hue);
  float ratio = h.hue - static_cast<float>(sector);
  if ((sector & 1) != 0) ratio = 1 - ratio;
  const float middle = h.low + ratio * (h.high - h.low);
  switch (sector) {
    case 0: rgb[0] = h.high, rgb[1] = middle, rgb[2] = h.low; break;
    case 1: rgb[0] = middle, rgb[1] = h.high, rgb[2] = h.low; break;
    case 2: rgb[0] = h.low, rgb[1] = h.high, rgb[2] = middle; break;
    case 3: rgb[0] = h.low, rgb[1] = middle, rgb[2] = h.high; break;
    case 4: rgb[0] = middle, rgb[1] = h.low, rgb[2] = h.high; break;
    default: rgb[0] = h.high, rgb[1] = h.low, rgb[2] = middle; break;
  }
}

// Rotates the hue of one pixel by `delta` (a fraction of the circle).
void RotateHue(const float* in, float delta, float* out) {
  HueRange h = ToHueRange(in[0], in[1], in[2]);
  if (!(h.high > 0)) {  // TensorFlow's GPU: saturation 0 for a non-positive value
    out[0] = out[1] = out[2] = h.high;
    return;
  }
  constexpr float kCircle = 6;
  h.hue += delta * kCircle;
  // TensorFlow steps by whole circles; far from the circle (a huge or infinite delta, where
  // stepping would not end) the position is reduced by fmod first.
  if (!(std::fabs(h.hue) < 64 * kCircle)) h.hue = std::fmod(h.hue, kCircle);
  while (h.hue < 0) h.hue += kCircle;
  while (h.hue >= kCircle) h.hue -= kCircle;
  FromHueRange(h, out);
}

// TensorFlow's CPU RGB -> HSV of the saturation kernel (hue in [0, 1]).
void ToHsv(float r, float g, float b, float* h, float* s, float* v) {
  const float value = std::max(r, std::max(g, b));
  const float range = value - std::min(r, std::min(g, b));
  *s = value > 0 ? range / value : 0;
  const float norm = 1.0f / (6.0f * range);
  float hue;
  if (r == value) {
    hue = norm * (g - b);
  } else if (g == value) {
    hue = static_cast<float>(norm * (b - r) + 2.0 / 6.0);
  } else {
    hue = static_cast<float>(norm * (r - g) + 4.0 / 6.0);
  }
  if (range <= 0.0) hue = 0;
  if (hue < 0.0) hue = hue + 1;
  *v = value;
  *h = hue;
}

// TensorFlow's CPU HSV -> RGB of the saturation kernel.
void FromHsv(float h, float s, float v, float* rgb) {
  const float chroma = s * v;
  const float m = v - chroma;
  const float position = h * 6;
  const int sector = SectorOf(position);
  float folded = position;  // position modulo 2, in (0, 2)
  if (std::isfinite(folded) && std::fabs(folded) < 1e6f) {
    while (folded <= 0) folded += 2.0f;
    while (folded >= 2.0f) folded -= 2.0f;
  } else {
    folded = std::nanf("");
  }
  const float x = chroma * (1 - std::fabs(folded - 1));
  float r = 0, g = 0, b = 0;
  switch (sector) {
    case 0: r = chroma, g = x; break;
    case 1: r = x, g = chroma; break;
    case 2: g = chroma, b = x; break;
    case 3: g = x, b = chroma; break;
    case 4: r = x, b = chroma; break;
    case 5: r = chroma, b = x; break;
    default: break;
  }
  rgb[0] = r + m;
  rgb[1] = g + m;
  rgb[2] = b + m;
}

void ScaleSaturation(const float* in, float scale, float* out) {
  float h, s, v;
  ToHsv(in[0], in[1], in[2], &h, &s, &v);
  s = std::min(1.0f, std::max(0.0f, s * scale));
  FromHsv(h, s, v, out);
}

// image_transform::kAdjustHsv.
absl::Status AdjustHsv(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(auto launch, image_transform_launch::ReadAdjustHsvLaunch(context));
  const AdjustHsvParams& p = launch.p;
  return RunAdjustment(context, launch, [&](auto zero, auto images, float amount, auto output) {
    using T = decltype(zero);
    // Each pixel is read whole before it is written: the output may be the input.
    context.device->parallelFor(
        p.pixels, Eigen::TensorOpCost(3 * sizeof(T), 3 * sizeof(T), 40),
        [&](Eigen::Index first, Eigen::Index end) {
          for (int64_t i = first; i < end; ++i) {
            const float in[3] = {static_cast<float>(images[3 * i]),
                                 static_cast<float>(images[3 * i + 1]),
                                 static_cast<float>(images[3 * i + 2])};
            float out[3];
            if (p.adjustment == HsvAdjustment::kHue) {
              RotateHue(in, amount, out);
            } else {
              ScaleSaturation(in, amount, out);
            }
            for (int k = 0; k < 3; ++k) output[3 * i + k] = static_cast<T>(out[k]);
          }
        });
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------------------------
// RGB <-> HSV (TensorFlow's Eigen expressions, each operation in T)

template <typename T>
T MaxOf(T a, T b) {
  return a < b ? b : a;
}
template <typename T>
T MinOf(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
T Clamp01(T value) {
  return MinOf(MaxOf(value, T(0)), T(1));
}

template <typename T>
void RgbToHsvPixel(const T* rgb, T* hsv) {
  const T r = rgb[0], g = rgb[1], b = rgb[2];
  // Eigen's channel reductions: from -inf (+inf), each channel in turn against the result.
  T value = -Eigen::NumTraits<T>::infinity(), low = Eigen::NumTraits<T>::infinity();
  for (const T channel : {r, g, b}) {
    value = MaxOf(channel, value);
    low = MinOf(channel, low);
  }
  const T range = value - low;
  const T saturation = value > T(0) ? range / value : T(0);
  const T norm = (T(1) / range) * (T(1) / T(6));
  T hue = r == value ? norm * (g - b)
                     : (g == value ? norm * (b - r) + T(2) / T(6) : norm * (r - g) + T(4) / T(6));
  hue = range > T(0) ? hue : T(0);
  hue = hue < T(0) ? hue + T(1) : hue;
  hsv[0] = hue;
  hsv[1] = saturation;
  hsv[2] = value;
}

template <typename T>
void HsvToRgbPixel(const T* hsv, T* rgb) {
  using Eigen::numext::abs;
  const T h = hsv[0], s = hsv[1], v = hsv[2];
  const T position = h * T(6);
  const T red = Clamp01(T(abs(position - T(3))) - T(1));
  const T green = Clamp01(T(-T(abs(position - T(2)))) + T(2));
  const T blue = Clamp01(T(-T(abs(position - T(4)))) + T(2));
  const T one_minus_s = -s + T(1);
  rgb[0] = (one_minus_s + s * red) * v;
  rgb[1] = (one_minus_s + s * green) * v;
  rgb[2] = (one_minus_s + s * blue) * v;
}

template <bool kToHsv>
absl::Status ConvertColorSpace(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(auto launch, image_transform_launch::ReadColorSpaceLaunch(context));
  const ColorSpaceParams& p = launch.p;
  const int64_t count = launch.count;
  return Dispatch::Floating(p.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, count));
    VGPU_ASSIGN_OR_RETURN(T* y, context.Buffer<T>(1, count));
    context.device->parallelFor(
        p.pixels, Eigen::TensorOpCost(3 * sizeof(T), 3 * sizeof(T), 20),
        [&](Eigen::Index first, Eigen::Index end) {
          for (int64_t i = first; i < end; ++i) {
            const T in[3] = {x[3 * i], x[3 * i + 1], x[3 * i + 2]};
            if constexpr (kToHsv) {
              RgbToHsvPixel(in, y + 3 * i);
            } else {
              HsvToRgbPixel(in, y + 3 * i);
            }
          }
        });
    return absl::OkStatus();
  });
}

}  // namespace

void AddImageColorKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kImageColor, AdjustContrast, AdjustHsv, ConvertColorSpace<true>,
                  ConvertColorSpace<false>);
}

}  // namespace vgpu::cpu_kernels
