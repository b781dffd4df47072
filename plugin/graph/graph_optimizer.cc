// TF_InitGraph: the plugin's Grappler registration. It adds no graph rewrite of its own (the
// optimizer passes graphs through unchanged); it exists to set TensorFlow's optimizer configs
// for graphs with the virtual GPU:
//   layout_optimizer off: Grappler would rewrite NHWC convolutions and pooling on a "GPU" to
//     NCHW with Transpose nodes around them, which suits cuDNN but costs two transposes per op
//     on the backing executor, whose kernels are NHWC-native.
// Grappler's remapper stays on: the plugin has kernels for the _FusedConv2D / _FusedMatMul
// nodes it produces on a GPU (kernels/convolution_*_ops.cc).
#include <cstdlib>
#include <cstring>

#include "plugin/device/platform_registration.h"
#include "plugin/device/plugin_runtime.h"
#include "plugin/device/tf_status_bridge.h"
#include "tensorflow/c/experimental/grappler/grappler.h"
#include "tensorflow/c/tf_buffer.h"

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
  optimizer->optimize_func = vgpu::PassThrough;
  vgpu::ToTfStatus(absl::OkStatus(), status);
}

}  // extern "C"
