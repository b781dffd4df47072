// The data movement family's launches (protocol/kernels/data_movement.h), read once for every
// executor. These kernels move elements of 1, 2, 4 or 8 bytes without reading them, and most are
// one strided copy: a StridedCopy plan (dims, source and destination strides and offsets, in
// elements) that the launch's reader builds from the parameter block and checks against the
// element counts of the buffers it reads and writes (BufferCopy). The CPU executor runs a plan
// on its thread pool (cpu/kernels/strided_copy_engine.h), the CUDA executor as one grid-stride
// kernel taking the simplified plan by value. Reverse sequence and mirror pad are gathers of
// another shape: their geometries come with the index helpers both executors' loops call.
// Every geometry type is plain data.
#ifndef VGPU_BACKEND_LAUNCH_DATA_MOVEMENT_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_DATA_MOVEMENT_LAUNCH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/backend/launch/element_bytes.h"
#include "plugin/backend/launch/host_device.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/protocol/kernels/data_movement.h"

namespace vgpu::data_movement_launch {

using data_movement::kMaxDataMovementRank;

// --- Strided copy plans ----------------------------------------------------------------------

// The largest rank of a plan: a tile copy has two dimensions per dimension of x.
inline constexpr int kMaxCopyRank = 2 * kMaxDataMovementRank;

// For every index i of dims[0, rank) (row-major order):
//   dst[dst_offset + sum_d i_d * dst_strides[d]] = src[src_offset + sum_d i_d * src_strides[d]]
// Offsets and strides count elements of `element_size` bytes (1, 2, 4 or 8); strides may be zero
// (broadcast reads) or negative. Distinct indices write distinct destinations. Rank 0 copies one
// element.
struct StridedCopy {
  uint32_t element_size = 1;
  int32_t rank = 0;
  int64_t src_offset = 0;
  int64_t dst_offset = 0;
  int64_t dims[kMaxCopyRank] = {};
  int64_t src_strides[kMaxCopyRank] = {};
  int64_t dst_strides[kMaxCopyRank] = {};

  // The number of elements copied (the product of dims; 1 for rank 0). A plan with a zero
  // dimension copies nothing whatever its other dimensions (their product is not formed).
  int64_t ElementCount() const {
    for (int d = 0; d < rank; ++d) {
      if (dims[d] == 0) return 0;
    }
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= dims[d];
    return n;
  }
};

// Fails unless every element `copy` reads lies in [0, src_elements) and every element it writes
// in [0, dst_elements): the last line of defence against a malformed launch. A copy of no
// element passes.
absl::Status CheckStridedCopyBounds(const StridedCopy& copy, int64_t src_elements,
                                    int64_t dst_elements);

// The same copy with unit dimensions dropped and neighbours that are contiguous in both source
// and destination merged (a slice of whole rows becomes one long run): fewer index divisions
// per element, longer runs. `copy` moves at least one element.
StridedCopy SimplifyStridedCopy(const StridedCopy& copy);

// A checked strided copy between two buffers of a launch: buffer `src_buffer` read as
// `src_elements` elements, buffer `dst_buffer` written as `dst_elements`, every index the plan
// touches inside those counts. The executors check the buffers' sizes when they take them
// (LaunchContext::Buffer), and only for a copy that moves something.
struct BufferCopy {
  StridedCopy plan;
  size_t src_buffer = 0, dst_buffer = 1;
  int64_t src_elements = 0, dst_elements = 0;

  // Whether the copy moves no element (its buffers are then not checked, as for empty tensors).
  bool Empty() const { return plan.ElementCount() == 0; }
  // The bytes the source and destination buffers must hold (counts are bounded: no overflow).
  uint64_t SrcBytes() const { return static_cast<uint64_t>(src_elements) * plan.element_size; }
  uint64_t DstBytes() const { return static_cast<uint64_t>(dst_elements) * plan.element_size; }
};

// --- Copy launches ---------------------------------------------------------------------------
// Each reader checks the buffer count, reads and validates the parameter block (sizes bounded
// by kMaxLaunchElements, no product overflowing) and returns the checked copies.

// kTranspose: buffers [x, y]; y = x with its dimensions permuted.
absl::StatusOr<BufferCopy> ReadTransposeLaunch(const LaunchView& launch);

// kStridedSlice: buffers [x, y]; y = the strided slice of x (every position read inside x).
absl::StatusOr<BufferCopy> ReadStridedSliceLaunch(const LaunchView& launch);

// kStridedSliceGrad and kStridedSliceAssign: buffers [slice, whole]; the copy that writes the
// slice (src_elements) back to the positions of the whole (dst_elements) that kStridedSlice
// reads, each at most once. The kernel zeroes the rest of the whole first for the gradient when
// the slice does not cover it (src_elements != dst_elements).
absl::StatusOr<BufferCopy> ReadSliceScatterLaunch(const LaunchView& launch);

// kPad: buffers [x, y]; `copy` writes x into y at offset pad_before, and every other element of
// y is pad_value's low element_size bytes. `padded`: some pad is not zero (y must be filled).
// y's dims and x's box in y (its first index and its dims, per dimension) say which elements
// are padding, so that an executor may write each element of y once.
struct PadLaunch {
  BufferCopy copy;
  uint64_t pad_value = 0;
  bool padded = false;
  int rank = 0;
  int64_t y_dims[kMaxDataMovementRank] = {};
  int64_t box_begin[kMaxDataMovementRank] = {};  // pad_before
  int64_t box_dims[kMaxDataMovementRank] = {};   // x's dims
};
absl::StatusOr<PadLaunch> ReadPadLaunch(const LaunchView& launch);

// kTile: buffers [x, y]; y[i] = x[i mod x_dims], as a copy over [y/x, x] pairs of dimensions
// that reads x with stride 0 along the repetitions. Empty when y is.
absl::StatusOr<BufferCopy> ReadTileLaunch(const LaunchView& launch);

// kConcat: buffers [x_0, ..., x_{n-1}, y]; one copy per piece x_k into its columns of y.
absl::StatusOr<std::vector<BufferCopy>> ReadConcatLaunch(const LaunchView& launch);

// kSplit: buffers [x, y_0, ..., y_{n-1}]; one copy per piece y_k from its columns of x.
absl::StatusOr<std::vector<BufferCopy>> ReadSplitLaunch(const LaunchView& launch);

// kReverse: buffers [x, y]; one copy with negative strides along the reversed dimensions.
absl::StatusOr<BufferCopy> ReadReverseLaunch(const LaunchView& launch);

// --- Reverse sequence ------------------------------------------------------------------------

// kReverseSequence: x viewed as [outer, a, middle, b, inner], a and b the batch and sequence
// dimensions in the order they come; every (outer, a, middle, b) index is a run of `inner`
// contiguous elements, and y's run r is x's run ReverseSequenceSourceRun(g, lengths, r).
struct ReverseSequenceGeometry {
  uint32_t element_size = 1;
  int32_t length_size = 4;   // bytes per sequence length: 4 (int32) or 8 (int64)
  bool batch_first = true;   // batch_dim < seq_dim
  int64_t batch = 0;         // x_dims[batch_dim]: the number of lengths
  int64_t steps = 0;         // x_dims[seq_dim]
  int64_t outer = 1, a_size = 0, middle = 1, b_size = 0, inner = 1;  // set when count > 0
  int64_t count = 0;         // elements of x (and of y)

  // The number of runs (count / inner when count > 0).
  int64_t Runs() const { return outer * a_size * middle * b_size; }
};
// Buffers [x, seq_lengths, y]: seq_lengths holds batch * length_size bytes.
absl::StatusOr<ReverseSequenceGeometry> ReadReverseSequenceLaunch(const LaunchView& launch);

// The length of batch entry b: read bytewise from `lengths` (little-endian as the wire format;
// a tenant may place the lengths at any byte) and clamped to [0, steps] (a negative length
// reverses nothing, a longer one the whole dimension).
VGPU_HOST_DEVICE inline int64_t SequenceLength(const ReverseSequenceGeometry& g,
                                               const uint8_t* lengths, int64_t b) {
  const uint8_t* p = lengths + b * g.length_size;
  uint64_t bits = 0;
  for (int k = g.length_size - 1; k >= 0; --k) bits = (bits << 8) | p[k];
  const int64_t length =
      g.length_size == 4 ? static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(bits)))
                         : static_cast<int64_t>(bits);
  return length < 0 ? 0 : (length > g.steps ? g.steps : length);
}

// The run of x that run `run` of y copies.
VGPU_HOST_DEVICE inline int64_t ReverseSequenceSourceRun(const ReverseSequenceGeometry& g,
                                                         const uint8_t* lengths, int64_t run) {
  int64_t rest = run;
  const int64_t j = rest % g.b_size;
  rest /= g.b_size;
  const int64_t m = rest % g.middle;
  rest /= g.middle;
  const int64_t i = rest % g.a_size;
  const int64_t o = rest / g.a_size;
  const int64_t batch_index = g.batch_first ? i : j;
  const int64_t seq_index = g.batch_first ? j : i;
  const int64_t length = SequenceLength(g, lengths, batch_index);
  const int64_t source_seq = seq_index < length ? length - 1 - seq_index : seq_index;
  const int64_t si = g.batch_first ? i : source_seq, sj = g.batch_first ? source_seq : j;
  return ((o * g.a_size + si) * g.middle + m) * g.b_size + sj;
}

// --- Mirror pad ------------------------------------------------------------------------------

// A validated mirror-pad layout: x of dims[0, rank), padded by before / after into y of
// padded[0, rank); offset 1 for REFLECT, 0 for SYMMETRIC.
struct MirrorPadGeometry {
  int32_t rank = 0;
  int64_t offset = 0;
  int64_t count = 1, padded_count = 1;  // elements of x and of y
  int64_t dims[kMaxDataMovementRank] = {};
  int64_t before[kMaxDataMovementRank] = {};
  int64_t after[kMaxDataMovementRank] = {};
  int64_t padded[kMaxDataMovementRank] = {};
};

// The index along dimension d of x that index p of y reads (protocol's m(p)).
VGPU_HOST_DEVICE inline int64_t MirrorSource(const MirrorPadGeometry& g, int d, int64_t p) {
  if (p < g.before[d]) return g.before[d] - 1 - p + g.offset;
  if (p < g.before[d] + g.dims[d]) return p - g.before[d];
  return 2 * g.dims[d] - 1 - p + g.before[d] - g.offset;
}

// kMirrorPad: buffers [x, y]. The element size is not checked here: a launch that pads into an
// empty y succeeds whatever it says (the kernels check it when they dispatch on it).
struct MirrorPadLaunch {
  uint32_t element_size = 0;
  MirrorPadGeometry g;
};
absl::StatusOr<MirrorPadLaunch> ReadMirrorPadLaunch(const LaunchView& launch);

// kMirrorPadGrad: buffers [dy, dx]; the dtype is checked by the kernels' floating dispatch.
struct MirrorPadGradLaunch {
  DType dtype = DType::kFloat32;
  MirrorPadGeometry g;  // dims: dx's, padded: dy's
};
absl::StatusOr<MirrorPadGradLaunch> ReadMirrorPadGradLaunch(const LaunchView& launch);

// One fold of the mirror-pad gradient along one dimension: `in` [outer, padded, inner] becomes
// `out` [outer, n, inner], out[o, j, i] = in[o, before + j, i] + in[o, head, i] + in[o, tail, i],
// the mirrored terms only where MirrorFoldHead / MirrorFoldTail name one, added in that order
// (TensorFlow's CPU kernel's order).
struct MirrorPadFold {
  int64_t outer = 1, padded = 0, n = 0, inner = 1, before = 0, after = 0, offset = 0;
  int64_t count = 0;     // outer * n * inner: elements of out
  bool into_dx = false;  // the last fold, written into dx (the others into scratch tensors)
};

// The padded position of the mirrored head term of out position j, or -1 when there is none.
VGPU_HOST_DEVICE inline int64_t MirrorFoldHead(const MirrorPadFold& f, int64_t j) {
  const int64_t head = f.before - 1 - j + f.offset;
  return head >= 0 && head < f.before ? head : -1;
}

// The padded position of the mirrored tail term of out position j, or -1 when there is none.
VGPU_HOST_DEVICE inline int64_t MirrorFoldTail(const MirrorPadFold& f, int64_t j) {
  const int64_t tail = 2 * f.n - 1 - j + f.before - f.offset;
  return tail >= f.before + f.n && tail < f.before + f.n + f.after ? tail : -1;
}

// The folds of the gradient, one per padded dimension in order 0, 1, ...; the first reads dy,
// each next one the previous one's output. No fold: nothing was padded, dx = dy.
struct MirrorPadFolds {
  int32_t count = 0;
  MirrorPadFold folds[kMaxDataMovementRank];
};
MirrorPadFolds MirrorPadFoldsOf(const MirrorPadGeometry& g);

// --- Typed buffers ---------------------------------------------------------------------------
// The buffers of a read launch, taken from an executor's launch context (LaunchContext::Buffer:
// sizes and alignment checked) in one order for every executor.

// The two buffers of a checked copy; none (null) for a copy that moves nothing, whose buffers
// are not checked (as for empty tensors).
struct CopyBuffers {
  const uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
};
template <typename Context>
absl::StatusOr<CopyBuffers> TakeCopyBuffers(const Context& context, const BufferCopy& copy) {
  CopyBuffers buffers;
  if (copy.Empty()) return buffers;
  VGPU_ASSIGN_OR_RETURN(buffers.src, context.template Buffer<const uint8_t>(copy.src_buffer,
                                                                            copy.SrcBytes()));
  VGPU_ASSIGN_OR_RETURN(buffers.dst,
                        context.template Buffer<uint8_t>(copy.dst_buffer, copy.DstBytes()));
  return buffers;
}

// kReverseSequence's: the lengths always, x and y only when x has elements (else null).
struct ReverseSequenceBuffers {
  const uint8_t* x = nullptr;
  const uint8_t* lengths = nullptr;
  uint8_t* y = nullptr;
};
template <typename Context>
absl::StatusOr<ReverseSequenceBuffers> TakeReverseSequenceBuffers(
    const Context& context, const ReverseSequenceGeometry& g) {
  ReverseSequenceBuffers buffers;
  VGPU_ASSIGN_OR_RETURN(buffers.lengths,
                        context.template Buffer<const uint8_t>(1, g.batch * g.length_size));
  if (g.count == 0) return buffers;
  const uint64_t bytes = static_cast<uint64_t>(g.count) * g.element_size;
  VGPU_ASSIGN_OR_RETURN(buffers.x, context.template Buffer<const uint8_t>(0, bytes));
  VGPU_ASSIGN_OR_RETURN(buffers.y, context.template Buffer<uint8_t>(2, bytes));
  return buffers;
}

// kMirrorPad's: OK without anything when y is empty; else, with E the unsigned integer of the
// element size (InvalidArgument for another size), fn(const E* x, E* y).
template <typename Context, typename Fn>
absl::Status WithMirrorPadBuffers(const Context& context, const MirrorPadLaunch& pad, Fn&& fn) {
  if (pad.g.padded_count == 0) return absl::OkStatus();
  return ElementBitsDispatch::ElementSize(pad.element_size, [&](auto zero) -> absl::Status {
    using E = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const E* x, context.template Buffer<const E>(0, pad.g.count));
    VGPU_ASSIGN_OR_RETURN(E* y, context.template Buffer<E>(1, pad.g.padded_count));
    return fn(x, y);
  });
}

// kMirrorPadGrad's, with T of the floating dtype (an executor's DTypeDispatch `Dispatch`):
// fn(const T* dy, T* dx), not called (OK) when dx is empty.
template <typename Dispatch, typename Context, typename Fn>
absl::Status WithMirrorPadGradBuffers(const Context& context, const MirrorPadGradLaunch& grad,
                                      Fn&& fn) {
  return Dispatch::Floating(grad.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* dy, context.template Buffer<const T>(0, grad.g.padded_count));
    VGPU_ASSIGN_OR_RETURN(T* dx, context.template Buffer<T>(1, grad.g.count));
    if (grad.g.count == 0) return absl::OkStatus();
    return fn(dy, dx);
  });
}

}  // namespace vgpu::data_movement_launch

#endif  // VGPU_BACKEND_LAUNCH_DATA_MOVEMENT_LAUNCH_H_
