// The CUDA executor's own device code: the 4-byte-pattern memset (the runtime API has only a
// byte memset, and the driver API's cuMemsetD32 wants an aligned destination).
#ifndef VGPU_BACKEND_CUDA_CUDA_FILL_H_
#define VGPU_BACKEND_CUDA_CUDA_FILL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"

namespace vgpu::cuda {

// Enqueues on device.stream: byte i of [destination, destination + size) becomes byte i % 4 of
// `pattern` (little-endian, as the CPU executor stores it), whatever the alignment of
// `destination`. size > 0 and a multiple of 4 (the session checked). Returns the launch error.
absl::Status FillPattern32(uint8_t* destination, uint64_t size, uint32_t pattern,
                           const CudaLaunchDevice& device);

}  // namespace vgpu::cuda

#endif  // VGPU_BACKEND_CUDA_CUDA_FILL_H_
