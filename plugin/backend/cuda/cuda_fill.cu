// The 4-byte-pattern memset of the CUDA executor (see cuda_fill.h).
#include "plugin/backend/cuda/cuda_fill.h"

namespace vgpu::cuda {
namespace {

// Word stores where the destination is 4-byte aligned, byte stores otherwise.
__global__ void FillWords(uint32_t* destination, uint64_t words, uint32_t pattern) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < words;
       i += uint64_t{gridDim.x} * blockDim.x) {
    destination[i] = pattern;
  }
}

__global__ void FillBytes(uint8_t* destination, uint64_t size, uint32_t pattern) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < size;
       i += uint64_t{gridDim.x} * blockDim.x) {
    destination[i] = static_cast<uint8_t>(pattern >> (8 * (i % 4)));
  }
}

}  // namespace

absl::Status FillPattern32(uint8_t* destination, uint64_t size, uint32_t pattern,
                           const CudaLaunchDevice& device) {
  if (reinterpret_cast<uintptr_t>(destination) % 4 == 0) {
    const uint64_t words = size / 4;
    const GridShape grid = GridFor(device, static_cast<int64_t>(words));
    FillWords<<<grid.blocks, grid.threads, 0, device.stream>>>(
        reinterpret_cast<uint32_t*>(destination), words, pattern);
  } else {
    const GridShape grid = GridFor(device, static_cast<int64_t>(size));
    FillBytes<<<grid.blocks, grid.threads, 0, device.stream>>>(destination, size, pattern);
  }
  return LastLaunchStatus("memset (4-byte pattern)");
}

}  // namespace vgpu::cuda
