// Kernel ids and launch layouts of the pooling family (ids 400-499): 2-D max and average pooling
// over the H and W dimensions of rank-4 NHWC or NCHW tensors, as cudnnPoolingForward and
// cudnnPoolingBackward do. Everything about the window (mode, layout, size, strides, padding)
// comes from the pooling descriptor; the tensor descriptors give the shapes in that layout.
#ifndef VGPU_PROTOCOL_KERNELS_POOLING_H_
#define VGPU_PROTOCOL_KERNELS_POOLING_H_

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::pooling {

// descriptors: [pooling, x tensor, y tensor]; buffers: [x, y]; params: none.
// y's spatial size must be (in + pad_before + pad_after - window) / stride + 1 per dimension.
//   max:     y = the largest input element of the window (padding never takes part), starting
//            from the dtype's lowest finite value, as TensorFlow's CPU kernel does (a window of
//            -inf gives lowest(); NaN inputs never replace the running maximum).
//   average: y = sum of the window's input elements / their number (padding excluded).
inline constexpr KernelId kForward = KernelId{400};

// descriptors: [pooling, x tensor, y tensor] (y: the forward output's shape);
// buffers:  max mode [x, dy, dx];  average mode [dy, dx]; params: none.
//   max:     each dy element is added to dx at the window's maximum, recomputed from x: the
//            first element in row-major window order wins ties (TensorFlow's CPU tie-breaking).
//   average: dx[i] = sum over the windows containing i, in row-major window order, of
//            dy * (1 / number of input elements in that window).
// dx is fully written (zero where no window routes a gradient).
inline constexpr KernelId kBackward = KernelId{401};

}  // namespace vgpu::pooling

#endif  // VGPU_PROTOCOL_KERNELS_POOLING_H_
