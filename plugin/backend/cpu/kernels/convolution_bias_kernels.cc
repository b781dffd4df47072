// BiasAdd and BiasAddGrad of the convolution family (protocol/kernels/convolution.h) on the CPU
// backing executor, as the Eigen broadcasts and reductions TensorFlow's CPU kernels use. The
// value tensor is viewed as [outer, channels, inner]: inner is 1 for NHWC, the product of the
// spatial dimensions for NCHW.
#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernels/convolution_kernels.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::cpu_kernels {
namespace {

using Index = Eigen::DenseIndex;

struct BiasShape {
  DType dtype = DType::kFloat32;
  Index outer = 1, channels = 0, inner = 1;
  Index Elements() const { return outer * channels * inner; }
};

absl::StatusOr<BiasShape> ReadBiasShape(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings value,
                        context.Descriptor<TensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings bias,
                        context.Descriptor<TensorDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(convolution::BiasParams params,
                        context.Params().Get<convolution::BiasParams>());
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
  VGPU_RETURN_IF_ERROR(CheckedElementCount("bias value", value.dims, value.rank).status());
  BiasShape shape;
  shape.dtype = value.dtype;
  for (int i = 0; i < value.rank; ++i) {
    if (i < channel_dim) shape.outer *= value.dims[i];
    if (i > channel_dim) shape.inner *= value.dims[i];
  }
  shape.channels = value.dims[channel_dim];
  if (bias.dims[0] != shape.channels) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bias has ", bias.dims[0], " elements for ", shape.channels, " channels"));
  }
  return shape;
}

template <typename T>
absl::Status BiasAddTyped(const KernelContext& context, const BiasShape& s) {
  VGPU_ASSIGN_OR_RETURN(const T* value, context.Buffer<const T>(0, s.Elements()));
  VGPU_ASSIGN_OR_RETURN(const T* bias, context.Buffer<const T>(1, s.channels));
  VGPU_ASSIGN_OR_RETURN(T* out, context.Buffer<T>(2, s.Elements()));
  if (s.Elements() == 0) return absl::OkStatus();
  const Eigen::ThreadPoolDevice& device = *context.device;
  if (s.inner == 1) {
    const Eigen::array<Index, 2> rows{s.outer, 1};
    RowMajorMap<T, 2>(out, s.outer, s.channels).device(device) =
        RowMajorMap<const T, 2>(value, s.outer, s.channels) +
        RowMajorMap<const T, 2>(bias, 1, s.channels).broadcast(rows);
  } else {
    const Eigen::array<Index, 3> spread{s.outer, 1, s.inner};
    RowMajorMap<T, 3>(out, s.outer, s.channels, s.inner).device(device) =
        RowMajorMap<const T, 3>(value, s.outer, s.channels, s.inner) +
        RowMajorMap<const T, 3>(bias, 1, s.channels, 1).broadcast(spread);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status BiasAddGradTyped(const KernelContext& context, const BiasShape& s) {
  using CT = ComputeType<T>;
  VGPU_ASSIGN_OR_RETURN(const T* gradient, context.Buffer<const T>(0, s.Elements()));
  VGPU_ASSIGN_OR_RETURN(T* bias_gradient, context.Buffer<T>(1, s.channels));
  if (s.channels == 0) return absl::OkStatus();
  const Eigen::ThreadPoolDevice& device = *context.device;
  RowMajorMap<T, 1> result(bias_gradient, s.channels);
  if (s.Elements() == 0) {
    result.device(device) = result.constant(T(0));
  } else if (s.inner == 1) {
    // Static reduction axes let Eigen pick its vectorised outer-dimension reduction.
    Eigen::IndexList<Eigen::type2index<0>> over_rows;
    result.device(device) = RowMajorMap<const T, 2>(gradient, s.outer, s.channels)
                                .template cast<CT>()
                                .sum(over_rows)
                                .template cast<T>();
  } else {
    Eigen::IndexList<Eigen::type2index<0>, Eigen::type2index<2>> over_outer_and_inner;
    result.device(device) = RowMajorMap<const T, 3>(gradient, s.outer, s.channels, s.inner)
                                .template cast<CT>()
                                .sum(over_outer_and_inner)
                                .template cast<T>();
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status BiasAdd(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(BiasShape shape, ReadBiasShape(context));
  return Dispatch::Floating(shape.dtype, [&](auto zero) {
    return BiasAddTyped<decltype(zero)>(context, shape);
  });
}

absl::Status BiasAddGrad(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(BiasShape shape, ReadBiasShape(context));
  return Dispatch::Floating(shape.dtype, [&](auto zero) {
    return BiasAddGradTyped<decltype(zero)>(context, shape);
  });
}

}  // namespace vgpu::cpu_kernels
