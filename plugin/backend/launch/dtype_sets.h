// The dtype subsets of the families that serve neither every floating nor every numeric dtype,
// written once over any DTypeDispatch (dtype_dispatch.h). A launch reader checks a subset with
// ReaderDispatch and AcceptDType, so that its error is, word for word, the one the executor's
// dispatch of the same subset would give; the kernels then dispatch with their own types:
//
//   VGPU_RETURN_IF_ERROR(DispatchReducible<ReaderDispatch>(dtype, AcceptDType()));  // reader
//   return DispatchReducible<Dispatch>(launch.dtype, [&](auto zero) { ... });       // kernel
//
// Host code; header-only.
#ifndef VGPU_BACKEND_LAUNCH_DTYPE_SETS_H_
#define VGPU_BACKEND_LAUNCH_DTYPE_SETS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "plugin/protocol/kernel_ids.h"

namespace vgpu {

// A dispatch functor that only accepts: Dispatch::Xxx(dtype, AcceptDType()) is OkStatus when
// the set holds `dtype`, the set's error otherwise.
struct AcceptDType {
  template <typename T>
  absl::Status operator()(T) const {
    return absl::OkStatus();
  }
};

// fn(T{}) for int64 and the floating dtypes, what the reductions and arg-reductions are built
// for; any other dtype (int32 and uint8 included) fails with Dispatch::Floating's error.
template <typename Dispatch, typename Fn>
absl::Status DispatchReducible(DType dtype, Fn&& fn) {
  if (dtype == DType::kInt64) return fn(int64_t{});
  return Dispatch::Floating(dtype, fn);
}

// fn(T{}) for the signed dtypes (floating, int32, int64), what range, the scans and top-k are
// built for; any other dtype fails with Dispatch::Floating's error (Dispatch::Numeric's too for
// bool and unknown values; the readers refuse uint8 with their own message first).
template <typename Dispatch, typename Fn>
absl::Status DispatchSigned(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt64: return fn(int64_t{});
    default: return Dispatch::Floating(dtype, fn);
  }
}

// DispatchSigned as the dtype set of a typed kernel (typed_kernel.h's DTypes).
struct SignedDTypes {
  template <typename Dispatch, typename Fn>
  static absl::Status Switch(DType dtype, Fn&& fn) {
    return DispatchSigned<Dispatch>(dtype, fn);
  }
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_DTYPE_SETS_H_
