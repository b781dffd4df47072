// The matmul family's launches (protocol/kernels/convolution.h: kMatmul, kMatmulBiasActivation),
// read once for every executor: c = op(a) x op(b) over batch dimensions that broadcast like
// TensorFlow's BatchMatMulV2 (right-aligned and padded with 1s to c's batch rank; a dimension of
// 1 stretches). The geometry is plain data.
#ifndef VGPU_BACKEND_LAUNCH_MATMUL_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_MATMUL_LAUNCH_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "plugin/backend/launch/bias_launch.h"
#include "plugin/backend/launch/host_device.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu::matmul_launch {

// The a and b matrices one output matrix reads (indices of [m, k] / [k, m] and [k, n] / [n, k]
// matrices in a and b).
struct MatmulOperands {
  int64_t a, b;
};

// A (batched) product: each of the `batches` c matrices [m, n] is op(a matrix) [m, k] times
// op(b matrix) [k, n].
struct MatmulGeometry {
  DType dtype = DType::kFloat32;
  bool transpose_a = false, transpose_b = false;
  int64_t m = 0, n = 0, k = 0;
  int batch_rank = 0;  // c's rank - 2
  // The batch dimensions of a and b padded with leading 1s to batch_rank, and c's.
  int64_t a_batch[kMaxRank] = {}, b_batch[kMaxRank] = {}, out_batch[kMaxRank] = {};
  int64_t a_matrices = 1, b_matrices = 1, batches = 1;
  // The element counts of a, b and c, checked against kMaxOperandElements.
  int64_t a_elements = 0, b_elements = 0, c_elements = 0;

  // The a and b matrices c matrix `batch` (< batches) reads.
  VGPU_HOST_DEVICE MatmulOperands OperandsOf(int64_t batch) const {
    int64_t a_index = 0, b_index = 0, a_stride = 1, b_stride = 1;
    for (int i = batch_rank - 1; i >= 0; --i) {
      const int64_t position = batch % out_batch[i];
      batch /= out_batch[i];
      if (a_batch[i] != 1) a_index += position * a_stride;
      if (b_batch[i] != 1) b_index += position * b_stride;
      a_stride *= a_batch[i];
      b_stride *= b_batch[i];
    }
    return {a_index, b_index};
  }
  // Whether every c matrix reads a and b at a uniform stride (0 for an operand of one matrix):
  // a strided-batched product.
  VGPU_HOST_DEVICE bool UniformBatches() const {
    return (a_matrices == 1 || a_matrices == batches) && (b_matrices == 1 || b_matrices == batches);
  }
};

// Validates the matmul descriptor and the a, b, c tensor descriptors (ranks, one dtype, inner
// dimensions, broadcast batch dimensions, c's shape, element counts without overflow) and
// returns the geometry.
absl::StatusOr<MatmulGeometry> MatmulGeometryOf(const MatmulDescriptorSettings& matmul,
                                                const TensorDescriptorSettings& a,
                                                const TensorDescriptorSettings& b,
                                                const TensorDescriptorSettings& c);

// kMatmul: buffers [a, b, c], descriptors [matmul, a, b, c]. Checks the buffer count and the
// descriptors; not the buffer sizes (the kernels' typed Buffer<T>() calls check those).
absl::StatusOr<MatmulGeometry> ReadMatmulLaunch(const LaunchView& launch);

// kMatmulBiasActivation: buffers [a, b, bias, c], descriptors [matmul, a, b, c, bias,
// activation (optional)]: the geometry, and the activation after the bias (none: identity).
// The bias descriptor is checked to be a vector of n values of the dtype.
using MatmulBiasActivationLaunch = bias_launch::FusedLaunch<MatmulGeometry>;
absl::StatusOr<MatmulBiasActivationLaunch> ReadMatmulBiasActivationLaunch(
    const LaunchView& launch);

}  // namespace vgpu::matmul_launch

#endif  // VGPU_BACKEND_LAUNCH_MATMUL_LAUNCH_H_
