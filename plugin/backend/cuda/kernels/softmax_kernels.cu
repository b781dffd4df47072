// Softmax / log softmax (reduction::kSoftmax), SoftmaxCrossEntropyWithLogits
// (reduction::kSoftmaxCrossEntropy) and SparseSoftmaxCrossEntropyWithLogits
// (reduction::kSparseSoftmaxCrossEntropy) on the CUDA executor. One block of 256 threads per row
// (blocks loop over rows): the row maximum, then the sum of exp(x - max), each by a fixed-order
// block tree (deterministic), computed in float for the 16-bit dtypes and double for double, as
// the CPU executor (cpu/kernels/softmax_kernels.cc); then each element is written. The host
// checks every launch exactly as the CPU kernel does before enqueuing.
//
// The sparse labels arrive in the launch's parameter block (host memory, validated there as the
// CPU kernel does: a label outside [0, classes) is InvalidArgument); they travel to the device as
// kernel parameters, kLabelsPerLaunch per launch, so no device copy or allocation is needed.
//
// GPU run must confirm: each kernel x dtype against the CPU executor (rtol 1e-3 float32), rows of
// 1..100k classes, broadcast logits/labels (dims of 1) for the dense loss, classes == 0 (loss 0),
// batches above kLabelsPerLaunch (several launches), the label range error, and that kernel
// parameter blocks of ~8 KiB launch (CUDA 12.1+ allows 32 KiB on sm_70+).
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/device_types.cuh"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/reduction.h"

namespace vgpu::cuda {

void AddCudaSoftmaxKernels(CudaKernelTable& table);

namespace {

using namespace kernels;  // NOLINT: the family's own helper namespace

constexpr unsigned kRowThreads = 256;  // the block trees assume exactly this many

// The block-wide combination of every thread's `value` by `combine`, in a fixed tree order;
// every thread gets the result. `scratch` holds kRowThreads values; all threads must call.
template <typename W, typename Combine>
__device__ W BlockCombine(W value, W* scratch, Combine combine) {
  const unsigned t = threadIdx.x;
  scratch[t] = value;
  __syncthreads();
  for (unsigned half = kRowThreads / 2; half > 0; half >>= 1) {
    if (t < half) scratch[t] = combine(scratch[t], scratch[t + half]);
    __syncthreads();
  }
  const W result = scratch[0];
  __syncthreads();  // scratch is reused by the next call
  return result;
}

template <typename W>
__device__ W MaxOf(W a, W b) {
  return a < b ? b : a;
}
template <typename W>
__device__ W SumOf(W a, W b) {
  return a + b;
}

// The maximum and the sum of exp(x - maximum) of one row, element c at row[c * stride].
template <typename T, typename W>
struct RowStatistics {
  W maximum;
  W sum;
};

template <typename T, typename W>
__device__ RowStatistics<T, W> RowMaxAndSum(const Storage<T>* row, int64_t stride,
                                            int64_t classes, W* scratch) {
  W local_max = -dmath::Infinity<W>();
  for (int64_t c = threadIdx.x; c < classes; c += kRowThreads) {
    local_max = MaxOf(local_max, static_cast<W>(ToDouble(Load<T>(row, c * stride))));
  }
  const W maximum = BlockCombine(local_max, scratch, MaxOf<W>);
  W local_sum = 0;
  for (int64_t c = threadIdx.x; c < classes; c += kRowThreads) {
    local_sum += dmath::Exp(static_cast<W>(ToDouble(Load<T>(row, c * stride))) - maximum);
  }
  const W sum = BlockCombine(local_sum, scratch, SumOf<W>);
  return {maximum, sum};
}

template <typename T>
__device__ Compute<T> Narrowed(WideFloat<T> value) {
  return Compute<T>(value);  // rounds to nearest even for the 16-bit types
}

template <typename T>
__global__ void SoftmaxKernel(int64_t batch, int64_t classes, bool log, const Storage<T>* x,
                              Storage<T>* y) {
  using W = WideFloat<T>;
  __shared__ W scratch[kRowThreads];
  for (int64_t b = blockIdx.x; b < batch; b += gridDim.x) {
    const Storage<T>* row = x + b * classes;
    Storage<T>* out = y + b * classes;
    const RowStatistics<T, W> stats = RowMaxAndSum<T, W>(row, 1, classes, scratch);
    const W log_sum = dmath::Log(stats.sum);
    const W inverse_sum = W(1) / stats.sum;
    for (int64_t c = threadIdx.x; c < classes; c += kRowThreads) {
      const W shifted = static_cast<W>(ToDouble(Load<T>(row, c))) - stats.maximum;
      Store<T>(out, c, Narrowed<T>(log ? shifted - log_sum : dmath::Exp(shifted) * inverse_sum));
    }
  }
}

// reduction::kSoftmax.
absl::Status Softmax(const CudaKernelContext& context) {
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
    VGPU_ASSIGN_OR_RETURN(const Storage<T>* x, ConstDeviceBuffer<T>(context, 0, count));
    VGPU_ASSIGN_OR_RETURN(Storage<T>* y, DeviceBuffer<T>(context, 1, count));
    if (count == 0) return absl::OkStatus();
    return LaunchRows(context, "softmax", batch, kRowThreads, SoftmaxKernel<T>, batch, classes,
                      params.log != 0, x, y);
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
__global__ void SoftmaxCrossEntropyKernel(int64_t batch, int64_t classes, const Storage<T>* logits,
                                          Broadcast2D logits_layout, const Storage<T>* labels,
                                          Broadcast2D labels_layout, Storage<T>* loss,
                                          Storage<T>* backprop) {
  using W = WideFloat<T>;
  __shared__ W scratch[kRowThreads];
  for (int64_t b = blockIdx.x; b < batch; b += gridDim.x) {
    const Storage<T>* logit_row = logits + b * logits_layout.row_stride;
    const Storage<T>* label_row = labels + b * labels_layout.row_stride;
    const RowStatistics<T, W> stats =
        RowMaxAndSum<T, W>(logit_row, logits_layout.col_stride, classes, scratch);
    const W log_sum = dmath::Log(stats.sum);
    W local_loss = 0;
    for (int64_t c = threadIdx.x; c < classes; c += kRowThreads) {
      const W shifted =
          static_cast<W>(ToDouble(Load<T>(logit_row, c * logits_layout.col_stride))) -
          stats.maximum;
      const W label = static_cast<W>(ToDouble(Load<T>(label_row, c * labels_layout.col_stride)));
      local_loss += label * (log_sum - shifted);
      Store<T>(backprop + b * classes, c, Narrowed<T>(dmath::Exp(shifted) / stats.sum - label));
    }
    const W row_loss = BlockCombine(local_loss, scratch, SumOf<W>);
    if (threadIdx.x == 0) Store<T>(loss, b, Narrowed<T>(row_loss));
  }
}

template <typename S>
__global__ void ZeroKernel(int64_t count, S* out) {
  for (int64_t i = GridStart(); i < count; i += GridStride()) out[i] = S{};
}

// reduction::kSoftmaxCrossEntropy.
absl::Status SoftmaxCrossEntropy(const CudaKernelContext& context) {
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
    VGPU_ASSIGN_OR_RETURN(const Storage<T>* logits, ConstDeviceBuffer<T>(context, 0, logits_count));
    VGPU_ASSIGN_OR_RETURN(const Storage<T>* labels, ConstDeviceBuffer<T>(context, 1, labels_count));
    VGPU_ASSIGN_OR_RETURN(Storage<T>* loss, DeviceBuffer<T>(context, 2, batch));
    VGPU_ASSIGN_OR_RETURN(Storage<T>* backprop, DeviceBuffer<T>(context, 3, count));
    if (batch == 0) return absl::OkStatus();
    if (classes == 0) {
      return LaunchGrid(context, "softmax_cross_entropy", batch, ZeroKernel<Storage<T>>, batch,
                        loss);
    }
    return LaunchRows(context, "softmax_cross_entropy", batch, kRowThreads,
                      SoftmaxCrossEntropyKernel<T>, batch, classes, logits, logits_layout, labels,
                      labels_layout, loss, backprop);
  });
}

// The labels of up to kLabelsPerLaunch rows, passed by value as a kernel parameter (8 KiB).
inline constexpr int64_t kLabelsPerLaunch = 1024;
struct LabelChunk {
  int64_t labels[kLabelsPerLaunch];
};

// Rows [first_row, first_row + rows) of the batch; labels.labels[r] is row first_row + r's.
template <typename T>
__global__ void SparseSoftmaxCrossEntropyKernel(int64_t first_row, int64_t rows, int64_t classes,
                                                LabelChunk labels, const Storage<T>* logits,
                                                Storage<T>* loss, Storage<T>* backprop) {
  using W = WideFloat<T>;
  __shared__ W scratch[kRowThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t b = first_row + r;
    const int64_t label = labels.labels[r];
    if (label < 0 || label >= classes) {  // TensorFlow's CUDA kernel: a NaN loss and row
      const W nan = W(0) / W(0);
      for (int64_t c = threadIdx.x; c < classes; c += kRowThreads) {
        Store<T>(backprop + b * classes, c, Narrowed<T>(nan));
      }
      if (threadIdx.x == 0) Store<T>(loss, b, Narrowed<T>(nan));
      continue;
    }
    const Storage<T>* row = logits + b * classes;
    const RowStatistics<T, W> stats = RowMaxAndSum<T, W>(row, 1, classes, scratch);
    for (int64_t c = threadIdx.x; c < classes; c += kRowThreads) {
      const W shifted = static_cast<W>(ToDouble(Load<T>(row, c))) - stats.maximum;
      W probability = dmath::Exp(shifted) / stats.sum;
      if (c == label) probability -= W(1);
      Store<T>(backprop + b * classes, c, Narrowed<T>(probability));
    }
    if (threadIdx.x == 0) {
      const W label_shifted = static_cast<W>(ToDouble(Load<T>(row, label))) - stats.maximum;
      Store<T>(loss, b, Narrowed<T>(dmath::Log(stats.sum) - label_shifted));
    }
  }
}

// reduction::kSparseSoftmaxCrossEntropy.
absl::Status SparseSoftmaxCrossEntropy(const CudaKernelContext& context) {
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
    VGPU_ASSIGN_OR_RETURN(const Storage<T>* logits, ConstDeviceBuffer<T>(context, 0, count));
    VGPU_ASSIGN_OR_RETURN(Storage<T>* loss, DeviceBuffer<T>(context, 1, batch));
    VGPU_ASSIGN_OR_RETURN(Storage<T>* backprop, DeviceBuffer<T>(context, 2, count));
    for (int64_t first = 0; first < batch; first += kLabelsPerLaunch) {
      const int64_t rows = std::min(kLabelsPerLaunch, batch - first);
      LabelChunk chunk = {};
      for (int64_t r = 0; r < rows; ++r) chunk.labels[r] = labels[first + r];
      VGPU_RETURN_IF_ERROR(LaunchRows(context, "sparse_softmax_cross_entropy", rows, kRowThreads,
                                      SparseSoftmaxCrossEntropyKernel<T>, first, rows, classes,
                                      chunk, logits, loss, backprop));
    }
    return absl::OkStatus();
  });
}

}  // namespace

void AddCudaSoftmaxKernels(CudaKernelTable& table) {
  table.Add(reduction::kSoftmax, "softmax", Softmax);
  table.Add(reduction::kSoftmaxCrossEntropy, "softmax_cross_entropy", SoftmaxCrossEntropy);
  table.Add(reduction::kSparseSoftmaxCrossEntropy, "sparse_softmax_cross_entropy",
            SparseSoftmaxCrossEntropy);
}

}  // namespace vgpu::cuda
