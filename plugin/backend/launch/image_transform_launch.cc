// The image transform family's launch readers (see image_transform_launch.h).
#include "plugin/backend/launch/image_transform_launch.h"

#include "absl/strings/str_cat.h"
#include "plugin/common/status_macros.h"

namespace vgpu::image_transform_launch {
namespace {

using image_transform::CropGeometry;
using image_transform::CropMethod;
using image_transform::FillMode;
using image_transform::Interpolation;

absl::StatusOr<CropCounts> CheckCropGeometry(const CropGeometry& g) {
  if (g.method != CropMethod::kBilinear && g.method != CropMethod::kNearest) {
    return absl::InvalidArgumentError(
        absl::StrCat("crop and resize: unknown method ", static_cast<uint32_t>(g.method)));
  }
  for (int64_t extent : {g.batch, g.depth, g.num_boxes, g.image_height, g.image_width,
                         g.crop_height, g.crop_width}) {
    if (extent < 0 || extent > kMaxImageExtent) {
      return absl::InvalidArgumentError(
          absl::StrCat("crop and resize: extent ", extent, " is outside [0, 2^31)"));
    }
  }
  if (g.image_height <= 0 || g.image_width <= 0 || g.crop_height <= 0 || g.crop_width <= 0) {
    return absl::InvalidArgumentError("crop and resize: image and crop extents must be positive");
  }
  CropCounts counts;
  VGPU_ASSIGN_OR_RETURN(counts.image,
                        CheckedProduct({g.batch, g.image_height, g.image_width, g.depth},
                                       "crop and resize image"));
  VGPU_ASSIGN_OR_RETURN(counts.boxes, CheckedProduct({g.num_boxes, 4}, "crop and resize boxes"));
  VGPU_ASSIGN_OR_RETURN(counts.crops,
                        CheckedProduct({g.num_boxes, g.crop_height, g.crop_width, g.depth},
                                       "crop and resize crops"));
  return counts;
}

// A gradient launch: `buffers` buffers, a CropGeometry parameter block.
absl::StatusOr<CropLaunch> ReadCropGradient(const LaunchView& launch, size_t buffers) {
  CropLaunch read;
  VGPU_ASSIGN_OR_RETURN(read.g, launch.ReadParams<CropGeometry>(buffers));
  VGPU_ASSIGN_OR_RETURN(read.counts, CheckCropGeometry(read.g));
  return read;
}

}  // namespace

absl::StatusOr<ProjectiveLaunch> ReadProjectiveLaunch(const LaunchView& launch) {
  ProjectiveLaunch read;
  VGPU_ASSIGN_OR_RETURN(read.p, launch.ReadParams<image_transform::ProjectiveTransformParams>(3));
  const image_transform::ProjectiveTransformParams& p = read.p;
  if (p.interpolation != Interpolation::kNearest && p.interpolation != Interpolation::kBilinear) {
    return absl::InvalidArgumentError(absl::StrCat(
        "projective transform: unknown interpolation ", static_cast<uint32_t>(p.interpolation)));
  }
  if (p.fill_mode != FillMode::kReflect && p.fill_mode != FillMode::kWrap &&
      p.fill_mode != FillMode::kConstant && p.fill_mode != FillMode::kNearest) {
    return absl::InvalidArgumentError(absl::StrCat(
        "projective transform: unknown fill mode ", static_cast<uint32_t>(p.fill_mode)));
  }
  if (p.transform_rows != 1 && p.transform_rows != p.batch) {
    return absl::InvalidArgumentError(absl::StrCat("projective transform: ", p.transform_rows,
                                                   " transforms for ", p.batch, " images"));
  }
  VGPU_ASSIGN_OR_RETURN(read.image_count,
                        CheckedProduct({p.batch, p.in_height, p.in_width, p.channels},
                                       "projective transform input"));
  VGPU_ASSIGN_OR_RETURN(read.output_count,
                        CheckedProduct({p.batch, p.out_height, p.out_width, p.channels},
                                       "projective transform output"));
  VGPU_ASSIGN_OR_RETURN(read.transform_count,
                        CheckedProduct({p.transform_rows, 8}, "projective transform transforms"));
  return read;
}

absl::StatusOr<CropLaunch> ReadCropAndResizeLaunch(const LaunchView& launch) {
  VGPU_ASSIGN_OR_RETURN(image_transform::CropAndResizeParams p,
                        launch.ReadParams<image_transform::CropAndResizeParams>(4));
  CropLaunch read;
  read.g = p.geometry;
  read.extrapolation_value = p.extrapolation_value;
  VGPU_ASSIGN_OR_RETURN(read.counts, CheckCropGeometry(read.g));
  return read;
}

absl::StatusOr<CropLaunch> ReadCropGradImageLaunch(const LaunchView& launch) {
  return ReadCropGradient(launch, 4);
}

absl::StatusOr<CropLaunch> ReadCropGradBoxesLaunch(const LaunchView& launch) {
  VGPU_ASSIGN_OR_RETURN(CropLaunch read, ReadCropGradient(launch, 5));
  if (read.g.method != CropMethod::kBilinear) {
    return absl::InvalidArgumentError("crop and resize box gradient: method must be bilinear");
  }
  return read;
}

absl::StatusOr<ColorLaunch<image_transform::AdjustContrastParams>> ReadAdjustContrastLaunch(
    const LaunchView& launch) {
  ColorLaunch<image_transform::AdjustContrastParams> read;
  VGPU_ASSIGN_OR_RETURN(read.p, launch.ReadParams<image_transform::AdjustContrastParams>(3));
  VGPU_ASSIGN_OR_RETURN(read.count, CheckedProduct({read.p.batch, read.p.pixels,
                                                    read.p.channels},
                                                   "contrast image"));
  return read;
}

absl::StatusOr<ColorLaunch<image_transform::AdjustHsvParams>> ReadAdjustHsvLaunch(
    const LaunchView& launch) {
  ColorLaunch<image_transform::AdjustHsvParams> read;
  VGPU_ASSIGN_OR_RETURN(read.p, launch.ReadParams<image_transform::AdjustHsvParams>(3));
  if (read.p.adjustment != image_transform::HsvAdjustment::kHue &&
      read.p.adjustment != image_transform::HsvAdjustment::kSaturation) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown HSV adjustment ", static_cast<uint32_t>(read.p.adjustment)));
  }
  VGPU_ASSIGN_OR_RETURN(read.count, CheckedProduct({read.p.pixels, 3}, "RGB image"));
  return read;
}

absl::StatusOr<ColorLaunch<image_transform::ColorSpaceParams>> ReadColorSpaceLaunch(
    const LaunchView& launch) {
  ColorLaunch<image_transform::ColorSpaceParams> read;
  VGPU_ASSIGN_OR_RETURN(read.p, launch.ReadParams<image_transform::ColorSpaceParams>(2));
  VGPU_ASSIGN_OR_RETURN(read.count, CheckedProduct({read.p.pixels, 3}, "RGB image"));
  return read;
}

absl::StatusOr<image_transform::NonMaxSuppressionParams> ReadNonMaxSuppressionLaunch(
    const LaunchView& launch) {
  VGPU_ASSIGN_OR_RETURN(image_transform::NonMaxSuppressionParams p,
                        launch.ReadParams<image_transform::NonMaxSuppressionParams>(4));
  if (p.num_boxes < 0 || p.num_boxes > kMaxImageExtent || p.max_output_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("non-max suppression: ", p.num_boxes,
                                                   " boxes, at most ", p.max_output_size));
  }
  return p;
}

}  // namespace vgpu::image_transform_launch
