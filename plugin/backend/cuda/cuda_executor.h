// The CUDA backing executor ("cuda" in the executor registry of vgpu-server builds made with
// VGPU_CUDA=ON; docs/cuda.md): the virtual devices' memory is one cudaMalloc'd region per device
// under a DeviceArena, each virtual stream is a CUDA stream with its cuBLAS/cuDNN handles and
// pinned staging buffers, and launches run the CUDA kernel table (cuda_kernel_registry.h).
// Work is asynchronous: an operation enqueues on its stream and keeps the pins of the memory it
// names until a CUDA event recorded behind it has completed, so a freed block is scrubbed and
// reused only after the GPU is done with it. This header includes no CUDA header (the registry
// and the tests include it with the CPU layers' flags).
#ifndef VGPU_BACKEND_CUDA_CUDA_EXECUTOR_H_
#define VGPU_BACKEND_CUDA_CUDA_EXECUTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "plugin/backend/arena_backed_executor.h"
#include "plugin/backend/device_arena.h"

namespace vgpu::cuda {

class PrimitiveCache;

class CudaExecutor final : public ArenaBackedExecutor {
 public:
  // Memory per virtual device: options.memory_limit_per_device bytes of device memory, taken
  // at once (cudaMalloc). Virtual device i runs on GPU i % (number of GPUs). FailedPrecondition
  // naming CUDA and the driver's error when the machine has no usable GPU (cudaGetDeviceCount
  // fails or finds none); ResourceExhausted when a GPU cannot hold the memory asked for.
  static absl::StatusOr<std::unique_ptr<CudaExecutor>> Create(const ExecutorOptions& options);
  // Every session (and so every stream and pin) must have been destroyed before.
  ~CudaExecutor() override;
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  absl::string_view name() const override { return "cuda"; }
  absl::string_view KernelName(uint32_t kernel_id) const override;
  ExecutorStats stats() const override;

  // A CUDA stream (non-blocking) with its library handles and staging buffers.
  // ResourceExhausted / Internal when CUDA refuses one.
  absl::StatusOr<std::unique_ptr<ExecutorStream>> CreateStream(uint32_t device) override;
  // Host-to-device: copied into pinned staging chunk by chunk and enqueued (the host source is
  // not read after return). Device-to-host: enqueued into pinned staging and waited for, then
  // copied out: it is complete on return (the host destination is valid only during the call).
  // Device-to-device: enqueued. kMemcpyNow (stream null): synchronous, in every direction.
  absl::Status Copy(ExecutorStream* stream, uint64_t tenant, const CopyRequest& request,
                    PinnedRanges& pins) override;
  // Enqueued (1-byte patterns: cudaMemsetAsync; 4-byte ones: a small kernel, any alignment).
  absl::Status Memset(ExecutorStream* stream, uint64_t tenant, const MemsetRequest& request,
                      PinnedRanges& pins) override;
  // Looks the kernel up, parses the descriptors and runs it (it validates on the host and
  // enqueues); then the launch error, if any. InvalidArgument for an unknown kernel id.
  absl::Status Launch(ExecutorStream* stream, uint64_t tenant, const LaunchRequest& request,
                      PinnedRanges& pins) override;
  // cudaStreamSynchronize, then releases every pin the stream held, and returns the first
  // error the stream met since the last call (OK if none).
  absl::Status SynchronizeStream(ExecutorStream* stream) override;

  // Forward mode: real cuDNN/cuBLASLt descriptors per call (cuda_descriptors.h).
  absl::StatusOr<std::unique_ptr<ExecutorDescriptor>> CreateDescriptor(uint8_t kind) override;
  absl::Status SetDescriptor(ExecutorDescriptor& descriptor,
                             absl::Span<const uint8_t> settings) override;

 private:
  struct Device;  // a GPU's properties and utility stream, per virtual device
  CudaExecutor();

  // Per virtual device, as arenas_ (the destructor frees the arenas' memory before these go).
  std::vector<std::unique_ptr<Device>> devices_;
  std::unique_ptr<PrimitiveCache> primitives_;
};

// The registry's factory ("cuda"): CudaExecutor::Create as a BackingExecutor.
absl::StatusOr<std::unique_ptr<BackingExecutor>> CreateCudaExecutor(const ExecutorOptions& options);

}  // namespace vgpu::cuda

#endif  // VGPU_BACKEND_CUDA_CUDA_EXECUTOR_H_
