// CUDA runtime errors as absl::Status, for the CUDA executor and its kernels: one spelling of
// "what failed, and the runtime's name and text for why".
#ifndef VGPU_BACKEND_CUDA_CUDA_STATUS_H_
#define VGPU_BACKEND_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "plugin/common/status_macros.h"

namespace vgpu::cuda {

// OK for cudaSuccess; ResourceExhausted for cudaErrorMemoryAllocation; otherwise Internal
// "<what>: <cudaGetErrorName>: <cudaGetErrorString>". Pure; thread-safe.
inline absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error));
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

}  // namespace vgpu::cuda

// Returns CudaStatus(expr, what) from the enclosing function unless expr is cudaSuccess.
#define VGPU_CUDA_RETURN_IF_ERROR(expr, what) \
  VGPU_RETURN_IF_ERROR(::vgpu::cuda::CudaStatus((expr), (what)))

#endif  // VGPU_BACKEND_CUDA_CUDA_STATUS_H_
