// CUDA kernels of the sparse family (protocol/kernels/sparse.h): gather, gather nd, scatter
// (every ScatterOp), scatter nd, segment reductions, count true and where, with the CPU
// executor's semantics (cpu/kernels/sparse_kernels.cc):
//   - gathers write zeros for an out-of-range index; scatters and segment reductions skip it;
//   - scatters apply the updates in index order: one thread per column of the destination
//     rows loops over the updates in order, exactly the CPU's split (columns over workers), so
//     duplicate indices combine in TensorFlow's serial order — deterministic, no atomics, for
//     every op (assignment: the last update wins; float add: the same sum order as the CPU).
//     The parallelism is the row width; narrow rows with many updates run long serial loops;
//   - segment reductions likewise reduce the rows of a segment in row order, one thread per
//     column (the row counts of SegmentMean are integer atomics: exact);
//   - an integer scatter division by zero (among the updates that are applied) fails the launch
//     before anything is written, as on the CPU: a check kernel sets a device flag, which the
//     host reads back synchronously (elements::ReadBack: the only wait on the GPU in this family,
//     and only for integer kDiv scatters);
//   - where's count check (num_true against the input's true elements) needs the device's
//     count too: read back the same way after the compaction (CUB DeviceSelect::If, which keeps
//     the row-major order); the coordinates are written only for the first num_true elements.
// The launch layer (launch/sparse_launch.h) reads and validates every launch on the host, as for
// the CPU executor; the kernels check their buffers before anything is enqueued.
//
// What the GPU run must confirm: every id against the CPU executor for every dtype it takes
// (floating types, int32, int64, uint8 where the CPU takes it, bool as bytes that may hold any
// nonzero value), int32 and int64 indices, duplicate and out-of-range indices, scalar updates,
// integer kDiv by zero (InvalidArgument, variable unchanged) and by -1, zero_output, where with
// num_true too large / too small (InvalidArgument), and inputs with NaN (counted true).
#include <cstdint>
#include <limits>
#include <type_traits>

#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/tabulate_output_iterator.h>

#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/element_helpers.cuh"
#include "plugin/backend/launch/element_bytes.h"
#include "plugin/backend/launch/sparse_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/sparse.h"

namespace vgpu::cuda {
namespace {

using namespace elements;  // NOLINT: the element types and functions of this family's helpers
using sparse::ScatterOp;
using sparse::SegmentOp;

using sparse_launch::GatherGeometry;
using sparse_launch::GatherIndexPosition;
using sparse_launch::GatherSourceRow;
using sparse_launch::PrefixLayout;
using sparse_launch::RunWhere;
using sparse_launch::ScatterRowDestination;
using sparse_launch::SegmentOf;
using sparse_launch::SliceOffset;
using sparse_launch::WhereGeometry;
using sparse_launch::WithGatherBuffers;
using sparse_launch::WithScatterBuffers;
using sparse_launch::WithSegmentReduceBuffers;
using sparse_launch::WithWhereBuffers;

// ---------------------------------------------------------------------------------------------
// Gathers (bytes copied, never interpreted; E from the element size and alignment)

template <typename E, typename Index>
__global__ void GatherKernel(GatherGeometry g, const E* __restrict__ params,
                             const Index* __restrict__ indices, E* __restrict__ out) {
  for (int64_t e = GridThreadIndex(); e < g.count; e += GridStride()) {
    const int64_t r = e / g.inner, c = e % g.inner;
    const int64_t index = static_cast<int64_t>(indices[GatherIndexPosition(g, r)]);
    const int64_t source = GatherSourceRow(g, r, index);
    out[e] = source < 0 ? E{} : params[source * g.inner + c];
  }
}

// The buffers of a gather launch (GatherLaunch, GatherNdLaunch) as their types:
// launch_typed(const E* params, const Index* indices, E* out) with E the element type of the
// element size and alignment; nothing for no output.
template <typename GatherLaunch, typename LaunchTyped>
absl::Status WithTypedGatherBuffers(const CudaKernelContext& context, const GatherLaunch& gather,
                                    LaunchTyped launch_typed) {
  return WithGatherBuffers<Dispatch>(context, gather, [&](auto* indices, const uint8_t* params,
                                                          uint8_t* out) -> absl::Status {
    if (gather.out_count == 0) return absl::OkStatus();
    return DispatchElementBytes(gather.element_size, {params, out}, [&](auto zero) {
      using E = decltype(zero);
      return launch_typed(reinterpret_cast<const E*>(params), indices, reinterpret_cast<E*>(out));
    });
  });
}

// The type a pointer of type P points to, without const.
template <typename P>
using Pointee = std::remove_const_t<std::remove_pointer_t<P>>;

// sparse::kGather.
absl::Status Gather(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(sparse_launch::GatherLaunch gather,
                        sparse_launch::ReadGatherLaunch(context));
  return WithTypedGatherBuffers(context, gather, [&](auto* params, auto* indices, auto* out) {
    return Launch("gather", *context.device, gather.out_count,
                  GatherKernel<Pointee<decltype(out)>, Pointee<decltype(indices)>>, gather.g,
                  params, indices, out);
  });
}

template <typename E, typename Index>
__global__ void GatherNdKernel(PrefixLayout layout, int64_t slice_size, int64_t count,
                               const E* __restrict__ params, const Index* __restrict__ indices,
                               E* __restrict__ out) {
  for (int64_t e = GridThreadIndex(); e < count; e += GridStride()) {
    const int64_t n = e / slice_size, c = e % slice_size;
    const int64_t offset = SliceOffset(layout, indices + n * layout.depth);
    out[e] = offset < 0 ? E{} : params[offset * slice_size + c];
  }
}

// sparse::kGatherNd.
absl::Status GatherNd(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(sparse_launch::GatherNdLaunch gather,
                        sparse_launch::ReadGatherNdLaunch(context));
  return WithTypedGatherBuffers(context, gather, [&](auto* params, auto* indices, auto* out) {
    return Launch("gather_nd", *context.device, gather.out_count,
                  GatherNdKernel<Pointee<decltype(out)>, Pointee<decltype(indices)>>,
                  gather.layout, gather.slice_size, gather.out_count, params, indices, out);
  });
}

// ---------------------------------------------------------------------------------------------
// Scatters

// The element update of a scatter op: bool bytes here (add and max are or, min is and, written
// as 0 or 1), the numeric types' in the launch layer (ScatterUpdate, as on the CPU).
template <typename T>
__device__ inline T Combine(ScatterOp op, T p, T u) {
  if constexpr (std::is_same_v<T, Bool8>) {
    const bool pb = p.value != 0, ub = u.value != 0;
    bool result;
    switch (op) {
      case ScatterOp::kAssign: result = ub; break;
      case ScatterOp::kMin: result = pb && ub; break;
      default: result = pb || ub; break;  // kAdd, kMax (others refused on the host)
    }
    return Bool8{static_cast<uint8_t>(result ? 1 : 0)};
  } else {
    return sparse_launch::ScatterUpdate(op, p, u);
  }
}

// destination[i] = the element offset of row indices[i], or -1 when out of [0, rows).
template <typename Index>
__global__ void RowDestinationsKernel(const Index* __restrict__ indices, int64_t count,
                                      int64_t rows, int64_t inner,
                                      int64_t* __restrict__ destination) {
  for (int64_t i = GridThreadIndex(); i < count; i += GridStride()) {
    destination[i] = ScatterRowDestination(static_cast<int64_t>(indices[i]), rows, inner);
  }
}

// destination[n] = the element offset of the slice tuple n addresses, or -1.
template <typename Index>
__global__ void SliceDestinationsKernel(PrefixLayout layout, const Index* __restrict__ indices,
                                        int64_t count, int64_t slice_size,
                                        int64_t* __restrict__ destination) {
  for (int64_t n = GridThreadIndex(); n < count; n += GridStride()) {
    const int64_t offset = SliceOffset(layout, indices + n * layout.depth);
    destination[n] = offset < 0 ? -1 : offset * slice_size;
  }
}

// Sets *flag when an applied update (destination >= 0) divides by an integer zero.
template <typename T>
__global__ void ZeroDivisorKernel(const int64_t* __restrict__ destination, int64_t updates,
                                  const T* __restrict__ values, int64_t per_update, bool scalar,
                                  unsigned int* flag) {
  const int64_t total = updates * per_update;
  for (int64_t e = GridThreadIndex(); e < total; e += GridStride()) {
    const int64_t n = e / per_update;
    if (destination[n] < 0) continue;
    if (values[scalar ? 0 : e] == T(0)) atomicOr(flag, 1u);
  }
}

// target[destination[n] + c] = Combine(target[...], update) for n in order, thread per column.
template <typename T>
__global__ void ApplyScatterKernel(ScatterOp op, T* __restrict__ target,
                                   const int64_t* __restrict__ destination, int64_t updates,
                                   const T* __restrict__ values, bool scalar, int64_t row) {
  for (int64_t c = GridThreadIndex(); c < row; c += GridStride()) {
    for (int64_t n = 0; n < updates; ++n) {
      const int64_t d = destination[n];
      if (d < 0) continue;
      const T u = scalar ? values[0] : values[n * row + c];
      target[d + c] = Combine(op, target[d + c], u);
    }
  }
}

// Fails (InvalidArgument, as the CPU's CheckDivisors) when an integer kDiv scatter would divide
// by zero in an update that is applied; nothing is written. The check runs on the device over
// the enqueued destinations, and the host waits for its flag (synchronous, integer kDiv only).
template <typename T>
absl::Status CheckDivisors(const CudaKernelContext& context, const char* name, ScatterOp op,
                           const int64_t* destination, int64_t updates, const T* values,
                           bool scalar, int64_t row) {
  if constexpr (std::is_integral_v<T>) {
    if (op != ScatterOp::kDiv) return absl::OkStatus();
    const CudaLaunchDevice& device = *context.device;
    StreamScratch flag;
    VGPU_RETURN_IF_ERROR(flag.Allocate(device.stream, sizeof(unsigned int)));
    VGPU_RETURN_IF_ERROR(CudaError(
        cudaMemsetAsync(flag.As<unsigned int>(), 0, sizeof(unsigned int), device.stream), name));
    const int64_t per_update = scalar ? 1 : row;
    VGPU_RETURN_IF_ERROR(Launch(name, device, updates * per_update, ZeroDivisorKernel<T>,
                                destination, updates, values, per_update, scalar,
                                flag.As<unsigned int>()));
    unsigned int host_flag = 0;
    VGPU_RETURN_IF_ERROR(ReadBack(device.stream, flag.As<unsigned int>(), &host_flag));
    if (host_flag != 0) return sparse_launch::ScatterDivisionByZero();
  }
  return absl::OkStatus();
}

// sparse::kScatter.
absl::Status Scatter(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(sparse_launch::ScatterLaunch scatter,
                        sparse_launch::ReadScatterLaunch(context));
  const sparse::ScatterParams& p = scatter.p;
  const int64_t indices_count = scatter.indices_count;
  return WithScatterBuffers<Dispatch>(context, scatter, [&](auto* indices, auto* params,
                                                            const auto* updates) -> absl::Status {
    using Index = std::remove_const_t<std::remove_pointer_t<decltype(indices)>>;
    using T = std::remove_pointer_t<decltype(params)>;
    if (indices_count == 0 || p.inner == 0) return absl::OkStatus();
    const CudaLaunchDevice& device = *context.device;
    StreamScratch destination;
    VGPU_RETURN_IF_ERROR(
        destination.Allocate(device.stream, static_cast<size_t>(indices_count) * 8));
    VGPU_RETURN_IF_ERROR(Launch("scatter", device, indices_count, RowDestinationsKernel<Index>,
                                indices, indices_count, p.rows, p.inner,
                                destination.As<int64_t>()));
    VGPU_RETURN_IF_ERROR(CheckDivisors<T>(context, "scatter", p.op, destination.As<int64_t>(),
                                          indices_count, updates, scatter.scalar, p.inner));
    return Launch("scatter", device, p.inner, ApplyScatterKernel<T>, p.op, params,
                  static_cast<const int64_t*>(destination.As<int64_t>()), indices_count, updates,
                  scatter.scalar, p.inner);
  });
}

// sparse::kScatterNd. (The CPU zeroes the output before it checks the integer divisors; here
// the check comes first, so a failed launch leaves the output as it was.)
absl::Status ScatterNd(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(sparse_launch::ScatterNdLaunch scatter,
                        sparse_launch::ReadScatterNdLaunch(context));
  const sparse::ScatterNdParams& p = scatter.p;
  const int64_t output_count = scatter.target_count;
  return WithScatterBuffers<Dispatch>(context, scatter, [&](auto* indices, auto* output,
                                                            const auto* updates) -> absl::Status {
    using Index = std::remove_const_t<std::remove_pointer_t<decltype(indices)>>;
    using T = std::remove_pointer_t<decltype(output)>;
    const CudaLaunchDevice& device = *context.device;
    const bool apply = p.num_updates != 0 && p.slice_size != 0;
    StreamScratch destination;
    if (apply) {
      VGPU_RETURN_IF_ERROR(
          destination.Allocate(device.stream, static_cast<size_t>(p.num_updates) * 8));
      VGPU_RETURN_IF_ERROR(Launch("scatter_nd", device, p.num_updates,
                                  SliceDestinationsKernel<Index>, scatter.layout, indices,
                                  p.num_updates, p.slice_size, destination.As<int64_t>()));
      // Checked before the zeroing: a failed launch leaves the output as it was.
      VGPU_RETURN_IF_ERROR(CheckDivisors<T>(context, "scatter_nd", p.op,
                                            destination.As<int64_t>(), p.num_updates, updates,
                                            false, p.slice_size));
    }
    if (p.zero_output != 0 && output_count > 0) {
      VGPU_RETURN_IF_ERROR(CudaError(
          cudaMemsetAsync(output, 0, static_cast<size_t>(output_count) * sizeof(T),
                          device.stream),
          "scatter_nd (zero output)"));
    }
    if (!apply) return absl::OkStatus();
    return Launch("scatter_nd", device, p.slice_size, ApplyScatterKernel<T>, p.op, output,
                  static_cast<const int64_t*>(destination.As<int64_t>()), p.num_updates, updates,
                  false, p.slice_size);
  });
}

// ---------------------------------------------------------------------------------------------
// Segment reductions

// Eigen::NumTraits<T>::lowest() / highest() for the device types.
template <typename T>
T Lowest() {
  if constexpr (std::is_same_v<T, Half>) {
    __half_raw raw;
    raw.x = 0xfbff;  // -65504
    Half h;
    h.value = __half(raw);
    return h;
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    __nv_bfloat16_raw raw;
    raw.x = 0xff7f;  // -3.3895e38
    BFloat16 b;
    b.value = __nv_bfloat16(raw);
    return b;
  } else {
    return std::numeric_limits<T>::lowest();
  }
}
template <typename T>
T Highest() {
  if constexpr (std::is_same_v<T, Half>) {
    __half_raw raw;
    raw.x = 0x7bff;  // 65504
    Half h;
    h.value = __half(raw);
    return h;
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    __nv_bfloat16_raw raw;
    raw.x = 0x7f7f;  // 3.3895e38
    BFloat16 b;
    b.value = __nv_bfloat16(raw);
    return b;
  } else {
    return std::numeric_limits<T>::max();
  }
}

template <typename T>
T EmptySegmentValue(SegmentOp op) {
  switch (op) {
    case SegmentOp::kProd: return Cast<T>(1);
    case SegmentOp::kMax: return Lowest<T>();
    case SegmentOp::kMin: return Highest<T>();
    default: return Cast<T>(0);
  }
}

template <typename T>
__global__ void FillValueKernel(T* __restrict__ out, int64_t count, T value) {
  for (int64_t i = GridThreadIndex(); i < count; i += GridStride()) out[i] = value;
}

template <typename Index>
__global__ void SegmentRowCountKernel(const Index* __restrict__ ids, int64_t num_ids,
                                      int64_t num_segments,
                                      unsigned long long* __restrict__ rows_in_segment) {
  for (int64_t i = GridThreadIndex(); i < num_ids; i += GridStride()) {
    const int64_t s = SegmentOf(static_cast<int64_t>(ids[i]), num_segments);
    if (s >= 0) atomicAdd(&rows_in_segment[s], 1ull);
  }
}

// output[s, c] = reduction of data[i, c] over i in order with ids[i] == s; thread per column.
template <typename T, typename Index>
__global__ void SegmentReduceKernel(SegmentOp op, const T* __restrict__ data,
                                    const Index* __restrict__ ids, int64_t num_ids,
                                    int64_t inner, int64_t num_segments, T* __restrict__ output) {
  for (int64_t c = GridThreadIndex(); c < inner; c += GridStride()) {
    for (int64_t i = 0; i < num_ids; ++i) {
      const int64_t s = SegmentOf(static_cast<int64_t>(ids[i]), num_segments);
      if (s < 0) continue;
      T& out = output[s * inner + c];
      out = sparse_launch::SegmentReduceStep(op, data[i * inner + c], out);
    }
  }
}

template <typename T>
__global__ void SegmentMeanKernel(T* __restrict__ output, int64_t count, int64_t inner,
                                  const unsigned long long* __restrict__ rows_in_segment) {
  for (int64_t e = GridThreadIndex(); e < count; e += GridStride()) {
    const int64_t rows = static_cast<int64_t>(rows_in_segment[e / inner]);
    if (rows == 0) continue;
    output[e] = sparse_launch::SegmentMean(output[e], Cast<T>(rows));
  }
}

// sparse::kSegmentReduce.
absl::Status SegmentReduce(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(sparse_launch::SegmentReduceLaunch reduce,
                        sparse_launch::ReadSegmentReduceLaunch(context));
  const sparse::SegmentReduceParams& p = reduce.p;
  const int64_t output_count = reduce.output_count;
  return WithSegmentReduceBuffers<Dispatch>(
      context, reduce, [&](auto* ids, const auto* data, auto* output) -> absl::Status {
    using Index = std::remove_const_t<std::remove_pointer_t<decltype(ids)>>;
    using T = std::remove_pointer_t<decltype(output)>;
    if (output_count == 0) return absl::OkStatus();
    const CudaLaunchDevice& device = *context.device;
    VGPU_RETURN_IF_ERROR(Launch("segment_reduce", device, output_count, FillValueKernel<T>,
                                output, output_count, EmptySegmentValue<T>(p.op)));
    if (p.num_ids == 0) return absl::OkStatus();
    VGPU_RETURN_IF_ERROR(Launch("segment_reduce", device, p.inner, SegmentReduceKernel<T, Index>,
                                p.op, data, ids, p.num_ids, p.inner, p.num_segments, output));
    if (p.op != SegmentOp::kMean) return absl::OkStatus();
    StreamScratch rows;
    const size_t rows_bytes = static_cast<size_t>(p.num_segments) * sizeof(unsigned long long);
    VGPU_RETURN_IF_ERROR(rows.Allocate(device.stream, rows_bytes));
    VGPU_RETURN_IF_ERROR(CudaError(
        cudaMemsetAsync(rows.As<unsigned long long>(), 0, rows_bytes, device.stream),
        "segment_reduce (row counts)"));
    VGPU_RETURN_IF_ERROR(Launch("segment_reduce", device, p.num_ids,
                                SegmentRowCountKernel<Index>, ids, p.num_ids, p.num_segments,
                                rows.As<unsigned long long>()));
    return Launch("segment_reduce", device, output_count, SegmentMeanKernel<T>, output,
                  output_count, p.inner,
                  static_cast<const unsigned long long*>(rows.As<unsigned long long>()));
  });
}

// ---------------------------------------------------------------------------------------------
// Count true and where

// Nonzero is true; NaN is true; bool bytes: any nonzero byte.
template <typename T>
__device__ inline bool IsTrue(T value) {
  if constexpr (std::is_same_v<T, Bool8>) {
    return value.value != 0;
  } else if constexpr (kIs16BitFloat<T>) {
    return !(value.ToFloat() == 0.0f);
  } else {
    return !(value == T(0));
  }
}

template <typename T>
__global__ void CountTrueKernel(const T* __restrict__ input, int64_t total,
                                unsigned long long* __restrict__ count) {
  unsigned long long local = 0;
  for (int64_t i = GridThreadIndex(); i < total; i += GridStride()) {
    local += IsTrue(input[i]) ? 1 : 0;
  }
  if (local != 0) atomicAdd(count, local);
}

// sparse::kCountTrue.
absl::Status CountTrue(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(sparse_launch::CountTrueLaunch launch,
                        sparse_launch::ReadCountTrueLaunch(context));
  const int64_t total = launch.g.total;
  return WithWhereBuffers<Dispatch>(context, launch.dtype, launch.g, 1,
                                    [&](const auto* input, int64_t* count) -> absl::Status {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(input)>>;
    const CudaLaunchDevice& device = *context.device;
    VGPU_RETURN_IF_ERROR(CudaError(cudaMemsetAsync(count, 0, sizeof(int64_t), device.stream),
                                   "count_true"));
    if (total == 0) return absl::OkStatus();
    return Launch("count_true", device, total, CountTrueKernel<T>, input, total,
                  reinterpret_cast<unsigned long long*>(count));
  });
}

// The selection predicate of Where: element i of the input is true.
template <typename T>
struct TrueAt {
  const T* input;
  __device__ bool operator()(int64_t i) const { return IsTrue(input[i]); }
};

// Writes the row-major coordinates of flat index `flat` as coordinate row `position`, for the
// first num_true positions only (a launch with too small a num_true fails after the count).
struct CoordinateWriter {
  int64_t* out;
  WhereGeometry g;
  __device__ void operator()(int64_t position, int64_t flat) const {
    if (position < g.num_true) sparse_launch::WriteCoordinates(g, flat, out + position * g.rank);
  }
};

// sparse::kWhere.
absl::Status Where(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(sparse_launch::WhereLaunch launch, sparse_launch::ReadWhereLaunch(context));
  const WhereGeometry& g = launch.g;
  return RunWhere<Dispatch>(context, launch,
                            [&](const auto* input, int64_t* out) -> absl::StatusOr<int64_t> {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(input)>>;
    int64_t found = 0;
    if (g.total > 0) {
      const cudaStream_t stream = context.device->stream;
      const thrust::counting_iterator<int64_t> flat_indices(0);
      auto coordinates = thrust::make_tabulate_output_iterator(CoordinateWriter{out, g});
      StreamScratch selected;  // the number of true elements (int64)
      VGPU_RETURN_IF_ERROR(selected.Allocate(stream, sizeof(int64_t)));
      size_t temp_bytes = 0;
      VGPU_RETURN_IF_ERROR(CudaError(
          cub::DeviceSelect::If(nullptr, temp_bytes, flat_indices, coordinates,
                                selected.As<int64_t>(), g.total, TrueAt<T>{input}, stream),
          "where (temporary storage size)"));
      StreamScratch temp;
      VGPU_RETURN_IF_ERROR(temp.Allocate(stream, temp_bytes > 0 ? temp_bytes : 1));
      VGPU_RETURN_IF_ERROR(CudaError(
          cub::DeviceSelect::If(temp.As<void>(), temp_bytes, flat_indices, coordinates,
                                selected.As<int64_t>(), g.total, TrueAt<T>{input}, stream),
          "where"));
      // Synchronous: the launch fails unless the input holds exactly num_true true elements.
      VGPU_RETURN_IF_ERROR(ReadBack(stream, selected.As<int64_t>(), &found));
    }
    return found;
  });
}

}  // namespace

void AddCudaSparseKernels(CudaKernelTable& table) {
  table.AddFamily(kernel_families::kSparse, Gather, GatherNd, Scatter, ScatterNd, SegmentReduce,
                  CountTrue, Where);
}

}  // namespace vgpu::cuda
