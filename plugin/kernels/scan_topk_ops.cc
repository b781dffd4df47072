// TensorFlow op kernels for Cumsum and Cumprod (axis in host memory; exclusive, reverse), TopKV2
// (k in host memory; int32 or int64 indices) and InTopKV2 on the virtual GPU: the scans and the
// sort behind Keras' sparsemax and tf.sort, and Keras' top-k accuracy metrics. Inputs are validated as TensorFlow's kernels do (same
// messages); each op is one launch of the reduction family (protocol/kernels/reduction.h).
#include "plugin/kernels/scan_topk_ops.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/protocol/kernels/reduction.h"

namespace vgpu {
namespace {

using Dims = std::vector<int64_t>;

constexpr std::initializer_list<TF_DataType> kTypes = {TF_FLOAT, TF_HALF,  TF_BFLOAT16,
                                                       TF_DOUBLE, TF_INT32, TF_INT64};

// Cumsum (kOp = kSum) and Cumprod (kProd).
template <ReduceOp kOp>
class ScanOp {
 public:
  static absl::StatusOr<std::unique_ptr<ScanOp>> Create(OpConstruction& construction) {
    reduction::ScanParams params;
    VGPU_ASSIGN_OR_RETURN(bool exclusive, construction.Bool("exclusive"));
    VGPU_ASSIGN_OR_RETURN(bool reverse, construction.Bool("reverse"));
    params.exclusive = exclusive ? 1 : 0;
    params.reverse = reverse ? 1 : 0;
    return std::unique_ptr<ScanOp>(new ScanOp(params));
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [x, axis_tensor] = inputs;
    if (TF_NumDims(axis_tensor.get()) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ScanOp: axis must be a scalar, not ", ShapeString(ShapeOf(axis_tensor.get()))));
    }
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> axis_values, context.HostIntegers(1));
    const Dims dims = ShapeOf(x.get());
    const int64_t rank = static_cast<int64_t>(dims.size());
    int64_t axis = axis_values[0];
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) {
      return absl::InvalidArgumentError(absl::StrCat("ScanOp: Expected scan axis in the range [",
                                                     -rank, ", ", rank, "), but got ", axis));
    }
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.ForwardOrAllocateOutput({0}, 0, dtype, dims));
    if (TF_TensorElementCount(x.get()) == 0) return absl::OkStatus();
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= dims[i];
    for (int64_t i = axis + 1; i < rank; ++i) inner *= dims[i];
    const int64_t view[3] = {outer, dims[axis], inner};
    ReduceDescriptorSettings reduce;
    reduce.op = kOp;
    VGPU_ASSIGN_OR_RETURN(reduce.dtype, DTypeOf(dtype));
    return KernelLaunch(context)
        .Describe(reduce)
        .DescribeTensor(dtype, view)
        .Buffer(x.get())
        .Buffer(y.get())
        .Param(params_)
        .Run(reduction::kScan);
  }

 private:
  explicit ScanOp(reduction::ScanParams params) : params_(params) {}
  reduction::ScanParams params_;
};

// TopKV2(input, k) -> values, indices: the k largest entries of the last dimension.
class TopKOp {
 public:
  static absl::StatusOr<std::unique_ptr<TopKOp>> Create(OpConstruction& construction) {
    TF_DataType index_type = TF_INT32;
    if (construction.Has("index_type")) {
      VGPU_ASSIGN_OR_RETURN(index_type, construction.Type("index_type"));
    }
    return std::unique_ptr<TopKOp>(new TopKOp(index_type));
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [x, k_tensor] = inputs;
    if (TF_NumDims(k_tensor.get()) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("k must be scalar, got shape ",
                                                     ShapeString(ShapeOf(k_tensor.get()))));
    }
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> k_values, context.HostIntegers(1));
    const int64_t k = k_values[0];
    if (k < 0) return absl::InvalidArgumentError(absl::StrCat("Need k >= 0, got ", k));
    const Dims dims = ShapeOf(x.get());
    if (dims.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input must be >= 1-D, got shape ", ShapeString(dims)));
    }
    const int64_t cols = dims.back();
    if (cols < k) {
      return absl::InvalidArgumentError(
          absl::StrCat("input must have at least k columns. Had ", cols, ", needed ", k));
    }
    Dims out_dims = dims;
    out_dims.back() = k;
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr values, context.AllocateOutput(0, dtype, out_dims));
    VGPU_ASSIGN_OR_RETURN(TensorPtr indices, context.AllocateOutput(1, index_type_, out_dims));
    const int64_t count = TF_TensorElementCount(x.get());
    if (k == 0 || count == 0) return absl::OkStatus();
    const int64_t rows = count / cols;
    const int64_t x_view[2] = {rows, cols};
    const int64_t out_view[2] = {rows, k};
    return KernelLaunch(context)
        .DescribeTensor(dtype, x_view)
        .DescribeTensor(index_type_, out_view)
        .Buffer(x.get())
        .Buffer(values.get())
        .Buffer(indices.get())
        .Run(reduction::kTopK);
  }

 private:
  explicit TopKOp(TF_DataType index_type) : index_type_(index_type) {}
  TF_DataType index_type_;
};

// InTopKV2(predictions, targets, k): whether each target is among its row's k largest
// predictions. k in host memory; predictions and targets on the device.
class InTopKOp : public NoAttributes<InTopKOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<3>());
    const auto& [predictions, targets, k_tensor] = inputs;
    const Dims predictions_dims = ShapeOf(predictions.get());
    const Dims targets_dims = ShapeOf(targets.get());
    if (predictions_dims.size() != 2) {
      return absl::InvalidArgumentError("predictions must be 2-dimensional");
    }
    if (targets_dims.size() != 1) {
      return absl::InvalidArgumentError("targets must be 1-dimensional");
    }
    if (predictions_dims[0] != targets_dims[0]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "First dimension of predictions ", predictions_dims[0],
          " must match length of targets ", targets_dims[0]));
    }
    if (TF_NumDims(k_tensor.get()) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("k must be 0-D, got shape ",
                                                     ShapeString(ShapeOf(k_tensor.get()))));
    }
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> k_values, context.HostIntegers(2));
    VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.AllocateOutput(0, TF_BOOL, targets_dims));
    if (targets_dims[0] == 0) return absl::OkStatus();
    return KernelLaunch(context)
        .DescribeTensor(TF_FLOAT, predictions_dims)
        .DescribeTensor(TF_TensorType(targets.get()), targets_dims)
        .Buffer(predictions.get())
        .Buffer(targets.get())
        .Buffer(out.get())
        .Param(k_values[0])
        .Run(reduction::kInTopK);
  }
};

}  // namespace

void RegisterScanAndTopKOps(const char* device_type) {
  for (TF_DataType target_type : {TF_INT32, TF_INT64}) {
    RegisterKernel<InTopKOp>("InTopKV2", device_type, {{"T", target_type}}, {"k"});
  }
  DocumentOp("InTopKV2", "",
             "False for targets out of range and for rows with a non-finite prediction.");
  for (TF_DataType dtype : kTypes) {
    for (TF_DataType index : {TF_INT32, TF_INT64}) {
      RegisterKernel<ScanOp<ReduceOp::kSum>>("Cumsum", device_type,
                                             {{"T", dtype}, {"Tidx", index}}, {"axis"});
      RegisterKernel<ScanOp<ReduceOp::kProd>>("Cumprod", device_type,
                                              {{"T", dtype}, {"Tidx", index}}, {"axis"});
      for (TF_DataType index_type : {TF_INT32, TF_INT64}) {
        RegisterKernel<TopKOp>("TopKV2", device_type,
                               {{"T", dtype}, {"Tk", index}, {"index_type", index_type}}, {"k"});
      }
    }
  }
  DocumentOp("Cumsum", "", "Sequential in the dtype along the axis, as TensorFlow's CPU kernel.");
  DocumentOp("Cumprod", "", "Sequential in the dtype along the axis, as TensorFlow's CPU kernel.");
  DocumentOp("TopKV2", "",
             "Always sorted (descending; ties: lower index first; NaN above numbers).");
}

}  // namespace vgpu
