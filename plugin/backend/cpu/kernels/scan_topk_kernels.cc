// Cumulative sums/products (reduction::kScan) and top-k selection (reduction::kTopK,
// reduction::kInTopK) on the CPU backing executor. A scan runs each [outer, inner] line
// sequentially in the dtype, in TensorFlow's order of operations (Eigen's scan), lines in
// parallel; top-k sorts the indices of each row by (value descending, index ascending; NaN
// first), partially when k is small; in-top-k counts the classes predicted above the target.
// Rows run in parallel on the thread pool. The launch layer (launch/scan_topk_launch.h) reads
// and validates every launch; these only compute.
#define EIGEN_USE_THREADS
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/launch/dtype_sets.h"
#include "plugin/backend/launch/scan_topk_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/reduction.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

using scan_topk_launch::InTopKLaunch;
using scan_topk_launch::ReadInTopKLaunch;
using scan_topk_launch::ReadScanLaunch;
using scan_topk_launch::ReadTopKLaunch;
using scan_topk_launch::ScanLaunch;
using scan_topk_launch::TopKLaunch;

template <typename T>
void ScanLines(const Eigen::ThreadPoolDevice& device, const T* x, T* y, const ScanLaunch& launch) {
  const int64_t n = launch.n;
  const bool product = launch.product, exclusive = launch.exclusive;
  device.parallelFor(
      launch.outer * launch.inner, Eigen::TensorOpCost(n * sizeof(T), n * sizeof(T), n),
      [&](Eigen::Index first, Eigen::Index end) {
        for (int64_t line = first; line < end; ++line) {
          const int64_t start = launch.LineStart(line);
          T accumulator = product ? T(1) : T(0);
          for (int64_t step = 0; step < n; ++step) {
            const int64_t at = launch.ElementAt(start, step);
            if (exclusive) {
              y[at] = accumulator;
              accumulator = product ? T(accumulator * x[at]) : T(accumulator + x[at]);
            } else {
              accumulator = product ? T(accumulator * x[at]) : T(accumulator + x[at]);
              y[at] = accumulator;
            }
          }
        }
      });
}

// reduction::kScan, for DispatchSigned's dtypes (typed body: launch/typed_kernel.h).
struct Scan : TypedKernelOf<Dispatch, KernelContext, Scan, ReadScanLaunch, SignedDTypes> {
  template <typename T>
  static absl::Status Run(const KernelContext& context, const ScanLaunch& launch) {
    VGPU_ASSIGN_OR_RETURN(auto x_y, (TakeElementwiseBuffers<T, 1>(context, launch.count)));
    if (launch.count == 0) return absl::OkStatus();
    ScanLines<T>(*context.device, x_y.in[0], x_y.out, launch);
    return absl::OkStatus();
  }
};

template <typename T, typename Index>
void TopKRows(const Eigen::ThreadPoolDevice& device, const T* x, T* values, Index* indices,
              int64_t rows, int64_t cols, int64_t k) {
  device.parallelFor(
      rows, Eigen::TensorOpCost(cols * sizeof(T), k * (sizeof(T) + sizeof(Index)), cols * 10),
      [&](Eigen::Index first, Eigen::Index end) {
        std::vector<int64_t> order(cols);
        for (int64_t r = first; r < end; ++r) {
          const T* row = x + r * cols;
          std::iota(order.begin(), order.end(), int64_t{0});
          // A strict total order even with NaN entries (which go first).
          auto before = [row](int64_t a, int64_t b) {
            const bool a_nan = (Eigen::numext::isnan)(row[a]);
            const bool b_nan = (Eigen::numext::isnan)(row[b]);
            if (a_nan || b_nan) return a_nan != b_nan ? a_nan : a < b;
            if (row[b] < row[a]) return true;
            if (row[a] < row[b]) return false;
            return a < b;
          };
          if (k < cols) {
            std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
          } else {
            std::sort(order.begin(), order.end(), before);
          }
          for (int64_t j = 0; j < k; ++j) {
            values[r * k + j] = row[order[j]];
            indices[r * k + j] = static_cast<Index>(order[j]);
          }
        }
      });
}

// reduction::kTopK, for DispatchSigned's dtypes.
struct TopK : TypedKernelOf<Dispatch, KernelContext, TopK, ReadTopKLaunch, SignedDTypes> {
  template <typename T>
  static absl::Status Run(const KernelContext& context, const TopKLaunch& launch) {
    VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, launch.x_count));
    VGPU_ASSIGN_OR_RETURN(T* values, context.Buffer<T>(1, launch.out_count));
    return Dispatch::Index(launch.index_dtype, [&](auto index_zero) -> absl::Status {
      using Index = decltype(index_zero);
      VGPU_ASSIGN_OR_RETURN(Index * indices, context.Buffer<Index>(2, launch.out_count));
      if (launch.out_count == 0) return absl::OkStatus();
      TopKRows<T, Index>(*context.device, x, values, indices, launch.rows, launch.cols,
                         launch.k);
      return absl::OkStatus();
    });
  }
};

template <typename Target>
void InTopKRows(const Eigen::ThreadPoolDevice& device, const float* predictions,
                const Target* targets, bool* out, int64_t batch, int64_t classes, int64_t k) {
  device.parallelFor(batch, Eigen::TensorOpCost(classes * sizeof(float), 1, classes),
                     [&](Eigen::Index first, Eigen::Index end) {
    for (int64_t b = first; b < end; ++b) {
      const float* row = predictions + b * classes;
      const Target target = targets[b];
      bool cannot_say = target < 0 || target >= classes || !std::isfinite(row[target]);
      int64_t more_probable = 0;
      if (!cannot_say) {
        const float target_prediction = row[target];
        for (int64_t i = 0; i < classes; ++i) {
          if (!std::isfinite(row[i])) {
            cannot_say = true;
            break;
          }
          if (row[i] > target_prediction && ++more_probable > k) break;
        }
      }
      out[b] = !cannot_say && more_probable < k;
    }
  });
}

// reduction::kInTopK.
absl::Status InTopK(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(InTopKLaunch launch, ReadInTopKLaunch(context));
  VGPU_ASSIGN_OR_RETURN(const float* predictions, context.Buffer<const float>(0, launch.count));
  VGPU_ASSIGN_OR_RETURN(bool* out, context.Buffer<bool>(2, launch.batch));
  return Dispatch::Index(launch.target_dtype, [&](auto zero) -> absl::Status {
    using Target = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const Target* targets, context.Buffer<const Target>(1, launch.batch));
    if (launch.batch > 0) {
      InTopKRows<Target>(*context.device, predictions, targets, out, launch.batch,
                         launch.classes, launch.k);
    }
    return absl::OkStatus();
  });
}

}  // namespace

void AddScanAndTopKKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kScanTopK, Scan::Launch, TopK::Launch, InTopK);
}

}  // namespace vgpu::cpu_kernels
