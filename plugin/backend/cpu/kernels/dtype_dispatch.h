// Calls a templated functor with the C++ element type of a protocol DType, so that one kernel
// body serves every dtype it supports.
#ifndef VGPU_BACKEND_CPU_KERNELS_DTYPE_DISPATCH_H_
#define VGPU_BACKEND_CPU_KERNELS_DTYPE_DISPATCH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/protocol/kernel_ids.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {

// Invokes fn(T{}) for the floating-point dtypes (float, double, half, bfloat16).
template <typename Fn>
absl::Status DispatchFloating(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    case DType::kFloat16: return fn(Eigen::half{});
    case DType::kBFloat16: return fn(Eigen::bfloat16{});
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("dtype ", static_cast<uint32_t>(dtype), " is not a floating-point type"));
  }
}

// Invokes fn(T{}) for every numeric dtype (floating point, int32, int64, uint8).
template <typename Fn>
absl::Status DispatchNumeric(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt64: return fn(int64_t{});
    case DType::kUInt8: return fn(uint8_t{});
    default: return DispatchFloating(dtype, fn);
  }
}

// Calls fn(E{}) with an unsigned integer type E of `element_size` bytes (1, 2, 4 or 8), for
// kernels that only move elements; InvalidArgument for any other size.
template <typename Fn>
absl::Status DispatchElementSize(uint32_t element_size, Fn&& fn) {
  switch (element_size) {
    case 1: return fn(uint8_t{});
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    case 8: return fn(uint64_t{});
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("element size ", element_size, " is not 1, 2, 4 or 8"));
  }
}

// Invokes fn(T{}) for every dtype, bool included.
template <typename Fn>
absl::Status DispatchAll(DType dtype, Fn&& fn) {
  if (dtype == DType::kBool) return fn(bool{});
  return DispatchNumeric(dtype, fn);
}

template <typename T>
using FlatMap = Eigen::TensorMap<Eigen::Tensor<T, 1, Eigen::RowMajor>, Eigen::Unaligned>;
template <typename T>
using ConstFlatMap = Eigen::TensorMap<Eigen::Tensor<const T, 1, Eigen::RowMajor>, Eigen::Unaligned>;

// Number of elements of a dense tensor descriptor.
template <typename TensorSettings>
int64_t ElementCount(const TensorSettings& settings) {
  int64_t n = 1;
  for (int i = 0; i < settings.rank; ++i) n *= settings.dims[i];
  return n;
}

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_DTYPE_DISPATCH_H_
