// The bound on the operands of the convolution, matmul, bias and rearrange launches (the kernel
// ids of protocol/kernels/convolution.h). Their kernels index with products of a tensor's
// extents (patch sizes, matrix strides, image offsets): a bound well under the launch-wide
// kMaxLaunchElements keeps every such product far from 64-bit overflow, and it is beyond any
// device memory.
#ifndef VGPU_BACKEND_LAUNCH_OPERAND_LIMITS_H_
#define VGPU_BACKEND_LAUNCH_OPERAND_LIMITS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "plugin/backend/launch/launch_view.h"

namespace vgpu {

// No tensor of those launches holds more elements than this.
inline constexpr int64_t kMaxOperandElements = int64_t{1} << 48;

// The element count of a tensor of dims[0..rank) named `what`: InvalidArgument when the rank is
// outside [0, kMaxRank], a dimension is negative or the count exceeds kMaxOperandElements.
// Pure, thread-safe.
inline absl::StatusOr<int64_t> CheckedOperandElements(absl::string_view what,
                                                      const int64_t* dims, int rank) {
  return CheckedElementCount(what, dims, rank, kMaxOperandElements);
}

}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_OPERAND_LIMITS_H_
