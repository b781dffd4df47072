// Cumulative sums/products (reduction::kScan), top-k (reduction::kTopK) and in-top-k
// (reduction::kInTopK) on the CUDA executor. The launch layer (launch/scan_topk_launch.h) reads
// and validates every launch on the host, as for the CPU executor, before anything is enqueued.
//
// Scan: one thread per [outer, inner] line, sequential along the scanned dimension in the dtype,
// in the CPU kernel's (Eigen's) order of operations, so results equal the CPU's bit for bit
// (float16/bfloat16 rounded per operation, integers wrapping). Neighbouring threads read
// neighbouring elements when inner > 1. A long single line (outer * inner small, n large) runs
// on few threads: correct, not fast; a CUB decoupled look-back scan would be faster but would
// round float sums in a different order than the CPU, so it is not used.
//
// Top-k: one block per row. Element j's place is the number of elements ranked before it in the
// CPU kernel's strict total order (NaN first, then value descending, then index ascending), so
// the output is exactly the CPU's (stable on ties). The row is compared in shared-memory tiles:
// O(cols^2 / 256) comparisons per thread; fine for the class counts of classifiers (<= ~64k),
// slow for very long rows (a follow-up could use CUB's segmented radix sort with a NaN/-0 key
// transform for those).
//
// In-top-k: one thread per row, the CPU kernel's loop (float32 predictions; a target out of
// range or a non-finite prediction in the row gives false).
//
// GPU run must confirm: scans bit-exact with the CPU (all four exclusive/reverse combinations,
// each dtype), top-k exact (values and indices) with ties, NaN, +-0 and k = 0 / k = cols, in-top-k
// exact with inf/NaN rows and out-of-range targets.
#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/device_types.cuh"
#include "plugin/backend/launch/dtype_sets.h"
#include "plugin/backend/launch/scan_topk_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/reduction.h"

namespace vgpu::cuda {

namespace {

using namespace kernels;  // NOLINT: the family's own helper namespace
using scan_topk_launch::InTopKLaunch;
using scan_topk_launch::ScanLaunch;
using scan_topk_launch::TopKLaunch;

// --- Scan ----------------------------------------------------------------------------------------

template <typename T>
__global__ void ScanKernel(ScanLaunch launch, const Storage<T>* x, Storage<T>* y) {
  using C = Compute<T>;
  const bool product = launch.product, exclusive = launch.exclusive;
  const int64_t lines = launch.outer * launch.inner;
  for (int64_t line = GridStart(); line < lines; line += GridStride()) {
    const int64_t start = launch.LineStart(line);
    C accumulator = product ? C(1) : C(0);
    for (int64_t step = 0; step < launch.n; ++step) {
      const int64_t at = launch.ElementAt(start, step);
      const C value = Load<T>(x, at);  // read before the write: y may alias x
      if (exclusive) {
        Store<T>(y, at, accumulator);
        accumulator = product ? Multiply(accumulator, value) : Add(accumulator, value);
      } else {
        accumulator = product ? Multiply(accumulator, value) : Add(accumulator, value);
        Store<T>(y, at, accumulator);
      }
    }
  }
}

// reduction::kScan, for DispatchSigned's dtypes (typed body: launch/typed_kernel.h): one thread
// per scan line.
struct Scan : TypedKernelOf<Dispatch, CudaKernelContext, Scan, scan_topk_launch::ReadScanLaunch,
                            SignedDTypes> {
  template <typename T>
  static absl::Status Run(const CudaKernelContext& context, const ScanLaunch& launch) {
    VGPU_ASSIGN_OR_RETURN(auto x_y, (TakeElementwiseBuffers<T, 1>(context, launch.count)));
    if (launch.count == 0) return absl::OkStatus();
    return LaunchGrid(context, "scan", launch.outer * launch.inner, ScanKernel<T>, launch,
                      x_y.in[0], x_y.out);
  }
};

// --- Top-k ---------------------------------------------------------------------------------------

constexpr unsigned kTopKThreads = 256;

// Whether (a, at index ia) ranks before (b, at index ib): NaN first, then larger values, then
// the lower index (the CPU kernel's order).
template <typename C>
__device__ bool RanksBefore(C a, int64_t ia, C b, int64_t ib) {
  const bool a_nan = dmath::IsNan(a), b_nan = dmath::IsNan(b);
  if (a_nan || b_nan) return a_nan != b_nan ? a_nan : ia < ib;
  if (b < a) return true;
  if (a < b) return false;
  return ia < ib;
}

template <typename T, typename Index>
__global__ void TopKKernel(int64_t rows, int64_t cols, int64_t k, const Storage<T>* x,
                           Storage<T>* values, Index* indices) {
  using C = Compute<T>;
  __shared__ Storage<T> tile[kTopKThreads];
  const unsigned t = threadIdx.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const Storage<T>* row = x + r * cols;
    for (int64_t base = 0; base < cols; base += kTopKThreads) {
      const int64_t j = base + t;
      const bool mine = j < cols;
      const Storage<T> raw = mine ? row[j] : row[0];
      const C value = Load<T>(&raw, 0);
      int64_t rank = 0;
      for (int64_t tile_start = 0; tile_start < cols; tile_start += kTopKThreads) {
        __syncthreads();  // the previous tile is no longer read
        if (tile_start + t < cols) tile[t] = row[tile_start + t];
        __syncthreads();
        const int64_t tile_size =
            cols - tile_start < kTopKThreads ? cols - tile_start : int64_t{kTopKThreads};
        if (mine) {
          for (int64_t q = 0; q < tile_size; ++q) {
            const int64_t i = tile_start + q;
            if (RanksBefore(Load<T>(tile, q), i, value, j)) ++rank;
          }
        }
      }
      if (mine && rank < k) {
        values[r * k + rank] = raw;  // the element's bits
        indices[r * k + rank] = static_cast<Index>(j);
      }
    }
  }
}

// reduction::kTopK, for DispatchSigned's dtypes: one block per row.
struct TopK : TypedKernelOf<Dispatch, CudaKernelContext, TopK, scan_topk_launch::ReadTopKLaunch,
                            SignedDTypes> {
  template <typename T>
  static absl::Status Run(const CudaKernelContext& context, const TopKLaunch& launch) {
    VGPU_ASSIGN_OR_RETURN(const Storage<T>* x, ConstDeviceBuffer<T>(context, 0, launch.x_count));
    VGPU_ASSIGN_OR_RETURN(Storage<T>* values, DeviceBuffer<T>(context, 1, launch.out_count));
    return Dispatch::Index(launch.index_dtype, [&](auto index_zero) -> absl::Status {
      using Index = decltype(index_zero);
      VGPU_ASSIGN_OR_RETURN(Index * indices, context.Buffer<Index>(2, launch.out_count));
      if (launch.out_count == 0) return absl::OkStatus();
      return LaunchRows(context, "top_k", launch.rows, kTopKThreads, TopKKernel<T, Index>,
                        launch.rows, launch.cols, launch.k, x, values, indices);
    });
  }
};

// --- In-top-k ------------------------------------------------------------------------------------

template <typename Target>
__global__ void InTopKKernel(int64_t batch, int64_t classes, int64_t k, const float* predictions,
                             const Target* targets, uint8_t* out) {
  for (int64_t b = GridStart(); b < batch; b += GridStride()) {
    const float* row = predictions + b * classes;
    const Target target = targets[b];
    bool cannot_say = target < 0 || target >= classes || !isfinite(row[target]);
    int64_t more_probable = 0;
    if (!cannot_say) {
      const float target_prediction = row[target];
      for (int64_t i = 0; i < classes; ++i) {
        if (!isfinite(row[i])) {
          cannot_say = true;
          break;
        }
        if (row[i] > target_prediction && ++more_probable > k) break;
      }
    }
    out[b] = !cannot_say && more_probable < k ? 1 : 0;
  }
}

// reduction::kInTopK.
absl::Status InTopK(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(InTopKLaunch launch, scan_topk_launch::ReadInTopKLaunch(context));
  const int64_t batch = launch.batch;
  VGPU_ASSIGN_OR_RETURN(const float* predictions, context.Buffer<const float>(0, launch.count));
  VGPU_ASSIGN_OR_RETURN(uint8_t* out, DeviceBuffer<bool>(context, 2, batch));
  return Dispatch::Index(launch.target_dtype, [&](auto zero) -> absl::Status {
    using Target = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const Target* targets, context.Buffer<const Target>(1, batch));
    if (batch == 0) return absl::OkStatus();
    return LaunchGrid(context, "in_top_k", batch, InTopKKernel<Target>, batch, launch.classes,
                      launch.k, predictions, targets, out);
  });
}

}  // namespace

void AddCudaScanTopKKernels(CudaKernelTable& table) {
  table.AddFamily(kernel_families::kScanTopK, Scan::Launch, TopK::Launch, InTopK);
}

}  // namespace vgpu::cuda
