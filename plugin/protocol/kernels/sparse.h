// Kernel ids and launch layouts of the sparse family (ids 1100-1199): gathers, scatters and
// segment reductions (embeddings and their gradients). On a GPU these are custom kernels, not
// library calls, so they launch with a parameter block only (no descriptors), like the data
// movement family. Each parameter block starts with a fixed struct below; some append an array
// (launch_params.h) after it.
//
// Index semantics are those of TensorFlow's GPU kernels, which cannot report a bad index to the
// host without a round trip: a gather writes zeros for an index outside its range, a scatter or
// segment reduction ignores it. Indices are int32 or int64 (index_dtype). Every loop over
// indices runs in index order, so duplicate indices accumulate (or overwrite) exactly as
// TensorFlow's serial CPU kernels do, deterministically.
#ifndef VGPU_PROTOCOL_KERNELS_SPARSE_H_
#define VGPU_PROTOCOL_KERNELS_SPARSE_H_

#include <cstdint>

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::sparse {

// The largest index depth of GatherNd / ScatterNd (indices.shape[-1]); TensorFlow stops at 7.
inline constexpr int kMaxIndexDepth = 7;

// How a scatter combines an update u with the element p it lands on (values are wire format).
// bool takes kAssign, kAdd and kMax (p or u) and kMin (p and u), as TensorFlow's bool
// arithmetic does.
enum class ScatterOp : uint32_t {
  kAssign = 0,  // p = u
  kAdd = 1,     // p = p + u
  kSub = 2,     // p = p - u
  kMul = 3,     // p = p * u
  kDiv = 4,     // p = p / u (an integer division by zero fails the kernel)
  kMin = 5,     // p = min(p, u)
  kMax = 6,     // p = max(p, u)
};

// Gather along one axis (GatherV2 with batch_dims, ResourceGather).
// buffers: [params, indices, out]; params: GatherParams.
//   params  [batch, outer, gather_size, inner]   (element_size bytes per element)
//   indices [batch, indices_per_batch]
//   out     [batch, outer, indices_per_batch, inner]
//   out[b, o, i, :] = params[b, o, indices[b, i], :], or zeros when indices[b, i] is not in
//   [0, gather_size). Bytes are copied, never interpreted (any dtype of that size).
inline constexpr KernelId kGather = KernelId{1100};

struct GatherParams {
  uint32_t element_size = 4;  // 1, 2, 4 or 8
  DType index_dtype = DType::kInt32;
  int64_t batch = 1;
  int64_t outer = 1;
  int64_t gather_size = 0;
  int64_t inner = 1;
  int64_t indices_per_batch = 0;
};

// Gather of slices addressed by index tuples (GatherNd, ResourceGatherNd).
// buffers: [params, indices, out]; params: GatherNdParams, then array<int64> prefix_dims
// (index_depth entries: the first index_depth dimensions of params).
//   params  [prefix_dims..., slice_size]
//   indices [num_slices, index_depth]
//   out     [num_slices, slice_size]
//   out[n, :] = params[indices[n, 0], ..., indices[n, depth-1], :], or zeros when any
//   coordinate is outside its dimension. index_depth 0 copies the whole of params each time.
inline constexpr KernelId kGatherNd = KernelId{1101};

struct GatherNdParams {
  uint32_t element_size = 4;  // 1, 2, 4 or 8
  DType index_dtype = DType::kInt32;
  int64_t num_slices = 0;
  int64_t slice_size = 1;
  uint32_t index_depth = 0;  // 0..kMaxIndexDepth
  uint32_t reserved = 0;
};

// Scatter of rows into a variable along its first dimension (ResourceScatter{Update, Add, Sub,
// Mul, Div, Min, Max}), in place.
// buffers: [params, indices, updates]; params: ScatterParams.
//   params  [rows, inner]                 (read and written)
//   indices [num_indices]
//   updates [num_indices, inner], or a single element when scalar_update is 1
//   for i in order: params[indices[i], :] = op(params[indices[i], :], updates[i, :]);
//   an index outside [0, rows) is skipped.
// dtype: floating types, int32, int64, bool.
inline constexpr KernelId kScatter = KernelId{1102};

struct ScatterParams {
  DType dtype = DType::kFloat32;
  DType index_dtype = DType::kInt32;
  ScatterOp op = ScatterOp::kAssign;
  uint32_t scalar_update = 0;
  int64_t rows = 0;
  int64_t inner = 1;
  int64_t num_indices = 0;
};

// Scatter of slices addressed by index tuples (ScatterNd, TensorScatter{Update, Add, Sub, Min,
// Max}, ResourceScatterNd{Update, Add, Sub, Min, Max}), in place.
// buffers: [output, indices, updates]; params: ScatterNdParams, then array<int64> prefix_dims
// (index_depth entries: the first index_depth dimensions of output).
//   output  [prefix_dims..., slice_size]  (read and written; set to zeros first when
//                                          zero_output is 1, as ScatterNd does)
//   indices [num_updates, index_depth]
//   updates [num_updates, slice_size]
//   for n in order: output[indices[n, :], :] = op(output[indices[n, :], :], updates[n, :]);
//   a tuple with any coordinate outside its dimension is skipped.
// index_depth is 1..kMaxIndexDepth. dtype: floating types, int32, int64, bool.
inline constexpr KernelId kScatterNd = KernelId{1103};

struct ScatterNdParams {
  DType dtype = DType::kFloat32;
  DType index_dtype = DType::kInt32;
  ScatterOp op = ScatterOp::kAssign;
  uint32_t index_depth = 1;
  int64_t num_updates = 0;
  int64_t slice_size = 1;
  uint32_t zero_output = 0;
  uint32_t reserved = 0;
};

// How a segment reduction combines the rows of one segment (values are wire format).
enum class SegmentOp : uint32_t {
  kSum = 0,   // empty segment: 0
  kProd = 1,  // empty segment: 1
  kMax = 2,   // empty segment: the dtype's lowest value
  kMin = 3,   // empty segment: the dtype's highest value
  kMean = 4,  // sum / number of rows; empty segment: 0
};

// Segment reduction along the first dimension (UnsortedSegment{Sum, Prod, Max, Min},
// SegmentSum, SegmentMean).
// buffers: [data, segment_ids, output]; params: SegmentReduceParams.
//   data        [num_ids, inner]
//   segment_ids [num_ids]
//   output      [num_segments, inner]  (fully written)
//   output[s, :] = reduction over i in order with segment_ids[i] == s of data[i, :], starting
//   from the op's value for an empty segment (the sum of a segment accumulates in the dtype,
//   row after row, as TensorFlow's CPU kernel does); ids outside [0, num_segments) are dropped.
// dtype: floating types, int32, int64.
inline constexpr KernelId kSegmentReduce = KernelId{1104};

struct SegmentReduceParams {
  DType dtype = DType::kFloat32;
  DType index_dtype = DType::kInt32;
  SegmentOp op = SegmentOp::kSum;
  uint32_t reserved = 0;
  int64_t num_ids = 0;
  int64_t inner = 1;
  int64_t num_segments = 0;
};

// The number of true (non-zero) elements of a tensor, the first half of Where.
// buffers: [input, count]; params: WhereParams (dims unused).
//   count (one int64) = the number of elements of input that are not zero (NaN counts as true).
inline constexpr KernelId kCountTrue = KernelId{1105};

// The coordinates of the true elements of a tensor (Where with one argument).
// buffers: [input, coordinates]; params: WhereParams, then array<int64> dims (rank entries).
//   input       [dims...]          (dtype)
//   coordinates [num_true, rank]   int64: the coordinates of the true elements in row-major
//                                  order; num_true must be the count of kCountTrue (the kernel
//                                  fails if the input holds another number of true elements).
inline constexpr KernelId kWhere = KernelId{1106};

struct WhereParams {
  DType dtype = DType::kBool;
  uint32_t rank = 0;  // at most 8 (kMaxRank)
  int64_t num_true = 0;
};

}  // namespace vgpu::sparse

#endif  // VGPU_PROTOCOL_KERNELS_SPARSE_H_
