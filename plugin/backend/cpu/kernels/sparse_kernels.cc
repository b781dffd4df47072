// The sparse family (protocol/kernels/sparse.h) on the CPU backing executor: gathers, scatters
// and segment reductions. The launch layer (launch/sparse_launch.h) validates every parameter
// block (counts with overflow-checked arithmetic); the kernels take their buffers with those
// counts and check every index before they use it, so a hostile launch can fail but never read
// or write outside its buffers.
//
// Work is split so that results do not depend on the thread count: gathers split over output
// rows; scatters split over columns, each worker applying every update of its columns in index
// order; segment reductions split over segments, each worker reducing the rows of its segments
// in row order; Where counts in parallel and writes coordinates in one ordered pass. Duplicate
// indices therefore combine in the same order as in TensorFlow's serial CPU kernels.
#define EIGEN_USE_THREADS

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/launch/sparse_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/sparse.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

using sparse::ScatterOp;
using sparse::SegmentOp;
using sparse_launch::GatherIndexPosition;
using sparse_launch::GatherSourceRow;
using sparse_launch::RunWhere;
using sparse_launch::ScatterRowDestination;
using sparse_launch::SegmentOf;
using sparse_launch::SliceOffset;
using sparse_launch::WithGatherBuffers;
using sparse_launch::WithScatterBuffers;
using sparse_launch::WithSegmentReduceBuffers;
using sparse_launch::WithWhereBuffers;

Eigen::TensorOpCost CopyCost(double bytes) { return Eigen::TensorOpCost(bytes, bytes, 0); }

// ---------------------------------------------------------------------------------------------
// Gathers

// sparse::kGather.
absl::Status Gather(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(sparse_launch::GatherLaunch gather,
                        sparse_launch::ReadGatherLaunch(context));
  const sparse_launch::GatherGeometry& g = gather.g;
  return WithGatherBuffers<Dispatch>(context, gather, [&](auto* indices, const uint8_t* params,
                                                          uint8_t* out) -> absl::Status {
    if (g.count == 0) return absl::OkStatus();
    const size_t row_bytes = static_cast<size_t>(g.inner) * gather.element_size;
    context.device->parallelFor(g.rows, CopyCost(static_cast<double>(row_bytes)),
                                [&](Eigen::Index begin, Eigen::Index end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t index = static_cast<int64_t>(indices[GatherIndexPosition(g, r)]);
        const int64_t source = GatherSourceRow(g, r, index);
        uint8_t* dst = out + r * row_bytes;
        if (source < 0) {
          std::memset(dst, 0, row_bytes);
        } else {
          std::memcpy(dst, params + source * row_bytes, row_bytes);
        }
      }
    });
    return absl::OkStatus();
  });
}

// sparse::kGatherNd.
absl::Status GatherNd(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(sparse_launch::GatherNdLaunch gather,
                        sparse_launch::ReadGatherNdLaunch(context));
  return WithGatherBuffers<Dispatch>(context, gather, [&](auto* indices, const uint8_t* params,
                                                          uint8_t* out) -> absl::Status {
    if (gather.out_count == 0) return absl::OkStatus();
    const size_t slice_bytes = static_cast<size_t>(gather.slice_size) * gather.element_size;
    const int64_t depth = gather.layout.depth;
    context.device->parallelFor(gather.num_slices, CopyCost(static_cast<double>(slice_bytes)),
                                [&](Eigen::Index begin, Eigen::Index end) {
      for (int64_t n = begin; n < end; ++n) {
        const int64_t offset = SliceOffset(gather.layout, indices + n * depth);
        uint8_t* dst = out + n * slice_bytes;
        if (offset < 0) {
          std::memset(dst, 0, slice_bytes);
        } else {
          std::memcpy(dst, params + offset * slice_bytes, slice_bytes);
        }
      }
    });
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------------------------
// Scatters

// The element update of a scatter op: bool's here (add and max are or, min is and, as
// TensorFlow's bool arithmetic), the numeric types' in the launch layer (ScatterUpdate).
template <typename T>
T Combine(ScatterOp op, T p, T u) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case ScatterOp::kAssign: return u;
      case ScatterOp::kMin: return p && u;
      default: return p || u;  // kAdd, kMax (others refused before)
    }
  } else {
    return sparse_launch::ScatterUpdate(op, p, u);
  }
}

// Applies update rows to destination rows, in update order. `destination[n]` is the element
// offset of update n's destination row, or -1 to skip it; `updates` holds `row` elements per
// update, or one element for all (`scalar`). Columns are split over the pool.
template <typename T>
void ApplyScatter(const Eigen::ThreadPoolDevice& device, ScatterOp op, T* target,
                  const std::vector<int64_t>& destination, const T* updates, bool scalar,
                  int64_t row) {
  const int64_t n = static_cast<int64_t>(destination.size());
  const double per_column = static_cast<double>(n) * sizeof(T);
  device.parallelFor(row, Eigen::TensorOpCost(per_column, per_column, n),
                     [&](Eigen::Index begin, Eigen::Index end) {
    for (int64_t i = 0; i < n; ++i) {
      if (destination[i] < 0) continue;
      T* dst = target + destination[i];
      if (scalar) {
        const T u = *updates;
        for (int64_t c = begin; c < end; ++c) dst[c] = Combine(op, dst[c], u);
      } else {
        const T* src = updates + i * row;
        for (int64_t c = begin; c < end; ++c) dst[c] = Combine(op, dst[c], src[c]);
      }
    }
  });
}

// Fails if an integer division would divide by zero (only updates that are applied count).
template <typename T>
absl::Status CheckDivisors(ScatterOp op, const std::vector<int64_t>& destination,
                           const T* updates, bool scalar, int64_t row) {
  if constexpr (std::is_integral_v<T>) {
    if (op != ScatterOp::kDiv) return absl::OkStatus();
    for (size_t i = 0; i < destination.size(); ++i) {
      if (destination[i] < 0) continue;
      const T* src = scalar ? updates : updates + static_cast<int64_t>(i) * row;
      const int64_t count = scalar ? 1 : row;
      for (int64_t c = 0; c < count; ++c) {
        if (src[c] == T(0)) return sparse_launch::ScatterDivisionByZero();
      }
    }
  }
  return absl::OkStatus();
}

// sparse::kScatter.
absl::Status Scatter(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(sparse_launch::ScatterLaunch scatter,
                        sparse_launch::ReadScatterLaunch(context));
  const sparse::ScatterParams& p = scatter.p;
  return WithScatterBuffers<Dispatch>(context, scatter, [&](auto* indices, auto* params,
                                                            const auto* updates) -> absl::Status {
    if (scatter.indices_count == 0 || p.inner == 0) return absl::OkStatus();
    std::vector<int64_t> destination(static_cast<size_t>(scatter.indices_count));
    for (int64_t i = 0; i < scatter.indices_count; ++i) {
      destination[i] = ScatterRowDestination(static_cast<int64_t>(indices[i]), p.rows, p.inner);
    }
    VGPU_RETURN_IF_ERROR(CheckDivisors(p.op, destination, updates, scatter.scalar, p.inner));
    ApplyScatter(*context.device, p.op, params, destination, updates, scatter.scalar, p.inner);
    return absl::OkStatus();
  });
}

// sparse::kScatterNd.
absl::Status ScatterNd(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(sparse_launch::ScatterNdLaunch scatter,
                        sparse_launch::ReadScatterNdLaunch(context));
  const sparse::ScatterNdParams& p = scatter.p;
  return WithScatterBuffers<Dispatch>(context, scatter, [&](auto* indices, auto* output,
                                                            const auto* updates) -> absl::Status {
    using T = std::remove_pointer_t<decltype(output)>;
    const int64_t output_count = scatter.target_count;
    if (p.zero_output != 0 && output_count > 0) {
      FlatMap<T>(output, output_count).device(*context.device) =
          FlatMap<T>(output, output_count).constant(T(0));
    }
    if (p.num_updates == 0 || p.slice_size == 0) return absl::OkStatus();
    std::vector<int64_t> destination(static_cast<size_t>(p.num_updates));
    for (int64_t n = 0; n < p.num_updates; ++n) {
      const int64_t offset = SliceOffset(scatter.layout, indices + n * p.index_depth);
      destination[n] = offset < 0 ? -1 : offset * p.slice_size;
    }
    VGPU_RETURN_IF_ERROR(CheckDivisors(p.op, destination, updates, false, p.slice_size));
    ApplyScatter(*context.device, p.op, output, destination, updates, false, p.slice_size);
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------------------------
// Segment reductions

template <typename T>
T EmptySegmentValue(SegmentOp op) {
  switch (op) {
    case SegmentOp::kProd: return T(1);
    case SegmentOp::kMax: return Eigen::NumTraits<T>::lowest();
    case SegmentOp::kMin: return Eigen::NumTraits<T>::highest();
    default: return T(0);
  }
}

// sparse::kSegmentReduce.
absl::Status SegmentReduce(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(sparse_launch::SegmentReduceLaunch reduce,
                        sparse_launch::ReadSegmentReduceLaunch(context));
  const sparse::SegmentReduceParams& p = reduce.p;
  return WithSegmentReduceBuffers<Dispatch>(
      context, reduce, [&](auto* ids, const auto* data, auto* output) -> absl::Status {
    using T = std::remove_pointer_t<decltype(output)>;
    if (reduce.output_count == 0) return absl::OkStatus();
    // The segment of every row (-1: dropped), read once.
    std::vector<int64_t> segment(static_cast<size_t>(p.num_ids));
    for (int64_t i = 0; i < p.num_ids; ++i) {
      segment[i] = SegmentOf(static_cast<int64_t>(ids[i]), p.num_segments);
    }
    const double per_segment = static_cast<double>(std::max<int64_t>(
        1, p.num_ids / std::max<int64_t>(1, p.num_segments))) * p.inner;
    context.device->parallelFor(
        p.num_segments, Eigen::TensorOpCost(per_segment * sizeof(T), p.inner * sizeof(T),
                                            per_segment + p.num_ids),
        [&](Eigen::Index begin, Eigen::Index end) {
      const T empty = EmptySegmentValue<T>(p.op);
      std::fill(output + begin * p.inner, output + end * p.inner, empty);
      std::vector<int64_t> rows_in_segment(p.op == SegmentOp::kMean ? end - begin : 0, 0);
      for (int64_t i = 0; i < p.num_ids; ++i) {
        const int64_t s = segment[i];
        if (s < begin || s >= end) continue;
        const T* src = data + i * p.inner;
        T* dst = output + s * p.inner;
        for (int64_t c = 0; c < p.inner; ++c) {
          dst[c] = sparse_launch::SegmentReduceStep(p.op, src[c], dst[c]);
        }
        if (p.op == SegmentOp::kMean) ++rows_in_segment[s - begin];
      }
      if (p.op == SegmentOp::kMean) {
        for (int64_t s = begin; s < end; ++s) {
          const int64_t count = rows_in_segment[s - begin];
          if (count == 0) continue;
          const T rows = static_cast<T>(count);
          T* dst = output + s * p.inner;
          for (int64_t c = 0; c < p.inner; ++c) dst[c] = sparse_launch::SegmentMean(dst[c], rows);
        }
      }
    });
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------------------------
// Where

template <typename T>
bool IsTrue(T value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value;
  } else {
    return !(value == T(0));  // NaN is true
  }
}

// sparse::kCountTrue.
absl::Status CountTrue(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(sparse_launch::CountTrueLaunch launch,
                        sparse_launch::ReadCountTrueLaunch(context));
  return WithWhereBuffers<Dispatch>(context, launch.dtype, launch.g, 1,
                                    [&](const auto* input, int64_t* count) -> absl::Status {
    std::atomic<int64_t> found{0};
    context.device->parallelFor(launch.g.total, Eigen::TensorOpCost(sizeof(*input), 0, 1),
                                [&](Eigen::Index begin, Eigen::Index end) {
      int64_t local = 0;
      for (int64_t i = begin; i < end; ++i) local += IsTrue(input[i]) ? 1 : 0;
      found.fetch_add(local, std::memory_order_relaxed);
    });
    *count = found.load();
    return absl::OkStatus();
  });
}

// sparse::kWhere.
absl::Status Where(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(sparse_launch::WhereLaunch launch, sparse_launch::ReadWhereLaunch(context));
  const sparse_launch::WhereGeometry& g = launch.g;
  return RunWhere<Dispatch>(context, launch,
                            [&](const auto* input, int64_t* out) -> absl::StatusOr<int64_t> {
    int64_t written = 0;
    for (int64_t i = 0; i < g.total; ++i) {
      if (!IsTrue(input[i])) continue;
      // One more true element than num_true fails before it is written out of bounds.
      if (written == g.num_true) return written + 1;
      sparse_launch::WriteCoordinates(g, i, out + written * g.rank);
      ++written;
    }
    return written;
  });
}

}  // namespace

void AddSparseKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kSparse, Gather, GatherNd, Scatter, ScatterNd, SegmentReduce,
                  CountTrue, Where);
}

}  // namespace vgpu::cpu_kernels
