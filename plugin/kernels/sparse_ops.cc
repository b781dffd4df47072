// TensorFlow op kernels of the sparse family on the virtual GPU: gathers, scatters and segment
// reductions.
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/sparse.h"

namespace vgpu {

void RegisterSparseOps(const char* device_type) {}

}  // namespace vgpu
