// Kernel registration through TensorFlow's kernel C API, and TF_InitKernel, the entry point
// TensorFlow calls to register the plugin's kernels.
#include "plugin/kernels/op_registration.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "plugin/common/log.h"
#include "plugin/device/platform_registration.h"
#include "plugin/device/plugin_runtime.h"
#include "plugin/kernels/kernel_support.h"

namespace vgpu {
namespace internal {
namespace {

// Kernels are stateless: every node shares this object.
int stateless_kernel = 0;
void* CreateStatelessKernel(TF_OpKernelConstruction*) { return &stateless_kernel; }
void DeleteStatelessKernel(void*) {}

}  // namespace

void FailOpWith(TF_OpKernelContext* context, const absl::Status& status) {
  FailOp(context, status);
}

void RegisterKernelCallbacks(
    const char* op_name, const char* device_type,
    std::initializer_list<std::pair<const char*, TF_DataType>> type_constraints,
    void (*compute)(void* kernel, TF_OpKernelContext* context)) {
  ScopedTfStatus status;
  TF_KernelBuilder* builder = TF_NewKernelBuilder(op_name, device_type, CreateStatelessKernel,
                                                  compute, DeleteStatelessKernel);
  for (const auto& [attribute, dtype] : type_constraints) {
    TF_KernelBuilder_TypeConstraint(builder, attribute, dtype, status.get());
    if (absl::Status s = status.ToStatus(); !s.ok()) {
      Log(LogLevel::kError, absl::StrCat("kernel ", op_name, ": ", s.message()));
      TF_DeleteKernelBuilder(builder);
      return;
    }
  }
  // The builder is owned by TensorFlow after registration.
  TF_RegisterKernelBuilder(op_name, builder, status.get());
  if (absl::Status s = status.ToStatus(); !s.ok()) {
    Log(LogLevel::kError, absl::StrCat("kernel ", op_name, " not registered: ", s.message()));
  }
}

}  // namespace internal
}  // namespace vgpu

extern "C" {

// Entry point TensorFlow calls to register the plugin's kernels. Kernels are registered for the
// configured device type even when the plugin declined to offer devices (they are then unused).
void TF_InitKernel() {
  static bool registered = false;  // a second load of the same library must not re-register
  if (registered || vgpu::IsDuplicateLoad()) return;
  registered = true;
  const char* device_type = vgpu::PluginRuntime::Get().device_type().c_str();
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
}

}  // extern "C"
