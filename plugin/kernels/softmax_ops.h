// Registration of the softmax and softmax cross-entropy op kernels (softmax_ops.cc), part of the
// reduction family and registered from RegisterReductionOps.
#ifndef VGPU_KERNELS_SOFTMAX_OPS_H_
#define VGPU_KERNELS_SOFTMAX_OPS_H_

namespace vgpu {

// Registers Softmax, LogSoftmax, SoftmaxCrossEntropyWithLogits and
// SparseSoftmaxCrossEntropyWithLogits on `device_type`.
void RegisterSoftmaxOps(const char* device_type);

}  // namespace vgpu

#endif  // VGPU_KERNELS_SOFTMAX_OPS_H_
