// CPU kernels of the training family.
#include "plugin/backend/cpu/kernel_registry.h"

namespace vgpu {

void AddTrainingKernels(KernelTable& table) {}

}  // namespace vgpu
