// PLACEHOLDER, deleted when the kernel branches (cuda-k1, cuda-k2, cuda-dnn) merge: empty kernel
// families, so that the executor branch (cuda-exec) links on its own. Keep nothing else here.
#include "plugin/backend/cuda/cuda_kernel_registry.h"

namespace vgpu::cuda {
void AddCudaActivationKernels(CudaKernelTable&) {}
void AddCudaElementwiseKernels(CudaKernelTable&) {}
void AddCudaConvolutionKernels(CudaKernelTable&) {}
void AddCudaPoolingKernels(CudaKernelTable&) {}
void AddCudaReductionKernels(CudaKernelTable&) {}
void AddCudaDataMovementKernels(CudaKernelTable&) {}
void AddCudaRandomKernels(CudaKernelTable&) {}
void AddCudaNormalizationKernels(CudaKernelTable&) {}
void AddCudaTrainingKernels(CudaKernelTable&) {}
void AddCudaRnnKernels(CudaKernelTable&) {}
void AddCudaSparseKernels(CudaKernelTable&) {}
}  // namespace vgpu::cuda
