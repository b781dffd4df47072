// Kernel ids and launch layouts of the convolution family (ids 300-399): 2-D and 3-D
// convolutions (regular, grouped and depthwise) with their two backward passes, matrix
// multiplication (plain and batched with broadcasting), bias addition with its gradient, and
// the rearrangement Einsum needs around its matrix products.
//
// Convolution launches carry the descriptors cuDNN's convolution calls take, always in the
// order [x tensor, filter, convolution, y tensor]:
//   x tensor     the convolution's input, rank 4 (2-D) or 5 (3-D), channels last or first as
//                the convolution descriptor says (NHWC/NDHWC: [N, (D,) H, W, C];
//                NCHW/NCDHW: [N, C, (D,) H, W]);
//   filter       [(depth,) height, width, in_channels, out_channels], in_channels being the
//                depth of one group (depthwise: [height, width, in_channels,
//                channel_multiplier]);
//   convolution  data format, spatial dimension count, explicit paddings (SAME/VALID already
//                resolved to explicit values by the caller), strides, dilations, group count,
//                depthwise flag;
//   y tensor     the convolution's output, same rank and data format.
// The element type is the x tensor's; the filter and y must have the same one. The backend
// checks that the output size follows from the input size, the filter, the paddings, the
// strides and the dilations: out = (in + pad_before + pad_after - effective_filter) / stride + 1.
// With group_count g, x has g * in_channels channels, y out_channels (a multiple of g), and
// output channel group k (out_channels / g consecutive channels) sees input channel group k
// only. Depthwise convolutions are 2-D with group count 1. Convolution parameter blocks are
// empty.
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

// Parameter block of kRearrange (kMaxRank from protocol/descriptors.h).
struct RearrangeParams {
  int32_t summed_rank = 0;             // s: the number of summed dimensions, 0..kMaxRank
  int32_t ties[8] = {-1, -1, -1, -1, -1, -1, -1, -1};  // per y dimension, see kRearrange
  int64_t x_strides[8] = {};           // per y dimension: its step in x, in elements
  int64_t summed_sizes[8] = {};        // per summed dimension: its size
  int64_t summed_strides[8] = {};      // per summed dimension: its step in x, in elements
};

// descriptors: [x tensor, y tensor]; buffers: [x, y]; params: RearrangeParams.
// y = a rearrangement of x: what Einsum does besides matrix products (permuted dimensions,
// generalized diagonals, dimensions summed out, and diagonals written into zeros). x and y are
// dense row-major tensors of one floating-point dtype. For each index i of y:
//   y[i] = 0                          if i[k] != i[ties[k]] for some k with ties[k] >= 0,
//   y[i] = sum over j < summed_sizes  of x[sum_k i[k] * x_strides[k] +
//                                          sum_m j[m] * summed_strides[m]]   otherwise
// (one term when summed_rank is 0; 0 when a summed size is 0). ties[k] is -1 or an earlier y
// dimension; the entries beyond y's rank and summed_rank must keep their defaults. Strides are
// non-negative and every index reached lies inside x. Sums are accumulated in float for the
// 16-bit types.
inline constexpr KernelId kRearrange = KernelId{330};

}  // namespace vgpu::convolution

#endif  // VGPU_PROTOCOL_KERNELS_CONVOLUTION_H_
