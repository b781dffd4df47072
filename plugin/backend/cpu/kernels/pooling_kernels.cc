// CPU kernels of the pooling family.
#include "plugin/backend/cpu/kernel_registry.h"

namespace vgpu {

void AddPoolingKernels(KernelTable& table) {}

}  // namespace vgpu
