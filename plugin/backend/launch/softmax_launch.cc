// The softmax and cross-entropy launch readers (see softmax_launch.h).
#include "plugin/backend/launch/softmax_launch.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/launch/dense_tensor.h"
#include "plugin/backend/launch/dtype_sets.h"
#include "plugin/backend/launch/reader_dispatch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/reduction.h"

namespace vgpu::softmax_launch {
namespace {

absl::StatusOr<Broadcast2D> BroadcastOf(const TensorDescriptorSettings& operand, int64_t batch,
                                        int64_t classes) {
  if (operand.rank != 2 || (operand.dims[0] != batch && operand.dims[0] != 1) ||
      (operand.dims[1] != classes && operand.dims[1] != 1)) {
    return absl::InvalidArgumentError(
        "cross-entropy operands must be rank 2 and broadcastable to the backprop shape");
  }
  Broadcast2D layout;
  layout.row_stride = operand.dims[0] == 1 ? 0 : operand.dims[1];
  layout.col_stride = operand.dims[1] == 1 ? 0 : 1;
  return layout;
}

// The rows of the [batch, classes] tensor every launch is sized by (its rank and dims checked
// by the caller): its dtype, batch, classes and element count into *read.
template <typename Launch>
absl::Status ReadRows(const TensorDescriptorSettings& tensor, Launch* read) {
  read->dtype = tensor.dtype;
  read->batch = tensor.dims[0];
  read->classes = tensor.dims[1];
  VGPU_ASSIGN_OR_RETURN(read->count, DenseElementCount(tensor));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SoftmaxLaunch> ReadSoftmaxLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings tensor,
                        launch.Descriptor<TensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(reduction::SoftmaxParams params,
                        launch.Params().Get<reduction::SoftmaxParams>());
  if (tensor.rank != 2 || tensor.dims[0] < 0 || tensor.dims[1] < 0) {
    return absl::InvalidArgumentError("softmax takes a [batch, classes] tensor");
  }
  SoftmaxLaunch read;
  read.log = params.log != 0;
  VGPU_RETURN_IF_ERROR(ReadRows(tensor, &read));
  VGPU_RETURN_IF_ERROR(ReaderDispatch::Floating(tensor.dtype, AcceptDType()));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffers(launch, tensor.dtype, {read.count, read.count}));
  return read;
}

absl::StatusOr<CrossEntropyLaunch> ReadCrossEntropyLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(4));
  TensorDescriptorSettings logits, labels, backprop;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&logits, &labels, &backprop));
  if (backprop.rank != 2 || backprop.dims[0] < 0 || backprop.dims[1] < 0) {
    return absl::InvalidArgumentError("cross-entropy backprop must be [batch, classes]");
  }
  if (logits.dtype != backprop.dtype || labels.dtype != backprop.dtype) {
    return absl::InvalidArgumentError("cross-entropy operand dtypes differ");
  }
  CrossEntropyLaunch read;
  VGPU_RETURN_IF_ERROR(ReadRows(backprop, &read));
  VGPU_ASSIGN_OR_RETURN(read.logits_layout, BroadcastOf(logits, read.batch, read.classes));
  VGPU_ASSIGN_OR_RETURN(read.labels_layout, BroadcastOf(labels, read.batch, read.classes));
  VGPU_ASSIGN_OR_RETURN(read.logits_count, DenseElementCount(logits));
  VGPU_ASSIGN_OR_RETURN(read.labels_count, DenseElementCount(labels));
  VGPU_RETURN_IF_ERROR(ReaderDispatch::Floating(read.dtype, AcceptDType()));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffers(
      launch, read.dtype, {read.logits_count, read.labels_count, read.batch, read.count}));
  return read;
}

namespace {

// The logits descriptor both sparse cross-entropy launches start with.
absl::StatusOr<SparseCrossEntropyLaunch> ReadSparseLogits(const TensorDescriptorSettings& logits) {
  if (logits.rank != 2 || logits.dims[0] < 0 || logits.dims[1] <= 0) {
    return absl::InvalidArgumentError("sparse cross-entropy takes logits [batch, classes > 0]");
  }
  SparseCrossEntropyLaunch read;
  VGPU_RETURN_IF_ERROR(ReadRows(logits, &read));
  VGPU_RETURN_IF_ERROR(ReaderDispatch::Floating(read.dtype, AcceptDType()));
  return read;
}

}  // namespace

absl::StatusOr<SparseCrossEntropyLaunch> ReadSparseCrossEntropyLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(4));
  TensorDescriptorSettings logits, labels;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&logits, &labels));
  VGPU_ASSIGN_OR_RETURN(SparseCrossEntropyLaunch read, ReadSparseLogits(logits));
  if (labels.rank != 1 || labels.dims[0] != read.batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse cross-entropy takes labels [", read.batch, "] for logits [", read.batch, ", ",
        read.classes, "]"));
  }
  if (labels.dtype != DType::kInt32 && labels.dtype != DType::kInt64) {
    return absl::InvalidArgumentError("sparse cross-entropy labels must be int32 or int64");
  }
  read.labels_on_device = true;
  read.label_dtype = labels.dtype;
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 0, read.count, read.dtype));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 1, read.batch, read.label_dtype));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 2, read.batch, read.dtype));
  VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, 3, read.count, read.dtype));
  return read;
}

absl::StatusOr<SparseCrossEntropyLaunch> ReadSparseCrossEntropyHostLabelsLaunch(
    const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings logits,
                        launch.Descriptor<TensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(SparseCrossEntropyLaunch read, ReadSparseLogits(logits));
  ParamReader reader = launch.Params();
  VGPU_ASSIGN_OR_RETURN(read.labels, reader.GetArray<int64_t>(static_cast<uint32_t>(read.batch)));
  if (static_cast<int64_t>(read.labels.size()) != read.batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", read.batch, " labels, the launch carries ", read.labels.size()));
  }
  VGPU_RETURN_IF_ERROR(
      ExpectDenseBuffers(launch, read.dtype, {read.count, read.batch, read.count}));
  return read;
}

}  // namespace vgpu::softmax_launch
