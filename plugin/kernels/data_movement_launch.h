// The data movement launches other op kernels compose (data_movement_ops.cc defines them): a
// transpose, a strided slice (or its gradient), a pad and a tile, each one byte-moving kernel of
// protocol/kernels/data_movement.h on the op's stream.
#ifndef VGPU_KERNELS_DATA_MOVEMENT_LAUNCH_H_
#define VGPU_KERNELS_DATA_MOVEMENT_LAUNCH_H_

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "plugin/kernels/op_kernel.h"

namespace vgpu {

// The element types the data movement kernels move (they only need the element's size).
inline constexpr std::initializer_list<TF_DataType> kDataMovementTypes = {
    TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE, TF_INT32, TF_INT64, TF_BOOL, TF_UINT8};

// y = x (of x_dims, elements of `dtype`) with its dimensions permuted by `perm`.
absl::Status LaunchTranspose(const OpContext& context, TF_DataType dtype,
                             absl::Span<const int64_t> x_dims, absl::Span<const int32_t> perm,
                             BufferArg x, BufferArg y);

// kStridedSlice (`to` = `from`[begin + i * strides] for every index i of y_dims) or its gradient
// kStridedSliceGrad, as `kernel` says; x_dims are the dims of the sliced tensor.
absl::Status LaunchSlice(const OpContext& context, KernelId kernel, TF_DataType dtype,
                         const std::vector<int64_t>& x_dims, std::vector<int64_t> begin,
                         const std::vector<int64_t>& strides, const std::vector<int64_t>& y_dims,
                         BufferArg from, BufferArg to);

// y = x with before[d] elements of `pad_value` (its low TF_DataTypeSize(dtype) bytes) before it
// and after[d] after it along each dimension d: y_dims[d] = before[d] + x_dims[d] + after[d].
absl::Status LaunchPad(const OpContext& context, TF_DataType dtype,
                       const std::vector<int64_t>& x_dims, const std::vector<int64_t>& before,
                       const std::vector<int64_t>& after, uint64_t pad_value, BufferArg x,
                       BufferArg y);

// y (of y_dims, each a multiple of x_dims' or 0) = x repeated: y[i] = x[i mod x_dims].
absl::Status LaunchTile(const OpContext& context, TF_DataType dtype,
                        const std::vector<int64_t>& x_dims, const std::vector<int64_t>& y_dims,
                        BufferArg x, BufferArg y);

}  // namespace vgpu

#endif  // VGPU_KERNELS_DATA_MOVEMENT_LAUNCH_H_
