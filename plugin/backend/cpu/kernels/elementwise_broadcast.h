// The iteration machinery shared by the element-wise kernels of the CPU backing executor:
//   ParallelBlocks      splits a flat range over the executor's thread pool;
//   ForEachSegment      walks the output of a BroadcastLayout (launch/broadcast_layout.h: an
//                       element-wise launch's broadcast, adjacent dimensions merged where every
//                       input broadcasts alike) in contiguous segments, in parallel, handing each
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

#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/launch/broadcast_layout.h"
#include "plugin/backend/launch/dense_tensor.h"
#include "plugin/protocol/descriptors.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {

// Calls block(begin, end) for disjoint blocks covering [0, count), in parallel on `device`
// (inline when the work is small). `per_element` is the cost of one element. Blocks start at
// multiples of 16 elements so that vectorised loops stay aligned with each other. Blocks until
// every block has run. A template, not a std::function: a block that captures more than two
// pointers would cost a heap allocation per launch (Eigen's std::function holds only a
// reference to it).
template <typename Block>
inline void ParallelBlocks(const Eigen::ThreadPoolDevice& device, int64_t count,
                           const Eigen::TensorOpCost& per_element, const Block& block) {
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

// The launch layer's dense-tensor count and broadcast layout (launch/dense_tensor.h,
// launch/broadcast_layout.h), under the names the CPU kernels use.
using ::vgpu::BroadcastLayout;
using ::vgpu::DenseElementCount;
using ::vgpu::MakeBroadcastLayout;

// The launch readers size buffers with ReaderDispatch's storage types: the CPU kernels' element
// types must match them in size and alignment, as LaunchContext::Buffer<T> checks with them.
static_assert(sizeof(Eigen::half) == sizeof(ReaderElementTypes::Float16) &&
              alignof(Eigen::half) == alignof(ReaderElementTypes::Float16));
static_assert(sizeof(Eigen::bfloat16) == sizeof(ReaderElementTypes::BFloat16) &&
              alignof(Eigen::bfloat16) == alignof(ReaderElementTypes::BFloat16));
static_assert(sizeof(bool) == sizeof(ReaderElementTypes::Bool));

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
