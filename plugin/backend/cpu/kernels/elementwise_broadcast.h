// The iteration machinery shared by the element-wise kernels of the CPU backing executor:
//   ParallelBlocks      splits a flat range over the executor's thread pool;
//   BroadcastLayout     an element-wise launch's broadcast, with adjacent dimensions merged
//                       where every input broadcasts alike (numpy rules, rank <= kMaxRank);
//   ForEachSegment      walks the output in contiguous segments, in parallel, handing each
//                       segment the matching input offsets. Along a segment every input is
//                       either contiguous (stride 1) or one repeated element (stride 0), so a
//                       segment is computed with a flat Eigen expression and a broadcast is
//                       never materialised.
// Same-shape operands collapse to one dimension (one long contiguous segment per block), a
// scalar operand to stride 0.
#ifndef VGPU_BACKEND_CPU_KERNELS_ELEMENTWISE_BROADCAST_H_
#define VGPU_BACKEND_CPU_KERNELS_ELEMENTWISE_BROADCAST_H_

#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/protocol/descriptors.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {

// Calls block(begin, end) for disjoint blocks covering [0, count), in parallel on `device`
// (inline when the work is small). `per_element` is the cost of one element. Blocks start at
// multiples of 16 elements so that vectorised loops stay aligned with each other. Blocks until
// every block has run.
inline void ParallelBlocks(const Eigen::ThreadPoolDevice& device, int64_t count,
                           const Eigen::TensorOpCost& per_element,
                           const std::function<void(int64_t, int64_t)>& block) {
  if (count <= 0) return;
  device.parallelFor(
      count, per_element,
      [](Eigen::Index size) -> Eigen::Index { return (size + 15) & ~Eigen::Index{15}; },
      [&block](Eigen::Index begin, Eigen::Index end) { block(begin, end); });
}

// Cost of one element of a kernel reading `bytes_in` and writing `bytes_out` bytes with about
// `cycles` cycles of arithmetic.
inline Eigen::TensorOpCost ElementCost(double bytes_in, double bytes_out, double cycles) {
  return Eigen::TensorOpCost(bytes_in, bytes_out, cycles);
}

// The most elements a launch may describe (keeps byte counts of any dtype within 64 bits).
inline constexpr int64_t kMaxElements = kMaxLaunchElements;

// The element count of a dense tensor descriptor; InvalidArgument if its rank or a dimension
// is out of range.
inline absl::StatusOr<int64_t> DenseElementCount(const TensorDescriptorSettings& tensor) {
  return CheckedElementCount("tensor", tensor.dims, tensor.rank, kMaxElements);
}

template <int kInputs>
struct BroadcastLayout {
  int rank = 1;                                  // >= 1 after merging
  int64_t dims[kMaxRank] = {1};                  // merged output dimensions
  int64_t strides[kInputs][kMaxRank] = {};       // element strides per input, 0 = broadcast
  int64_t output_count = 0;
  std::array<int64_t, kInputs> input_counts = {};
};

// The layout of an element-wise launch whose output descriptor is `output` and whose inputs
// are `inputs` (see protocol/kernels/elementwise.h for the broadcasting rules it checks).
// InvalidArgument if a shape is malformed or an input does not broadcast to the output.
template <int kInputs>
absl::StatusOr<BroadcastLayout<kInputs>> MakeBroadcastLayout(
    const TensorDescriptorSettings& output,
    const std::array<TensorDescriptorSettings, kInputs>& inputs) {
  BroadcastLayout<kInputs> layout;
  const int rank = output.rank;
  if (rank < 0 || rank > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat("output rank ", rank, " is out of range"));
  }
  // in_dims[k][d]: input k's dimension aligned to output dimension d (1 where it has none).
  int64_t in_dims[kInputs][kMaxRank];
  {
    absl::StatusOr<int64_t> count = DenseElementCount(output);
    if (!count.ok()) return count.status();
    layout.output_count = *count;
  }
  for (int k = 0; k < kInputs; ++k) {
    const TensorDescriptorSettings& input = inputs[k];
    if (input.rank < 0 || input.rank > rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("input ", k, " has rank ", input.rank, ", the output ", rank));
    }
    const int pad = rank - input.rank;
    layout.input_counts[k] = 1;
    for (int d = 0; d < rank; ++d) {
      const int64_t dim = d < pad ? 1 : input.dims[d - pad];
      if (dim != output.dims[d] && dim != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input ", k, " dimension ", d - pad, " (", dim,
            ") does not broadcast to the output's (", output.dims[d], ")"));
      }
      if (dim != 0 && layout.input_counts[k] > kMaxElements / dim) {
        return absl::InvalidArgumentError("tensor has too many elements");
      }
      in_dims[k][d] = dim;
      layout.input_counts[k] *= dim;
    }
  }
  if (layout.output_count == 0) return layout;

  // Merge: drop output dimensions of size 1, join neighbours every input treats alike.
  bool broadcast[kInputs][kMaxRank] = {};
  int merged = 0;
  for (int d = 0; d < rank; ++d) {
    if (output.dims[d] == 1) continue;
    bool same_as_previous = merged > 0;
    for (int k = 0; k < kInputs && same_as_previous; ++k) {
      same_as_previous = broadcast[k][merged - 1] == (in_dims[k][d] == 1);
    }
    if (same_as_previous) {
      layout.dims[merged - 1] *= output.dims[d];
      continue;
    }
    layout.dims[merged] = output.dims[d];
    for (int k = 0; k < kInputs; ++k) broadcast[k][merged] = in_dims[k][d] == 1;
    ++merged;
  }
  if (merged == 0) {  // a single element
    layout.rank = 1;
    layout.dims[0] = 1;
    for (int k = 0; k < kInputs; ++k) layout.strides[k][0] = 1;
    return layout;
  }
  layout.rank = merged;
  for (int k = 0; k < kInputs; ++k) {
    int64_t stride = 1;
    for (int d = merged - 1; d >= 0; --d) {
      layout.strides[k][d] = broadcast[k][d] ? 0 : stride;
      if (!broadcast[k][d]) stride *= layout.dims[d];
    }
  }
  return layout;
}

// Input positions of one output segment: element offsets into each input and each input's
// stride along the segment (1: contiguous, 0: the same element repeated).
template <int kInputs>
struct Segment {
  int64_t output_offset = 0;
  int64_t length = 0;
  std::array<int64_t, kInputs> input_offsets = {};
  std::array<int64_t, kInputs> input_strides = {};
};

// Calls segment(Segment<kInputs>) for contiguous runs of the output that together cover it
// once, in parallel on `device`. A run never crosses a row of the innermost merged dimension.
template <int kInputs, typename SegmentFn>
void ForEachSegment(const Eigen::ThreadPoolDevice& device, const BroadcastLayout<kInputs>& layout,
                    const Eigen::TensorOpCost& per_element, SegmentFn&& segment) {
  const int rank = layout.rank;
  const int64_t inner = layout.dims[rank - 1];
  ParallelBlocks(device, layout.output_count, per_element, [&](int64_t begin, int64_t end) {
    Segment<kInputs> current;
    int64_t index[kMaxRank] = {};  // multi-index of the current row over dims [0, rank - 1)
    int64_t row = begin / inner;
    int64_t column = begin % inner;
    for (int d = rank - 2; d >= 0; --d) {
      index[d] = row % layout.dims[d];
      row /= layout.dims[d];
    }
    std::array<int64_t, kInputs> row_offsets = {};
    for (int k = 0; k < kInputs; ++k) {
      current.input_strides[k] = layout.strides[k][rank - 1];
      for (int d = 0; d < rank - 1; ++d) row_offsets[k] += index[d] * layout.strides[k][d];
    }
    int64_t position = begin;
    while (position < end) {
      current.output_offset = position;
      current.length = std::min(inner - column, end - position);
      for (int k = 0; k < kInputs; ++k) {
        current.input_offsets[k] = row_offsets[k] + column * current.input_strides[k];
      }
      segment(static_cast<const Segment<kInputs>&>(current));
      position += current.length;
      column = 0;
      // Next row: advance the multi-index like an odometer.
      for (int d = rank - 2; d >= 0; --d) {
        ++index[d];
        for (int k = 0; k < kInputs; ++k) row_offsets[k] += layout.strides[k][d];
        if (index[d] < layout.dims[d]) break;
        for (int k = 0; k < kInputs; ++k) row_offsets[k] -= layout.strides[k][d] * layout.dims[d];
        index[d] = 0;
      }
    }
  });
}

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_ELEMENTWISE_BROADCAST_H_
