// Kernel ids and launch layouts of the sparse family (ids 1100-1199): gathers, scatters and
// segment reductions (embeddings and their gradients). Layouts are documented with each kernel.
#ifndef VGPU_PROTOCOL_KERNELS_SPARSE_H_
#define VGPU_PROTOCOL_KERNELS_SPARSE_H_

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::sparse {}  // namespace vgpu::sparse

#endif  // VGPU_PROTOCOL_KERNELS_SPARSE_H_
