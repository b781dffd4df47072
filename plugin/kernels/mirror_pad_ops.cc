// TensorFlow op kernels for MirrorPad and MirrorPadGrad (modes REFLECT and SYMMETRIC) on the
// virtual GPU, part of the data movement family (kernel ids in protocol/kernels/
// data_movement.h). paddings is a host-memory [rank, 2] matrix, validated here with TensorFlow's
// conditions and messages (rank at most 5, as TensorFlow's kernel); then one launch moves (or,
// for the gradient, folds and sums) the data on the device. Cases TensorFlow answers by
// forwarding the input (nothing to pad) forward it here too.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/kernels/mirror_pad_params.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/protocol/kernels/data_movement.h"

namespace vgpu {
namespace {

using data_movement::MirrorPadMode;
using Dims = std::vector<int64_t>;

constexpr int kMaxMirrorPadRank = 5;  // TensorFlow's kernel stops at 5 dimensions

absl::StatusOr<MirrorPadMode> ModeOf(OpConstruction& construction) {
  VGPU_ASSIGN_OR_RETURN(std::string mode, construction.String("mode"));
  if (mode == "REFLECT") return MirrorPadMode::kReflect;
  if (mode == "SYMMETRIC") return MirrorPadMode::kSymmetric;
  return absl::InvalidArgumentError("mode must be either REFLECT or SYMMETRIC.");
}

// The input and its paddings, checked as TensorFlow's MirrorPad(Grad)Op::Compute does before
// it looks at the padding values.
struct MirrorPadInputs {
  TensorPtr x;
  Dims x_dims;
  Dims before, after;
};

absl::StatusOr<MirrorPadInputs> ReadInputs(OpContext& context, const char* separator) {
  MirrorPadInputs inputs;
  VGPU_ASSIGN_OR_RETURN(inputs.x, context.Input(0));
  VGPU_ASSIGN_OR_RETURN(TensorPtr paddings, context.Input(1));
  inputs.x_dims = ShapeOf(inputs.x.get());
  const int rank = static_cast<int>(inputs.x_dims.size());
  if (rank > kMaxMirrorPadRank) {
    return absl::UnimplementedError(
        absl::StrCat("inputs rank not in [0,", kMaxMirrorPadRank, "]: ", rank));
  }
  const Dims paddings_shape = ShapeOf(paddings.get());
  if (paddings_shape.size() != 2 || paddings_shape[1] != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("paddings must be a matrix with 2 columns: ", ShapeString(paddings_shape)));
  }
  if (paddings_shape[0] != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("The first dimension of paddings must be the rank of inputs",
                     ShapeString(paddings_shape), separator, ShapeString(inputs.x_dims)));
  }
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> values, context.HostIntegers(1));
  inputs.before.resize(rank);
  inputs.after.resize(rank);
  for (int d = 0; d < rank; ++d) {
    inputs.before[d] = values[2 * d];
    inputs.after[d] = values[2 * d + 1];
  }
  return inputs;
}

// TensorFlow's bounds on the paddings of one dimension of `size` (`what`: "dimension size", or
// for the gradient "output dimension size"): at most the size for SYMMETRIC, below it for
// REFLECT.
absl::Status CheckPaddingBounds(MirrorPadMode mode, int64_t before, int64_t after, int64_t size,
                                const char* what) {
  if (mode == MirrorPadMode::kSymmetric && (before > size || after > size)) {
    return absl::InvalidArgumentError(absl::StrCat("paddings must be no greater than the ", what,
                                                   ": ", before, ", ", after, " greater than ",
                                                   size));
  }
  if (mode == MirrorPadMode::kReflect && (before >= size || after >= size)) {
    return absl::InvalidArgumentError(absl::StrCat("paddings must be less than the ", what, ": ",
                                                   before, ", ", after, " not less than ", size));
  }
  return absl::OkStatus();
}

// Launches `kernel` from `x` into `y` with the layout parameter block `params`.
absl::Status LaunchMirrorPad(OpContext& context, KernelId kernel, const TF_Tensor* x,
                             const TF_Tensor* y, const ParamBlock& params) {
  return KernelLaunch(context).Buffer(x).Buffer(y).Params(params).Run(kernel);
}

// MirrorPad and MirrorPadGrad: their attributes_ are the mode.
class MirrorPadOp : public WithAttributes<MirrorPadOp, MirrorPadMode, ModeOf> {
 public:
  absl::Status Compute(OpContext& context) {
    const MirrorPadMode mode = attributes_;
    VGPU_ASSIGN_OR_RETURN(MirrorPadInputs in, ReadInputs(context, ", "));
    const int rank = static_cast<int>(in.x_dims.size());
    Dims y_dims(rank);
    for (int d = 0; d < rank; ++d) {
      const int64_t before = in.before[d], after = in.after[d], n = in.x_dims[d];
      if (before < 0 || after < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("paddings must be non-negative: ", before, " ", after));
      }
      VGPU_RETURN_IF_ERROR(CheckPaddingBounds(mode, before, after, n, "dimension size"));
      y_dims[d] = before + n + after;
    }
    if (NumElements(y_dims) == NumElements(in.x_dims)) {
      // The input reshaped, sharing its buffer.
      return context.SetOutputView(0, in.x.get(), TF_TensorType(in.x.get()), y_dims);
    }
    const TF_DataType dtype = TF_TensorType(in.x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, y_dims));
    return LaunchMirrorPad(context, data_movement::kMirrorPad, in.x.get(), y.get(),
                           MirrorPadParams(static_cast<uint32_t>(TF_DataTypeSize(dtype)),
                                           in.x_dims, in.before, in.after, mode));
  }
};

class MirrorPadGradOp : public WithAttributes<MirrorPadGradOp, MirrorPadMode, ModeOf> {
 public:
  absl::Status Compute(OpContext& context) {
    const MirrorPadMode mode = attributes_;
    VGPU_ASSIGN_OR_RETURN(MirrorPadInputs in, ReadInputs(context, " "));
    const int rank = static_cast<int>(in.x_dims.size());
    Dims dx_dims(rank);
    for (int d = 0; d < rank; ++d) {
      const int64_t before = in.before[d], after = in.after[d];
      if (before < 0 || after < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("Paddings must be non-negative: ", before, ", ", after));
      }
      const int64_t out_size = in.x_dims[d] - (before + after);
      VGPU_RETURN_IF_ERROR(
          CheckPaddingBounds(mode, before, after, out_size, "output dimension size"));
      dx_dims[d] = out_size;
    }
    if (dx_dims == in.x_dims) {
      return context.SetOutputView(0, in.x.get(), TF_TensorType(in.x.get()), dx_dims);
    }
    const TF_DataType dtype = TF_TensorType(in.x.get());
    VGPU_ASSIGN_OR_RETURN(DType device_dtype, DTypeOf(dtype));
    VGPU_ASSIGN_OR_RETURN(TensorPtr dx, context.AllocateOutput(0, dtype, dx_dims));
    if (NumElements(dx_dims) == 0) return absl::OkStatus();
    return LaunchMirrorPad(context, data_movement::kMirrorPadGrad, in.x.get(), dx.get(),
                           MirrorPadParams(static_cast<uint32_t>(device_dtype), dx_dims,
                                           in.before, in.after, mode));
  }
};

}  // namespace

void RegisterMirrorPadOps(const char* device_type) {
  for (TF_DataType dtype : {TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE}) {
    for (TF_DataType index : {TF_INT32, TF_INT64}) {
      RegisterKernel<MirrorPadOp>("MirrorPad", device_type, {{"T", dtype}, {"Tpaddings", index}},
                                  {"paddings"});
      RegisterKernel<MirrorPadGradOp>("MirrorPadGrad", device_type,
                                      {{"T", dtype}, {"Tpaddings", index}}, {"paddings"});
    }
  }
  DocumentOp("MirrorPad", "",
             "REFLECT and SYMMETRIC; rank <= 5 (TensorFlow's limit); paddings in host memory.");
  DocumentOp("MirrorPadGrad", "",
             "Sums the mirrored gradients in TensorFlow's order; rank <= 5.");
}

}  // namespace vgpu
