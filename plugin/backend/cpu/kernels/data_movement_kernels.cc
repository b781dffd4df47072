// CPU kernels of the data movement family (protocol/kernels/data_movement.h): transpose,
// strided slice and its gradient, pad, tile/broadcast, concat and split. The launch layer
// (launch/data_movement_launch.h) reads and checks every launch into strided copy plans; these
// kernels take the buffers and run the plans (strided_copy_engine.h) on the executor's thread
// pool.
#include <vector>

#include "absl/status/status.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/strided_copy_engine.h"
#include "plugin/backend/launch/data_movement_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/data_movement.h"

namespace vgpu::cpu_kernels {
namespace {

using data_movement_launch::BufferCopy;
using data_movement_launch::PadLaunch;
using data_movement_launch::ReadConcatLaunch;
using data_movement_launch::ReadPadLaunch;
using data_movement_launch::ReadSliceScatterLaunch;
using data_movement_launch::ReadSplitLaunch;
using data_movement_launch::ReadStridedSliceLaunch;
using data_movement_launch::ReadTileLaunch;
using data_movement_launch::ReadTransposeLaunch;

// Scatters buffer 0 (the slice) back to where a slice of buffer 1 reads; with `zero_rest`,
// the rest of buffer 1 is zeroed first (kStridedSliceGrad), else kept (kStridedSliceAssign).
absl::Status ScatterSlice(const KernelContext& context, bool zero_rest) {
  VGPU_ASSIGN_OR_RETURN(BufferCopy scatter, ReadSliceScatterLaunch(context));
  if (scatter.dst_elements == 0) return absl::OkStatus();
  VGPU_ASSIGN_OR_RETURN(uint8_t* dx, context.Buffer<uint8_t>(1, scatter.DstBytes()));
  if (zero_rest && scatter.src_elements != scatter.dst_elements) {
    // Otherwise the scatter writes every element.
    VGPU_RETURN_IF_ERROR(FillElements(*context.device, dx, scatter.dst_elements,
                                      scatter.plan.element_size, 0));
  }
  return RunBufferCopy(context, scatter);
}

// data_movement::kStridedSliceGrad: zero dx, then scatter dy back to where the slice read.
absl::Status StridedSliceGrad(const KernelContext& context) {
  return ScatterSlice(context, /*zero_rest=*/true);
}

// data_movement::kStridedSliceAssign: x[slice] = value, the rest of x unchanged.
absl::Status StridedSliceAssign(const KernelContext& context) {
  return ScatterSlice(context, /*zero_rest=*/false);
}

// data_movement::kPad: fill y with the pad value where padded, then copy x into it.
absl::Status Pad(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(PadLaunch pad, ReadPadLaunch(context));
  if (pad.copy.dst_elements == 0) return absl::OkStatus();
  VGPU_ASSIGN_OR_RETURN(uint8_t* y, context.Buffer<uint8_t>(1, pad.copy.DstBytes()));
  // The padding, then x into the box: each element of y written once.
  if (pad.padded) VGPU_RETURN_IF_ERROR(FillPadding(*context.device, y, pad));
  return RunBufferCopy(context, pad.copy);
}

// data_movement::kConcat and kSplit: one copy per piece, in order.
absl::Status RunPieceCopies(const KernelContext& context,
                            const std::vector<BufferCopy>& pieces) {
  for (const BufferCopy& piece : pieces) VGPU_RETURN_IF_ERROR(RunBufferCopy(context, piece));
  return absl::OkStatus();
}

absl::Status Concat(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(std::vector<BufferCopy> pieces, ReadConcatLaunch(context));
  return RunPieceCopies(context, pieces);
}

absl::Status Split(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(std::vector<BufferCopy> pieces, ReadSplitLaunch(context));
  return RunPieceCopies(context, pieces);
}

}  // namespace

void AddDataMovementKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kDataMovement, BufferCopyKernel<ReadTransposeLaunch>,
                  BufferCopyKernel<ReadStridedSliceLaunch>, StridedSliceGrad, StridedSliceAssign,
                  Pad, BufferCopyKernel<ReadTileLaunch>, Concat, Split);
}

}  // namespace vgpu::cpu_kernels
