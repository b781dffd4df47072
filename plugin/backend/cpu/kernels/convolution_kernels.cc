// CPU kernels of the convolution family.
#include "plugin/backend/cpu/kernel_registry.h"

namespace vgpu {

void AddConvolutionKernels(KernelTable& table) {}

}  // namespace vgpu
