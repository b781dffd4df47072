// Registration of the op kernels that check or summarise a tensor's values (numerics_ops.cc):
// L2Loss and CheckNumerics, registered from RegisterReductionOps.
#ifndef VGPU_KERNELS_NUMERICS_OPS_H_
#define VGPU_KERNELS_NUMERICS_OPS_H_

namespace vgpu {

// Registers L2Loss and CheckNumerics on `device_type`.
void RegisterNumericsOps(const char* device_type);

}  // namespace vgpu

#endif  // VGPU_KERNELS_NUMERICS_OPS_H_
