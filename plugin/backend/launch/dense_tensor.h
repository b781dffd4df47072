// Dense tensors as the launch readers check them: the element count of a tensor descriptor and
// the check that a launch's buffer holds that many elements of a dtype. Host code,
// header-only, no executor type: a reader checks a buffer with the size and alignment every
// executor holds the dtype's elements in (ReaderDispatch's storage types), exactly as the
// kernel's typed LaunchContext::Buffer<T>() checks it again afterwards.
#ifndef VGPU_BACKEND_LAUNCH_DENSE_TENSOR_H_
#define VGPU_BACKEND_LAUNCH_DENSE_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/backend/launch/reader_dispatch.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernel_ids.h"

namespace vgpu {

// The element count of a dense tensor descriptor: InvalidArgument when its rank or a dimension
// is out of range or the count exceeds kMaxLaunchElements. Pure, thread-safe.
inline absl::StatusOr<int64_t> DenseElementCount(const TensorDescriptorSettings& tensor) {
  return CheckedElementCount("tensor", tensor.dims, tensor.rank, kMaxLaunchElements);
}

// Fails unless buffer `index` of `launch` is aligned for and holds at least `elements` elements
// of `dtype` (LaunchView::ExpectElements with the dtype's element size and alignment); an
// unknown dtype fails as ReaderDispatch::All does (readers check the dtype before).
inline absl::Status ExpectDenseBuffer(const LaunchView& launch, size_t index, uint64_t elements,
                                      DType dtype) {
  return ReaderDispatch::All(dtype, [&](auto zero) -> absl::Status {
    return launch.ExpectElements(index, elements, sizeof(zero), alignof(decltype(zero)));
  });
}

// ExpectDenseBuffer for buffers 0, 1, ... in order, buffer i holding elements[i] (validated
// counts, >= 0) elements of `dtype`: the first failure.
inline absl::Status ExpectDenseBuffers(const LaunchView& launch, DType dtype,
                                       std::initializer_list<int64_t> elements) {
  size_t index = 0;
  for (const int64_t count : elements) {
    absl::Status status = ExpectDenseBuffer(launch, index++, static_cast<uint64_t>(count), dtype);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_DENSE_TENSOR_H_
