// The status mapping, type mapping and cuDNN tensor helpers of the CUDA executor's library
// kernels, and the forward-mode driver descriptors (cuda_descriptors.h): one
// ExecutorDescriptor subclass per call of CreateDriverDescriptor, owning the real cuDNN /
// cuBLASLt object of its kind, set from the protocol's settings by SetDriverDescriptor.
#include "plugin/backend/cuda/cuda_descriptors.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "plugin/common/status_macros.h"

namespace vgpu::cuda {
namespace dnn {

absl::Status RuntimeStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error));
  if (error == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so later launches do not report it
    return absl::ResourceExhaustedError(message);
  }
  return absl::InternalError(message);
}

absl::Status CudnnStatus(cudnnStatus_t status, absl::string_view what) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message = absl::StrCat(what, ": ", cudnnGetErrorString(status));
  switch (status) {
    case CUDNN_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(message);
    case CUDNN_STATUS_BAD_PARAM:
      return absl::InvalidArgumentError(message);
    case CUDNN_STATUS_NOT_SUPPORTED:
      return absl::UnimplementedError(message);
    default:
      return absl::InternalError(message);
  }
}

const char* CublasStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_<unknown>";
  }
}

absl::Status CublasStatus(cublasStatus_t status, absl::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message = absl::StrCat(what, ": ", CublasStatusName(status));
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(message);
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return absl::UnimplementedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::StatusOr<cudnnDataType_t> CudnnDataType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return CUDNN_DATA_FLOAT;
    case DType::kFloat64: return CUDNN_DATA_DOUBLE;
    case DType::kFloat16: return CUDNN_DATA_HALF;
    case DType::kBFloat16: return CUDNN_DATA_BFLOAT16;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("dtype ", static_cast<uint32_t>(dtype), " is not a floating-point type"));
  }
}

cudnnDataType_t CudnnComputeType(DType dtype) {
  return dtype == DType::kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

absl::StatusOr<cudaDataType_t> CudaDataType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return CUDA_R_32F;
    case DType::kFloat64: return CUDA_R_64F;
    case DType::kFloat16: return CUDA_R_16F;
    case DType::kBFloat16: return CUDA_R_16BF;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("dtype ", static_cast<uint32_t>(dtype), " is not a floating-point type"));
  }
}

absl::StatusOr<TensorDescriptor> MakeTensorDescriptor() {
  return MakeCudnnObject<TensorDescriptor>(cudnnCreateTensorDescriptor,
                                           "cudnnCreateTensorDescriptor");
}
absl::StatusOr<FilterDescriptor> MakeFilterDescriptor() {
  return MakeCudnnObject<FilterDescriptor>(cudnnCreateFilterDescriptor,
                                           "cudnnCreateFilterDescriptor");
}
absl::StatusOr<ConvolutionDescriptor> MakeConvolutionDescriptor() {
  return MakeCudnnObject<ConvolutionDescriptor>(cudnnCreateConvolutionDescriptor,
                                                "cudnnCreateConvolutionDescriptor");
}
absl::StatusOr<ActivationDescriptor> MakeActivationDescriptor() {
  return MakeCudnnObject<ActivationDescriptor>(cudnnCreateActivationDescriptor,
                                               "cudnnCreateActivationDescriptor");
}

absl::Status SetImageTensor(cudnnTensorDescriptor_t descriptor, cudnnDataType_t type,
                            int64_t batch, int64_t channels, const int64_t* spatial,
                            int spatial_dims, bool channels_last) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  const int rank = spatial_dims + 2;
  int64_t dims[5] = {batch, channels, 1, 1, 1};
  for (int i = 0; i < spatial_dims; ++i) dims[2 + i] = spatial[i];
  int64_t strides[5] = {};
  if (channels_last) {
    strides[1] = 1;
    int64_t step = channels;
    for (int i = rank - 1; i >= 2; --i) {
      strides[i] = step;
      step *= dims[i];
    }
    strides[0] = step;
  } else {
    int64_t step = 1;
    for (int i = rank - 1; i >= 0; --i) {
      strides[i] = step;
      step *= dims[i];
    }
  }
  int int_dims[5], int_strides[5];
  for (int i = 0; i < rank; ++i) {
    // cuDNN takes int extents and strides; a zero extent is not a tensor it accepts (callers
    // handle empty tensors before describing them), and the stride of a size-1 dimension
    // may be anything, so it is clamped rather than refused.
    if (dims[i] < 1 || dims[i] > kIntMax) {
      return absl::UnimplementedError(absl::StrCat(
          "a tensor extent of ", dims[i], " is outside the range cuDNN describes"));
    }
    if (strides[i] > kIntMax) {
      if (dims[i] != 1) {
        return absl::UnimplementedError("a tensor too large for cuDNN's int strides");
      }
      strides[i] = kIntMax;
    }
    int_dims[i] = static_cast<int>(dims[i]);
    int_strides[i] = static_cast<int>(std::max<int64_t>(strides[i], 1));
  }
  return CudnnStatus(cudnnSetTensorNdDescriptor(descriptor, type, rank, int_dims, int_strides),
                     "cudnnSetTensorNdDescriptor");
}

}  // namespace dnn

namespace {

using dnn::CudnnStatus;

// The forward-mode descriptor: the settings (in the base class) and the library object of its
// kind. Exactly one of the objects is set, the one of kind().
class DriverDescriptor : public ExecutorDescriptor {
 public:
  explicit DriverDescriptor(uint8_t kind) : ExecutorDescriptor(kind) {}

  dnn::TensorDescriptor tensor;
  dnn::FilterDescriptor filter;
  dnn::ConvolutionDescriptor convolution;
  dnn::PoolingDescriptor pooling;
  dnn::ActivationDescriptor activation;
  dnn::OpTensorDescriptor op_tensor;
  dnn::ReduceDescriptor reduce;
  dnn::MatmulDesc matmul;  // made by Set (its compute type is a creation argument)
  dnn::RnnDescriptor rnn;
  dnn::DropoutDescriptor dropout;
};

template <typename Settings>
absl::StatusOr<Settings> ReadSettings(absl::Span<const uint8_t> bytes) {
  if (bytes.size() != sizeof(Settings)) {
    return absl::InvalidArgumentError(absl::StrCat(
        DescriptorKindName(DescriptorTraits<Settings>::kKind), " descriptor settings of ",
        bytes.size(), " bytes, expected ", sizeof(Settings)));
  }
  Settings settings;
  std::memcpy(&settings, bytes.data(), sizeof(Settings));
  return settings;
}

bool FitsInt(int64_t value) { return value >= 1 && value <= std::numeric_limits<int>::max(); }

// cuDNN's data type of a dtype, including the integer ones it knows.
bool LibraryDataType(DType dtype, cudnnDataType_t* type) {
  switch (dtype) {
    case DType::kFloat32: *type = CUDNN_DATA_FLOAT; return true;
    case DType::kFloat64: *type = CUDNN_DATA_DOUBLE; return true;
    case DType::kFloat16: *type = CUDNN_DATA_HALF; return true;
    case DType::kBFloat16: *type = CUDNN_DATA_BFLOAT16; return true;
    case DType::kInt32: *type = CUDNN_DATA_INT32; return true;
    case DType::kInt64: *type = CUDNN_DATA_INT64; return true;
    case DType::kUInt8: *type = CUDNN_DATA_UINT8; return true;
    case DType::kBool: *type = CUDNN_DATA_BOOLEAN; return true;
  }
  return false;
}

// Tensor: a packed row-major cudnnSetTensorNdDescriptor of the dims, padded with leading 1s to
// rank 4 (cuDNN's minimum for Nd tensors). Ranks above 8, zero extents or unknown dtypes are
// not cuDNN tensors: settings only.
absl::Status SetTensor(DriverDescriptor& d, absl::Span<const uint8_t> bytes) {
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings s, ReadSettings<TensorDescriptorSettings>(bytes));
  cudnnDataType_t type;
  if (s.rank < 0 || s.rank > kMaxRank || !LibraryDataType(s.dtype, &type)) return absl::OkStatus();
  const int rank = std::max(4, static_cast<int>(s.rank));
  int dims[kMaxRank], strides[kMaxRank];
  const int lead = rank - s.rank;
  for (int i = 0; i < rank; ++i) {
    const int64_t dim = i < lead ? 1 : s.dims[i - lead];
    if (!FitsInt(dim)) return absl::OkStatus();
    dims[i] = static_cast<int>(dim);
  }
  int64_t step = 1;
  for (int i = rank - 1; i >= 0; --i) {
    if (step > std::numeric_limits<int>::max()) return absl::OkStatus();
    strides[i] = static_cast<int>(step);
    step *= dims[i];
  }
  return CudnnStatus(cudnnSetTensorNdDescriptor(d.tensor.get(), type, rank, dims, strides),
                     "cudnnSetTensorNdDescriptor");
}

// Filter: TensorFlow's [(D,) H, W, I, O] as cuDNN's K = O, C = I, spatial dims, format NHWC
// (KRSC): the dims cuDNN's kernels would take after the executor's HWIO -> KRSC transpose.
absl::Status SetFilter(DriverDescriptor& d, absl::Span<const uint8_t> bytes) {
  VGPU_ASSIGN_OR_RETURN(FilterDescriptorSettings s, ReadSettings<FilterDescriptorSettings>(bytes));
  cudnnDataType_t type;
  if ((s.rank != 4 && s.rank != 5) || !LibraryDataType(s.dtype, &type)) return absl::OkStatus();
  int dims[5];
  dims[0] = 0;
  const int spatial = s.rank - 2;
  for (int i = 0; i < s.rank; ++i) {
    if (!FitsInt(s.dims[i])) return absl::OkStatus();
  }
  dims[0] = static_cast<int>(s.dims[s.rank - 1]);
  dims[1] = static_cast<int>(s.dims[s.rank - 2]);
  for (int i = 0; i < spatial; ++i) dims[2 + i] = static_cast<int>(s.dims[i]);
  return CudnnStatus(
      cudnnSetFilterNdDescriptor(d.filter.get(), type, CUDNN_TENSOR_NHWC, s.rank, dims),
      "cudnnSetFilterNdDescriptor");
}

// Convolution: cuDNN pads symmetrically; the descriptor takes the leading paddings (the
// kernels pad the input explicitly when the two sides differ).
absl::Status SetConvolution(DriverDescriptor& d, absl::Span<const uint8_t> bytes) {
  VGPU_ASSIGN_OR_RETURN(ConvolutionDescriptorSettings s,
                        ReadSettings<ConvolutionDescriptorSettings>(bytes));
  if (s.spatial_dims != 2 && s.spatial_dims != 3) return absl::OkStatus();
  int pads[3], strides[3], dilations[3];
  if (s.spatial_dims == 3) {
    pads[0] = s.pad_front, strides[0] = s.stride_d, dilations[0] = s.dilation_d;
  }
  const int o = s.spatial_dims - 2;
  pads[o] = s.pad_top, strides[o] = s.stride_h, dilations[o] = s.dilation_h;
  pads[o + 1] = s.pad_left, strides[o + 1] = s.stride_w, dilations[o + 1] = s.dilation_w;
  for (int i = 0; i < s.spatial_dims; ++i) {
    if (pads[i] < 0 || strides[i] < 1 || dilations[i] < 1) return absl::OkStatus();
  }
  VGPU_RETURN_IF_ERROR(CudnnStatus(
      cudnnSetConvolutionNdDescriptor(d.convolution.get(), s.spatial_dims, pads, strides,
                                      dilations, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
      "cudnnSetConvolutionNdDescriptor"));
  if (s.group_count >= 1) {
    VGPU_RETURN_IF_ERROR(CudnnStatus(
        cudnnSetConvolutionGroupCount(d.convolution.get(), s.group_count),
        "cudnnSetConvolutionGroupCount"));
  }
  return absl::OkStatus();
}

absl::Status SetPooling(DriverDescriptor& d, absl::Span<const uint8_t> bytes) {
  VGPU_ASSIGN_OR_RETURN(PoolingDescriptorSettings s, ReadSettings<PoolingDescriptorSettings>(bytes));
  if (s.spatial_dims != 2 && s.spatial_dims != 3) return absl::OkStatus();
  for (int i = 0; i < s.spatial_dims; ++i) {
    if (s.window[i] < 1 || s.stride[i] < 1 || s.pad_before[i] < 0) return absl::OkStatus();
  }
  const cudnnPoolingMode_t mode = s.mode == PoolingMode::kMax
                                      ? CUDNN_POOLING_MAX
                                      : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  const cudnnNanPropagation_t nan = s.nan_propagation == NanPropagation::kPropagate
                                        ? CUDNN_PROPAGATE_NAN
                                        : CUDNN_NOT_PROPAGATE_NAN;
  return CudnnStatus(cudnnSetPoolingNdDescriptor(d.pooling.get(), mode, nan, s.spatial_dims,
                                                 s.window, s.pad_before, s.stride),
                     "cudnnSetPoolingNdDescriptor");
}

// Activation: cuDNN has relu, clipped relu (relu6), sigmoid, tanh, elu; selu, softplus,
// softsign and leaky relu have no cuDNN activation mode, so the descriptor is set to identity
// (the same driver call, the mode itself lives in the settings the kernels read).
absl::Status SetActivation(DriverDescriptor& d, absl::Span<const uint8_t> bytes) {
  VGPU_ASSIGN_OR_RETURN(ActivationDescriptorSettings s,
                        ReadSettings<ActivationDescriptorSettings>(bytes));
  cudnnActivationMode_t mode = CUDNN_ACTIVATION_IDENTITY;
  double coef = 0;
  switch (s.mode) {
    case ActivationMode::kRelu: mode = CUDNN_ACTIVATION_RELU; break;
    case ActivationMode::kRelu6: mode = CUDNN_ACTIVATION_CLIPPED_RELU; coef = 6; break;
    case ActivationMode::kSigmoid: mode = CUDNN_ACTIVATION_SIGMOID; break;
    case ActivationMode::kTanh: mode = CUDNN_ACTIVATION_TANH; break;
    case ActivationMode::kElu: mode = CUDNN_ACTIVATION_ELU; coef = 1; break;
    default: break;
  }
  return CudnnStatus(
      cudnnSetActivationDescriptor(d.activation.get(), mode, CUDNN_NOT_PROPAGATE_NAN, coef),
      "cudnnSetActivationDescriptor");
}

// Op-tensor: cuDNN's six operations where one matches; every other element-wise operation is
// set as ADD (the driver call is made; the operation lives in the settings).
absl::Status SetOpTensor(DriverDescriptor& d, absl::Span<const uint8_t> bytes) {
  VGPU_ASSIGN_OR_RETURN(OpTensorDescriptorSettings s,
                        ReadSettings<OpTensorDescriptorSettings>(bytes));
  cudnnOpTensorOp_t op = CUDNN_OP_TENSOR_ADD;
  switch (s.op) {
    case ElementwiseOp::kMul: op = CUDNN_OP_TENSOR_MUL; break;
    case ElementwiseOp::kMinimum: op = CUDNN_OP_TENSOR_MIN; break;
    case ElementwiseOp::kMaximum: op = CUDNN_OP_TENSOR_MAX; break;
    case ElementwiseOp::kSqrt: op = CUDNN_OP_TENSOR_SQRT; break;
    case ElementwiseOp::kLogicalNot: op = CUDNN_OP_TENSOR_NOT; break;
    default: break;
  }
  const cudnnDataType_t compute =
      s.dtype == DType::kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  return CudnnStatus(
      cudnnSetOpTensorDescriptor(d.op_tensor.get(), op, compute, CUDNN_NOT_PROPAGATE_NAN),
      "cudnnSetOpTensorDescriptor");
}

// Reduce: sum -> ADD, mean -> AVG, prod -> MUL, max -> MAX, min -> MIN; all / any (logical)
// are set as MIN / MAX, what they are on 0/1 values.
absl::Status SetReduce(DriverDescriptor& d, absl::Span<const uint8_t> bytes) {
  VGPU_ASSIGN_OR_RETURN(ReduceDescriptorSettings s, ReadSettings<ReduceDescriptorSettings>(bytes));
  cudnnReduceTensorOp_t op = CUDNN_REDUCE_TENSOR_ADD;
  switch (s.op) {
    case ReduceOp::kSum: op = CUDNN_REDUCE_TENSOR_ADD; break;
    case ReduceOp::kMean: op = CUDNN_REDUCE_TENSOR_AVG; break;
    case ReduceOp::kProd: op = CUDNN_REDUCE_TENSOR_MUL; break;
    case ReduceOp::kMax: case ReduceOp::kAny: op = CUDNN_REDUCE_TENSOR_MAX; break;
    case ReduceOp::kMin: case ReduceOp::kAll: op = CUDNN_REDUCE_TENSOR_MIN; break;
  }
  const cudnnDataType_t compute =
      s.dtype == DType::kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  return CudnnStatus(cudnnSetReduceTensorDescriptor(d.reduce.get(), op, compute,
                                                    CUDNN_NOT_PROPAGATE_NAN,
                                                    CUDNN_REDUCE_TENSOR_NO_INDICES,
                                                    CUDNN_32BIT_INDICES),
                     "cudnnSetReduceTensorDescriptor");
}

// Matmul: a cuBLASLt matmul descriptor of the compute type the kernels use (32F, 64F for
// double), with the transposes of the row-major product as the column-major one the kernels
// run (c^T = op(b)^T op(a)^T: the operands swap, the transpose flags stay with them).
absl::Status SetMatmul(DriverDescriptor& d, absl::Span<const uint8_t> bytes) {
  VGPU_ASSIGN_OR_RETURN(MatmulDescriptorSettings s, ReadSettings<MatmulDescriptorSettings>(bytes));
  const bool is_double = s.dtype == DType::kFloat64;
  cublasLtMatmulDesc_t handle = nullptr;
  VGPU_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescCreate(&handle, is_double ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                               is_double ? CUDA_R_64F : CUDA_R_32F),
      "cublasLtMatmulDescCreate");
  d.matmul = dnn::MatmulDesc(handle);
  const cublasOperation_t first = s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t second = s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  VGPU_RETURN_IF_ERROR(dnn::SetMatmulDescAttribute(handle, CUBLASLT_MATMUL_DESC_TRANSA, first,
                                                   "cublasLtMatmulDescSetAttribute(TRANSA)"));
  return dnn::SetMatmulDescAttribute(handle, CUBLASLT_MATMUL_DESC_TRANSB, second,
                                     "cublasLtMatmulDescSetAttribute(TRANSB)");
}

// RNN and dropout: cudnnSetRNNDescriptor_v8 and cudnnSetDropoutDescriptor need a handle and
// device state memory (dropout's RNG states) that a descriptor call has no stream for; the
// objects are created by CreateDriverDescriptor and their settings stored only.

}  // namespace

absl::StatusOr<std::unique_ptr<ExecutorDescriptor>> CreateDriverDescriptor(uint8_t kind) {
  if (kind < 1 || kind > kNumDescriptorKinds) {
    return absl::InvalidArgumentError(absl::StrCat("unknown descriptor kind ", kind));
  }
  auto d = std::make_unique<DriverDescriptor>(kind);
  switch (static_cast<DescriptorKind>(kind)) {
    case DescriptorKind::kTensor: {
      VGPU_ASSIGN_OR_RETURN(d->tensor, dnn::MakeTensorDescriptor());
      break;
    }
    case DescriptorKind::kFilter: {
      VGPU_ASSIGN_OR_RETURN(d->filter, dnn::MakeFilterDescriptor());
      break;
    }
    case DescriptorKind::kConvolution: {
      VGPU_ASSIGN_OR_RETURN(d->convolution, dnn::MakeConvolutionDescriptor());
      break;
    }
    case DescriptorKind::kPooling: {
      VGPU_ASSIGN_OR_RETURN(d->pooling,
                            dnn::MakeCudnnObject<dnn::PoolingDescriptor>(
                                cudnnCreatePoolingDescriptor, "cudnnCreatePoolingDescriptor"));
      break;
    }
    case DescriptorKind::kActivation: {
      VGPU_ASSIGN_OR_RETURN(d->activation, dnn::MakeActivationDescriptor());
      break;
    }
    case DescriptorKind::kOpTensor: {
      VGPU_ASSIGN_OR_RETURN(d->op_tensor,
                            dnn::MakeCudnnObject<dnn::OpTensorDescriptor>(
                                cudnnCreateOpTensorDescriptor, "cudnnCreateOpTensorDescriptor"));
      break;
    }
    case DescriptorKind::kReduce: {
      VGPU_ASSIGN_OR_RETURN(d->reduce,
                            dnn::MakeCudnnObject<dnn::ReduceDescriptor>(
                                cudnnCreateReduceTensorDescriptor,
                                "cudnnCreateReduceTensorDescriptor"));
      break;
    }
    case DescriptorKind::kMatmul:
      break;  // created by SetDriverDescriptor
    case DescriptorKind::kRnn: {
      VGPU_ASSIGN_OR_RETURN(d->rnn,
                            dnn::MakeCudnnObject<dnn::RnnDescriptor>(
                                cudnnCreateRNNDescriptor, "cudnnCreateRNNDescriptor"));
      break;
    }
    case DescriptorKind::kDropout: {
      VGPU_ASSIGN_OR_RETURN(d->dropout,
                            dnn::MakeCudnnObject<dnn::DropoutDescriptor>(
                                cudnnCreateDropoutDescriptor, "cudnnCreateDropoutDescriptor"));
      break;
    }
  }
  return std::unique_ptr<ExecutorDescriptor>(std::move(d));
}

absl::Status SetDriverDescriptor(ExecutorDescriptor& descriptor,
                                 absl::Span<const uint8_t> settings) {
  auto* d = dynamic_cast<DriverDescriptor*>(&descriptor);
  if (d == nullptr) {
    return absl::InternalError("SetDriverDescriptor: not a CUDA driver descriptor");
  }
  size_t expected = 0;
  switch (static_cast<DescriptorKind>(d->kind())) {
    case DescriptorKind::kTensor: expected = sizeof(TensorDescriptorSettings); break;
    case DescriptorKind::kFilter: expected = sizeof(FilterDescriptorSettings); break;
    case DescriptorKind::kConvolution: expected = sizeof(ConvolutionDescriptorSettings); break;
    case DescriptorKind::kPooling: expected = sizeof(PoolingDescriptorSettings); break;
    case DescriptorKind::kActivation: expected = sizeof(ActivationDescriptorSettings); break;
    case DescriptorKind::kOpTensor: expected = sizeof(OpTensorDescriptorSettings); break;
    case DescriptorKind::kReduce: expected = sizeof(ReduceDescriptorSettings); break;
    case DescriptorKind::kMatmul: expected = sizeof(MatmulDescriptorSettings); break;
    case DescriptorKind::kRnn: expected = sizeof(RnnDescriptorSettings); break;
    case DescriptorKind::kDropout: expected = sizeof(DropoutDescriptorSettings); break;
  }
  if (settings.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        DescriptorKindName(static_cast<DescriptorKind>(d->kind())), " descriptor settings of ",
        settings.size(), " bytes, expected ", expected));
  }
  absl::Status status;
  switch (static_cast<DescriptorKind>(d->kind())) {
    case DescriptorKind::kTensor: status = SetTensor(*d, settings); break;
    case DescriptorKind::kFilter: status = SetFilter(*d, settings); break;
    case DescriptorKind::kConvolution: status = SetConvolution(*d, settings); break;
    case DescriptorKind::kPooling: status = SetPooling(*d, settings); break;
    case DescriptorKind::kActivation: status = SetActivation(*d, settings); break;
    case DescriptorKind::kOpTensor: status = SetOpTensor(*d, settings); break;
    case DescriptorKind::kReduce: status = SetReduce(*d, settings); break;
    case DescriptorKind::kMatmul: status = SetMatmul(*d, settings); break;
    case DescriptorKind::kRnn: case DescriptorKind::kDropout: break;  // settings only (above)
  }
  // Settings the library refuses (cuDNN's BAD_PARAM / NOT_SUPPORTED for a geometry it cannot
  // describe) may still be valid launch settings: the kernels validate them at launch. Only a
  // library failure (allocation, internal) fails the call.
  if (!status.ok() && !absl::IsInvalidArgument(status) && !absl::IsUnimplemented(status)) {
    return status;
  }
  d->set_settings(settings);
  return absl::OkStatus();
}

}  // namespace vgpu::cuda
