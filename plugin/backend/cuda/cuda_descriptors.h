// cuDNN / cuBLASLt descriptors of the CUDA executor: the status mapping of the three libraries,
// the DType -> library type mapping, RAII owners of every cuDNN / cuBLASLt descriptor the
// kernels use, the cuDNN tensor descriptor of a channels-last or channels-first tensor, and the
// executor's forward-mode descriptors (CreateDriverDescriptor / SetDriverDescriptor): in forward
// mode (no method) the client creates, sets and destroys descriptors by explicit calls, and the
// executor makes a real driver descriptor per call so that the A/B comparison with the reuse
// method costs on a GPU what it costs there.
#ifndef VGPU_BACKEND_CUDA_CUDA_DESCRIPTORS_H_
#define VGPU_BACKEND_CUDA_CUDA_DESCRIPTORS_H_

#include <cstdint>
#include <memory>
#include <utility>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "plugin/backend/backing_executor.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernel_ids.h"

namespace vgpu::cuda {

// Forward mode: a new descriptor of `kind` (a DescriptorKind value) holding the cuDNN or
// cuBLASLt object of its kind, created now (cudnnCreate*Descriptor / cublasLtMatmulDescCreate).
// InvalidArgument for an unknown kind. The caller owns the result; thread-safe.
//   tensor -> cudnnTensorDescriptor_t, filter -> cudnnFilterDescriptor_t,
//   convolution -> cudnnConvolutionDescriptor_t, pooling -> cudnnPoolingDescriptor_t,
//   activation -> cudnnActivationDescriptor_t, op-tensor -> cudnnOpTensorDescriptor_t,
//   reduce -> cudnnReduceTensorDescriptor_t, matmul -> cublasLtMatmulDesc_t (made at Set:
//   its compute type is an argument of creation), rnn -> cudnnRNNDescriptor_t,
//   dropout -> cudnnDropoutDescriptor_t.
absl::StatusOr<std::unique_ptr<ExecutorDescriptor>> CreateDriverDescriptor(uint8_t kind);

// Forward mode: stores `settings` (protocol/descriptors.h, of the descriptor's kind) in the
// descriptor and calls the library's cudnnSet*Descriptor with them. InvalidArgument when the
// settings have the wrong size; settings the library cannot represent (a rank-0 tensor, a zero
// extent, an activation mode cuDNN lacks, ...) are stored without a library call, since the
// kernels read only the stored settings (see the .cc for each kind). `descriptor` must come from
// CreateDriverDescriptor. Not thread-safe for one descriptor.
absl::Status SetDriverDescriptor(ExecutorDescriptor& descriptor,
                                 absl::Span<const uint8_t> settings);

namespace dnn {

// --- Status mapping ------------------------------------------------------------------------
// OK for success, else a status naming `what` and the library's error (Internal; out of memory
// -> ResourceExhausted; cuDNN's BAD_PARAM / NOT_SUPPORTED -> InvalidArgument / Unimplemented).
absl::Status RuntimeStatus(cudaError_t error, absl::string_view what);
absl::Status CudnnStatus(cudnnStatus_t status, absl::string_view what);
absl::Status CublasStatus(cublasStatus_t status, absl::string_view what);
const char* CublasStatusName(cublasStatus_t status);

#define VGPU_CUDNN_RETURN_IF_ERROR(expr, what) \
  VGPU_RETURN_IF_ERROR(::vgpu::cuda::dnn::CudnnStatus((expr), (what)))
#define VGPU_CUBLAS_RETURN_IF_ERROR(expr, what) \
  VGPU_RETURN_IF_ERROR(::vgpu::cuda::dnn::CublasStatus((expr), (what)))
#define VGPU_CUDART_RETURN_IF_ERROR(expr, what) \
  VGPU_RETURN_IF_ERROR(::vgpu::cuda::dnn::RuntimeStatus((expr), (what)))

// Sets `attribute` of the cuBLASLt matmul descriptor `desc` to `value` (its bytes); the error
// names `what`.
template <typename Value>
absl::Status SetMatmulDescAttribute(cublasLtMatmulDesc_t desc,
                                    cublasLtMatmulDescAttributes_t attribute, const Value& value,
                                    absl::string_view what) {
  return CublasStatus(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)),
                      what);
}

// --- Types ---------------------------------------------------------------------------------
// cuDNN's data type of a floating dtype; InvalidArgument otherwise.
absl::StatusOr<cudnnDataType_t> CudnnDataType(DType dtype);
// The compute type of cuDNN convolutions of a dtype: double for double, float otherwise.
cudnnDataType_t CudnnComputeType(DType dtype);
// CUDA's data type of a floating dtype; InvalidArgument otherwise.
absl::StatusOr<cudaDataType_t> CudaDataType(DType dtype);

// --- RAII owners ---------------------------------------------------------------------------
// Owns one library object of type Handle, destroyed with Destroy. Movable, not copyable.
template <typename Handle, typename DestroyStatus, DestroyStatus (*Destroy)(Handle)>
class LibraryObject {
 public:
  LibraryObject() = default;
  explicit LibraryObject(Handle handle) : handle_(handle) {}
  LibraryObject(LibraryObject&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  LibraryObject& operator=(LibraryObject&& other) noexcept {
    if (this != &other) {
      Reset();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  ~LibraryObject() { Reset(); }
  Handle get() const { return handle_; }
  explicit operator bool() const { return handle_ != nullptr; }
  void Reset() {
    if (handle_ != nullptr) Destroy(handle_);
    handle_ = nullptr;
  }

 private:
  Handle handle_ = nullptr;
};

using TensorDescriptor = LibraryObject<cudnnTensorDescriptor_t, cudnnStatus_t,
                                       cudnnDestroyTensorDescriptor>;
using FilterDescriptor = LibraryObject<cudnnFilterDescriptor_t, cudnnStatus_t,
                                       cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor = LibraryObject<cudnnConvolutionDescriptor_t, cudnnStatus_t,
                                            cudnnDestroyConvolutionDescriptor>;
using PoolingDescriptor = LibraryObject<cudnnPoolingDescriptor_t, cudnnStatus_t,
                                        cudnnDestroyPoolingDescriptor>;
using ActivationDescriptor = LibraryObject<cudnnActivationDescriptor_t, cudnnStatus_t,
                                           cudnnDestroyActivationDescriptor>;
using OpTensorDescriptor = LibraryObject<cudnnOpTensorDescriptor_t, cudnnStatus_t,
                                         cudnnDestroyOpTensorDescriptor>;
using ReduceDescriptor = LibraryObject<cudnnReduceTensorDescriptor_t, cudnnStatus_t,
                                       cudnnDestroyReduceTensorDescriptor>;
using RnnDescriptor = LibraryObject<cudnnRNNDescriptor_t, cudnnStatus_t, cudnnDestroyRNNDescriptor>;
using DropoutDescriptor = LibraryObject<cudnnDropoutDescriptor_t, cudnnStatus_t,
                                        cudnnDestroyDropoutDescriptor>;
using MatmulDesc = LibraryObject<cublasLtMatmulDesc_t, cublasStatus_t, cublasLtMatmulDescDestroy>;
using MatrixLayout = LibraryObject<cublasLtMatrixLayout_t, cublasStatus_t,
                                   cublasLtMatrixLayoutDestroy>;
using MatmulPreference = LibraryObject<cublasLtMatmulPreference_t, cublasStatus_t,
                                       cublasLtMatmulPreferenceDestroy>;

// A new cuDNN object owned as Object, made by `create` (a cudnnCreate*Descriptor); the error
// names `what`.
template <typename Object, typename Handle>
absl::StatusOr<Object> MakeCudnnObject(cudnnStatus_t (*create)(Handle*), absl::string_view what) {
  Handle handle = nullptr;
  VGPU_CUDNN_RETURN_IF_ERROR(create(&handle), what);
  return Object(handle);
}

absl::StatusOr<TensorDescriptor> MakeTensorDescriptor();
absl::StatusOr<FilterDescriptor> MakeFilterDescriptor();
absl::StatusOr<ConvolutionDescriptor> MakeConvolutionDescriptor();
absl::StatusOr<ActivationDescriptor> MakeActivationDescriptor();

// Sets `descriptor` to a tensor of `batch` images of `channels` channels over the spatial sizes
// spatial[0..spatial_dims) (outermost first), stored channels last (NHWC / NDHWC) or channels
// first (NCHW / NCDHW). cuDNN always takes the dims in N, C, spatial order; the layout is in the
// strides. InvalidArgument / Unimplemented when an extent or stride exceeds cuDNN's int range.
absl::Status SetImageTensor(cudnnTensorDescriptor_t descriptor, cudnnDataType_t type,
                            int64_t batch, int64_t channels, const int64_t* spatial,
                            int spatial_dims, bool channels_last);

}  // namespace dnn
}  // namespace vgpu::cuda

#endif  // VGPU_BACKEND_CUDA_CUDA_DESCRIPTORS_H_
