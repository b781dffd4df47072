// The CUDA kernel table (see cuda_kernel_registry.h): its methods, the process-wide table that
// every kernel family fills, and the launch helpers the families share.
#include "plugin/backend/cuda/cuda_kernel_registry.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "plugin/common/log.h"

namespace vgpu::cuda {

const CudaKernelTable& CudaKernels() {
  static const CudaKernelTable* table = NewKernelTable<CudaKernelContext>(
      {AddCudaActivationKernels, AddCudaElementwiseKernels, AddCudaConvolutionKernels,
       AddCudaMatmulKernels, AddCudaBiasKernels, AddCudaRearrangeKernels, AddCudaPoolingKernels,
       AddCudaReductionKernels, AddCudaSoftmaxKernels, AddCudaScanTopKKernels,
       AddCudaDataMovementKernels, AddCudaRandomKernels, AddCudaNormalizationKernels,
       AddCudaTrainingKernels, AddCudaRnnKernels, AddCudaSparseKernels});
  return *table;
}

GridShape GridFor(const CudaLaunchDevice& device, int64_t elements, unsigned threads) {
  if (threads == 0) threads = 256;
  const int64_t needed = elements <= 0 ? 1 : (elements + threads - 1) / threads;
  // Enough resident blocks to fill every SM several times over; a grid-stride loop covers the
  // rest. (Far below the 2^31 - 1 blocks one launch may name.)
  const int sms = device.properties != nullptr ? device.properties->multiProcessorCount : 1;
  const int64_t fill = int64_t{std::max(sms, 1)} * 32;
  return GridShape{static_cast<unsigned>(std::max<int64_t>(1, std::min(needed, fill))), threads};
}

absl::Status LastLaunchStatus(const char* kernel) {
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(kernel, ": CUDA launch failed: ", cudaGetErrorName(error),
                                          ": ", cudaGetErrorString(error)));
}

}  // namespace vgpu::cuda
