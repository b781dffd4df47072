// Column sums of a row-major [rows, columns] matrix on the CPU executor's thread pool, in one
// pass over memory: what BiasAddGrad (NHWC) and Sum/Mean over every dimension but the last
// compute. Eigen's reduction over the outer dimension walks the input once per vector of
// columns and gives the pool few blocks (cnn's first bias gradient, 64x26x26x32 floats: ~0.6
// ms, against TensorFlow-CPU's bias gradient fused into its filter gradient).
#ifndef VGPU_BACKEND_CPU_KERNELS_ROW_SUMS_H_
#define VGPU_BACKEND_CPU_KERNELS_ROW_SUMS_H_

#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif
#include <algorithm>
#include <cstdint>
#include <vector>

#include "plugin/backend/cpu/kernels/float_staging.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {

// The rows of one block of SumColumns: about 64 KiB of input, so that the blocks stream
// through memory and a block's partial row stays in L1.
inline int64_t RowsPerSumBlock(int64_t rows, int64_t columns, size_t element_bytes) {
  const int64_t row_bytes = std::max<int64_t>(1, columns * static_cast<int64_t>(element_bytes));
  return std::clamp<int64_t>((64 << 10) / row_bytes, 1, std::max<int64_t>(rows, 1));
}

// The column loop of one block, vectorised: each column's own sum keeps its order, so the
// vectorisation changes no result (GCC's -O2 cost model would leave it scalar).
template <typename T, typename CT>
__attribute__((optimize("vect-cost-model=dynamic"))) inline void AddRows(
    const T* __restrict matrix, int64_t begin, int64_t end, int64_t columns,
    CT* __restrict partial) {
  for (int64_t r = begin; r < end; ++r) {
    const T* __restrict row = matrix + r * columns;
    for (int64_t c = 0; c < columns; ++c) partial[c] += static_cast<CT>(row[c]);
  }
}

// 16-bit rows are converted to float32 a chunk at a time (F16C for half where the CPU has it, a
// shift for bfloat16: float_staging.h) and then added as AddRows adds them: the same sums, in
// the same order, without Eigen's conversion of each element. Rows of up to kChunk columns are
// converted several at a time (they are contiguous), so that a narrow row (a convolution's 32
// channels) does not pay a conversion call of its own; wider rows a chunk of columns at a time.
template <typename T>
inline void AddSixteenBitRows(const T* __restrict matrix, int64_t begin, int64_t end,
                              int64_t columns, float* __restrict partial) {
  constexpr int64_t kChunk = 4096;
  float converted[kChunk];
  if (columns <= kChunk) {
    const int64_t rows_per_chunk = kChunk / columns;
    for (int64_t r = begin; r < end; r += rows_per_chunk) {
      const int64_t rows = std::min(rows_per_chunk, end - r);
      WidenOnThisThread(matrix + r * columns, converted, rows * columns);
      AddRows<float, float>(converted, 0, rows, columns, partial);
    }
    return;
  }
  for (int64_t r = begin; r < end; ++r) {
    const T* row = matrix + r * columns;
    for (int64_t c0 = 0; c0 < columns; c0 += kChunk) {
      const int64_t n = std::min(kChunk, columns - c0);
      WidenOnThisThread(row + c0, converted, n);
      AddRows<float, float>(converted, 0, 1, n, partial + c0);
    }
  }
}

template <>
inline void AddRows<Eigen::half, float>(const Eigen::half* __restrict matrix, int64_t begin,
                                        int64_t end, int64_t columns,
                                        float* __restrict partial) {
  AddSixteenBitRows(matrix, begin, end, columns, partial);
}

template <>
inline void AddRows<Eigen::bfloat16, float>(const Eigen::bfloat16* __restrict matrix,
                                            int64_t begin, int64_t end, int64_t columns,
                                            float* __restrict partial) {
  AddSixteenBitRows(matrix, begin, end, columns, partial);
}

// result[c] = finish(the sum over r of matrix[r, c], in CT) for every column c. Each block of
// RowsPerSumBlock rows is summed row by row into its own partial, and the partials are added
// in block order: the result depends on the shape only, not on the threads that ran the
// blocks. `finish`: CT -> T (a cast, or a mean's division). Blocks until done.
template <typename T, typename CT, typename Finish>
void SumColumns(const Eigen::ThreadPoolDevice& device, const T* matrix, int64_t rows,
                int64_t columns, T* result, Finish&& finish) {
  if (columns <= 0) return;
  const int64_t block_rows = RowsPerSumBlock(rows, columns, sizeof(T));
  const int64_t blocks = std::max<int64_t>(1, (rows + block_rows - 1) / block_rows);
  std::vector<CT> partials(static_cast<size_t>(blocks * columns), CT(0));
  const Eigen::TensorOpCost block_cost(static_cast<double>(block_rows * columns * sizeof(T)),
                                       static_cast<double>(columns * sizeof(CT)),
                                       static_cast<double>(block_rows * columns));
  device.parallelFor(blocks, block_cost, [&](Eigen::Index first, Eigen::Index last) {
    for (Eigen::Index block = first; block < last; ++block) {
      AddRows<T, CT>(matrix, block * block_rows, std::min(rows, (block + 1) * block_rows),
                     columns, partials.data() + block * columns);
    }
  });
  for (int64_t c = 0; c < columns; ++c) {
    CT sum = partials[static_cast<size_t>(c)];
    for (int64_t block = 1; block < blocks; ++block) {
      sum += partials[static_cast<size_t>(block * columns + c)];
    }
    result[c] = finish(sum);
  }
}

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_ROW_SUMS_H_
