// The rearrange family's launch (protocol/kernels/convolution.h: kRearrange, what Einsum does
// besides matrix products: permuted dimensions, generalized diagonals, summed dimensions and
// diagonals written into zeros), read once for every executor. The Rearrangement is plain
// data: the CUDA kernel takes it by value.
#ifndef VGPU_BACKEND_LAUNCH_REARRANGE_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_REARRANGE_LAUNCH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::rearrange_launch {

// A checked rearrangement: y's shape, per y dimension its tie (-1 or an earlier dimension whose
// index it must equal) and its step in x, and the summed dimensions' sizes and steps. Every x
// index it reaches lies inside x, and it sums at most x's element count terms per y element.
struct Rearrangement {
  DType dtype = DType::kFloat32;
  int rank = 0;  // y's
  int summed_rank = 0;
  int64_t y_dims[kMaxRank] = {};
  int32_t ties[kMaxRank] = {};
  int64_t x_strides[kMaxRank] = {};
  int64_t summed_sizes[kMaxRank] = {};
  int64_t summed_strides[kMaxRank] = {};
  int64_t x_elements = 0, y_elements = 0, summed_count = 1;
};

// Validates the x and y descriptors and the parameter block (ranks, one dtype, ties, strides,
// unset entries beyond the ranks, the summed term count, every read inside x, without overflow)
// and returns the rearrangement.
absl::StatusOr<Rearrangement> RearrangementOf(const TensorDescriptorSettings& x,
                                              const TensorDescriptorSettings& y,
                                              const convolution::RearrangeParams& params);

// kRearrange: buffers [x, y], descriptors [x, y], params RearrangeParams. Checks the buffer
// count, the descriptors and the parameters; not the buffer sizes (the kernels' typed
// Buffer<T>() calls check those).
absl::StatusOr<Rearrangement> ReadRearrangeLaunch(const LaunchView& launch);

}  // namespace vgpu::rearrange_launch

#endif  // VGPU_BACKEND_LAUNCH_REARRANGE_LAUNCH_H_
