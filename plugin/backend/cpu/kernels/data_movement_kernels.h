// Parts of the data movement family's CPU kernel table that live in their own files (kernel ids
// in protocol/kernels/data_movement.h); AddDataMovementKernels calls them.
#ifndef VGPU_BACKEND_CPU_KERNELS_DATA_MOVEMENT_KERNELS_H_
#define VGPU_BACKEND_CPU_KERNELS_DATA_MOVEMENT_KERNELS_H_

#include "plugin/backend/cpu/kernel_registry.h"

namespace vgpu::cpu_kernels {

// Adds data_movement::kReverse and kReverseSequence to `table` (reverse_kernels.cc).
void AddReverseKernels(KernelTable& table);

// Adds data_movement::kMirrorPad and kMirrorPadGrad to `table` (mirror_pad_kernels.cc).
void AddMirrorPadKernels(KernelTable& table);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_DATA_MOVEMENT_KERNELS_H_
