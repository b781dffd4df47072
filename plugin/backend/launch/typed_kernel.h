// The kernel that reads its launch, switches on the launch's dtype and runs one function
// template for that element type, written once for every executor. An executor's family file
// writes only the typed body, in a struct that names its reader, and registers the struct's
// Launch:
//
//   struct BiasAdd : FloatingKernel<BiasAdd, ReadBiasAddLaunch> {
//     template <typename T>
//     static absl::Status Run(const KernelContext& context, const BiasGeometry& geometry);
//   };
//   table.AddFamily(kernel_families::kBias, BiasAdd::Launch, ...);
//
// FloatingKernel is the executor's TypedKernelOf with its dtype dispatch and kernel context, over
// the floating-point dtypes (cpu/kernels/dtype_dispatch.h, cuda/kernels/device_types.cuh); a
// family whose kernels serve another dtype set names that set (DTypes, e.g. dtype_sets.h's
// SignedDTypes). Host code; header-only.
#ifndef VGPU_BACKEND_LAUNCH_TYPED_KERNEL_H_
#define VGPU_BACKEND_LAUNCH_TYPED_KERNEL_H_

#include "absl/status/status.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernel_ids.h"

namespace vgpu {

// The dtype set of a floating-point kernel: Switch<Dispatch>(dtype, fn) is Dispatch::Floating.
struct FloatingDTypes {
  template <typename Dispatch, typename Fn>
  static absl::Status Switch(DType dtype, Fn&& fn) {
    return Dispatch::Floating(dtype, fn);
  }
};

// The base of Body, a kernel whose launch kRead reads (a family reader,
// `absl::StatusOr<Launch> (const LaunchView&)`, whose Launch has a `dtype`) and whose work is
// Body::Run<T>(context, launch) for the element type T that `Dispatch` (an executor's
// DTypeDispatch) gives that dtype in the set DTypes.
template <typename Dispatch, typename Context, typename Body, auto kRead,
          typename DTypes = FloatingDTypes>
struct TypedKernelOf {
  // The kernel function (an executor's KernelRegistry<Context>::Fn): the reader's error, or
  // DTypes' for a dtype outside the set, or Body::Run's status.
  static absl::Status Launch(const Context& context) {
    VGPU_ASSIGN_OR_RETURN(const auto launch, kRead(context));
    return DTypes::template Switch<Dispatch>(launch.dtype, [&](auto zero) -> absl::Status {
      return Body::template Run<decltype(zero)>(context, launch);
    });
  }
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_TYPED_KERNEL_H_
