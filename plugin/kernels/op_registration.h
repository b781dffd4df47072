// Registering the plugin's op kernels with TensorFlow through the kernel C API. An op is a
// stateless compute function; its absl::Status becomes the op's failure in one place.
#ifndef VGPU_KERNELS_OP_REGISTRATION_H_
#define VGPU_KERNELS_OP_REGISTRATION_H_

#include <initializer_list>
#include <utility>

#include "absl/status/status.h"
#include "tensorflow/c/kernels.h"

namespace vgpu {

using OpComputeFn = absl::Status (*)(TF_OpKernelContext* context);

namespace internal {

// Registers the C callbacks of one kernel. Failures are logged (the op then stays on the CPU),
// never fatal.
void RegisterKernelCallbacks(
    const char* op_name, const char* device_type,
    std::initializer_list<std::pair<const char*, TF_DataType>> type_constraints,
    void (*compute)(void* kernel, TF_OpKernelContext* context));

// Marks the op failed with `status` (no-op for OK).
void FailOpWith(TF_OpKernelContext* context, const absl::Status& status);

template <OpComputeFn Compute>
void ComputeTrampoline(void*, TF_OpKernelContext* context) {
  FailOpWith(context, Compute(context));
}

}  // namespace internal

// Registers `Compute` as the kernel of op `op_name` on `device_type`, constrained to the given
// (attribute, dtype) pairs. The compute function is a template argument because the kernel C
// API's create callback carries no user data.
template <OpComputeFn Compute>
void RegisterOp(const char* op_name, const char* device_type,
                std::initializer_list<std::pair<const char*, TF_DataType>> type_constraints) {
  internal::RegisterKernelCallbacks(op_name, device_type, type_constraints,
                                    internal::ComputeTrampoline<Compute>);
}

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

}  // namespace vgpu

#endif  // VGPU_KERNELS_OP_REGISTRATION_H_
