// One kernel body for every dtype it supports: calls a templated functor with the element type
// of a protocol DType. Written once for every executor; each executor names the element types
// its kernels compute with (a "types" policy) and gets the same dtype sets, in the same order,
// with the same errors:
//
//   struct CpuElementTypes { using Float16 = Eigen::half; using BFloat16 = Eigen::bfloat16;
//                            using Bool = bool; };
//   using Dispatch = DTypeDispatch<CpuElementTypes>;
//   return Dispatch::Floating(dtype, [&](auto zero) -> absl::Status { using T = ...; });
//
// Host code; header-only (the functor is the kernel's). Includes nothing of any executor.
#ifndef VGPU_BACKEND_LAUNCH_DTYPE_DISPATCH_H_
#define VGPU_BACKEND_LAUNCH_DTYPE_DISPATCH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/protocol/kernel_ids.h"

namespace vgpu {

// `Types` names Float16, BFloat16 and Bool: how an executor's kernels hold those dtypes (float,
// double and the integers are the C++ types everywhere).
template <typename Types>
struct DTypeDispatch {
  // fn(T{}) for the floating-point dtypes (float32, float64, float16, bfloat16).
  template <typename Fn>
  static absl::Status Floating(DType dtype, Fn&& fn) {
    switch (dtype) {
      case DType::kFloat32: return fn(float{});
      case DType::kFloat64: return fn(double{});
      case DType::kFloat16: return fn(typename Types::Float16{});
      case DType::kBFloat16: return fn(typename Types::BFloat16{});
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("dtype ", static_cast<uint32_t>(dtype), " is not a floating-point type"));
    }
  }

  // fn(T{}) for every numeric dtype (floating point, int32, int64, uint8).
  template <typename Fn>
  static absl::Status Numeric(DType dtype, Fn&& fn) {
    switch (dtype) {
      case DType::kInt32: return fn(int32_t{});
      case DType::kInt64: return fn(int64_t{});
      case DType::kUInt8: return fn(uint8_t{});
      default: return Floating(dtype, fn);
    }
  }

  // fn(T{}) for every dtype, bool included.
  template <typename Fn>
  static absl::Status All(DType dtype, Fn&& fn) {
    if (dtype == DType::kBool) return fn(typename Types::Bool{});
    return Numeric(dtype, fn);
  }

  // fn(T{}) for int32 and int64 (integer outputs, counts).
  template <typename Fn>
  static absl::Status Int32Or64(DType dtype, Fn&& fn) {
    return Int32Or64Named("dtype", dtype, fn);
  }

  // fn(Index{}) for an index dtype (int32 or int64).
  template <typename Fn>
  static absl::Status Index(DType index_dtype, Fn&& fn) {
    return Int32Or64Named("index dtype", index_dtype, fn);
  }

  // fn(E{}) with an unsigned integer type E of `element_size` bytes (1, 2, 4 or 8), for kernels
  // that only move elements; InvalidArgument for any other size.
  template <typename Fn>
  static absl::Status ElementSize(uint32_t element_size, Fn&& fn) {
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

 private:
  template <typename Fn>
  static absl::Status Int32Or64Named(const char* what, DType dtype, Fn&& fn) {
    switch (dtype) {
      case DType::kInt32: return fn(int32_t{});
      case DType::kInt64: return fn(int64_t{});
      default:
        return absl::InvalidArgumentError(
            absl::StrCat(what, " ", static_cast<uint32_t>(dtype), " is not int32 or int64"));
    }
  }
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_DTYPE_DISPATCH_H_
