// Kernel ids and launch layouts of the reduction family (ids 500-599): tensor reductions
// (cudnnReduceTensor-like, with a reduce descriptor), arg-max/min, softmax and the softmax
// cross-entropy losses.
#ifndef VGPU_PROTOCOL_KERNELS_REDUCTION_H_
#define VGPU_PROTOCOL_KERNELS_REDUCTION_H_

#include <cstdint>

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::reduction {

// descriptors: [reduce, x tensor, y tensor]; buffers: [x, y];
// params: ReduceLayoutParams.
// The x tensor describes the input as alternating runs of reduced and kept dimensions, adjacent
// runs of the same kind already merged (TensorFlow's ReductionHelper layout): run 0 is reduced
// when reduce_first_axis is 1, and the kinds alternate from there. A layout with no reduced run
// (rank 0, or rank 1 with reduce_first_axis 0) copies x. The y tensor holds the kept runs in
// order (only its dtype and element count matter). An empty x with a non-empty y fills y with
// the reduction's identity: 0 (sum), NaN (floating mean), 0 (integer mean), 1 (prod), -inf or
// the lowest integer (max), +inf or the highest integer (min), true (all), false (any).
// dtype: the reduce descriptor's, equal to both tensors'; sum/mean/prod/max/min take numeric
// dtypes, all/any take bool. float16 and bfloat16 sum and mean accumulate in float (as
// TensorFlow's GPU kernels do; its CPU kernel accumulates float16 in float16), the rest in the
// dtype itself.
inline constexpr KernelId kReduce = KernelId{500};

struct ReduceLayoutParams {
  uint32_t reduce_first_axis = 0;
};

// Arg-max / arg-min along one dimension (cudnnReduceTensor with indices).
// descriptors: [reduce (op kMax or kMin, x's dtype), x tensor [outer, n, inner],
//               y tensor [outer, inner] of int32 or int64]; buffers: [x, y]; params: none.
// y = index along the middle dimension of the largest (smallest) element; the lowest index wins
// ties. n must be positive.
inline constexpr KernelId kArgReduce = KernelId{501};

// Softmax over the last dimension (cudnnSoftmaxForward, accurate or log mode).
// descriptors: [tensor [batch, classes]] (x and y share it); buffers: [x, y];
// params: SoftmaxParams. Numerically stable: the row maximum is subtracted first.
//   softmax:     y = exp(x - max) * (1 / sum(exp(x - max)))
//   log softmax: y = (x - max) - log(sum(exp(x - max)))
inline constexpr KernelId kSoftmax = KernelId{520};

struct SoftmaxParams {
  uint32_t log = 0;  // 1: log softmax
};

// SoftmaxCrossEntropyWithLogits with TensorFlow's broadcasting of the two operands.
// descriptors: [logits tensor, labels tensor, backprop tensor [batch, classes]], the first two
// of rank 2 with each dimension equal to backprop's or 1 (broadcast);
// buffers: [logits, labels, loss [batch], backprop [batch, classes]]; params: none.
//   loss[b]       = sum_c labels[b,c] * (log(sum_c exp(s[b,c])) - s[b,c]),  s = logits - max
//   backprop[b,c] = exp(s[b,c]) / sum_c exp(s[b,c]) - labels[b,c]
inline constexpr KernelId kSoftmaxCrossEntropy = KernelId{521};

// SparseSoftmaxCrossEntropyWithLogits.
// descriptors: [logits tensor [batch, classes], labels tensor [batch] (int32 or int64)];
// buffers: [logits, labels, loss [batch], backprop [batch, classes]]; params: none.
//   loss[b]       = log(sum_c exp(s[b,c])) - s[b,label[b]],  s = logits - max
//   backprop[b,c] = exp(s[b,c]) / sum_c exp(s[b,c]) - (c == label[b])
// The labels stay in device memory, as TensorFlow's GPU kernel takes them: labels computed on
// the device (Keras casts them) cost no device-to-host copy, which would hold the issuing
// thread until the executor had run the whole forward pass. A label outside [0, classes) gives
// a NaN loss and a NaN backprop row, as TensorFlow's CUDA kernel (its CPU kernel raises
// InvalidArgument).
inline constexpr KernelId kSparseSoftmaxCrossEntropy = KernelId{523};

// The same with the labels inside the launch (params: array<int64> labels, batch values;
// descriptors [logits]; buffers [logits, loss, backprop]). What the op kernel sent before the
// labels moved to device memory; kept so that traces recorded then still replay.
inline constexpr KernelId kSparseSoftmaxCrossEntropyHostLabels = KernelId{522};

// Cumulative sum or product along the middle dimension (Cumsum, Cumprod).
// descriptors: [reduce (op kSum or kProd, the dtype), tensor [outer, n, inner] (x and y share
// it)]; buffers: [x, y]; params: ScanParams. Sequential in the dtype along the scanned
// dimension, as TensorFlow's CPU kernel (Eigen's scan):
//   inclusive: y[j] = x[0] op ... op x[j];  exclusive: y[0] = identity, y[j] = y[j-1] op x[j-1]
//   reverse: the same from the far end (y[n-1] first).
// Numeric dtypes (floating, int32, int64).
inline constexpr KernelId kScan = KernelId{530};

struct ScanParams {
  uint32_t exclusive = 0;
  uint32_t reverse = 0;
};

// The k largest entries of each row, in descending order (TopKV2).
// descriptors: [tensor x [rows, cols], tensor indices [rows, k] (int32 or int64)];
// buffers: [x, values [rows, k] (x's dtype), indices]; params: none. Equal values keep their
// order (the lower index first); NaN entries rank above every number. k <= cols.
inline constexpr KernelId kTopK = KernelId{540};

// Whether each row's target is among its k largest predictions (InTopKV2).
// descriptors: [tensor predictions [batch, classes] (float32), tensor targets [batch] (int32 or
// int64)]; buffers: [predictions, targets, out [batch] (bool)]; params: int64 k.
// out[b] = fewer than k classes predict more than the target does; false when the target is
// outside [0, classes) or any prediction of the row is not finite (TensorFlow's semantics).
inline constexpr KernelId kInTopK = KernelId{541};

}  // namespace vgpu::reduction

#endif  // VGPU_PROTOCOL_KERNELS_REDUCTION_H_
