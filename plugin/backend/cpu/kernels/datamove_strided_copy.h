// The engine behind the data movement kernels: a multi-threaded strided copy of fixed-size
// elements over a dense index space, and a multi-threaded fill. Transpose, slicing, padding,
// tiling and concatenation are each one or two strided copies with suitable strides.
#ifndef VGPU_BACKEND_CPU_KERNELS_DATAMOVE_STRIDED_COPY_H_
#define VGPU_BACKEND_CPU_KERNELS_DATAMOVE_STRIDED_COPY_H_

#include <cstddef>
#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"

namespace Eigen {
struct ThreadPoolDevice;
}  // namespace Eigen

namespace vgpu::cpu_kernels {

using DimVector = absl::InlinedVector<int64_t, 8>;

// For every index i of `dims` (row-major order):
//   dst[dst_offset + sum_d i_d * dst_strides[d]] = src[src_offset + sum_d i_d * src_strides[d]]
// Offsets and strides count elements of `element_size` bytes (1, 2, 4 or 8); strides may be
// zero (broadcast reads) or negative. Distinct indices must write distinct destinations.
struct StridedCopy {
  size_t element_size = 1;
  DimVector dims;
  DimVector src_strides;
  DimVector dst_strides;
  int64_t src_offset = 0;
  int64_t dst_offset = 0;
};

// Row-major strides (in elements) of a dense tensor of `dims`.
DimVector RowMajorStrides(const DimVector& dims);

// Product of `dims` (1 for rank 0).
int64_t ElementCountOf(const DimVector& dims);

// Fails unless every element `copy` reads lies in [0, src_elements) and every element it writes
// in [0, dst_elements): the last line of defence against a malformed launch.
absl::Status CheckStridedCopyBounds(const StridedCopy& copy, int64_t src_elements,
                                    int64_t dst_elements);

// Runs `copy` on the device's threads. `copy` must have passed CheckStridedCopyBounds for the
// buffers behind `src` and `dst`, which must not overlap. Blocks until done.
void RunStridedCopy(const Eigen::ThreadPoolDevice& device, const StridedCopy& copy,
                    const uint8_t* src, uint8_t* dst);

// Sets `count` elements of `element_size` bytes at `dst` to the low `element_size` bytes of
// `value_bits` (native byte order), on the device's threads. Blocks until done.
void FillElements(const Eigen::ThreadPoolDevice& device, uint8_t* dst, int64_t count,
                  size_t element_size, uint64_t value_bits);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_DATAMOVE_STRIDED_COPY_H_
