// The broadcast of an element-wise launch (protocol/kernels/elementwise.h states its rules),
// worked out once for every executor: the output's dimensions with adjacent dimensions merged
// where every input broadcasts alike (numpy rules, rank <= kMaxRank), each input's element
// stride along them (0 along a dimension it repeats), and the element counts the buffers must
// hold. Same-shape operands collapse to one dimension, a scalar operand to stride 0. The layout
// is plain data: the CPU executor walks it in contiguous segments, the CUDA executor copies it
// to the device and computes each output element's input offsets with Offsets().
#ifndef VGPU_BACKEND_LAUNCH_BROADCAST_LAYOUT_H_
#define VGPU_BACKEND_LAUNCH_BROADCAST_LAYOUT_H_

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"
#include "plugin/backend/launch/host_device.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu {

template <int kInputs>
struct BroadcastLayout {
  int rank = 1;                             // >= 1 after merging
  int64_t dims[kMaxRank] = {1};             // merged output dimensions
  int64_t strides[kInputs][kMaxRank] = {};  // element strides per input, 0 = broadcast
  int64_t output_count = 0;
  int64_t input_counts[kInputs] = {};

  // The element offset of output element `index` (< output_count) in each input.
  VGPU_HOST_DEVICE void Offsets(int64_t index, int64_t (&offsets)[kInputs]) const {
    for (int k = 0; k < kInputs; ++k) offsets[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t dim = dims[d];
      const int64_t position = d == 0 ? index : index % dim;
      if (d != 0) index /= dim;
      for (int k = 0; k < kInputs; ++k) offsets[k] += position * strides[k][d];
    }
  }
};

// The layout of an element-wise launch whose output descriptor is `output` and whose inputs
// are `inputs`. InvalidArgument if a shape is malformed (a rank or a dimension out of range, an
// element count past kMaxLaunchElements) or an input does not broadcast to the output. Defined
// for 2 inputs (binary ops) and 3 (select). Pure, thread-safe.
template <int kInputs>
absl::StatusOr<BroadcastLayout<kInputs>> MakeBroadcastLayout(
    const TensorDescriptorSettings& output,
    const std::array<TensorDescriptorSettings, kInputs>& inputs);

extern template absl::StatusOr<BroadcastLayout<2>> MakeBroadcastLayout<2>(
    const TensorDescriptorSettings&, const std::array<TensorDescriptorSettings, 2>&);
extern template absl::StatusOr<BroadcastLayout<3>> MakeBroadcastLayout<3>(
    const TensorDescriptorSettings&, const std::array<TensorDescriptorSettings, 3>&);

}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_BROADCAST_LAYOUT_H_
