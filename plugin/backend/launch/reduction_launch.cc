// The reduce and arg-reduce launch readers (see reduction_launch.h).
#include "plugin/backend/launch/reduction_launch.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/launch/dense_tensor.h"
#include "plugin/backend/launch/dtype_sets.h"
#include "plugin/backend/launch/reader_dispatch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/reduction.h"

namespace vgpu::reduction_launch {
namespace {

// The geometry of x's layout; x's rank is valid and in_count / out_count are its and y's
// element counts, out_count the product of the kept runs.
ReduceGeometry GeometryOf(const TensorDescriptorSettings& x, bool reduce_first, int64_t in_count,
                          int64_t out_count) {
  ReduceGeometry g;
  g.rank = x.rank;
  g.reduce_first = reduce_first;
  g.in_count = in_count;
  g.out_count = out_count;
  g.copies = x.rank == 0 || (x.rank == 1 && !reduce_first);
  g.last_run_kept = x.rank > 0 && ((x.rank - 1) % 2 == 0) != reduce_first;
  int64_t strides[kMaxRank] = {};
  int64_t stride = 1;
  for (int i = x.rank - 1; i >= 0; --i) {
    g.runs[i] = x.dims[i];
    strides[i] = stride;
    stride *= in_count > 0 ? x.dims[i] : 1;
  }
  for (int i = 0; i < x.rank; ++i) {
    const bool reduced = (i % 2 == 0) == reduce_first;
    if (reduced) {
      g.reduced_dims[g.reduced_rank] = x.dims[i];
      g.reduced_strides[g.reduced_rank++] = strides[i];
      g.per_output *= in_count > 0 ? x.dims[i] : 1;
    } else {
      g.kept_dims[g.kept_rank] = x.dims[i];
      g.kept_strides[g.kept_rank++] = strides[i];
    }
  }
  return g;
}

bool IsNumericReduceOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: case ReduceOp::kMean: case ReduceOp::kProd: case ReduceOp::kMax:
    case ReduceOp::kMin:
      return true;
    default: return false;
  }
}

}  // namespace

absl::Status UnservedReduceOp(ReduceOp op) {
  return absl::InvalidArgumentError(
      absl::StrCat("reduce op ", static_cast<int>(op), " does not apply to this dtype"));
}

absl::StatusOr<ReduceLaunch> ReadReduceLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(2));
  ReduceDescriptorSettings reduce;
  TensorDescriptorSettings x, y;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&reduce, &x, &y));
  VGPU_ASSIGN_OR_RETURN(reduction::ReduceLayoutParams params,
                        launch.Params().Get<reduction::ReduceLayoutParams>());
  if (x.dtype != reduce.dtype || y.dtype != reduce.dtype) {
    return absl::InvalidArgumentError("reduce descriptor and tensor dtypes differ");
  }
  const bool reduce_first = params.reduce_first_axis != 0;
  // Validates both ranks and bounds every product of dimensions.
  VGPU_ASSIGN_OR_RETURN(const int64_t in_count, DenseElementCount(x));
  VGPU_ASSIGN_OR_RETURN(const int64_t out_count, DenseElementCount(y));
  int64_t kept_count = 1;
  for (int i = 0; i < x.rank; ++i) {
    if ((i % 2 == 0) == reduce_first) continue;
    const int64_t run = x.dims[i];
    if (run != 0 && kept_count > kMaxLaunchElements / run) {
      return absl::InvalidArgumentError("reduce layout keeps too many elements");
    }
    kept_count *= run;
  }
  if (out_count != kept_count) {
    return absl::InvalidArgumentError(absl::StrCat("reduce output holds ", out_count,
                                                   " elements, the layout keeps ", kept_count));
  }
  ReduceLaunch read;
  read.op = reduce.op;
  read.dtype = reduce.dtype;
  read.geometry = GeometryOf(x, reduce_first, in_count, out_count);
  if (reduce.dtype == DType::kBool) {
    if (reduce.op != ReduceOp::kAll && reduce.op != ReduceOp::kAny) {
      return absl::InvalidArgumentError("bool tensors reduce only with all/any");
    }
  } else {
    VGPU_RETURN_IF_ERROR(DispatchReducible<ReaderDispatch>(reduce.dtype, AcceptDType()));
  }
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffers(launch, reduce.dtype, {in_count, out_count}));
  read.work = out_count == 0              ? ReduceWork::kNothing
              : read.geometry.copies      ? ReduceWork::kCopy
              : in_count == 0             ? ReduceWork::kFillIdentity
                                          : ReduceWork::kReduce;
  if (read.work == ReduceWork::kReduce && reduce.dtype != DType::kBool &&
      !IsNumericReduceOp(reduce.op)) {
    return UnservedReduceOp(reduce.op);
  }
  return read;
}

absl::StatusOr<ArgReduceLaunch> ReadArgReduceLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(2));
  ReduceDescriptorSettings reduce;
  TensorDescriptorSettings x, y;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&reduce, &x, &y));
  if (x.rank != 3 || y.rank != 2 || x.dims[0] != y.dims[0] || x.dims[2] != y.dims[1] ||
      x.dims[1] <= 0 || x.dims[0] < 0 || x.dims[2] < 0) {
    return absl::InvalidArgumentError(
        "arg-reduce takes x [outer, n > 0, inner] and y [outer, inner]");
  }
  if (reduce.op != ReduceOp::kMax && reduce.op != ReduceOp::kMin) {
    return absl::InvalidArgumentError("arg-reduce supports max and min only");
  }
  if (x.dtype != reduce.dtype) {
    return absl::InvalidArgumentError("reduce descriptor and input dtypes differ");
  }
  ArgReduceLaunch read;
  read.op = reduce.op;
  read.dtype = x.dtype;
  read.index_dtype = y.dtype;
  read.outer = x.dims[0];
  read.n = x.dims[1];
  read.inner = x.dims[2];
  VGPU_ASSIGN_OR_RETURN(read.x_count, DenseElementCount(x));
  VGPU_ASSIGN_OR_RETURN(read.y_count, DenseElementCount(y));
  VGPU_RETURN_IF_ERROR(DispatchReducible<ReaderDispatch>(x.dtype, AcceptDType()));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 0, read.x_count, x.dtype));
  if (y.dtype != DType::kInt32 && y.dtype != DType::kInt64) {
    return absl::InvalidArgumentError("arg-reduce output must be int32 or int64");
  }
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 1, read.y_count, y.dtype));
  return read;
}

}  // namespace vgpu::reduction_launch
