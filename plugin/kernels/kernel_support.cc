// Kernel helpers (see kernel_support.h).
#include "plugin/kernels/kernel_support.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vgpu {

void FailOp(TF_OpKernelContext* context, const absl::Status& status) {
  if (status.ok()) return;
  ScopedTfStatus tf_status;
  ToTfStatus(status, tf_status.get());
  TF_OpKernelContext_Failure(context, tf_status.get());
}

absl::StatusOr<TensorPtr> GetInput(TF_OpKernelContext* context, int index) {
  ScopedTfStatus status;
  TF_Tensor* tensor = nullptr;
  TF_GetInput(context, index, &tensor, status.get());
  TensorPtr owned(tensor);
  if (absl::Status s = status.ToStatus(); !s.ok()) return s;
  return owned;
}

std::vector<int64_t> ShapeOf(const TF_Tensor* tensor) {
  std::vector<int64_t> dims(TF_NumDims(tensor));
  for (int i = 0; i < static_cast<int>(dims.size()); ++i) dims[i] = TF_Dim(tensor, i);
  return dims;
}

absl::InlinedVector<int64_t, 8> InlineShapeOf(const TF_Tensor* tensor) {
  absl::InlinedVector<int64_t, 8> dims(TF_NumDims(tensor));
  for (int i = 0; i < static_cast<int>(dims.size()); ++i) dims[i] = TF_Dim(tensor, i);
  return dims;
}

std::vector<std::vector<int64_t>> ShapesOf(absl::Span<const TensorPtr> tensors) {
  std::vector<std::vector<int64_t>> shapes;
  shapes.reserve(tensors.size());
  for (const TensorPtr& tensor : tensors) shapes.push_back(ShapeOf(tensor.get()));
  return shapes;
}

absl::StatusOr<ClientStream*> GetClientStream(TF_OpKernelContext* context) {
  ScopedTfStatus status;
  SP_Stream stream = TF_GetStream(context, status.get());
  if (absl::Status s = status.ToStatus(); !s.ok()) return s;
  if (stream == nullptr || stream->stream == nullptr) {
    return absl::InternalError("op has no virtual GPU stream");
  }
  return stream->stream.get();
}

std::string ShapeString(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

absl::StatusOr<std::vector<int64_t>> ShapeOfRank(const TF_Tensor* tensor, size_t rank,
                                                 absl::string_view message) {
  std::vector<int64_t> dims = ShapeOf(tensor);
  if (dims.size() != rank) {
    return absl::InvalidArgumentError(absl::StrCat(message, ShapeString(dims)));
  }
  return dims;
}

int64_t NumElements(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

BufferArg BufferOf(const TF_Tensor* tensor) {
  return BufferArg{reinterpret_cast<uint64_t>(TF_TensorData(tensor)), TF_TensorByteSize(tensor)};
}

}  // namespace vgpu
