// Kernel ids and launch layouts of the pooling family (ids 400-499): max and average pooling over
// the 2 or 3 spatial dimensions of NHWC / NCHW / NDHWC / NCDHW tensors, as cudnnPoolingForward
// and cudnnPoolingBackward do, and the argmax and second-order kernels of TensorFlow's max
// pooling ops. Everything about the window (mode, layout, number of spatial dimensions, sizes,
// strides, padding, NaN propagation) comes from the pooling descriptor; the tensor descriptors
// give the shapes in that layout.
//
// Terms used below:
//   x, y       the pooled input and output of the forward computation; the launch's tensor
//              descriptors 1 and 2 give their shapes (rank spatial_dims + 2, one floating dtype,
//              the same batch and channels). Per spatial dimension y's size must be
//              (in + pad_before + pad_after - window) / stride + 1, and every padding must be
//              smaller than the window (so that no window lies in the padding only).
//   window     output position o covers the input positions [o * stride - pad_before,
//              o * stride - pad_before + window) of each spatial dimension, clipped to the input;
//              padding never takes part.
//   window order  the window's input positions in row-major order (outermost dimension first).
//   max of a window  the largest element, comparing with `<`; NaN elements are skipped unless
//              the descriptor says kPropagate, in which case the first NaN of the window (in
//              window order) is the maximum.
#ifndef VGPU_PROTOCOL_KERNELS_POOLING_H_
#define VGPU_PROTOCOL_KERNELS_POOLING_H_

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::pooling {

// descriptors: [pooling, x tensor, y tensor]; buffers: [x, y]; params: none.
//   max:     y = the max of the window, starting from the dtype's lowest finite value, as
//            TensorFlow's kernels do (a window of -inf gives lowest(); a window of skipped NaNs
//            gives lowest()). kPropagate: y is NaN where the window holds a NaN.
//   average: y = sum of the window's input elements in window order (in the dtype) / their
//            number.
inline constexpr KernelId kForward = KernelId{400};

// descriptors: [pooling, x tensor, y tensor] (y: the forward output's shape);
// buffers:  max mode [x, dy, dx];  average mode [dy, dx]; params: none.
//   max:     each dy element is added to dx at the first element (in window order) holding the
//            max of its window, recomputed from x; a window without a max (only skipped NaNs)
//            routes nothing (cuDNN's CUDNN_NOT_PROPAGATE_NAN).
//   average: dx[i] = sum over the windows containing i of dy * T(1 / number of input elements
//            in that window).
//   Contributions to one dx element add up in the dtype in the order of TensorFlow's own CPU
//   kernels: 2-D windows in row-major order, 3-D windows with the W index outermost, then H,
//   then D.
// dx is fully written (zero where no window routes a gradient).
inline constexpr KernelId kBackward = KernelId{401};

// MaxPoolWithArgmax: 2-D max pooling of an NHWC tensor that also returns, per output element,
// the flattened index of the input element it took.
// descriptors: [pooling (max, 2 spatial dims, NHWC), x tensor, y tensor,
//               argmax tensor (int64 or int32, y's shape)];
// buffers: [x, y, argmax]; params: int32 include_batch_in_index (0 or 1).
//   Visiting its window in window order, an output takes the first element, then every element
//   x with y < x (kPropagate: also a NaN x while y is not NaN) — TensorFlow's CPU rule, so the
//   first maximum wins and a NaN in first position is kept. argmax is the flat index
//   ((b * H + h) * W + w) * C + c of that element in x, or (h * W + w) * C + c when
//   include_batch_in_index is 0, converted to the argmax dtype.
inline constexpr KernelId kForwardWithArgmax = KernelId{402};

// MaxPoolGradWithArgmax: routes each dy element to the input element its argmax names.
// descriptors: [pooling (max, 2 spatial dims, NHWC), x tensor (dx's shape), y tensor (dy's
//               shape), argmax tensor (int64, y's shape)];
// buffers: [dy, argmax, dx]; params: int32 include_batch_in_index (0 or 1).
//   dx = 0, then for every output element i in row-major order:
//   dx[argmax[i] + (include_batch_in_index ? 0 : b(i) * H * W * C)] += dy[i]. A target outside
//   dx fails the launch (InvalidArgument) before dx is written.
inline constexpr KernelId kBackwardWithArgmax = KernelId{403};

// MaxPoolGradGradWithArgmax: gathers the gradient of dx back to the pooled output.
// descriptors: [pooling (max, 2 spatial dims, NHWC), x tensor, y tensor,
//               argmax tensor (int64, y's shape)];
// buffers: [ddx (x's shape), argmax, ddy (y's shape)]; params: int32 include_batch_in_index.
//   ddy[i] = ddx[argmax[i] + (include_batch_in_index ? 0 : b(i) * H * W * C)], or 0 where that
//   index lies outside ddx (TensorFlow's GPU kernel does the same bounds check).
inline constexpr KernelId kGradGradWithArgmax = KernelId{404};

// MaxPoolGradGrad / MaxPool3DGradGrad: the gradient of max pooling's gradient with respect to
// dy, given the forward input and output.
// descriptors: [pooling (max), x tensor, y tensor]; buffers: [x, y, ddx (x's shape),
//               ddy (y's shape)]; params: none.
//   ddy = ddx at the first element (in window order) of the window equal to y, or 0 where none
//   is (a NaN y equals nothing), as TensorFlow's CPU and GPU kernels do. The descriptor's NaN
//   propagation is not used.
inline constexpr KernelId kGradGrad = KernelId{405};

// Max pooling's gradient followed by ReLU's, for a max pooling of a ReLU's output (the plugin's
// graph optimizer fuses TensorFlow's MaxPoolGrad and the ReluGrad whose features are the same
// orig_input; see docs/graph_fusions.md). One pass instead of two over x and dx.
// descriptors: [pooling (max), x tensor, y tensor]; buffers: [x, dy, dx]; params: none.
//   dx = kBackward's dx, each element then multiplied by 1 where x > 0 and by 0 elsewhere
//   (TensorFlow's ReluGrad: a NaN gradient stays NaN, a negative one becomes -0).
inline constexpr KernelId kBackwardThroughRelu = KernelId{406};

// Max pooling that also records, per output element, which element of its window the backward
// pass routes the gradient to, so that the gradient need not read x again (the plugin's graph
// optimizer passes it from a MaxPool to its MaxPoolGrad; see docs/graph_fusions.md). Only for
// windows that tile the input: stride == window and no padding in every spatial dimension
// (windows then never overlap and lie wholly inside the input), at most kMaxWindowSlots
// elements per window, NaNs not propagated.
// descriptors: [pooling (max, kNotPropagate), x tensor, y tensor];
// buffers: [x, y, window_index (uint8, one per element of y)]; params: none.
//   y = kForward's y. window_index = s | (m > 0 ? 0x80 : 0), where s is the slot (position in
//   window order) of the element kBackward would route to: the first element equal to m, the
//   largest non-NaN element of the window; s = kNoWindowSlot when every element is NaN.
inline constexpr KernelId kForwardWithWindowIndex = KernelId{407};
inline constexpr int kMaxWindowSlots = 127;
inline constexpr int kNoWindowSlot = 127;

// The gradient of kForwardWithWindowIndex's pooling: descriptors as there (x: dx's shape);
// buffers: [window_index, dy, dx]; params: none.
//   dx = dy at the slot each window_index byte names, 0 elsewhere (and at positions no window
//   covers); a slot outside the window routes nothing. Equal to kBackward's dx for the
//   window_index of the same x.
inline constexpr KernelId kBackwardFromWindowIndex = KernelId{408};

// As kBackwardFromWindowIndex, then each routed gradient multiplied by 1 where the byte's 0x80
// flag is set and by 0 elsewhere: kBackwardThroughRelu's dx for the window_index of the same x.
inline constexpr KernelId kBackwardFromWindowIndexThroughRelu = KernelId{409};

}  // namespace vgpu::pooling

#endif  // VGPU_PROTOCOL_KERNELS_POOLING_H_
