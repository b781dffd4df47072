// Kernel ids and launch layouts of the recurrent family (ids 1000-1099): cuDNN-style RNN
// layers (the CudnnRNN ops). Layouts are documented with each kernel as they are added.
#ifndef VGPU_PROTOCOL_KERNELS_RNN_H_
#define VGPU_PROTOCOL_KERNELS_RNN_H_

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::rnn {}  // namespace vgpu::rnn

#endif  // VGPU_PROTOCOL_KERNELS_RNN_H_
