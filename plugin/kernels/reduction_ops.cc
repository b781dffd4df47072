// TensorFlow op kernels of the reduction family on the virtual GPU: Sum, Mean, Prod, Max, Min,
// All, Any (reduction_indices in host memory), ArgMax and ArgMin (dimension in host memory);
// Softmax and the losses live in softmax_ops.cc, L2Loss and CheckNumerics in numerics_ops.cc,
// and are registered from here. Written as TensorFlow's cuDNN kernels are: validate as
// TensorFlow's ReductionOp does, then per call create and set a reduce descriptor and tensor
// descriptors, launch, destroy (RAII).
//
// int32 reductions are not registered: TensorFlow keeps int32 tensors of a GPU in host memory
// and registers host-memory int32 Max/Min kernels for every device itself (DEVICE_DEFAULT), so
// int32 Sum/Mean/Prod run on the CPU and int32 Max/Min on TensorFlow's own host kernels.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/numerics_ops.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/kernels/scan_topk_ops.h"
#include "plugin/kernels/softmax_ops.h"
#include "plugin/protocol/kernels/reduction.h"
#include "tensorflow/c/tf_tensor.h"

namespace vgpu {
namespace {

constexpr std::initializer_list<TF_DataType> kReducibleTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                                 TF_DOUBLE, TF_INT64};

// TensorFlow's ReductionHelper: the output shape, and the input viewed as alternating runs of
// reduced and kept dimensions (size-1 dimensions join the run before them; leading 1s vanish).
struct ReductionPlan {
  std::vector<int64_t> output_dims;  // the op's output shape (keep_dims applied)
  std::vector<int64_t> runs;         // the collapsed input
  std::vector<int64_t> kept_runs;    // the collapsed output
  bool reduce_first_axis = false;

  // Nothing is reduced: the output is the input reshaped.
  bool IsCopy() const { return runs.empty() || (runs.size() == 1 && !reduce_first_axis); }
};

absl::StatusOr<ReductionPlan> PlanReduction(absl::Span<const int64_t> dims,
                                            absl::Span<const int64_t> axes, bool keep_dims) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<bool> reduced(dims.size(), false);
  for (int64_t axis : axes) {
    if (axis < -rank || axis >= rank) {
      return absl::InvalidArgumentError(absl::StrCat("Invalid reduction dimension (", axis,
                                                     " for input with ", rank, " dimension(s)"));
    }
    const int64_t index = axis < 0 ? axis + rank : axis;
    if (reduced[index]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Invalid reduction arguments: Axes contains duplicate dimension: ", index));
    }
    reduced[index] = true;
  }
  ReductionPlan plan;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i]) {
      plan.output_dims.push_back(dims[i]);
    } else if (keep_dims) {
      plan.output_dims.push_back(1);
    }
  }
  int64_t i = 0;
  while (i < rank && dims[i] == 1) ++i;
  if (i == rank) {
    plan.reduce_first_axis = true;  // essentially a scalar: nothing to reduce
    return plan;
  }
  plan.reduce_first_axis = reduced[i];
  plan.runs.push_back(dims[i]);
  for (++i; i < rank; ++i) {
    if (dims[i] == 1) reduced[i] = reduced[i - 1];
    if (reduced[i] != reduced[i - 1]) {
      plan.runs.push_back(dims[i]);
    } else {
      plan.runs.back() *= dims[i];
    }
  }
  for (size_t r = plan.reduce_first_axis ? 1 : 0; r < plan.runs.size(); r += 2) {
    plan.kept_runs.push_back(plan.runs[r]);
  }
  return plan;
}

absl::StatusOr<bool> ReadKeepDims(OpConstruction& construction) {
  return construction.Bool("keep_dims");
}

absl::StatusOr<TF_DataType> ReadOutputType(OpConstruction& construction) {
  return construction.Type("output_type");
}

// Sum, Mean, Prod, Max, Min (T numeric) and All, Any (bool). Its attributes_ are keep_dims.
template <ReduceOp kOp>
class ReductionOp : public WithAttributes<ReductionOp<kOp>, bool, ReadKeepDims> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> axes, context.HostIntegers(1));
    const std::vector<int64_t> dims = ShapeOf(x.get());
    VGPU_ASSIGN_OR_RETURN(ReductionPlan plan, PlanReduction(dims, axes, this->attributes_));
    const TF_DataType dtype = TF_TensorType(x.get());
    // A copy: output 0 is the input reshaped, sharing its buffer (no data is touched).
    if (plan.IsCopy()) return context.SetOutputView(0, x.get(), dtype, plan.output_dims);
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, plan.output_dims));
    if (TF_TensorElementCount(y.get()) == 0) return absl::OkStatus();

    ReduceDescriptorSettings reduce_settings;
    reduce_settings.op = kOp;
    VGPU_ASSIGN_OR_RETURN(reduce_settings.dtype, DTypeOf(dtype));
    reduction::ReduceLayoutParams layout;
    layout.reduce_first_axis = plan.reduce_first_axis ? 1 : 0;
    return KernelLaunch(context)
        .Describe(reduce_settings)
        .DescribeTensor(dtype, plan.runs)
        .DescribeTensor(dtype, plan.kept_runs)
        .Buffer(x.get())
        .Buffer(y.get())
        .Param(layout)
        .Run(reduction::kReduce);
  }
};

// ArgMax / ArgMin(input, dimension) with output_type int32 or int64, its attributes_.
template <ReduceOp kOp>
class ArgReductionOp : public WithAttributes<ArgReductionOp<kOp>, TF_DataType, ReadOutputType> {
 public:
  absl::Status Compute(OpContext& context) {
    const TF_DataType output_type = this->attributes_;
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [x, dimension] = inputs;
    if (TF_NumDims(dimension.get()) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("dim must be a scalar, but received tensor of shape: ",
                       ShapeString(ShapeOf(dimension.get()))));
    }
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> axis_values, context.HostIntegers(1));
    const std::vector<int64_t> dims = ShapeOf(x.get());
    const int64_t rank = static_cast<int64_t>(dims.size());
    const int64_t axis_value = axis_values[0];
    if (axis_value < -rank || axis_value >= rank) {
      return absl::InvalidArgumentError(absl::StrCat("Expected dimension in the range [", -rank,
                                                     ", ", rank, "), but got ", axis_value));
    }
    const int64_t axis = axis_value < 0 ? axis_value + rank : axis_value;
    if (dims[axis] == 0) {
      return absl::InvalidArgumentError(absl::StrCat("Reduction axis ", axis,
                                                     " is empty in shape ", ShapeString(dims)));
    }
    std::vector<int64_t> output_dims;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i) {
      if (i == axis) continue;
      output_dims.push_back(dims[i]);
      (i < axis ? outer : inner) *= dims[i];
    }
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, output_type, output_dims));
    if (TF_TensorElementCount(y.get()) == 0) return absl::OkStatus();

    const int64_t x_view[3] = {outer, dims[axis], inner};
    const int64_t y_view[2] = {outer, inner};
    ReduceDescriptorSettings reduce_settings;
    reduce_settings.op = kOp;
    VGPU_ASSIGN_OR_RETURN(reduce_settings.dtype, DTypeOf(TF_TensorType(x.get())));
    return KernelLaunch(context)
        .Describe(reduce_settings)
        .DescribeTensor(TF_TensorType(x.get()), x_view)
        .DescribeTensor(output_type, y_view)
        .Buffer(x.get())
        .Buffer(y.get())
        .Run(reduction::kArgReduce);
  }
};

template <typename K>
void RegisterReduction(const char* op_name, const char* device_type) {
  RegisterKernelForTypes<K>(op_name, device_type, "T", kReducibleTypes, {"reduction_indices"});
}

template <typename K>
void RegisterArgReduction(const char* op_name, const char* device_type) {
  for (TF_DataType input : kReducibleTypes) {
    for (TF_DataType output : {TF_INT32, TF_INT64}) {
      RegisterKernel<K>(op_name, device_type, {{"T", input}, {"output_type", output}},
                        {"dimension"});
    }
  }
}

}  // namespace

void RegisterReductionOps(const char* device_type) {
  RegisterReduction<ReductionOp<ReduceOp::kSum>>("Sum", device_type);
  RegisterReduction<ReductionOp<ReduceOp::kMean>>("Mean", device_type);
  RegisterReduction<ReductionOp<ReduceOp::kProd>>("Prod", device_type);
  RegisterReduction<ReductionOp<ReduceOp::kMax>>("Max", device_type);
  RegisterReduction<ReductionOp<ReduceOp::kMin>>("Min", device_type);
  RegisterKernel<ReductionOp<ReduceOp::kAll>>("All", device_type, {}, {"reduction_indices"});
  RegisterKernel<ReductionOp<ReduceOp::kAny>>("Any", device_type, {}, {"reduction_indices"});
  RegisterArgReduction<ArgReductionOp<ReduceOp::kMax>>("ArgMax", device_type);
  RegisterArgReduction<ArgReductionOp<ReduceOp::kMin>>("ArgMin", device_type);
  constexpr char kInt32OnHost[] = " int32 uses TensorFlow's host kernels.";
  DocumentOp("Sum", "",
             absl::StrCat("float16/bfloat16 accumulate in float (as TensorFlow's GPU kernels).",
                          kInt32OnHost).c_str());
  DocumentOp("Mean", "",
             absl::StrCat("float16/bfloat16 accumulate in float (as TensorFlow's GPU kernels).",
                          kInt32OnHost).c_str());
  DocumentOp("Prod", "", kInt32OnHost + 1);
  DocumentOp("Max", "", "NaN propagates; an empty reduction gives -inf or the lowest integer.");
  DocumentOp("Min", "", "NaN propagates; an empty reduction gives +inf or the highest integer.");
  DocumentOp("All", "", "bool; an empty reduction gives true.");
  DocumentOp("Any", "", "bool; an empty reduction gives false.");
  DocumentOp("ArgMax", "", "The lowest index wins ties.");
  DocumentOp("ArgMin", "", "The lowest index wins ties.");
  RegisterSoftmaxOps(device_type);
  RegisterScanAndTopKOps(device_type);
  RegisterNumericsOps(device_type);
}

}  // namespace vgpu
