// The image transform family's launches (protocol/kernels/image_transform.h), read and
// validated once: ImageProjectiveTransform (interpolation, fill mode, one transform or one per
// image, element counts), CropAndResize and its gradients (method, extents within TensorFlow's
// int range, element counts of image, boxes and crops) and NonMaxSuppression. Only the CPU
// executor has kernels for this family.
#ifndef VGPU_BACKEND_LAUNCH_IMAGE_TRANSFORM_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_IMAGE_TRANSFORM_LAUNCH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/protocol/kernels/image_transform.h"

namespace vgpu::image_transform_launch {

// TensorFlow's image kernels hold extents in int: larger ones are refused.
inline constexpr int64_t kMaxImageExtent = (int64_t{1} << 31) - 1;

// image_transform::kProjectiveTransform: 3 buffers (images, transforms, output).
struct ProjectiveLaunch {
  image_transform::ProjectiveTransformParams p;
  int64_t image_count = 0, output_count = 0, transform_count = 0;  // elements of each buffer
};
absl::StatusOr<ProjectiveLaunch> ReadProjectiveLaunch(const LaunchView& launch);

// The element counts of a crop geometry's image, boxes (4 floats each) and crops.
struct CropCounts {
  int64_t image = 0, boxes = 0, crops = 0;
};

// kCropAndResize (4 buffers; CropAndResizeParams), kCropAndResizeGradImage (4; CropGeometry)
// and kCropAndResizeGradBoxes (5; CropGeometry, bilinear only).
struct CropLaunch {
  image_transform::CropGeometry g;
  float extrapolation_value = 0.0f;  // the forward kernel's
  CropCounts counts;
};
absl::StatusOr<CropLaunch> ReadCropAndResizeLaunch(const LaunchView& launch);
absl::StatusOr<CropLaunch> ReadCropGradImageLaunch(const LaunchView& launch);
absl::StatusOr<CropLaunch> ReadCropGradBoxesLaunch(const LaunchView& launch);

// The colour kernels: a parameter block and the element count of the image(s) it describes.
template <typename Params>
struct ColorLaunch {
  Params p;
  int64_t count = 0;
};
// kAdjustContrast: 3 buffers (images, factor, output); batch * pixels * channels elements.
absl::StatusOr<ColorLaunch<image_transform::AdjustContrastParams>> ReadAdjustContrastLaunch(
    const LaunchView& launch);
// kAdjustHsv: 3 buffers (images, amount, output); pixels * 3 elements; hue or saturation.
absl::StatusOr<ColorLaunch<image_transform::AdjustHsvParams>> ReadAdjustHsvLaunch(
    const LaunchView& launch);
// kRgbToHsv / kHsvToRgb: 2 buffers; pixels * 3 elements.
absl::StatusOr<ColorLaunch<image_transform::ColorSpaceParams>> ReadColorSpaceLaunch(
    const LaunchView& launch);

// image_transform::kNonMaxSuppression: 4 buffers (boxes, scores, selected, count).
absl::StatusOr<image_transform::NonMaxSuppressionParams> ReadNonMaxSuppressionLaunch(
    const LaunchView& launch);

}  // namespace vgpu::image_transform_launch

#endif  // VGPU_BACKEND_LAUNCH_IMAGE_TRANSFORM_LAUNCH_H_
