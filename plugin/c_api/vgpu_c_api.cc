// The plugin's exported C API for the Python package (see vgpu_c_api.h).
#include "plugin/c_api/vgpu_c_api.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "plugin/device/plugin_runtime.h"
#include "plugin/graph/graph_fusions.h"
#include "plugin/kernels/op_catalog.h"

namespace {

size_t CopyOut(const std::string& text, char* buffer, size_t capacity) {
  if (buffer != nullptr && capacity > 0) {
    size_t n = text.size() < capacity - 1 ? text.size() : capacity - 1;
    std::memcpy(buffer, text.data(), n);
    buffer[n] = '\0';
  }
  return text.size();
}

}  // namespace

extern "C" {

int VGPU_ApiVersion(void) { return VGPU_C_API_VERSION; }

size_t VGPU_StatsJson(char* buffer, size_t capacity) {
  const vgpu::graph_fusions::FusionCounts fusions = vgpu::graph_fusions::ProcessTotals();
  const std::string graph_fusions = absl::StrCat(
      "\"graph_fusions\": {\"max_pool_grad_relu_grad\": ", fusions.max_pool_grad_relu_grad,
      ", \"max_pool_window_index\": ", fusions.max_pool_window_index,
      ", \"conv_bias_activation\": ", fusions.conv_bias_activation,
      ", \"matmul_bias_activation\": ", fusions.matmul_bias_activation,
      ", \"cast_from_host\": ", fusions.cast_from_host,
      ", \"copy_from_host\": ", fusions.copy_from_host,
      ", \"sign_bit\": ", fusions.sign_bit,
      ", \"cast_to_int32_on_host\": ", fusions.cast_to_int32_on_host, "}");
  return CopyOut(vgpu::PluginRuntime::Get().StatsJson(graph_fusions), buffer, capacity);
}

size_t VGPU_InfoJson(char* buffer, size_t capacity) {
  return CopyOut(vgpu::PluginRuntime::Get().InfoJson(), buffer, capacity);
}

size_t VGPU_OpCatalogJson(char* buffer, size_t capacity) {
  return CopyOut(vgpu::OpCatalogJson(), buffer, capacity);
}

void VGPU_ResetStats(void) { vgpu::PluginRuntime::Get().ResetStats(); }

void VGPU_MarkStep(void) { vgpu::PluginRuntime::Get().MarkStep(); }

}  // extern "C"
