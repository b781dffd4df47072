// The graph rewrites of the plugin's Grappler optimizer (see graph_fusions.h), on TensorFlow's
// GraphDef protocol buffer (its generated classes come with TensorFlow's headers and library).
#include "plugin/graph/graph_fusions.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "plugin/graph/fused_ops.h"
#include "plugin/protocol/kernels/pooling.h"
#include "tensorflow/core/framework/graph.pb.h"
#include "tensorflow/core/framework/node_def.pb.h"
#include "tensorflow/core/framework/tensor.pb.h"
#include "tensorflow/core/framework/tensor_shape.pb.h"
#include "tensorflow/core/framework/types.pb.h"

namespace vgpu::graph_fusions {
namespace {

using tensorflow::GraphDef;
using tensorflow::NodeDef;

// One input of a node as a GraphDef names it: "node", "node:port" or "^node" (control).
struct InputRef {
  absl::string_view node;
  int port = 0;
  bool control = false;
};

InputRef ParseInput(absl::string_view input) {
  if (absl::StartsWith(input, "^")) return {input.substr(1), -1, true};
  const size_t colon = input.rfind(':');
  int port = 0;
  if (colon != absl::string_view::npos && absl::SimpleAtoi(input.substr(colon + 1), &port)) {
    return {input.substr(0, colon), port, false};
  }
  return {input, 0, false};
}

bool SameTensor(const InputRef& a, const InputRef& b) {
  return !a.control && !b.control && a.node == b.node && a.port == b.port;
}

// Whether `device` ("/job:localhost/replica:0/task:0/device:GPU:0") has type `type`.
bool PlacedOn(absl::string_view device, absl::string_view type) {
  constexpr absl::string_view kDevice = "/device:";
  const size_t at = device.find(kDevice);
  if (at == absl::string_view::npos) return false;
  absl::string_view rest = device.substr(at + kDevice.size());
  return rest.substr(0, rest.find(':')) == type;
}

// The node's type attribute `name`, or DT_INVALID.
tensorflow::DataType TypeAttr(const NodeDef& node, const char* name) {
  auto it = node.attr().find(name);
  return it == node.attr().end() ? tensorflow::DT_INVALID : it->second.type();
}

// The node's "T" attribute, or DT_INVALID.
tensorflow::DataType TypeOf(const NodeDef& node) { return TypeAttr(node, "T"); }

bool FusedKernelHasType(tensorflow::DataType type) {
  return type == tensorflow::DT_FLOAT || type == tensorflow::DT_HALF ||
         type == tensorflow::DT_BFLOAT16 || type == tensorflow::DT_DOUBLE;
}

// The graph's nodes by name, and how many data inputs of other nodes read each node.
struct GraphIndex {
  explicit GraphIndex(const GraphDef& graph) {
    for (int i = 0; i < graph.node_size(); ++i) {
      const NodeDef& node = graph.node(i);
      by_name.emplace(node.name(), i);
      for (const std::string& input : node.input()) {
        const InputRef ref = ParseInput(input);
        if (!ref.control) ++data_readers[ref.node];
      }
    }
  }
  absl::flat_hash_map<absl::string_view, int> by_name;
  absl::flat_hash_map<absl::string_view, int> data_readers;
};

// The fused node for MaxPoolGrad `pool_grad` read by ReluGrad `relu_grad`: relu_grad's name,
// device and underscore attributes (output shapes, colocation), pool_grad's data inputs and op
// attributes, and both nodes' control inputs.
NodeDef MaxPoolGradWithReluGrad(const NodeDef& pool_grad, const NodeDef& relu_grad) {
  NodeDef fused;
  fused.set_name(relu_grad.name());
  fused.set_op(fused_ops::kMaxPoolGradWithReluGrad);
  fused.set_device(relu_grad.device());
  for (int i = 0; i < 3; ++i) fused.add_input(pool_grad.input(i));
  const std::string on_pool_grad = absl::StrCat("^", pool_grad.name());
  std::vector<std::string> controls;
  auto add_control = [&](const std::string& input) {
    if (!ParseInput(input).control || input == on_pool_grad) return;
    for (const std::string& seen : controls) {
      if (seen == input) return;
    }
    controls.push_back(input);
  };
  for (int i = 3; i < pool_grad.input_size(); ++i) add_control(pool_grad.input(i));
  for (int i = 2; i < relu_grad.input_size(); ++i) add_control(relu_grad.input(i));
  for (std::string& control : controls) fused.add_input(std::move(control));
  for (const auto& [name, value] : pool_grad.attr()) {
    if (!absl::StartsWith(name, "_")) (*fused.mutable_attr())[name] = value;
  }
  for (const auto& [name, value] : relu_grad.attr()) {
    if (absl::StartsWith(name, "_")) (*fused.mutable_attr())[name] = value;
  }
  return fused;
}

// Whether graph node `relu_grad` is ReluGrad(MaxPoolGrad(x, y, dy), x) with a MaxPoolGrad that
// may go (see Fuse); if so, its index.
std::optional<int> FusableMaxPoolGrad(const GraphDef& graph, const GraphIndex& index,
                                      const std::vector<bool>& removed, const NodeDef& relu_grad,
                                      const absl::flat_hash_set<std::string>& preserved,
                                      absl::string_view device_type) {
  if (relu_grad.op() != "ReluGrad" || relu_grad.input_size() < 2) return std::nullopt;
  const InputRef gradient = ParseInput(relu_grad.input(0));
  const InputRef features = ParseInput(relu_grad.input(1));
  if (gradient.control || gradient.port != 0 || features.control) return std::nullopt;
  auto found = index.by_name.find(gradient.node);
  if (found == index.by_name.end() || removed[found->second]) return std::nullopt;
  const NodeDef& pool_grad = graph.node(found->second);
  if (pool_grad.op() != "MaxPoolGrad" || pool_grad.input_size() < 3) return std::nullopt;
  for (int i = 0; i < 3; ++i) {
    if (ParseInput(pool_grad.input(i)).control) return std::nullopt;
  }
  if (!SameTensor(ParseInput(pool_grad.input(0)), features)) return std::nullopt;
  auto readers = index.data_readers.find(pool_grad.name());
  if (readers == index.data_readers.end() || readers->second != 1) return std::nullopt;
  if (preserved.contains(pool_grad.name())) return std::nullopt;
  if (pool_grad.device() != relu_grad.device() || !PlacedOn(relu_grad.device(), device_type)) {
    return std::nullopt;
  }
  const tensorflow::DataType type = TypeOf(relu_grad);
  if (type != TypeOf(pool_grad) || !FusedKernelHasType(type)) return std::nullopt;
  return found->second;
}

// Whether TensorFlow's max pooling kernels propagate NaNs (TF_ENABLE_MAXPOOL_NANPROP true or
// 1; the plugin's kernels read it the same way): then windows are not given an index.
bool MaxPoolPropagatesNan() {
  const char* raw = std::getenv("TF_ENABLE_MAXPOOL_NANPROP");
  if (raw == nullptr) return false;
  const std::string value = absl::AsciiStrToLower(raw);
  return value != "0" && value != "false";
}

// The node's list(int) attribute `name` (empty if it has none).
std::vector<int64_t> IntList(const NodeDef& node, const char* name) {
  auto it = node.attr().find(name);
  if (it == node.attr().end()) return {};
  return {it->second.list().i().begin(), it->second.list().i().end()};
}

std::string StringAttr(const NodeDef& node, const char* name, const char* otherwise) {
  auto it = node.attr().find(name);
  return it == node.attr().end() ? otherwise : it->second.s();
}

// Whether MaxPool node `pool` has windows the window-index kernels take: VALID padding, ksize
// equal to strides, 1 over the batch and channels, at most pooling::kMaxWindowSlots elements.
bool HasWindowsThatTile(const NodeDef& pool) {
  if (StringAttr(pool, "padding", "") != "VALID") return false;
  const std::string format = StringAttr(pool, "data_format", "NHWC");
  if (format != "NHWC" && format != "NCHW") return false;
  const std::vector<int64_t> ksize = IntList(pool, "ksize");
  if (ksize.size() != 4 || IntList(pool, "strides") != ksize) return false;
  const int channel = format == "NHWC" ? 3 : 1;
  int64_t slots = 1;
  for (int d = 0; d < 4; ++d) {
    if (d == 0 || d == channel) {
      if (ksize[d] != 1) return false;
      continue;
    }
    if (ksize[d] < 1 || ksize[d] > pooling::kMaxWindowSlots) return false;
    slots *= ksize[d];
  }
  return slots <= pooling::kMaxWindowSlots;
}

// Whether `grad` (MaxPoolGrad or the fusion with ReluGrad) is the gradient of `pool` (a MaxPool,
// or one this rewrite already gave a window index for another gradient) that the window-index
// rewrite may take: orig_input and orig_output are pool's input and output 0, the same device
// of `device_type`, dtype and window attributes.
bool IsGradientOfPool(const NodeDef& grad, const NodeDef& pool, absl::string_view device_type) {
  if (pool.op() != "MaxPool" && pool.op() != fused_ops::kMaxPoolWithWindowIndex) return false;
  if (pool.input_size() < 1) return false;
  const InputRef pool_input = ParseInput(pool.input(0));
  if (pool_input.control || !SameTensor(ParseInput(grad.input(0)), pool_input)) return false;
  if (pool.device() != grad.device() || !PlacedOn(grad.device(), device_type)) return false;
  const tensorflow::DataType type = TypeOf(pool);
  if (type != TypeOf(grad) || !FusedKernelHasType(type)) return false;
  for (const char* name : {"ksize", "strides"}) {
    if (IntList(pool, name) != IntList(grad, name)) return false;
  }
  for (const char* name : {"padding", "data_format"}) {
    if (StringAttr(pool, name, "NHWC") != StringAttr(grad, name, "NHWC")) return false;
  }
  return HasWindowsThatTile(pool);
}

// Gives MaxPool nodes whose output 0 feeds a MaxPoolGrad (or its fusion with ReluGrad) as
// orig_output the window index, and those gradients the index instead of recomputing the
// maximum from orig_input. Returns how many gradients were rewritten.
int64_t GiveMaxPoolsAWindowIndex(GraphDef& graph, absl::string_view device_type) {
  if (MaxPoolPropagatesNan()) return 0;
  absl::flat_hash_map<std::string, int> by_name;
  for (int i = 0; i < graph.node_size(); ++i) by_name.emplace(graph.node(i).name(), i);
  std::vector<bool> pool_rewritten(graph.node_size(), false);
  int64_t rewritten = 0;
  for (int g = 0; g < graph.node_size(); ++g) {
    const NodeDef& grad = graph.node(g);
    const bool through_relu = grad.op() == fused_ops::kMaxPoolGradWithReluGrad;
    if (grad.op() != "MaxPoolGrad" && !through_relu) continue;
    if (grad.input_size() < 3) continue;
    bool data_inputs = true;
    for (int i = 0; i < 3; ++i) data_inputs = data_inputs && !ParseInput(grad.input(i)).control;
    const InputRef output = ParseInput(grad.input(1));
    if (!data_inputs || output.port != 0) continue;
    auto found = by_name.find(std::string(output.node));
    if (found == by_name.end()) continue;
    const int p = found->second;
    // A _VgpuMaxPoolWithWindowIndex already in the graph (named by its author) is not taken.
    if (graph.node(p).op() != "MaxPool" && !pool_rewritten[p]) continue;
    if (!IsGradientOfPool(grad, graph.node(p), device_type)) continue;
    if (!pool_rewritten[p]) {
      NodeDef& pool = *graph.mutable_node(p);
      pool.set_op(fused_ops::kMaxPoolWithWindowIndex);
      pool.mutable_attr()->erase("_output_shapes");  // it has two outputs now
      pool_rewritten[p] = true;
    }
    NodeDef& rewritten_grad = *graph.mutable_node(g);
    const std::string index = absl::StrCat(graph.node(p).name(), ":1");
    rewritten_grad.set_op(fused_ops::kMaxPoolGradFromWindowIndex);
    rewritten_grad.set_input(1, index);
    (*rewritten_grad.mutable_attr())["through_relu"].set_b(through_relu);
    ++rewritten;
  }
  return rewritten;
}

// A Conv2D or MatMul, its BiasAdd and the activation after it (null for none): the chain the
// bias-and-activation rewrite replaces by one fused node.
struct BiasActivationChain {
  int base = -1;       // Conv2D or MatMul
  int bias_add = -1;   // BiasAdd(base, bias)
  int activation = -1;  // Relu/Relu6(bias_add), or -1
};

// The node of `graph` that input `input` of some node names at port 0, when it is a data input,
// present and not removed; else -1.
int DataInputNode(const GraphDef& graph, const GraphIndex& index, const std::vector<bool>& removed,
                  const std::string& input) {
  const InputRef ref = ParseInput(input);
  if (ref.control || ref.port != 0) return -1;
  auto found = index.by_name.find(ref.node);
  if (found == index.by_name.end() || removed[found->second]) return -1;
  return found->second;
}

// Whether node `i` may be folded into the node that reads it: read by exactly one data input,
// not kept by name, on `device`.
bool Foldable(const GraphDef& graph, const GraphIndex& index,
              const absl::flat_hash_set<std::string>& preserved, int i,
              const std::string& device) {
  const NodeDef& node = graph.node(i);
  auto readers = index.data_readers.find(node.name());
  return readers != index.data_readers.end() && readers->second == 1 &&
         !preserved.contains(node.name()) && node.device() == device;
}

// Whether graph node `top` ends a bfloat16 chain Conv2D/MatMul -> BiasAdd (-> Relu/Relu6) on a
// device of `device_type` that the rewrite may fuse (see Fuse); if so, the chain.
std::optional<BiasActivationChain> FusableBiasActivationChain(
    const GraphDef& graph, const GraphIndex& index, const std::vector<bool>& removed, int top,
    const absl::flat_hash_set<std::string>& preserved, absl::string_view device_type) {
  const NodeDef& last = graph.node(top);
  BiasActivationChain chain;
  if (last.op() == "Relu" || last.op() == "Relu6") {
    if (last.input_size() < 1) return std::nullopt;
    chain.activation = top;
    chain.bias_add = DataInputNode(graph, index, removed, last.input(0));
    if (chain.bias_add < 0 || !Foldable(graph, index, preserved, chain.bias_add, last.device())) {
      return std::nullopt;
    }
  } else {
    chain.bias_add = top;
  }
  const NodeDef& bias_add = graph.node(chain.bias_add);
  if (bias_add.op() != "BiasAdd" || bias_add.input_size() < 2) return std::nullopt;
  if (ParseInput(bias_add.input(1)).control) return std::nullopt;
  chain.base = DataInputNode(graph, index, removed, bias_add.input(0));
  if (chain.base < 0 || !Foldable(graph, index, preserved, chain.base, last.device())) {
    return std::nullopt;
  }
  const NodeDef& base = graph.node(chain.base);
  if ((base.op() != "Conv2D" && base.op() != "MatMul") || base.input_size() < 2) {
    return std::nullopt;
  }
  for (int i = 0; i < 2; ++i) {
    if (ParseInput(base.input(i)).control) return std::nullopt;
  }
  if (!PlacedOn(last.device(), device_type)) return std::nullopt;
  for (const NodeDef* node : {&base, &bias_add, &last}) {
    if (TypeOf(*node) != tensorflow::DT_BFLOAT16) return std::nullopt;
  }
  // The bias runs along the convolution's channels, or a matrix product's columns.
  const std::string bias_format = StringAttr(bias_add, "data_format", "NHWC");
  if (base.op() == "Conv2D" ? bias_format != StringAttr(base, "data_format", "NHWC")
                            : bias_format != "NHWC") {
    return std::nullopt;
  }
  return chain;
}

// The fused node of `chain`: the last node's name, device and underscore attributes, the base's
// two data inputs and the bias, the op attributes the fused op has, and the chain's control
// inputs (none on the chain's own nodes).
NodeDef BiasActivationNode(const GraphDef& graph, const BiasActivationChain& chain) {
  const NodeDef& base = graph.node(chain.base);
  const NodeDef& bias_add = graph.node(chain.bias_add);
  const NodeDef& last = graph.node(chain.activation >= 0 ? chain.activation : chain.bias_add);
  const bool conv = base.op() == "Conv2D";
  NodeDef fused;
  fused.set_name(last.name());
  fused.set_op(conv ? fused_ops::kFusedConv2D : "_FusedMatMul");
  fused.set_device(last.device());
  fused.add_input(base.input(0));
  fused.add_input(base.input(1));
  fused.add_input(bias_add.input(1));
  std::vector<std::string> controls;
  const std::string on_base = absl::StrCat("^", base.name());
  const std::string on_bias_add = absl::StrCat("^", bias_add.name());
  for (const NodeDef* node : {&base, &bias_add, &last}) {
    // Two data inputs each, except an activation's one (`last` is the BiasAdd without one).
    const int data_inputs = node == &last && chain.activation >= 0 ? 1 : 2;
    for (int i = data_inputs; i < node->input_size(); ++i) {
      const std::string& input = node->input(i);
      if (!ParseInput(input).control || input == on_base || input == on_bias_add) continue;
      bool seen = false;
      for (const std::string& kept : controls) seen = seen || kept == input;
      if (!seen) controls.push_back(input);
    }
  }
  for (std::string& control : controls) fused.add_input(std::move(control));
  auto& attr = *fused.mutable_attr();
  const std::vector<const char*> carried =
      conv ? std::vector<const char*>{"T", "strides", "padding", "explicit_paddings",
                                      "data_format", "dilations", "use_cudnn_on_gpu"}
           : std::vector<const char*>{"T", "transpose_a", "transpose_b"};
  for (const char* name : carried) {
    auto it = base.attr().find(name);
    if (it != base.attr().end()) attr[name] = it->second;
  }
  attr["num_args"].set_i(1);
  auto* fused_op_names = attr["fused_ops"].mutable_list();
  fused_op_names->add_s("BiasAdd");
  if (chain.activation >= 0) fused_op_names->add_s(last.op());
  if (!conv) {  // _FusedMatMul's own attributes, at their defaults
    attr["epsilon"].set_f(0.0001f);
    attr["leakyrelu_alpha"].set_f(0.2f);
  }
  for (const auto& [name, value] : last.attr()) {
    if (absl::StartsWith(name, "_")) attr[name] = value;
  }
  return fused;
}

// Renames control inputs on removed nodes to the nodes that took their place, once each.
void MoveControlInputs(GraphDef& graph, const std::vector<bool>& removed,
                       const absl::flat_hash_map<std::string, std::string>& replaced_by) {
  for (int i = 0; i < graph.node_size(); ++i) {
    if (removed[i]) continue;
    NodeDef& node = *graph.mutable_node(i);
    bool changed = false;
    for (std::string& input : *node.mutable_input()) {
      const InputRef ref = ParseInput(input);
      if (!ref.control) continue;
      auto it = replaced_by.find(ref.node);
      if (it == replaced_by.end()) continue;
      input = absl::StrCat("^", it->second);
      changed = true;
    }
    if (!changed) continue;
    // Drop a control input that is now repeated, or on the node itself.
    std::vector<std::string> kept;
    for (const std::string& input : node.input()) {
      const InputRef ref = ParseInput(input);
      bool drop = ref.control && ref.node == node.name();
      for (const std::string& seen : kept) drop = drop || (ref.control && seen == input);
      if (!drop) kept.push_back(input);
    }
    node.clear_input();
    for (std::string& input : kept) node.add_input(std::move(input));
  }
}

// Removes the nodes marked in `removed`, keeping the others in their order.
void RemoveNodes(GraphDef& graph, const std::vector<bool>& removed) {
  auto* nodes = graph.mutable_node();
  int kept = 0;
  for (int i = 0; i < nodes->size(); ++i) {
    if (removed[i]) continue;
    if (kept != i) nodes->SwapElements(kept, i);
    ++kept;
  }
  nodes->DeleteSubrange(kept, nodes->size() - kept);
}

std::atomic<int64_t> total_max_pool_grad_relu_grad{0};
std::atomic<int64_t> total_max_pool_window_index{0};
std::atomic<int64_t> total_cast_from_host{0};
std::atomic<int64_t> total_copy_from_host{0};
std::atomic<int64_t> total_sign_bit{0};
std::atomic<int64_t> total_cast_to_int32_on_host{0};
std::atomic<int64_t> total_conv_bias_activation{0};
std::atomic<int64_t> total_matmul_bias_activation{0};

// The element types of the virtual GPU's Cast, each as a source and as a destination; the types
// of the host tensors the rewrites below give a host-memory reader.
bool IsCastType(tensorflow::DataType type) {
  switch (type) {
    case tensorflow::DT_FLOAT:
    case tensorflow::DT_HALF:
    case tensorflow::DT_BFLOAT16:
    case tensorflow::DT_DOUBLE:
    case tensorflow::DT_INT32:
    case tensorflow::DT_INT64:
    case tensorflow::DT_UINT8:
    case tensorflow::DT_BOOL:
      return true;
    default:
      return false;
  }
}

bool IsHostInteger(tensorflow::DataType type) {
  return type == tensorflow::DT_INT32 || type == tensorflow::DT_INT64;
}

// The int32 ops whose int32 kernels on a device of the virtual GPU's type take their int32
// inputs and make their int32 outputs in host memory: TensorFlow's host kernels of the ops the
// plugin has no int32 kernel for (arithmetic, comparisons, reductions, concatenation, reshapes)
// and the plugin's int32 kernels that compute on the host (StridedSlice, Pack, GatherV2, Gather,
// DynamicStitch, SelectV2). Checked against the plugin's registrations by
// test_graph_cast_from_host.py.
bool IsHostInt32Op(absl::string_view op) {
  static constexpr absl::string_view kHostInt32Ops[] = {
      "Prod", "Sum", "Max", "Min", "Mul", "AddV2", "Add", "Sub", "FloorDiv", "FloorMod",
      "Maximum", "Minimum", "Neg", "StridedSlice", "Pack", "ConcatV2", "Slice", "Unpack",
      "GatherV2", "Gather", "DynamicStitch", "SelectV2", "Reshape", "ExpandDims", "Less",
      "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual"};
  for (absl::string_view host_op : kHostInt32Ops) {
    if (op == host_op) return true;
  }
  return false;
}

// Whether `producer`'s output of type `type` is in host memory wherever it runs. The optimizer
// sees the function's requested devices, before TensorFlow's placer moves small integer ops to
// the host, so it decides by op type: an op placed on a CPU device; for integers also the shape
// ops (their outputs are host memory on every device); an int32 argument; and the int32 ops of
// IsHostInt32Op.
bool OutputIsInHostMemory(const NodeDef& producer, tensorflow::DataType type) {
  if (PlacedOn(producer.device(), "CPU")) return true;
  if (!IsHostInteger(type)) return false;
  const std::string& op = producer.op();
  if (op == "Shape" || op == "Size" || op == "Rank") return true;
  if (type != tensorflow::DT_INT32) return false;
  return op == "_Arg" || IsHostInt32Op(op);
}

// Gives every Cast on a `device_type` device whose input is in host memory
// (OutputIsInHostMemory) a host-memory input (kCastFromHost); returns how many.
int64_t CastHostTensorsFromHost(GraphDef& graph, absl::string_view device_type) {
  const GraphIndex index(graph);  // only ops change below, never names
  const auto& by_name = index.by_name;
  int64_t rewritten = 0;
  for (int i = 0; i < graph.node_size(); ++i) {
    NodeDef& cast = *graph.mutable_node(i);
    if (cast.op() != "Cast" || cast.input_size() < 1 || !PlacedOn(cast.device(), device_type) ||
        !IsCastType(TypeAttr(cast, "SrcT")) || !IsCastType(TypeAttr(cast, "DstT"))) {
      continue;
    }
    const InputRef input = ParseInput(cast.input(0));
    auto producer = by_name.find(input.node);
    if (input.control || producer == by_name.end() ||
        !OutputIsInHostMemory(graph.node(producer->second), TypeAttr(cast, "SrcT"))) {
      continue;
    }
    cast.set_op(fused_ops::kCastFromHost);
    ++rewritten;
  }
  return rewritten;
}

// The element type of output `port` of `producer` where its attributes say it without the op's
// definition: an "output_types" list (iterators, optionals), an _Arg's or Identity's "T", a
// Placeholder's "dtype"; otherwise DT_INVALID.
tensorflow::DataType OutputTypeFromAttributes(const NodeDef& producer, int port) {
  auto types = producer.attr().find("output_types");
  if (types != producer.attr().end()) {
    const auto& list = types->second.list().type();
    if (port < 0 || port >= list.size()) return tensorflow::DT_INVALID;
    return static_cast<tensorflow::DataType>(list[port]);
  }
  if (port != 0) return tensorflow::DT_INVALID;
  const std::string& op = producer.op();
  if (op == "_Arg" || op == "Identity") return TypeOf(producer);
  if (op == "Placeholder") return TypeAttr(producer, "dtype");
  return tensorflow::DT_INVALID;
}

// The integer inputs that the virtual GPU's kernels read in device memory and a graph often
// makes on the host: indices, segment ids, labels. The input's position and its type attribute.
struct DeviceIntegerInput {
  absl::string_view op;
  int input;
  const char* type_attribute;
};
constexpr DeviceIntegerInput kDeviceIntegerInputs[] = {
    {"GatherV2", 1, "Tindices"},
    {"Gather", 1, "Tindices"},
    {"ResourceGather", 1, "Tindices"},
    {"GatherNd", 1, "Tindices"},
    {"ScatterNd", 0, "Tindices"},
    {"TensorScatterUpdate", 1, "Tindices"},
    {"TensorScatterAdd", 1, "Tindices"},
    {"ResourceScatterAdd", 1, "Tindices"},
    {"ResourceScatterUpdate", 1, "Tindices"},
    {"UnsortedSegmentSum", 1, "Tindices"},
    {"UnsortedSegmentMax", 1, "Tindices"},
    {"UnsortedSegmentMin", 1, "Tindices"},
    {"UnsortedSegmentProd", 1, "Tindices"},
    {"SparseSoftmaxCrossEntropyWithLogits", 1, "Tlabels"},
};

// The type of `reader`'s input `k` where it is an integer that the reader's kernel on the
// virtual GPU takes in device memory (kDeviceIntegerInputs; a gather of int32 params runs on the
// host with its indices there); otherwise DT_INVALID.
tensorflow::DataType DeviceIntegerInputType(const NodeDef& reader, int k) {
  for (const DeviceIntegerInput& entry : kDeviceIntegerInputs) {
    if (reader.op() != entry.op || k != entry.input) continue;
    if ((entry.op == "GatherV2" || entry.op == "Gather") &&
        TypeAttr(reader, "Tparams") == tensorflow::DT_INT32) {
      return tensorflow::DT_INVALID;
    }
    const tensorflow::DataType type = TypeAttr(reader, entry.type_attribute);
    return IsHostInteger(type) ? type : tensorflow::DT_INVALID;
  }
  return tensorflow::DT_INVALID;
}

// Whether `reader`, on a device of the virtual GPU's type, takes an int32 tensor it reads in
// host memory: an int32 op of IsHostInt32Op (a gather's int32 params: "Tparams"), or a Cast
// from int32 (CastHostTensorsFromHost gives it a host-memory input).
bool ReadsInt32InHostMemory(const NodeDef& reader) {
  const std::string& op = reader.op();
  if (op == "Cast") return TypeAttr(reader, "SrcT") == tensorflow::DT_INT32;
  if (op == "GatherV2" || op == "Gather") {
    return TypeAttr(reader, "Tparams") == tensorflow::DT_INT32;
  }
  return TypeOf(reader) == tensorflow::DT_INT32 && IsHostInt32Op(op);
}

// Computes a Cast to int32 on the host where its input is on the host and its readers take the
// result there: a Cast(x -> int32) on a `device_type` device, x made on a CPU device, or x =
// Cast(h) on that device with h made on a CPU device (Keras casting a batch of ids to a float
// Input's type, then an Embedding casting them back), whose readers all take it in host memory
// (ReadsInt32InHostMemory, or on a CPU device) or read it as an index the copy rewrite copies
// onto the device (DeviceIntegerInputType), at least one of them in host memory. The Cast moves
// to h's CPU device (same name, inputs and attributes), and a Cast(h) in between gets a copy
// there ("<name>/_vgpu_on_host"); a Cast(h) nothing else reads goes, its control dependents
// moved to the copy. On the device the Cast's result went down to the host mid-step for its
// host readers, the host waiting for the device to reach it; on the host it is TensorFlow's
// CPU Cast of the same values, so the results are the same bit for bit. Returns how many.
int64_t CastsToInt32OnHost(GraphDef& graph, const absl::flat_hash_set<std::string>& preserved,
                           absl::string_view device_type) {
  // The data readers of each node's output 0, as (node, input) positions.
  absl::flat_hash_map<std::string, std::vector<std::pair<int, int>>> readers;
  for (int i = 0; i < graph.node_size(); ++i) {
    const NodeDef& node = graph.node(i);
    for (int k = 0; k < node.input_size(); ++k) {
      const InputRef input = ParseInput(node.input(k));
      if (input.control) break;  // control inputs follow the data inputs
      if (input.port == 0) readers[std::string(input.node)].emplace_back(i, k);
    }
  }
  const GraphIndex index(graph);  // names are added after the loop below, never changed
  const auto& by_name = index.by_name;
  auto is_device_cast = [&](const NodeDef& node) {
    return node.op() == "Cast" && node.input_size() >= 1 &&
           PlacedOn(node.device(), device_type) && !preserved.contains(node.name()) &&
           IsCastType(TypeAttr(node, "SrcT")) && IsCastType(TypeAttr(node, "DstT"));
  };
  auto host_producer = [&](const NodeDef& node) -> const NodeDef* {
    const InputRef input = ParseInput(node.input(0));
    auto producer = by_name.find(input.node);
    if (input.control || producer == by_name.end()) return nullptr;
    const NodeDef& made_by = graph.node(producer->second);
    return PlacedOn(made_by.device(), "CPU") ? &made_by : nullptr;
  };
  std::vector<bool> removed(graph.node_size(), false);
  absl::flat_hash_map<std::string, std::string> replaced_by;
  absl::flat_hash_map<std::string, std::string> host_copy_of;  // Cast(h) -> its copy's name
  absl::flat_hash_set<std::string> added_names;
  std::vector<NodeDef> added;
  int64_t moved = 0;
  const int original_nodes = graph.node_size();
  for (int i = 0; i < original_nodes; ++i) {
    const NodeDef& cast = graph.node(i);
    if (!is_device_cast(cast) || TypeAttr(cast, "DstT") != tensorflow::DT_INT32) continue;
    // Where its input is on the host: made there, or through a Cast of a host tensor.
    const NodeDef* host = host_producer(cast);
    int between = -1;
    if (host == nullptr) {
      auto producer = by_name.find(ParseInput(cast.input(0)).node);
      if (producer == by_name.end() || removed[producer->second] ||
          ParseInput(cast.input(0)).port != 0) {
        continue;
      }
      const NodeDef& inner = graph.node(producer->second);
      if (!is_device_cast(inner) || (host = host_producer(inner)) == nullptr) continue;
      between = producer->second;
    }
    // Every reader takes the result in host memory, or as an index copied to the device.
    bool all_fine = true, some_on_host = false;
    for (const auto& [r, k] : readers[cast.name()]) {
      const NodeDef& reader = graph.node(r);
      if (PlacedOn(reader.device(), "CPU") ||
          (PlacedOn(reader.device(), device_type) && ReadsInt32InHostMemory(reader))) {
        some_on_host = true;
      } else if (!PlacedOn(reader.device(), device_type) ||
                 DeviceIntegerInputType(reader, k) != tensorflow::DT_INT32) {
        all_fine = false;
        break;
      }
    }
    if (!all_fine || !some_on_host) continue;
    const std::string host_device = host->device();
    if (between >= 0) {
      const NodeDef& inner = graph.node(between);
      auto [copy_name, fresh] = host_copy_of.try_emplace(inner.name());
      if (fresh) {  // one copy of a Cast(h) for all the int32 Casts that move off it
        std::string name = absl::StrCat(inner.name(), "/_vgpu_on_host");
        for (int n = 1; by_name.contains(name) || added_names.contains(name); ++n) {
          name = absl::StrCat(inner.name(), "/_vgpu_on_host_", n);
        }
        NodeDef& copy = added.emplace_back(inner);
        copy.set_name(name);
        copy.set_device(host_device);
        added_names.insert(name);
        copy_name->second = std::move(name);
      }
      // The Cast(h) goes once the last of its readers has moved off it.
      std::vector<std::pair<int, int>>& inner_readers = readers[inner.name()];
      inner_readers.erase(std::remove_if(inner_readers.begin(), inner_readers.end(),
                                         [&](const std::pair<int, int>& rk) {
                                           return rk.first == i;
                                         }),
                          inner_readers.end());
      if (inner_readers.empty() && !preserved.contains(inner.name())) {
        removed[between] = true;
        replaced_by.emplace(inner.name(), copy_name->second);
      }
      graph.mutable_node(i)->set_input(0, copy_name->second);
    }
    graph.mutable_node(i)->set_device(host_device);
    ++moved;
  }
  for (NodeDef& node : added) *graph.add_node() = std::move(node);
  if (!replaced_by.empty()) {
    removed.resize(graph.node_size(), false);
    MoveControlInputs(graph, removed, replaced_by);
    RemoveNodes(graph, removed);
  }
  return moved;
}

// Puts a copy (kCastFromHost with SrcT = DstT, host-memory input) between a host tensor and its
// data readers on each `device_type` device, one copy per tensor and device, named after the
// tensor, on the device: for every tensor made on a CPU device whose type
// OutputTypeFromAttributes knows and which is not an integer (the device's readers of int32 and
// int64 often read them in host memory), and for the integers in host memory
// (OutputIsInHostMemory) that a device kernel reads in device memory (DeviceIntegerInputType).
// Returns how many copies.
int64_t CopyHostTensorsForDevice(GraphDef& graph, absl::string_view device_type) {
  const GraphIndex index(graph);  // names are added below, never changed
  absl::flat_hash_map<std::string, std::string> copy_of;  // "tensor device" -> copy's name
  absl::flat_hash_set<std::string> added_names;
  std::vector<NodeDef> copies;
  const int original_nodes = graph.node_size();
  for (int i = 0; i < original_nodes; ++i) {
    NodeDef& reader = *graph.mutable_node(i);
    if (!PlacedOn(reader.device(), device_type) || reader.op() == fused_ops::kCastFromHost) {
      continue;
    }
    for (int k = 0; k < reader.input_size(); ++k) {
      const InputRef input = ParseInput(reader.input(k));
      if (input.control) break;  // control inputs follow the data inputs
      auto producer = index.by_name.find(input.node);
      if (producer == index.by_name.end()) continue;
      const NodeDef& made_by = graph.node(producer->second);
      tensorflow::DataType type = tensorflow::DT_INVALID;
      if (PlacedOn(made_by.device(), "CPU")) {
        type = OutputTypeFromAttributes(made_by, input.port);
        if (!IsCastType(type) || IsHostInteger(type)) type = tensorflow::DT_INVALID;
      }
      if (type == tensorflow::DT_INVALID) {
        const tensorflow::DataType integer = DeviceIntegerInputType(reader, k);
        if (integer == tensorflow::DT_INVALID || !OutputIsInHostMemory(made_by, integer)) continue;
        type = integer;
      }
      const std::string tensor = absl::StrCat(input.node, ":", input.port);
      auto [copy, fresh] = copy_of.try_emplace(absl::StrCat(tensor, " ", reader.device()));
      if (fresh) {
        std::string name = absl::StrCat(input.node, "/_vgpu_to_device_", input.port);
        for (int n = 1; index.by_name.contains(name) || added_names.contains(name); ++n) {
          name = absl::StrCat(input.node, "/_vgpu_to_device_", input.port, "_", n);
        }
        NodeDef& node = copies.emplace_back();
        node.set_name(name);
        node.set_op(fused_ops::kCastFromHost);
        node.set_device(reader.device());
        node.add_input(tensor);
        (*node.mutable_attr())["SrcT"].set_type(type);
        (*node.mutable_attr())["DstT"].set_type(type);
        (*node.mutable_attr())["Truncate"].set_b(false);
        added_names.insert(name);
        copy->second = std::move(name);
      }
      reader.set_input(k, copy->second);
    }
  }
  // A control input from a CPU node on a device node is sent as a dummy tensor copied into
  // device memory (TensorFlow's partitioner); where that node's output is copied to the device
  // anyway, the copy, which runs after it, takes the control input's place.
  absl::flat_hash_map<std::string, std::string> a_copy_of;  // "node device" -> a copy's name
  for (const NodeDef& copy : copies) {
    a_copy_of.try_emplace(absl::StrCat(ParseInput(copy.input(0)).node, " ", copy.device()),
                          copy.name());
  }
  for (int i = 0; i < original_nodes && !a_copy_of.empty(); ++i) {
    NodeDef& node = *graph.mutable_node(i);
    if (!PlacedOn(node.device(), device_type)) continue;
    for (int k = 0; k < node.input_size(); ++k) {
      const InputRef input = ParseInput(node.input(k));
      if (!input.control) continue;
      auto copy = a_copy_of.find(absl::StrCat(input.node, " ", node.device()));
      if (copy == a_copy_of.end()) continue;
      const std::string control = absl::StrCat("^", copy->second);
      const bool present = absl::c_linear_search(node.input(), control);
      if (present) {
        node.mutable_input()->DeleteSubrange(k--, 1);
      } else {
        node.set_input(k, control);
      }
    }
  }
  for (NodeDef& node : copies) *graph.add_node() = std::move(node);
  return static_cast<int64_t>(copies.size());
}

// Whether `node` is a Const int32 scalar equal to `value`.
bool IsInt32Constant(const NodeDef& node, int32_t value) {
  if (node.op() != "Const" || TypeAttr(node, "dtype") != tensorflow::DT_INT32) return false;
  auto it = node.attr().find("value");
  if (it == node.attr().end() || !it->second.has_tensor()) return false;
  const tensorflow::TensorProto& tensor = it->second.tensor();
  if (tensor.tensor_shape().dim_size() != 0 || tensor.tensor_shape().unknown_rank()) return false;
  if (tensor.int_val_size() == 1) return tensor.int_val(0) == value;
  // TensorFlow writes a tensor of zeros with no values at all.
  if (tensor.int_val_size() == 0 && tensor.tensor_content().empty()) return value == 0;
  if (tensor.tensor_content().size() != sizeof(int32_t)) return false;
  int32_t stored = 0;
  std::memcpy(&stored, tensor.tensor_content().data(), sizeof(stored));
  return stored == value;
}

// Replaces Keras' float32 signbit, Less(BitwiseAnd(Bitcast(x, int32), INT32_MIN), 0) with the
// Less on a `device_type` device, by kSignBit(x) (the Less's name, device and control inputs);
// the BitwiseAnd and the Bitcast go where nothing else reads them and they are not kept by name
// (control dependencies on them move to the new node). Returns how many.
int64_t SignBitsOnDevice(GraphDef& graph, const absl::flat_hash_set<std::string>& preserved,
                         absl::string_view device_type) {
  std::vector<bool> removed(graph.node_size(), false);
  absl::flat_hash_map<std::string, std::string> replaced_by;
  int64_t rewritten = 0;
  {
    const GraphIndex index(graph);  // views into the names: no node is renamed while it lives
    auto only_reader = [&](int i) {
      auto readers = index.data_readers.find(graph.node(i).name());
      return readers != index.data_readers.end() && readers->second == 1 &&
             !preserved.contains(graph.node(i).name());
    };
    std::vector<std::pair<int, NodeDef>> new_nodes;
    for (int i = 0; i < graph.node_size(); ++i) {
      const NodeDef& less = graph.node(i);
      if (less.op() != "Less" || less.input_size() < 2 || !PlacedOn(less.device(), device_type) ||
          TypeOf(less) != tensorflow::DT_INT32) {
        continue;
      }
      const int masked = DataInputNode(graph, index, removed, less.input(0));
      const int zero = DataInputNode(graph, index, removed, less.input(1));
      if (masked < 0 || zero < 0 || !IsInt32Constant(graph.node(zero), 0)) continue;
      const NodeDef& bitwise_and = graph.node(masked);
      if (bitwise_and.op() != "BitwiseAnd" || bitwise_and.input_size() < 2 ||
          TypeOf(bitwise_and) != tensorflow::DT_INT32) {
        continue;
      }
      const int first = DataInputNode(graph, index, removed, bitwise_and.input(0));
      const int second = DataInputNode(graph, index, removed, bitwise_and.input(1));
      if (first < 0 || second < 0) continue;
      constexpr int32_t kSign = std::numeric_limits<int32_t>::min();
      const int bits = IsInt32Constant(graph.node(second), kSign)  ? first
                       : IsInt32Constant(graph.node(first), kSign) ? second
                                                                   : -1;
      if (bits < 0) continue;
      const NodeDef& bitcast = graph.node(bits);
      if (bitcast.op() != "Bitcast" || bitcast.input_size() < 1 ||
          TypeAttr(bitcast, "T") != tensorflow::DT_FLOAT ||
          TypeAttr(bitcast, "type") != tensorflow::DT_INT32 ||
          ParseInput(bitcast.input(0)).control) {
        continue;
      }
      NodeDef sign;
      sign.set_name(less.name());
      sign.set_op(fused_ops::kSignBit);
      sign.set_device(less.device());
      sign.add_input(bitcast.input(0));
      (*sign.mutable_attr())["T"].set_type(tensorflow::DT_FLOAT);
      for (const auto& [name, value] : less.attr()) {
        if (absl::StartsWith(name, "_")) (*sign.mutable_attr())[name] = value;
      }
      std::vector<const NodeDef*> control_sources = {&less};
      if (only_reader(masked)) {
        control_sources.push_back(&bitwise_and);
        removed[masked] = true;
        replaced_by.emplace(bitwise_and.name(), less.name());
        if (only_reader(bits)) {
          control_sources.push_back(&bitcast);
          removed[bits] = true;
          replaced_by.emplace(bitcast.name(), less.name());
        }
      }
      for (const NodeDef* source : control_sources) {
        for (const std::string& input : source->input()) {
          const InputRef ref = ParseInput(input);
          if (!ref.control || replaced_by.contains(ref.node)) continue;
          bool seen = false;
          for (const std::string& kept : sign.input()) seen = seen || kept == input;
          if (!seen) sign.add_input(input);
        }
      }
      new_nodes.emplace_back(i, std::move(sign));
      ++rewritten;
    }
    for (auto& [position, node] : new_nodes) *graph.mutable_node(position) = std::move(node);
  }
  if (!replaced_by.empty()) {
    MoveControlInputs(graph, removed, replaced_by);
    RemoveNodes(graph, removed);
  }
  return rewritten;
}

}  // namespace

FusionCounts Fuse(GraphDef& graph, const absl::flat_hash_set<std::string>& preserved,
                  absl::string_view device_type) {
  FusionCounts counts;
  std::vector<bool> removed(graph.node_size(), false);
  absl::flat_hash_map<std::string, std::string> replaced_by;
  {
    const GraphIndex index(graph);  // views into the names: no node is renamed while it lives
    std::vector<std::pair<int, NodeDef>> fused_nodes;
    // Chains ending in an activation first, so that a BiasAdd under one is not taken alone.
    for (bool with_activation : {true, false}) {
      for (int top = 0; top < graph.node_size(); ++top) {
        if (removed[top]) continue;
        const std::string& op = graph.node(top).op();
        if (with_activation ? (op != "Relu" && op != "Relu6") : op != "BiasAdd") continue;
        std::optional<BiasActivationChain> chain =
            FusableBiasActivationChain(graph, index, removed, top, preserved, device_type);
        if (!chain.has_value()) continue;
        fused_nodes.emplace_back(top, BiasActivationNode(graph, *chain));
        const std::string& kept_name = graph.node(top).name();
        for (int folded : {chain->base, chain->bias_add}) {
          if (folded == top) continue;
          replaced_by.emplace(graph.node(folded).name(), kept_name);
          removed[folded] = true;
        }
        if (graph.node(chain->base).op() == "Conv2D") {
          ++counts.conv_bias_activation;
        } else {
          ++counts.matmul_bias_activation;
        }
      }
    }
    for (int r = 0; r < graph.node_size(); ++r) {
      const NodeDef& relu_grad = graph.node(r);
      std::optional<int> m =
          FusableMaxPoolGrad(graph, index, removed, relu_grad, preserved, device_type);
      if (!m.has_value()) continue;
      const NodeDef& pool_grad = graph.node(*m);
      fused_nodes.emplace_back(r, MaxPoolGradWithReluGrad(pool_grad, relu_grad));
      replaced_by.emplace(pool_grad.name(), relu_grad.name());
      removed[*m] = true;
      ++counts.max_pool_grad_relu_grad;
    }
    for (auto& [position, node] : fused_nodes) *graph.mutable_node(position) = std::move(node);
  }
  if (!replaced_by.empty()) {
    MoveControlInputs(graph, removed, replaced_by);
    RemoveNodes(graph, removed);
  }
  counts.max_pool_window_index = GiveMaxPoolsAWindowIndex(graph, device_type);
  counts.sign_bit = SignBitsOnDevice(graph, preserved, device_type);
  counts.cast_to_int32_on_host = CastsToInt32OnHost(graph, preserved, device_type);
  counts.cast_from_host = CastHostTensorsFromHost(graph, device_type);
  counts.copy_from_host = CopyHostTensorsForDevice(graph, device_type);
  return counts;
}

FusionCounts ProcessTotals() {
  FusionCounts counts;
  counts.max_pool_grad_relu_grad = total_max_pool_grad_relu_grad.load(std::memory_order_relaxed);
  counts.max_pool_window_index = total_max_pool_window_index.load(std::memory_order_relaxed);
  counts.cast_from_host = total_cast_from_host.load(std::memory_order_relaxed);
  counts.copy_from_host = total_copy_from_host.load(std::memory_order_relaxed);
  counts.sign_bit = total_sign_bit.load(std::memory_order_relaxed);
  counts.cast_to_int32_on_host = total_cast_to_int32_on_host.load(std::memory_order_relaxed);
  counts.conv_bias_activation = total_conv_bias_activation.load(std::memory_order_relaxed);
  counts.matmul_bias_activation = total_matmul_bias_activation.load(std::memory_order_relaxed);
  return counts;
}

void AddToProcessTotals(const FusionCounts& counts) {
  total_max_pool_grad_relu_grad.fetch_add(counts.max_pool_grad_relu_grad,
                                          std::memory_order_relaxed);
  total_max_pool_window_index.fetch_add(counts.max_pool_window_index, std::memory_order_relaxed);
  total_cast_from_host.fetch_add(counts.cast_from_host, std::memory_order_relaxed);
  total_copy_from_host.fetch_add(counts.copy_from_host, std::memory_order_relaxed);
  total_sign_bit.fetch_add(counts.sign_bit, std::memory_order_relaxed);
  total_cast_to_int32_on_host.fetch_add(counts.cast_to_int32_on_host, std::memory_order_relaxed);
  total_conv_bias_activation.fetch_add(counts.conv_bias_activation, std::memory_order_relaxed);
  total_matmul_bias_activation.fetch_add(counts.matmul_bias_activation,
                                         std::memory_order_relaxed);
}

}  // namespace vgpu::graph_fusions
