// Converting 16-bit floating arrays to float32 and back on the CPU executor, for kernels that
// run their float32 code on staged copies of half/bfloat16 tensors (max pooling with a window
// index where no 16-bit vector variant runs, bias gradients, casts) or compute in float32 run by
// run (TransformThroughFloat: bias additions and ReLU-family activations). half <-> float uses the F16C instructions where the CPU has
// them (eight elements an instruction, as TensorFlow's wheel converts), Eigen's software
// conversion otherwise; the results are the same (round to nearest even). bfloat16 <-> float
// works on the bits (a shift; round to nearest even, a NaN the quiet NaN of its sign), as Eigen
// converts, in loops the compiler vectorises.
#ifndef VGPU_BACKEND_CPU_KERNELS_FLOAT_STAGING_H_
#define VGPU_BACKEND_CPU_KERNELS_FLOAT_STAGING_H_

#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "plugin/backend/cpu/kernels/elementwise_broadcast.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {

// out[i] = float(in[i]) / out[i] = half(in[i]) for i < n, on the calling thread.
void HalfToFloat(const Eigen::half* in, float* out, int64_t n);
void FloatToHalf(const float* in, Eigen::half* out, int64_t n);
void BFloat16ToFloat(const Eigen::bfloat16* in, float* out, int64_t n);
void FloatToBFloat16(const float* in, Eigen::bfloat16* out, int64_t n);

// The 16-bit floating types, which kernels may stage as float32.
template <typename T>
inline constexpr bool kIsFloat16Bit =
    std::is_same_v<T, Eigen::half> || std::is_same_v<T, Eigen::bfloat16>;

// out[i] = float(in[i]) / out[i] = T(in[i]) for i < n, on the calling thread. T is half or
// bfloat16.
template <typename T>
inline void WidenOnThisThread(const T* in, float* out, int64_t n) {
  static_assert(kIsFloat16Bit<T>);
  if constexpr (std::is_same_v<T, Eigen::half>) {
    HalfToFloat(in, out, n);
  } else {
    BFloat16ToFloat(in, out, n);
  }
}
template <typename T>
inline void NarrowOnThisThread(const float* in, T* out, int64_t n) {
  static_assert(kIsFloat16Bit<T>);
  if constexpr (std::is_same_v<T, Eigen::half>) {
    FloatToHalf(in, out, n);
  } else {
    FloatToBFloat16(in, out, n);
  }
}

// out[i] = float(in[i]) for i < n, on the device's threads (blocks until done). T is half or
// bfloat16.
template <typename T>
void WidenToFloat(const Eigen::ThreadPoolDevice& device, const T* in, float* out, int64_t n) {
  ParallelBlocks(device, n, ElementCost(sizeof(T), sizeof(float), 1),
                 [&](int64_t begin, int64_t end) {
    WidenOnThisThread(in + begin, out + begin, end - begin);
  });
}

// out[i] = T(in[i]) for i < n, on the device's threads (blocks until done). T is half or
// bfloat16.
template <typename T>
void NarrowFromFloat(const Eigen::ThreadPoolDevice& device, const float* in, T* out,
                     int64_t n) {
  ParallelBlocks(device, n, ElementCost(sizeof(float), sizeof(T), 1),
                 [&](int64_t begin, int64_t end) {
    NarrowOnThisThread(in + begin, out + begin, end - begin);
  });
}

// The elements TransformThroughFloat stages at a time on each thread (16 KiB of float32 per
// input, on the stack).
inline constexpr int64_t kStagedRunElements = 4096;

// out[i] for i < n computed in float32, run by run on the device's threads: each run of at
// most kStagedRunElements elements of every input is widened into float32 buffers on the
// stack, compute(values, begin, count) rewrites values[0] (the first input's run) in place
// (values[k]: input k's run; begin: the run's first element index), and values[0] is narrowed
// into out. For a kernel whose 16-bit result is its float32 result rounded once (an add, a
// product of two 16-bit numbers, a max), that is what evaluating it in T computes, in vector
// code and without a tensor-sized copy. `cycles` is compute's cost per element. An input may be
// `out` itself. Blocks until done. T is half or bfloat16.
template <typename T, size_t kInputs, typename Compute>
void TransformThroughFloat(const Eigen::ThreadPoolDevice& device,
                           const std::array<const T*, kInputs>& inputs, T* out, int64_t n,
                           double cycles, const Compute& compute) {
  static_assert(kInputs >= 1);
  ParallelBlocks(device, n, ElementCost(kInputs * sizeof(T), sizeof(T), cycles + 2 * kInputs),
                 [&](int64_t begin, int64_t end) {
    alignas(64) float staged[kInputs][kStagedRunElements];
    std::array<float*, kInputs> values;
    for (size_t k = 0; k < kInputs; ++k) values[k] = staged[k];
    for (int64_t run = begin; run < end; run += kStagedRunElements) {
      const int64_t count = std::min(kStagedRunElements, end - run);
      for (size_t k = 0; k < kInputs; ++k) WidenOnThisThread(inputs[k] + run, staged[k], count);
      compute(values, run, count);
      NarrowOnThisThread(staged[0], out + run, count);
    }
  });
}

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_FLOAT_STAGING_H_
