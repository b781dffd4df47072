// Softmax, log softmax, SoftmaxCrossEntropyWithLogits and SparseSoftmaxCrossEntropyWithLogits on
// the CPU backing executor. Rows are independent: they are spread over the executor's thread
// pool and each row is computed with Eigen's vectorised array operations, in float for the
// 16-bit dtypes (double for double). Numerically stable as TensorFlow's kernels: the row maximum
// is subtracted before exponentiating. The launch layer (launch/softmax_launch.h) reads and
// validates every launch; these only compute.
#define EIGEN_USE_THREADS

#include <algorithm>
#include <limits>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/launch/softmax_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/reduction.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

using softmax_launch::Broadcast2D;
using softmax_launch::CrossEntropyLaunch;
using softmax_launch::ReadCrossEntropyLaunch;
using softmax_launch::ReadSoftmaxLaunch;
using softmax_launch::ReadSparseCrossEntropyHostLabelsLaunch;
using softmax_launch::ReadSparseCrossEntropyLaunch;
using softmax_launch::SoftmaxLaunch;
using softmax_launch::SparseCrossEntropyLaunch;
using softmax_launch::TakeCrossEntropyBuffers;
using softmax_launch::TakeSparseCrossEntropyBuffers;

// The type a row is computed in.
template <typename T>
using ComputeType = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename C>
using RowArray = Eigen::Array<C, Eigen::Dynamic, 1>;

// Loads element c of row b of a rank-2 operand stored with the given strides (0 along a
// broadcast dimension) into `row` as C.
template <typename T, typename C>
void LoadRow(const T* data, int64_t b, int64_t row_stride, int64_t col_stride, RowArray<C>& row) {
  const T* start = data + b * row_stride;
  if (col_stride == 1) {
    row = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(start, row.size())
              .template cast<C>();
  } else {
    row.setConstant(static_cast<C>(start[0]));
  }
}

template <typename T, typename C>
void StoreRow(const RowArray<C>& row, T* out) {
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(out, row.size()) = row.template cast<T>();
}

Eigen::TensorOpCost RowCost(int64_t classes, size_t element_size) {
  return Eigen::TensorOpCost(classes * element_size, classes * element_size, classes * 20.0);
}

template <typename T>
void SoftmaxRows(const Eigen::ThreadPoolDevice& device, const T* x, T* y, int64_t batch,
                 int64_t classes, bool log) {
  using C = ComputeType<T>;
  device.parallelFor(batch, RowCost(classes, sizeof(T)), [&](Eigen::Index begin,
                                                              Eigen::Index end) {
    RowArray<C> row(classes);
    for (int64_t b = begin; b < end; ++b) {
      LoadRow<T, C>(x, b, classes, 1, row);
      row -= row.maxCoeff();
      if (log) {
        const C log_sum = std::log(row.exp().sum());
        row -= log_sum;
      } else {
        row = row.exp();
        row *= C(1) / row.sum();
      }
      StoreRow<T, C>(row, y + b * classes);
    }
  });
}

template <typename T>
void SoftmaxCrossEntropyRows(const Eigen::ThreadPoolDevice& device, const T* logits,
                             Broadcast2D logits_layout, const T* labels,
                             Broadcast2D labels_layout, T* loss, T* backprop, int64_t batch,
                             int64_t classes) {
  using C = ComputeType<T>;
  device.parallelFor(batch, RowCost(classes, 3 * sizeof(T)), [&](Eigen::Index begin,
                                                                  Eigen::Index end) {
    RowArray<C> shifted(classes), label_row(classes), probabilities(classes);
    for (int64_t b = begin; b < end; ++b) {
      LoadRow<T, C>(logits, b, logits_layout.row_stride, logits_layout.col_stride, shifted);
      LoadRow<T, C>(labels, b, labels_layout.row_stride, labels_layout.col_stride, label_row);
      shifted -= shifted.maxCoeff();
      probabilities = shifted.exp();
      const C sum = probabilities.sum();
      const C log_sum = std::log(sum);
      loss[b] = static_cast<T>((label_row * (log_sum - shifted)).sum());
      probabilities = probabilities / sum - label_row;
      StoreRow<T, C>(probabilities, backprop + b * classes);
    }
  });
}

template <typename T, typename Label>
void SparseSoftmaxCrossEntropyRows(const Eigen::ThreadPoolDevice& device, const T* logits,
                                   const Label* labels, T* loss, T* backprop, int64_t batch,
                                   int64_t classes) {
  using C = ComputeType<T>;
  device.parallelFor(batch, RowCost(classes, 2 * sizeof(T)), [&](Eigen::Index begin,
                                                                  Eigen::Index end) {
    RowArray<C> shifted(classes), probabilities(classes);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t label = static_cast<int64_t>(labels[b]);
      if (label < 0 || label >= classes) {  // TensorFlow's CUDA kernel: a NaN loss and row
        const T nan = static_cast<T>(std::numeric_limits<float>::quiet_NaN());
        loss[b] = nan;
        std::fill(backprop + b * classes, backprop + (b + 1) * classes, nan);
        continue;
      }
      LoadRow<T, C>(logits, b, classes, 1, shifted);
      shifted -= shifted.maxCoeff();
      probabilities = shifted.exp();
      const C sum = probabilities.sum();
      loss[b] = static_cast<T>(std::log(sum) - shifted[label]);
      probabilities /= sum;
      probabilities[label] -= C(1);
      StoreRow<T, C>(probabilities, backprop + b * classes);
    }
  });
}

// reduction::kSoftmax: y = softmax(x) (log softmax with launch.log) along each row.
struct Softmax : FloatingKernel<Softmax, ReadSoftmaxLaunch> {
  template <typename T>
  static absl::Status Run(const KernelContext& context, const SoftmaxLaunch& launch) {
    VGPU_ASSIGN_OR_RETURN(auto b, (TakeElementwiseBuffers<T, 1>(context, launch.count)));
    if (launch.count == 0) return absl::OkStatus();
    SoftmaxRows<T>(*context.device, b.in[0], b.out, launch.batch, launch.classes, launch.log);
    return absl::OkStatus();
  }
};

// reduction::kSoftmaxCrossEntropy: per row the loss and its gradient (labels broadcast).
struct SoftmaxCrossEntropy : FloatingKernel<SoftmaxCrossEntropy, ReadCrossEntropyLaunch> {
  template <typename T>
  static absl::Status Run(const KernelContext& context, const CrossEntropyLaunch& launch) {
    VGPU_ASSIGN_OR_RETURN(auto b, TakeCrossEntropyBuffers<T>(context, launch));
    if (launch.batch == 0) return absl::OkStatus();
    if (launch.classes == 0) {
      std::fill(b.loss, b.loss + launch.batch, T(0));
      return absl::OkStatus();
    }
    SoftmaxCrossEntropyRows<T>(*context.device, b.logits, launch.logits_layout, b.labels,
                               launch.labels_layout, b.loss, b.backprop, launch.batch,
                               launch.classes);
    return absl::OkStatus();
  }
};

// reduction::kSparseSoftmaxCrossEntropy (labels in device memory, int32 or int64) and
// kSparseSoftmaxCrossEntropyHostLabels (labels in the launch): as kSoftmaxCrossEntropy with one
// label index per row.
template <auto kRead>
struct SparseSoftmaxCrossEntropy : FloatingKernel<SparseSoftmaxCrossEntropy<kRead>, kRead> {
  template <typename T>
  static absl::Status Run(const KernelContext& context, const SparseCrossEntropyLaunch& launch) {
    VGPU_ASSIGN_OR_RETURN(auto b, TakeSparseCrossEntropyBuffers<T>(context, launch));
    if (launch.batch == 0) return absl::OkStatus();
    if (b.labels32 != nullptr) {
      SparseSoftmaxCrossEntropyRows<T>(*context.device, b.logits, b.labels32, b.loss, b.backprop,
                                       launch.batch, launch.classes);
    } else {
      SparseSoftmaxCrossEntropyRows<T>(*context.device, b.logits, b.labels64, b.loss, b.backprop,
                                       launch.batch, launch.classes);
    }
    return absl::OkStatus();
  }
};

}  // namespace

void AddSoftmaxKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kSoftmax, Softmax::Launch, SoftmaxCrossEntropy::Launch,
                  SparseSoftmaxCrossEntropy<ReadSparseCrossEntropyHostLabelsLaunch>::Launch,
                  SparseSoftmaxCrossEntropy<ReadSparseCrossEntropyLaunch>::Launch);
}

}  // namespace vgpu::cpu_kernels
