// ZerosLike for DT_VARIANT tensors on the virtual GPU (elementwise_variant_ops.cc), kept apart
// from elementwise_ops.cc because it needs TensorFlow's C++ API (TensorList, Variant).
#ifndef VGPU_KERNELS_ELEMENTWISE_VARIANT_OPS_H_
#define VGPU_KERNELS_ELEMENTWISE_VARIANT_OPS_H_

namespace vgpu {

// Registers ZerosLike with T = DT_VARIANT on `device_type`, as TensorFlow's GPU build does.
void RegisterVariantZerosLike(const char* device_type);

}  // namespace vgpu

#endif  // VGPU_KERNELS_ELEMENTWISE_VARIANT_OPS_H_
