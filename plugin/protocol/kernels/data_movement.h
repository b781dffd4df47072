// Kernel ids and launch layouts of the data movement family (ids 600-699): transpose, slicing,
// padding, tiling/broadcasting, concatenation and splitting. These kernels move bytes without
// looking at them, so they name an element size (1, 2, 4 or 8 bytes) instead of a dtype, and
// launch with a parameter block only (no descriptors), as a GPU library's copy kernels do.
//
// Shapes are dense row-major. Common parameter fields:
//   element_size : uint32, one of 1, 2, 4, 8
//   dims arrays  : array<int64> (see launch_params.h), at most kMaxDataMovementRank entries
#ifndef VGPU_PROTOCOL_KERNELS_DATA_MOVEMENT_H_
#define VGPU_PROTOCOL_KERNELS_DATA_MOVEMENT_H_

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::data_movement {

// The largest rank a data movement kernel accepts (TensorFlow's kernels stop at 8 too).
inline constexpr int kMaxDataMovementRank = 8;

// buffers: [x, y]; params: element_size, array<int64> x_dims, array<int32> perm.
// y has dims x_dims[perm[i]] and y[i_0, ..., i_{r-1}] = x[j] with j[perm[k]] = i_k.
inline constexpr KernelId kTranspose = KernelId{600};

// buffers: [x, y]; params: element_size, array<int64> x_dims, array<int64> begin,
// array<int64> strides, array<int64> y_dims (all of x's rank; strides non-zero, may be negative).
// y[i] = x[begin + i * strides] for every index i of y_dims; every index read lies inside x.
// Slice is the case strides == 1; StridedSlice launches with its processing shape as y_dims.
inline constexpr KernelId kStridedSlice = KernelId{601};

// buffers: [dy, dx]; params as kStridedSlice with x_dims the dims of dx and y_dims those of dy.
// dx = 0 everywhere, except dx[begin + i * strides] = dy[i] (the gradient of kStridedSlice).
inline constexpr KernelId kStridedSliceGrad = KernelId{602};

// buffers: [value, x]; params as kStridedSlice with x_dims the dims of x and y_dims those of
// value. x[begin + i * strides] = value[i]; every other element of x keeps its value (the
// in-place assignment of ResourceStridedSliceAssign / TensorStridedSliceUpdate).
inline constexpr KernelId kStridedSliceAssign = KernelId{607};

// buffers: [x, y]; params: element_size, array<int64> x_dims, array<int64> pad_before,
// array<int64> pad_after (pads >= 0), uint64 pad_value (its low element_size bytes are the
// value's bytes). y has dims pad_before + x_dims + pad_after; x sits at offset pad_before and
// every other element of y is pad_value.
inline constexpr KernelId kPad = KernelId{603};

// buffers: [x, y]; params: element_size, array<int64> x_dims, array<int64> y_dims (same rank;
// each y_dims[d] a multiple of x_dims[d], or 0). y[i] = x[i mod x_dims]: Tile (y = x * multiples)
// and BroadcastTo (x_dims[d] == 1 repeated y_dims[d] times) alike.
inline constexpr KernelId kTile = KernelId{604};

// buffers: [x_0, ..., x_{n-1}, y]; params: element_size, int64 outer, array<int64> inner (n
// entries). Each x_k is [outer, inner[k]]; y is [outer, sum(inner)] with the inputs side by side
// in order (ConcatV2 along an axis, Pack).
inline constexpr KernelId kConcat = KernelId{605};

// buffers: [x, y_0, ..., y_{n-1}]; params as kConcat: the inverse, x is cut into the y_k
// (Unpack, Split, SplitV).
inline constexpr KernelId kSplit = KernelId{606};

// Reversals (ids 620-629; ReverseV2 and ReverseSequence).

// buffers: [x, y]; params: element_size, array<int64> x_dims, array<uint8> reversed (one flag
// per dimension, 0 or 1). y[i] = x[j] with j_d = reversed[d] ? x_dims[d] - 1 - i_d : i_d.
inline constexpr KernelId kReverse = KernelId{620};

// buffers: [x, seq_lengths, y]; params: element_size, uint32 length_size (4: int32 lengths,
// 8: int64), array<int64> x_dims (rank 2 to 5), int32 batch_dim, int32 seq_dim (distinct, in
// range). seq_lengths has x_dims[batch_dim] entries. With L the length of batch entry b clamped
// to [0, x_dims[seq_dim]] (a negative length reverses nothing, as on TensorFlow's GPU; a longer
// one the whole dimension), y at (b, s) = x at (b, L - 1 - s) for s < L, x at (b, s) otherwise.
inline constexpr KernelId kReverseSequence = KernelId{621};

// MirrorPad (ids 630-639; kernels in backend/cpu/kernels/mirror_pad_kernels.cc).
// Along a dimension of size n padded by (before, after), output index p reads input index
//   m(p) = before - 1 - p + offset      for p < before               (mirrored head)
//        = p - before                   for before <= p < before + n
//        = 2n - 1 - p + before - offset for p >= before + n          (mirrored tail)
// with offset 1 for REFLECT (the edge is not repeated; pads < n) and 0 for SYMMETRIC (the edge
// is repeated; pads <= n).
enum class MirrorPadMode : uint32_t { kReflect = 0, kSymmetric = 1 };

// buffers: [x, y]; params: element_size, array<int64> x_dims, array<int64> pad_before,
// array<int64> pad_after, uint32 MirrorPadMode. y has dims pad_before + x_dims + pad_after and
// y[p] = x[m(p)] dimension by dimension.
inline constexpr KernelId kMirrorPad = KernelId{630};

// buffers: [dy, dx]; params: uint32 DType (floating), array<int64> dx_dims, array<int64>
// pad_before, array<int64> pad_after, uint32 MirrorPadMode. dy has dims pad_before + dx_dims +
// pad_after; dx[j] = sum of dy[p] over every p with m(p) = j, folded one dimension at a time in
// order 0, 1, ... (per element: the central value, plus the mirrored head, plus the mirrored
// tail), as TensorFlow's CPU kernel adds them.
inline constexpr KernelId kMirrorPadGrad = KernelId{631};

}  // namespace vgpu::data_movement

#endif  // VGPU_PROTOCOL_KERNELS_DATA_MOVEMENT_H_
