// Registration of the fused ops' definitions with TensorFlow's op registry (see fused_ops.h).
#include "plugin/graph/fused_ops.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "plugin/device/tf_status_bridge.h"
#include "tensorflow/c/ops.h"

namespace vgpu::fused_ops {
namespace {

// The output has the shape of input 0 (a gradient with respect to that input).
void ShapeOfFirstInput(TF_ShapeInferenceContext* context, TF_Status* status) {
  TF_ShapeHandle* shape = TF_NewShapeHandle();
  TF_ShapeInferenceContextGetInput(context, 0, shape, status);
  if (TF_GetCode(status) == TF_OK) TF_ShapeInferenceContextSetOutput(context, 0, shape, status);
  TF_DeleteShapeHandle(shape);
}

absl::Status RegisterMaxPoolGradWithReluGrad() {
  TF_OpDefinitionBuilder* builder = TF_NewOpDefinitionBuilder(kMaxPoolGradWithReluGrad);
  TF_OpDefinitionBuilderAddInput(builder, "orig_input: T");
  TF_OpDefinitionBuilderAddInput(builder, "orig_output: T");
  TF_OpDefinitionBuilderAddInput(builder, "grad: T");
  TF_OpDefinitionBuilderAddOutput(builder, "output: T");
  // MaxPoolGrad's attributes, so that its node's attributes carry over as they are.
  TF_OpDefinitionBuilderAddAttr(builder, "ksize: list(int) >= 4");
  TF_OpDefinitionBuilderAddAttr(builder, "strides: list(int) >= 4");
  TF_OpDefinitionBuilderAddAttr(builder, "padding: {'SAME', 'VALID', 'EXPLICIT'}");
  TF_OpDefinitionBuilderAddAttr(builder, "explicit_paddings: list(int) = []");
  TF_OpDefinitionBuilderAddAttr(builder, "data_format: {'NHWC', 'NCHW'} = 'NHWC'");
  TF_OpDefinitionBuilderAddAttr(builder, "T: {half, bfloat16, float, double} = DT_FLOAT");
  TF_OpDefinitionBuilderSetShapeInferenceFunction(builder, ShapeOfFirstInput);
  ScopedTfStatus status;
  TF_RegisterOpDefinition(builder, status.get());  // takes the builder
  return status.ToStatus();
}


std::atomic<bool> definitions_registered{false};

}  // namespace

absl::Status RegisterDefinitions() {
  static bool attempted = false;
  if (attempted) return absl::OkStatus();
  attempted = true;
  absl::Status status = RegisterMaxPoolGradWithReluGrad();
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("registering ", kMaxPoolGradWithReluGrad,
                                                    ": ", status.message(),
                                                    "; the graph optimizer fuses nothing"));
  }
  definitions_registered.store(true, std::memory_order_release);
  return absl::OkStatus();
}

bool DefinitionsRegistered() { return definitions_registered.load(std::memory_order_acquire); }

}  // namespace vgpu::fused_ops
