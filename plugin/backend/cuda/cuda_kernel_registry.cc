// The CUDA kernel table (see cuda_kernel_registry.h): its methods, the process-wide table that
// every kernel family fills, and the launch helpers the families share.
#include "plugin/backend/cuda/cuda_kernel_registry.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "plugin/common/log.h"

namespace vgpu::cuda {

void CudaKernelTable::Add(KernelId id, const char* name, CudaKernelFn run) {
  const uint32_t key = static_cast<uint32_t>(id);
  auto at = std::lower_bound(kernels_.begin(), kernels_.end(), key,
                             [](const auto& entry, uint32_t k) { return entry.first < k; });
  if (at != kernels_.end() && at->first == key) {
    // Two families claiming one id is a build mistake: keep the first, say so once.
    Log(LogLevel::kError, absl::StrCat("CUDA kernel id ", key, " registered twice (", at->second.name,
                                       ", ", name, "); keeping ", at->second.name));
    return;
  }
  kernels_.insert(at, {key, CudaKernelInfo{name, run}});
}

const CudaKernelInfo* CudaKernelTable::Find(uint32_t kernel_id) const {
  auto at = std::lower_bound(kernels_.begin(), kernels_.end(), kernel_id,
                             [](const auto& entry, uint32_t k) { return entry.first < k; });
  if (at == kernels_.end() || at->first != kernel_id) return nullptr;
  return &at->second;
}

std::vector<uint32_t> CudaKernelTable::Ids() const {
  std::vector<uint32_t> ids;
  ids.reserve(kernels_.size());
  for (const auto& entry : kernels_) ids.push_back(entry.first);
  return ids;
}

const CudaKernelTable& CudaKernels() {
  static const CudaKernelTable* table = [] {
    auto* t = new CudaKernelTable();  // intentionally never destroyed
    AddCudaActivationKernels(*t);
    AddCudaElementwiseKernels(*t);
    AddCudaConvolutionKernels(*t);
    AddCudaPoolingKernels(*t);
    AddCudaReductionKernels(*t);
    AddCudaDataMovementKernels(*t);
    AddCudaRandomKernels(*t);
    AddCudaNormalizationKernels(*t);
    AddCudaTrainingKernels(*t);
    AddCudaRnnKernels(*t);
    AddCudaSparseKernels(*t);
    return t;
  }();
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
