// The dtype dispatch of the launch readers (backend/launch/*_launch.cc): host code that checks a
// launch's dtype, sizes its buffers by element size, or checks a value against an integer
// dtype's limits, and never computes with the elements. The 16-bit floats and bool are named by
// plain storage types of their size, so that a reader needs no executor's element types and its
// dtype errors are word for word those of the executor dispatch (dtype_dispatch.h) that runs
// after it:
//
//   VGPU_RETURN_IF_ERROR(ReaderDispatch::Floating(dtype, [&](auto zero) -> absl::Status {
//     element_size = sizeof(zero);  // 2 for float16 and bfloat16
//     return absl::OkStatus();
//   }));
#ifndef VGPU_BACKEND_LAUNCH_READER_DISPATCH_H_
#define VGPU_BACKEND_LAUNCH_READER_DISPATCH_H_

#include <cstdint>

#include "plugin/backend/launch/dtype_dispatch.h"

namespace vgpu {

// Storage types of the dtypes C++ has no type for: right in size and alignment, not in value.
struct ReaderElementTypes {
  using Float16 = uint16_t;
  using BFloat16 = uint16_t;
  using Bool = uint8_t;
};

using ReaderDispatch = DTypeDispatch<ReaderElementTypes>;

}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_READER_DISPATCH_H_
