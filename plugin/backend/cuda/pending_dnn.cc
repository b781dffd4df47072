// PLACEHOLDER, deleted when the cuda-dnn branch merges (it defines these for real in
// cuda_libraries.cc, primitive_cache.cc and cuda_descriptors.cc): minimal definitions of the
// interface of docs' cuda-libraries brief, so that the executor branch links on its own.
// Library handles stay null and descriptors keep only their settings. Keep nothing else here.
#include "absl/status/status.h"
#include "plugin/backend/cuda/cuda_descriptors.h"
#include "plugin/backend/cuda/cuda_libraries.h"
#include "plugin/backend/cuda/primitive_cache.h"

namespace vgpu::cuda {

absl::StatusOr<std::unique_ptr<CudaLibraries>> CudaLibraries::Create(int ordinal,
                                                                     cudaStream_t stream) {
  return std::unique_ptr<CudaLibraries>(new CudaLibraries(ordinal, stream));
}
CudaLibraries::~CudaLibraries() = default;
absl::StatusOr<void*> CudaLibraries::Workspace(size_t) {
  return absl::UnimplementedError("placeholder CudaLibraries (pending_dnn.cc) has no workspace");
}

PrimitiveCache::PrimitiveCache(size_t capacity) : capacity_(capacity) {}
size_t PrimitiveCache::size() const { return 0; }
std::shared_ptr<Primitive> PrimitiveCache::Find(const PrimitiveKey&) { return nullptr; }
std::shared_ptr<Primitive> PrimitiveCache::Insert(const PrimitiveKey&,
                                                  std::shared_ptr<Primitive> primitive) {
  return primitive;
}

absl::StatusOr<std::unique_ptr<ExecutorDescriptor>> CreateDriverDescriptor(uint8_t kind) {
  return std::make_unique<ExecutorDescriptor>(kind);
}
absl::Status SetDriverDescriptor(ExecutorDescriptor& descriptor,
                                 absl::Span<const uint8_t> settings) {
  descriptor.set_settings(settings);
  return absl::OkStatus();
}

}  // namespace vgpu::cuda
