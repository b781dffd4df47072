// The training family's launch readers (see training_launch.h).
#include "plugin/backend/launch/training_launch.h"

#include <cstring>

#include "plugin/backend/launch/reader_dispatch.h"
#include "plugin/common/status_macros.h"

namespace vgpu::training_launch {
namespace {

// The element size of floating-point dtype `dtype`, or the executor dispatch's error.
absl::StatusOr<uint64_t> FloatingElementSize(DType dtype) {
  uint64_t size = 0;
  VGPU_RETURN_IF_ERROR(ReaderDispatch::Floating(dtype, [&](auto zero) -> absl::Status {
    size = sizeof(zero);
    return absl::OkStatus();
  }));
  return size;
}

}  // namespace

absl::Status CheckUpdateBuffers(const LaunchView& launch, const char* layout,
                                uint64_t element_size, int64_t count, int64_t grad_count,
                                int64_t index_count, uint64_t index_size) {
  const size_t buffers = std::strlen(layout);
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(buffers));
  for (size_t i = 0; i < buffers; ++i) {
    uint64_t bytes = 0;
    uint64_t alignment = element_size;
    switch (layout[i]) {
      case 'v': bytes = static_cast<uint64_t>(count) * element_size; break;
      case 'g': bytes = static_cast<uint64_t>(grad_count) * element_size; break;
      case 's': bytes = element_size; break;
      case 'i':
        bytes = static_cast<uint64_t>(index_count) * index_size;
        alignment = index_size;
        break;
      default: return absl::InternalError("bad operand layout");
    }
    VGPU_RETURN_IF_ERROR(launch.ExpectAligned(i, alignment));
    VGPU_RETURN_IF_ERROR(launch.ExpectElements(i, bytes, /*element_size=*/1, /*alignment=*/1));
  }
  return absl::OkStatus();
}

absl::StatusOr<DenseUpdateLaunch> ReadDenseUpdateLaunch(const LaunchView& launch,
                                                        const UpdateKernelSpec& kernel) {
  DenseUpdateLaunch read;
  ParamReader reader = launch.Params();
  VGPU_ASSIGN_OR_RETURN(read.params, reader.Get<training::UpdateParams>());
  if (read.params.count > static_cast<uint64_t>(kMaxLaunchElements)) {
    return absl::InvalidArgumentError("variable has too many elements");
  }
  read.count = static_cast<int64_t>(read.params.count);
  VGPU_ASSIGN_OR_RETURN(const uint64_t element_size, FloatingElementSize(read.params.dtype));
  VGPU_RETURN_IF_ERROR(CheckUpdateBuffers(launch, kernel.layout, element_size, read.count,
                                          read.count, 0, 0));
  return read;
}

absl::StatusOr<SparseUpdateLaunch> ReadSparseUpdateLaunch(const LaunchView& launch,
                                                          const UpdateKernelSpec& kernel) {
  SparseUpdateLaunch read;
  ParamReader reader = launch.Params();
  VGPU_ASSIGN_OR_RETURN(read.params, reader.Get<training::SparseUpdateParams>());
  const training::SparseUpdateParams& p = read.params;
  if (p.rows < 0 || p.inner < 0 || p.num_indices < 0) {
    return absl::InvalidArgumentError("negative sparse update size");
  }
  const __int128 var_count = static_cast<__int128>(p.rows) * p.inner;
  const __int128 grad_count = static_cast<__int128>(p.num_indices) * p.inner;
  if (var_count > kMaxLaunchElements || grad_count > kMaxLaunchElements ||
      p.num_indices > kMaxLaunchElements) {
    return absl::InvalidArgumentError("sparse update has too many elements");
  }
  if (p.index_dtype != DType::kInt32 && p.index_dtype != DType::kInt64) {
    return absl::InvalidArgumentError("indices must be int32 or int64");
  }
  read.var_count = static_cast<int64_t>(var_count);
  read.grad_count = static_cast<int64_t>(grad_count);
  read.indices_buffer = IndicesBuffer(kernel);
  VGPU_ASSIGN_OR_RETURN(const uint64_t element_size, FloatingElementSize(p.dtype));
  VGPU_RETURN_IF_ERROR(CheckUpdateBuffers(launch, kernel.layout, element_size, read.var_count,
                                          read.grad_count, p.num_indices,
                                          DTypeSize(p.index_dtype)));
  return read;
}

}  // namespace vgpu::training_launch
