// Kernel ids and launch layouts of the image transform family (ids 1240-1299): projective
// transforms (the Keras augmentation layers' rotations, zooms, translations and shears),
// crop-and-resize with its two gradients, non-max suppression, and the colour adjustments
// (contrast, hue, saturation, RGB <-> HSV). On a GPU these are custom kernels, not library
// calls, so they launch with a parameter block only (no descriptors): a fixed struct below.
//
// Images are NHWC, dense and row-major. Every kernel validates its struct (dtype, non-negative
// extents whose products stay within kMaxLaunchElements) and the sizes of its buffers, and
// never trusts a value it reads from a buffer (a box, a box index, a coordinate) to be in range.
// Floating-point arithmetic is float32 whatever the element type (as TensorFlow's kernels),
// except RGB <-> HSV, which computes in the element type.
#ifndef VGPU_PROTOCOL_KERNELS_IMAGE_TRANSFORM_H_
#define VGPU_PROTOCOL_KERNELS_IMAGE_TRANSFORM_H_

#include <cstdint>

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::image_transform {

// --- Projective transform (ImageProjectiveTransformV2/V3) -----------------------------------

enum class Interpolation : uint32_t { kNearest = 0, kBilinear = 1 };

// Where a sample outside the input image reads (values are wire format). With len the input's
// extent along an axis and c the sampled coordinate:
//   kReflect   c mirrored about the edges, the edge pixel repeated: [dcba|abcd|dcba]
//   kWrap      c wrapped around: [abcd|abcd|abcd]
//   kConstant  c unchanged; a pixel outside the image reads fill_value
//   kNearest   c clamped to [0, len - 1]
enum class FillMode : uint32_t { kReflect = 0, kWrap = 1, kConstant = 2, kNearest = 3 };

// buffers: [images, transforms, output]; params: ProjectiveTransformParams.
//   images      [batch, in_height, in_width, channels] of dtype
//   transforms  [transform_rows, 8] float32, transform_rows 1 (one for every image) or batch
//   output      [batch, out_height, out_width, channels] of dtype
// For output pixel (x, y) of image b with transform (a0 .. a7): k = a6 x + a7 y + 1; k == 0
// gives fill_value, else the input is sampled at ((a0 x + a1 y + a2) / k, (a3 x + a4 y + a5) / k)
// mapped by fill_mode, by interpolation (nearest: rounded half away from zero; bilinear: the
// four neighbours, those outside the image reading fill_value). Integer results are converted
// from float32 with saturation, NaN giving 0 (as a GPU converts).
inline constexpr KernelId kProjectiveTransform = KernelId{1240};

struct ProjectiveTransformParams {
  DType dtype = DType::kFloat32;  // uint8, int32, int64, float16, bfloat16, float32, float64
  Interpolation interpolation = Interpolation::kBilinear;
  FillMode fill_mode = FillMode::kConstant;
  float fill_value = 0;  // converted to dtype as integer results are
  int64_t batch = 0;
  int64_t in_height = 0;
  int64_t in_width = 0;
  int64_t channels = 0;
  int64_t out_height = 0;
  int64_t out_width = 0;
  int64_t transform_rows = 1;
};

// --- Crop and resize ------------------------------------------------------------------------

enum class CropMethod : uint32_t { kBilinear = 0, kNearest = 1 };

// The geometry every crop-and-resize kernel shares. A box (y1, x1, y2, x2) of image
// box_index[b] is sampled at crop_height x crop_width points: with H = image_height - 1,
//   in_y(y) = y1 H + y ((y2 - y1) H / (crop_height - 1))   (crop_height > 1)
//           = 0.5 (y1 + y2) H                              (crop_height == 1)
// and likewise in_x; a point outside [0, H] x [0, W] (or not a number) is extrapolated.
// box_index values outside [0, batch) fail the kernel (the op kernel checks them first).
struct CropGeometry {
  DType dtype = DType::kFloat32;  // of the image (and of the image gradient)
  CropMethod method = CropMethod::kBilinear;
  int64_t batch = 0;
  int64_t image_height = 0;  // > 0
  int64_t image_width = 0;   // > 0
  int64_t depth = 0;
  int64_t num_boxes = 0;
  int64_t crop_height = 0;   // > 0
  int64_t crop_width = 0;    // > 0
};

// buffers: [image, boxes, box_index, crops]; params: CropAndResizeParams.
//   image [batch, image_height, image_width, depth] of dtype (float16, float32, float64)
//   boxes [num_boxes, 4] float32; box_index [num_boxes] int32
//   crops [num_boxes, crop_height, crop_width, depth] float32: bilinear interpolation of the
//   four neighbours, or the nearest pixel; extrapolation_value where extrapolated.
inline constexpr KernelId kCropAndResize = KernelId{1241};

struct CropAndResizeParams {
  CropGeometry geometry;
  float extrapolation_value = 0;
  uint32_t reserved = 0;
};

// buffers: [grads, boxes, box_index, grads_image]; params: CropGeometry.
//   grads [num_boxes, crop_height, crop_width, depth] float32
//   grads_image [batch, image_height, image_width, depth] of dtype: zero, plus every sampled
//   point's gradient spread over the pixels it read (bilinear weights, or the nearest pixel),
//   accumulated in dtype in box, row, column order (deterministic).
inline constexpr KernelId kCropAndResizeGradImage = KernelId{1242};

// buffers: [grads, image, boxes, box_index, grads_boxes]; params: CropGeometry (method
// bilinear).
//   grads_boxes [num_boxes, 4] float32: d(crops)/d(y1, x1, y2, x2) contracted with grads,
//   accumulated in row, column, channel order per box.
inline constexpr KernelId kCropAndResizeGradBoxes = KernelId{1243};

// --- Non-max suppression (NonMaxSuppressionV2/V3/V4, float32) -------------------------------

// buffers: [boxes, scores, selected, count]; params: NonMaxSuppressionParams.
//   boxes [num_boxes, 4] float32 (two corners in any order), scores [num_boxes] float32
//   selected [num_boxes] int32: the first `count` entries are the selected box indices
//   count [1] int32
// Candidates are the boxes scoring above score_threshold, taken by descending score (the lower
// index first among equal scores); a candidate is selected unless its intersection over union
// with an already selected box is above iou_threshold (or not a number); selection stops at
// max_output_size boxes.
inline constexpr KernelId kNonMaxSuppression = KernelId{1250};

struct NonMaxSuppressionParams {
  int64_t num_boxes = 0;
  int64_t max_output_size = 0;
  float iou_threshold = 0.5f;
  float score_threshold = 0;
};

// --- Colour (AdjustContrastv2, AdjustHue, AdjustSaturation, RGBToHSV, HSVToRGB) -------------

// buffers: [images, contrast_factor, output]; params: AdjustContrastParams.
//   images, output [batch, pixels, channels] of dtype (float16, float32); contrast_factor [1]
//   float32. mean[b, c] = the float32 mean of images[b, :, c] (summed by halving the pixel
//   range, as TensorFlow's CPU kernel); output = mean + (images - mean) * factor. For float16
//   the mean is rounded to float16 and the difference taken in float16, as on TensorFlow's GPU.
inline constexpr KernelId kAdjustContrast = KernelId{1260};

struct AdjustContrastParams {
  DType dtype = DType::kFloat32;
  uint32_t reserved = 0;
  int64_t batch = 0;
  int64_t pixels = 0;  // height * width
  int64_t channels = 0;
};

enum class HsvAdjustment : uint32_t { kHue = 0, kSaturation = 1 };

// buffers: [images, amount, output]; params: AdjustHsvParams.
//   images, output [pixels, 3] RGB of dtype (float16, float32); amount [1] float32: the hue
//   delta (a fraction of the colour circle) or the saturation scale. Computed in float32:
//   kHue rotates the hue of each pixel keeping its largest and smallest channel (a pixel whose
//   largest channel is <= 0 comes back grey at that value, as on TensorFlow's GPU); kSaturation
//   scales the saturation, clamped to [0, 1], keeping hue and value.
inline constexpr KernelId kAdjustHsv = KernelId{1261};

struct AdjustHsvParams {
  DType dtype = DType::kFloat32;
  HsvAdjustment adjustment = HsvAdjustment::kHue;
  int64_t pixels = 0;
};

// buffers: [x, y]; params: ColorSpaceParams. x, y [pixels, 3] of dtype (float16, bfloat16,
// float32, float64), computed in dtype as TensorFlow's kernels (each operation rounded).
//   kRgbToHsv: v = max(r, g, b), s = (v - min) / v (0 where v <= 0), h in [0, 1) from the
//   channel holding the maximum (0 where max == min).
//   kHsvToRgb: the inverse, each channel's weight a clamped piecewise-linear function of 6 h
//   (h is not reduced modulo 1 first).
inline constexpr KernelId kRgbToHsv = KernelId{1262};
inline constexpr KernelId kHsvToRgb = KernelId{1263};

struct ColorSpaceParams {
  DType dtype = DType::kFloat32;
  uint32_t reserved = 0;
  int64_t pixels = 0;
};

}  // namespace vgpu::image_transform

#endif  // VGPU_PROTOCOL_KERNELS_IMAGE_TRANSFORM_H_
