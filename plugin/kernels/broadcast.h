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
#include <initializer_list>
#include <optional>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"

namespace vgpu {

using Shape = std::vector<int64_t>;

// A shape held inline up to rank 8 (every shape an element-wise op usually sees): computing a
// broadcast allocates nothing then, once per op on TensorFlow's thread.
using BroadcastDims = absl::InlinedVector<int64_t, 8>;

struct BroadcastShapes {
  // The broadcast shape: TensorFlow's output shape for the op.
  BroadcastDims output;
  // The output with size-1 dimensions dropped and alike neighbours merged; at least one
  // dimension ([1] for a single element).
  BroadcastDims merged_output;
  // Each operand in merged_output's frame: same rank, each dimension equal to the output's or 1.
  absl::InlinedVector<BroadcastDims, 3> merged_operands;
};

// Broadcasts `operands` against each other: shapes are aligned at their last dimension and, per
// dimension, every operand must have the same size or 1 (a missing leading dimension counts as
// 1). Returns std::nullopt when they are incompatible (the caller words TensorFlow's message).
// Dimensions must be non-negative (TensorFlow's shapes always are).
inline std::optional<BroadcastShapes> Broadcast(
    std::initializer_list<absl::Span<const int64_t>> operands) {
  size_t rank = 0;
  for (absl::Span<const int64_t> shape : operands) rank = std::max(rank, shape.size());
  // Operand k's size along output dimension d; a missing leading dimension is 1.
  auto aligned = [rank](absl::Span<const int64_t> shape, size_t d) -> int64_t {
    const size_t pad = rank - shape.size();
    return d < pad ? 1 : shape[d - pad];
  };
  BroadcastShapes result;
  result.output.assign(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    int64_t size = 1;
    for (absl::Span<const int64_t> shape : operands) {
      const int64_t dim = aligned(shape, d);
      if (dim == 1 || dim == size) continue;
      if (size != 1) return std::nullopt;
      size = dim;
    }
    result.output[d] = size;
  }
  // Merge: keep output dimensions of size != 1; join a dimension to the previous kept one when
  // every operand is broadcast along both or along neither.
  const size_t count = operands.size();
  const absl::Span<const int64_t>* shapes = operands.begin();
  result.merged_operands.resize(count);
  absl::InlinedVector<bool, 3> previous_broadcast(count, false);
  for (size_t d = 0; d < rank; ++d) {
    if (result.output[d] == 1) continue;
    bool merge = !result.merged_output.empty();
    for (size_t k = 0; k < count && merge; ++k) {
      merge = previous_broadcast[k] == (aligned(shapes[k], d) == 1);
    }
    if (merge) {
      result.merged_output.back() *= result.output[d];
      for (size_t k = 0; k < count; ++k) {
        result.merged_operands[k].back() *= aligned(shapes[k], d);
      }
      continue;
    }
    result.merged_output.push_back(result.output[d]);
    for (size_t k = 0; k < count; ++k) {
      const int64_t dim = aligned(shapes[k], d);
      previous_broadcast[k] = dim == 1;
      result.merged_operands[k].push_back(dim);
    }
  }
  if (result.merged_output.empty()) {  // a single element
    result.merged_output.push_back(1);
    for (BroadcastDims& shape : result.merged_operands) shape.push_back(1);
  }
  return result;
}

}  // namespace vgpu

#endif  // VGPU_KERNELS_BROADCAST_H_
