// The sparse family (protocol/kernels/sparse.h) on the CPU backing executor.
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/protocol/kernels/sparse.h"

namespace vgpu {

void AddSparseKernels(KernelTable& table) {}

}  // namespace vgpu
