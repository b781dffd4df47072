// The table of CPU kernels (see kernel_registry.h). Adding a kernel: give it an id in its
// family's protocol header, implement it under kernels/, and Add it in the family's function.
#include "plugin/backend/cpu/kernel_registry.h"

#include <algorithm>

namespace vgpu {

void KernelTable::Add(KernelId id, const char* name, KernelFn run) {
  const uint32_t key = static_cast<uint32_t>(id);
  auto it = std::lower_bound(kernels_.begin(), kernels_.end(), key,
                             [](const auto& entry, uint32_t k) { return entry.first < k; });
  kernels_.insert(it, {key, KernelInfo{name, run}});
}

const KernelInfo* KernelTable::Find(uint32_t kernel_id) const {
  auto it = std::lower_bound(kernels_.begin(), kernels_.end(), kernel_id,
                             [](const auto& entry, uint32_t k) { return entry.first < k; });
  if (it == kernels_.end() || it->first != kernel_id) return nullptr;
  return &it->second;
}

const KernelTable& Kernels() {
  static const KernelTable* table = [] {
    auto* t = new KernelTable();
    AddActivationKernels(*t);
    AddElementwiseKernels(*t);
    AddConvolutionKernels(*t);
    AddPoolingKernels(*t);
    AddReductionKernels(*t);
    AddDataMovementKernels(*t);
    AddRandomKernels(*t);
    AddNormalizationKernels(*t);
    AddTrainingKernels(*t);
    AddRnnKernels(*t);
    AddSparseKernels(*t);
    return t;
  }();
  return *table;
}

}  // namespace vgpu
