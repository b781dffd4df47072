// The softmax launches of the reduction family (protocol/kernels/reduction.h: softmax and log
// softmax, SoftmaxCrossEntropyWithLogits, SparseSoftmaxCrossEntropyWithLogits), read once for
// every executor: descriptors, parameters and buffer sizes, validated as a hostile client could
// send them, in the order the CPU executor's kernels always checked them. Rows of [batch,
// classes]; every dtype is floating. The cross-entropy launches' buffers as one element type,
// for both executors' kernels.
#ifndef VGPU_BACKEND_LAUNCH_SOFTMAX_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_SOFTMAX_LAUNCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu::softmax_launch {

// reduction::kSoftmax: descriptors [tensor [batch, classes]], buffers [x, y], params
// SoftmaxParams.
struct SoftmaxLaunch {
  DType dtype = DType::kFloat32;
  int64_t batch = 0, classes = 0, count = 0;
  bool log = false;
};
absl::StatusOr<SoftmaxLaunch> ReadSoftmaxLaunch(const LaunchView& launch);

// Where element [b, c] of a rank-2 operand broadcast to [batch, classes] lies:
// b * row_stride + c * col_stride (a stride is 0 along a dimension of 1). Plain data.
struct Broadcast2D {
  int64_t row_stride = 0, col_stride = 0;
};

// reduction::kSoftmaxCrossEntropy: descriptors [logits, labels, backprop [batch, classes]],
// buffers [logits, labels, loss [batch], backprop].
struct CrossEntropyLaunch {
  DType dtype = DType::kFloat32;
  int64_t batch = 0, classes = 0, count = 0;  // count: backprop's elements
  Broadcast2D logits_layout, labels_layout;
  int64_t logits_count = 0, labels_count = 0;
};
absl::StatusOr<CrossEntropyLaunch> ReadCrossEntropyLaunch(const LaunchView& launch);

// kSoftmaxCrossEntropy's buffers as T.
template <typename T>
struct CrossEntropyBuffers {
  const T* logits;  // launch.logits_count values
  const T* labels;  // launch.labels_count values
  T* loss;          // launch.batch values
  T* backprop;      // launch.count values
};
// Each buffer checked by context.Buffer, in buffer order, to hold its count of T; the first
// error otherwise.
template <typename T, typename Context>
absl::StatusOr<CrossEntropyBuffers<T>> TakeCrossEntropyBuffers(const Context& context,
                                                               const CrossEntropyLaunch& launch) {
  CrossEntropyBuffers<T> b;
  VGPU_ASSIGN_OR_RETURN(b.logits, context.template Buffer<const T>(0, launch.logits_count));
  VGPU_ASSIGN_OR_RETURN(b.labels, context.template Buffer<const T>(1, launch.labels_count));
  VGPU_ASSIGN_OR_RETURN(b.loss, context.template Buffer<T>(2, launch.batch));
  VGPU_ASSIGN_OR_RETURN(b.backprop, context.template Buffer<T>(3, launch.count));
  return b;
}

// reduction::kSparseSoftmaxCrossEntropy: descriptors [logits [batch, classes > 0], labels
// [batch] int32 or int64], buffers [logits, labels, loss [batch], backprop]; and
// kSparseSoftmaxCrossEntropyHostLabels: descriptors [logits], buffers [logits, loss, backprop],
// params array<int64> labels (batch values). Labels are not range-checked: a label outside
// [0, classes) gives a NaN row.
struct SparseCrossEntropyLaunch {
  DType dtype = DType::kFloat32;
  int64_t batch = 0, classes = 0, count = 0;
  bool labels_on_device = false;
  DType label_dtype = DType::kInt64;  // with labels_on_device: kInt32 or kInt64
  std::vector<int64_t> labels;        // without: the launch's labels
};
absl::StatusOr<SparseCrossEntropyLaunch> ReadSparseCrossEntropyLaunch(const LaunchView& launch);
absl::StatusOr<SparseCrossEntropyLaunch> ReadSparseCrossEntropyHostLabelsLaunch(
    const LaunchView& launch);

// The sparse cross-entropy launches' buffers, the logits, loss and backprop as T.
template <typename T>
struct SparseCrossEntropyBuffers {
  const T* logits;                        // launch.count values
  const int32_t* labels32 = nullptr;      // launch.batch values, with label_dtype kInt32
  const int64_t* labels64 = nullptr;      // launch.batch values: the device's, with kInt64, or
                                          // the launch's own without labels_on_device
  T* loss;                                // launch.batch values
  T* backprop;                            // launch.count values
};
// Each buffer checked by context.Buffer, in buffer order, to hold its count; the first error
// otherwise. Without labels_on_device, labels64 points into `launch`.
template <typename T, typename Context>
absl::StatusOr<SparseCrossEntropyBuffers<T>> TakeSparseCrossEntropyBuffers(
    const Context& context, const SparseCrossEntropyLaunch& launch) {
  SparseCrossEntropyBuffers<T> b;
  int index = 0;
  VGPU_ASSIGN_OR_RETURN(b.logits, context.template Buffer<const T>(index++, launch.count));
  if (!launch.labels_on_device) {
    b.labels64 = launch.labels.data();
  } else if (launch.label_dtype == DType::kInt32) {
    VGPU_ASSIGN_OR_RETURN(b.labels32,
                          context.template Buffer<const int32_t>(index++, launch.batch));
  } else {
    VGPU_ASSIGN_OR_RETURN(b.labels64,
                          context.template Buffer<const int64_t>(index++, launch.batch));
  }
  VGPU_ASSIGN_OR_RETURN(b.loss, context.template Buffer<T>(index++, launch.batch));
  VGPU_ASSIGN_OR_RETURN(b.backprop, context.template Buffer<T>(index++, launch.count));
  return b;
}

}  // namespace vgpu::softmax_launch

#endif  // VGPU_BACKEND_LAUNCH_SOFTMAX_LAUNCH_H_
