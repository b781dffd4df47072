// The element-wise launches other op families compose (elementwise_ops.cc defines them): fill
// a tensor, apply a unary op, combine two operands with broadcasting.
#ifndef VGPU_KERNELS_ELEMENTWISE_LAUNCH_H_
#define VGPU_KERNELS_ELEMENTWISE_LAUNCH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/protocol/descriptors.h"
#include "tensorflow/c/tf_tensor.h"

namespace vgpu {

// Sets every element of `tensor` to `value` (cudnnSetTensor); nothing for an empty tensor.
absl::Status LaunchSetTensor(KernelLaunch&& launch, const TF_Tensor* tensor, double value);

// out = op(x) over the `count` elements of x, of `dtype` (a predicate's out is bool).
absl::Status LaunchUnary(OpContext& context, ElementwiseOp op, TF_DataType dtype, int64_t count,
                         const TF_Tensor* x, const TF_Tensor* out);

// Launches elementwise::kBinary, out = op(a, b), on elements of `dtype`: each operand described
// by its shape (broadcast-merged, or flat), the output's descriptor of `out_dtype`.
absl::Status LaunchBinary(OpContext& context, ElementwiseOp op, TF_DataType dtype,
                          absl::Span<const int64_t> a_shape, absl::Span<const int64_t> b_shape,
                          TF_DataType out_dtype, absl::Span<const int64_t> out_shape,
                          const TF_Tensor* a, const TF_Tensor* b, const TF_Tensor* out);

}  // namespace vgpu

#endif  // VGPU_KERNELS_ELEMENTWISE_LAUNCH_H_
