// The kernels a kLaunch command can name, and the layout of each one's parameter block. Both
// sides of the boundary agree on these numbers; a remote backend rejects ids it does not know.
#ifndef VGPU_PROTOCOL_KERNEL_IDS_H_
#define VGPU_PROTOCOL_KERNEL_IDS_H_

#include <cstdint>

namespace vgpu {

enum class KernelId : uint32_t {
  // buffers: [input, output]; params: ElementwiseParams. output = max(input, 0).
  kReluF32 = 1,
  // buffers: [gradients, features, output]; params: ElementwiseParams.
  // output = features > 0 ? gradients : 0.
  kReluGradF32 = 2,
};

// Parameter block of element-wise kernels: the number of elements.
struct ElementwiseParams {
  uint64_t count = 0;
};

}  // namespace vgpu

#endif  // VGPU_PROTOCOL_KERNEL_IDS_H_
