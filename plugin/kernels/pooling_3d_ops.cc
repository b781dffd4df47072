// TensorFlow op kernels of 3-D pooling on the virtual GPU: MaxPool3D, AvgPool3D and their
// gradients (MaxPool3DGrad, AvgPool3DGrad, MaxPool3DGradGrad), NDHWC and NCDHW, VALID / SAME,
// in the dtypes TensorFlow's GPU build registers (float32, float16, bfloat16). Validation follows
// TensorFlow's pooling_ops_3d.cc; the computation is the family's N-d pooling kernels with a
// 3-D pooling descriptor. TensorFlow's 3-D GPU kernels never propagate NaNs (their cuDNN
// descriptor is built without it), so neither do these.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/pooling_ops.h"
#include "plugin/protocol/kernels/pooling.h"

namespace vgpu {
namespace {

constexpr std::initializer_list<TF_DataType> k3dTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16};
constexpr char kDepthUnimplemented[] = "Pooling is not yet supported on the depth dimension.";

// How one 3-D op words its window checks (TensorFlow's kernels differ).
struct Window3dWording {
  const char* stride_word;          // "stride" or "strides"
  const char* ksize_positive;       // message for a non-positive ksize
  bool append_ksize;                // ... followed by the value
  bool ksize_checked_by_tensorflow; // else checked after TensorFlow's own checks
  const char* depth_unimplemented;  // message for pooling across channels
};

// Reads and checks the window attributes of a 3-D pooling op in TensorFlow's order.
absl::StatusOr<PoolWindow> ReadWindow3d(OpConstruction& construction,
                                        const Window3dWording& wording) {
  VGPU_ASSIGN_OR_RETURN(PoolWindow window, ReadPoolLayout(construction, 3));
  VGPU_RETURN_IF_ERROR(ReadWindowAttributes(construction, window));
  if (window.ksize.size() != 5) {
    return absl::InvalidArgumentError("Sliding window ksize field must specify 5 dimensions");
  }
  if (wording.ksize_checked_by_tensorflow) {
    VGPU_RETURN_IF_ERROR(
        CheckKsizePositive(window, wording.ksize_positive, wording.append_ksize));
  }
  VGPU_RETURN_IF_ERROR(CheckWindowFieldSizes(window, wording.stride_word));
  VGPU_RETURN_IF_ERROR(CheckNoBatchPooling(window));
  VGPU_RETURN_IF_ERROR(CheckNoDepthPooling3d(window, wording.depth_unimplemented));
  // Where TensorFlow leaves them to cuDNN: the virtual GPU needs positive windows and strides.
  VGPU_RETURN_IF_ERROR(CheckKsizePositive(window, wording.ksize_positive, wording.append_ksize));
  VGPU_RETURN_IF_ERROR(CheckStridesPositive(window));
  return window;
}

// ReadWindow3d with the wording of one op, as WithAttributes reads a kernel's attributes.
template <const Window3dWording& kWording>
absl::StatusOr<PoolWindow> ReadWindow3dWorded(OpConstruction& construction) {
  return ReadWindow3d(construction, kWording);
}

constexpr Window3dWording kPool3dWording = {
    "stride", "Sliding window ksize field must have non-negative dimensions", false, true,
    kDepthUnimplemented};
constexpr Window3dWording kMaxPool3dGradWording = {
    "stride", "Sliding window ksize must be positive.", false, false, kDepthUnimplemented};
constexpr Window3dWording kAvgPool3dGradWording = {"stride", "ksize must be positive, got: ",
                                                   true, true, kDepthUnimplemented};
constexpr Window3dWording kMaxPool3dGradGradWording = {
    "strides", "Sliding window ksize must be positive.", false, false,
    "MaxPooling3dGradGrad is not yet supported on the depth dimension."};

constexpr char kRank5[] = "tensor_in must be 5-dimensional";

const char* DTypeName(TF_DataType dtype) {
  switch (dtype) {
    case TF_FLOAT: return "float";
    case TF_HALF: return "half";
    case TF_BFLOAT16: return "bfloat16";
    default: return "unknown";
  }
}

// TensorFlow's "received empty tensor <name>: <Tensor::DebugString>" for an empty tensor.
absl::Status ExpectNonEmpty(const char* name, const TF_Tensor* tensor) {
  if (TF_TensorElementCount(tensor) > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("received empty tensor ", name,
                                                 ": Tensor<type: ",
                                                 DTypeName(TF_TensorType(tensor)), " shape: ",
                                                 ShapeString(ShapeOf(tensor)), " values: >"));
}

// MaxPool3D / AvgPool3D.
template <PoolingMode kMode>
class Pool3dOp
    : public WithAttributes<Pool3dOp<kMode>, PoolWindow, ReadWindow3dWorded<kPool3dWording>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    const std::vector<int64_t> x_dims = ShapeOf(x.get());
    VGPU_ASSIGN_OR_RETURN(PoolPlan plan, PlanPooling(this->attributes_, kMode,
                                                     NanPropagation::kNotPropagate, x_dims,
                                                     kRank5));
    return LaunchPoolingForward(context, plan, x.get(), x_dims);
  }
};

// MaxPool3DGrad(orig_input, orig_output, grad) -> gradient with respect to orig_input.
class MaxPool3dGradOp : public WithAttributes<MaxPool3dGradOp, PoolWindow,
                                              ReadWindow3dWorded<kMaxPool3dGradWording>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(MaxPoolGradInputs in,
                          ReadMaxPoolGradInputs(context, 5, "out_backprop"));
    const auto& [x, y, dy, x_dims] = in;
    VGPU_ASSIGN_OR_RETURN(PoolPlan plan,
                          PlanMaxPoolGradient(attributes_, NanPropagation::kNotPropagate, in));
    VGPU_RETURN_IF_ERROR(ExpectShape("grad", plan.output_dims, ShapeOf(dy.get())));
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr dx, context.AllocateOutput(0, dtype, x_dims));
    if (TF_TensorElementCount(dx.get()) == 0) return absl::OkStatus();
    return LaunchPooling(context, pooling::kBackward, plan, dtype, x_dims,
                         {BufferOf(x.get()), BufferOf(dy.get()), BufferOf(dx.get())});
  }
};

// AvgPool3DGrad(orig_input_shape (host int32), grad) -> gradient with respect to the input.
class AvgPool3dGradOp : public WithAttributes<AvgPool3dGradOp, PoolWindow,
                                              ReadWindow3dWorded<kAvgPool3dGradWording>> {
 public:
  absl::Status Compute(OpContext& context) {
    return ComputeAvgPoolingBackward(
        context, attributes_,
        {"tensor_in", [](int64_t dimension, absl::Span<const int64_t> shape) {
           return absl::StrCat("Dimension ", dimension, " must be >= 0 (orig_input_shape ",
                               ShapeString(shape), ")");
         }});
  }
};

// MaxPool3DGradGrad(orig_input, orig_output, grad) -> gradient of MaxPool3DGrad with respect to
// its grad input, shaped like orig_output.
class MaxPool3dGradGradOp : public WithAttributes<MaxPool3dGradGradOp, PoolWindow,
                                                  ReadWindow3dWorded<kMaxPool3dGradGradWording>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(MaxPoolGradInputs in,
                          ReadMaxPoolGradInputs(context, 5, "out_grad_backprop"));
    const auto& [x, y, ddx, x_dims] = in;
    VGPU_ASSIGN_OR_RETURN(PoolPlan plan,
                          PlanMaxPoolGradient(attributes_, NanPropagation::kNotPropagate, in));
    VGPU_RETURN_IF_ERROR(ExpectShape("grad", x_dims, ShapeOf(ddx.get())));
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr ddy, context.AllocateOutput(0, dtype, plan.output_dims));
    VGPU_RETURN_IF_ERROR(ExpectNonEmpty("tensor_in", x.get()));
    VGPU_RETURN_IF_ERROR(ExpectNonEmpty("tensor_out", y.get()));
    VGPU_RETURN_IF_ERROR(ExpectNonEmpty("out_grad_backprop", ddx.get()));
    return LaunchPooling(context, pooling::kGradGrad, plan, dtype, x_dims,
                         {BufferOf(x.get()), BufferOf(y.get()), BufferOf(ddx.get()),
                          BufferOf(ddy.get())});
  }
};

}  // namespace

void RegisterPooling3dOps(const char* device_type) {
  RegisterKernelForTypes<Pool3dOp<PoolingMode::kMax>>("MaxPool3D", device_type, "T", k3dTypes);
  RegisterKernelForTypes<Pool3dOp<PoolingMode::kAverage>>("AvgPool3D", device_type, "T",
                                                          k3dTypes);
  for (TF_DataType dtype : k3dTypes) {
    RegisterKernel<MaxPool3dGradOp>("MaxPool3DGrad", device_type,
                                    {{"T", dtype}, {"TInput", dtype}});
  }
  RegisterKernelForTypes<AvgPool3dGradOp>("AvgPool3DGrad", device_type, "T", k3dTypes,
                                          {"orig_input_shape"});
  RegisterKernelForTypes<MaxPool3dGradGradOp>("MaxPool3DGradGrad", device_type, "T", k3dTypes);

  constexpr char kNoNanProp[] =
      " NaNs are skipped; TF_ENABLE_MAXPOOL_NANPROP is not read (TensorFlow's 3-D GPU kernels "
      "never propagate NaNs).";
  DocumentOp("MaxPool3D", "NDHWC, NCDHW",
             absl::StrCat("VALID, SAME padding. Windows start from the dtype's lowest value.",
                          kNoNanProp)
                 .c_str());
  DocumentOp("AvgPool3D", "NDHWC, NCDHW",
             "VALID, SAME padding; padding is excluded from each window's count.");
  DocumentOp("MaxPool3DGrad", "NDHWC, NCDHW",
             absl::StrCat("Each window's gradient goes to its first maximum (as cuDNN; "
                          "TensorFlow's CPU kernel gives it to every element within 1e-5 of "
                          "the maximum).",
                          kNoNanProp)
                 .c_str());
  DocumentOp("AvgPool3DGrad", "NDHWC, NCDHW",
             "orig_input_shape as a host int32 tensor; accumulates in TensorFlow's CPU order.");
  DocumentOp("MaxPool3DGradGrad", "NDHWC, NCDHW",
             "Gradient of MaxPool3DGrad: the grad value at each window's first element equal to "
             "orig_output (0 where none is). Empty tensors are InvalidArgument, as in "
             "TensorFlow.");
}

}  // namespace vgpu
