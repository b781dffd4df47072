// CPU kernels of the data movement family.
#include "plugin/backend/cpu/kernel_registry.h"

namespace vgpu {

void AddDataMovementKernels(KernelTable& table) {}

}  // namespace vgpu
