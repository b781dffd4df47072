// Entry points of the CPU executor's oneDNN kernels (convolution_onednn.cc, matmul_onednn.cc),
// which the convolution and matmul kernels try before their Eigen code. They exist in every
// build: without oneDNN (VGPU_ONEDNN=OFF) each returns false, "not served".
#ifndef VGPU_BACKEND_CPU_KERNELS_ONEDNN_KERNELS_H_
#define VGPU_BACKEND_CPU_KERNELS_ONEDNN_KERNELS_H_

#include <optional>

#include "absl/status/statusor.h"
#include "plugin/backend/cpu/kernels/convolution_kernels.h"
#include "plugin/backend/launch/matmul_launch.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu::cpu_kernels {

// The oneDNN path of convolutions (convolution_onednn.cc): T is float (g.dtype float32) or
// Eigen::bfloat16 (g.dtype bfloat16; served only where the CPU has bfloat16 math,
// onednn_primitives.h). x, y, dx and dy in the geometry's data format, filters as TensorFlow
// lays them out, bias (may be null) a vector of out_depth. Each returns true when oneDNN
// computed the result, false when this build has no oneDNN or oneDNN does not serve the
// geometry well (the caller then runs its Eigen kernel), and an error when oneDNN failed while
// running. The geometry must come from the launch layer's reader
// (convolution_launch::ReadConvolutionLaunch) and every buffer must hold what it describes;
// thread-safe.
template <typename T>
absl::StatusOr<bool> OnednnConvolutionForward(const Eigen::ThreadPoolDevice& device,
                                              const ConvolutionGeometry& g, const T* x,
                                              const T* filter, const T* bias,
                                              std::optional<ActivationMode> activation, T* y);
template <typename T>
absl::StatusOr<bool> OnednnConvolutionBackwardInput(const Eigen::ThreadPoolDevice& device,
                                                    const ConvolutionGeometry& g, const T* filter,
                                                    const T* dy, T* dx);
template <typename T>
absl::StatusOr<bool> OnednnConvolutionBackwardFilter(const Eigen::ThreadPoolDevice& device,
                                                     const ConvolutionGeometry& g, const T* x,
                                                     const T* dy, T* dfilter);

// The oneDNN path of (batched) matrix products (matmul_onednn.cc): c = activation(op(a) x op(b)
// + bias) as `geometry` describes it (from matmul_launch::ReadMatmulLaunch or
// ReadMatmulBiasActivationLaunch), bias null or a vector of n. T is float (geometry.dtype
// float32) or Eigen::bfloat16 (bfloat16, served only where the CPU has bfloat16 math). Returns
// true when oneDNN computed c, false when this build has no oneDNN or oneDNN does not serve the
// shape well (the caller then runs its Eigen kernel), an error when oneDNN failed while running.
// Shapes must be checked against the buffers first; thread-safe.
template <typename T>
absl::StatusOr<bool> OnednnMatmul(const Eigen::ThreadPoolDevice& device,
                                  const matmul_launch::MatmulGeometry& geometry, const T* a,
                                  const T* b, const T* bias,
                                  std::optional<ActivationMode> activation, T* c);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_ONEDNN_KERNELS_H_
