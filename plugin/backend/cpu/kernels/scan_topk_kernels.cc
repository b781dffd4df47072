// Cumulative sums/products (reduction::kScan) and top-k selection (reduction::kTopK,
// reduction::kInTopK) on the CPU backing executor. A scan runs each [outer, inner] line
// sequentially in the dtype, in TensorFlow's order of operations (Eigen's scan), lines in
// parallel; top-k sorts the indices of each row by (value descending, index ascending; NaN
// first), partially when k is small; in-top-k counts the classes predicted above the target.
// Rows run in parallel on the thread pool.
#define EIGEN_USE_THREADS
#include "plugin/backend/cpu/kernels/scan_topk_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/elementwise_broadcast.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/reduction.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

template <typename T>
void ScanLines(const Eigen::ThreadPoolDevice& device, const T* x, T* y, int64_t outer, int64_t n,
               int64_t inner, bool product, bool exclusive, bool reverse) {
  device.parallelFor(
      outer * inner, Eigen::TensorOpCost(n * sizeof(T), n * sizeof(T), n),
      [&](Eigen::Index first, Eigen::Index end) {
        for (int64_t line = first; line < end; ++line) {
          const int64_t o = line / inner, i = line % inner;
          const int64_t base = o * n * inner + i;
          T accumulator = product ? T(1) : T(0);
          for (int64_t step = 0; step < n; ++step) {
            const int64_t j = reverse ? n - 1 - step : step;
            const int64_t at = base + j * inner;
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

// reduction::kScan.
absl::Status Scan(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(ReduceDescriptorSettings reduce,
                        context.Descriptor<ReduceDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings tensor,
                        context.Descriptor<TensorDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(reduction::ScanParams params,
                        context.Params().Get<reduction::ScanParams>());
  if (reduce.op != ReduceOp::kSum && reduce.op != ReduceOp::kProd) {
    return absl::InvalidArgumentError("a scan is a cumulative sum or product");
  }
  if (tensor.rank != 3 || tensor.dtype != reduce.dtype) {
    return absl::InvalidArgumentError("a scan takes x [outer, n, inner] of the reduce's dtype");
  }
  VGPU_ASSIGN_OR_RETURN(const int64_t count, DenseElementCount(tensor));
  if (tensor.dtype == DType::kUInt8 || tensor.dtype == DType::kBool) {
    return absl::InvalidArgumentError("scans take floating, int32 or int64 dtypes");
  }
  return Dispatch::Numeric(tensor.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, count));
    VGPU_ASSIGN_OR_RETURN(T* y, context.Buffer<T>(1, count));
    if (count == 0) return absl::OkStatus();
    ScanLines<T>(*context.device, x, y, tensor.dims[0], tensor.dims[1], tensor.dims[2],
                 reduce.op == ReduceOp::kProd, params.exclusive != 0, params.reverse != 0);
    return absl::OkStatus();
  });
}

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

// reduction::kTopK.
absl::Status TopK(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings x_desc,
                        context.Descriptor<TensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings index_desc,
                        context.Descriptor<TensorDescriptorSettings>(1));
  if (x_desc.rank != 2 || index_desc.rank != 2 || x_desc.dims[0] != index_desc.dims[0]) {
    return absl::InvalidArgumentError("top-k takes x [rows, cols] and indices [rows, k]");
  }
  VGPU_ASSIGN_OR_RETURN(const int64_t x_count, DenseElementCount(x_desc));
  VGPU_ASSIGN_OR_RETURN(const int64_t out_count, DenseElementCount(index_desc));
  const int64_t rows = x_desc.dims[0], cols = x_desc.dims[1], k = index_desc.dims[1];
  if (k > cols) return absl::InvalidArgumentError("top-k needs k <= cols");
  if (x_desc.dtype == DType::kBool || x_desc.dtype == DType::kUInt8) {
    return absl::InvalidArgumentError("top-k takes floating, int32 or int64 values");
  }
  return Dispatch::Numeric(x_desc.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, x_count));
    VGPU_ASSIGN_OR_RETURN(T* values, context.Buffer<T>(1, out_count));
    auto run = [&](auto index_zero) -> absl::Status {
      using Index = decltype(index_zero);
      VGPU_ASSIGN_OR_RETURN(Index * indices, context.Buffer<Index>(2, out_count));
      if (out_count == 0) return absl::OkStatus();
      TopKRows<T, Index>(*context.device, x, values, indices, rows, cols, k);
      return absl::OkStatus();
    };
    switch (index_desc.dtype) {
      case DType::kInt32: return run(int32_t{});
      case DType::kInt64: return run(int64_t{});
      default: return absl::InvalidArgumentError("top-k indices must be int32 or int64");
    }
  });
}

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
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings predictions_desc,
                        context.Descriptor<TensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings targets_desc,
                        context.Descriptor<TensorDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(const int64_t k, context.Params().Get<int64_t>());
  if (predictions_desc.rank != 2 || predictions_desc.dtype != DType::kFloat32 ||
      targets_desc.rank != 1 || targets_desc.dims[0] != predictions_desc.dims[0]) {
    return absl::InvalidArgumentError(
        "in-top-k takes float32 predictions [batch, classes] and targets [batch]");
  }
  VGPU_ASSIGN_OR_RETURN(const int64_t count, DenseElementCount(predictions_desc));
  const int64_t batch = predictions_desc.dims[0], classes = predictions_desc.dims[1];
  VGPU_ASSIGN_OR_RETURN(const float* predictions, context.Buffer<const float>(0, count));
  VGPU_ASSIGN_OR_RETURN(bool* out, context.Buffer<bool>(2, batch));
  auto run = [&](auto zero) -> absl::Status {
    using Target = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const Target* targets, context.Buffer<const Target>(1, batch));
    if (batch > 0) InTopKRows<Target>(*context.device, predictions, targets, out, batch, classes, k);
    return absl::OkStatus();
  };
  switch (targets_desc.dtype) {
    case DType::kInt32: return run(int32_t{});
    case DType::kInt64: return run(int64_t{});
    default: return absl::InvalidArgumentError("in-top-k targets must be int32 or int64");
  }
}

}  // namespace

void AddScanAndTopKKernels(KernelTable& table) {
  table.Add(reduction::kScan, "scan", Scan);
  table.Add(reduction::kTopK, "top_k", TopK);
  table.Add(reduction::kInTopK, "in_top_k", InTopK);
}

}  // namespace vgpu::cpu_kernels
