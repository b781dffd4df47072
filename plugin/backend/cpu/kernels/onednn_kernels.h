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

// The oneDNN path of float32 convolutions (convolution_onednn.cc): x, y, dx and dy in the
// geometry's data format, filters as TensorFlow lays them out, bias (may be null) a vector of
// out_depth. Each returns true when oneDNN computed the result, false when this build has no
// oneDNN or oneDNN does not serve the geometry well (the caller then runs its Eigen kernel), and
// an error when oneDNN failed while running. The geometry must come from the launch layer's
// reader (convolution_launch::ReadConvolutionLaunch) and every buffer must hold what it
// describes; thread-safe.
absl::StatusOr<bool> OnednnConvolutionForward(const Eigen::ThreadPoolDevice& device,
                                              const ConvolutionGeometry& g, const float* x,
                                              const float* filter, const float* bias,
                                              std::optional<ActivationMode> activation,
                                              float* y);
absl::StatusOr<bool> OnednnConvolutionBackwardInput(const Eigen::ThreadPoolDevice& device,
                                                    const ConvolutionGeometry& g,
                                                    const float* filter, const float* dy,
                                                    float* dx);
absl::StatusOr<bool> OnednnConvolutionBackwardFilter(const Eigen::ThreadPoolDevice& device,
                                                     const ConvolutionGeometry& g,
                                                     const float* x, const float* dy,
                                                     float* dfilter);

// The oneDNN path of float32 (batched) matrix products (matmul_onednn.cc): c = activation(op(a)
// x op(b) + bias) as `geometry` describes it (from matmul_launch::ReadMatmulLaunch or
// ReadMatmulBiasActivationLaunch), bias null or a vector of n. Returns true when oneDNN computed
// c, false when this build has no oneDNN or oneDNN does not serve the shape well (the caller
// then runs its Eigen kernel), an error when oneDNN failed while running. Shapes must be checked
// against the buffers first; thread-safe.
absl::StatusOr<bool> OnednnMatmul(const Eigen::ThreadPoolDevice& device,
                                  const matmul_launch::MatmulGeometry& geometry, const float* a,
                                  const float* b, const float* bias,
                                  std::optional<ActivationMode> activation, float* c);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_ONEDNN_KERNELS_H_
