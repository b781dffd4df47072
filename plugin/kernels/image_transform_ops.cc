// TensorFlow op kernels for the geometric image ops on the virtual GPU: ImageProjectiveTransformV2
// and V3 (what Keras' RandomRotation, RandomZoom, RandomTranslation and RandomShear run),
// CropAndResize with CropAndResizeGradImage and CropAndResizeGradBoxes, and
// NonMaxSuppressionV2/V3/V4. Inputs are validated with TensorFlow's conditions, error classes
// and messages before anything is launched (kernel ids and layouts in
// protocol/kernels/image_transform.h).
//
// Two ops read device memory back on the host, as TensorFlow's GPU kernels do: crop-and-resize
// checks its box indices before it launches (TensorFlow's GPU kernel checks them on the device
// and reports asynchronously; here a bad index is a clean OutOfRange error of the op call), and
// non-max suppression reads the number of selected boxes to size its output.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/image_transform.h"

namespace vgpu {
namespace {

using Dims = std::vector<int64_t>;
using image_transform::CropGeometry;
using image_transform::CropMethod;
using image_transform::FillMode;
using image_transform::Interpolation;

// A tensor's shape as TensorFlow's messages print it.
std::string ShapeText(const TF_Tensor* tensor) { return ShapeString(ShapeOf(tensor)); }

// A host-memory scalar of a floating type (float32 or float16 thresholds) as float.
absl::StatusOr<float> HostFloat(const TF_Tensor* tensor) {
  const void* data = TF_TensorData(tensor);
  switch (TF_TensorType(tensor)) {
    case TF_FLOAT: {
      float value;
      std::memcpy(&value, data, sizeof(value));
      return value;
    }
    case TF_HALF: {
      Eigen::half value;
      std::memcpy(&value, data, sizeof(value));
      return static_cast<float>(value);
    }
    default:
      return absl::InvalidArgumentError("threshold must be float32 or float16");
  }
}

// ---------------------------------------------------------------------------------------------
// ImageProjectiveTransformV2 / V3

// ImageProjectiveTransformV2/V3's attributes.
struct TransformAttributes {
  Interpolation interpolation = Interpolation::kBilinear;
  FillMode fill_mode = FillMode::kConstant;
};

// TensorFlow only logs an unknown interpolation or fill mode and then computes with an
// uninitialised one; here the node fails instead.
absl::StatusOr<TransformAttributes> ReadTransformAttributes(OpConstruction& construction) {
  TransformAttributes attributes;
  VGPU_ASSIGN_OR_RETURN(attributes.interpolation,
                        construction.StringChoice<Interpolation>(
                            "interpolation",
                            {{"NEAREST", Interpolation::kNearest},
                             {"BILINEAR", Interpolation::kBilinear}},
                            "Invalid interpolation ", ". Supported types: NEAREST, BILINEAR"));
  VGPU_ASSIGN_OR_RETURN(attributes.fill_mode,
                        construction.StringChoice<FillMode>(
                            "fill_mode",
                            {{"REFLECT", FillMode::kReflect},
                             {"WRAP", FillMode::kWrap},
                             {"CONSTANT", FillMode::kConstant},
                             {"NEAREST", FillMode::kNearest}},
                            "Invalid mode ",
                            ". Supported types: REFLECT, WRAP, CONSTANT, NEAREST"));
  return attributes;
}

class ImageProjectiveTransformOp
    : public WithAttributes<ImageProjectiveTransformOp, TransformAttributes,
                            ReadTransformAttributes> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [images, transforms] = inputs;
    const auto [image_dims, transform_dims] = ShapesOf(inputs);
    if (image_dims.size() != 4) {
      return absl::InvalidArgumentError("Input images must have rank 4");
    }
    if (transform_dims.size() != 2 ||
        (transform_dims[0] != image_dims[0] && transform_dims[0] != 1) || transform_dims[1] != 8) {
      return absl::InvalidArgumentError("Input transform should be num_images x 8 or 1 x 8");
    }
    VGPU_ASSIGN_OR_RETURN(TensorPtr shape, context.Input(2));
    VGPU_ASSIGN_OR_RETURN(const Dims shape_dims,
                          ShapeOfRank(shape.get(), 1, "output shape must be 1-dimensional"));
    if (NumElements(shape_dims) != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("output shape must have two elements", ShapeString(shape_dims)));
    }
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> out_size, context.HostIntegers(2));
    if (out_size[0] <= 0 || out_size[1] <= 0) {
      return absl::InvalidArgumentError("output dimensions must be positive");
    }
    image_transform::ProjectiveTransformParams params;
    if (context.num_inputs() >= 4) {  // V3: fill_value
      VGPU_ASSIGN_OR_RETURN(TensorPtr fill, context.Input(3));
      if (TF_NumDims(fill.get()) != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("fill_value must be a scalar", ShapeText(fill.get())));
      }
      VGPU_ASSIGN_OR_RETURN(params.fill_value, HostFloat(fill.get()));
    }
    const TF_DataType dtype = TF_TensorType(images.get());
    const Dims out_dims = {image_dims[0], out_size[0], out_size[1], image_dims[3]};
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.AllocateOutput(0, dtype, out_dims));
    if (NumElements(out_dims) == 0) return absl::OkStatus();
    VGPU_ASSIGN_OR_RETURN(params.dtype, DTypeOf(dtype));
    params.interpolation = attributes_.interpolation;
    params.fill_mode = attributes_.fill_mode;
    params.batch = image_dims[0];
    params.in_height = image_dims[1];
    params.in_width = image_dims[2];
    params.channels = image_dims[3];
    params.out_height = out_size[0];
    params.out_width = out_size[1];
    params.transform_rows = transform_dims[0];
    return KernelLaunch(context)
        .Buffer(images.get())
        .Buffer(transforms.get())
        .Buffer(output.get())
        .Param(params)
        .Run(image_transform::kProjectiveTransform);
  }
};

// ---------------------------------------------------------------------------------------------
// CropAndResize and its gradients

absl::StatusOr<CropMethod> CropMethodOf(OpConstruction& construction) {
  return construction.StringChoice<CropMethod>(
      "method", {{"bilinear", CropMethod::kBilinear}, {"nearest", CropMethod::kNearest}},
      "method must be 'bilinear' or 'nearest'");
}

// TensorFlow's ParseAndCheckBoxSizes: the number of boxes of `boxes` [num_boxes, 4] and
// `box_index` [num_boxes] (0 when both are empty, whatever their shapes).
absl::StatusOr<int64_t> BoxCount(const TF_Tensor* boxes, const TF_Tensor* box_index) {
  const Dims boxes_dims = ShapeOf(boxes);
  const Dims index_dims = ShapeOf(box_index);
  if (NumElements(boxes_dims) == 0 && NumElements(index_dims) == 0) return 0;
  VGPU_RETURN_IF_ERROR(ShapeOfRank(boxes, 2, "boxes must be 2-D").status());
  const int64_t num_boxes = boxes_dims[0];
  if (boxes_dims[1] != 4) return absl::InvalidArgumentError("boxes must have 4 columns");
  VGPU_RETURN_IF_ERROR(ShapeOfRank(box_index, 1, "box_index must be 1-D").status());
  if (index_dims[0] != num_boxes) {
    return absl::InvalidArgumentError("box_index has incompatible shape");
  }
  return num_boxes;
}

// Reads the box indices back and checks each lies in [0, batch), TensorFlow's OutOfRange
// otherwise (TensorFlow's GPU kernel makes the same check on the device).
absl::Status CheckBoxIndices(const OpContext& context, const TF_Tensor* box_index,
                             int64_t num_boxes, int64_t batch) {
  if (num_boxes == 0) return absl::OkStatus();
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> indices, context.DeviceIntegers(box_index));
  for (int64_t index : indices) {
    if (index < 0 || index >= batch) {
      return absl::OutOfRangeError("box_index has values outside [0, batch_size)");
    }
  }
  return absl::OkStatus();
}

// The dims of `tensor`, a 4-D NHWC image of positive height and width, after TensorFlow's checks:
// "<name> must be 4-D[shape]", then "<dimensions> dimensions must be positive".
absl::StatusOr<Dims> ImageDims(const TF_Tensor* tensor, absl::string_view name,
                               absl::string_view dimensions) {
  VGPU_ASSIGN_OR_RETURN(Dims dims, ShapeOfRank(tensor, 4, absl::StrCat(name, " must be 4-D")));
  if (dims[1] <= 0 || dims[2] <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(dimensions, " dimensions must be positive"));
  }
  return dims;
}

// The number of boxes of a crop-and-resize gradient, which must be the batch of `grads_dims`.
absl::StatusOr<int64_t> GradientBoxCount(const TF_Tensor* boxes, const TF_Tensor* box_index,
                                         const Dims& grads_dims) {
  VGPU_ASSIGN_OR_RETURN(const int64_t num_boxes, BoxCount(boxes, box_index));
  if (grads_dims[0] != num_boxes) {
    return absl::InvalidArgumentError("boxes and grads have incompatible shape");
  }
  return num_boxes;
}

// The values of the host-memory size vector input `index` (crop_size, image_size): 1-D with
// `count` elements, TensorFlow's "<name> must have <count_text>" otherwise.
absl::StatusOr<std::vector<int64_t>> HostSizeVector(OpContext& context, int index,
                                                    absl::string_view name, int64_t count,
                                                    absl::string_view count_text) {
  VGPU_ASSIGN_OR_RETURN(TensorPtr tensor, context.Input(index));
  VGPU_ASSIGN_OR_RETURN(Dims dims,
                        ShapeOfRank(tensor.get(), 1, absl::StrCat(name, " must be 1-D")));
  if (dims[0] != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must have ", count_text, ShapeString(dims)));
  }
  return context.HostIntegers(index);
}

// The geometry of a CropAndResize launch: an image of `image_dims` (NHWC) of TensorFlow dtype
// `image_dtype`, `num_boxes` crops of crop_height x crop_width each.
absl::StatusOr<CropGeometry> CropGeometryOf(TF_DataType image_dtype, CropMethod method,
                                            const Dims& image_dims, int64_t num_boxes,
                                            int64_t crop_height, int64_t crop_width) {
  CropGeometry geometry;
  VGPU_ASSIGN_OR_RETURN(geometry.dtype, DTypeOf(image_dtype));
  geometry.method = method;
  geometry.batch = image_dims[0];
  geometry.image_height = image_dims[1];
  geometry.image_width = image_dims[2];
  geometry.depth = image_dims[3];
  geometry.num_boxes = num_boxes;
  geometry.crop_height = crop_height;
  geometry.crop_width = crop_width;
  return geometry;
}

// Boxes are not checked for finiteness: TensorFlow's CPU kernel refuses a non-finite box
// (InvalidArgument), its GPU kernel samples it like any other and extrapolates wherever a
// coordinate is not a number or outside the image. The virtual GPU does what the GPU does.
// CropAndResize's attributes.
struct CropAttributes {
  CropMethod method = CropMethod::kBilinear;
  float extrapolation_value = 0;
};

absl::StatusOr<CropAttributes> ReadCropAttributes(OpConstruction& construction) {
  CropAttributes attributes;
  VGPU_ASSIGN_OR_RETURN(attributes.method, CropMethodOf(construction));
  VGPU_ASSIGN_OR_RETURN(attributes.extrapolation_value,
                        construction.Float("extrapolation_value"));
  return attributes;
}

class CropAndResizeOp : public WithAttributes<CropAndResizeOp, CropAttributes, ReadCropAttributes> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<3>());
    const auto& [image, boxes, box_index] = inputs;
    VGPU_ASSIGN_OR_RETURN(const Dims image_dims, ImageDims(image.get(), "input image", "image"));
    if (TF_NumDims(boxes.get()) != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("boxes must be 2-D, got: ", ShapeText(boxes.get())));
    }
    if (TF_NumDims(box_index.get()) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("box_indices must be rank 1 but is shape ", ShapeText(box_index.get())));
    }
    VGPU_ASSIGN_OR_RETURN(const int64_t num_boxes, BoxCount(boxes.get(), box_index.get()));
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> crop,
                          HostSizeVector(context, 3, "crop_size", 2, "two elements"));
    if (crop[0] <= 0 || crop[1] <= 0) {
      return absl::InvalidArgumentError("crop dimensions must be positive");
    }
    const Dims out_dims = {num_boxes, crop[0], crop[1], image_dims[3]};
    VGPU_ASSIGN_OR_RETURN(TensorPtr crops, context.AllocateOutput(0, TF_FLOAT, out_dims));
    VGPU_RETURN_IF_ERROR(CheckBoxIndices(context, box_index.get(), num_boxes, image_dims[0]));
    if (NumElements(out_dims) == 0) return absl::OkStatus();
    image_transform::CropAndResizeParams params;
    VGPU_ASSIGN_OR_RETURN(params.geometry,
                          CropGeometryOf(TF_TensorType(image.get()), attributes_.method, image_dims,
                                         num_boxes, crop[0], crop[1]));
    params.extrapolation_value = attributes_.extrapolation_value;
    return KernelLaunch(context)
        .Buffer(image.get())
        .Buffer(boxes.get())
        .Buffer(box_index.get())
        .Buffer(crops.get())
        .Param(params)
        .Run(image_transform::kCropAndResize);
  }
};

// CropAndResizeGradImage: its attributes_ are the method.
class CropAndResizeGradImageOp
    : public WithAttributes<CropAndResizeGradImageOp, CropMethod, CropMethodOf> {
 public:
  // TensorFlow's GPU kernel refuses to run when op determinism is required (its atomic adds
  // are unordered); this one adds in a fixed order, but refuses too, as code written for a GPU
  // expects.
  absl::Status Compute(OpContext& context) {
    VGPU_RETURN_IF_ERROR(OpContext::RefuseUnderOpDeterminism(
        "Deterministic GPU implementation of CropAndResizeBackpropImage not available."));
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<3>());
    const auto& [grads, boxes, box_index] = inputs;
    VGPU_ASSIGN_OR_RETURN(const Dims grads_dims, ImageDims(grads.get(), "grads image", "grads"));
    VGPU_ASSIGN_OR_RETURN(const int64_t num_boxes,
                          GradientBoxCount(boxes.get(), box_index.get(), grads_dims));
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> size,
                          HostSizeVector(context, 3, "image_size", 4, "4 elements"));
    if (size[1] <= 0 || size[2] <= 0) {
      return absl::InvalidArgumentError("image dimensions must be positive");
    }
    if (grads_dims[3] != size[3]) {
      return absl::InvalidArgumentError("image_size and grads are incompatible");
    }
    // The gradient's dtype is the node's T (the grads input is always float32).
    const TF_DataType dtype = TF_ExpectedOutputDataType(context.raw(), 0);
    const Dims out_dims = {size[0], size[1], size[2], size[3]};
    VGPU_ASSIGN_OR_RETURN(TensorPtr grads_image, context.AllocateOutput(0, dtype, out_dims));
    VGPU_RETURN_IF_ERROR(CheckBoxIndices(context, box_index.get(), num_boxes, size[0]));
    if (NumElements(out_dims) == 0) return absl::OkStatus();
    VGPU_ASSIGN_OR_RETURN(CropGeometry geometry,
                          CropGeometryOf(dtype, attributes_, out_dims, num_boxes, grads_dims[1],
                                         grads_dims[2]));
    return KernelLaunch(context)
        .Buffer(grads.get())
        .Buffer(boxes.get())
        .Buffer(box_index.get())
        .Buffer(grads_image.get())
        .Param(geometry)
        .Run(image_transform::kCropAndResizeGradImage);
  }
};

// CropAndResizeGradBoxes' method, which can only be "bilinear".
absl::StatusOr<CropMethod> BilinearMethodOf(OpConstruction& construction) {
  VGPU_ASSIGN_OR_RETURN(std::string method, construction.String("method"));
  if (method != "bilinear") {
    return absl::InvalidArgumentError(absl::StrCat("method must be 'bilinear'", method));
  }
  return CropMethod::kBilinear;
}

class CropAndResizeGradBoxesOp
    : public WithAttributes<CropAndResizeGradBoxesOp, CropMethod, BilinearMethodOf> {
 public:
  // As for the image gradient: refused under op determinism, as TensorFlow's GPU kernel.
  absl::Status Compute(OpContext& context) {
    VGPU_RETURN_IF_ERROR(OpContext::RefuseUnderOpDeterminism(
        "Deterministic GPU implementation of CropAndResizeBackpropBoxes not available."));
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<4>());
    const auto& [grads, image, boxes, box_index] = inputs;
    VGPU_ASSIGN_OR_RETURN(const Dims grads_dims, ImageDims(grads.get(), "grads image", "grads"));
    VGPU_ASSIGN_OR_RETURN(const Dims image_dims, ImageDims(image.get(), "input image", "image"));
    if (image_dims[3] != grads_dims[3]) {
      return absl::InvalidArgumentError("image, grads depth differ");
    }
    VGPU_ASSIGN_OR_RETURN(const int64_t num_boxes,
                          GradientBoxCount(boxes.get(), box_index.get(), grads_dims));
    VGPU_ASSIGN_OR_RETURN(TensorPtr grads_boxes,
                          context.AllocateOutput(0, TF_FLOAT, {num_boxes, 4}));
    VGPU_RETURN_IF_ERROR(CheckBoxIndices(context, box_index.get(), num_boxes, image_dims[0]));
    if (num_boxes == 0) return absl::OkStatus();
    VGPU_ASSIGN_OR_RETURN(CropGeometry geometry,
                          CropGeometryOf(TF_TensorType(image.get()), attributes_, image_dims,
                                         num_boxes, grads_dims[1], grads_dims[2]));
    return KernelLaunch(context)
        .Buffer(grads.get())
        .Buffer(image.get())
        .Buffer(boxes.get())
        .Buffer(box_index.get())
        .Buffer(grads_boxes.get())
        .Param(geometry)
        .Run(image_transform::kCropAndResizeGradBoxes);
  }
};

// ---------------------------------------------------------------------------------------------
// NonMaxSuppressionV2 / V3 / V4

enum class NmsVersion { kV2, kV3, kV4 };

// Runs non-max suppression as TensorFlow's GPU kernels do: the selection on the device, then
// the number of selected boxes read back (a round trip) to size the output, the indices copied
// into it and, for V4 with pad_to_max_output_size, zeros after them.
template <NmsVersion kVersion>
class NonMaxSuppressionOp {
 public:
  static absl::StatusOr<std::unique_ptr<NonMaxSuppressionOp>> Create(
      OpConstruction& construction) {
    auto op = std::unique_ptr<NonMaxSuppressionOp>(new NonMaxSuppressionOp());
    if constexpr (kVersion == NmsVersion::kV4) {
      VGPU_ASSIGN_OR_RETURN(op->pad_to_max_output_size_,
                            construction.Bool("pad_to_max_output_size"));
    }
    return op;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<4>());
    const auto& [boxes, scores, max_output_size, iou_threshold] = inputs;
    // TensorFlow's V3 kernel appends the rank to its scalar messages; V2 and V4 do not.
    auto rank_note = [](int rank) {
      return kVersion == NmsVersion::kV3
                 ? absl::StrCat(" (Shape must be rank 0 but is rank ", rank, ")")
                 : std::string();
    };
    if (TF_NumDims(max_output_size.get()) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "max_output_size must be 0-D, got shape ", ShapeText(max_output_size.get()),
          rank_note(TF_NumDims(max_output_size.get()))));
    }
    if (TF_NumDims(iou_threshold.get()) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "iou_threshold must be 0-D, got shape ", ShapeText(iou_threshold.get()),
          rank_note(TF_NumDims(iou_threshold.get()))));
    }
    VGPU_ASSIGN_OR_RETURN(const float iou, HostFloat(iou_threshold.get()));
    if (!(iou >= 0.0f && iou <= 1.0f)) {
      return absl::InvalidArgumentError("iou_threshold must be in [0, 1]");
    }
    float score_threshold = std::numeric_limits<float>::lowest();
    if constexpr (kVersion != NmsVersion::kV2) {
      VGPU_ASSIGN_OR_RETURN(TensorPtr threshold, context.Input(4));
      if (TF_NumDims(threshold.get()) != 0) {
        return absl::InvalidArgumentError(absl::StrCat("score_threshold must be 0-D, got shape ",
                                                       ShapeText(threshold.get())));
      }
      VGPU_ASSIGN_OR_RETURN(score_threshold, HostFloat(threshold.get()));
    }
    const Dims boxes_dims = ShapeOf(boxes.get());
    if (boxes_dims.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("boxes must be 2-D", ShapeString(boxes_dims),
                       " (Shape must be rank 2 but is rank ", boxes_dims.size(), ")"));
    }
    const int64_t num_boxes = boxes_dims[0];
    if (boxes_dims[1] != 4) {
      return absl::InvalidArgumentError(absl::StrCat(
          "boxes must have 4 columns (Dimension must be 4 but is ", boxes_dims[1], ")"));
    }
    const Dims scores_dims = ShapeOf(scores.get());
    if (scores_dims.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("scores must be 1-D", ShapeString(scores_dims),
                       " (Shape must be rank 1 but is rank ", scores_dims.size(), ")"));
    }
    if (scores_dims[0] != num_boxes) {
      return absl::InvalidArgumentError(
          absl::StrCat("scores has incompatible shape (Dimensions must be equal, but are ",
                       num_boxes, " and ", scores_dims[0], ")"));
    }
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> max_size, context.HostIntegers(2));
    const int64_t max_outputs = max_size[0];
    if (max_outputs < 0) {
      return absl::InvalidArgumentError("output size must be non-negative");
    }
    if (num_boxes > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError("non-max suppression takes at most 2^31 - 1 boxes");
    }
    VGPU_ASSIGN_OR_RETURN(ClientStream * stream, context.Stream());
    TensorPtr count;  // int32 scalar: V4's second output, otherwise scratch
    if constexpr (kVersion == NmsVersion::kV4) {
      VGPU_ASSIGN_OR_RETURN(count, context.AllocateOutput(1, TF_INT32, {}));
    } else {
      VGPU_ASSIGN_OR_RETURN(count, context.AllocateTemp(TF_INT32, {1}));
    }
    int32_t selected_count = 0;
    TensorPtr selected;
    if (num_boxes > 0) {
      VGPU_ASSIGN_OR_RETURN(selected, context.AllocateTemp(TF_INT32, {num_boxes}));
      image_transform::NonMaxSuppressionParams params;
      params.num_boxes = num_boxes;
      params.max_output_size = max_outputs;
      params.iou_threshold = iou;
      params.score_threshold = score_threshold;
      VGPU_RETURN_IF_ERROR(KernelLaunch(context)
                               .Buffer(boxes.get())
                               .Buffer(scores.get())
                               .Buffer(selected.get())
                               .Buffer(count.get())
                               .Param(params)
                               .Run(image_transform::kNonMaxSuppression));
      VGPU_RETURN_IF_ERROR(stream->device().CopyDeviceToHost(
          *stream, &selected_count, BufferOf(count.get()).address, sizeof(selected_count)));
      VGPU_RETURN_IF_ERROR(stream->device().SynchronizeStream(*stream));
      if (selected_count < 0 || selected_count > std::min(num_boxes, max_outputs)) {
        return absl::InternalError(absl::StrCat("non-max suppression selected ", selected_count,
                                                " of ", num_boxes, " boxes"));
      }
    } else if constexpr (kVersion == NmsVersion::kV4) {
      VGPU_RETURN_IF_ERROR(Zero(*stream, BufferOf(count.get())));
    }
    const int64_t length = pad_to_max_output_size_ ? max_outputs : selected_count;
    VGPU_ASSIGN_OR_RETURN(TensorPtr indices, context.AllocateOutput(0, TF_INT32, {length}));
    const BufferArg out = BufferOf(indices.get());
    const uint64_t selected_bytes = static_cast<uint64_t>(selected_count) * sizeof(int32_t);
    if (selected_count > 0) {
      VGPU_RETURN_IF_ERROR(stream->device().CopyDeviceToDevice(
          *stream, out.address, BufferOf(selected.get()).address, selected_bytes));
    }
    if (out.size > selected_bytes) {
      VGPU_RETURN_IF_ERROR(Zero(*stream, BufferArg{out.address + selected_bytes,
                                                   out.size - selected_bytes}));
    }
    return absl::OkStatus();
  }

 private:
  NonMaxSuppressionOp() = default;
  static absl::Status Zero(ClientStream& stream, BufferArg buffer) {
    return stream.device().Memset(stream, buffer.address, 0, 1, buffer.size);
  }
  bool pad_to_max_output_size_ = false;
};

}  // namespace

void RegisterImageTransformOps(const char* device_type) {
  for (TF_DataType dtype :
       {TF_UINT8, TF_INT32, TF_INT64, TF_HALF, TF_BFLOAT16, TF_FLOAT, TF_DOUBLE}) {
    RegisterKernel<ImageProjectiveTransformOp>("ImageProjectiveTransformV2", device_type,
                                               {{"dtype", dtype}}, {"output_shape"});
    RegisterKernel<ImageProjectiveTransformOp>("ImageProjectiveTransformV3", device_type,
                                               {{"dtype", dtype}}, {"output_shape", "fill_value"});
  }
  constexpr const char* kProjectiveNote =
      "NEAREST and BILINEAR; fill modes REFLECT, WRAP, CONSTANT, NEAREST; output_shape in host "
      "memory. bfloat16 beyond TensorFlow's GPU set (its CPU has it). Integer results saturate "
      "(a NaN gives 0), as a GPU converts; an unknown interpolation or fill mode fails the node.";
  DocumentOp("ImageProjectiveTransformV2", "NHWC", kProjectiveNote);
  DocumentOp("ImageProjectiveTransformV3", "NHWC",
             "As ImageProjectiveTransformV2, with fill_value (host memory) for CONSTANT.");

  for (TF_DataType dtype : {TF_HALF, TF_FLOAT, TF_DOUBLE}) {
    RegisterKernel<CropAndResizeOp>("CropAndResize", device_type, {{"T", dtype}}, {"crop_size"});
    RegisterKernel<CropAndResizeGradImageOp>("CropAndResizeGradImage", device_type,
                                             {{"T", dtype}}, {"image_size"});
    RegisterKernel<CropAndResizeGradBoxesOp>("CropAndResizeGradBoxes", device_type,
                                             {{"T", dtype}});
  }
  DocumentOp("CropAndResize", "NHWC",
             "bilinear and nearest; box_index read back and checked before the launch (a clean "
             "OutOfRange); non-finite boxes extrapolate, as TensorFlow's GPU kernel (its CPU "
             "kernel refuses them).");
  DocumentOp("CropAndResizeGradImage", "NHWC",
             "Deterministic (fixed summation order), yet Unimplemented while op determinism is "
             "required, as TensorFlow's GPU kernel.");
  DocumentOp("CropAndResizeGradBoxes", "NHWC",
             "bilinear; deterministic, yet Unimplemented while op determinism is required, as "
             "TensorFlow's GPU kernel.");

  RegisterKernel<NonMaxSuppressionOp<NmsVersion::kV2>>(
      "NonMaxSuppressionV2", device_type, {{"T", TF_FLOAT}},
      {"max_output_size", "iou_threshold"});
  RegisterKernel<NonMaxSuppressionOp<NmsVersion::kV3>>(
      "NonMaxSuppressionV3", device_type, {{"T", TF_FLOAT}},
      {"max_output_size", "iou_threshold", "score_threshold"});
  RegisterKernel<NonMaxSuppressionOp<NmsVersion::kV4>>(
      "NonMaxSuppressionV4", device_type, {{"T", TF_FLOAT}},
      {"max_output_size", "iou_threshold", "score_threshold"});
  constexpr const char* kNmsNote =
      "float32 boxes and scores; the selection runs on the device and its size is read back (a "
      "round trip, as TensorFlow's GPU kernel); indices and order as TensorFlow's CPU kernel.";
  DocumentOp("NonMaxSuppressionV2", "", kNmsNote);
  DocumentOp("NonMaxSuppressionV3", "", kNmsNote);
  DocumentOp("NonMaxSuppressionV4", "", kNmsNote);
}

}  // namespace vgpu
