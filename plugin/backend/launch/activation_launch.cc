// The activation family's launch readers (see activation_launch.h).
#include "plugin/backend/launch/activation_launch.h"

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/launch/dense_tensor.h"
#include "plugin/backend/launch/dtype_sets.h"
#include "plugin/backend/launch/reader_dispatch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/activation.h"

namespace vgpu::activation_launch {

bool IsKnownActivationMode(ActivationMode mode) {
  switch (mode) {
    case ActivationMode::kRelu: case ActivationMode::kRelu6: case ActivationMode::kSigmoid:
    case ActivationMode::kTanh: case ActivationMode::kElu: case ActivationMode::kSelu:
    case ActivationMode::kSoftplus: case ActivationMode::kSoftsign:
    case ActivationMode::kLeakyRelu:
      return true;
    default: return false;
  }
}

absl::Status UnknownActivationMode(ActivationMode mode) {
  return absl::InvalidArgumentError(
      absl::StrCat("unknown activation mode ", static_cast<int>(mode)));
}

namespace {

// Both launches: `buffers` buffers of the tensor's count and floating dtype.
absl::StatusOr<ActivationLaunch> ReadActivationLaunch(const LaunchView& launch, size_t buffers) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(buffers));
  ActivationLaunch read;
  TensorDescriptorSettings tensor;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&read.activation, &tensor));
  if (read.activation.dtype != tensor.dtype) {
    return absl::InvalidArgumentError("the activation and tensor descriptors disagree on dtype");
  }
  read.dtype = tensor.dtype;
  VGPU_ASSIGN_OR_RETURN(read.count, DenseElementCount(tensor));
  VGPU_RETURN_IF_ERROR(ReaderDispatch::Floating(tensor.dtype, AcceptDType()));
  for (size_t i = 0; i < buffers; ++i) {
    VGPU_RETURN_IF_ERROR(ExpectDenseBuffer(launch, i, read.count, tensor.dtype));
  }
  if (read.count > 0 && !IsKnownActivationMode(read.activation.mode)) {
    return UnknownActivationMode(read.activation.mode);
  }
  return read;
}

}  // namespace

absl::StatusOr<ActivationLaunch> ReadActivationForward(const LaunchView& launch) {
  return ReadActivationLaunch(launch, 2);
}

absl::StatusOr<ActivationLaunch> ReadActivationBackward(const LaunchView& launch) {
  return ReadActivationLaunch(launch, 3);
}

absl::StatusOr<int64_t> ReadReluInt8Launch(const LaunchView& launch) {
  VGPU_ASSIGN_OR_RETURN(activation::ReluInt8Params params,
                        launch.ReadParams<activation::ReluInt8Params>(2));
  if (params.count < 0 || params.count > kMaxLaunchElements || params.count % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Tensor size must be a multiple of 4 for Relu<qint8>. Got ", params.count));
  }
  VGPU_RETURN_IF_ERROR(launch.ExpectElements(0, params.count, sizeof(int8_t), alignof(int8_t)));
  VGPU_RETURN_IF_ERROR(launch.ExpectElements(1, params.count, sizeof(int8_t), alignof(int8_t)));
  return params.count;
}

}  // namespace vgpu::activation_launch
