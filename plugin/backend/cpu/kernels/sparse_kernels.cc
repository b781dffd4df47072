// The sparse family (protocol/kernels/sparse.h) on the CPU backing executor: gathers, scatters
// and segment reductions. Every kernel validates its parameter block against the buffers it was
// given (counts with overflow-checked arithmetic, every index checked before it is used), so a
// hostile launch can fail but never read or write outside its buffers.
//
// Work is split so that results do not depend on the thread count: gathers split over output
// rows; scatters split over columns, each worker applying every update of its columns in index
// order; segment reductions split over segments, each worker reducing the rows of its segments
// in row order; Where counts in parallel and writes coordinates in one ordered pass. Duplicate indices therefore combine in the same order as in TensorFlow's serial
// CPU kernels.
#define EIGEN_USE_THREADS

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/sparse.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

using sparse::ScatterOp;
using sparse::SegmentOp;

absl::Status CheckElementSize(uint32_t size) {
  if (size == 1 || size == 2 || size == 4 || size == 8) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("element size ", size, " is not 1, 2, 4 or 8"));
}

// Reads the array<int64> of `depth` dimension sizes that follows a parameter struct.
absl::StatusOr<std::vector<int64_t>> ReadPrefixDims(ParamReader& reader, uint32_t depth) {
  if (depth > static_cast<uint32_t>(sparse::kMaxIndexDepth)) {
    return absl::InvalidArgumentError(absl::StrCat("index depth ", depth, " exceeds ",
                                                   sparse::kMaxIndexDepth));
  }
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                        reader.GetArray<int64_t>(sparse::kMaxIndexDepth));
  if (dims.size() != depth) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefix_dims has ", dims.size(), " entries, expected ", depth));
  }
  return dims;
}

// Row-major strides (in slices) of the prefix dimensions, and their element count.
struct PrefixLayout {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  int64_t count = 1;
};

absl::StatusOr<PrefixLayout> LayoutOf(std::vector<int64_t> dims) {
  PrefixLayout layout;
  layout.strides.assign(dims.size(), 1);
  layout.count = 1;
  for (int64_t d : dims) {
    VGPU_ASSIGN_OR_RETURN(layout.count, CheckedProduct({layout.count, d}, "prefix"));
  }
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) {
    layout.strides[i] = layout.strides[i + 1] * dims[i + 1];
  }
  layout.dims = std::move(dims);
  return layout;
}

// The slice offset (in slices) addressed by the index tuple at `tuple`, or -1 if a coordinate
// is outside its dimension.
template <typename Index>
int64_t SliceOffset(const PrefixLayout& layout, const Index* tuple) {
  int64_t offset = 0;
  for (size_t d = 0; d < layout.dims.size(); ++d) {
    const int64_t c = static_cast<int64_t>(tuple[d]);
    if (c < 0 || c >= layout.dims[d]) return -1;
    offset += c * layout.strides[d];
  }
  return offset;
}

Eigen::TensorOpCost CopyCost(double bytes) { return Eigen::TensorOpCost(bytes, bytes, 0); }

// ---------------------------------------------------------------------------------------------
// Gathers

// sparse::kGather.
absl::Status Gather(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(sparse::GatherParams p, reader.Get<sparse::GatherParams>());
  VGPU_RETURN_IF_ERROR(CheckElementSize(p.element_size));
  VGPU_ASSIGN_OR_RETURN(const int64_t params_count,
                        CheckedProduct({p.batch, p.outer, p.gather_size, p.inner}, "params"));
  VGPU_ASSIGN_OR_RETURN(const int64_t indices_count,
                        CheckedProduct({p.batch, p.indices_per_batch}, "indices"));
  VGPU_ASSIGN_OR_RETURN(const int64_t rows,
                        CheckedProduct({p.batch, p.outer, p.indices_per_batch}, "output"));
  VGPU_ASSIGN_OR_RETURN(const int64_t out_count, CheckedProduct({rows, p.inner}, "output"));
  const size_t esize = p.element_size;
  return Dispatch::Index(p.index_dtype, [&](auto zero) -> absl::Status {
    using Index = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const Index* indices, context.Buffer<const Index>(1, indices_count));
    VGPU_ASSIGN_OR_RETURN(const uint8_t* params,
                          context.Buffer<const uint8_t>(0, params_count * esize));
    VGPU_ASSIGN_OR_RETURN(uint8_t* out, context.Buffer<uint8_t>(2, out_count * esize));
    if (out_count == 0) return absl::OkStatus();
    const size_t row_bytes = static_cast<size_t>(p.inner) * esize;
    const int64_t rows_per_batch = p.outer * p.indices_per_batch;  // > 0: out_count > 0
    context.device->parallelFor(rows, CopyCost(static_cast<double>(row_bytes)),
                                [&](Eigen::Index begin, Eigen::Index end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t b = r / rows_per_batch;
        const int64_t o = (r % rows_per_batch) / p.indices_per_batch;
        const int64_t i = r % p.indices_per_batch;
        const int64_t index = static_cast<int64_t>(indices[b * p.indices_per_batch + i]);
        uint8_t* dst = out + r * row_bytes;
        if (index < 0 || index >= p.gather_size) {
          std::memset(dst, 0, row_bytes);
        } else {
          std::memcpy(dst, params + ((b * p.outer + o) * p.gather_size + index) * row_bytes,
                      row_bytes);
        }
      }
    });
    return absl::OkStatus();
  });
}

// sparse::kGatherNd.
absl::Status GatherNd(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(sparse::GatherNdParams p, reader.Get<sparse::GatherNdParams>());
  VGPU_RETURN_IF_ERROR(CheckElementSize(p.element_size));
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> prefix, ReadPrefixDims(reader, p.index_depth));
  VGPU_ASSIGN_OR_RETURN(PrefixLayout layout, LayoutOf(std::move(prefix)));
  VGPU_ASSIGN_OR_RETURN(const int64_t params_count,
                        CheckedProduct({layout.count, p.slice_size}, "params"));
  VGPU_ASSIGN_OR_RETURN(const int64_t indices_count,
                        CheckedProduct({p.num_slices, p.index_depth}, "indices"));
  VGPU_ASSIGN_OR_RETURN(const int64_t out_count,
                        CheckedProduct({p.num_slices, p.slice_size}, "output"));
  const size_t esize = p.element_size;
  return Dispatch::Index(p.index_dtype, [&](auto zero) -> absl::Status {
    using Index = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const Index* indices, context.Buffer<const Index>(1, indices_count));
    VGPU_ASSIGN_OR_RETURN(const uint8_t* params,
                          context.Buffer<const uint8_t>(0, params_count * esize));
    VGPU_ASSIGN_OR_RETURN(uint8_t* out, context.Buffer<uint8_t>(2, out_count * esize));
    if (out_count == 0) return absl::OkStatus();
    const size_t slice_bytes = static_cast<size_t>(p.slice_size) * esize;
    context.device->parallelFor(p.num_slices, CopyCost(static_cast<double>(slice_bytes)),
                                [&](Eigen::Index begin, Eigen::Index end) {
      for (int64_t n = begin; n < end; ++n) {
        const int64_t offset = SliceOffset(layout, indices + n * p.index_depth);
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

// The element update of a scatter op. Min and max follow Eigen's cwiseMin/cwiseMax as
// TensorFlow's CPU functors use them; an integer division by -1 wraps instead of trapping; bool
// adds as TensorFlow's bool arithmetic does (or).
template <typename T>
T Combine(ScatterOp op, T p, T u) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case ScatterOp::kAssign: return u;
      case ScatterOp::kMin: return p && u;
      default: return p || u;  // kAdd, kMax (others refused before)
    }
  } else {
    switch (op) {
      case ScatterOp::kAssign: return u;
      case ScatterOp::kAdd: return p + u;
      case ScatterOp::kSub: return p - u;
      case ScatterOp::kMul: return p * u;
      case ScatterOp::kDiv:
        if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
          if (u == T(-1)) return static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(p));
        }
        return p / u;  // integer zeros rejected before
      case ScatterOp::kMin: return u < p ? u : p;
      case ScatterOp::kMax: return p < u ? u : p;
    }
    return p;
  }
}

absl::Status CheckScatterOp(ScatterOp op, DType dtype) {
  if (static_cast<uint32_t>(op) > static_cast<uint32_t>(ScatterOp::kMax)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown scatter op ", static_cast<uint32_t>(op)));
  }
  if (dtype == DType::kBool && op != ScatterOp::kAssign && op != ScatterOp::kAdd &&
      op != ScatterOp::kMin && op != ScatterOp::kMax) {
    return absl::InvalidArgumentError("bool scatters can only assign, add, min or max");
  }
  return absl::OkStatus();
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
        if (src[c] == T(0)) {
          return absl::InvalidArgumentError("integer division by zero in a scatter update");
        }
      }
    }
  }
  return absl::OkStatus();
}

// Invokes fn(T{}) for the dtypes a scatter accepts.
template <typename Fn>
absl::Status DispatchScatter(DType dtype, Fn&& fn) {
  if (dtype == DType::kUInt8) {
    return absl::InvalidArgumentError("uint8 scatters are not supported");
  }
  return Dispatch::All(dtype, fn);
}

// sparse::kScatter.
absl::Status Scatter(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(sparse::ScatterParams p, reader.Get<sparse::ScatterParams>());
  VGPU_RETURN_IF_ERROR(CheckScatterOp(p.op, p.dtype));
  VGPU_ASSIGN_OR_RETURN(const int64_t params_count, CheckedProduct({p.rows, p.inner}, "params"));
  VGPU_ASSIGN_OR_RETURN(const int64_t indices_count, CheckedProduct({p.num_indices}, "indices"));
  const bool scalar = p.scalar_update != 0;
  VGPU_ASSIGN_OR_RETURN(const int64_t updates_count,
                        scalar ? CheckedProduct({1}, "updates")
                               : CheckedProduct({p.num_indices, p.inner}, "updates"));
  return Dispatch::Index(p.index_dtype, [&](auto index_zero) -> absl::Status {
    using Index = decltype(index_zero);
    VGPU_ASSIGN_OR_RETURN(const Index* indices, context.Buffer<const Index>(1, indices_count));
    return DispatchScatter(p.dtype, [&](auto zero) -> absl::Status {
      using T = decltype(zero);
      VGPU_ASSIGN_OR_RETURN(T* params, context.Buffer<T>(0, params_count));
      VGPU_ASSIGN_OR_RETURN(const T* updates, context.Buffer<const T>(2, updates_count));
      if (indices_count == 0 || p.inner == 0) return absl::OkStatus();
      std::vector<int64_t> destination(static_cast<size_t>(indices_count));
      for (int64_t i = 0; i < indices_count; ++i) {
        const int64_t row = static_cast<int64_t>(indices[i]);
        destination[i] = row < 0 || row >= p.rows ? -1 : row * p.inner;
      }
      VGPU_RETURN_IF_ERROR(CheckDivisors(p.op, destination, updates, scalar, p.inner));
      ApplyScatter(*context.device, p.op, params, destination, updates, scalar, p.inner);
      return absl::OkStatus();
    });
  });
}

// sparse::kScatterNd.
absl::Status ScatterNd(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(sparse::ScatterNdParams p, reader.Get<sparse::ScatterNdParams>());
  VGPU_RETURN_IF_ERROR(CheckScatterOp(p.op, p.dtype));
  if (p.index_depth < 1) return absl::InvalidArgumentError("index depth must be at least 1");
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> prefix, ReadPrefixDims(reader, p.index_depth));
  VGPU_ASSIGN_OR_RETURN(PrefixLayout layout, LayoutOf(std::move(prefix)));
  VGPU_ASSIGN_OR_RETURN(const int64_t output_count,
                        CheckedProduct({layout.count, p.slice_size}, "output"));
  VGPU_ASSIGN_OR_RETURN(const int64_t indices_count,
                        CheckedProduct({p.num_updates, p.index_depth}, "indices"));
  VGPU_ASSIGN_OR_RETURN(const int64_t updates_count,
                        CheckedProduct({p.num_updates, p.slice_size}, "updates"));
  return Dispatch::Index(p.index_dtype, [&](auto index_zero) -> absl::Status {
    using Index = decltype(index_zero);
    VGPU_ASSIGN_OR_RETURN(const Index* indices, context.Buffer<const Index>(1, indices_count));
    return DispatchScatter(p.dtype, [&](auto zero) -> absl::Status {
      using T = decltype(zero);
      VGPU_ASSIGN_OR_RETURN(T* output, context.Buffer<T>(0, output_count));
      VGPU_ASSIGN_OR_RETURN(const T* updates, context.Buffer<const T>(2, updates_count));
      if (p.zero_output != 0 && output_count > 0) {
        FlatMap<T>(output, output_count).device(*context.device) =
            FlatMap<T>(output, output_count).constant(T(0));
      }
      if (p.num_updates == 0 || p.slice_size == 0) return absl::OkStatus();
      std::vector<int64_t> destination(static_cast<size_t>(p.num_updates));
      for (int64_t n = 0; n < p.num_updates; ++n) {
        const int64_t offset = SliceOffset(layout, indices + n * p.index_depth);
        destination[n] = offset < 0 ? -1 : offset * p.slice_size;
      }
      VGPU_RETURN_IF_ERROR(CheckDivisors(p.op, destination, updates, false, p.slice_size));
      ApplyScatter(*context.device, p.op, output, destination, updates, false, p.slice_size);
      return absl::OkStatus();
    });
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

// TensorFlow's reduction functors: output = f(data, output).
template <typename T>
T Reduce(SegmentOp op, T data, T output) {
  switch (op) {
    case SegmentOp::kProd: return output * data;
    case SegmentOp::kMax: return data < output ? output : data;  // std::max(data, output)
    case SegmentOp::kMin: return output < data ? output : data;  // std::min(data, output)
    default: return output + data;                               // sum, mean
  }
}

// sparse::kSegmentReduce.
absl::Status SegmentReduce(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(sparse::SegmentReduceParams p, reader.Get<sparse::SegmentReduceParams>());
  if (static_cast<uint32_t>(p.op) > static_cast<uint32_t>(SegmentOp::kMean)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown segment op ", static_cast<uint32_t>(p.op)));
  }
  VGPU_ASSIGN_OR_RETURN(const int64_t data_count, CheckedProduct({p.num_ids, p.inner}, "data"));
  VGPU_ASSIGN_OR_RETURN(const int64_t output_count,
                        CheckedProduct({p.num_segments, p.inner}, "output"));
  return Dispatch::Index(p.index_dtype, [&](auto index_zero) -> absl::Status {
    using Index = decltype(index_zero);
    VGPU_ASSIGN_OR_RETURN(const Index* ids, context.Buffer<const Index>(1, p.num_ids));
    return Dispatch::Numeric(p.dtype, [&](auto zero) -> absl::Status {
      using T = decltype(zero);
      VGPU_ASSIGN_OR_RETURN(const T* data, context.Buffer<const T>(0, data_count));
      VGPU_ASSIGN_OR_RETURN(T* output, context.Buffer<T>(2, output_count));
      if (output_count == 0) return absl::OkStatus();
      // The segment of every row (-1: dropped), read once.
      std::vector<int64_t> segment(static_cast<size_t>(p.num_ids));
      for (int64_t i = 0; i < p.num_ids; ++i) {
        const int64_t s = static_cast<int64_t>(ids[i]);
        segment[i] = s < 0 || s >= p.num_segments ? -1 : s;
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
          for (int64_t c = 0; c < p.inner; ++c) dst[c] = Reduce(p.op, src[c], dst[c]);
          if (p.op == SegmentOp::kMean) ++rows_in_segment[s - begin];
        }
        if (p.op == SegmentOp::kMean) {
          for (int64_t s = begin; s < end; ++s) {
            const int64_t count = rows_in_segment[s - begin];
            if (count == 0) continue;
            const T divisor = static_cast<T>(count);
            T* dst = output + s * p.inner;
            for (int64_t c = 0; c < p.inner; ++c) dst[c] = dst[c] / divisor;
          }
        }
      });
      return absl::OkStatus();
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Where

// Reads WhereParams and its dims array; returns the element count of the input.
absl::StatusOr<int64_t> ReadWhere(const KernelContext& context, sparse::WhereParams* params,
                                  std::vector<int64_t>* dims) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(*params, reader.Get<sparse::WhereParams>());
  if (params->rank > static_cast<uint32_t>(kMaxRank)) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", params->rank, " exceeds ", kMaxRank));
  }
  VGPU_ASSIGN_OR_RETURN(*dims, reader.GetArray<int64_t>(kMaxRank));
  if (dims->size() != params->rank) {
    return absl::InvalidArgumentError("dims do not match the rank");
  }
  int64_t count = 1;
  for (int64_t d : *dims) {
    VGPU_ASSIGN_OR_RETURN(count, CheckedProduct({count, d}, "input"));
  }
  return count;
}

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
  sparse::WhereParams p;
  std::vector<int64_t> dims;
  VGPU_ASSIGN_OR_RETURN(const int64_t total, ReadWhere(context, &p, &dims));
  return Dispatch::All(p.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* input, context.Buffer<const T>(0, total));
    VGPU_ASSIGN_OR_RETURN(int64_t* count, context.Buffer<int64_t>(1, 1));
    std::atomic<int64_t> found{0};
    context.device->parallelFor(total, Eigen::TensorOpCost(sizeof(T), 0, 1),
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
  sparse::WhereParams p;
  std::vector<int64_t> dims;
  VGPU_ASSIGN_OR_RETURN(const int64_t total, ReadWhere(context, &p, &dims));
  VGPU_ASSIGN_OR_RETURN(const int64_t coordinate_count,
                        CheckedProduct({p.num_true, static_cast<int64_t>(p.rank)}, "coordinates"));
  return Dispatch::All(p.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* input, context.Buffer<const T>(0, total));
    VGPU_ASSIGN_OR_RETURN(int64_t* out, context.Buffer<int64_t>(1, coordinate_count));
    int64_t written = 0;
    for (int64_t i = 0; i < total; ++i) {
      if (!IsTrue(input[i])) continue;
      if (written == p.num_true) {
        return absl::InvalidArgumentError("the input holds more true elements than num_true");
      }
      int64_t rest = i;
      for (int d = static_cast<int>(p.rank) - 1; d >= 0; --d) {
        out[written * p.rank + d] = rest % dims[d];
        rest /= dims[d];
      }
      ++written;
    }
    if (written != p.num_true) {
      return absl::InvalidArgumentError("the input holds fewer true elements than num_true");
    }
    return absl::OkStatus();
  });
}

}  // namespace
}  // namespace vgpu::cpu_kernels

namespace vgpu {

void AddSparseKernels(KernelTable& table) {
  table.Add(sparse::kGather, "gather", cpu_kernels::Gather);
  table.Add(sparse::kGatherNd, "gather_nd", cpu_kernels::GatherNd);
  table.Add(sparse::kScatter, "scatter", cpu_kernels::Scatter);
  table.Add(sparse::kScatterNd, "scatter_nd", cpu_kernels::ScatterNd);
  table.Add(sparse::kSegmentReduce, "segment_reduce", cpu_kernels::SegmentReduce);
  table.Add(sparse::kCountTrue, "count_true", cpu_kernels::CountTrue);
  table.Add(sparse::kWhere, "where", cpu_kernels::Where);
}

}  // namespace vgpu
