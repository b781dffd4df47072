// The library handles of one CUDA executor stream (cuBLAS, cuBLASLt, cuDNN), bound to that
// stream, and the stream-ordered device workspace the library calls and the kernels of
// backend/cuda/kernels share. One CudaLibraries per executor stream; only that stream's worker
// thread uses it.
#ifndef VGPU_BACKEND_CUDA_CUDA_LIBRARIES_H_
#define VGPU_BACKEND_CUDA_CUDA_LIBRARIES_H_

#include <cstddef>
#include <memory>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "absl/status/statusor.h"

namespace vgpu::cuda {

// The library handles of one executor stream, bound to it, and a stream-ordered workspace.
// Not thread-safe: used by the stream's worker thread only.
class CudaLibraries {
 public:
  // Makes the handles on device `ordinal` and binds cuBLAS and cuDNN to `stream` (borrowed: it
  // must outlive the object). Sets the calling thread's current device to `ordinal`.
  // cuBLAS runs in its default (non-TF32) math without reduced-precision reductions, so that
  // float32 products stay within the CPU executor's tolerance.
  static absl::StatusOr<std::unique_ptr<CudaLibraries>> Create(int ordinal, cudaStream_t stream);
  ~CudaLibraries();  // destroys the handles and frees the workspace; the stream must be idle
  CudaLibraries(const CudaLibraries&) = delete;
  CudaLibraries& operator=(const CudaLibraries&) = delete;

  cublasHandle_t cublas() const { return cublas_; }
  cublasLtHandle_t cublas_lt() const { return cublas_lt_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  cudaStream_t stream() const { return stream_; }
  int ordinal() const { return ordinal_; }

  // Device scratch of at least `bytes` for work enqueued on the stream; grows (freeing the
  // old block only after the stream has passed its last use) and stays. Valid until the next
  // call on the same stream: a kernel that needs several scratch areas asks once for their sum.
  // Returns a non-null, 256-byte aligned pointer even for 0 bytes. ResourceExhausted when the
  // device has no memory for it.
  absl::StatusOr<void*> Workspace(size_t bytes);
  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  CudaLibraries(int ordinal, cudaStream_t stream) : ordinal_(ordinal), stream_(stream) {}

  const int ordinal_;
  const cudaStream_t stream_;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublas_lt_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

}  // namespace vgpu::cuda

#endif  // VGPU_BACKEND_CUDA_CUDA_LIBRARIES_H_
