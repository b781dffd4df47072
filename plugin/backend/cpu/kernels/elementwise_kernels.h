// CPU implementations of the element-wise kernels of protocol/kernels/elementwise.h (op-tensor
// binary and unary ops with broadcasting, select, cast, add-n, fill, set-tensor, range). The
// launch layer (launch/elementwise_launch.h) reads every launch's descriptors, parameters and
// buffer sizes and returns InvalidArgument on a malformed one; the kernels only compute and
// keep no state between launches.
#ifndef VGPU_BACKEND_CPU_KERNELS_ELEMENTWISE_KERNELS_H_
#define VGPU_BACKEND_CPU_KERNELS_ELEMENTWISE_KERNELS_H_

#include "plugin/backend/cpu/kernel_registry.h"

namespace vgpu::cpu_kernels {

// elementwise::kBinary: out = a <op> b with broadcasting.
absl::Status ElementwiseBinary(const KernelContext& context);
// elementwise::kUnary: y = op(x) (elementwise_unary_kernels.cc).
absl::Status ElementwiseUnary(const KernelContext& context);
// elementwise::kSelect: out = condition ? then : else with broadcasting.
absl::Status ElementwiseSelect(const KernelContext& context);
// elementwise::kCast: y = cast(x) (elementwise_cast_kernels.cc).
absl::Status ElementwiseCast(const KernelContext& context);
// elementwise::kAddN: out = sum of the inputs.
absl::Status ElementwiseAddN(const KernelContext& context);
// elementwise::kFill: out = the value held in device memory.
absl::Status ElementwiseFill(const KernelContext& context);
// elementwise::kSetTensor: out = the value of the parameter block.
absl::Status ElementwiseSetTensor(const KernelContext& context);
// elementwise::kRange: out[i] = start + i * delta.
absl::Status ElementwiseRange(const KernelContext& context);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_ELEMENTWISE_KERNELS_H_
