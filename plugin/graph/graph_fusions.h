// The graph rewrites of the plugin's Grappler optimizer (graph_optimizer.cc): op pairs of a
// TensorFlow graph, placed on the virtual GPU, replaced by one fused op (fused_ops.h) whose
// kernel makes one pass over memory where the pair made two. Each rewrite computes exactly what
// the pair computed (the same values, bit for bit), and applies only where nothing else in the
// graph reads the intermediate tensor. See docs/graph_fusions.md.
//
//   Relu(BiasAdd(Conv2D(x, w), b))  ->  _VgpuFusedConv2D(x, w, b)     (bfloat16 only)
//   Relu(BiasAdd(MatMul(a, w), b))  ->  _FusedMatMul(a, w, b)
//     Also with Relu6, or with no activation. What Grappler's remapper does for float32 and
//     half on a GPU, for the bfloat16 of Keras' mixed_bfloat16 policy, which it leaves alone
//     there. The one exception to "bit for bit": the fused kernel rounds to bfloat16 once where
//     the chain rounded after each op, as TensorFlow-CPU's own fused bfloat16 kernels do.
//
//   ReluGrad(MaxPoolGrad(x, y, dy), x)  ->  _VgpuMaxPoolGradWithReluGrad(x, y, dy)
//     The backward pass of ReLU followed by max pooling (Conv2D with a ReLU, then MaxPool2D):
//     the pooling gradient is masked by the ReLU's output as it is written, instead of a
//     second pass reading it back with x.
//
//   MaxPool(x) -> y  and  MaxPoolGrad(x, y, dy)  (or the fusion above)
//     ->  _VgpuMaxPoolWithWindowIndex(x) -> (y, window_index)  and
//         _VgpuMaxPoolGradFromWindowIndex(x, window_index, dy)  (through_relu for the fusion)
//     The forward pass records which element of each window the gradient goes to (a byte per
//     output), so that the gradient does not read x again. Both nodes keep their names; only for
//     windows that tile the input (VALID, strides equal to ksize, at most 127 elements), with
//     TF_ENABLE_MAXPOOL_NANPROP unset or false.
//
//   Cast(n) on the virtual GPU, n in host memory (made on a CPU device; or an int32 or int64
//   made by a shape op or by an int32 op the plugin leaves to TensorFlow's host kernels)
//     ->  _VgpuCastFromHost(n)   (same name, inputs and attributes)
//     Not a fusion: TensorFlow computes integers such as a shape's product on the host for a
//     GPU, and a Cast for the device reading one made a host-to-device copy between the
//     function's host and device parts, whose completion TensorFlow's event manager polls for
//     before the device part goes on. The new node's input is in host memory, so the value
//     arrives through TensorFlow's host-to-host path, and its kernel copies it onto its stream.
//
//   t made on a CPU device (a dataset's batch: IteratorGetNext), read by ops on the virtual GPU
//     ->  _VgpuCastFromHost(t) with SrcT = DstT between them (one per tensor and device)
//     The same for the device's other readers of a host tensor: floating types, uint8 and
//     bool, where the producer's attributes give the type (iterators' output_types, _Arg,
//     Identity, Placeholder); integers are left to TensorFlow (the device's readers of int32 and
//     int64 often take them in host memory).
//
//   Cast(x -> int32) on the virtual GPU, x made on a CPU device (or Cast(h) of an h made
//   there), every reader taking the int32 result in host memory or as an index the copy rewrite
//   copies onto the device
//     ->  the Cast on h's CPU device (and a copy of the Cast(h) beside it)
//     Keras casts a float Input's ids to int32 in an Embedding, and its take wraps them with
//     int32 ops TensorFlow runs on the host: the ids went down from the device mid-step.
//
//   Less(BitwiseAnd(Bitcast(x, int32), INT32_MIN), 0), the Less on the virtual GPU, x float32
//     ->  _VgpuSignBit(x)   (the Less's name; the BitwiseAnd and Bitcast go if nothing else
//                            reads them)
//     Keras' signbit, in its argmax (every accuracy metric): its int32 ops run on the host, so
//     the logits went to the host and the result came back mid-step.
#ifndef VGPU_GRAPH_GRAPH_FUSIONS_H_
#define VGPU_GRAPH_GRAPH_FUSIONS_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"

namespace tensorflow {
class GraphDef;
}  // namespace tensorflow

namespace vgpu::graph_fusions {

// How many op pairs (or chains) were fused, by rewrite.
struct FusionCounts {
  int64_t max_pool_grad_relu_grad = 0;
  int64_t max_pool_window_index = 0;  // MaxPool / gradient pairs given a window index
  int64_t conv_bias_activation = 0;   // bfloat16 Conv2D -> BiasAdd (-> Relu/Relu6)
  int64_t matmul_bias_activation = 0;  // bfloat16 MatMul -> BiasAdd (-> Relu/Relu6)
  int64_t cast_from_host = 0;  // Casts of host tensors given a host-memory input
  int64_t copy_from_host = 0;  // host tensors given a copy onto the device that reads them
  int64_t sign_bit = 0;  // Keras' float32 signbit chains computed on the device
  int64_t cast_to_int32_on_host = 0;  // Casts to int32 of host tensors moved to the host

  int64_t total() const {
    return max_pool_grad_relu_grad + max_pool_window_index + conv_bias_activation +
           matmul_bias_activation + cast_from_host + copy_from_host + sign_bit +
           cast_to_int32_on_host;
  }
};

// Applies every rewrite to `graph`, in place. A pair is rewritten only when both nodes are
// placed on a device of type `device_type` (e.g. "/job:localhost/replica:0/task:0/device:GPU:0"
// for "GPU") and have the same dtype (one the new kernels have). A fusion also needs the first
// node of the pair not in `preserved` (fetched or otherwise kept by name) and with no other
// reader of its output: it is removed, and the fused node takes the second node's name, so its
// readers are unchanged; control dependencies on the removed node move to the fused node. The
// window-index and cast rewrites remove nothing and rename nothing; the copy rewrite adds nodes
// ("<producer>/_vgpu_to_device_<port>", made unique) and points readers at them. A graph with
// nothing to rewrite is left as it was. Never fails: a node it does not understand is left
// alone. Not thread-safe for one graph; distinct graphs may be rewritten concurrently.
FusionCounts Fuse(tensorflow::GraphDef& graph, const absl::flat_hash_set<std::string>& preserved,
                  absl::string_view device_type);

// The fusions made in this process so far (every graph the optimizer has rewritten), and the
// optimizer's way to add to them. Thread-safe.
FusionCounts ProcessTotals();
void AddToProcessTotals(const FusionCounts& counts);

}  // namespace vgpu::graph_fusions

#endif  // VGPU_GRAPH_GRAPH_FUSIONS_H_
