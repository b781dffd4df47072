// TensorFlow op kernels of the normalization family on the virtual GPU: FusedBatchNorm,
// FusedBatchNormV2/V3 and their gradients, for x of float32, float16 or bfloat16 with float32
// scale/offset/mean/variance (mixed precision). Written as TensorFlow's cuDNN path is: per call,
// a tensor descriptor for x and one for the per-channel parameters are created, set, used by
// one launch of a protocol/kernels/normalization.h kernel, and destroyed (RAII).
//
// Outputs follow TensorFlow's CPU kernel: in training, batch_mean/batch_variance are the
// running averages (variance with Bessel's correction), reserve_space_1/2 the batch mean and
// (biased) variance that the gradient reads (in inference: the given mean and variance);
// reserve_space_3 is empty.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/normalization.h"

namespace vgpu {
namespace {

using normalization::BatchNormParams;
using Dims = std::vector<int64_t>;

// Which FusedBatchNorm generation a kernel serves: V1 has no "U" attribute, V3 an extra
// reserve space input (gradient) or output (forward).
enum class Version { kV1, kV2, kV3 };

// The attributes both directions share.
struct BatchNormAttributes {
  BatchNormParams params;
  bool is_training = true;
};

// The attributes of the forward ops (kForward) or of the gradients.
template <bool kForward>
absl::StatusOr<BatchNormAttributes> ReadAttributes(OpConstruction& construction) {
  BatchNormAttributes attributes;
  VGPU_ASSIGN_OR_RETURN(attributes.params.epsilon, construction.Float("epsilon"));
  if (kForward && construction.Has("exponential_avg_factor")) {
    VGPU_ASSIGN_OR_RETURN(attributes.params.exponential_avg_factor,
                          construction.Float("exponential_avg_factor"));
  }
  VGPU_ASSIGN_OR_RETURN(std::string format, construction.String("data_format"));
  if (format == "NHWC" || format == "NDHWC") {
    attributes.params.data_format = DataFormat::kNHWC;
  } else if (format == "NCHW" || format == "NCDHW") {
    attributes.params.data_format = DataFormat::kNCHW;
  } else {
    return absl::InvalidArgumentError("Invalid data format");
  }
  VGPU_ASSIGN_OR_RETURN(attributes.is_training, construction.Bool("is_training"));
  return attributes;
}

int64_t ChannelsOf(const Dims& x_dims, DataFormat format) {
  return format == DataFormat::kNHWC ? x_dims.back() : x_dims[1];
}

// Fails unless `dims` has rank 4 or 5 (TensorFlow's "input must be 4 or 5-dimensional[shape]").
absl::Status CheckInputRank(const Dims& dims) {
  if (dims.size() == 4 || dims.size() == 5) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("input must be 4 or 5-dimensional", ShapeString(dims)));
}

// Fails unless `dims` has rank 1 (TensorFlow's "<what> must be 1-dimensional[shape]").
absl::Status CheckVector(const Dims& dims, const char* what) {
  if (dims.size() == 1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must be 1-dimensional", ShapeString(dims)));
}

absl::Status CheckChannels(const Dims& dims, int64_t channels, const std::string& what) {
  const int64_t elements = dims.empty() ? 1 : dims[0];
  if (elements == channels) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must have the same number of elements as the channels of x, got ",
                   elements, " and ", channels));
}

// Creates the two descriptors of a batch-norm launch and launches.
absl::Status LaunchBatchNorm(const OpContext& context, KernelId kernel, const TF_Tensor* x,
                             int64_t channels, const BatchNormParams& params,
                             std::initializer_list<BufferArg> buffers) {
  const int64_t parameter_dims[] = {channels};
  return KernelLaunch(context)
      .DescribeTensor(x)
      .DescribeTensor(TF_FLOAT, parameter_dims)
      .Buffers(buffers)
      .Param(params)
      .Run(kernel);
}

// Zeroes a float32 device tensor on the op's stream.
absl::Status ZeroFill(const OpContext& context, const TF_Tensor* tensor) {
  if (TF_TensorByteSize(tensor) == 0) return absl::OkStatus();
  VGPU_ASSIGN_OR_RETURN(ClientStream * stream, context.Stream());
  const BufferArg buffer = BufferOf(tensor);
  return stream->device().Memset(*stream, buffer.address, 0, 1, buffer.size);
}

template <Version kVersion>
class FusedBatchNormOp : public WithAttributes<FusedBatchNormOp<kVersion>, BatchNormAttributes,
                                               ReadAttributes<true>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<5>());
    const auto& [x, scale, offset, mean, variance] = inputs;
    const auto [x_dims, scale_dims, offset_dims, mean_dims, variance_dims] = ShapesOf(inputs);
    VGPU_RETURN_IF_ERROR(CheckInputRank(x_dims));
    VGPU_RETURN_IF_ERROR(CheckVector(scale_dims, "scale"));
    VGPU_RETURN_IF_ERROR(CheckVector(offset_dims, "offset"));
    VGPU_RETURN_IF_ERROR(CheckVector(mean_dims, "estimated_mean"));
    VGPU_RETURN_IF_ERROR(CheckVector(variance_dims, "estimated_variance"));
    const BatchNormParams& params = this->attributes_.params;
    const bool is_training = this->attributes_.is_training;
    const int64_t channels = ChannelsOf(x_dims, params.data_format);
    VGPU_RETURN_IF_ERROR(CheckChannels(scale_dims, channels, "scale"));
    VGPU_RETURN_IF_ERROR(CheckChannels(offset_dims, channels, "offset"));
    const bool reads_old_statistics = !is_training || params.exponential_avg_factor != 1.0f;
    if (reads_old_statistics) {
      const std::string prefix =
          is_training ? "When exponential_avg_factor != 1" : "When is_training=false";
      VGPU_RETURN_IF_ERROR(CheckChannels(mean_dims, channels, prefix + ", mean"));
      VGPU_RETURN_IF_ERROR(CheckChannels(variance_dims, channels, prefix + ", variance"));
    }

    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.ForwardOrAllocateOutput({0}, 0, dtype, x_dims));
    VGPU_ASSIGN_OR_RETURN(TensorPtr batch_mean,
                          context.ForwardOrAllocateOutput({3}, 1, TF_FLOAT, scale_dims));
    VGPU_ASSIGN_OR_RETURN(TensorPtr batch_variance,
                          context.ForwardOrAllocateOutput({4}, 2, TF_FLOAT, scale_dims));
    VGPU_ASSIGN_OR_RETURN(TensorPtr saved_mean, context.AllocateOutput(3, TF_FLOAT, scale_dims));
    VGPU_ASSIGN_OR_RETURN(TensorPtr saved_variance,
                          context.AllocateOutput(4, TF_FLOAT, scale_dims));
    if constexpr (kVersion == Version::kV3) {
      const int64_t empty[] = {0};
      VGPU_ASSIGN_OR_RETURN(TensorPtr reserve_space_3,
                            context.AllocateOutput(5, TF_FLOAT, empty));
    }
    if (channels == 0) return absl::OkStatus();

    if (!is_training) {
      return LaunchBatchNorm(
          context, normalization::kForwardInference, x.get(), channels, params,
          {BufferOf(x.get()), BufferOf(scale.get()), BufferOf(offset.get()),
           BufferOf(mean.get()), BufferOf(variance.get()), BufferOf(y.get()),
           BufferOf(batch_mean.get()), BufferOf(batch_variance.get()),
           BufferOf(saved_mean.get()), BufferOf(saved_variance.get())});
    }
    // With exponential_avg_factor == 1 the old statistics are not read (and may be empty):
    // the kernel is given the running outputs in their place.
    const TF_Tensor* old_mean = reads_old_statistics ? mean.get() : batch_mean.get();
    const TF_Tensor* old_variance = reads_old_statistics ? variance.get() : batch_variance.get();
    return LaunchBatchNorm(
        context, normalization::kForwardTraining, x.get(), channels, params,
        {BufferOf(x.get()), BufferOf(scale.get()), BufferOf(offset.get()), BufferOf(old_mean),
         BufferOf(old_variance), BufferOf(y.get()), BufferOf(batch_mean.get()),
         BufferOf(batch_variance.get()), BufferOf(saved_mean.get()),
         BufferOf(saved_variance.get())});
  }
};

template <Version kVersion>
class FusedBatchNormGradOp
    : public WithAttributes<FusedBatchNormGradOp<kVersion>, BatchNormAttributes,
                            ReadAttributes<false>> {
 public:
  absl::Status Compute(OpContext& context) {
    // mean, variance: in training the batch statistics saved by the forward op; in inference
    // the population statistics it used.
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<5>());
    const auto& [dy, x, scale, mean, variance] = inputs;
    const auto [dy_dims, x_dims, scale_dims, mean_dims, variance_dims] = ShapesOf(inputs);
    VGPU_RETURN_IF_ERROR(CheckInputRank(dy_dims));
    VGPU_RETURN_IF_ERROR(CheckInputRank(x_dims));
    VGPU_RETURN_IF_ERROR(CheckVector(scale_dims, "scale"));
    VGPU_RETURN_IF_ERROR(CheckVector(mean_dims, "saved mean"));
    VGPU_RETURN_IF_ERROR(CheckVector(variance_dims, "saved variance"));
    if (x_dims != dy_dims) {
      return absl::InvalidArgumentError(absl::StrCat(
          "x and y_backprop must have same shape, but x has shape ", ShapeString(x_dims),
          " and y_backprop has shape ", ShapeString(dy_dims)));
    }
    const BatchNormParams& params = this->attributes_.params;
    const int64_t channels = ChannelsOf(x_dims, params.data_format);
    VGPU_RETURN_IF_ERROR(CheckChannels(scale_dims, channels, "scale"));
    VGPU_RETURN_IF_ERROR(CheckChannels(mean_dims, channels, "reserve_space_1"));
    VGPU_RETURN_IF_ERROR(CheckChannels(variance_dims, channels, "reserve_space_2"));

    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr dx, context.AllocateOutput(0, dtype, x_dims));
    VGPU_ASSIGN_OR_RETURN(TensorPtr dscale, context.AllocateOutput(1, TF_FLOAT, scale_dims));
    VGPU_ASSIGN_OR_RETURN(TensorPtr doffset, context.AllocateOutput(2, TF_FLOAT, scale_dims));
    const int64_t empty[] = {0};
    VGPU_ASSIGN_OR_RETURN(TensorPtr placeholder_1, context.AllocateOutput(3, TF_FLOAT, empty));
    VGPU_ASSIGN_OR_RETURN(TensorPtr placeholder_2, context.AllocateOutput(4, TF_FLOAT, empty));
    if (TF_TensorElementCount(x.get()) == 0) {
      // As TensorFlow: no data, zero gradients for scale and offset.
      VGPU_RETURN_IF_ERROR(ZeroFill(context, dscale.get()));
      return ZeroFill(context, doffset.get());
    }
    const KernelId kernel = this->attributes_.is_training ? normalization::kBackwardTraining
                                                    : normalization::kBackwardInference;
    return LaunchBatchNorm(context, kernel, x.get(), channels, params,
                           {BufferOf(dy.get()), BufferOf(x.get()), BufferOf(scale.get()),
                            BufferOf(mean.get()), BufferOf(variance.get()), BufferOf(dx.get()),
                            BufferOf(dscale.get()), BufferOf(doffset.get())});
  }
};

template <typename K>
void RegisterBatchNorm(const char* op_name, const char* device_type, bool has_u) {
  for (TF_DataType dtype : {TF_FLOAT, TF_HALF, TF_BFLOAT16}) {
    if (has_u) {
      RegisterKernel<K>(op_name, device_type, {{"T", dtype}, {"U", TF_FLOAT}});
    } else if (dtype == TF_FLOAT) {
      RegisterKernel<K>(op_name, device_type, {{"T", dtype}});
    }
  }
}

}  // namespace

void RegisterNormalizationOps(const char* device_type) {
  constexpr const char* kBatchNorm =
      "x in float32/float16/bfloat16, scale/offset/mean/variance in float32; training "
      "(batch statistics, Bessel-corrected running variance, exponential_avg_factor) and "
      "inference";
  constexpr const char* kBatchNormGrad =
      "training and inference gradients; reserve_space_1/2 carry the batch mean and (biased) "
      "variance, as TensorFlow's CPU kernel does";
  for (const char* op : {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"}) {
    DocumentOp(op, "NHWC, NCHW", kBatchNorm);
  }
  for (const char* op : {"FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3"}) {
    DocumentOp(op, "NHWC, NCHW", kBatchNormGrad);
  }
  RegisterBatchNorm<FusedBatchNormOp<Version::kV1>>("FusedBatchNorm", device_type, false);
  RegisterBatchNorm<FusedBatchNormOp<Version::kV2>>("FusedBatchNormV2", device_type, true);
  RegisterBatchNorm<FusedBatchNormOp<Version::kV3>>("FusedBatchNormV3", device_type, true);
  RegisterBatchNorm<FusedBatchNormGradOp<Version::kV1>>("FusedBatchNormGrad", device_type, false);
  RegisterBatchNorm<FusedBatchNormGradOp<Version::kV2>>("FusedBatchNormGradV2", device_type,
                                                        true);
  RegisterBatchNorm<FusedBatchNormGradOp<Version::kV3>>("FusedBatchNormGradV3", device_type,
                                                        true);
}

}  // namespace vgpu
