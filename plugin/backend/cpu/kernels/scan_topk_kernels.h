// The scan (Cumsum/Cumprod) and top-k kernels of the reduction family on the CPU backing
// executor (scan_topk_kernels.cc).
#ifndef VGPU_BACKEND_CPU_KERNELS_SCAN_TOPK_KERNELS_H_
#define VGPU_BACKEND_CPU_KERNELS_SCAN_TOPK_KERNELS_H_

#include "plugin/backend/cpu/kernel_registry.h"

namespace vgpu::cpu_kernels {

// Adds reduction::kScan and reduction::kTopK.
void AddScanAndTopKKernels(KernelTable& table);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_SCAN_TOPK_KERNELS_H_
