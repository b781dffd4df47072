// CPU kernels of the reversals of the data movement family (protocol/kernels/data_movement.h,
// kReverse and kReverseSequence), read by the launch layer (launch/data_movement_launch.h).
// Like the other data movement kernels they move elements of 1, 2, 4 or 8 bytes without looking
// at them: a reverse is one strided copy with negative strides on the reversed dimensions; a
// sequence reverse copies contiguous runs of elements, one per (outer index, batch entry,
// sequence position), each from its mirrored position.
#define EIGEN_USE_THREADS

#include <cstring>

#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/strided_copy_engine.h"
#include "plugin/backend/launch/data_movement_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/data_movement.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

using data_movement_launch::ReadReverseLaunch;
using data_movement_launch::ReadReverseSequenceLaunch;
using data_movement_launch::ReverseSequenceBuffers;
using data_movement_launch::ReverseSequenceGeometry;
using data_movement_launch::ReverseSequenceSourceRun;
using data_movement_launch::TakeReverseSequenceBuffers;

// data_movement::kReverseSequence.
absl::Status ReverseSequence(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(ReverseSequenceGeometry g, ReadReverseSequenceLaunch(context));
  VGPU_ASSIGN_OR_RETURN(ReverseSequenceBuffers buffers, TakeReverseSequenceBuffers(context, g));
  if (g.count == 0) return absl::OkStatus();
  const uint8_t* x = buffers.x;
  uint8_t* y = buffers.y;
  const size_t run_bytes = static_cast<size_t>(g.inner) * g.element_size;
  context.device->parallelFor(
      g.Runs(), Eigen::TensorOpCost(run_bytes, run_bytes, 1),
      [&](Eigen::Index begin, Eigen::Index end) {
        for (int64_t run = begin; run < end; ++run) {
          const int64_t source_run = ReverseSequenceSourceRun(g, buffers.lengths, run);
          std::memcpy(y + run * run_bytes, x + source_run * run_bytes, run_bytes);
        }
      });
  return absl::OkStatus();
}

}  // namespace

void AddReverseKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kReverse, BufferCopyKernel<ReadReverseLaunch>, ReverseSequence);
}

}  // namespace vgpu::cpu_kernels
