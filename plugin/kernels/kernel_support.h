// Helpers shared by the plugin's op kernels: RAII for TensorFlow's C handles, access to the
// launch stream, and the single place where a kernel's absl::Status becomes an op failure.
#ifndef VGPU_KERNELS_KERNEL_SUPPORT_H_
#define VGPU_KERNELS_KERNEL_SUPPORT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "plugin/common/status_macros.h"
#include "plugin/device/se_handles.h"
#include "plugin/device/tf_status_bridge.h"
#include "plugin/protocol/command.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/c/tf_tensor.h"

namespace vgpu {

struct TensorDeleter {
  void operator()(TF_Tensor* tensor) const { TF_DeleteTensor(tensor); }
};
using TensorPtr = std::unique_ptr<TF_Tensor, TensorDeleter>;

// Marks the op failed with `status` (no-op for OK).
void FailOp(TF_OpKernelContext* context, const absl::Status& status);

absl::StatusOr<TensorPtr> GetInput(TF_OpKernelContext* context, int index);

// The shape of `tensor` as a vector of dimensions.
std::vector<int64_t> ShapeOf(const TF_Tensor* tensor);
// The same without a heap allocation up to rank 8, for the ops launched most often.
absl::InlinedVector<int64_t, 8> InlineShapeOf(const TF_Tensor* tensor);

// The shapes of `tensors`, in order (e.g. of OpContext::Inputs:
// `const auto [x_dims, y_dims] = ShapesOf(inputs);`).
template <size_t N>
std::array<std::vector<int64_t>, N> ShapesOf(const std::array<TensorPtr, N>& tensors) {
  std::array<std::vector<int64_t>, N> shapes;
  for (size_t i = 0; i < N; ++i) shapes[i] = ShapeOf(tensors[i].get());
  return shapes;
}

// The shapes of `tensors`, in order (e.g. of OpContext::InputList).
std::vector<std::vector<int64_t>> ShapesOf(absl::Span<const TensorPtr> tensors);

// A shape as TensorFlow writes it in messages (TensorShape::DebugString): "[2,3]", "[]".
std::string ShapeString(absl::Span<const int64_t> dims);

// The shape of `tensor` when it has `rank` dimensions; otherwise InvalidArgument with `message`
// followed by the shape as ShapeString writes it (TensorFlow's "images must be 4-D[2,3]").
absl::StatusOr<std::vector<int64_t>> ShapeOfRank(const TF_Tensor* tensor, size_t rank,
                                                 absl::string_view message);

// The number of elements of `dims` (1 for a scalar). Dimensions are non-negative and their
// product fits in int64, as in every shape TensorFlow hands a kernel.
int64_t NumElements(absl::Span<const int64_t> dims);

// The client stream this op runs on.
absl::StatusOr<ClientStream*> GetClientStream(TF_OpKernelContext* context);

// The device range of a tensor's buffer.
BufferArg BufferOf(const TF_Tensor* tensor);

}  // namespace vgpu

#endif  // VGPU_KERNELS_KERNEL_SUPPORT_H_
