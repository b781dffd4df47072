// CudaLibraries (cuda_libraries.h): the cuBLAS / cuBLASLt / cuDNN handles of one executor
// stream and its growable, stream-ordered workspace (cudaMallocAsync / cudaFreeAsync on the
// stream, so a replaced block is released only after the work already enqueued has used it).
#include "plugin/backend/cuda/cuda_libraries.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cuda/cuda_descriptors.h"
#include "plugin/common/status_macros.h"

namespace vgpu::cuda {

absl::StatusOr<std::unique_ptr<CudaLibraries>> CudaLibraries::Create(int ordinal,
                                                                     cudaStream_t stream) {
  VGPU_RETURN_IF_ERROR(dnn::RuntimeStatus(cudaSetDevice(ordinal), "cudaSetDevice"));
  std::unique_ptr<CudaLibraries> libraries(new CudaLibraries(ordinal, stream));
  VGPU_RETURN_IF_ERROR(dnn::CublasStatus(cublasCreate(&libraries->cublas_), "cublasCreate"));
  VGPU_RETURN_IF_ERROR(
      dnn::CublasStatus(cublasSetStream(libraries->cublas_, stream), "cublasSetStream"));
  // No TF32 and no reduced-precision (16-bit) reductions: float accumulation throughout.
  VGPU_RETURN_IF_ERROR(dnn::CublasStatus(
      cublasSetMathMode(libraries->cublas_, static_cast<cublasMath_t>(
                                                CUBLAS_DEFAULT_MATH |
                                                CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
      "cublasSetMathMode"));
  VGPU_RETURN_IF_ERROR(
      dnn::CublasStatus(cublasLtCreate(&libraries->cublas_lt_), "cublasLtCreate"));
  VGPU_RETURN_IF_ERROR(dnn::CudnnStatus(cudnnCreate(&libraries->cudnn_), "cudnnCreate"));
  VGPU_RETURN_IF_ERROR(
      dnn::CudnnStatus(cudnnSetStream(libraries->cudnn_, stream), "cudnnSetStream"));
  return libraries;
}

CudaLibraries::~CudaLibraries() {
  if (workspace_ != nullptr) {
    cudaFreeAsync(workspace_, stream_);
    cudaStreamSynchronize(stream_);
  }
  if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
  if (cublas_lt_ != nullptr) cublasLtDestroy(cublas_lt_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
}

absl::StatusOr<void*> CudaLibraries::Workspace(size_t bytes) {
  constexpr size_t kMinimum = 1 << 20;
  bytes = std::max(bytes, kMinimum);
  if (workspace_ != nullptr && bytes <= workspace_bytes_) return workspace_;
  // Grow geometrically (rounded to 1 MiB) so that a slowly growing demand reallocates rarely.
  size_t grown = std::max(bytes, workspace_bytes_ + workspace_bytes_ / 2);
  grown = (grown + kMinimum - 1) / kMinimum * kMinimum;
  void* block = nullptr;
  absl::Status status =
      dnn::RuntimeStatus(cudaMallocAsync(&block, grown, stream_), "workspace cudaMallocAsync");
  if (!status.ok() && grown > bytes) {
    // Retry with exactly what is needed.
    grown = bytes;
    status = dnn::RuntimeStatus(cudaMallocAsync(&block, grown, stream_),
                                "workspace cudaMallocAsync");
  }
  VGPU_RETURN_IF_ERROR(status);
  if (workspace_ != nullptr) {
    // Stream-ordered: released after every launch enqueued so far has finished with it.
    VGPU_RETURN_IF_ERROR(
        dnn::RuntimeStatus(cudaFreeAsync(workspace_, stream_), "workspace cudaFreeAsync"));
  }
  workspace_ = block;
  workspace_bytes_ = grown;
  return workspace_;
}

}  // namespace vgpu::cuda
