// The image resize family's launch reader (see image_resize_launch.h).
#include "plugin/backend/launch/image_resize_launch.h"

#include "absl/strings/str_cat.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/image_resize.h"

namespace vgpu::image_resize_launch {

absl::StatusOr<ResizeGeometry> ReadResizeGeometry(ParamReader& reader) {
  ResizeGeometry g;
  for (int64_t* field : {&g.batch, &g.channels, &g.image_height, &g.image_width,
                         &g.resized_height, &g.resized_width}) {
    VGPU_ASSIGN_OR_RETURN(*field, reader.Get<int64_t>());
  }
  VGPU_ASSIGN_OR_RETURN(uint32_t options, reader.Get<uint32_t>());
  if ((options & ~(image_resize::kAlignCorners | image_resize::kHalfPixelCenters)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("image resize: unknown options ", options));
  }
  g.align_corners = (options & image_resize::kAlignCorners) != 0;
  g.half_pixel_centers = (options & image_resize::kHalfPixelCenters) != 0;
  VGPU_ASSIGN_OR_RETURN(g.image_count,
                        CheckedProduct({g.batch, g.image_height, g.image_width, g.channels},
                                       "image resize: the image"));
  VGPU_ASSIGN_OR_RETURN(g.resized_count,
                        CheckedProduct({g.batch, g.resized_height, g.resized_width, g.channels},
                                       "image resize: the resized image"));
  return g;
}

absl::Status RejectAlignedHalfPixel(const ResizeGeometry& g) {
  if (g.align_corners && g.half_pixel_centers) {
    return absl::InvalidArgumentError(
        "image resize: align_corners and half_pixel_centers are both set");
  }
  return absl::OkStatus();
}

absl::Status RequireImagePixels(const ResizeGeometry& g) {
  if (g.image_height < 1 || g.image_width < 1) {
    return absl::InvalidArgumentError("image resize: the image has no pixels");
  }
  return absl::OkStatus();
}

}  // namespace vgpu::image_resize_launch
