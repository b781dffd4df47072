// The op families the plugin registers with TensorFlow (kernels/*_ops.cc; the registration
// helpers are in op_kernel.h). TF_InitKernel, in op_registration.cc, calls each of them.
#ifndef VGPU_KERNELS_OP_REGISTRATION_H_
#define VGPU_KERNELS_OP_REGISTRATION_H_

namespace vgpu {

// One function per op family (kernels/*_ops.cc), called from TF_InitKernel.
void RegisterActivationOps(const char* device_type);
void RegisterElementwiseOps(const char* device_type);
void RegisterConvolutionOps(const char* device_type);
void RegisterPoolingOps(const char* device_type);
void RegisterReductionOps(const char* device_type);
void RegisterDataMovementOps(const char* device_type);
void RegisterRandomOps(const char* device_type);
void RegisterNormalizationOps(const char* device_type);
void RegisterTrainingOps(const char* device_type);
void RegisterVariableOps(const char* device_type);
void RegisterRnnOps(const char* device_type);
void RegisterSparseOps(const char* device_type);
void RegisterImageTransformOps(const char* device_type);
void RegisterImageColorOps(const char* device_type);
void RegisterImageResizeOps(const char* device_type);
void RegisterOptionalOps(const char* device_type);

}  // namespace vgpu

#endif  // VGPU_KERNELS_OP_REGISTRATION_H_
