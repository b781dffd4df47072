// The CPU executor's engine behind the data movement kernels: runs a strided copy plan
// (launch/data_movement_launch.h: transpose, slicing, padding, tiling, concatenation and
// reversal are each one or a few such copies) and fills elements, multi-threaded on the
// executor's thread pool.
#ifndef VGPU_BACKEND_CPU_KERNELS_STRIDED_COPY_ENGINE_H_
#define VGPU_BACKEND_CPU_KERNELS_STRIDED_COPY_ENGINE_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/launch/data_movement_launch.h"

namespace Eigen {
struct ThreadPoolDevice;
}  // namespace Eigen

namespace vgpu::cpu_kernels {

// Runs `copy` on the device's threads. `copy` must have passed CheckStridedCopyBounds for the
// buffers behind `src` and `dst`, which must not overlap. Blocks until done. InvalidArgument
// only for an element size other than 1, 2, 4 or 8.
absl::Status RunStridedCopy(const Eigen::ThreadPoolDevice& device,
                            const data_movement_launch::StridedCopy& copy, const uint8_t* src,
                            uint8_t* dst);

// Runs a checked copy between two buffers of the launch: nothing for a copy that moves no
// element, else the buffers' sizes are checked (LaunchContext::Buffer) and the copy runs.
absl::Status RunBufferCopy(const KernelContext& context,
                           const data_movement_launch::BufferCopy& copy);

// The kernel of a launch that is one checked copy (kTranspose, kStridedSlice, kTile, kReverse):
// reads it with kRead, a data movement reader, and runs it (RunBufferCopy).
template <absl::StatusOr<data_movement_launch::BufferCopy> (*kRead)(const LaunchView&)>
absl::Status BufferCopyKernel(const KernelContext& context) {
  absl::StatusOr<data_movement_launch::BufferCopy> copy = kRead(context);
  if (!copy.ok()) return copy.status();
  return RunBufferCopy(context, *copy);
}

// Sets `count` elements of `element_size` bytes at `dst` to the low `element_size` bytes of
// `value_bits` (native byte order), on the device's threads. Blocks until done.
// InvalidArgument only for an element size other than 1, 2, 4 or 8.
absl::Status FillElements(const Eigen::ThreadPoolDevice& device, uint8_t* dst, int64_t count,
                          uint32_t element_size, uint64_t value_bits);

// Sets every element of y (a dense row-major tensor of `pad.y_dims`, `pad.copy.plan`'s element
// size) that lies outside x's box in it to the pad value, and no other: each padding element is
// written once, and the box is left for the copy of x. On the device's threads; blocks until
// done. InvalidArgument only for an element size other than 1, 2, 4 or 8.
absl::Status FillPadding(const Eigen::ThreadPoolDevice& device, uint8_t* y,
                         const data_movement_launch::PadLaunch& pad);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_STRIDED_COPY_ENGINE_H_
