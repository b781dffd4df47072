// TensorFlow op kernels for image resizing on the virtual GPU: ResizeBilinear,
// ResizeNearestNeighbor, ResizeBicubic, ResizeArea and ScaleAndTranslate, with ResizeBilinearGrad,
// ResizeNearestNeighborGrad, ResizeBicubicGrad and ScaleAndTranslateGrad (kernel ids in
// protocol/kernels/image_resize.h). Images are NHWC. Each kernel checks its inputs with
// TensorFlow's conditions, order and messages (those of ImageResizerState and the ops' own
// checks; `size`, `scale` and `translation` are host-memory tensors read here), allocates the
// output and launches one kernel; an empty output launches nothing.
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/protocol/kernels/image_resize.h"

namespace vgpu {
namespace {

using image_resize::PixelType;
using image_resize::SamplingKernel;
using Dims = std::vector<int64_t>;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// TensorFlow's FastBoundsCheck(value, int32 max): 0 <= value < 2^31 - 1.
bool BelowInt32Max(int64_t value) { return value >= 0 && value < kInt32Max; }

// TensorFlow's CalculateResizeScale.
float ResizeScale(int64_t image_size, int64_t resized_size, bool align_corners) {
  return (align_corners && image_size > 1 && resized_size > 1)
             ? static_cast<float>(image_size - 1) / static_cast<float>(resized_size - 1)
             : static_cast<float>(image_size) / static_cast<float>(resized_size);
}

absl::StatusOr<PixelType> PixelTypeOf(TF_DataType dtype) {
  switch (dtype) {
    case TF_UINT8: return PixelType::kUInt8;
    case TF_INT8: return PixelType::kInt8;
    case TF_UINT16: return PixelType::kUInt16;
    case TF_INT16: return PixelType::kInt16;
    case TF_INT32: return PixelType::kInt32;
    case TF_INT64: return PixelType::kInt64;
    case TF_HALF: return PixelType::kFloat16;
    case TF_BFLOAT16: return PixelType::kBFloat16;
    case TF_FLOAT: return PixelType::kFloat32;
    case TF_DOUBLE: return PixelType::kFloat64;
    default:
      return absl::InvalidArgumentError(absl::StrCat("no image kernel for dtype ", dtype));
  }
}

// What every kernel of the family is told (protocol/kernels/image_resize.h: the geometry).
struct ResizeGeometry {
  int64_t batch = 0, channels = 0;
  int64_t image_height = 0, image_width = 0;
  int64_t resized_height = 0, resized_width = 0;
  bool align_corners = false, half_pixel_centers = false;

  // A geometry whose images (`of_images`) or resized images have the NHWC shape `dims` (the
  // other size left 0).
  static ResizeGeometry Of(const Dims& dims, bool of_images) {
    ResizeGeometry g;
    g.batch = dims[0];
    g.channels = dims[3];
    (of_images ? g.image_height : g.resized_height) = dims[1];
    (of_images ? g.image_width : g.resized_width) = dims[2];
    return g;
  }
  static ResizeGeometry OfImages(const Dims& dims) { return Of(dims, true); }
  static ResizeGeometry OfResized(const Dims& dims) { return Of(dims, false); }

  Dims image_dims() const { return {batch, image_height, image_width, channels}; }
  Dims resized_dims() const { return {batch, resized_height, resized_width, channels}; }
};

// The parameter block: the kernel's type field, then the geometry.
ParamBlock GeometryParams(uint32_t type_field, const ResizeGeometry& g) {
  ParamBlock params;
  uint32_t options = 0;
  if (g.align_corners) options |= image_resize::kAlignCorners;
  if (g.half_pixel_centers) options |= image_resize::kHalfPixelCenters;
  ParamWriter(&params)
      .Put(type_field)
      .Put(g.batch)
      .Put(g.channels)
      .Put(g.image_height)
      .Put(g.image_width)
      .Put(g.resized_height)
      .Put(g.resized_width)
      .Put(options);
  return params;
}

// Launches `kernel` from `input` into `output` with the parameter block `params`.
absl::Status LaunchResize(OpContext& context, KernelId kernel, const TF_Tensor* input,
                          const TF_Tensor* output, const ParamBlock& params) {
  return KernelLaunch(context).Buffer(input).Buffer(output).Params(params).Run(kernel);
}

absl::Status CheckFlags(bool align_corners, bool half_pixel_centers) {
  if (half_pixel_centers && align_corners) {
    return absl::InvalidArgumentError(
        "If half_pixel_centers is True, align_corners must be False.");
  }
  return absl::OkStatus();
}

// The two values of a host-memory [2] tensor `index` (`name` is how TensorFlow's messages call
// it), after TensorFlow's checks of its shape.
absl::StatusOr<std::array<int64_t, 2>> HostIntegerPair(OpContext& context, int index,
                                                       const char* name) {
  VGPU_ASSIGN_OR_RETURN(TensorPtr tensor, context.Input(index));
  VGPU_ASSIGN_OR_RETURN(const Dims dims,
                        ShapeOfRank(tensor.get(), 1, absl::StrCat(name, " must be 1-dimensional")));
  if (dims[0] != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must have two elements", ShapeString(dims)));
  }
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> values, context.HostIntegers(index));
  return std::array<int64_t, 2>{values[0], values[1]};
}

// The same for ScaleAndTranslate's float [2] `scale` and `translation` (TensorFlow's GetValues).
absl::StatusOr<std::array<float, 2>> HostFloatPair(OpContext& context, int index) {
  VGPU_ASSIGN_OR_RETURN(TensorPtr tensor, context.Input(index));
  VGPU_ASSIGN_OR_RETURN(const Dims dims, ShapeOfRank(tensor.get(), 1, "t must be 1-dimensional"));
  if (dims[0] != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("t must have two elements", ShapeString(dims)));
  }
  if (TF_TensorType(tensor.get()) != TF_FLOAT) {
    return absl::InvalidArgumentError(absl::StrCat("input ", index, " must be float"));
  }
  const float* values = static_cast<const float*>(TF_TensorData(tensor.get()));
  return std::array<float, 2>{values[0], values[1]};
}

// How both validations below start: the flags, then `tensor` of 4 dimensions (else
// InvalidArgument `rank_message` and its shape), the images (`of_images`) or the resized images
// of the geometry.
absl::StatusOr<ResizeGeometry> FlaggedGeometryOf(const TF_Tensor* tensor, bool of_images,
                                                 const char* rank_message, bool align_corners,
                                                 bool half_pixel_centers) {
  VGPU_RETURN_IF_ERROR(CheckFlags(align_corners, half_pixel_centers));
  VGPU_ASSIGN_OR_RETURN(const Dims dims, ShapeOfRank(tensor, 4, rank_message));
  ResizeGeometry g = ResizeGeometry::Of(dims, of_images);
  g.align_corners = align_corners;
  g.half_pixel_centers = half_pixel_centers;
  return g;
}

// TensorFlow's ImageResizerState::ValidateAndCalculateOutputSize for input 0 (images) and
// input 1 (size), in its order and words.
absl::StatusOr<ResizeGeometry> ValidateResize(OpContext& context, const TF_Tensor* images,
                                              bool align_corners, bool half_pixel_centers) {
  VGPU_ASSIGN_OR_RETURN(ResizeGeometry g,
                        FlaggedGeometryOf(images, /*of_images=*/true,
                                          "input must be 4-dimensional", align_corners,
                                          half_pixel_centers));
  if (g.channels <= 0) {
    return absl::InvalidArgumentError("image must have at least one channel");
  }
  if (g.image_height <= 0 || g.image_width <= 0) {
    return absl::InvalidArgumentError("input image must be of non-zero size");
  }
  if (!BelowInt32Max(g.image_height) || !BelowInt32Max(g.image_width)) {
    return absl::InvalidArgumentError("input sizes must be between 0 and max int32");
  }
  VGPU_ASSIGN_OR_RETURN(auto size, HostIntegerPair(context, 1, "shape_t"));
  g.resized_height = size[0];
  g.resized_width = size[1];
  if (g.resized_height <= 0 || g.resized_width <= 0) {
    return absl::InvalidArgumentError("output dimensions must be positive");
  }
  const float height_scale = ResizeScale(g.image_height, g.resized_height, align_corners);
  const float width_scale = ResizeScale(g.image_width, g.resized_width, align_corners);
  if (!(std::ceil(static_cast<float>(g.resized_height - 1) * height_scale) <=
        static_cast<float>(std::numeric_limits<int64_t>::max()))) {
    return absl::InvalidArgumentError("input image height scale would cause an overflow");
  }
  if (!(std::ceil(static_cast<float>(g.resized_width - 1) * width_scale) <=
        static_cast<float>(std::numeric_limits<int>::max()))) {
    return absl::InvalidArgumentError("input image width scale would cause an overflow");
  }
  return g;
}

// TensorFlow's ImageResizerGradientState: input 0 is the gradient of the resized image,
// input 1 the original image (only its shape is read).
absl::StatusOr<ResizeGeometry> ValidateResizeGrad(OpContext& context, const TF_Tensor* grads,
                                                  bool align_corners, bool half_pixel_centers) {
  VGPU_ASSIGN_OR_RETURN(ResizeGeometry g,
                        FlaggedGeometryOf(grads, /*of_images=*/false,
                                          "input_grad must be 4-dimensional", align_corners,
                                          half_pixel_centers));
  if (g.resized_height <= 0 || g.resized_width <= 0) {
    return absl::InvalidArgumentError("resized dimensions must be positive");
  }
  VGPU_ASSIGN_OR_RETURN(TensorPtr original, context.Input(1));
  VGPU_ASSIGN_OR_RETURN(const Dims original_dims,
                        ShapeOfRank(original.get(), 4, "original_image must be 4-dimensional"));
  g.image_height = original_dims[1];
  g.image_width = original_dims[2];
  if (g.image_height <= 0 || g.image_width <= 0) {
    return absl::InvalidArgumentError("original dimensions must be positive");
  }
  if (!BelowInt32Max(g.image_height) || !BelowInt32Max(g.image_width)) {
    return absl::InvalidArgumentError("original sizes must be between 0 and max int32");
  }
  return g;
}

bool IsEmpty(const Dims& dims) { return NumElements(dims) == 0; }

enum class ResizeMethod { kBilinear, kNearestNeighbor, kBicubic, kArea };

// ResizeBilinear, ResizeNearestNeighbor, ResizeBicubic and ResizeArea.
// The attributes of the resize ops: align_corners and half_pixel_centers.
struct ResizeFlags {
  bool align_corners = false;
  bool half_pixel_centers = false;
};

// Reads them; an op without half_pixel_centers (ResizeArea: !kHalfPixelCenters) has it false.
template <bool kHalfPixelCenters = true>
absl::StatusOr<ResizeFlags> ReadResizeFlags(OpConstruction& construction) {
  ResizeFlags flags;
  VGPU_ASSIGN_OR_RETURN(flags.align_corners, construction.Bool("align_corners"));
  if constexpr (kHalfPixelCenters) {
    VGPU_ASSIGN_OR_RETURN(flags.half_pixel_centers, construction.Bool("half_pixel_centers"));
  }
  return flags;
}

template <ResizeMethod kMethod>
class ResizeOp
    : public WithAttributes<ResizeOp<kMethod>, ResizeFlags,
                            ReadResizeFlags<kMethod != ResizeMethod::kArea>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr images, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(
        ResizeGeometry g,
        ValidateResize(context, images.get(), this->attributes_.align_corners,
                       this->attributes_.half_pixel_centers));
    const TF_DataType dtype = TF_TensorType(images.get());
    const TF_DataType output_dtype = kMethod == ResizeMethod::kNearestNeighbor ? dtype : TF_FLOAT;
    const Dims output_dims = g.resized_dims();
    VGPU_ASSIGN_OR_RETURN(TensorPtr output,
                          context.AllocateOutput(0, output_dtype, output_dims));
    uint32_t type_field = 0;
    KernelId kernel{};
    if constexpr (kMethod == ResizeMethod::kNearestNeighbor) {
      if (g.image_height >= (1 << 24) || g.image_width >= (1 << 24)) {
        return absl::InvalidArgumentError(
            "nearest neighbor requires max height & width of 2^24");
      }
      type_field = static_cast<uint32_t>(TF_DataTypeSize(dtype));
      kernel = image_resize::kResizeNearestNeighbor;
    } else {
      VGPU_ASSIGN_OR_RETURN(PixelType pixel_type, PixelTypeOf(dtype));
      type_field = static_cast<uint32_t>(pixel_type);
      kernel = kMethod == ResizeMethod::kBilinear  ? image_resize::kResizeBilinear
               : kMethod == ResizeMethod::kBicubic ? image_resize::kResizeBicubic
                                                   : image_resize::kResizeArea;
    }
    if (IsEmpty(output_dims)) return absl::OkStatus();
    return LaunchResize(context, kernel, images.get(), output.get(),
                        GeometryParams(type_field, g));
  }
};

// The end of a resize gradient: allocates the gradient of the image, output 0 of `dtype` and
// `g`'s image shape, and unless it is empty launches `kernel` from `grads`.
absl::Status LaunchResizeGrad(OpContext& context, KernelId kernel, TF_DataType dtype,
                              const ResizeGeometry& g, const TF_Tensor* grads) {
  const Dims output_dims = g.image_dims();
  VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.AllocateOutput(0, dtype, output_dims));
  if (IsEmpty(output_dims)) return absl::OkStatus();
  VGPU_ASSIGN_OR_RETURN(DType device_dtype, DTypeOf(dtype));
  return LaunchResize(context, kernel, grads, output.get(),
                      GeometryParams(static_cast<uint32_t>(device_dtype), g));
}

// ResizeBilinearGrad and ResizeBicubicGrad: the gradient of the image, of the image's dtype
// (the node's T, its output's).
template <ResizeMethod kMethod>
class ResizeGradOp
    : public WithAttributes<ResizeGradOp<kMethod>, ResizeFlags, ReadResizeFlags<>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr grads, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(ResizeGeometry g,
                          ValidateResizeGrad(context, grads.get(),
                                             this->attributes_.align_corners,
                                             this->attributes_.half_pixel_centers));
    return LaunchResizeGrad(context,
                            kMethod == ResizeMethod::kBilinear
                                ? image_resize::kResizeBilinearGrad
                                : image_resize::kResizeBicubicGrad,
                            TF_ExpectedOutputDataType(context.raw(), 0), g, grads.get());
  }
};

// ResizeNearestNeighborGrad: TensorFlow checks only the shapes here (align_corners and
// half_pixel_centers may both be set; the index rule is then the CUDA kernel's, see the
// protocol header).
class ResizeNearestNeighborGradOp
    : public WithAttributes<ResizeNearestNeighborGradOp, ResizeFlags, ReadResizeFlags<>> {
 public:
  absl::Status Compute(OpContext& context) {
    // TensorFlow's GPU kernel refuses under op determinism (atomic adds); this one gathers in a
    // fixed order but refuses too, as code written for a GPU expects.
    VGPU_RETURN_IF_ERROR(OpContext::RefuseUnderOpDeterminism(
        "A deterministic GPU implementation of ResizeNearestNeighborGrad is not currently "
        "available."));
    VGPU_ASSIGN_OR_RETURN(TensorPtr grads, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(const Dims dims,
                          ShapeOfRank(grads.get(), 4, "input must be 4-dimensional"));
    VGPU_ASSIGN_OR_RETURN(auto size, HostIntegerPair(context, 1, "shape_t"));
    if (size[0] <= 0 || size[1] <= 0) {
      return absl::InvalidArgumentError("shape_t's elements must be positive");
    }
    ResizeGeometry g = ResizeGeometry::OfResized(dims);
    g.image_height = size[0];
    g.image_width = size[1];
    g.align_corners = attributes_.align_corners;
    g.half_pixel_centers = attributes_.half_pixel_centers;
    return LaunchResizeGrad(context, image_resize::kResizeNearestNeighborGrad,
                            TF_TensorType(grads.get()), g, grads.get());
  }
};

// The kernel_type attribute of ScaleAndTranslate(Grad), case-insensitive as in TensorFlow.
absl::StatusOr<SamplingKernel> SamplingKernelOf(OpConstruction& construction) {
  VGPU_ASSIGN_OR_RETURN(std::string name, construction.String("kernel_type"));
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "lanczos1") return SamplingKernel::kLanczos1;
  if (lower == "lanczos3") return SamplingKernel::kLanczos3;
  if (lower == "lanczos5") return SamplingKernel::kLanczos5;
  if (lower == "gaussian") return SamplingKernel::kGaussian;
  if (lower == "box") return SamplingKernel::kBox;
  if (lower == "triangle") return SamplingKernel::kTriangle;
  if (lower == "keyscubic") return SamplingKernel::kKeysCubic;
  if (lower == "mitchellcubic") return SamplingKernel::kMitchellCubic;
  return absl::InvalidArgumentError(absl::StrCat("Unrecognized kernel type: ", name));
}

// The attributes of ScaleAndTranslate(Grad): antialias and kernel_type.
struct SamplingAttributes {
  bool antialias = true;
  SamplingKernel kernel = SamplingKernel::kLanczos3;
};

absl::StatusOr<SamplingAttributes> ReadSamplingAttributes(OpConstruction& construction) {
  SamplingAttributes attributes;
  VGPU_ASSIGN_OR_RETURN(attributes.antialias, construction.Bool("antialias"));
  VGPU_ASSIGN_OR_RETURN(attributes.kernel, SamplingKernelOf(construction));
  return attributes;
}

// ScaleAndTranslate's inputs 2 and 3: row and column scales (both > 0) and translations.
struct Sampling {
  std::array<float, 2> scale, translation;
};

absl::StatusOr<Sampling> ReadSampling(OpContext& context) {
  Sampling sampling;
  VGPU_ASSIGN_OR_RETURN(sampling.scale, HostFloatPair(context, 2));
  if (!(sampling.scale[0] > 0 && sampling.scale[1] > 0)) {
    return absl::InvalidArgumentError("Scale must be greater than zero.");
  }
  VGPU_ASSIGN_OR_RETURN(sampling.translation, HostFloatPair(context, 3));
  return sampling;
}

ParamBlock SamplingParams(uint32_t type_field, const ResizeGeometry& g,
                          const SamplingAttributes& attributes, const Sampling& sampling) {
  ParamBlock params = GeometryParams(type_field, g);
  ParamWriter(&params)
      .Put(static_cast<uint32_t>(attributes.kernel))
      .Put(static_cast<uint32_t>(attributes.antialias ? 1 : 0))
      .Put(sampling.scale[0])
      .Put(sampling.scale[1])
      .Put(sampling.translation[0])
      .Put(sampling.translation[1]);
  return params;
}

class ScaleAndTranslateOp
    : public WithAttributes<ScaleAndTranslateOp, SamplingAttributes, ReadSamplingAttributes> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr images, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(const Dims dims,
                          ShapeOfRank(images.get(), 4, "input must be 4-dimensional"));
    VGPU_ASSIGN_OR_RETURN(auto size, HostIntegerPair(context, 1, "output_shape_t"));
    if (!BelowInt32Max(dims[1]) || !BelowInt32Max(dims[2])) {
      return absl::InvalidArgumentError("input sizes must be between 0 and max int32");
    }
    ResizeGeometry g = ResizeGeometry::OfImages(dims);
    g.resized_height = size[0];
    g.resized_width = size[1];
    if (g.resized_height <= 0 || g.resized_width <= 0) {
      return absl::InvalidArgumentError("output dimensions must be positive");
    }
    if (g.channels <= 0) {
      return absl::InvalidArgumentError("image must have at least one channel");
    }
    if (g.image_height <= 0 || g.image_width <= 0) {
      return absl::InvalidArgumentError("input image must be of non-zero size");
    }
    VGPU_ASSIGN_OR_RETURN(Sampling sampling, ReadSampling(context));
    const Dims output_dims = g.resized_dims();
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.AllocateOutput(0, TF_FLOAT, output_dims));
    if (IsEmpty(output_dims)) return absl::OkStatus();
    VGPU_ASSIGN_OR_RETURN(PixelType pixel_type, PixelTypeOf(TF_TensorType(images.get())));
    return LaunchResize(
        context, image_resize::kScaleAndTranslate, images.get(), output.get(),
        SamplingParams(static_cast<uint32_t>(pixel_type), g, attributes_, sampling));
  }
};

class ScaleAndTranslateGradOp
    : public WithAttributes<ScaleAndTranslateGradOp, SamplingAttributes, ReadSamplingAttributes> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [grads, original] = inputs;
    VGPU_ASSIGN_OR_RETURN(const Dims dims,
                          ShapeOfRank(grads.get(), 4, "input_grad must be 4-dimensional"));
    VGPU_ASSIGN_OR_RETURN(const Dims original_dims,
                          ShapeOfRank(original.get(), 4, "original_image must be 4-dimensional"));
    ResizeGeometry g = ResizeGeometry::OfResized(dims);
    g.image_height = original_dims[1];
    g.image_width = original_dims[2];
    if (!BelowInt32Max(g.image_height) || !BelowInt32Max(g.image_width)) {
      return absl::InvalidArgumentError("original sizes must be between 0 and max int32");
    }
    const Dims output_dims = g.image_dims();
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.AllocateOutput(0, TF_FLOAT, output_dims));
    VGPU_ASSIGN_OR_RETURN(Sampling sampling, ReadSampling(context));
    if (IsEmpty(output_dims)) return absl::OkStatus();
    return LaunchResize(context, image_resize::kScaleAndTranslateGrad, grads.get(), output.get(),
                        SamplingParams(static_cast<uint32_t>(DType::kFloat32), g, attributes_,
                                       sampling));
  }
};

}  // namespace

// Registers the family's kernels for `device_type` and documents its ops in the catalog.
void RegisterImageResizeOps(const char* device_type) {
  // TensorFlow's GPU build registers the floating types (ResizeBilinear, ResizeNearestNeighbor
  // and their gradients); the integer image types, and ResizeBicubic, ResizeArea and
  // ScaleAndTranslate, which TensorFlow runs on the CPU only, are registered here too so that
  // tf.image.resize and Keras' Resizing / UpSampling2D stay on the device.
  const std::initializer_list<TF_DataType> kFloating = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                        TF_DOUBLE};
  const std::initializer_list<TF_DataType> kImageTypes = {
      TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE, TF_UINT8,
      TF_INT8,  TF_UINT16, TF_INT16,  TF_INT32,  TF_INT64};
  for (TF_DataType dtype : kImageTypes) {
    RegisterKernel<ResizeOp<ResizeMethod::kBilinear>>("ResizeBilinear", device_type,
                                                      {{"T", dtype}}, {"size"});
    RegisterKernel<ResizeOp<ResizeMethod::kNearestNeighbor>>("ResizeNearestNeighbor",
                                                             device_type, {{"T", dtype}},
                                                             {"size"});
    RegisterKernel<ResizeOp<ResizeMethod::kBicubic>>("ResizeBicubic", device_type,
                                                     {{"T", dtype}}, {"size"});
    RegisterKernel<ResizeOp<ResizeMethod::kArea>>("ResizeArea", device_type, {{"T", dtype}},
                                                  {"size"});
    RegisterKernel<ScaleAndTranslateOp>("ScaleAndTranslate", device_type, {{"T", dtype}},
                                        {"size", "scale", "translation"});
  }
  for (TF_DataType dtype : kFloating) {
    RegisterKernel<ResizeGradOp<ResizeMethod::kBilinear>>("ResizeBilinearGrad", device_type,
                                                          {{"T", dtype}});
    RegisterKernel<ResizeNearestNeighborGradOp>("ResizeNearestNeighborGrad", device_type,
                                                {{"T", dtype}}, {"size"});
  }
  // The op definitions allow no other dtypes for these gradients.
  for (TF_DataType dtype : {TF_FLOAT, TF_DOUBLE}) {
    RegisterKernel<ResizeGradOp<ResizeMethod::kBicubic>>("ResizeBicubicGrad", device_type,
                                                         {{"T", dtype}});
  }
  RegisterKernel<ScaleAndTranslateGradOp>("ScaleAndTranslateGrad", device_type,
                                          {{"T", TF_FLOAT}}, {"scale", "translation"});

  DocumentOp("ResizeBilinear", "NHWC",
             "Output float32 for every input dtype; align_corners, half_pixel_centers; size in "
             "host memory. Integer image dtypes too (TensorFlow's GPU build: floating only).");
  DocumentOp("ResizeBilinearGrad", "NHWC",
             "Sums in TensorFlow's CPU order, in float32 (float64 for a float64 image), "
             "deterministic.");
  DocumentOp("ResizeNearestNeighbor", "NHWC",
             "TensorFlow's CPU index rules (round with align_corners, floor otherwise); size in "
             "host memory. Integer image dtypes too (TensorFlow's GPU build: floating only).");
  DocumentOp("ResizeNearestNeighborGrad", "NHWC",
             "Sums in TensorFlow's CPU order, deterministic, yet Unimplemented while op "
             "determinism is required, as TensorFlow's GPU kernel; size in host memory. With "
             "align_corners and half_pixel_centers both set, indices are floor((i + 0.5) * "
             "scale) as on TensorFlow's CUDA kernel (its CPU kernel rounds).");
  DocumentOp("ResizeBicubic", "NHWC",
             "Not on TensorFlow's GPU build. Keys cubic, A = -0.75 (legacy) or -0.5 with "
             "half_pixel_centers (taps outside the image dropped and renormalised); output "
             "float32; size in host memory.");
  DocumentOp("ResizeBicubicGrad", "NHWC",
             "Not on TensorFlow's GPU build. float32 and float64 (the op's dtypes); sums in "
             "TensorFlow's CPU order, deterministic.");
  DocumentOp("ResizeArea", "NHWC",
             "Not on TensorFlow's GPU build. Output float32; size in host memory; no gradient "
             "(as in TensorFlow).");
  DocumentOp("ScaleAndTranslate", "NHWC",
             "Not on TensorFlow's GPU build. kernel_type lanczos1/3/5, gaussian, box, triangle, "
             "keyscubic, mitchellcubic; antialias; size, scale, translation in host memory; "
             "output float32.");
  DocumentOp("ScaleAndTranslateGrad", "NHWC",
             "Not on TensorFlow's GPU build. float32 (the op's dtype); scale and translation in "
             "host memory; TensorFlow's CPU order of additions.");
}

}  // namespace vgpu
