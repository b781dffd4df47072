// The table of CPU kernels (see kernel_registry.h). Adding a kernel: give it an id in
// protocol/kernel_ids.h, implement it under kernels/, and add a row here.
#include "plugin/backend/cpu/kernel_registry.h"

#include "plugin/backend/cpu/kernels/activation_kernels.h"
#include "plugin/backend/cpu/kernels/elementwise_kernels.h"
#include "plugin/protocol/kernel_ids.h"

namespace vgpu {
namespace {

struct Row {
  KernelId id;
  KernelInfo info;
};

constexpr Row kKernels[] = {
    {KernelId::kReluF32, {"relu_f32", cpu_kernels::ReluF32, 2, sizeof(ElementwiseParams)}},
    {KernelId::kReluGradF32,
     {"relu_grad_f32", cpu_kernels::ReluGradF32, 3, sizeof(ElementwiseParams)}},
    {KernelId::kBinaryElementwise,
     {"binary_elementwise", cpu_kernels::BinaryElementwise, 3, sizeof(BinaryElementwiseParams)}},
};

}  // namespace

const KernelInfo* FindKernel(uint32_t kernel_id) {
  for (const Row& row : kKernels) {
    if (static_cast<uint32_t>(row.id) == kernel_id) return &row.info;
  }
  return nullptr;
}

}  // namespace vgpu
