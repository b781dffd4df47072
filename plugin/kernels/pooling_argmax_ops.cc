// TensorFlow op kernels of 2-D max pooling with argmax on the virtual GPU: MaxPoolWithArgmax,
// MaxPoolGradWithArgmax and MaxPoolGradGradWithArgmax (NHWC only, as TensorFlow's ops; VALID /
// SAME). The argmax tensor names, per output element, the flattened input index
// ((b * H + h) * W + w) * C + c of the element taken (without b unless include_batch_in_index),
// exactly as TensorFlow's CPU kernel computes it.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/pooling_ops.h"
#include "plugin/protocol/kernels/pooling.h"

namespace vgpu {
namespace {

constexpr std::initializer_list<TF_DataType> kFloatingTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                                TF_DOUBLE};

// The window of an argmax op (attributes ksize, strides, padding; NHWC), checked as
// TensorFlow's MaxPool*WithArgmax kernels do, plus what the virtual GPU cannot run (strides
// and depth pooling, which TensorFlow rejects when it computes).
absl::StatusOr<PoolWindow> ReadArgmaxWindow(OpConstruction& construction,
                                            bool check_ksize_positive) {
  VGPU_ASSIGN_OR_RETURN(PoolWindow window, ReadPoolLayout(construction, 2));
  if (window.format != DataFormat::kNHWC) {
    return absl::InvalidArgumentError("max pooling with argmax supports NHWC only");
  }
  VGPU_RETURN_IF_ERROR(ReadWindowAttributes(construction, window));
  if (window.ksize.size() != 4) {
    return absl::InvalidArgumentError("Sliding window ksize field must specify 4 dimensions");
  }
  constexpr char kPositive[] = "ksize must be a positive int32 value, got:";
  if (check_ksize_positive) VGPU_RETURN_IF_ERROR(CheckKsizePositive(window, kPositive, true));
  VGPU_RETURN_IF_ERROR(CheckWindowFieldSizes(window, "stride"));
  VGPU_RETURN_IF_ERROR(CheckNoBatchPooling(window));
  // TensorFlow's gradient kernels leave ksize unchecked; the virtual GPU needs positive windows.
  VGPU_RETURN_IF_ERROR(CheckKsizePositive(window, kPositive, true));
  VGPU_RETURN_IF_ERROR(CheckStridesPositive(window));
  VGPU_RETURN_IF_ERROR(CheckNoDepthPooling2d(window));
  return window;
}

// Plans the pooling of `x_dims` as TensorFlow's PoolParameters does for these ops.
absl::StatusOr<PoolPlan> PlanArgmaxPooling(const PoolWindow& window, NanPropagation nan,
                                           absl::Span<const int64_t> x_dims) {
  if (x_dims.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor_in_shape must have 2 spatial dimensions. ", x_dims.size(), " 0"));
  }
  return PlanPooling(window, PoolingMode::kMax, nan, x_dims, "tensor_in must be 4-dimensional");
}

// Launches an argmax kernel: descriptors [pooling, x, y, argmax tensor], `buffers`, and the
// include_batch_in_index parameter (protocol/kernels/pooling.h).
absl::Status LaunchArgmaxPooling(OpContext& context, KernelId kernel, const PoolPlan& plan,
                                 TF_DataType dtype, absl::Span<const int64_t> x_dims,
                                 TF_DataType argmax_dtype, bool include_batch_in_index,
                                 std::initializer_list<BufferArg> buffers) {
  return KernelLaunch(context)
      .Describe(plan.settings)
      .DescribeTensor(dtype, x_dims)
      .DescribeTensor(dtype, plan.output_dims)
      .DescribeTensor(argmax_dtype, plan.output_dims)
      .Buffers(buffers)
      .Param(static_cast<int32_t>(include_batch_in_index ? 1 : 0))
      .Run(kernel);
}

// MaxPoolWithArgmax(input) -> (output, argmax of Targmax).
class MaxPoolWithArgmaxOp {
 public:
  static absl::StatusOr<std::unique_ptr<MaxPoolWithArgmaxOp>> Create(
      OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(PoolWindow window, ReadArgmaxWindow(construction, true));
    VGPU_ASSIGN_OR_RETURN(bool include_batch, construction.Bool("include_batch_in_index"));
    VGPU_ASSIGN_OR_RETURN(TF_DataType argmax_dtype, construction.Type("Targmax"));
    VGPU_ASSIGN_OR_RETURN(NanPropagation nan, MaxPoolNanPropagationFromEnvironment());
    return std::unique_ptr<MaxPoolWithArgmaxOp>(
        new MaxPoolWithArgmaxOp(std::move(window), include_batch, argmax_dtype, nan));
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    const std::vector<int64_t> x_dims = ShapeOf(x.get());
    if (x_dims.size() != 4) {
      return absl::InvalidArgumentError("tensor_in must be 4-dimensional (2)");
    }
    if (TF_TensorElementCount(x.get()) == 0) {
      return absl::InvalidArgumentError("tensor_in must not be empty (2)");
    }
    VGPU_ASSIGN_OR_RETURN(PoolPlan plan, PlanArgmaxPooling(window_, nan_, x_dims));
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, plan.output_dims));
    VGPU_ASSIGN_OR_RETURN(TensorPtr argmax,
                          context.AllocateOutput(1, argmax_dtype_, plan.output_dims));
    if (TF_TensorElementCount(y.get()) == 0) return absl::OkStatus();
    return LaunchArgmaxPooling(context, pooling::kForwardWithArgmax, plan, dtype, x_dims,
                               argmax_dtype_, include_batch_,
                               {BufferOf(x.get()), BufferOf(y.get()), BufferOf(argmax.get())});
  }

 private:
  MaxPoolWithArgmaxOp(PoolWindow window, bool include_batch, TF_DataType argmax_dtype,
                      NanPropagation nan)
      : window_(std::move(window)),
        include_batch_(include_batch),
        argmax_dtype_(argmax_dtype),
        nan_(nan) {}
  PoolWindow window_;
  bool include_batch_;
  TF_DataType argmax_dtype_;
  NanPropagation nan_;
};

// MaxPoolGradWithArgmax(input, grad, argmax) -> gradient with respect to input, and
// MaxPoolGradGradWithArgmax(input, grad, argmax) -> gradient with respect to the pooled output
// (grad shaped like input). kGradGrad selects the second.
template <bool kGradGrad>
class ArgmaxGradientOp {
 public:
  static absl::StatusOr<std::unique_ptr<ArgmaxGradientOp>> Create(OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(PoolWindow window, ReadArgmaxWindow(construction, false));
    VGPU_ASSIGN_OR_RETURN(bool include_batch, construction.Bool("include_batch_in_index"));
    return std::unique_ptr<ArgmaxGradientOp>(
        new ArgmaxGradientOp(std::move(window), include_batch));
  }

  absl::Status Compute(OpContext& context) {
    if (!kGradGrad) {
      // TensorFlow's CUDA kernel refuses under op determinism (its scatter of the gradients is
      // atomic); the executor's is deterministic, but code written for a GPU expects the error.
      VGPU_RETURN_IF_ERROR(OpContext::RefuseUnderOpDeterminism(
          "Determinism is not yet supported for MaxPoolGradWithArgmax."));
    }
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<3>());
    const auto& [x, grad, argmax] = inputs;
    const std::vector<int64_t> x_dims = ShapeOf(x.get());
    VGPU_ASSIGN_OR_RETURN(PoolPlan plan,
                          PlanArgmaxPooling(window_, NanPropagation::kNotPropagate, x_dims));
    VGPU_RETURN_IF_ERROR(
        ExpectShape("grad", kGradGrad ? x_dims : plan.output_dims, ShapeOf(grad.get())));
    VGPU_RETURN_IF_ERROR(ExpectShape("argmax", plan.output_dims, ShapeOf(argmax.get())));
    if (!kGradGrad) VGPU_RETURN_IF_ERROR(CheckArgmaxTargets(context, argmax.get(), x_dims));
    const TF_DataType dtype = TF_TensorType(grad.get());
    VGPU_ASSIGN_OR_RETURN(
        TensorPtr out, context.AllocateOutput(0, dtype, kGradGrad ? plan.output_dims : x_dims));
    if (TF_TensorElementCount(out.get()) == 0) return absl::OkStatus();
    return LaunchArgmaxPooling(
        context, kGradGrad ? pooling::kGradGradWithArgmax : pooling::kBackwardWithArgmax, plan,
        dtype, x_dims, TF_INT64, include_batch_,
        {BufferOf(grad.get()), BufferOf(argmax.get()), BufferOf(out.get())});
  }

 private:
  // Every argmax must name an element of the input (of its own image without
  // include_batch_in_index). TensorFlow's CPU kernel CHECK-fails the process on a bad one and its
  // CUDA kernel writes out of bounds; here the values are read back (one round trip; this op is
  // rare in training: Keras' max pooling gradient is MaxPoolGrad) and a bad one is an
  // InvalidArgument of the op call rather than a failure of the stream.
  absl::Status CheckArgmaxTargets(const OpContext& context, const TF_Tensor* argmax,
                                  const std::vector<int64_t>& x_dims) const {
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> values, context.DeviceIntegers(argmax));
    const int64_t input_elements = NumElements(x_dims);
    const int64_t images = x_dims[0];
    const int64_t input_image = images == 0 ? 0 : input_elements / images;
    const int64_t output_image = images == 0 ? 0 : static_cast<int64_t>(values.size()) / images;
    for (size_t i = 0; i < values.size(); ++i) {
      const int64_t offset =
          include_batch_ ? 0 : (static_cast<int64_t>(i) / output_image) * input_image;
      if (values[i] < 0 || values[i] >= input_elements - offset) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Invalid output gradient index: argmax ", values[i], " of output element ", i,
            " lies outside the input of ", input_elements, " elements"));
      }
    }
    return absl::OkStatus();
  }

  ArgmaxGradientOp(PoolWindow window, bool include_batch)
      : window_(std::move(window)), include_batch_(include_batch) {}
  PoolWindow window_;
  bool include_batch_;
};

}  // namespace

void RegisterPoolingArgmaxOps(const char* device_type) {
  for (TF_DataType dtype : kFloatingTypes) {
    // TensorFlow's GPU build registers Targmax int64 only; int32 (which its CPU kernel also
    // produces) runs here too rather than falling back to the CPU.
    for (TF_DataType argmax : {TF_INT64, TF_INT32}) {
      RegisterKernel<MaxPoolWithArgmaxOp>("MaxPoolWithArgmax", device_type,
                                          {{"T", dtype}, {"Targmax", argmax}});
    }
    RegisterKernel<ArgmaxGradientOp<false>>("MaxPoolGradWithArgmax", device_type,
                                            {{"T", dtype}, {"Targmax", TF_INT64}});
    RegisterKernel<ArgmaxGradientOp<true>>("MaxPoolGradGradWithArgmax", device_type,
                                           {{"T", dtype}, {"Targmax", TF_INT64}});
  }
  DocumentOp("MaxPoolWithArgmax", "NHWC",
             "Targmax int64 or int32; argmax = ((b * H + h) * W + w) * C + c (b only with "
             "include_batch_in_index), the first maximum in row-major window order, exactly as "
             "TensorFlow's CPU kernel. TF_ENABLE_MAXPOOL_NANPROP=1: a NaN in a window is its "
             "maximum.");
  DocumentOp("MaxPoolGradWithArgmax", "NHWC",
             "Targmax int64. Adds each grad element at the input index its argmax names, "
             "deterministically. The argmax values are read back first (a round trip): one "
             "outside the input is InvalidArgument of the op call. Unimplemented under op "
             "determinism, as TensorFlow's CUDA kernel.");
  DocumentOp("MaxPoolGradGradWithArgmax", "NHWC",
             "Targmax int64. Gathers grad at each argmax (0 for an argmax outside the input, as "
             "TensorFlow's GPU kernel).");
}

}  // namespace vgpu
