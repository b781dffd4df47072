// The CPU backing executor's kernel table: what each KernelId of protocol/kernel_ids.h runs. A
// kernel receives host pointers the session has already validated and translated, its parameter
// block, and the executor's Eigen thread pool for intra-op parallelism.
#ifndef VGPU_BACKEND_CPU_KERNEL_REGISTRY_H_
#define VGPU_BACKEND_CPU_KERNEL_REGISTRY_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace Eigen {
struct ThreadPoolDevice;
}  // namespace Eigen

namespace vgpu {

struct KernelContext {
  absl::Span<uint8_t* const> buffers;     // host pointers, in the launch's buffer order
  absl::Span<const uint64_t> buffer_sizes;
  absl::Span<const uint8_t> params;
  const Eigen::ThreadPoolDevice* device;  // never null
};

using KernelFn = absl::Status (*)(const KernelContext& context);

struct KernelInfo {
  const char* name;
  KernelFn run;
  int num_buffers;       // exact number of buffers the launch must name
  size_t params_size;    // exact size of the parameter block
};

// The kernel registered for `kernel_id`, or nullptr. Thread-safe (a constant table).
const KernelInfo* FindKernel(uint32_t kernel_id);

}  // namespace vgpu

#endif  // VGPU_BACKEND_CPU_KERNEL_REGISTRY_H_
