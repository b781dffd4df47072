// TensorFlow op kernels for the colour image ops on the virtual GPU: AdjustContrastv2,
// AdjustHue, AdjustSaturation (what tf.image's adjustments and Keras' colour augmentation layers
// run), RGBToHSV and HSVToRGB. Inputs are validated with TensorFlow's conditions, error classes
// and messages before anything is launched (kernel ids and layouts in
// protocol/kernels/image_transform.h). The contrast factor, hue delta and saturation scale stay
// in device memory, as in TensorFlow's GPU registrations: the kernels read them there.
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/image_transform.h"

namespace vgpu {
namespace {

using Dims = std::vector<int64_t>;
using image_transform::HsvAdjustment;

// TensorFlow's check that an adjusted image has at least 3 dimensions (..., height, width,
// channels).
absl::Status CheckAtLeast3D(const Dims& dims) {
  if (dims.size() >= 3) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("input must be at least 3-D, got shape", ShapeString(dims)));
}

absl::Status CheckScalar(const TF_Tensor* tensor, const char* name) {
  if (TF_NumDims(tensor) == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(name, " must be scalar: ", ShapeString(ShapeOf(tensor))));
}

// Launches `kernel`, which adjusts `images` by the scalar `amount` into `output`.
template <typename Params>
absl::Status LaunchAdjustment(OpContext& context, KernelId kernel, const TF_Tensor* images,
                              const TF_Tensor* amount, const TF_Tensor* output,
                              const Params& params) {
  return KernelLaunch(context).Buffer(images).Buffer(amount).Buffer(output).Param(params).Run(
      kernel);
}

class AdjustContrastOp : public NoAttributes<AdjustContrastOp> {
 public:
  // TensorFlow's GPU kernel refuses to run when op determinism is required; this one sums in
  // a fixed order, but code written for a GPU expects the refusal, so it refuses too.
  absl::Status Compute(OpContext& context) {
    VGPU_RETURN_IF_ERROR(OpContext::RefuseUnderOpDeterminism(
        "A deterministic GPU implementation of AdjustContrastv2 is not currently available."));
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [images, factor] = inputs;
    const Dims dims = ShapeOf(images.get());
    VGPU_RETURN_IF_ERROR(CheckAtLeast3D(dims));
    VGPU_RETURN_IF_ERROR(CheckScalar(factor.get(), "contrast_factor"));
    const TF_DataType dtype = TF_TensorType(images.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.AllocateOutput(0, dtype, dims));
    const int64_t count = NumElements(dims);
    if (count == 0) return absl::OkStatus();
    const size_t rank = dims.size();
    image_transform::AdjustContrastParams params;
    VGPU_ASSIGN_OR_RETURN(params.dtype, DTypeOf(dtype));
    params.channels = dims[rank - 1];
    params.pixels = dims[rank - 3] * dims[rank - 2];
    params.batch = count / (params.pixels * params.channels);
    return LaunchAdjustment(context, image_transform::kAdjustContrast, images.get(),
                            factor.get(), output.get(), params);
  }
};

template <HsvAdjustment kAdjustment>
class AdjustHsvOp : public NoAttributes<AdjustHsvOp<kAdjustment>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [images, amount] = inputs;
    const Dims dims = ShapeOf(images.get());
    VGPU_RETURN_IF_ERROR(CheckAtLeast3D(dims));
    VGPU_RETURN_IF_ERROR(
        CheckScalar(amount.get(), kAdjustment == HsvAdjustment::kHue ? "delta" : "scale"));
    const int64_t channels = dims.back();
    if (channels != 3) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input must have 3 channels but instead has ", channels, " channels."));
    }
    const TF_DataType dtype = TF_TensorType(images.get());
    TensorPtr output;
    if constexpr (kAdjustment == HsvAdjustment::kHue) {  // TensorFlow's AdjustHue may forward
      VGPU_ASSIGN_OR_RETURN(output, context.ForwardOrAllocateOutput({0}, 0, dtype, dims));
    } else {
      VGPU_ASSIGN_OR_RETURN(output, context.AllocateOutput(0, dtype, dims));
    }
    const int64_t count = NumElements(dims);
    if (count == 0) return absl::OkStatus();
    image_transform::AdjustHsvParams params;
    VGPU_ASSIGN_OR_RETURN(params.dtype, DTypeOf(dtype));
    params.adjustment = kAdjustment;
    params.pixels = count / 3;
    return LaunchAdjustment(context, image_transform::kAdjustHsv, images.get(), amount.get(),
                            output.get(), params);
  }
};

template <bool kToHsv>
class ColorSpaceOp : public NoAttributes<ColorSpaceOp<kToHsv>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr input, context.Input(0));
    const Dims dims = ShapeOf(input.get());
    if (dims.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input must be at least 1D", ShapeString(dims)));
    }
    if (dims.back() != 3) {
      return absl::FailedPreconditionError(absl::StrCat(
          "input must have 3 channels but input only has ", dims.back(), " channels."));
    }
    const TF_DataType dtype = TF_TensorType(input.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.AllocateOutput(0, dtype, dims));
    const int64_t count = NumElements(dims);
    if (count == 0) return absl::OkStatus();
    image_transform::ColorSpaceParams params;
    VGPU_ASSIGN_OR_RETURN(params.dtype, DTypeOf(dtype));
    params.pixels = count / 3;
    return KernelLaunch(context)
        .Buffer(input.get())
        .Buffer(output.get())
        .Param(params)
        .Run(kToHsv ? image_transform::kRgbToHsv : image_transform::kHsvToRgb);
  }
};

}  // namespace

void RegisterImageColorOps(const char* device_type) {
  RegisterKernelForTypes<AdjustContrastOp>("AdjustContrastv2", device_type, "T",
                                           {TF_FLOAT, TF_HALF});
  RegisterKernelForTypes<AdjustHsvOp<HsvAdjustment::kHue>>("AdjustHue", device_type, "T",
                                                           {TF_FLOAT, TF_HALF});
  RegisterKernelForTypes<AdjustHsvOp<HsvAdjustment::kSaturation>>(
      "AdjustSaturation", device_type, "T", {TF_FLOAT, TF_HALF});
  RegisterKernelForTypes<ColorSpaceOp<true>>("RGBToHSV", device_type, "T",
                                             {TF_FLOAT, TF_DOUBLE, TF_HALF, TF_BFLOAT16});
  RegisterKernelForTypes<ColorSpaceOp<false>>("HSVToRGB", device_type, "T",
                                              {TF_FLOAT, TF_DOUBLE, TF_HALF, TF_BFLOAT16});
  DocumentOp("AdjustContrastv2", "NHWC",
             "float32 as TensorFlow's CPU kernel (same summation order); float16 as its GPU "
             "kernel (mean rounded to float16). Deterministic, yet Unimplemented while op "
             "determinism is required, as TensorFlow's GPU kernel.");
  DocumentOp("AdjustHue", "NHWC",
             "Computed in float32. A pixel whose largest channel is <= 0 comes back grey at that "
             "value, as on TensorFlow's GPU (its CPU kernel rotates it).");
  DocumentOp("AdjustSaturation", "NHWC", "Computed in float32.");
  DocumentOp("RGBToHSV", "",
             "float16 and bfloat16 beyond TensorFlow's GPU set (its CPU has them), computed in "
             "the element type as TensorFlow's kernels.");
  DocumentOp("HSVToRGB", "",
             "float16 and bfloat16 beyond TensorFlow's GPU set (its CPU has them), computed in "
             "the element type as TensorFlow's kernels.");
}

}  // namespace vgpu
