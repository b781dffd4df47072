// TF_InitGraph: the plugin's Grappler registration, and its optimizer. It sets TensorFlow's
// optimizer configs for graphs with the virtual GPU:
//   layout_optimizer off: Grappler would rewrite NHWC convolutions and pooling on a "GPU" to
//     NCHW with Transpose nodes around them, which suits cuDNN but costs two transposes per op
//     on the backing executor, whose kernels are NHWC-native.
// Grappler's remapper stays on: the plugin has kernels for the _FusedConv2D / _FusedMatMul
// nodes it produces on a GPU (kernels/convolution_*_ops.cc).
// Its optimizer applies the plugin's own fusions (graph_fusions.h) to every graph Grappler
// hands it, after TensorFlow's optimizers, unless VGPU_GRAPH_FUSIONS=0; a graph with nothing
// to fuse, or one it cannot read, passes through unchanged.
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "plugin/common/log.h"
#include "plugin/device/platform_registration.h"
#include "plugin/device/plugin_runtime.h"
#include "plugin/device/tf_status_bridge.h"
#include "plugin/device/tf_version.h"
#include "plugin/graph/fused_ops.h"
#include "plugin/graph/graph_fusions.h"
#include "tensorflow/c/experimental/grappler/grappler.h"
#include "tensorflow/c/tf_buffer.h"
#include "tensorflow/core/framework/graph.pb.h"

namespace vgpu {
namespace {

void FreeCopy(void* data, size_t) { std::free(data); }

// Passes the graph through unchanged.
void PassThrough(void*, const TF_Buffer* graph, const TF_GrapplerItem*, TF_Buffer* optimized,
                 TF_Status* status) {
  void* copy = std::malloc(graph->length == 0 ? 1 : graph->length);
  if (copy == nullptr) {
    ToTfStatus(absl::ResourceExhaustedError("cannot copy the graph"), status);
    return;
  }
  if (graph->length > 0) std::memcpy(copy, graph->data, graph->length);
  optimized->data = copy;
  optimized->length = graph->length;
  optimized->data_deallocator = FreeCopy;
  ToTfStatus(absl::OkStatus(), status);
}

// TensorFlow's functions that list a Grappler item's fetched and preserved nodes. They live in
// libtensorflow_cc.so.2, which the plugin does not link: looked up once.
using NodeListSizeFn = void (*)(const TF_GrapplerItem*, int*, size_t*, TF_Status*);
using NodeListFn = void (*)(const TF_GrapplerItem*, char**, size_t*, int, void*, size_t,
                            TF_Status*);
struct NodeListFunctions {
  NodeListSizeFn size;
  NodeListFn list;
};

// Adds the names one pair of those functions lists to `names`; false if it cannot.
bool AddNodeList(const TF_GrapplerItem* item, const NodeListFunctions& functions,
                 absl::flat_hash_set<std::string>& names) {
  if (functions.size == nullptr || functions.list == nullptr) return false;
  ScopedTfStatus status;
  int count = 0;
  size_t storage_size = 0;
  functions.size(item, &count, &storage_size, status.get());
  if (TF_GetCode(status.get()) != TF_OK || count < 0) return false;
  if (count == 0) return true;
  std::vector<char*> values(count);
  std::vector<size_t> lengths(count);
  std::vector<char> storage(storage_size == 0 ? 1 : storage_size);
  functions.list(item, values.data(), lengths.data(), count, storage.data(), storage_size,
                 status.get());
  if (TF_GetCode(status.get()) != TF_OK) return false;
  for (int i = 0; i < count; ++i) names.emplace(values[i], lengths[i]);
  return true;
}

// The nodes Grappler must keep by name (fetched, fed, or preserved for another reason), or
// nullopt if TensorFlow's functions cannot be found or fail.
std::optional<absl::flat_hash_set<std::string>> KeptNodes(const TF_GrapplerItem* item) {
  static const NodeListFunctions preserve{
      reinterpret_cast<NodeListSizeFn>(LoadedTensorFlowFunction("TF_GetNodesToPreserveListSize")),
      reinterpret_cast<NodeListFn>(LoadedTensorFlowFunction("TF_GetNodesToPreserveList"))};
  static const NodeListFunctions fetch{
      reinterpret_cast<NodeListSizeFn>(LoadedTensorFlowFunction("TF_GetFetchNodesListSize")),
      reinterpret_cast<NodeListFn>(LoadedTensorFlowFunction("TF_GetFetchNodesList"))};
  absl::flat_hash_set<std::string> names;
  if (!AddNodeList(item, preserve, names) || !AddNodeList(item, fetch, names)) {
    return std::nullopt;
  }
  // Fetches may name a tensor ("node:0"); keep the node.
  std::vector<std::string> nodes;
  for (const std::string& name : names) {
    const size_t colon = name.rfind(':');
    if (colon != std::string::npos) nodes.push_back(name.substr(0, colon));
  }
  for (std::string& node : nodes) names.insert(std::move(node));
  return names;
}

// The optimizer: the plugin's fusions (graph_fusions.h), or the graph unchanged.
void Optimize(void* state, const TF_Buffer* graph, const TF_GrapplerItem* item,
              TF_Buffer* optimized, TF_Status* status) {
  if (!PluginRuntime::Get().config().graph_fusions || !fused_ops::DefinitionsRegistered() ||
      graph->length > INT_MAX) {
    PassThrough(state, graph, item, optimized, status);
    return;
  }
  tensorflow::GraphDef def;
  std::optional<absl::flat_hash_set<std::string>> kept = KeptNodes(item);
  if (!kept.has_value() || !def.ParseFromArray(graph->data, static_cast<int>(graph->length))) {
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true)) {
      Log(LogLevel::kWarning, "graph optimizer: a graph or its kept nodes could not be read; "
                              "graphs pass through without the plugin's fusions");
    }
    PassThrough(state, graph, item, optimized, status);
    return;
  }
  const graph_fusions::FusionCounts counts =
      graph_fusions::Fuse(def, *kept, RegisteredDeviceType());
  if (counts.total() == 0) {
    PassThrough(state, graph, item, optimized, status);
    return;
  }
  const size_t size = def.ByteSizeLong();
  void* bytes = std::malloc(size == 0 ? 1 : size);
  if (bytes == nullptr || !def.SerializeToArray(bytes, static_cast<int>(size))) {
    std::free(bytes);
    PassThrough(state, graph, item, optimized, status);
    return;
  }
  graph_fusions::AddToProcessTotals(counts);
  optimized->data = bytes;
  optimized->length = size;
  optimized->data_deallocator = FreeCopy;
  ToTfStatus(absl::OkStatus(), status);
}

}  // namespace
}  // namespace vgpu

extern "C" {

void TF_InitGraph(TP_OptimizerRegistrationParams* params, TF_Status* status) {
  params->major_version = GO_MAJOR;
  params->minor_version = GO_MINOR;
  params->patch_version = GO_PATCH;
  // A duplicate load registers for its own inert device type (TensorFlow dies on a second
  // registration for the same type).
  params->device_type = vgpu::RegisteredDeviceType();
  TP_OptimizerConfigs* configs = params->optimizer_configs;
  configs->struct_size = TP_OPTIMIZER_CONFIGS_STRUCT_SIZE;
  configs->layout_optimizer = TF_TriState_Off;
  TP_Optimizer* optimizer = params->optimizer;
  optimizer->struct_size = TP_OPTIMIZER_STRUCT_SIZE;
  optimizer->optimize_func = vgpu::Optimize;
  vgpu::ToTfStatus(absl::OkStatus(), status);
}

}  // extern "C"
