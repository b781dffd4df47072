// CPU kernels of the normalization family.
#include "plugin/backend/cpu/kernel_registry.h"

namespace vgpu {

void AddNormalizationKernels(KernelTable& table) {}

}  // namespace vgpu
