// The sparse family's launches (protocol/kernels/sparse.h), read once for every executor:
// gathers, scatters, segment reductions, count true and where. Each reader checks the buffer
// count, reads the parameter block and validates it (ops, element sizes, index depths, every
// element count overflow-checked), so that a hostile launch fails before a kernel touches a
// buffer; the With*Buffers templates then dispatch on its index and element dtypes with an
// executor's DTypeDispatch and take its typed buffers with those counts, and the kernels only
// compute, with the index helpers and element rules below (plain data, VGPU_HOST_DEVICE).
#ifndef VGPU_BACKEND_LAUNCH_SPARSE_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_SPARSE_LAUNCH_H_

#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/backend/launch/host_device.h"
#include "plugin/backend/launch/integer_arithmetic.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/protocol/kernels/sparse.h"

namespace vgpu::sparse_launch {

// --- Index tuples (GatherNd, ScatterNd) ------------------------------------------------------

// Reads the array<int64> of `depth` prefix dimension sizes that follows a parameter struct;
// InvalidArgument when depth exceeds sparse::kMaxIndexDepth or the array has another length.
absl::StatusOr<std::vector<int64_t>> ReadPrefixDims(ParamReader& reader, uint32_t depth);

// The prefix dimensions an index tuple addresses: their sizes, row-major strides (in slices) and
// element count.
struct PrefixLayout {
  int32_t depth = 0;
  int64_t count = 1;
  int64_t dims[sparse::kMaxIndexDepth] = {};
  int64_t strides[sparse::kMaxIndexDepth] = {};
};

// The layout of `dims` (at most kMaxIndexDepth of them), its count overflow-checked ("prefix").
absl::StatusOr<PrefixLayout> PrefixLayoutOf(const std::vector<int64_t>& dims);

// The slice offset (in slices) the index tuple at `tuple` addresses, or -1 when a coordinate is
// outside its dimension.
template <typename Index>
VGPU_HOST_DEVICE inline int64_t SliceOffset(const PrefixLayout& layout, const Index* tuple) {
  int64_t offset = 0;
  for (int d = 0; d < layout.depth; ++d) {
    const int64_t c = static_cast<int64_t>(tuple[d]);
    if (c < 0 || c >= layout.dims[d]) return -1;
    offset += c * layout.strides[d];
  }
  return offset;
}

// --- Gathers ---------------------------------------------------------------------------------

// kGather: params [batch, outer, gather_size, inner], indices [batch, indices_per_batch],
// out [batch, outer, indices_per_batch, inner], read as `rows` output rows of `inner` elements.
struct GatherGeometry {
  int64_t batch = 1, outer = 1, gather_size = 0, inner = 1, indices_per_batch = 0;
  int64_t rows_per_batch = 0;  // outer * indices_per_batch
  int64_t rows = 0, count = 0;  // rows of out, elements of out
};

// The position in `indices` of the index that output row `row` gathers with.
VGPU_HOST_DEVICE inline int64_t GatherIndexPosition(const GatherGeometry& g, int64_t row) {
  return (row / g.rows_per_batch) * g.indices_per_batch + row % g.indices_per_batch;
}

// The row of params that output row `row` copies when its index is `index`, or -1 when the
// index is outside [0, gather_size) (the row is then zeros).
VGPU_HOST_DEVICE inline int64_t GatherSourceRow(const GatherGeometry& g, int64_t row,
                                                int64_t index) {
  if (index < 0 || index >= g.gather_size) return -1;
  const int64_t b = row / g.rows_per_batch;
  const int64_t o = (row % g.rows_per_batch) / g.indices_per_batch;
  return (b * g.outer + o) * g.gather_size + index;
}

// Buffers [params, indices, out] of params_count, indices_count and out_count elements; the
// element size is checked (1, 2, 4 or 8).
struct GatherLaunch {
  uint32_t element_size = 4;
  DType index_dtype = DType::kInt32;
  int64_t params_count = 0, indices_count = 0, out_count = 0;
  GatherGeometry g;
};
absl::StatusOr<GatherLaunch> ReadGatherLaunch(const LaunchView& launch);

// kGatherNd: buffers [params, indices, out]; params [prefix..., slice_size], indices
// [num_slices, layout.depth], out [num_slices, slice_size].
struct GatherNdLaunch {
  uint32_t element_size = 4;
  DType index_dtype = DType::kInt32;
  PrefixLayout layout;
  int64_t num_slices = 0, slice_size = 1;
  int64_t params_count = 0, indices_count = 0, out_count = 0;
};
absl::StatusOr<GatherNdLaunch> ReadGatherNdLaunch(const LaunchView& launch);

// --- Scatters --------------------------------------------------------------------------------

// Fails unless `op` is a ScatterOp and one that `dtype` takes (bool: assign, add, min, max).
absl::Status CheckScatterOp(sparse::ScatterOp op, DType dtype);

// fn(T{}) for the dtypes a scatter takes: Dispatch::All (an executor's DTypeDispatch) but uint8.
template <typename Dispatch, typename Fn>
absl::Status DispatchScatterTypes(DType dtype, Fn&& fn) {
  if (dtype == DType::kUInt8) {
    return absl::InvalidArgumentError("uint8 scatters are not supported");
  }
  return Dispatch::All(dtype, fn);
}

// The element offset of the destination row of a row scatter's index `row`, or -1 (skipped)
// when it is outside [0, rows).
VGPU_HOST_DEVICE inline int64_t ScatterRowDestination(int64_t row, int64_t rows, int64_t inner) {
  return row < 0 || row >= rows ? -1 : row * inner;
}

// The update of element p by u under a scatter op, for the numeric element types of every
// executor (bool's rules, or for add and max and and for min, are the executors': their bool
// types differ). Min and max are Eigen's cwiseMin / cwiseMax (u < p ? u : p, p < u ? u : p, as
// TensorFlow's CPU functors); integers wrap (two's complement) and a signed division by -1
// negates, wrapping, instead of trapping. An integer division by zero is refused before any
// update is applied (ScatterDivisionByZero); should one get here, p is kept.
template <typename T>
VGPU_HOST_DEVICE inline T ScatterUpdate(sparse::ScatterOp op, T p, T u) {
  using sparse::ScatterOp;
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case ScatterOp::kAssign: return u;
      case ScatterOp::kAdd: return WrapAdd(p, u);
      case ScatterOp::kSub: return WrapSub(p, u);
      case ScatterOp::kMul: return WrapMul(p, u);
      case ScatterOp::kDiv:
        if (std::is_signed_v<T> && u == static_cast<T>(-1)) return WrapNegate(p);
        return u == T(0) ? p : p / u;
      case ScatterOp::kMin: return u < p ? u : p;
      case ScatterOp::kMax: return p < u ? u : p;
    }
  } else {
    switch (op) {
      case ScatterOp::kAssign: return u;
      case ScatterOp::kAdd: return p + u;
      case ScatterOp::kSub: return p - u;
      case ScatterOp::kMul: return p * u;
      case ScatterOp::kDiv: return p / u;
      case ScatterOp::kMin: return u < p ? u : p;
      case ScatterOp::kMax: return p < u ? u : p;
    }
  }
  return p;
}

// The error of a scatter whose applied updates divide an integer by zero (nothing is written).
absl::Status ScatterDivisionByZero();

// kScatter: buffers [params, indices, updates]; updates hold updates_count elements (1 when
// scalar).
struct ScatterLaunch {
  sparse::ScatterParams p;
  bool scalar = false;
  int64_t target_count = 0, indices_count = 0, updates_count = 0;  // target: params
};
absl::StatusOr<ScatterLaunch> ReadScatterLaunch(const LaunchView& launch);

// kScatterNd: buffers [output, indices, updates]; index_depth is 1..kMaxIndexDepth.
struct ScatterNdLaunch {
  sparse::ScatterNdParams p;
  PrefixLayout layout;
  int64_t target_count = 0, indices_count = 0, updates_count = 0;  // target: output
};
absl::StatusOr<ScatterNdLaunch> ReadScatterNdLaunch(const LaunchView& launch);

// --- Segment reductions ----------------------------------------------------------------------

// kSegmentReduce: buffers [data, segment_ids, output]; a known SegmentOp.
struct SegmentReduceLaunch {
  sparse::SegmentReduceParams p;
  int64_t data_count = 0, output_count = 0;
};
absl::StatusOr<SegmentReduceLaunch> ReadSegmentReduceLaunch(const LaunchView& launch);

// One step of a segment reduction, TensorFlow's reduction functors: output = f(data, output)
// (max: data < output ? output : data, min: output < data ? output : data; sum and mean add;
// integers wrap), for the numeric element types of every executor.
template <typename T>
VGPU_HOST_DEVICE inline T SegmentReduceStep(sparse::SegmentOp op, T data, T output) {
  using sparse::SegmentOp;
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case SegmentOp::kProd: return WrapMul(output, data);
      case SegmentOp::kMax: return data < output ? output : data;
      case SegmentOp::kMin: return output < data ? output : data;
      default: return WrapAdd(output, data);
    }
  } else {
    switch (op) {
      case SegmentOp::kProd: return output * data;
      case SegmentOp::kMax: return data < output ? output : data;
      case SegmentOp::kMin: return output < data ? output : data;
      default: return output + data;
    }
  }
}

// The mean of a segment from its sum and its row count held in T. A count that T holds as 0 (a
// uint8 count of a multiple of 256 rows wraps) keeps the sum: an integer division by zero would
// trap (and stop a CPU executor's process).
template <typename T>
VGPU_HOST_DEVICE inline T SegmentMean(T sum, T rows) {
  if constexpr (std::is_integral_v<T>) {
    if (rows == T(0)) return sum;
  }
  return sum / rows;
}

// The segment of segment id `id`, or -1 (the row is dropped) when outside [0, num_segments).
VGPU_HOST_DEVICE inline int64_t SegmentOf(int64_t id, int64_t num_segments) {
  return id < 0 || id >= num_segments ? -1 : id;
}

// --- Count true and where --------------------------------------------------------------------

// kCountTrue and kWhere: buffers [input, count or coordinates]; the input of dims[0, rank).
struct WhereGeometry {
  int32_t rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t total = 0;     // elements of the input
  int64_t num_true = 0;  // kWhere: the coordinate rows to write
};

// Writes the row-major coordinates of flat input index `flat` to out[0, rank).
VGPU_HOST_DEVICE inline void WriteCoordinates(const WhereGeometry& g, int64_t flat,
                                              int64_t* out) {
  for (int d = g.rank - 1; d >= 0; --d) {
    out[d] = flat % g.dims[d];
    flat /= g.dims[d];
  }
}

struct CountTrueLaunch {
  DType dtype = DType::kBool;
  WhereGeometry g;
};
absl::StatusOr<CountTrueLaunch> ReadCountTrueLaunch(const LaunchView& launch);

// kWhere also sizes its coordinates: num_true * rank int64 values.
struct WhereLaunch {
  DType dtype = DType::kBool;
  WhereGeometry g;
  int64_t coordinate_count = 0;
};
absl::StatusOr<WhereLaunch> ReadWhereLaunch(const LaunchView& launch);

// kWhere's rule on what its kernel finds: the input holds exactly g.num_true true elements.
// InvalidArgument saying whether `found` true elements are more or fewer; OK when equal.
absl::Status CheckTrueElements(const WhereGeometry& g, int64_t found);

// --- Typed buffers ---------------------------------------------------------------------------
// Each With*Buffers below dispatches on a read launch's dtypes with an executor's DTypeDispatch
// (`Dispatch`), takes the launch's buffers from the executor's launch context with the counts
// read (LaunchContext::Buffer checks sizes and alignment) and calls fn with the typed pointers,
// returning what fn returns. The dispatches and buffers come in one order for every executor:
// the index dtype, the indices, the element dtype, the other buffers.

// A gather's (GatherLaunch, GatherNdLaunch): fn(const Index* indices, const uint8_t* params,
// uint8_t* out).
template <typename Dispatch, typename Context, typename Launch, typename Fn>
absl::Status WithGatherBuffers(const Context& context, const Launch& launch, Fn&& fn) {
  return Dispatch::Index(launch.index_dtype, [&](auto zero) -> absl::Status {
    using Index = decltype(zero);
    const uint64_t esize = launch.element_size;
    VGPU_ASSIGN_OR_RETURN(const Index* indices,
                          context.template Buffer<const Index>(1, launch.indices_count));
    VGPU_ASSIGN_OR_RETURN(const uint8_t* params,
                          context.template Buffer<const uint8_t>(0, launch.params_count * esize));
    VGPU_ASSIGN_OR_RETURN(uint8_t* out,
                          context.template Buffer<uint8_t>(2, launch.out_count * esize));
    return fn(indices, params, out);
  });
}

// A scatter's (ScatterLaunch, ScatterNdLaunch; dtypes as DispatchScatterTypes):
// fn(const Index* indices, T* target, const T* updates).
template <typename Dispatch, typename Context, typename Launch, typename Fn>
absl::Status WithScatterBuffers(const Context& context, const Launch& launch, Fn&& fn) {
  return Dispatch::Index(launch.p.index_dtype, [&](auto index_zero) -> absl::Status {
    using Index = decltype(index_zero);
    VGPU_ASSIGN_OR_RETURN(const Index* indices,
                          context.template Buffer<const Index>(1, launch.indices_count));
    return DispatchScatterTypes<Dispatch>(launch.p.dtype, [&](auto zero) -> absl::Status {
      using T = decltype(zero);
      VGPU_ASSIGN_OR_RETURN(T * target, context.template Buffer<T>(0, launch.target_count));
      VGPU_ASSIGN_OR_RETURN(const T* updates,
                            context.template Buffer<const T>(2, launch.updates_count));
      return fn(indices, target, updates);
    });
  });
}

// A segment reduction's (numeric dtypes): fn(const Index* ids, const T* data, T* output).
template <typename Dispatch, typename Context, typename Fn>
absl::Status WithSegmentReduceBuffers(const Context& context, const SegmentReduceLaunch& launch,
                                      Fn&& fn) {
  return Dispatch::Index(launch.p.index_dtype, [&](auto index_zero) -> absl::Status {
    using Index = decltype(index_zero);
    VGPU_ASSIGN_OR_RETURN(const Index* ids,
                          context.template Buffer<const Index>(1, launch.p.num_ids));
    return Dispatch::Numeric(launch.p.dtype, [&](auto zero) -> absl::Status {
      using T = decltype(zero);
      VGPU_ASSIGN_OR_RETURN(const T* data,
                            context.template Buffer<const T>(0, launch.data_count));
      VGPU_ASSIGN_OR_RETURN(T * output, context.template Buffer<T>(2, launch.output_count));
      return fn(ids, data, output);
    });
  });
}

// Count true's and where's (every dtype): fn(const T* input, int64_t* out), out holding
// `out_count` values (the count: 1; the coordinates: WhereLaunch::coordinate_count).
template <typename Dispatch, typename Context, typename Fn>
absl::Status WithWhereBuffers(const Context& context, DType dtype, const WhereGeometry& g,
                              int64_t out_count, Fn&& fn) {
  return Dispatch::All(dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* input, context.template Buffer<const T>(0, g.total));
    VGPU_ASSIGN_OR_RETURN(int64_t * out, context.template Buffer<int64_t>(1, out_count));
    return fn(input, out);
  });
}

// A where's work on an executor: find(const T* input, int64_t* out) writes the coordinates of
// the input's true elements (never more than g.num_true rows) and returns how many true elements
// it found, at least up to one more than g.num_true; the launch then holds kWhere's count rule
// (CheckTrueElements). Returns find's error, or the count rule's.
template <typename Dispatch, typename Context, typename Find>
absl::Status RunWhere(const Context& context, const WhereLaunch& launch, Find&& find) {
  return WithWhereBuffers<Dispatch>(context, launch.dtype, launch.g, launch.coordinate_count,
                                    [&](const auto* input, int64_t* out) -> absl::Status {
    VGPU_ASSIGN_OR_RETURN(const int64_t found, find(input, out));
    return CheckTrueElements(launch.g, found);
  });
}

}  // namespace vgpu::sparse_launch

#endif  // VGPU_BACKEND_LAUNCH_SPARSE_LAUNCH_H_
