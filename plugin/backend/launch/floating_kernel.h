// The kernel that reads its launch, switches on the launch's floating-point dtype and runs one
// function template for that element type, written once for every executor. An executor's
// family file writes only the typed body, in a struct that names its reader, and registers the
// struct's Launch:
//
//   struct BiasAdd : FloatingKernel<BiasAdd, ReadBiasAddLaunch> {
//     template <typename T>
//     static absl::Status Run(const KernelContext& context, const BiasGeometry& geometry);
//   };
//   table.AddFamily(kernel_families::kBias, BiasAdd::Launch, ...);
//
// FloatingKernel is the executor's FloatingKernelOf with its dtype dispatch and kernel context
// (cpu/kernels/dtype_dispatch.h, cuda/kernels/device_types.cuh). Host code; header-only.
#ifndef VGPU_BACKEND_LAUNCH_FLOATING_KERNEL_H_
#define VGPU_BACKEND_LAUNCH_FLOATING_KERNEL_H_

#include "absl/status/status.h"
#include "plugin/common/status_macros.h"

namespace vgpu {

// The base of Body, a kernel whose launch kRead reads (a family reader,
// `absl::StatusOr<Launch> (const LaunchView&)`, whose Launch has a `dtype`) and whose work is
// Body::Run<T>(context, launch) for the element type T that `Dispatch` (an executor's
// DTypeDispatch) gives that dtype.
template <typename Dispatch, typename Context, typename Body, auto kRead>
struct FloatingKernelOf {
  // The kernel function (an executor's KernelRegistry<Context>::Fn): the reader's error, or
  // Dispatch::Floating's for a dtype that is not floating point, or Body::Run's status.
  static absl::Status Launch(const Context& context) {
    VGPU_ASSIGN_OR_RETURN(const auto launch, kRead(context));
    return Dispatch::Floating(launch.dtype, [&](auto zero) -> absl::Status {
      return Body::template Run<decltype(zero)>(context, launch);
    });
  }
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_FLOATING_KERNEL_H_
