// What the CPU executor's image resize kernels share (image_resize_kernels.cc: bilinear,
// nearest neighbour, bicubic, area; image_scale_translate_kernels.cc: ScaleAndTranslate):
// TensorFlow's coordinate arithmetic in float, the pixel-type dispatch, the checked buffers of
// a forward and of a gradient kernel, and the parallel loop over image rows. The launch itself
// is read by launch/image_resize_launch.h.
#ifndef VGPU_BACKEND_CPU_KERNELS_IMAGE_RESAMPLING_H_
#define VGPU_BACKEND_CPU_KERNELS_IMAGE_RESAMPLING_H_

#define EIGEN_USE_THREADS
#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/launch/image_resize_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/image_resize.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels::image_resampling {

using image_resize::PixelType;
using image_resize_launch::ResizeGeometry;

// --- Coordinates -----------------------------------------------------------------------------

// `value` rounded to float and stored, so that the compiler cannot fuse the product that made
// it into a following addition (an FMA on CPUs that have one would round differently from
// TensorFlow's kernels and move an index or a table entry).
inline float Materialized(float value) {
  volatile float stored = value;
  return stored;
}

// TensorFlow's CalculateResizeScale: source pixels per resized pixel, in float.
inline float ResizeScale(int64_t image_size, int64_t resized_size, bool align_corners) {
  return (align_corners && image_size > 1 && resized_size > 1)
             ? static_cast<float>(image_size - 1) / static_cast<float>(resized_size - 1)
             : static_cast<float>(image_size) / static_cast<float>(resized_size);
}

// The source coordinate of resized index `i`: (i + 0.5) * scale - 0.5 with half-pixel centres,
// i * scale otherwise (TensorFlow's HalfPixelScaler and LegacyScaler).
inline float SourceCoordinate(int64_t i, float scale, bool half_pixel_centers) {
  if (half_pixel_centers) return Materialized((static_cast<float>(i) + 0.5f) * scale) - 0.5f;
  return Materialized(static_cast<float>(i) * scale);
}

// A float holding an integral value (or NaN) as an int64 that is safe to clamp: NaN and values
// beyond +-2^62 saturate (NaN to the low end, as the x86 conversion TensorFlow relies on does).
inline int64_t ToIndex(float integral) {
  constexpr float kLimit = 4.611686e18f;  // ~2^62
  if (!(integral >= -kLimit)) return -(int64_t{1} << 62);
  if (integral > kLimit) return int64_t{1} << 62;
  return static_cast<int64_t>(integral);
}

// `index` clamped into [0, size - 1] (size >= 1).
inline int64_t ClampIndex(int64_t index, int64_t size) {
  return std::min(size - 1, std::max(int64_t{0}, index));
}

// --- Element types ---------------------------------------------------------------------------

template <typename Fn>
absl::Status DispatchPixel(uint32_t type, Fn&& fn) {
  switch (static_cast<PixelType>(type)) {
    case PixelType::kUInt8: return fn(uint8_t{});
    case PixelType::kInt8: return fn(int8_t{});
    case PixelType::kUInt16: return fn(uint16_t{});
    case PixelType::kInt16: return fn(int16_t{});
    case PixelType::kInt32: return fn(int32_t{});
    case PixelType::kInt64: return fn(int64_t{});
    case PixelType::kFloat16: return fn(Eigen::half{});
    case PixelType::kBFloat16: return fn(Eigen::bfloat16{});
    case PixelType::kFloat32: return fn(float{});
    case PixelType::kFloat64: return fn(double{});
  }
  return absl::InvalidArgumentError(absl::StrCat("image resize: unknown pixel type ", type));
}

// The two buffers of a forward kernel, checked against the geometry: the image (of the launch's
// pixel type) and the float32 resized image.
template <typename E>
struct ForwardBuffers {
  const E* image = nullptr;
  float* resized = nullptr;
};

template <typename E>
absl::StatusOr<ForwardBuffers<E>> GetForwardBuffers(const KernelContext& context,
                                                    const ResizeGeometry& g) {
  ForwardBuffers<E> buffers;
  VGPU_ASSIGN_OR_RETURN(buffers.image, context.Buffer<const E>(0, g.image_count));
  VGPU_ASSIGN_OR_RETURN(buffers.resized, context.Buffer<float>(1, g.resized_count));
  return buffers;
}

// The computation of a forward kernel for the launch's pixel type E: checks its buffers against
// `g` (GetForwardBuffers), does nothing more for an empty resized image, refuses an empty image
// otherwise (RequireImagePixels), then returns resize(E{}, io), io the ForwardBuffers<E>.
template <typename Resize>
absl::Status ForwardResize(const KernelContext& context, uint32_t pixel_type,
                           const ResizeGeometry& g, Resize&& resize) {
  return DispatchPixel(pixel_type, [&](auto zero) -> absl::Status {
    using E = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(ForwardBuffers<E> io, GetForwardBuffers<E>(context, g));
    if (g.resized_count == 0) return absl::OkStatus();
    VGPU_RETURN_IF_ERROR(image_resize_launch::RequireImagePixels(g));
    return resize(zero, io);
  });
}

// Rows of an image of `rows` rows per batch entry, run in parallel; fn(b, row).
template <typename Fn>
void ForEachRow(const Eigen::ThreadPoolDevice& device, int64_t batch, int64_t rows,
                double cost_per_row, Fn&& fn) {
  device.parallelFor(batch * rows, Eigen::TensorOpCost(cost_per_row, cost_per_row, cost_per_row),
                     [&](Eigen::Index first, Eigen::Index end) {
                       for (int64_t index = first; index < end; ++index) {
                         fn(index / rows, index % rows);
                       }
                     });
}

// The two buffers of a gradient kernel, checked against the geometry: the resized image's
// gradient (G) and the image's (T). When the resized image is empty the image's gradient is
// zeroed here (nothing flows into it).
template <typename G, typename T>
struct GradBuffers {
  const G* resized_grad = nullptr;
  T* image_grad = nullptr;
};

template <typename G, typename T>
absl::StatusOr<GradBuffers<G, T>> GetGradBuffers(const KernelContext& context,
                                                 const ResizeGeometry& g) {
  GradBuffers<G, T> buffers;
  VGPU_ASSIGN_OR_RETURN(buffers.resized_grad, context.Buffer<const G>(0, g.resized_count));
  VGPU_ASSIGN_OR_RETURN(buffers.image_grad, context.Buffer<T>(1, g.image_count));
  if (g.image_count > 0 && g.resized_count == 0) {
    std::fill(buffers.image_grad, buffers.image_grad + g.image_count, T(0));
  }
  return buffers;
}

}  // namespace vgpu::cpu_kernels::image_resampling

namespace vgpu::cpu_kernels {

// image_resize::kScaleAndTranslate and kScaleAndTranslateGrad
// (image_scale_translate_kernels.cc).
absl::Status ScaleAndTranslate(const KernelContext& context);
absl::Status ScaleAndTranslateGrad(const KernelContext& context);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_IMAGE_RESAMPLING_H_
