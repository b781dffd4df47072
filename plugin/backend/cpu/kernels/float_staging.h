// Converting 16-bit floating arrays to float32 and back on the CPU executor, for kernels that
// run their float32 code on staged copies of half/bfloat16 tensors (max pooling with a window
// index, bias gradients, casts). half <-> float uses the F16C instructions where the CPU has
// them (eight elements an instruction, as TensorFlow's wheel converts), Eigen's software
// conversion otherwise; the results are the same (round to nearest even). bfloat16 <-> float
// works on the bits (a shift; round to nearest even, a NaN the quiet NaN of its sign), as Eigen
// converts, in loops the compiler vectorises.
#ifndef VGPU_BACKEND_CPU_KERNELS_FLOAT_STAGING_H_
#define VGPU_BACKEND_CPU_KERNELS_FLOAT_STAGING_H_

#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif
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

// out[i] = float(in[i]) for i < n, on the device's threads (blocks until done). T is half or
// bfloat16.
template <typename T>
void WidenToFloat(const Eigen::ThreadPoolDevice& device, const T* in, float* out, int64_t n) {
  static_assert(kIsFloat16Bit<T>);
  ParallelBlocks(device, n, ElementCost(sizeof(T), sizeof(float), 1),
                 [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, Eigen::half>) {
      HalfToFloat(in + begin, out + begin, end - begin);
    } else {
      BFloat16ToFloat(in + begin, out + begin, end - begin);
    }
  });
}

// out[i] = T(in[i]) for i < n, on the device's threads (blocks until done). T is half or
// bfloat16.
template <typename T>
void NarrowFromFloat(const Eigen::ThreadPoolDevice& device, const float* in, T* out,
                     int64_t n) {
  static_assert(kIsFloat16Bit<T>);
  ParallelBlocks(device, n, ElementCost(sizeof(float), sizeof(T), 1),
                 [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, Eigen::half>) {
      FloatToHalf(in + begin, out + begin, end - begin);
    } else {
      FloatToBFloat16(in + begin, out + begin, end - begin);
    }
  });
}

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_FLOAT_STAGING_H_
