// The matmul family's launch readers (see matmul_launch.h).
#include "plugin/backend/launch/matmul_launch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "plugin/backend/launch/bias_launch.h"
#include "plugin/backend/launch/operand_limits.h"
#include "plugin/common/status_macros.h"

namespace vgpu::matmul_launch {
namespace {

// The product of the leading dims[0..count) of a tensor whose element count CheckedProduct
// accepted: it multiplied the same extents in the same order, so no partial product here
// exceeds its bound (after a zero extent every one is 0).
int64_t LeadingProduct(const int64_t* dims, int count) {
  int64_t product = 1;
  for (int i = 0; i < count; ++i) product *= dims[i];
  return product;
}

// Descriptors [matmul, a, b, c] of both matmul launches.
absl::StatusOr<MatmulGeometry> ReadGeometry(const LaunchView& launch) {
  MatmulDescriptorSettings matmul;
  TensorDescriptorSettings a, b, c;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&matmul, &a, &b, &c));
  return MatmulGeometryOf(matmul, a, b, c);
}

}  // namespace

absl::StatusOr<MatmulGeometry> MatmulGeometryOf(const MatmulDescriptorSettings& matmul,
                                                const TensorDescriptorSettings& a,
                                                const TensorDescriptorSettings& b,
                                                const TensorDescriptorSettings& c) {
  if (a.rank < 2 || b.rank < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("matmul operands must have rank >= 2, got ", a.rank, " and ", b.rank));
  }
  if (a.dtype != matmul.dtype || b.dtype != matmul.dtype || c.dtype != matmul.dtype) {
    return absl::InvalidArgumentError("matmul operand and result dtypes differ");
  }
  if (a.rank > kMaxRank || b.rank > kMaxRank || c.rank > kMaxRank) {
    return absl::InvalidArgumentError("matmul tensor rank too large");
  }
  MatmulGeometry g;
  VGPU_ASSIGN_OR_RETURN(g.a_elements, CheckedOperandElements("matmul a", a.dims, a.rank));
  VGPU_ASSIGN_OR_RETURN(g.b_elements, CheckedOperandElements("matmul b", b.dims, b.rank));
  VGPU_ASSIGN_OR_RETURN(g.c_elements, CheckedOperandElements("matmul c", c.dims, c.rank));
  g.dtype = matmul.dtype;
  g.transpose_a = matmul.transpose_a != 0;
  g.transpose_b = matmul.transpose_b != 0;
  const int64_t a_rows = a.dims[a.rank - 2], a_cols = a.dims[a.rank - 1];
  const int64_t b_rows = b.dims[b.rank - 2], b_cols = b.dims[b.rank - 1];
  g.m = g.transpose_a ? a_cols : a_rows;
  g.k = g.transpose_a ? a_rows : a_cols;
  const int64_t b_k = g.transpose_b ? b_cols : b_rows;
  g.n = g.transpose_b ? b_rows : b_cols;
  if (b_k != g.k) {
    return absl::InvalidArgumentError(
        absl::StrCat("matmul inner dimensions differ: ", g.k, " vs ", b_k));
  }
  const int a_batch_rank = a.rank - 2, b_batch_rank = b.rank - 2;
  const int batch_rank = std::max(a_batch_rank, b_batch_rank);
  if (c.rank != batch_rank + 2 || c.dims[c.rank - 2] != g.m || c.dims[c.rank - 1] != g.n) {
    return absl::InvalidArgumentError("matmul result shape does not match its operands");
  }
  // Broadcast the batch dimensions (right-aligned) and check them against c's.
  g.batch_rank = batch_rank;
  for (int i = 0; i < batch_rank; ++i) g.a_batch[i] = g.b_batch[i] = 1;
  for (int i = 0; i < a_batch_rank; ++i) g.a_batch[batch_rank - a_batch_rank + i] = a.dims[i];
  for (int i = 0; i < b_batch_rank; ++i) g.b_batch[batch_rank - b_batch_rank + i] = b.dims[i];
  for (int i = 0; i < batch_rank; ++i) {
    const int64_t a_dim = g.a_batch[i], b_dim = g.b_batch[i];
    if (a_dim != b_dim && a_dim != 1 && b_dim != 1) {
      return absl::InvalidArgumentError("matmul batch dimensions do not broadcast");
    }
    g.out_batch[i] = a_dim == 1 ? b_dim : a_dim;
    if (c.dims[i] != g.out_batch[i]) {
      return absl::InvalidArgumentError("matmul result batch dimensions do not match");
    }
  }
  g.a_matrices = LeadingProduct(a.dims, a_batch_rank);
  g.b_matrices = LeadingProduct(b.dims, b_batch_rank);
  g.batches = LeadingProduct(c.dims, batch_rank);
  return g;
}

absl::StatusOr<MatmulGeometry> ReadMatmulLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(3));
  return ReadGeometry(launch);
}

absl::StatusOr<MatmulBiasActivationLaunch> ReadMatmulBiasActivationLaunch(
    const LaunchView& launch) {
  return bias_launch::ReadFusedLaunch(launch, ReadGeometry, &MatmulGeometry::n,
                                      "the bias must be a vector of the product's columns");
}

}  // namespace vgpu::matmul_launch
