// CPU kernels of the random family.
#include "plugin/backend/cpu/kernel_registry.h"

namespace vgpu {

void AddRandomKernels(KernelTable& table) {}

}  // namespace vgpu
