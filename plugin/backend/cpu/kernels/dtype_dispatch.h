// The CPU executor's element types for the shared dtype dispatch (launch/dtype_dispatch.h),
// its kernels of one typed body (launch/typed_kernel.h), and the flat Eigen views its kernels
// map buffers with.
#ifndef VGPU_BACKEND_CPU_KERNELS_DTYPE_DISPATCH_H_
#define VGPU_BACKEND_CPU_KERNELS_DTYPE_DISPATCH_H_

#include <cstdint>

#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/launch/dtype_dispatch.h"
#include "plugin/backend/launch/typed_kernel.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {

// How the CPU executor's kernels hold the dtypes C++ has no type for.
struct CpuElementTypes {
  using Float16 = Eigen::half;
  using BFloat16 = Eigen::bfloat16;
  using Bool = bool;
};

// The dtype dispatch of the CPU kernels: Dispatch::Floating, Numeric, All, Int32Or64, Index,
// ElementSize (launch/dtype_dispatch.h).
using Dispatch = DTypeDispatch<CpuElementTypes>;

// The base of a kernel that reads its launch with kRead and runs Body::Run<T>(context, launch)
// for the launch's floating-point dtype; Body::Launch is the kernel (launch/typed_kernel.h).
template <typename Body, auto kRead>
using FloatingKernel = TypedKernelOf<Dispatch, KernelContext, Body, kRead>;

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
