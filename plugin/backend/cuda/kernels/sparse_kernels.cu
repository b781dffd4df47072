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
// Every launch is parsed and its buffers checked on the host as the CPU kernel checks them.
//
// What the GPU run must confirm: every id against the CPU executor for every dtype it takes
// (floating types, int32, int64, uint8 where the CPU takes it, bool as bytes that may hold any
// nonzero value), int32 and int64 indices, duplicate and out-of-range indices, scalar updates,
// integer kDiv by zero (InvalidArgument, variable unchanged) and by -1, zero_output, where with
// num_true too large / too small (InvalidArgument), and inputs with NaN (counted true).
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/tabulate_output_iterator.h>

#include "absl/strings/str_cat.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/element_helpers.cuh"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/sparse.h"

namespace vgpu::cuda {
namespace {

using namespace elements;  // NOLINT: the element types and functions of this family's helpers
using sparse::ScatterOp;
using sparse::SegmentOp;

absl::Status CheckElementSize(uint32_t size) {
  if (size == 1 || size == 2 || size == 4 || size == 8) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("element size ", size, " is not 1, 2, 4 or 8"));
}

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

// The prefix dimensions an index tuple addresses, by value for the device.
struct PrefixLayout {
  int32_t depth = 0;
  int64_t count = 1;
  int64_t dims[sparse::kMaxIndexDepth] = {};
  int64_t strides[sparse::kMaxIndexDepth] = {};
};

absl::StatusOr<PrefixLayout> LayoutOf(const std::vector<int64_t>& dims) {
  PrefixLayout layout;
  layout.depth = static_cast<int32_t>(dims.size());
  for (int64_t d : dims) {
    VGPU_ASSIGN_OR_RETURN(layout.count, CheckedProduct({layout.count, d}, "prefix"));
  }
  for (int i = 0; i < layout.depth; ++i) layout.dims[i] = dims[i];
  if (layout.depth > 0) layout.strides[layout.depth - 1] = 1;
  for (int i = layout.depth - 2; i >= 0; --i) {
    layout.strides[i] = layout.strides[i + 1] * dims[i + 1];
  }
  return layout;
}

// The slice offset the tuple at `tuple` addresses, or -1 if a coordinate is out of range.
template <typename Index>
__device__ inline int64_t SliceOffset(const PrefixLayout& layout, const Index* tuple) {
  int64_t offset = 0;
  for (int d = 0; d < layout.depth; ++d) {
    const int64_t c = static_cast<int64_t>(tuple[d]);
    if (c < 0 || c >= layout.dims[d]) return -1;
    offset += c * layout.strides[d];
  }
  return offset;
}

// ---------------------------------------------------------------------------------------------
// Gathers (bytes copied, never interpreted; E from the element size and alignment)

struct GatherShape {
  int64_t outer, gather_size, inner, indices_per_batch;
  int64_t rows_per_batch;  // outer * indices_per_batch
  int64_t count;           // elements of out
};

template <typename E, typename Index>
__global__ void GatherKernel(GatherShape s, const E* __restrict__ params,
                             const Index* __restrict__ indices, E* __restrict__ out) {
  for (int64_t e = GridThreadIndex(); e < s.count; e += GridStride()) {
    const int64_t r = e / s.inner, c = e % s.inner;
    const int64_t b = r / s.rows_per_batch;
    const int64_t o = (r % s.rows_per_batch) / s.indices_per_batch;
    const int64_t i = r % s.indices_per_batch;
    const int64_t index = static_cast<int64_t>(indices[b * s.indices_per_batch + i]);
    if (index < 0 || index >= s.gather_size) {
      out[e] = E{};
    } else {
      out[e] = params[((b * s.outer + o) * s.gather_size + index) * s.inner + c];
    }
  }
}

// sparse::kGather.
absl::Status Gather(const CudaKernelContext& context) {
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
  return Dispatch::Index(p.index_dtype, [&](auto index_zero) -> absl::Status {
    using Index = decltype(index_zero);
    VGPU_ASSIGN_OR_RETURN(const Index* indices, context.Buffer<const Index>(1, indices_count));
    VGPU_ASSIGN_OR_RETURN(const uint8_t* params,
                          context.Buffer<const uint8_t>(0, params_count * esize));
    VGPU_ASSIGN_OR_RETURN(uint8_t* out, context.Buffer<uint8_t>(2, out_count * esize));
    if (out_count == 0) return absl::OkStatus();
    GatherShape shape;
    shape.outer = p.outer;
    shape.gather_size = p.gather_size;
    shape.inner = p.inner;
    shape.indices_per_batch = p.indices_per_batch;
    shape.rows_per_batch = p.outer * p.indices_per_batch;
    shape.count = out_count;
    return DispatchElement(esize, {params, out}, [&](auto zero) {
      using E = decltype(zero);
      return Launch("gather", *context.device, out_count, GatherKernel<E, Index>, shape,
                    reinterpret_cast<const E*>(params), indices, reinterpret_cast<E*>(out));
    });
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
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(sparse::GatherNdParams p, reader.Get<sparse::GatherNdParams>());
  VGPU_RETURN_IF_ERROR(CheckElementSize(p.element_size));
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> prefix, ReadPrefixDims(reader, p.index_depth));
  VGPU_ASSIGN_OR_RETURN(PrefixLayout layout, LayoutOf(prefix));
  VGPU_ASSIGN_OR_RETURN(const int64_t params_count,
                        CheckedProduct({layout.count, p.slice_size}, "params"));
  VGPU_ASSIGN_OR_RETURN(const int64_t indices_count,
                        CheckedProduct({p.num_slices, p.index_depth}, "indices"));
  VGPU_ASSIGN_OR_RETURN(const int64_t out_count,
                        CheckedProduct({p.num_slices, p.slice_size}, "output"));
  const size_t esize = p.element_size;
  return Dispatch::Index(p.index_dtype, [&](auto index_zero) -> absl::Status {
    using Index = decltype(index_zero);
    VGPU_ASSIGN_OR_RETURN(const Index* indices, context.Buffer<const Index>(1, indices_count));
    VGPU_ASSIGN_OR_RETURN(const uint8_t* params,
                          context.Buffer<const uint8_t>(0, params_count * esize));
    VGPU_ASSIGN_OR_RETURN(uint8_t* out, context.Buffer<uint8_t>(2, out_count * esize));
    if (out_count == 0) return absl::OkStatus();
    return DispatchElement(esize, {params, out}, [&](auto zero) {
      using E = decltype(zero);
      return Launch("gather_nd", *context.device, out_count, GatherNdKernel<E, Index>, layout,
                    p.slice_size, out_count, reinterpret_cast<const E*>(params), indices,
                    reinterpret_cast<E*>(out));
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Scatters

// The CPU's Combine: min/max as Eigen's cwiseMin/cwiseMax, integer division by -1 wrapping,
// bool add/max as or and min as and; integer arithmetic wraps (two's complement).
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
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ScatterOp::kAssign: return u;
      case ScatterOp::kAdd: return static_cast<T>(static_cast<U>(p) + static_cast<U>(u));
      case ScatterOp::kSub: return static_cast<T>(static_cast<U>(p) - static_cast<U>(u));
      case ScatterOp::kMul: return static_cast<T>(static_cast<U>(p) * static_cast<U>(u));
      case ScatterOp::kDiv:
        if (u == T(-1)) return static_cast<T>(U(0) - static_cast<U>(p));
        return u == T(0) ? p : p / u;  // zeros are refused before anything is applied
      case ScatterOp::kMin: return u < p ? u : p;
      case ScatterOp::kMax: return p < u ? u : p;
    }
    return p;
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

template <typename Fn>
absl::Status DispatchScatter(DType dtype, Fn&& fn) {
  if (dtype == DType::kUInt8) {
    return absl::InvalidArgumentError("uint8 scatters are not supported");
  }
  return Dispatch::All(dtype, fn);
}

// destination[i] = the element offset of row indices[i], or -1 when out of [0, rows).
template <typename Index>
__global__ void RowDestinationsKernel(const Index* __restrict__ indices, int64_t count,
                                      int64_t rows, int64_t inner,
                                      int64_t* __restrict__ destination) {
  for (int64_t i = GridThreadIndex(); i < count; i += GridStride()) {
    const int64_t row = static_cast<int64_t>(indices[i]);
    destination[i] = row < 0 || row >= rows ? -1 : row * inner;
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
    if (host_flag != 0) {
      return absl::InvalidArgumentError("integer division by zero in a scatter update");
    }
  }
  return absl::OkStatus();
}

// sparse::kScatter.
absl::Status Scatter(const CudaKernelContext& context) {
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
      VGPU_ASSIGN_OR_RETURN(T * params, context.Buffer<T>(0, params_count));
      VGPU_ASSIGN_OR_RETURN(const T* updates, context.Buffer<const T>(2, updates_count));
      if (indices_count == 0 || p.inner == 0) return absl::OkStatus();
      const CudaLaunchDevice& device = *context.device;
      StreamScratch destination;
      VGPU_RETURN_IF_ERROR(
          destination.Allocate(device.stream, static_cast<size_t>(indices_count) * 8));
      VGPU_RETURN_IF_ERROR(Launch("scatter", device, indices_count, RowDestinationsKernel<Index>,
                                  indices, indices_count, p.rows, p.inner,
                                  destination.As<int64_t>()));
      VGPU_RETURN_IF_ERROR(CheckDivisors<T>(context, "scatter", p.op, destination.As<int64_t>(),
                                            indices_count, updates, scalar, p.inner));
      return Launch("scatter", device, p.inner, ApplyScatterKernel<T>, p.op, params,
                    static_cast<const int64_t*>(destination.As<int64_t>()), indices_count,
                    updates, scalar, p.inner);
    });
  });
}

// sparse::kScatterNd. (The CPU zeroes the output before it checks the integer divisors; here
// the check comes first, so a failed launch leaves the output as it was.)
absl::Status ScatterNd(const CudaKernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(sparse::ScatterNdParams p, reader.Get<sparse::ScatterNdParams>());
  VGPU_RETURN_IF_ERROR(CheckScatterOp(p.op, p.dtype));
  if (p.index_depth < 1) return absl::InvalidArgumentError("index depth must be at least 1");
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> prefix, ReadPrefixDims(reader, p.index_depth));
  VGPU_ASSIGN_OR_RETURN(PrefixLayout layout, LayoutOf(prefix));
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
      VGPU_ASSIGN_OR_RETURN(T * output, context.Buffer<T>(0, output_count));
      VGPU_ASSIGN_OR_RETURN(const T* updates, context.Buffer<const T>(2, updates_count));
      const CudaLaunchDevice& device = *context.device;
      const bool apply = p.num_updates != 0 && p.slice_size != 0;
      StreamScratch destination;
      if (apply) {
        VGPU_RETURN_IF_ERROR(
            destination.Allocate(device.stream, static_cast<size_t>(p.num_updates) * 8));
        VGPU_RETURN_IF_ERROR(Launch("scatter_nd", device, p.num_updates,
                                    SliceDestinationsKernel<Index>, layout, indices,
                                    p.num_updates, p.slice_size, destination.As<int64_t>()));
      }
      // Checked before the zeroing: a failed launch leaves the output as it was.
      if (apply) {
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
                    static_cast<const int64_t*>(destination.As<int64_t>()), p.num_updates,
                    updates, false, p.slice_size);
    });
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

// TensorFlow's reduction functors: output = f(data, output); integers wrap.
template <typename T>
__device__ inline T Reduce(SegmentOp op, T data, T output) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case SegmentOp::kProd: return static_cast<T>(static_cast<U>(output) * static_cast<U>(data));
      case SegmentOp::kMax: return data < output ? output : data;
      case SegmentOp::kMin: return output < data ? output : data;
      default: return static_cast<T>(static_cast<U>(output) + static_cast<U>(data));
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

template <typename T>
__global__ void FillValueKernel(T* __restrict__ out, int64_t count, T value) {
  for (int64_t i = GridThreadIndex(); i < count; i += GridStride()) out[i] = value;
}

template <typename Index>
__global__ void SegmentRowCountKernel(const Index* __restrict__ ids, int64_t num_ids,
                                      int64_t num_segments,
                                      unsigned long long* __restrict__ rows_in_segment) {
  for (int64_t i = GridThreadIndex(); i < num_ids; i += GridStride()) {
    const int64_t s = static_cast<int64_t>(ids[i]);
    if (s >= 0 && s < num_segments) atomicAdd(&rows_in_segment[s], 1ull);
  }
}

// output[s, c] = reduction of data[i, c] over i in order with ids[i] == s; thread per column.
template <typename T, typename Index>
__global__ void SegmentReduceKernel(SegmentOp op, const T* __restrict__ data,
                                    const Index* __restrict__ ids, int64_t num_ids,
                                    int64_t inner, int64_t num_segments, T* __restrict__ output) {
  for (int64_t c = GridThreadIndex(); c < inner; c += GridStride()) {
    for (int64_t i = 0; i < num_ids; ++i) {
      const int64_t s = static_cast<int64_t>(ids[i]);
      if (s < 0 || s >= num_segments) continue;
      T& out = output[s * inner + c];
      out = Reduce(op, data[i * inner + c], out);
    }
  }
}

template <typename T>
__global__ void SegmentMeanKernel(T* __restrict__ output, int64_t count, int64_t inner,
                                  const unsigned long long* __restrict__ rows_in_segment) {
  for (int64_t e = GridThreadIndex(); e < count; e += GridStride()) {
    const int64_t rows = static_cast<int64_t>(rows_in_segment[e / inner]);
    if (rows == 0) continue;
    const T divisor = CastFromInt<T>(rows);
    if constexpr (std::is_integral_v<T>) {
      if (divisor == T(0)) continue;  // uint8 counts that wrap to 0 (the CPU would trap)
    }
    output[e] = output[e] / divisor;
  }
}

// sparse::kSegmentReduce.
absl::Status SegmentReduce(const CudaKernelContext& context) {
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
      VGPU_ASSIGN_OR_RETURN(T * output, context.Buffer<T>(2, output_count));
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
  });
}

// ---------------------------------------------------------------------------------------------
// Count true and where

absl::StatusOr<int64_t> ReadWhere(const CudaKernelContext& context, sparse::WhereParams* params,
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
  sparse::WhereParams p;
  std::vector<int64_t> dims;
  VGPU_ASSIGN_OR_RETURN(const int64_t total, ReadWhere(context, &p, &dims));
  return Dispatch::All(p.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* input, context.Buffer<const T>(0, total));
    VGPU_ASSIGN_OR_RETURN(int64_t * count, context.Buffer<int64_t>(1, 1));
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
struct WriteCoordinates {
  int64_t* out;
  int64_t num_true;
  int32_t rank;
  int64_t dims[kMaxRank];
  __device__ void operator()(int64_t position, int64_t flat) const {
    if (position >= num_true) return;
    for (int d = rank - 1; d >= 0; --d) {
      out[position * rank + d] = flat % dims[d];
      flat /= dims[d];
    }
  }
};

// sparse::kWhere.
absl::Status Where(const CudaKernelContext& context) {
  sparse::WhereParams p;
  std::vector<int64_t> dims;
  VGPU_ASSIGN_OR_RETURN(const int64_t total, ReadWhere(context, &p, &dims));
  VGPU_ASSIGN_OR_RETURN(const int64_t coordinate_count,
                        CheckedProduct({p.num_true, static_cast<int64_t>(p.rank)}, "coordinates"));
  return Dispatch::All(p.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* input, context.Buffer<const T>(0, total));
    VGPU_ASSIGN_OR_RETURN(int64_t * out, context.Buffer<int64_t>(1, coordinate_count));
    int64_t found = 0;
    if (total > 0) {
      const cudaStream_t stream = context.device->stream;
      WriteCoordinates writer{};
      writer.out = out;
      writer.num_true = p.num_true;
      writer.rank = static_cast<int32_t>(p.rank);
      for (uint32_t d = 0; d < p.rank; ++d) writer.dims[d] = dims[d];
      const thrust::counting_iterator<int64_t> flat_indices(0);
      auto coordinates = thrust::make_tabulate_output_iterator(writer);
      StreamScratch selected;  // the number of true elements (int64)
      VGPU_RETURN_IF_ERROR(selected.Allocate(stream, sizeof(int64_t)));
      size_t temp_bytes = 0;
      VGPU_RETURN_IF_ERROR(CudaError(
          cub::DeviceSelect::If(nullptr, temp_bytes, flat_indices, coordinates,
                                selected.As<int64_t>(), total, TrueAt<T>{input}, stream),
          "where (temporary storage size)"));
      StreamScratch temp;
      VGPU_RETURN_IF_ERROR(temp.Allocate(stream, temp_bytes > 0 ? temp_bytes : 1));
      VGPU_RETURN_IF_ERROR(CudaError(
          cub::DeviceSelect::If(temp.As<void>(), temp_bytes, flat_indices, coordinates,
                                selected.As<int64_t>(), total, TrueAt<T>{input}, stream),
          "where"));
      // Synchronous: the launch fails unless the input holds exactly num_true true elements.
      VGPU_RETURN_IF_ERROR(ReadBack(stream, selected.As<int64_t>(), &found));
    }
    if (found > p.num_true) {
      return absl::InvalidArgumentError("the input holds more true elements than num_true");
    }
    if (found != p.num_true) {
      return absl::InvalidArgumentError("the input holds fewer true elements than num_true");
    }
    return absl::OkStatus();
  });
}

}  // namespace

void AddCudaSparseKernels(CudaKernelTable& table) {
  table.Add(sparse::kGather, "gather", Gather);
  table.Add(sparse::kGatherNd, "gather_nd", GatherNd);
  table.Add(sparse::kScatter, "scatter", Scatter);
  table.Add(sparse::kScatterNd, "scatter_nd", ScatterNd);
  table.Add(sparse::kSegmentReduce, "segment_reduce", SegmentReduce);
  table.Add(sparse::kCountTrue, "count_true", CountTrue);
  table.Add(sparse::kWhere, "where", Where);
}

}  // namespace vgpu::cuda
