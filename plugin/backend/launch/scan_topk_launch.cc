// The scan, top-k and in-top-k launch readers (see scan_topk_launch.h).
#include "plugin/backend/launch/scan_topk_launch.h"

#include "absl/status/status.h"
#include "plugin/backend/launch/dense_tensor.h"
#include "plugin/backend/launch/dtype_sets.h"
#include "plugin/backend/launch/reader_dispatch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/reduction.h"

namespace vgpu::scan_topk_launch {

absl::StatusOr<ScanLaunch> ReadScanLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(2));
  ReduceDescriptorSettings reduce;
  TensorDescriptorSettings tensor;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&reduce, &tensor));
  VGPU_ASSIGN_OR_RETURN(reduction::ScanParams params,
                        launch.Params().Get<reduction::ScanParams>());
  if (reduce.op != ReduceOp::kSum && reduce.op != ReduceOp::kProd) {
    return absl::InvalidArgumentError("a scan is a cumulative sum or product");
  }
  if (tensor.rank != 3 || tensor.dtype != reduce.dtype) {
    return absl::InvalidArgumentError("a scan takes x [outer, n, inner] of the reduce's dtype");
  }
  ScanLaunch read;
  read.dtype = tensor.dtype;
  VGPU_ASSIGN_OR_RETURN(read.count, DenseElementCount(tensor));
  read.outer = tensor.dims[0];
  read.n = tensor.dims[1];
  read.inner = tensor.dims[2];
  read.product = reduce.op == ReduceOp::kProd;
  read.exclusive = params.exclusive != 0;
  read.reverse = params.reverse != 0;
  if (tensor.dtype == DType::kUInt8 || tensor.dtype == DType::kBool) {
    return absl::InvalidArgumentError("scans take floating, int32 or int64 dtypes");
  }
  VGPU_RETURN_IF_ERROR(DispatchSigned<ReaderDispatch>(tensor.dtype, AcceptDType()));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffers(launch, tensor.dtype, {read.count, read.count}));
  return read;
}

absl::StatusOr<TopKLaunch> ReadTopKLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(3));
  TensorDescriptorSettings x, indices;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&x, &indices));
  if (x.rank != 2 || indices.rank != 2 || x.dims[0] != indices.dims[0]) {
    return absl::InvalidArgumentError("top-k takes x [rows, cols] and indices [rows, k]");
  }
  TopKLaunch read;
  read.dtype = x.dtype;
  read.index_dtype = indices.dtype;
  VGPU_ASSIGN_OR_RETURN(read.x_count, DenseElementCount(x));
  VGPU_ASSIGN_OR_RETURN(read.out_count, DenseElementCount(indices));
  read.rows = x.dims[0];
  read.cols = x.dims[1];
  read.k = indices.dims[1];
  if (read.k > read.cols) return absl::InvalidArgumentError("top-k needs k <= cols");
  if (x.dtype == DType::kBool || x.dtype == DType::kUInt8) {
    return absl::InvalidArgumentError("top-k takes floating, int32 or int64 values");
  }
  VGPU_RETURN_IF_ERROR(DispatchSigned<ReaderDispatch>(x.dtype, AcceptDType()));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffers(launch, x.dtype, {read.x_count, read.out_count}));
  if (indices.dtype != DType::kInt32 && indices.dtype != DType::kInt64) {
    return absl::InvalidArgumentError("top-k indices must be int32 or int64");
  }
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 2, read.out_count, indices.dtype));
  return read;
}

absl::StatusOr<InTopKLaunch> ReadInTopKLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(3));
  TensorDescriptorSettings predictions, targets;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&predictions, &targets));
  InTopKLaunch read;
  VGPU_ASSIGN_OR_RETURN(read.k, launch.Params().Get<int64_t>());
  if (predictions.rank != 2 || predictions.dtype != DType::kFloat32 || targets.rank != 1 ||
      targets.dims[0] != predictions.dims[0]) {
    return absl::InvalidArgumentError(
        "in-top-k takes float32 predictions [batch, classes] and targets [batch]");
  }
  read.target_dtype = targets.dtype;
  VGPU_ASSIGN_OR_RETURN(read.count, DenseElementCount(predictions));
  read.batch = predictions.dims[0];
  read.classes = predictions.dims[1];
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 0, read.count, DType::kFloat32));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 2, read.batch, DType::kBool));
  if (targets.dtype != DType::kInt32 && targets.dtype != DType::kInt64) {
    return absl::InvalidArgumentError("in-top-k targets must be int32 or int64");
  }
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 1, read.batch, targets.dtype));
  return read;
}

}  // namespace vgpu::scan_topk_launch
