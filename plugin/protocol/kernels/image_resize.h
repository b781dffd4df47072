// Kernel ids and launch layouts of the image resize family (ids 1200-1239): bilinear, nearest
// neighbour, bicubic and area resizing of NHWC images, the separable-kernel ScaleAndTranslate,
// and the gradients of those TensorFlow differentiates. No descriptors: every kernel launches
// with a parameter block only.
//
// Every kernel of the family starts its parameter block with one type field (documented per
// kernel) followed by the same geometry:
//   int64 batch, int64 channels,
//   int64 image_height, int64 image_width       the image before resizing
//   int64 resized_height, int64 resized_width   the image after resizing
//   uint32 options                              bit 0 align_corners, bit 1 half_pixel_centers
// A forward kernel reads the image ([batch, image_height, image_width, channels]) and writes
// the resized image ([batch, resized_height, resized_width, channels]); a gradient kernel reads
// the gradient of the resized image and writes the gradient of the image. Unused option bits
// must be 0. The executor derives every scale from this geometry (TensorFlow's
// CalculateResizeScale along each dimension: (image - 1) / (resized - 1) with align_corners when
// both exceed 1, image / resized otherwise, in float) and clamps every source index it computes
// into the image, so no launch reads or writes outside its buffers.
#ifndef VGPU_PROTOCOL_KERNELS_IMAGE_RESIZE_H_
#define VGPU_PROTOCOL_KERNELS_IMAGE_RESIZE_H_

#include <cstdint>

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::image_resize {

// The element type of an image a forward kernel reads (every type TensorFlow's resize ops take).
// Values are part of the wire format.
enum class PixelType : uint32_t {
  kUInt8 = 1,
  kInt8 = 2,
  kUInt16 = 3,
  kInt16 = 4,
  kInt32 = 5,
  kInt64 = 6,
  kFloat16 = 7,
  kBFloat16 = 8,
  kFloat32 = 9,
  kFloat64 = 10,
};

// The options bits of the geometry.
inline constexpr uint32_t kAlignCorners = 1u << 0;
inline constexpr uint32_t kHalfPixelCenters = 1u << 1;

// Bilinear (ids 1200-1201). With half_pixel_centers the source coordinate of output index i is
// (i + 0.5) * scale - 0.5, else i * scale; its floor and ceiling (clamped into the image) are
// the two taps and its fractional part the weight. When the image keeps its size the output is
// the image converted to float.

// buffers: [image (PixelType), resized (float32)]; params: uint32 PixelType, geometry.
// align_corners and half_pixel_centers are not both set.
inline constexpr KernelId kResizeBilinear = KernelId{1200};

// buffers: [resized gradient (float32), image gradient (T)]; params: uint32 DType T (floating),
// geometry (align_corners and half_pixel_centers not both set). Each resized pixel's gradient
// goes to its four taps with the forward weights; the sums are formed in TensorFlow's CPU
// order (resized rows, then columns, then taps top-left, top-right, bottom-left, bottom-right),
// in float (double for T = float64), then converted to T.
inline constexpr KernelId kResizeBilinearGrad = KernelId{1201};

// Nearest neighbour (ids 1202-1203). Source index of output index i: with half_pixel_centers
// floor((i + 0.5) * scale), else round(i * scale) (halves away from zero) with align_corners and
// floor(i * scale) without; clamped into the image. (With both flags, only possible for the
// gradient, the index is floor((i + 0.5) * scale) as on TensorFlow's CUDA kernel.)

// buffers: [image, resized]; params: uint32 element_size (1, 2, 4 or 8), geometry
// (align_corners and half_pixel_centers not both set). Copies each source pixel's channels.
inline constexpr KernelId kResizeNearestNeighbor = KernelId{1202};

// buffers: [resized gradient (T), image gradient (T)]; params: uint32 DType T (floating),
// geometry. Each image pixel sums, in T and in resized row-major order, the gradients of the
// resized pixels that copied it.
inline constexpr KernelId kResizeNearestNeighborGrad = KernelId{1203};

// Bicubic (ids 1204-1205). Four taps per dimension around floor(x) of the source coordinate x
// (half_pixel_centers: (i + 0.5) * scale - 0.5, else i * scale), weighted by a 1024-entry table
// of Keys' cubic kernel indexed by the rounded fraction: A = -0.5 with half_pixel_centers, where
// taps outside the image get weight 0 and the rest are renormalised to sum 1; A = -0.75
// otherwise, where taps are clamped into the image. Rows are interpolated first, then columns.

// buffers: [image (PixelType), resized (float32)]; params: uint32 PixelType, geometry
// (align_corners and half_pixel_centers not both set).
inline constexpr KernelId kResizeBicubic = KernelId{1204};

// buffers: [resized gradient (float32), image gradient (T)]; params: uint32 DType T (float32 or
// float64), geometry as kResizeBicubic. The transpose of the forward weights, summed in T in
// TensorFlow's CPU order (resized rows, columns, tap rows, tap columns).
inline constexpr KernelId kResizeBicubicGrad = KernelId{1205};

// buffers: [image (PixelType), resized (float32)]; params: uint32 PixelType, geometry
// (half_pixel_centers 0). Each output pixel averages the image area it covers: source cells
// [i * scale, (i + 1) * scale) per dimension, partial cells weighted by their covered fraction,
// indices clamped into the image, the sum scaled by 1 / (height_scale * width_scale).
inline constexpr KernelId kResizeArea = KernelId{1206};

// ScaleAndTranslate (ids 1207-1208): separable resampling with one of TensorFlow's sampling
// kernels. Along a dimension of input size n, output index i samples s = (i + 0.5) / scale -
// translation / scale; outside [0, n] it is 0, else the kernel (stretched by 1 / scale when
// antialias and scale < 1) weighs the input pixels whose centres lie within its radius, the
// weights normalised to sum 1. Rows are resampled first, then columns.
enum class SamplingKernel : uint32_t {
  kLanczos1 = 0,
  kLanczos3 = 1,
  kLanczos5 = 2,
  kGaussian = 3,   // radius 1.5, sigma 0.5
  kBox = 4,
  kTriangle = 5,
  kKeysCubic = 6,
  kMitchellCubic = 7,
};

// buffers: [image (PixelType), resized (float32)]; params: uint32 PixelType, geometry (options
// 0), uint32 SamplingKernel, uint32 antialias (0 or 1), float row_scale, float col_scale,
// float row_translation, float col_translation (scales > 0; any translation, a NaN one
// sampling nothing).
inline constexpr KernelId kScaleAndTranslate = KernelId{1207};

// buffers: [resized gradient (float32), image gradient (float32)]; params: uint32 DType
// (float32), then as kScaleAndTranslate. The transpose of the forward weights, applied rows
// first, then columns, as TensorFlow's CPU kernel does.
inline constexpr KernelId kScaleAndTranslateGrad = KernelId{1208};

}  // namespace vgpu::image_resize

#endif  // VGPU_PROTOCOL_KERNELS_IMAGE_RESIZE_H_
