// TF_InitKernel, the entry point TensorFlow calls to register the plugin's kernels.
#include "plugin/kernels/op_registration.h"

#include "plugin/device/platform_registration.h"
#include "plugin/common/log.h"
#include "plugin/device/plugin_runtime.h"
#include "plugin/graph/fused_ops.h"

extern "C" {

// Entry point TensorFlow calls to register the plugin's kernels. Kernels are registered for the
// configured device type even when the plugin declined to offer devices (they are then unused).
void TF_InitKernel() {
  static bool registered = false;  // a second load of the same library must not re-register
  if (registered || vgpu::IsDuplicateLoad()) return;
  registered = true;
  const char* device_type = vgpu::PluginRuntime::Get().device_type().c_str();
  // The fused ops' definitions first: their kernels are registered with their families below.
  if (absl::Status status = vgpu::fused_ops::RegisterDefinitions(); !status.ok()) {
    vgpu::Log(vgpu::LogLevel::kError, status.message());
  }
  vgpu::RegisterActivationOps(device_type);
  vgpu::RegisterElementwiseOps(device_type);
  vgpu::RegisterConvolutionOps(device_type);
  vgpu::RegisterPoolingOps(device_type);
  vgpu::RegisterReductionOps(device_type);
  vgpu::RegisterDataMovementOps(device_type);
  vgpu::RegisterRandomOps(device_type);
  vgpu::RegisterNormalizationOps(device_type);
  vgpu::RegisterTrainingOps(device_type);
  vgpu::RegisterVariableOps(device_type);
  vgpu::RegisterRnnOps(device_type);
  vgpu::RegisterSparseOps(device_type);
  vgpu::RegisterImageTransformOps(device_type);
  vgpu::RegisterImageColorOps(device_type);
  vgpu::RegisterImageResizeOps(device_type);
  vgpu::RegisterOptionalOps(device_type);
}

}  // extern "C"
