// Cumsum, Cumprod, TopKV2 and InTopKV2 on the virtual GPU (scan_topk_ops.cc), registered with the
// reduction family.
#ifndef VGPU_KERNELS_SCAN_TOPK_OPS_H_
#define VGPU_KERNELS_SCAN_TOPK_OPS_H_

namespace vgpu {

void RegisterScanAndTopKOps(const char* device_type);

}  // namespace vgpu

#endif  // VGPU_KERNELS_SCAN_TOPK_OPS_H_
