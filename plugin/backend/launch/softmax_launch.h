// The softmax launches of the reduction family (protocol/kernels/reduction.h: softmax and log
// softmax, SoftmaxCrossEntropyWithLogits, SparseSoftmaxCrossEntropyWithLogits), read once for
// every executor: descriptors, parameters and buffer sizes, validated as a hostile client could
// send them, in the order the CPU executor's kernels always checked them. Rows of [batch,
// classes]; every dtype is floating.
#ifndef VGPU_BACKEND_LAUNCH_SOFTMAX_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_SOFTMAX_LAUNCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "plugin/backend/launch/launch_view.h"
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

// reduction::kSparseSoftmaxCrossEntropy: descriptors [logits [batch, classes > 0]], buffers
// [logits, loss [batch], backprop], params array<int64> labels (batch values, not range-checked:
// a label outside [0, classes) gives a NaN row).
struct SparseCrossEntropyLaunch {
  DType dtype = DType::kFloat32;
  int64_t batch = 0, classes = 0, count = 0;
  std::vector<int64_t> labels;
};
absl::StatusOr<SparseCrossEntropyLaunch> ReadSparseCrossEntropyLaunch(const LaunchView& launch);

}  // namespace vgpu::softmax_launch

#endif  // VGPU_BACKEND_LAUNCH_SOFTMAX_LAUNCH_H_
