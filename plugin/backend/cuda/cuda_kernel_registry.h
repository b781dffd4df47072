// The CUDA backing executor's kernel table: what each kernel id of protocol/kernels/*.h runs on an
// NVIDIA GPU. A kernel receives a CudaKernelContext (backend/launch/launch_context.h over a
// CudaLaunchDevice): device pointers the session has validated and translated, the settings of
// the descriptors the launch carried, its parameter block, and the stream and library handles to
// run on. Kernels enqueue work on that stream and return without waiting for the GPU; they
// validate parameters and settings on the host (the same checks as the CPU executor's kernel of
// the same id) before enqueuing anything. Only this folder includes CUDA's headers.
#ifndef VGPU_BACKEND_CUDA_CUDA_KERNEL_REGISTRY_H_
#define VGPU_BACKEND_CUDA_CUDA_KERNEL_REGISTRY_H_

#include <cstdint>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "plugin/backend/launch/kernel_table.h"
#include "plugin/backend/launch/launch_context.h"

namespace vgpu::cuda {

class CudaLibraries;    // cuBLAS(Lt)/cuDNN handles and workspace of one stream (cuda_libraries.h)
class PrimitiveCache;   // plans, descriptors and algorithm choices per distinct settings

// The device a CUDA kernel runs on: one executor stream. Owned by the executor's stream state;
// a kernel uses it only during its call, on that stream's worker thread.
struct CudaLaunchDevice {
  cudaStream_t stream = nullptr;
  int ordinal = 0;                               // CUDA device ordinal
  const cudaDeviceProp* properties = nullptr;    // never null
  CudaLibraries* libraries = nullptr;            // never null; bound to `stream`
  PrimitiveCache* primitives = nullptr;          // never null; shared by the executor
};

using CudaKernelContext = LaunchContext<CudaLaunchDevice>;
// The kernels of the CUDA executor. Each family adds its kernels in its AddCuda*Kernels
// function (backend/cuda/kernels/*.cu).
using CudaKernelTable = KernelRegistry<CudaKernelContext>;
using CudaKernelFn = CudaKernelTable::Fn;
using CudaKernelInfo = CudaKernelTable::Entry;

// The process-wide table, built on first use. Thread-safe.
const CudaKernelTable& CudaKernels();

// The launch configuration of a grid-stride kernel over `elements` items: a grid that fills
// the device without exceeding what one launch may name. elements > 0.
struct GridShape {
  unsigned blocks;
  unsigned threads;
};
GridShape GridFor(const CudaLaunchDevice& device, int64_t elements, unsigned threads = 256);

// The error of the last launch on this thread (cudaGetLastError), as an Internal status that
// names `kernel`; OK when there was none.
absl::Status LastLaunchStatus(const char* kernel);

// One function per kernel family of launch/kernel_families.h (backend/cuda/kernels/*.cu, the
// family's file), each adding the kernels this executor serves under the family's ids and names.
void AddCudaActivationKernels(CudaKernelTable& table);
void AddCudaElementwiseKernels(CudaKernelTable& table);
void AddCudaConvolutionKernels(CudaKernelTable& table);
void AddCudaMatmulKernels(CudaKernelTable& table);
void AddCudaBiasKernels(CudaKernelTable& table);
void AddCudaRearrangeKernels(CudaKernelTable& table);
void AddCudaPoolingKernels(CudaKernelTable& table);
void AddCudaReductionKernels(CudaKernelTable& table);
void AddCudaSoftmaxKernels(CudaKernelTable& table);
void AddCudaScanTopKKernels(CudaKernelTable& table);
void AddCudaDataMovementKernels(CudaKernelTable& table);
void AddCudaRandomKernels(CudaKernelTable& table);
void AddCudaNormalizationKernels(CudaKernelTable& table);
void AddCudaTrainingKernels(CudaKernelTable& table);
void AddCudaRnnKernels(CudaKernelTable& table);
void AddCudaSparseKernels(CudaKernelTable& table);

}  // namespace vgpu::cuda

namespace vgpu {
// Device pointers: never dereferenced on the host.
template <>
struct LaunchDeviceTraits<cuda::CudaLaunchDevice> {
  static constexpr bool kHostAddressable = false;
};
}  // namespace vgpu

#endif  // VGPU_BACKEND_CUDA_CUDA_KERNEL_REGISTRY_H_
