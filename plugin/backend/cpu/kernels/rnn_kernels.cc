// The recurrent family (protocol/kernels/rnn.h) on the CPU backing executor.
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/protocol/kernels/rnn.h"

namespace vgpu {

void AddRnnKernels(KernelTable& table) {}

}  // namespace vgpu
