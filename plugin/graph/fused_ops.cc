// Registration of the fused ops' definitions with TensorFlow's op registry (see fused_ops.h).
#include "plugin/graph/fused_ops.h"

#include <atomic>
#include <utility>

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

// The outputs' shapes are left unknown (the C API cannot read list attributes such as ksize);
// TensorFlow then infers its readers' shapes at run time.
void UnknownShapes(TF_ShapeInferenceContext* context, TF_Status* status) {
  TF_ShapeInferenceContextSetUnknownShape(context, status);
}

// MaxPool's and MaxPoolGrad's window attributes, so that their nodes' attributes carry over as
// they are.
void AddWindowAttributes(TF_OpDefinitionBuilder* builder) {
  TF_OpDefinitionBuilderAddAttr(builder, "ksize: list(int) >= 4");
  TF_OpDefinitionBuilderAddAttr(builder, "strides: list(int) >= 4");
  TF_OpDefinitionBuilderAddAttr(builder, "padding: {'SAME', 'VALID', 'EXPLICIT'}");
  TF_OpDefinitionBuilderAddAttr(builder, "explicit_paddings: list(int) = []");
  TF_OpDefinitionBuilderAddAttr(builder, "data_format: {'NHWC', 'NCHW'} = 'NHWC'");
  TF_OpDefinitionBuilderAddAttr(builder, "T: {half, bfloat16, float, double} = DT_FLOAT");
}

absl::Status Register(TF_OpDefinitionBuilder* builder) {
  ScopedTfStatus status;
  TF_RegisterOpDefinition(builder, status.get());  // takes the builder
  return status.ToStatus();
}

absl::Status RegisterMaxPoolGradWithReluGrad() {
  TF_OpDefinitionBuilder* builder = TF_NewOpDefinitionBuilder(kMaxPoolGradWithReluGrad);
  TF_OpDefinitionBuilderAddInput(builder, "orig_input: T");
  TF_OpDefinitionBuilderAddInput(builder, "orig_output: T");
  TF_OpDefinitionBuilderAddInput(builder, "grad: T");
  TF_OpDefinitionBuilderAddOutput(builder, "output: T");
  AddWindowAttributes(builder);
  TF_OpDefinitionBuilderSetShapeInferenceFunction(builder, ShapeOfFirstInput);
  return Register(builder);
}

absl::Status RegisterMaxPoolWithWindowIndex() {
  TF_OpDefinitionBuilder* builder = TF_NewOpDefinitionBuilder(kMaxPoolWithWindowIndex);
  TF_OpDefinitionBuilderAddInput(builder, "input: T");
  TF_OpDefinitionBuilderAddOutput(builder, "output: T");
  TF_OpDefinitionBuilderAddOutput(builder, "window_index: uint8");
  AddWindowAttributes(builder);
  TF_OpDefinitionBuilderSetShapeInferenceFunction(builder, UnknownShapes);
  return Register(builder);
}

absl::Status RegisterMaxPoolGradFromWindowIndex() {
  TF_OpDefinitionBuilder* builder = TF_NewOpDefinitionBuilder(kMaxPoolGradFromWindowIndex);
  TF_OpDefinitionBuilderAddInput(builder, "orig_input: T");
  TF_OpDefinitionBuilderAddInput(builder, "window_index: uint8");
  TF_OpDefinitionBuilderAddInput(builder, "grad: T");
  TF_OpDefinitionBuilderAddOutput(builder, "output: T");
  AddWindowAttributes(builder);
  TF_OpDefinitionBuilderAddAttr(builder, "through_relu: bool = false");
  TF_OpDefinitionBuilderSetShapeInferenceFunction(builder, ShapeOfFirstInput);
  return Register(builder);
}

absl::Status RegisterFusedConv2D() {
  TF_OpDefinitionBuilder* builder = TF_NewOpDefinitionBuilder(kFusedConv2D);
  TF_OpDefinitionBuilderAddInput(builder, "input: T");
  TF_OpDefinitionBuilderAddInput(builder, "filter: T");
  TF_OpDefinitionBuilderAddInput(builder, "args: num_args * T");
  TF_OpDefinitionBuilderAddOutput(builder, "output: T");
  TF_OpDefinitionBuilderAddAttr(builder, "T: {bfloat16}");
  TF_OpDefinitionBuilderAddAttr(builder, "num_args: int >= 1");
  TF_OpDefinitionBuilderAddAttr(builder, "strides: list(int)");
  TF_OpDefinitionBuilderAddAttr(builder, "padding: {'SAME', 'VALID', 'EXPLICIT'}");
  TF_OpDefinitionBuilderAddAttr(builder, "explicit_paddings: list(int) = []");
  TF_OpDefinitionBuilderAddAttr(builder, "data_format: {'NHWC', 'NCHW'} = 'NHWC'");
  TF_OpDefinitionBuilderAddAttr(builder, "dilations: list(int) = [1, 1, 1, 1]");
  TF_OpDefinitionBuilderAddAttr(builder, "use_cudnn_on_gpu: bool = true");
  TF_OpDefinitionBuilderAddAttr(builder, "fused_ops: list(string) = []");
  TF_OpDefinitionBuilderSetShapeInferenceFunction(builder, UnknownShapes);
  return Register(builder);
}

absl::Status RegisterCastFromHost() {
  TF_OpDefinitionBuilder* builder = TF_NewOpDefinitionBuilder(kCastFromHost);
  TF_OpDefinitionBuilderAddInput(builder, "x: SrcT");
  TF_OpDefinitionBuilderAddOutput(builder, "y: DstT");
  TF_OpDefinitionBuilderAddAttr(builder, "SrcT: type");
  TF_OpDefinitionBuilderAddAttr(builder, "DstT: type");
  TF_OpDefinitionBuilderAddAttr(builder, "Truncate: bool = false");
  TF_OpDefinitionBuilderSetShapeInferenceFunction(builder, ShapeOfFirstInput);
  return Register(builder);
}

absl::Status RegisterSignBit() {
  TF_OpDefinitionBuilder* builder = TF_NewOpDefinitionBuilder(kSignBit);
  TF_OpDefinitionBuilderAddInput(builder, "x: T");
  TF_OpDefinitionBuilderAddOutput(builder, "y: bool");
  TF_OpDefinitionBuilderAddAttr(builder, "T: {float, half, bfloat16, double}");
  TF_OpDefinitionBuilderSetShapeInferenceFunction(builder, ShapeOfFirstInput);
  return Register(builder);
}

absl::Status RegisterApplyKerasAdam() {
  TF_OpDefinitionBuilder* builder = TF_NewOpDefinitionBuilder(kApplyKerasAdam);
  for (const char* input : {"var: resource", "m: resource", "v: resource", "alpha: T",
                            "one_minus_beta1: T", "one_minus_beta2: T", "epsilon: T",
                            "grad: T"}) {
    TF_OpDefinitionBuilderAddInput(builder, input);
  }
  TF_OpDefinitionBuilderAddAttr(builder, "T: {half, bfloat16, float, double}");
  TF_OpDefinitionBuilderAddAttr(builder, "use_locking: bool = false");
  TF_OpDefinitionBuilderSetIsStateful(builder, true);
  TF_OpDefinitionBuilderSetShapeInferenceFunction(builder, UnknownShapes);
  return Register(builder);
}

std::atomic<bool> definitions_registered{false};

}  // namespace

absl::Status RegisterDefinitions() {
  static bool attempted = false;
  if (attempted) return absl::OkStatus();
  attempted = true;
  for (auto [name, register_definition] :
       {std::pair{kMaxPoolGradWithReluGrad, &RegisterMaxPoolGradWithReluGrad},
        std::pair{kMaxPoolWithWindowIndex, &RegisterMaxPoolWithWindowIndex},
        std::pair{kMaxPoolGradFromWindowIndex, &RegisterMaxPoolGradFromWindowIndex},
        std::pair{kFusedConv2D, &RegisterFusedConv2D},
        std::pair{kCastFromHost, &RegisterCastFromHost},
        std::pair{kSignBit, &RegisterSignBit},
        std::pair{kApplyKerasAdam, &RegisterApplyKerasAdam}}) {
    absl::Status status = register_definition();
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("registering ", name, ": ",
                                                      status.message(),
                                                      "; the graph optimizer fuses nothing"));
    }
  }
  definitions_registered.store(true, std::memory_order_release);
  return absl::OkStatus();
}

bool DefinitionsRegistered() { return definitions_registered.load(std::memory_order_acquire); }

}  // namespace vgpu::fused_ops
