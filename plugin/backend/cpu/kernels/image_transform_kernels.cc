// The geometric kernels of the image transform family (protocol/kernels/image_transform.h) on
// the CPU backing executor: projective transforms, crop-and-resize and its two gradients, and
// non-max suppression. Arithmetic follows TensorFlow's CPU kernels operation by operation
// (float32, same order, same conversions), so results are bit for bit those of TensorFlow's CPU
// kernels; where TensorFlow's behaviour is undefined (an out-of-range float converted to an
// integer, a NaN coordinate) these kernels do what a GPU does or fall back to the fill value.
//
// Every launch is validated first, by the launch layer (launch/image_transform_launch.h):
// extents non-negative with overflow-checked products; then here every buffer large enough,
// box indices in range. Coordinates computed from a tenant's data are
// range-checked before they index anything. Work splits over output rows (or images, or boxes)
// so that results never depend on the thread count.
#define EIGEN_USE_THREADS

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <queue>
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

using image_transform::CropGeometry;
using image_transform::CropMethod;
using image_transform::FillMode;
using image_transform::Interpolation;
using image_transform::NonMaxSuppressionParams;
using image_transform::ProjectiveTransformParams;
using image_transform_launch::CropCounts;
using image_transform_launch::CropLaunch;
using image_transform_launch::ProjectiveLaunch;
using image_transform_launch::ReadCropAndResizeLaunch;
using image_transform_launch::ReadCropGradBoxesLaunch;
using image_transform_launch::ReadCropGradImageLaunch;
using image_transform_launch::ReadNonMaxSuppressionLaunch;
using image_transform_launch::ReadProjectiveLaunch;

// Below this magnitude a float converts to int64 exactly and products with an extent stay far
// from overflow.
constexpr float kSafeIntegral = 0x1p62f;

// Invokes fn(T{}) for the element types of the projective transform.
template <typename Fn>
absl::Status DispatchProjective(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kUInt8: return fn(uint8_t{});
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt64: return fn(int64_t{});
    default: return Dispatch::Floating(dtype, fn);
  }
}

// Invokes fn(T{}) for the image types of crop-and-resize (float16, float32, float64).
template <typename Fn>
absl::Status DispatchCropImage(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat16: return fn(Eigen::half{});
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "crop and resize: dtype ", static_cast<uint32_t>(dtype), " is not float16/32/64"));
  }
}

template <typename T>
float ToFloat(T value) {
  return static_cast<float>(value);
}

// A float32 result as element type T: rounded for floating types; for integers truncated toward
// zero and saturated, NaN giving 0 (a GPU's conversion; in C++ an out-of-range conversion is
// undefined).
template <typename T>
T FromFloat(float value) {
  if constexpr (std::is_integral_v<T>) {
    if (std::isnan(value)) return T{0};
    constexpr float kLowest = static_cast<float>(std::numeric_limits<T>::lowest());
    constexpr float kMax = static_cast<float>(std::numeric_limits<T>::max());
    if (value <= kLowest) return std::numeric_limits<T>::lowest();
    if (value >= kMax) return std::numeric_limits<T>::max();
    return static_cast<T>(value);
  } else {
    return static_cast<T>(value);
  }
}

// The index an integral float names along an axis of `length`, or -1 when it is outside
// [0, length) or not a number.
int64_t IndexWithin(float integral, int64_t length) {
  if (!(integral >= 0.0f) || !(integral < kSafeIntegral)) return -1;
  const int64_t index = static_cast<int64_t>(integral);
  return index < length ? index : -1;
}

// std::min / std::max on floats as TensorFlow's CPU kernels use them (NaN in the first
// argument is kept).
float MinOf(float a, float b) { return b < a ? b : a; }
float MaxOf(float a, float b) { return a < b ? b : a; }

// ---------------------------------------------------------------------------------------------
// Projective transform

// Truncates q toward zero, or returns false when |q| is too large to compute with (TensorFlow's
// cast would be undefined there).
bool TruncateSafely(float q, int64_t* out) {
  if (!(std::fabs(q) < kSafeIntegral)) return false;
  *out = static_cast<int64_t>(q);
  return true;
}

// Maps a sampled coordinate into [0, length - 1] by the fill mode, operation by operation as
// TensorFlow's MapCoordinate (mixed int64/float arithmetic included). Coordinates too large to
// fold (|c| >= 2^62 times the period) map to 0.
float MapCoordinate(FillMode mode, float coordinate, int64_t length) {
  float c = coordinate;
  const float last = static_cast<float>(length - 1);
  switch (mode) {
    case FillMode::kReflect:
      if (c < 0) {
        if (length <= 1) {
          c = 0;
        } else {
          const int64_t period = 2 * length;
          int64_t folds = 0;
          if (!TruncateSafely(-c / static_cast<float>(period), &folds)) return 0;
          c = static_cast<float>(period * folds) + c;
          c = (c < static_cast<float>(-length)) ? c + static_cast<float>(period) : -c - 1;
        }
      } else if (c > last) {
        if (length <= 1) {
          c = 0;
        } else {
          const int64_t period = 2 * length;
          int64_t folds = 0;
          if (!TruncateSafely(c / static_cast<float>(period), &folds)) return 0;
          c -= static_cast<float>(period * folds);
          if (c >= static_cast<float>(length)) c = static_cast<float>(period) - c - 1;
        }
      }
      break;
    case FillMode::kWrap:
      if (c < 0) {
        if (length <= 1) {
          c = 0;
        } else {
          const int64_t span = length - 1;
          int64_t wraps = 0;
          if (!TruncateSafely(-c / static_cast<float>(span), &wraps)) return 0;
          c += static_cast<float>(length * (wraps + 1));
        }
      } else if (c > last) {
        if (length <= 1) {
          c = 0;
        } else {
          const int64_t span = length - 1;
          int64_t wraps = 0;
          if (!TruncateSafely(c / static_cast<float>(span), &wraps)) return 0;
          c -= static_cast<float>(length * wraps);
        }
      }
      break;
    case FillMode::kConstant:
      return c;
    case FillMode::kNearest:
      break;
  }
  return MinOf(MaxOf(c, 0.0f), last);  // TensorFlow's clamp (a NaN stays a NaN)
}

template <typename T>
struct ProjectiveImage {
  const T* pixels;  // [height, width, channels] of one image
  int64_t height, width, channels;
  T fill;

  T Read(float y, float x, int64_t channel) const {
    const int64_t row = IndexWithin(y, height), column = IndexWithin(x, width);
    if (row < 0 || column < 0) return fill;
    return pixels[(row * width + column) * channels + channel];
  }
};

// Writes the `channels` values of one output pixel sampled at (y, x).
template <typename T>
void SamplePixel(const ProjectiveImage<T>& image, Interpolation interpolation, float y, float x,
                 T* out) {
  if (interpolation == Interpolation::kNearest) {
    const float row = std::round(y), column = std::round(x);
    for (int64_t c = 0; c < image.channels; ++c) out[c] = image.Read(row, column, c);
    return;
  }
  const float y_floor = std::floor(y), x_floor = std::floor(x);
  const float y_ceil = y_floor + 1, x_ceil = x_floor + 1;
  for (int64_t c = 0; c < image.channels; ++c) {
    const float top = (x_ceil - x) * ToFloat(image.Read(y_floor, x_floor, c)) +
                      (x - x_floor) * ToFloat(image.Read(y_floor, x_ceil, c));
    const float bottom = (x_ceil - x) * ToFloat(image.Read(y_ceil, x_floor, c)) +
                         (x - x_floor) * ToFloat(image.Read(y_ceil, x_ceil, c));
    out[c] = FromFloat<T>((y_ceil - y) * top + (y - y_floor) * bottom);
  }
}

// image_transform::kProjectiveTransform.
absl::Status ProjectiveTransform(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(ProjectiveLaunch launch, ReadProjectiveLaunch(context));
  const ProjectiveTransformParams& p = launch.p;
  const int64_t image_count = launch.image_count, output_count = launch.output_count;
  const int64_t transform_count = launch.transform_count;
  return DispatchProjective(p.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* images, context.Buffer<const T>(0, image_count));
    VGPU_ASSIGN_OR_RETURN(const float* transforms,
                          context.Buffer<const float>(1, transform_count));
    VGPU_ASSIGN_OR_RETURN(T* output, context.Buffer<T>(2, output_count));
    if (output_count == 0) return absl::OkStatus();
    const T fill = FromFloat<T>(p.fill_value);
    const int64_t rows = p.batch * p.out_height;
    const int64_t row_values = p.out_width * p.channels;
    context.device->parallelFor(
        rows,
        Eigen::TensorOpCost(4.0 * row_values * sizeof(T), row_values * sizeof(T),
                            20.0 * row_values),
        [&](Eigen::Index first, Eigen::Index end) {
          for (int64_t row = first; row < end; ++row) {
            const int64_t b = row / p.out_height, y = row % p.out_height;
            const float* t = transforms + (p.transform_rows == 1 ? 0 : 8 * b);
            const ProjectiveImage<T> image{images + b * p.in_height * p.in_width * p.channels,
                                           p.in_height, p.in_width, p.channels, fill};
            T* out = output + row * row_values;
            const float out_y = static_cast<float>(y);
            for (int64_t x = 0; x < p.out_width; ++x, out += p.channels) {
              const float out_x = static_cast<float>(x);
              const float projection = t[6] * out_x + t[7] * out_y + 1.f;
              if (projection == 0) {
                std::fill(out, out + p.channels, fill);
                continue;
              }
              const float in_x = (t[0] * out_x + t[1] * out_y + t[2]) / projection;
              const float in_y = (t[3] * out_x + t[4] * out_y + t[5]) / projection;
              SamplePixel(image, p.interpolation, MapCoordinate(p.fill_mode, in_y, p.in_height),
                          MapCoordinate(p.fill_mode, in_x, p.in_width), out);
            }
          }
        });
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------------------------
// Crop and resize

// The box indices of a launch, every one checked against the batch.
absl::StatusOr<const int32_t*> BoxIndices(const KernelContext& context, size_t buffer,
                                          const CropGeometry& g) {
  VGPU_ASSIGN_OR_RETURN(const int32_t* box_index,
                        context.Buffer<const int32_t>(buffer, g.num_boxes));
  for (int64_t b = 0; b < g.num_boxes; ++b) {
    if (box_index[b] < 0 || box_index[b] >= g.batch) {
      return absl::InvalidArgumentError("box_index has values outside [0, batch_size)");
    }
  }
  return box_index;
}

// The coordinate along one axis (extent > 0) of crop point `i` of a box spanning [a1, a2], as
// TensorFlow's forward and image-gradient kernels compute it.
float CropCoordinate(float a1, float a2, int64_t extent, int64_t crop, int64_t i) {
  const float last = static_cast<float>(extent - 1);
  if (crop > 1) {
    const float scale = (a2 - a1) * last / static_cast<float>(crop - 1);
    return a1 * last + static_cast<float>(i) * scale;
  }
  return static_cast<float>(0.5 * static_cast<double>(a1 + a2) * static_cast<double>(extent - 1));
}

// Whether a crop coordinate lies inside [0, extent - 1] (false for NaN).
bool Inside(float coordinate, int64_t extent) {
  return coordinate >= 0 && coordinate <= static_cast<float>(extent - 1);
}

// Bilinear neighbours of an inside coordinate: the lower and upper index (clamped to the
// extent, which only matters for extents float32 cannot hold exactly) and the weight of the
// upper one.
struct Neighbours {
  int64_t low, high;
  float lerp;
};

Neighbours NeighboursOf(float coordinate, int64_t extent) {
  const int64_t low = static_cast<int64_t>(std::floor(coordinate));
  const int64_t high = static_cast<int64_t>(std::ceil(coordinate));
  Neighbours n{std::min(low, extent - 1), std::min(high, extent - 1), 0};
  n.lerp = coordinate - static_cast<float>(low);
  return n;
}

int64_t NearestOf(float coordinate, int64_t extent) {
  return std::min(static_cast<int64_t>(std::round(coordinate)), extent - 1);
}

// image_transform::kCropAndResize.
absl::Status CropAndResize(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(CropLaunch launch, ReadCropAndResizeLaunch(context));
  const CropGeometry& g = launch.g;
  const CropCounts& counts = launch.counts;
  return DispatchCropImage(g.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* image, context.Buffer<const T>(0, counts.image));
    VGPU_ASSIGN_OR_RETURN(const float* boxes, context.Buffer<const float>(1, counts.boxes));
    VGPU_ASSIGN_OR_RETURN(const int32_t* box_index, BoxIndices(context, 2, g));
    VGPU_ASSIGN_OR_RETURN(float* crops, context.Buffer<float>(3, counts.crops));
    if (counts.crops == 0) return absl::OkStatus();
    const int64_t row_values = g.crop_width * g.depth;
    context.device->parallelFor(
        g.num_boxes * g.crop_height,
        Eigen::TensorOpCost(4.0 * row_values * sizeof(T), row_values * sizeof(float),
                            12.0 * row_values),
        [&](Eigen::Index first, Eigen::Index end) {
          for (int64_t row = first; row < end; ++row) {
            const int64_t b = row / g.crop_height, y = row % g.crop_height;
            const float* box = boxes + 4 * b;
            const T* source = image + box_index[b] * g.image_height * g.image_width * g.depth;
            float* out = crops + row * row_values;
            const float in_y = CropCoordinate(box[0], box[2], g.image_height, g.crop_height, y);
            if (!Inside(in_y, g.image_height)) {
              std::fill(out, out + row_values, launch.extrapolation_value);
              continue;
            }
            for (int64_t x = 0; x < g.crop_width; ++x, out += g.depth) {
              const float in_x = CropCoordinate(box[1], box[3], g.image_width, g.crop_width, x);
              if (!Inside(in_x, g.image_width)) {
                std::fill(out, out + g.depth, launch.extrapolation_value);
                continue;
              }
              auto pixel = [&](int64_t py, int64_t px) {
                return source + (py * g.image_width + px) * g.depth;
              };
              if (g.method == CropMethod::kNearest) {
                const T* nearest = pixel(NearestOf(in_y, g.image_height),
                                         NearestOf(in_x, g.image_width));
                for (int64_t d = 0; d < g.depth; ++d) out[d] = static_cast<float>(nearest[d]);
                continue;
              }
              const Neighbours ny = NeighboursOf(in_y, g.image_height);
              const Neighbours nx = NeighboursOf(in_x, g.image_width);
              const T* top_left = pixel(ny.low, nx.low);
              const T* top_right = pixel(ny.low, nx.high);
              const T* bottom_left = pixel(ny.high, nx.low);
              const T* bottom_right = pixel(ny.high, nx.high);
              for (int64_t d = 0; d < g.depth; ++d) {
                const float tl = static_cast<float>(top_left[d]);
                const float tr = static_cast<float>(top_right[d]);
                const float bl = static_cast<float>(bottom_left[d]);
                const float br = static_cast<float>(bottom_right[d]);
                const float top = tl + (tr - tl) * nx.lerp;
                const float bottom = bl + (br - bl) * nx.lerp;
                out[d] = top + (bottom - top) * ny.lerp;
              }
            }
          }
        });
    return absl::OkStatus();
  });
}

// Where one crop point samples along an axis: nowhere (outside the image), or its bilinear
// neighbours and its nearest pixel.
struct AxisSample {
  bool inside = false;
  Neighbours neighbours{0, 0, 0};
  int64_t nearest = 0;
};

// The samples of every box's crop points along one axis ([num_boxes, crop] entries), computed
// once for all the workers of a gradient.
std::vector<AxisSample> SampleAxes(const float* boxes, int64_t num_boxes, int first_corner,
                                   int64_t extent, int64_t crop) {
  std::vector<AxisSample> samples(static_cast<size_t>(num_boxes * crop));
  for (int64_t b = 0; b < num_boxes; ++b) {
    const float* box = boxes + 4 * b;
    for (int64_t i = 0; i < crop; ++i) {
      const float c = CropCoordinate(box[first_corner], box[first_corner + 2], extent, crop, i);
      if (!Inside(c, extent)) continue;
      samples[b * crop + i] = AxisSample{true, NeighboursOf(c, extent), NearestOf(c, extent)};
    }
  }
  return samples;
}

// image_transform::kCropAndResizeGradImage. Work splits over (image, channel) pairs: each
// worker adds the gradients of every box of its image in box order, so the sums are those of
// TensorFlow's CPU kernel run on one thread.
absl::Status CropAndResizeGradImage(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(CropLaunch launch, ReadCropGradImageLaunch(context));
  const CropGeometry& g = launch.g;
  const CropCounts& counts = launch.counts;
  return DispatchCropImage(g.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const float* grads, context.Buffer<const float>(0, counts.crops));
    VGPU_ASSIGN_OR_RETURN(const float* boxes, context.Buffer<const float>(1, counts.boxes));
    VGPU_ASSIGN_OR_RETURN(const int32_t* box_index, BoxIndices(context, 2, g));
    VGPU_ASSIGN_OR_RETURN(T* grads_image, context.Buffer<T>(3, counts.image));
    if (counts.image == 0) return absl::OkStatus();
    std::fill(grads_image, grads_image + counts.image, T(0));
    if (counts.crops == 0) return absl::OkStatus();
    // Sample counts are bounded by the gradient's element count (depth >= 1 here).
    const std::vector<AxisSample> rows =
        SampleAxes(boxes, g.num_boxes, 0, g.image_height, g.crop_height);
    const std::vector<AxisSample> columns =
        SampleAxes(boxes, g.num_boxes, 1, g.image_width, g.crop_width);
    const int64_t plane = g.image_height * g.image_width * g.depth;
    const double work = static_cast<double>(counts.crops) / static_cast<double>(g.batch);
    context.device->parallelFor(
        g.batch * g.depth, Eigen::TensorOpCost(work * sizeof(float), 4 * work * sizeof(T),
                                               8 * work / static_cast<double>(g.depth)),
        [&](Eigen::Index first, Eigen::Index end) {
          for (int64_t unit = first; unit < end; ++unit) {
            const int64_t image = unit / g.depth, d = unit % g.depth;
            T* target = grads_image + image * plane + d;
            auto add = [&](int64_t py, int64_t px, float value) {
              T& pixel = target[(py * g.image_width + px) * g.depth];
              pixel += static_cast<T>(value);
            };
            for (int64_t b = 0; b < g.num_boxes; ++b) {
              if (box_index[b] != image) continue;
              for (int64_t y = 0; y < g.crop_height; ++y) {
                const AxisSample& row = rows[b * g.crop_height + y];
                if (!row.inside) continue;
                const float* grad_row = grads + ((b * g.crop_height + y) * g.crop_width) * g.depth;
                for (int64_t x = 0; x < g.crop_width; ++x) {
                  const AxisSample& column = columns[b * g.crop_width + x];
                  if (!column.inside) continue;
                  const float grad = grad_row[x * g.depth + d];
                  if (g.method == CropMethod::kNearest) {
                    add(row.nearest, column.nearest, grad);
                    continue;
                  }
                  const Neighbours& ny = row.neighbours;
                  const Neighbours& nx = column.neighbours;
                  const float top = (1 - ny.lerp) * grad;
                  add(ny.low, nx.low, (1 - nx.lerp) * top);
                  add(ny.low, nx.high, nx.lerp * top);
                  const float bottom = ny.lerp * grad;
                  add(ny.high, nx.low, (1 - nx.lerp) * bottom);
                  add(ny.high, nx.high, nx.lerp * bottom);
                }
              }
            }
          }
        });
    return absl::OkStatus();
  });
}

// The coordinate of crop point `i` as TensorFlow's box-gradient kernel computes it (the scale
// is rounded differently from CropCoordinate's), and the ratio it weights gradients with.
struct BoxAxis {
  float ratio;  // (extent - 1) / (crop - 1), 0 for a single crop point
  float scale;  // (a2 - a1) * ratio
};

BoxAxis BoxAxisOf(float a1, float a2, int64_t extent, int64_t crop) {
  if (crop <= 1) return BoxAxis{0, 0};
  const float ratio = static_cast<float>(extent - 1) / static_cast<float>(crop - 1);
  return BoxAxis{ratio, (a2 - a1) * ratio};
}

float BoxCoordinate(const BoxAxis& axis, float a1, float a2, int64_t extent, int64_t crop,
                    int64_t i) {
  if (crop > 1) return a1 * static_cast<float>(extent - 1) + static_cast<float>(i) * axis.scale;
  return static_cast<float>(0.5 * static_cast<double>(a1 + a2) * static_cast<double>(extent - 1));
}

// Adds the gradient `image_grad` (of the sampled value along one axis) to the two box
// coordinates of that axis, as TensorFlow's kernel does (in double for a single crop point).
void AddAxisGradient(float image_grad, const BoxAxis& axis, int64_t extent, int64_t crop,
                     int64_t i, float* low, float* high) {
  if (crop > 1) {
    *low += image_grad * (static_cast<float>(extent - 1) - static_cast<float>(i) * axis.ratio);
    *high += image_grad * (static_cast<float>(i) * axis.ratio);
  } else {
    const double half = static_cast<double>(image_grad) * 0.5 * static_cast<double>(extent - 1);
    *low = static_cast<float>(static_cast<double>(*low) + half);
    *high = static_cast<float>(static_cast<double>(*high) + half);
  }
}

// image_transform::kCropAndResizeGradBoxes. Work splits over boxes; each box sums in row,
// column, channel order, as TensorFlow's serial CPU kernel.
absl::Status CropAndResizeGradBoxes(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(CropLaunch launch, ReadCropGradBoxesLaunch(context));
  const CropGeometry& g = launch.g;
  const CropCounts& counts = launch.counts;
  return DispatchCropImage(g.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const float* grads, context.Buffer<const float>(0, counts.crops));
    VGPU_ASSIGN_OR_RETURN(const T* image, context.Buffer<const T>(1, counts.image));
    VGPU_ASSIGN_OR_RETURN(const float* boxes, context.Buffer<const float>(2, counts.boxes));
    VGPU_ASSIGN_OR_RETURN(const int32_t* box_index, BoxIndices(context, 3, g));
    VGPU_ASSIGN_OR_RETURN(float* grads_boxes, context.Buffer<float>(4, counts.boxes));
    if (counts.boxes == 0) return absl::OkStatus();
    const double per_box = static_cast<double>(g.crop_height * g.crop_width) *
                           static_cast<double>(std::max<int64_t>(g.depth, 1));
    context.device->parallelFor(
        g.num_boxes, Eigen::TensorOpCost(5 * per_box * sizeof(float), 16, 30 * per_box),
        [&](Eigen::Index first, Eigen::Index end) {
          for (int64_t b = first; b < end; ++b) {
            float sums[4] = {0, 0, 0, 0};  // y1, x1, y2, x2
            const float* box = boxes + 4 * b;
            const float y1 = box[0], x1 = box[1], y2 = box[2], x2 = box[3];
            const T* source = image + box_index[b] * g.image_height * g.image_width * g.depth;
            const BoxAxis along_y = BoxAxisOf(y1, y2, g.image_height, g.crop_height);
            const BoxAxis along_x = BoxAxisOf(x1, x2, g.image_width, g.crop_width);
            for (int64_t y = 0; g.depth > 0 && y < g.crop_height; ++y) {
              const float in_y = BoxCoordinate(along_y, y1, y2, g.image_height, g.crop_height, y);
              if (!Inside(in_y, g.image_height)) continue;
              const Neighbours ny = NeighboursOf(in_y, g.image_height);
              for (int64_t x = 0; x < g.crop_width; ++x) {
                const float in_x = BoxCoordinate(along_x, x1, x2, g.image_width, g.crop_width, x);
                if (!Inside(in_x, g.image_width)) continue;
                const Neighbours nx = NeighboursOf(in_x, g.image_width);
                auto pixel = [&](int64_t py, int64_t px) {
                  return source + (py * g.image_width + px) * g.depth;
                };
                const T* top_left = pixel(ny.low, nx.low);
                const T* top_right = pixel(ny.low, nx.high);
                const T* bottom_left = pixel(ny.high, nx.low);
                const T* bottom_right = pixel(ny.high, nx.high);
                const float* grad = grads + ((b * g.crop_height + y) * g.crop_width + x) * g.depth;
                for (int64_t d = 0; d < g.depth; ++d) {
                  const float tl = static_cast<float>(top_left[d]);
                  const float tr = static_cast<float>(top_right[d]);
                  const float bl = static_cast<float>(bottom_left[d]);
                  const float br = static_cast<float>(bottom_right[d]);
                  float image_grad_y = (1 - nx.lerp) * (bl - tl) + nx.lerp * (br - tr);
                  float image_grad_x = (1 - ny.lerp) * (tr - tl) + ny.lerp * (br - bl);
                  image_grad_y *= grad[d];
                  image_grad_x *= grad[d];
                  AddAxisGradient(image_grad_y, along_y, g.image_height, g.crop_height, y,
                                  &sums[0], &sums[2]);
                  AddAxisGradient(image_grad_x, along_x, g.image_width, g.crop_width, x,
                                  &sums[1], &sums[3]);
                }
              }
            }
            std::copy(sums, sums + 4, grads_boxes + 4 * b);
          }
        });
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------------------------
// Non-max suppression

// Intersection over union of boxes i and j ([y1, x1, y2, x2] rows, corners in any order), in
// TensorFlow's operation order.
float IntersectionOverUnion(const float* boxes, int64_t i, int64_t j) {
  const float* a = boxes + 4 * i;
  const float* b = boxes + 4 * j;
  const float ymin_i = MinOf(a[0], a[2]), xmin_i = MinOf(a[1], a[3]);
  const float ymax_i = MaxOf(a[0], a[2]), xmax_i = MaxOf(a[1], a[3]);
  const float ymin_j = MinOf(b[0], b[2]), xmin_j = MinOf(b[1], b[3]);
  const float ymax_j = MaxOf(b[0], b[2]), xmax_j = MaxOf(b[1], b[3]);
  const float area_i = (ymax_i - ymin_i) * (xmax_i - xmin_i);
  const float area_j = (ymax_j - ymin_j) * (xmax_j - xmin_j);
  if (area_i <= 0 || area_j <= 0) return 0.0f;
  const float intersection_ymin = MaxOf(ymin_i, ymin_j);
  const float intersection_xmin = MaxOf(xmin_i, xmin_j);
  const float intersection_ymax = MinOf(ymax_i, ymax_j);
  const float intersection_xmax = MinOf(xmax_i, xmax_j);
  const float intersection = MaxOf(intersection_ymax - intersection_ymin, 0.0f) *
                             MaxOf(intersection_xmax - intersection_xmin, 0.0f);
  return intersection / (area_i + area_j - intersection);
}

// image_transform::kNonMaxSuppression: TensorFlow's greedy selection (hard suppression), step
// by step, including its handling of a NaN overlap (the candidate's score drops to 0 and it
// returns to the queue), so the selected indices and their order are those of the CPU kernel.
absl::Status NonMaxSuppression(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(NonMaxSuppressionParams p, ReadNonMaxSuppressionLaunch(context));
  VGPU_ASSIGN_OR_RETURN(const float* boxes, context.Buffer<const float>(0, 4 * p.num_boxes));
  VGPU_ASSIGN_OR_RETURN(const float* scores, context.Buffer<const float>(1, p.num_boxes));
  VGPU_ASSIGN_OR_RETURN(int32_t* selected_out, context.Buffer<int32_t>(2, p.num_boxes));
  VGPU_ASSIGN_OR_RETURN(int32_t* count_out, context.Buffer<int32_t>(3, 1));

  struct Candidate {
    int32_t box_index;
    float score;
    int64_t suppress_begin_index;
  };
  // Highest score first; the lower index first among equal scores.
  auto lower_priority = [](const Candidate& a, const Candidate& b) {
    return (a.score == b.score && a.box_index > b.box_index) || a.score < b.score;
  };
  std::priority_queue<Candidate, std::deque<Candidate>, decltype(lower_priority)> queue(
      lower_priority);
  for (int64_t i = 0; i < p.num_boxes; ++i) {
    if (scores[i] > p.score_threshold) {
      queue.push(Candidate{static_cast<int32_t>(i), scores[i], 0});
    }
  }
  // Hard suppression: an overlap at or below the threshold keeps the score (weight
  // exp(0 * overlap^2)), any other overlap zeroes it.
  auto weight = [&](float overlap) {
    return overlap <= p.iou_threshold ? std::exp(0.0f * overlap * overlap) : 0.0f;
  };
  std::vector<int32_t> selected;
  while (static_cast<int64_t>(selected.size()) < p.max_output_size && !queue.empty()) {
    Candidate candidate = queue.top();
    const float original_score = candidate.score;
    queue.pop();
    bool suppressed = false;
    for (int64_t j = static_cast<int64_t>(selected.size()) - 1;
         j >= candidate.suppress_begin_index; --j) {
      const float overlap = IntersectionOverUnion(boxes, candidate.box_index, selected[j]);
      candidate.score *= weight(overlap);
      if (overlap > p.iou_threshold) {
        suppressed = true;
        break;
      }
      if (candidate.score <= p.score_threshold) break;
    }
    candidate.suppress_begin_index = static_cast<int64_t>(selected.size());
    if (suppressed) continue;
    if (candidate.score == original_score) {
      selected.push_back(candidate.box_index);
    } else if (candidate.score > p.score_threshold) {
      queue.push(candidate);
    }
  }
  std::copy(selected.begin(), selected.end(), selected_out);
  *count_out = static_cast<int32_t>(selected.size());
  return absl::OkStatus();
}

}  // namespace

void AddImageTransformKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kImageTransform, ProjectiveTransform, CropAndResize,
                  CropAndResizeGradImage, CropAndResizeGradBoxes, NonMaxSuppression);
}

}  // namespace vgpu::cpu_kernels
