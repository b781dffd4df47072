// TensorFlow op kernels for Relu and ReluGrad on the virtual GPU. Each launches a compute
// command through the client runtime; the backing executor does the arithmetic.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/kernels/kernel_support.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernel_ids.h"

namespace vgpu {
namespace {

absl::Span<const uint8_t> ParamBytes(const ElementwiseParams& params) {
  return absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(&params), sizeof(params));
}

absl::Status ReluCompute(TF_OpKernelContext* context) {
  VGPU_ASSIGN_OR_RETURN(TensorPtr input, GetInput(context, 0));
  VGPU_ASSIGN_OR_RETURN(TensorPtr output, ForwardOrAllocateOutput(context, 0, 0, input.get()));
  VGPU_ASSIGN_OR_RETURN(ClientStream * stream, GetClientStream(context));
  ElementwiseParams params{static_cast<uint64_t>(TF_TensorElementCount(input.get()))};
  if (params.count == 0) return absl::OkStatus();
  BufferArg buffers[] = {BufferOf(input.get()), BufferOf(output.get())};
  return stream->device().Launch(*stream, KernelId::kReluF32, buffers, ParamBytes(params));
}

absl::Status ReluGradCompute(TF_OpKernelContext* context) {
  VGPU_ASSIGN_OR_RETURN(TensorPtr gradients, GetInput(context, 0));
  VGPU_ASSIGN_OR_RETURN(TensorPtr features, GetInput(context, 1));
  if (ShapeOf(gradients.get()) != ShapeOf(features.get())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReluGrad: gradients and features must have the same shape, got [",
        absl::StrJoin(ShapeOf(gradients.get()), ","), "] and [",
        absl::StrJoin(ShapeOf(features.get()), ","), "]"));
  }
  VGPU_ASSIGN_OR_RETURN(TensorPtr output,
                        ForwardOrAllocateOutput(context, 0, 0, gradients.get()));
  VGPU_ASSIGN_OR_RETURN(ClientStream * stream, GetClientStream(context));
  ElementwiseParams params{static_cast<uint64_t>(TF_TensorElementCount(gradients.get()))};
  if (params.count == 0) return absl::OkStatus();
  BufferArg buffers[] = {BufferOf(gradients.get()), BufferOf(features.get()),
                         BufferOf(output.get())};
  return stream->device().Launch(*stream, KernelId::kReluGradF32, buffers, ParamBytes(params));
}

}  // namespace

void RegisterActivationOps(const char* device_type) {
  RegisterOp<ReluCompute>("Relu", device_type, {{"T", TF_FLOAT}});
  RegisterOp<ReluGradCompute>("ReluGrad", device_type, {{"T", TF_FLOAT}});
}

}  // namespace vgpu
