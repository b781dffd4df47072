// Softmax / log softmax (reduction::kSoftmax), SoftmaxCrossEntropyWithLogits
// (reduction::kSoftmaxCrossEntropy) and SparseSoftmaxCrossEntropyWithLogits
// (reduction::kSparseSoftmaxCrossEntropy) on the CUDA executor. One block of 256 threads per row
// (blocks loop over rows): the row maximum, then the sum of exp(x - max), each by a fixed-order
// block tree (deterministic), computed in float for the 16-bit dtypes and double for double, as
// the CPU executor (cpu/kernels/softmax_kernels.cc); then each element is written. The launch
// layer (launch/softmax_launch.h) reads and validates every launch on the host, as for the CPU
// executor, before anything is enqueued.
//
// The sparse labels are read from device memory (int32 or int64; a label outside [0, classes)
// gives a NaN loss and backprop row, as on the CPU). The older form with the labels in the
// launch's parameter block (kSparseSoftmaxCrossEntropyHostLabels, for recorded traces) passes
// them as kernel parameters, kLabelsPerLaunch per launch.
//
// GPU run must confirm: each kernel x dtype against the CPU executor (rtol 1e-3 float32), rows of
// 1..100k classes, broadcast logits/labels (dims of 1) for the dense loss, classes == 0 (loss 0),
// int32 and int64 device labels, host labels in batches above kLabelsPerLaunch (several
// launches), out-of-range labels (NaN rows), and that kernel parameter blocks of ~8 KiB launch
// (CUDA 12.1+ allows 32 KiB on sm_70+).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/device_types.cuh"
#include "plugin/backend/launch/softmax_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/reduction.h"

namespace vgpu::cuda {

namespace {

using namespace kernels;         // NOLINT: the family's own helper namespace
using namespace softmax_launch;  // NOLINT: the family's launches, readers and buffers

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

// reduction::kSoftmax: one block per row.
struct Softmax : FloatingKernel<Softmax, ReadSoftmaxLaunch> {
  template <typename T>
  static absl::Status Run(const CudaKernelContext& context, const SoftmaxLaunch& launch) {
    VGPU_ASSIGN_OR_RETURN(auto b, (TakeElementwiseBuffers<T, 1>(context, launch.count)));
    if (launch.count == 0) return absl::OkStatus();
    return LaunchRows(context, "softmax", launch.batch, kRowThreads, SoftmaxKernel<T>,
                      launch.batch, launch.classes, launch.log, b.in[0], b.out);
  }
};

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

// reduction::kSoftmaxCrossEntropy: one block per row.
struct SoftmaxCrossEntropy : FloatingKernel<SoftmaxCrossEntropy, ReadCrossEntropyLaunch> {
  template <typename T>
  static absl::Status Run(const CudaKernelContext& context, const CrossEntropyLaunch& launch) {
    VGPU_ASSIGN_OR_RETURN(auto b, TakeCrossEntropyBuffers<T>(context, launch));
    const int64_t batch = launch.batch;
    if (batch == 0) return absl::OkStatus();
    if (launch.classes == 0) {
      return LaunchGrid(context, "softmax_cross_entropy", batch, ZeroKernel<Storage<T>>, batch,
                        b.loss);
    }
    return LaunchRows(context, "softmax_cross_entropy", batch, kRowThreads,
                      SoftmaxCrossEntropyKernel<T>, batch, launch.classes, b.logits,
                      launch.logits_layout, b.labels, launch.labels_layout, b.loss, b.backprop);
  }
};

// The labels of up to kLabelsPerLaunch rows, passed by value as a kernel parameter (8 KiB).
inline constexpr int64_t kLabelsPerLaunch = 1024;
struct LabelChunk {
  int64_t labels[kLabelsPerLaunch];
};

// The labels of a chunk of rows passed by value (kSparseSoftmaxCrossEntropyHostLabels): row
// first_row + r's is chunk.labels[r].
struct ChunkLabels {
  LabelChunk chunk;
  __device__ int64_t operator()(int64_t first_row, int64_t r) const { return chunk.labels[r]; }
};

// The labels in device memory (kSparseSoftmaxCrossEntropy), int32 or int64.
template <typename Label>
struct DeviceLabels {
  const Label* labels;
  __device__ int64_t operator()(int64_t first_row, int64_t r) const {
    return static_cast<int64_t>(labels[first_row + r]);
  }
};

// Rows [first_row, first_row + rows) of the batch; labels(first_row, r) is row first_row + r's.
template <typename T, typename Labels>
__global__ void SparseSoftmaxCrossEntropyKernel(int64_t first_row, int64_t rows, int64_t classes,
                                                Labels labels, const Storage<T>* logits,
                                                Storage<T>* loss, Storage<T>* backprop) {
  using W = WideFloat<T>;
  __shared__ W scratch[kRowThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t b = first_row + r;
    const int64_t label = labels(first_row, r);
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

// reduction::kSparseSoftmaxCrossEntropy: the labels read from device memory, one launch, one
// block per row.
struct SparseSoftmaxCrossEntropy
    : FloatingKernel<SparseSoftmaxCrossEntropy, ReadSparseCrossEntropyLaunch> {
  template <typename T>
  static absl::Status Run(const CudaKernelContext& context,
                          const SparseCrossEntropyLaunch& launch) {
    VGPU_ASSIGN_OR_RETURN(auto b, TakeSparseCrossEntropyBuffers<T>(context, launch));
    if (b.labels32 != nullptr) {
      return LaunchRows(context, "sparse_softmax_cross_entropy", launch.batch, kRowThreads,
                        SparseSoftmaxCrossEntropyKernel<T, DeviceLabels<int32_t>>, int64_t{0},
                        launch.batch, launch.classes, DeviceLabels<int32_t>{b.labels32},
                        b.logits, b.loss, b.backprop);
    }
    return LaunchRows(context, "sparse_softmax_cross_entropy", launch.batch, kRowThreads,
                      SparseSoftmaxCrossEntropyKernel<T, DeviceLabels<int64_t>>, int64_t{0},
                      launch.batch, launch.classes, DeviceLabels<int64_t>{b.labels64}, b.logits,
                      b.loss, b.backprop);
  }
};

// reduction::kSparseSoftmaxCrossEntropyHostLabels: the labels passed by value, kLabelsPerLaunch
// rows a launch, one block per row.
struct SparseSoftmaxCrossEntropyHostLabels
    : FloatingKernel<SparseSoftmaxCrossEntropyHostLabels,
                     ReadSparseCrossEntropyHostLabelsLaunch> {
  template <typename T>
  static absl::Status Run(const CudaKernelContext& context,
                          const SparseCrossEntropyLaunch& launch) {
    VGPU_ASSIGN_OR_RETURN(auto b, TakeSparseCrossEntropyBuffers<T>(context, launch));
    const int64_t batch = launch.batch;
    for (int64_t first = 0; first < batch; first += kLabelsPerLaunch) {
      const int64_t rows = std::min(kLabelsPerLaunch, batch - first);
      ChunkLabels chunk = {};
      for (int64_t r = 0; r < rows; ++r) chunk.chunk.labels[r] = launch.labels[first + r];
      VGPU_RETURN_IF_ERROR(LaunchRows(context, "sparse_softmax_cross_entropy", rows, kRowThreads,
                                      SparseSoftmaxCrossEntropyKernel<T, ChunkLabels>, first,
                                      rows, launch.classes, chunk, b.logits, b.loss,
                                      b.backprop));
    }
    return absl::OkStatus();
  }
};

}  // namespace

void AddCudaSoftmaxKernels(CudaKernelTable& table) {
  table.AddFamily(kernel_families::kSoftmax, Softmax::Launch, SoftmaxCrossEntropy::Launch,
                  SparseSoftmaxCrossEntropyHostLabels::Launch, SparseSoftmaxCrossEntropy::Launch);
}

}  // namespace vgpu::cuda
