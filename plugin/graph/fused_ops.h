// The ops the plugin's graph optimizer puts in place of TensorFlow op pairs (graph_fusions.h):
// their names, and their registration in TensorFlow's op registry (they are not TensorFlow's
// ops, so the plugin defines them; the virtual GPU's kernels for them are registered with the
// other kernels of their family, kernels/*_ops.cc). Names start with "_Vgpu": an underscore, as
// TensorFlow's own internal ops, so that no user code is expected to create them.
#ifndef VGPU_GRAPH_FUSED_OPS_H_
#define VGPU_GRAPH_FUSED_OPS_H_

#include "absl/status/status.h"

namespace vgpu::fused_ops {

// ReluGrad(MaxPoolGrad(orig_input, orig_output, grad), orig_input): inputs orig_input,
// orig_output, grad; output the gradient with respect to orig_input, through the ReLU whose
// output orig_input is. Attributes as MaxPoolGrad's (T, ksize, strides, padding,
// explicit_paddings, data_format).
inline constexpr char kMaxPoolGradWithReluGrad[] = "_VgpuMaxPoolGradWithReluGrad";

// MaxPool that also gives, as output 1 ("window_index", uint8, the output's shape), which
// element of each window the gradient goes to and whether the window's maximum is positive
// (pooling::kForwardWithWindowIndex). Input and attributes as MaxPool's; only windows that tile
// the input (VALID padding, strides equal to ksize) of at most 127 elements, NaNs not propagated.
inline constexpr char kMaxPoolWithWindowIndex[] = "_VgpuMaxPoolWithWindowIndex";

// MaxPoolGrad from that window index: inputs orig_input (for its shape; not read), window_index,
// grad; output the gradient with respect to orig_input. With the attribute through_relu, the
// gradient through the ReLU whose output orig_input is, as kMaxPoolGradWithReluGrad. Attributes
// otherwise as MaxPoolGrad's.
inline constexpr char kMaxPoolGradFromWindowIndex[] = "_VgpuMaxPoolGradFromWindowIndex";

// Conv2D + BiasAdd (+ Relu or Relu6) for bfloat16, which Grappler's remapper does not fuse on a
// GPU and TensorFlow's _FusedConv2D does not take: inputs input, filter, args (num_args = 1: the
// bias); output the activation's (the sum's without one). Attributes as _FusedConv2D's: T,
// num_args, strides, padding, explicit_paddings, data_format, dilations, use_cudnn_on_gpu,
// fused_ops (["BiasAdd"] or ["BiasAdd", "Relu"|"Relu6"]). The virtual GPU's _FusedConv2D
// kernel runs it.
inline constexpr char kFusedConv2D[] = "_VgpuFusedConv2D";

// Cast whose input stays in host memory: a value computed on the host (the product of a shape,
// an element count, a dataset's batch) converted for the device, or with SrcT = DstT copied to
// it. Input x (SrcT), output y (DstT), attributes as Cast's (SrcT, DstT, Truncate). The value
// reaches the kernel through TensorFlow's host-to-host path instead of a host-to-device copy
// between the function's parts; the kernel copies it onto its stream and casts it there
// (graph_fusions.h).
inline constexpr char kCastFromHost[] = "_VgpuCastFromHost";

// The sign bit of a floating x (true for -0.0 and negative NaNs): input x (T: float32, float16,
// bfloat16, float64), output y (bool, x's shape). In place of Keras' float32 signbit,
// Less(BitwiseAnd(Bitcast(x, int32), INT32_MIN), 0), whose int32 ops run on the host: its
// argmax (every accuracy metric) sent the logits to the host and the result back mid-step.
inline constexpr char kSignBit[] = "_VgpuSignBit";

// Keras' Adam (and AdamW) update step in one op, created by the Keras hook
// (python/vgpu/_keras_hook.py) in place of the twelve element-wise ops and three assignments of
// Keras' update_step for a variable on the virtual GPU: inputs var, m, v (resources), alpha
// (Keras' step size), one_minus_beta1, one_minus_beta2, epsilon, grad (T); no outputs;
// attributes T (half, bfloat16, float, double; the hook makes it for float and double) and
// use_locking. m += (grad - m) * one_minus_beta1;
// v += (grad^2 - v) * one_minus_beta2; var -= m * alpha / (sqrt(v) + epsilon), each operation
// rounded as Keras' separate ops round it (training::kApplyKerasAdam).
inline constexpr char kApplyKerasAdam[] = "_VgpuApplyKerasAdam";

// Registers every fused op's definition with TensorFlow (once per process; later calls do
// nothing). Call from TF_InitKernel, before the kernels are registered. Not thread-safe
// against itself (TensorFlow calls TF_InitKernel once, on one thread).
absl::Status RegisterDefinitions();

// Whether RegisterDefinitions succeeded in this load of the plugin (the graph optimizer puts
// fused ops in graphs only then). Thread-safe.
bool DefinitionsRegistered();

}  // namespace vgpu::fused_ops

#endif  // VGPU_GRAPH_FUSED_OPS_H_
