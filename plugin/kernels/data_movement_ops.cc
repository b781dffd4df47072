// TensorFlow op kernels of the data movement family on the virtual GPU.
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"

namespace vgpu {

void RegisterDataMovementOps(const char* device_type) {}

}  // namespace vgpu
