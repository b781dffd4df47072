// The image resize family's launches (protocol/kernels/image_resize.h): the geometry every
// kernel's parameter block starts with (batch, channels, image and resized sizes, the
// align-corners / half-pixel-centres options), read and validated once with checked element
// counts, and the family's shape rules. Only the CPU executor has kernels for this family.
#ifndef VGPU_BACKEND_LAUNCH_IMAGE_RESIZE_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_IMAGE_RESIZE_LAUNCH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/protocol/launch_params.h"

namespace vgpu::image_resize_launch {

// The validated geometry every kernel of the family starts its parameter block with.
// The validated geometry every kernel of the family starts its parameter block with.
struct ResizeGeometry {
  int64_t batch = 0, channels = 0;
  int64_t image_height = 0, image_width = 0;
  int64_t resized_height = 0, resized_width = 0;
  bool align_corners = false, half_pixel_centers = false;
  int64_t image_count = 0, resized_count = 0;  // elements of each side
};

// Reads the geometry from `reader` (advancing it): six int64 sizes and the uint32 options;
// InvalidArgument for unknown options or element counts past kMaxLaunchElements (a negative
// size included).
absl::StatusOr<ResizeGeometry> ReadResizeGeometry(ParamReader& reader);

// InvalidArgument when both align_corners and half_pixel_centers are set (every kernel but
// the nearest-neighbour gradient refuses the pair, as TensorFlow does).
absl::Status RejectAlignedHalfPixel(const ResizeGeometry& g);

// A forward kernel with a non-empty output reads pixels: InvalidArgument unless the image has
// some.
absl::Status RequireImagePixels(const ResizeGeometry& g);

}  // namespace vgpu::image_resize_launch

#endif  // VGPU_BACKEND_LAUNCH_IMAGE_RESIZE_LAUNCH_H_
