// Softmax, log softmax, SoftmaxCrossEntropyWithLogits and SparseSoftmaxCrossEntropyWithLogits on
// the CPU backing executor. Rows are independent: they are spread over the executor's thread
// pool and each row is computed with Eigen's vectorised array operations, in float for the
// 16-bit dtypes (double for double). Numerically stable as TensorFlow's kernels: the row maximum
// is subtracted before exponentiating.
#include "plugin/backend/cpu/kernels/softmax_kernels.h"

#define EIGEN_USE_THREADS

#include <algorithm>
#include <limits>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/elementwise_broadcast.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/reduction.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

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

// Strides of a rank-2 operand stored as [rows, cols] and broadcast to [batch, classes].
struct Broadcast2D {
  int64_t row_stride, col_stride;
};

absl::StatusOr<Broadcast2D> BroadcastOf(const TensorDescriptorSettings& operand, int64_t batch,
                                        int64_t classes) {
  if (operand.rank != 2 || (operand.dims[0] != batch && operand.dims[0] != 1) ||
      (operand.dims[1] != classes && operand.dims[1] != 1)) {
    return absl::InvalidArgumentError(
        "cross-entropy operands must be rank 2 and broadcastable to the backprop shape");
  }
  return Broadcast2D{operand.dims[0] == 1 ? 0 : operand.dims[1], operand.dims[1] == 1 ? 0 : 1};
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

template <typename T>
void SparseSoftmaxCrossEntropyRows(const Eigen::ThreadPoolDevice& device, const T* logits,
                                   const int64_t* labels, T* loss, T* backprop, int64_t batch,
                                   int64_t classes) {
  using C = ComputeType<T>;
  device.parallelFor(batch, RowCost(classes, 2 * sizeof(T)), [&](Eigen::Index begin,
                                                                  Eigen::Index end) {
    RowArray<C> shifted(classes), probabilities(classes);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t label = labels[b];
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

// reduction::kSoftmax.
absl::Status Softmax(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings tensor,
                        context.Descriptor<TensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(reduction::SoftmaxParams params,
                        context.Params().Get<reduction::SoftmaxParams>());
  if (tensor.rank != 2 || tensor.dims[0] < 0 || tensor.dims[1] < 0) {
    return absl::InvalidArgumentError("softmax takes a [batch, classes] tensor");
  }
  const int64_t batch = tensor.dims[0], classes = tensor.dims[1];
  VGPU_ASSIGN_OR_RETURN(const int64_t count, DenseElementCount(tensor));
  return Dispatch::Floating(tensor.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, count));
    VGPU_ASSIGN_OR_RETURN(T* y, context.Buffer<T>(1, count));
    if (count == 0) return absl::OkStatus();
    SoftmaxRows<T>(*context.device, x, y, batch, classes, params.log != 0);
    return absl::OkStatus();
  });
}

// reduction::kSoftmaxCrossEntropy.
absl::Status SoftmaxCrossEntropy(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(4));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings logits_desc,
                        context.Descriptor<TensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings labels_desc,
                        context.Descriptor<TensorDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings backprop_desc,
                        context.Descriptor<TensorDescriptorSettings>(2));
  if (backprop_desc.rank != 2 || backprop_desc.dims[0] < 0 || backprop_desc.dims[1] < 0) {
    return absl::InvalidArgumentError("cross-entropy backprop must be [batch, classes]");
  }
  if (logits_desc.dtype != backprop_desc.dtype || labels_desc.dtype != backprop_desc.dtype) {
    return absl::InvalidArgumentError("cross-entropy operand dtypes differ");
  }
  const int64_t batch = backprop_desc.dims[0], classes = backprop_desc.dims[1];
  VGPU_ASSIGN_OR_RETURN(const int64_t count, DenseElementCount(backprop_desc));
  VGPU_ASSIGN_OR_RETURN(Broadcast2D logits_layout, BroadcastOf(logits_desc, batch, classes));
  VGPU_ASSIGN_OR_RETURN(Broadcast2D labels_layout, BroadcastOf(labels_desc, batch, classes));
  VGPU_ASSIGN_OR_RETURN(const int64_t logits_count, DenseElementCount(logits_desc));
  VGPU_ASSIGN_OR_RETURN(const int64_t labels_count, DenseElementCount(labels_desc));
  return Dispatch::Floating(backprop_desc.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* logits, context.Buffer<const T>(0, logits_count));
    VGPU_ASSIGN_OR_RETURN(const T* labels, context.Buffer<const T>(1, labels_count));
    VGPU_ASSIGN_OR_RETURN(T* loss, context.Buffer<T>(2, batch));
    VGPU_ASSIGN_OR_RETURN(T* backprop, context.Buffer<T>(3, count));
    if (batch == 0) return absl::OkStatus();
    if (classes == 0) {
      std::fill(loss, loss + batch, T(0));
      return absl::OkStatus();
    }
    SoftmaxCrossEntropyRows<T>(*context.device, logits, logits_layout, labels, labels_layout,
                               loss, backprop, batch, classes);
    return absl::OkStatus();
  });
}

// reduction::kSparseSoftmaxCrossEntropy.
absl::Status SparseSoftmaxCrossEntropy(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings logits_desc,
                        context.Descriptor<TensorDescriptorSettings>(0));
  if (logits_desc.rank != 2 || logits_desc.dims[0] < 0 || logits_desc.dims[1] <= 0) {
    return absl::InvalidArgumentError(
        "sparse cross-entropy takes logits [batch, classes > 0]");
  }
  const int64_t batch = logits_desc.dims[0], classes = logits_desc.dims[1];
  VGPU_ASSIGN_OR_RETURN(const int64_t count, DenseElementCount(logits_desc));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> labels,
                        reader.GetArray<int64_t>(static_cast<uint32_t>(batch)));
  if (static_cast<int64_t>(labels.size()) != batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", batch, " labels, the launch carries ", labels.size()));
  }
  return Dispatch::Floating(logits_desc.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* logits, context.Buffer<const T>(0, count));
    VGPU_ASSIGN_OR_RETURN(T* loss, context.Buffer<T>(1, batch));
    VGPU_ASSIGN_OR_RETURN(T* backprop, context.Buffer<T>(2, count));
    if (batch == 0) return absl::OkStatus();
    SparseSoftmaxCrossEntropyRows<T>(*context.device, logits, labels.data(), loss, backprop,
                                     batch, classes);
    return absl::OkStatus();
  });
}

}  // namespace

void AddSoftmaxKernels(KernelTable& table) {
  table.Add(reduction::kSoftmax, "softmax", Softmax);
  table.Add(reduction::kSoftmaxCrossEntropy, "softmax_cross_entropy", SoftmaxCrossEntropy);
  table.Add(reduction::kSparseSoftmaxCrossEntropy, "sparse_softmax_cross_entropy",
            SparseSoftmaxCrossEntropy);
}

}  // namespace vgpu::cpu_kernels
