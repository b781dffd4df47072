// The bias family's launch readers and the fused epilogue's (see bias_launch.h).
#include "plugin/backend/launch/bias_launch.h"

#include "absl/strings/str_cat.h"
#include "plugin/backend/launch/operand_limits.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::bias_launch {
namespace {

// Descriptors [value, bias] and the BiasParams block of both bias kernels.
absl::StatusOr<BiasGeometry> ReadBiasGeometry(const LaunchView& launch) {
  TensorDescriptorSettings value, bias;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&value, &bias));
  VGPU_ASSIGN_OR_RETURN(convolution::BiasParams params,
                        launch.Params().Get<convolution::BiasParams>());
  if (value.rank < 2 || value.rank > kMaxRank || bias.rank != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bias needs a value of rank >= 2 and a vector bias, got ranks ", value.rank, " and ",
        bias.rank));
  }
  if (value.dtype != bias.dtype) {
    return absl::InvalidArgumentError("bias and value dtypes differ");
  }
  const auto format = static_cast<DataFormat>(params.data_format);
  if (format != DataFormat::kNHWC && format != DataFormat::kNCHW) {
    return absl::InvalidArgumentError("unknown bias data format");
  }
  const int channel_dim = format == DataFormat::kNCHW ? 1 : value.rank - 1;
  VGPU_ASSIGN_OR_RETURN(const int64_t elements,
                        CheckedOperandElements("bias value", value.dims, value.rank));
  BiasGeometry g;
  g.dtype = value.dtype;
  g.channels = value.dims[channel_dim];
  if (elements == 0) {
    // [0, channels, 0]: the other extents of an empty value are bounded one by one only, and
    // their products could pass int64.
    g.outer = 0;
    g.inner = 0;
  } else {
    for (int i = 0; i < value.rank; ++i) {
      if (i < channel_dim) g.outer *= value.dims[i];
      if (i > channel_dim) g.inner *= value.dims[i];
    }
  }
  if (bias.dims[0] != g.channels) {
    return absl::InvalidArgumentError(
        absl::StrCat("bias has ", bias.dims[0], " elements for ", g.channels, " channels"));
  }
  return g;
}

}  // namespace

absl::StatusOr<BiasGeometry> ReadBiasAddLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(3));
  return ReadBiasGeometry(launch);
}

absl::StatusOr<BiasGeometry> ReadBiasAddGradLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(2));
  return ReadBiasGeometry(launch);
}

absl::StatusOr<std::optional<ActivationMode>> ReadFusedEpilogue(const LaunchView& launch,
                                                                size_t bias_index,
                                                                int64_t channels, DType dtype,
                                                                absl::string_view mismatch) {
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings bias,
                        launch.Descriptor<TensorDescriptorSettings>(bias_index));
  if (bias.rank != 1 || bias.dims[0] != channels || bias.dtype != dtype) {
    return absl::InvalidArgumentError(mismatch);
  }
  const size_t activation_index = bias_index + 1;
  if (launch.descriptors.size() <= activation_index) return std::optional<ActivationMode>();
  VGPU_ASSIGN_OR_RETURN(ActivationDescriptorSettings activation,
                        launch.Descriptor<ActivationDescriptorSettings>(activation_index));
  switch (activation.mode) {
    case ActivationMode::kRelu:
    case ActivationMode::kRelu6:
    case ActivationMode::kSigmoid:
    case ActivationMode::kTanh:
      return std::optional<ActivationMode>(activation.mode);
    default:
      break;
  }
  return absl::InvalidArgumentError("unknown activation mode");
}

}  // namespace vgpu::bias_launch
