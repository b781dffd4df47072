// The CPU executor's pooling kernels (protocol/kernels/pooling.h): what the forward/backward
// and the argmax files share. Their launches are read and validated by the launch layer
// (launch/pooling_launch.h); these only compute.
#ifndef VGPU_BACKEND_CPU_KERNELS_POOLING_KERNELS_H_
#define VGPU_BACKEND_CPU_KERNELS_POOLING_KERNELS_H_

#include "absl/status/status.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/launch/pooling_launch.h"

namespace vgpu::cpu_kernels {

using pooling_launch::ArgmaxGeometry;
using pooling_launch::ArgmaxLaunch;
using pooling_launch::ArgmaxTarget;
using pooling_launch::OutputsCovering;
using pooling_launch::PoolGeometry;
using pooling_launch::PoolingLaunch;
using pooling_launch::ReadArgmaxLaunch;
using pooling_launch::ReadPoolingLaunch;
using pooling_launch::RunArgmaxGradient;
using pooling_launch::WindowOf;
using pooling_launch::WindowRange;
using pooling_launch::WithArgmaxBuffers;
using pooling_launch::WithPoolingBuffers;

// The argmax kernels (pooling_argmax_kernels.cc): pooling::kForwardWithArgmax,
// kBackwardWithArgmax and kGradGradWithArgmax.
absl::Status PoolingForwardWithArgmax(const KernelContext& context);
absl::Status PoolingBackwardWithArgmax(const KernelContext& context);
absl::Status PoolingGradGradWithArgmax(const KernelContext& context);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_POOLING_KERNELS_H_
