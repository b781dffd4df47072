// TensorFlow op kernels of the recurrent family on the virtual GPU (the CudnnRNN ops).
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/rnn.h"

namespace vgpu {

void RegisterRnnOps(const char* device_type) {}

}  // namespace vgpu
