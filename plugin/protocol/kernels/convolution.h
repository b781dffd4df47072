// Kernel ids and launch layouts of the convolution family (ids 300-399): 2-D convolutions
// (regular and depthwise) with their two backward passes, matrix multiplication (plain and
// batched with broadcasting) and bias addition with its gradient.
//
// Convolution launches carry the descriptors cuDNN's convolution calls take, always in the
// order [x tensor, filter, convolution, y tensor]:
//   x tensor     the convolution's input, rank 4, in the convolution's data format
//                (NHWC: [N, H, W, C]; NCHW: [N, C, H, W]);
//   filter       [height, width, in_channels, out_channels] (depthwise: [height, width,
//                in_channels, channel_multiplier]);
//   convolution  data format, explicit paddings (SAME/VALID already resolved to explicit
//                values by the caller), strides, dilations, depthwise flag;
//   y tensor     the convolution's output, rank 4, in the same data format.
// The element type is the x tensor's; the filter and y must have the same one. The backend
// checks that the output size follows from the input size, the filter, the paddings, the
// strides and the dilations: out = (in + pad_before + pad_after - effective_filter) / stride + 1.
// Convolution parameter blocks are empty.
#ifndef VGPU_PROTOCOL_KERNELS_CONVOLUTION_H_
#define VGPU_PROTOCOL_KERNELS_CONVOLUTION_H_

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::convolution {

// buffers: [x, filter, y]. y = conv(x, filter).
// An x with no elements (but a y with some) gives y = 0, as the padding alone is convolved.
inline constexpr KernelId kForward = KernelId{300};

// buffers: [filter, dy, dx]. dx = the gradient of conv(x, filter) with respect to x, given
// dy, the gradient with respect to y. The x descriptor gives dx's shape, y's gives dy's.
inline constexpr KernelId kBackwardInput = KernelId{301};

// buffers: [x, dy, dfilter]. dfilter = the gradient of conv(x, filter) with respect to the
// filter, given dy. The filter descriptor gives dfilter's shape.
inline constexpr KernelId kBackwardFilter = KernelId{302};

// cudnnConvolutionBiasActivationForward: y = activation(conv(x, filter) + bias).
// descriptors: [x tensor, filter, convolution, y tensor, bias tensor, activation (optional:
// none means identity)]; buffers: [x, filter, bias, y]. bias is a vector of y's channel count.
// TensorFlow's _FusedConv2D with fused_ops BiasAdd(+Relu/Relu6/...), as Grappler's remapper
// makes them for GPU devices.
inline constexpr KernelId kForwardBiasActivation = KernelId{303};

// descriptors: [matmul, a tensor, b tensor, c tensor]; buffers: [a, b, c]; params: none.
// c = op(a) x op(b), op transposing the last two dimensions where the matmul descriptor says so.
// a and b have rank >= 2; their leading (batch) dimensions broadcast against each other like
// TensorFlow's BatchMatMulV2 (right-aligned, 1 stretches), and c's leading dimensions are the
// broadcast shape. Rank 2 everywhere is TensorFlow's MatMul. All three share one dtype.
inline constexpr KernelId kMatmul = KernelId{310};

// c = activation(op(a) x op(b) + bias), bias broadcast along c's last dimension.
// descriptors: [matmul, a tensor, b tensor, c tensor, bias tensor, activation (optional: none
// means identity)]; buffers: [a, b, bias, c]; params: none. TensorFlow's _FusedMatMul.
inline constexpr KernelId kMatmulBiasActivation = KernelId{311};

// Parameter block of the bias kernels.
struct BiasParams {
  // kNHWC: the channel dimension is the last one; kNCHW: it is dimension 1 (any rank >= 2).
  int32_t data_format = 0;  // a DataFormat value (protocol/descriptors.h)
};

// descriptors: [value tensor, bias tensor]; buffers: [value, bias, out]; params: BiasParams.
// out = value + bias broadcast along the channel dimension; out has value's shape and may
// alias value. bias is a vector of the channel dimension's size.
inline constexpr KernelId kBiasAdd = KernelId{320};

// descriptors: [gradient tensor, bias tensor]; buffers: [gradient, bias_gradient];
// params: BiasParams. bias_gradient[c] = the sum of gradient over every dimension but the
// channel dimension (accumulated in float for 16-bit types).
inline constexpr KernelId kBiasAddGrad = KernelId{321};

}  // namespace vgpu::convolution

#endif  // VGPU_PROTOCOL_KERNELS_CONVOLUTION_H_
