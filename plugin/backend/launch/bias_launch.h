// The bias family's launches (protocol/kernels/convolution.h: kBiasAdd, kBiasAddGrad), read
// once for every executor: a value tensor viewed as [outer, channels, inner] around its channel
// dimension (inner is 1 channels-last, the spatial size channels-first) and a bias vector of the
// channels. Also the bias and activation epilogue that the fused convolution and matmul launches
// carry (kForwardBiasActivation, kMatmulBiasActivation). The geometry is plain data.
#ifndef VGPU_BACKEND_LAUNCH_BIAS_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_BIAS_LAUNCH_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "plugin/backend/launch/host_device.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu::bias_launch {

// A value tensor around its channel dimension, and the bias (or bias gradient) of `channels`.
struct BiasGeometry {
  DType dtype = DType::kFloat32;
  int64_t outer = 1, channels = 0, inner = 1;

  VGPU_HOST_DEVICE int64_t Elements() const { return outer * channels * inner; }
};

// kBiasAdd: buffers [value, bias, out], descriptors [value, bias], params BiasParams. Checks the
// buffer count, the descriptors (a value of rank >= 2, a bias vector of its channels, one dtype,
// a known data format) and the element count without overflow; not the buffer sizes (the
// kernels' typed Buffer<T>() calls check those).
absl::StatusOr<BiasGeometry> ReadBiasAddLaunch(const LaunchView& launch);

// kBiasAddGrad: buffers [gradient, bias_gradient], otherwise as ReadBiasAddLaunch.
absl::StatusOr<BiasGeometry> ReadBiasAddGradLaunch(const LaunchView& launch);

// The epilogue of a fused launch: descriptor `bias_index` must describe a vector of `channels`
// values of `dtype` (InvalidArgument `mismatch` otherwise); descriptor bias_index + 1, when the
// launch carries one, is the activation, of a mode the fused kernels compute (relu, relu6,
// sigmoid, tanh). Returns the activation, none meaning identity.
absl::StatusOr<std::optional<ActivationMode>> ReadFusedEpilogue(const LaunchView& launch,
                                                                size_t bias_index,
                                                                int64_t channels, DType dtype,
                                                                absl::string_view mismatch);

// A fused launch (kForwardBiasActivation, kMatmulBiasActivation): the Geometry of its main op,
// its dtype (the geometry's, which the bias shares), and the activation after the bias (none:
// identity).
template <typename Geometry>
struct FusedLaunch {
  Geometry geometry;
  DType dtype = DType::kFloat32;
  std::optional<ActivationMode> activation;
};

// Reads a fused launch of buffers [two operands, bias, output]: the buffer count, the main op's
// geometry (read_geometry, descriptors 0..3), then the epilogue from descriptor 4
// (ReadFusedEpilogue: the bias a vector of geometry.*channels values of geometry.dtype,
// InvalidArgument `mismatch` otherwise).
template <typename Geometry>
absl::StatusOr<FusedLaunch<Geometry>> ReadFusedLaunch(
    const LaunchView& launch, absl::StatusOr<Geometry> (*read_geometry)(const LaunchView&),
    int64_t Geometry::*channels, absl::string_view mismatch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(4));
  FusedLaunch<Geometry> read;
  VGPU_ASSIGN_OR_RETURN(read.geometry, read_geometry(launch));
  read.dtype = read.geometry.dtype;
  VGPU_ASSIGN_OR_RETURN(read.activation,
                        ReadFusedEpilogue(launch, /*bias_index=*/4, read.geometry.*channels,
                                          read.geometry.dtype, mismatch));
  return read;
}

}  // namespace vgpu::bias_launch

#endif  // VGPU_BACKEND_LAUNCH_BIAS_LAUNCH_H_
