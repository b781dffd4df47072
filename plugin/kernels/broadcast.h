// Numpy-style broadcasting of tensor shapes for the plugin's TensorFlow-side kernels (the rules
// of TensorFlow's BCast): the output shape of an element-wise op, and the compact shapes to
// describe its operands to a kernel: adjacent dimensions that every operand treats alike
// (all broadcast, or all not) merged into one and output dimensions of size 1 dropped, so that
// same-shape operands become one dimension and most broadcasts two or three.
// Header-only: pure functions on shapes, no device data.
#ifndef VGPU_KERNELS_BROADCAST_H_
#define VGPU_KERNELS_BROADCAST_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"

namespace vgpu {

using Shape = std::vector<int64_t>;

struct BroadcastShapes {
  // The broadcast shape: TensorFlow's output shape for the op.
  Shape output;
  // The output with size-1 dimensions dropped and alike neighbours merged; at least one
  // dimension ([1] for a single element).
  Shape merged_output;
  // Each operand in merged_output's frame: same rank, each dimension equal to the output's or 1.
  std::vector<Shape> merged_operands;
};


// Broadcasts `operands` against each other: shapes are aligned at their last dimension and, per
// dimension, every operand must have the same size or 1 (a missing leading dimension counts as
// 1). Returns std::nullopt when they are incompatible (the caller words TensorFlow's message).
// Dimensions must be non-negative (TensorFlow's shapes always are).
inline std::optional<BroadcastShapes> Broadcast(absl::Span<const Shape> operands) {
  size_t rank = 0;
  for (const Shape& shape : operands) rank = std::max(rank, shape.size());
  // aligned[k][d]: operand k's size along output dimension d.
  std::vector<Shape> aligned(operands.size(), Shape(rank, 1));
  BroadcastShapes result;
  result.output.assign(rank, 1);
  for (size_t k = 0; k < operands.size(); ++k) {
    const size_t pad = rank - operands[k].size();
    for (size_t d = 0; d < operands[k].size(); ++d) aligned[k][pad + d] = operands[k][d];
  }
  for (size_t d = 0; d < rank; ++d) {
    int64_t size = 1;
    for (const Shape& shape : aligned) {
      if (shape[d] == 1 || shape[d] == size) continue;
      if (size != 1) return std::nullopt;
      size = shape[d];
    }
    result.output[d] = size;
  }
  // Merge: keep output dimensions of size != 1; join a dimension to the previous kept one when
  // every operand is broadcast along both or along neither.
  result.merged_operands.assign(operands.size(), Shape());
  std::vector<bool> previous_broadcast(operands.size(), false);
  for (size_t d = 0; d < rank; ++d) {
    if (result.output[d] == 1) continue;
    bool merge = !result.merged_output.empty();
    for (size_t k = 0; k < operands.size() && merge; ++k) {
      merge = previous_broadcast[k] == (aligned[k][d] == 1);
    }
    if (merge) {
      result.merged_output.back() *= result.output[d];
      for (size_t k = 0; k < operands.size(); ++k) {
        result.merged_operands[k].back() *= aligned[k][d];
      }
      continue;
    }
    result.merged_output.push_back(result.output[d]);
    for (size_t k = 0; k < operands.size(); ++k) {
      previous_broadcast[k] = aligned[k][d] == 1;
      result.merged_operands[k].push_back(aligned[k][d]);
    }
  }
  if (result.merged_output.empty()) {  // a single element
    result.merged_output.push_back(1);
    for (Shape& shape : result.merged_operands) shape.push_back(1);
  }
  return result;
}

}  // namespace vgpu

#endif  // VGPU_KERNELS_BROADCAST_H_
