// Tensor reductions (reduction::kReduce: sum, mean, prod, max, min, all, any) and arg-max/arg-min
// (reduction::kArgReduce) on the CUDA executor, and the reduction family's registration (softmax
// and the cross-entropy losses live in softmax_kernels.cu, scan and top-k in
// scan_topk_kernels.cu). The launch layer (launch/reduction_launch.h) reads and validates every
// launch on the host, as for the CPU executor, before anything is enqueued.
//
// Reduce: the launch layer's ReduceGeometry describes the input's layout as a kept index space
// and a reduced index space with element strides. Each output is reduced in a fixed
// order: either by one thread sequentially (few elements per output, or a layout whose last run
// is kept, so neighbouring threads read neighbouring elements), or by one block of 256 threads,
// each summing a fixed strided subset, then a fixed shared-memory tree; or, for a few outputs
// over very many elements (a global sum), by up to 256 blocks per output over fixed contiguous
// slices, whose results a second kernel combines in order (stream-ordered scratch from
// cudaMallocAsync). The choice depends on the shape only, no atomics: results are identical run
// to run. float16/bfloat16 sums and means
// accumulate in float (as the CPU executor), prod/max/min in the dtype; max/min propagate NaN.
// The summation order differs from Eigen's, so float sums match the CPU within rounding.
//
// Arg-reduce: Eigen's sequential semantics exactly: the first index whose value is strictly
// larger (smaller) than every earlier one, starting from the type's lowest (highest) value, so
// NaN is never chosen and a row of NaN / lowest values gives 0. A block-parallel tree that
// prefers the lower index on ties gives the same answer.
//
// GPU run must confirm: every op x dtype x layout (1..8 runs, both reduce_first) against the CPU
// executor (float32 rtol 1e-3, int64 exact, bool exact with non-0/1 bytes), empty inputs (the
// identities), the copy layouts, the split path (<= 64 outputs of >= 65536 elements each),
// determinism (two runs bit-identical), arg-max/min ties and NaN.
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/device_types.cuh"
#include "plugin/backend/launch/dtype_sets.h"
#include "plugin/backend/launch/reduction_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/reduction.h"

namespace vgpu::cuda {

namespace {

using namespace kernels;  // NOLINT: the family's own helper namespace
using reduction_launch::ArgReduceLaunch;
using reduction_launch::ReduceGeometry;
using reduction_launch::ReduceLaunch;
using reduction_launch::ReduceWork;

constexpr unsigned kBlockThreads = 256;  // the tree reductions assume exactly this many
// The accumulator of one reduce op over T: Acc, its identity, how an element enters it, how two
// combine, and the output value.
template <typename T, ReduceOp kOp>
struct Reducer {
  using C = Compute<T>;
  static constexpr bool kSums = kOp == ReduceOp::kSum || kOp == ReduceOp::kMean;
  using Acc = std::conditional_t<std::is_same_v<T, bool>, bool,
                                 std::conditional_t<kSums && kIsNarrowFloat<T>, float, C>>;

  __device__ static Acc Identity() {
    if constexpr (kOp == ReduceOp::kAll) {
      return true;
    } else if constexpr (kOp == ReduceOp::kAny) {
      return false;
    } else if constexpr (kSums) {
      return Acc(0);
    } else if constexpr (kOp == ReduceOp::kProd) {
      return Acc(1);
    } else if constexpr (kOp == ReduceOp::kMax) {
      if constexpr (kIsFloating<T>) {
        return -dmath::Infinity<Acc>();
      } else {
        return std::numeric_limits<T>::lowest();
      }
    } else {  // kMin
      if constexpr (kIsFloating<T>) {
        return dmath::Infinity<Acc>();
      } else {
        return std::numeric_limits<T>::max();
      }
    }
  }
  __device__ static Acc Enter(C value) {
    if constexpr (kSums && kIsNarrowFloat<T>) {
      return value.value;
    } else {
      return value;
    }
  }
  __device__ static Acc Combine(Acc a, Acc b) {
    if constexpr (kOp == ReduceOp::kAll) {
      return a && b;
    } else if constexpr (kOp == ReduceOp::kAny) {
      return a || b;
    } else if constexpr (kSums) {
      return Add(a, b);
    } else if constexpr (kOp == ReduceOp::kProd) {
      return Multiply(a, b);
    } else if constexpr (kOp == ReduceOp::kMax) {
      if (dmath::IsNan(a)) return a;
      if (dmath::IsNan(b)) return b;
      return a < b ? b : a;
    } else {
      if (dmath::IsNan(a)) return a;
      if (dmath::IsNan(b)) return b;
      return b < a ? b : a;
    }
  }
  __device__ static C Finish(Acc acc, int64_t per_output) {
    if constexpr (kOp == ReduceOp::kMean) {
      if constexpr (kIsNarrowFloat<T>) {
        return C(__fdiv_rn(acc, static_cast<float>(per_output)));
      } else if constexpr (kIsFloating<T>) {
        return acc / static_cast<C>(per_output);
      } else {
        return static_cast<C>(acc / static_cast<C>(per_output));
      }
    } else if constexpr (kSums && kIsNarrowFloat<T>) {
      return C(acc);
    } else {
      return acc;
    }
  }
};

// One output per thread, reduced sequentially.
template <typename T, ReduceOp kOp>
__global__ void ReducePerThreadKernel(ReduceGeometry geometry, int64_t outputs,
                                      const Storage<T>* x, Storage<T>* y) {
  using R = Reducer<T, kOp>;
  for (int64_t o = GridStart(); o < outputs; o += GridStride()) {
    const int64_t base = geometry.KeptOffset(o);
    typename R::Acc acc = R::Identity();
    for (int64_t r = 0; r < geometry.per_output; ++r) {
      acc = R::Combine(acc, R::Enter(Load<T>(x, base + geometry.ReducedOffset(r))));
    }
    Store<T>(y, o, R::Finish(acc, geometry.per_output));
  }
}

// The block's kBlockThreads partial results, in shared memory (raw bytes: Acc need not be
// trivially constructible).
template <typename Acc>
__device__ Acc* BlockPartials() {
  __shared__ alignas(8) unsigned char storage[kBlockThreads * sizeof(Acc)];
  return reinterpret_cast<Acc*>(storage);
}

// One block's reduction of the reduced elements [begin, end) of output o: thread t combines
// elements begin + t, begin + t + 256, ... in order into partial[t], then a fixed tree combines
// the kBlockThreads partial results into partial[0]. Every thread of the block must call it.
template <typename T, ReduceOp kOp>
__device__ void BlockReduceRange(const ReduceGeometry& geometry, const Storage<T>* x, int64_t o,
                                 int64_t begin, int64_t end,
                                 typename Reducer<T, kOp>::Acc* partial) {
  using R = Reducer<T, kOp>;
  const unsigned t = threadIdx.x;
  const int64_t base = geometry.KeptOffset(o);
  typename R::Acc acc = R::Identity();
  for (int64_t r = begin + t; r < end; r += kBlockThreads) {
    acc = R::Combine(acc, R::Enter(Load<T>(x, base + geometry.ReducedOffset(r))));
  }
  partial[t] = acc;
  __syncthreads();
  for (unsigned half = kBlockThreads / 2; half > 0; half >>= 1) {
    if (t < half) partial[t] = R::Combine(partial[t], partial[t + half]);
    __syncthreads();
  }
}

// One output per block of kBlockThreads threads: thread t combines elements t, t + 256, ... in
// order, then a fixed tree combines the 256 partial results.
template <typename T, ReduceOp kOp>
__global__ void ReducePerBlockKernel(ReduceGeometry geometry, int64_t outputs,
                                     const Storage<T>* x, Storage<T>* y) {
  using R = Reducer<T, kOp>;
  using Acc = typename R::Acc;
  Acc* partial = BlockPartials<Acc>();
  const unsigned t = threadIdx.x;
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    BlockReduceRange<T, kOp>(geometry, x, o, 0, geometry.per_output, partial);
    if (t == 0) Store<T>(y, o, R::Finish(partial[0], geometry.per_output));
    __syncthreads();  // partial[0] is read before the next output overwrites it
  }
}

// Few outputs, each over very many elements: one block would serialise the whole input on
// one SM. Split each output's reduced range into `parts` contiguous slices (a number fixed by
// the shape), reduce each slice in its own block into a stream-ordered scratch array, then
// combine each output's slices in order in one block. Still a fixed order: deterministic.
constexpr int64_t kSplitMinimumPerOutput = 1 << 16;
constexpr int64_t kSplitMaximumOutputs = 64;
constexpr int64_t kSliceElements = 1 << 15;

template <typename T, ReduceOp kOp>
__global__ void ReduceSlicesKernel(ReduceGeometry geometry, int64_t outputs, int64_t parts,
                                   const Storage<T>* x, typename Reducer<T, kOp>::Acc* slices) {
  using R = Reducer<T, kOp>;
  using Acc = typename R::Acc;
  Acc* partial = BlockPartials<Acc>();
  const unsigned t = threadIdx.x;
  const int64_t slice_length = (geometry.per_output + parts - 1) / parts;
  for (int64_t job = blockIdx.x; job < outputs * parts; job += gridDim.x) {
    const int64_t o = job / parts, part = job % parts;
    const int64_t begin = part * slice_length;
    const int64_t end =
        begin + slice_length < geometry.per_output ? begin + slice_length : geometry.per_output;
    BlockReduceRange<T, kOp>(geometry, x, o, begin, end, partial);
    if (t == 0) slices[job] = partial[0];
    __syncthreads();
  }
}

template <typename T, ReduceOp kOp>
__global__ void CombineSlicesKernel(int64_t outputs, int64_t parts, int64_t per_output,
                                    const typename Reducer<T, kOp>::Acc* slices, Storage<T>* y) {
  using R = Reducer<T, kOp>;
  using Acc = typename R::Acc;
  Acc* partial = BlockPartials<Acc>();
  const unsigned t = threadIdx.x;
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    Acc acc = R::Identity();
    for (int64_t part = t; part < parts; part += kBlockThreads) {
      acc = R::Combine(acc, slices[o * parts + part]);
    }
    partial[t] = acc;
    __syncthreads();
    for (unsigned half = kBlockThreads / 2; half > 0; half >>= 1) {
      if (t < half) partial[t] = R::Combine(partial[t], partial[t + half]);
      __syncthreads();
    }
    if (t == 0) Store<T>(y, o, R::Finish(partial[0], per_output));
    __syncthreads();
  }
}

absl::Status ScratchStatus(cudaError_t error) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat("reduce: scratch: ", cudaGetErrorName(error), ": ",
                                           cudaGetErrorString(error));
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

template <typename T, ReduceOp kOp>
absl::Status LaunchSplitReduce(const CudaKernelContext& context, const ReduceGeometry& geometry,
                               int64_t outputs, const Storage<T>* x, Storage<T>* y) {
  using Acc = typename Reducer<T, kOp>::Acc;
  constexpr char kName[] = "reduce";
  const int64_t wanted = (geometry.per_output + kSliceElements - 1) / kSliceElements;
  const int64_t parts = wanted < int64_t{kBlockThreads} ? wanted : int64_t{kBlockThreads};
  const cudaStream_t stream = context.device->stream;
  Acc* slices = nullptr;
  VGPU_RETURN_IF_ERROR(ScratchStatus(cudaMallocAsync(reinterpret_cast<void**>(&slices),
                                                     outputs * parts * sizeof(Acc), stream)));
  absl::Status status = LaunchRows(context, kName, outputs * parts, kBlockThreads,
                                   ReduceSlicesKernel<T, kOp>, geometry, outputs, parts, x, slices);
  if (status.ok()) {
    status.Update(LaunchRows(context, kName, outputs, kBlockThreads, CombineSlicesKernel<T, kOp>,
                             outputs, parts, geometry.per_output,
                             static_cast<const Acc*>(slices), y));
  }
  // Stream-ordered: freed once the kernels above have run (or at once if none was enqueued).
  status.Update(ScratchStatus(cudaFreeAsync(slices, stream)));
  return status;
}

template <typename T, ReduceOp kOp>
absl::Status LaunchReduce(const CudaKernelContext& context, const ReduceGeometry& geometry,
                          int64_t outputs, const Storage<T>* x, Storage<T>* y) {
  constexpr char kName[] = "reduce";
  // Thread per output when each output is small, or when neighbouring outputs are neighbouring
  // elements (coalesced) and there are enough of them to fill the device.
  const bool per_thread =
      geometry.per_output <= 32 ||
      (geometry.last_run_kept && outputs >= 4096 && geometry.per_output <= 65536);
  if (outputs <= kSplitMaximumOutputs && geometry.per_output >= kSplitMinimumPerOutput) {
    return LaunchSplitReduce<T, kOp>(context, geometry, outputs, x, y);
  }
  if (per_thread) {
    return LaunchGrid(context, kName, outputs, ReducePerThreadKernel<T, kOp>, geometry, outputs,
                      x, y);
  }
  return LaunchRows(context, kName, outputs, kBlockThreads, ReducePerBlockKernel<T, kOp>,
                    geometry, outputs, x, y);
}

template <typename T>
__global__ void CopyKernel(int64_t count, const Storage<T>* x, Storage<T>* y) {
  for (int64_t i = GridStart(); i < count; i += GridStride()) Store<T>(y, i, Load<T>(x, i));
}

template <typename S>
__global__ void FillKernel(S value, int64_t count, S* out) {
  for (int64_t i = GridStart(); i < count; i += GridStride()) out[i] = value;
}

// The stored bits of the identity of `op` over T (TensorFlow's FillIdentity values, as the CPU
// executor's IdentityOf).
template <typename T>
Storage<T> IdentityBits(ReduceOp op) {
  auto from_float = [](float value) -> Storage<T> {
    if constexpr (std::is_same_v<T, __half>) {
      return __float2half_rn(value);
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      return __float2bfloat16_rn(value);
    } else {
      return static_cast<Storage<T>>(value);
    }
  };
  switch (op) {
    case ReduceOp::kProd:
    case ReduceOp::kAll:
      if constexpr (std::is_same_v<T, double>) return 1.0;
      return from_float(1.0f);
    case ReduceOp::kMax:
    case ReduceOp::kMin: {
      const bool max = op == ReduceOp::kMax;
      if constexpr (std::is_same_v<T, double>) {
        return max ? -std::numeric_limits<double>::infinity()
                   : std::numeric_limits<double>::infinity();
      } else if constexpr (kIsFloating<T>) {
        return from_float(max ? -std::numeric_limits<float>::infinity()
                              : std::numeric_limits<float>::infinity());
      } else if constexpr (std::is_same_v<T, bool>) {
        return max ? 0 : 1;
      } else {
        return max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
      }
    }
    case ReduceOp::kMean:
      if constexpr (std::is_same_v<T, double>) {
        return std::numeric_limits<double>::quiet_NaN();
      } else if constexpr (kIsFloating<T>) {
        return from_float(std::numeric_limits<float>::quiet_NaN());
      }
      return from_float(0.0f);
    default:
      if constexpr (std::is_same_v<T, double>) return 0.0;
      return from_float(0.0f);
  }
}

absl::Status CopyStatus(cudaError_t error) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("reduce: copy: ", cudaGetErrorName(error), ": ", cudaGetErrorString(error)));
}

// reduction::kReduce (see protocol/kernels/reduction.h).
absl::Status Reduce(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(ReduceLaunch launch, reduction_launch::ReadReduceLaunch(context));
  const ReduceGeometry& geometry = launch.geometry;
  const int64_t out_count = geometry.out_count;

  auto run = [&](auto zero, auto&& reduce_fn) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const Storage<T>* x, ConstDeviceBuffer<T>(context, 0, geometry.in_count));
    VGPU_ASSIGN_OR_RETURN(Storage<T>* y, DeviceBuffer<T>(context, 1, out_count));
    switch (launch.work) {
      case ReduceWork::kNothing: return absl::OkStatus();
      case ReduceWork::kCopy:
        if constexpr (std::is_same_v<T, bool>) {
          return LaunchGrid(context, "reduce", out_count, CopyKernel<bool>, out_count, x, y);
        } else {
          return CopyStatus(cudaMemcpyAsync(y, x, out_count * sizeof(Storage<T>),
                                            cudaMemcpyDeviceToDevice, context.device->stream));
        }
      case ReduceWork::kFillIdentity:
        return LaunchGrid(context, "reduce", out_count, FillKernel<Storage<T>>,
                          IdentityBits<T>(launch.op), out_count, y);
      case ReduceWork::kReduce: break;
    }
    return reduce_fn(x, y);
  };

  if (launch.dtype == DType::kBool) {
    return run(bool{}, [&](const uint8_t* x, uint8_t* y) -> absl::Status {
      if (launch.op == ReduceOp::kAll) {
        return LaunchReduce<bool, ReduceOp::kAll>(context, geometry, out_count, x, y);
      }
      return LaunchReduce<bool, ReduceOp::kAny>(context, geometry, out_count, x, y);
    });
  }
  return DispatchReducible<Dispatch>(launch.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    return run(zero, [&](const Storage<T>* x, Storage<T>* y) -> absl::Status {
      switch (launch.op) {
        case ReduceOp::kSum:
          return LaunchReduce<T, ReduceOp::kSum>(context, geometry, out_count, x, y);
        case ReduceOp::kMean:
          return LaunchReduce<T, ReduceOp::kMean>(context, geometry, out_count, x, y);
        case ReduceOp::kProd:
          return LaunchReduce<T, ReduceOp::kProd>(context, geometry, out_count, x, y);
        case ReduceOp::kMax:
          return LaunchReduce<T, ReduceOp::kMax>(context, geometry, out_count, x, y);
        case ReduceOp::kMin:
          return LaunchReduce<T, ReduceOp::kMin>(context, geometry, out_count, x, y);
        default:
          return reduction_launch::UnservedReduceOp(launch.op);  // the reader refused it
      }
    });
  });
}

// --- Arg-reduce -------------------------------------------------------------------------------

// The start value of an arg-max (lowest) / arg-min (highest) scan: Eigen's NumTraits.
template <typename T, bool kMax>
__device__ Compute<T> ArgStart() {
  using C = Compute<T>;
  if constexpr (std::is_same_v<T, float>) {
    return kMax ? -FLT_MAX : FLT_MAX;
  } else if constexpr (std::is_same_v<T, double>) {
    return kMax ? -DBL_MAX : DBL_MAX;
  } else if constexpr (std::is_same_v<T, __half>) {
    return C::Exact(kMax ? -65504.0f : 65504.0f);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const float largest = __int_as_float(0x7f7f0000);  // bfloat16's largest finite value
    return C::Exact(kMax ? -largest : largest);
  } else {
    return kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
}

template <typename C, bool kMax>
__device__ bool Better(C candidate, C best) {
  return kMax ? candidate > best : candidate < best;
}

template <typename T, typename Index, bool kMax>
__global__ void ArgReducePerThreadKernel(int64_t outer, int64_t n, int64_t inner,
                                         const Storage<T>* x, Index* y) {
  const int64_t outputs = outer * inner;
  for (int64_t o = GridStart(); o < outputs; o += GridStride()) {
    const int64_t row = o / inner, column = o % inner;
    const Storage<T>* line = x + row * n * inner + column;
    Compute<T> best = ArgStart<T, kMax>();
    int64_t best_index = 0;
    for (int64_t j = 0; j < n; ++j) {
      const Compute<T> value = Load<T>(line, j * inner);
      if (Better<Compute<T>, kMax>(value, best)) {
        best = value;
        best_index = j;
      }
    }
    y[o] = static_cast<Index>(best_index);
  }
}

// inner == 1: one block per row; thread t scans j = t, t + 256, ... sequentially, then a tree
// keeps the better value, the lower index on ties (equal to the sequential answer).
template <typename T, typename Index, bool kMax>
__global__ void ArgReducePerBlockKernel(int64_t rows, int64_t n, const Storage<T>* x, Index* y) {
  using C = Compute<T>;
  __shared__ alignas(8) unsigned char value_storage[kBlockThreads * sizeof(C)];
  __shared__ int64_t index_of[kBlockThreads];
  C* value_of = reinterpret_cast<C*>(value_storage);
  const unsigned t = threadIdx.x;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const Storage<T>* line = x + row * n;
    C best = ArgStart<T, kMax>();
    int64_t best_index = 0;
    for (int64_t j = t; j < n; j += kBlockThreads) {
      const C value = Load<T>(line, j);
      if (Better<C, kMax>(value, best)) {
        best = value;
        best_index = j;
      }
    }
    value_of[t] = best;
    index_of[t] = best_index;
    __syncthreads();
    for (unsigned half = kBlockThreads / 2; half > 0; half >>= 1) {
      if (t < half) {
        const C other = value_of[t + half];
        const int64_t other_index = index_of[t + half];
        if (Better<C, kMax>(other, value_of[t]) ||
            (!Better<C, kMax>(value_of[t], other) && other_index < index_of[t])) {
          value_of[t] = other;
          index_of[t] = other_index;
        }
      }
      __syncthreads();
    }
    if (t == 0) y[row] = static_cast<Index>(index_of[0]);
    __syncthreads();
  }
}

template <typename T, typename Index, bool kMax>
absl::Status LaunchArgReduce(const CudaKernelContext& context, int64_t outer, int64_t n,
                             int64_t inner, const Storage<T>* x, Index* y) {
  constexpr char kName[] = "arg_reduce";
  if (inner == 1 && n > 256) {
    return LaunchRows(context, kName, outer, kBlockThreads, ArgReducePerBlockKernel<T, Index, kMax>,
                      outer, n, x, y);
  }
  return LaunchGrid(context, kName, outer * inner, ArgReducePerThreadKernel<T, Index, kMax>, outer,
                    n, inner, x, y);
}

// reduction::kArgReduce (see protocol/kernels/reduction.h).
absl::Status ArgReduce(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(ArgReduceLaunch launch, reduction_launch::ReadArgReduceLaunch(context));
  return DispatchReducible<Dispatch>(launch.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const Storage<T>* x, ConstDeviceBuffer<T>(context, 0, launch.x_count));
    return Dispatch::Index(launch.index_dtype, [&](auto index_zero) -> absl::Status {
      using Index = decltype(index_zero);
      VGPU_ASSIGN_OR_RETURN(Index * y, context.Buffer<Index>(1, launch.y_count));
      if (launch.y_count == 0) return absl::OkStatus();
      if (launch.op == ReduceOp::kMax) {
        return LaunchArgReduce<T, Index, true>(context, launch.outer, launch.n, launch.inner, x,
                                               y);
      }
      return LaunchArgReduce<T, Index, false>(context, launch.outer, launch.n, launch.inner, x,
                                              y);
    });
  });
}

}  // namespace

void AddCudaReductionKernels(CudaKernelTable& table) {
  table.AddFamily(kernel_families::kReduction, Reduce, ArgReduce);
}

}  // namespace vgpu::cuda
