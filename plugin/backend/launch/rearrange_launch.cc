// The rearrange family's launch reader (see rearrange_launch.h).
#include "plugin/backend/launch/rearrange_launch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "plugin/backend/launch/operand_limits.h"
#include "plugin/common/status_macros.h"

namespace vgpu::rearrange_launch {
namespace {

// (size - 1) * stride added to *bound, or false on overflow.
bool AddSpan(int64_t size, int64_t stride, int64_t* bound) {
  int64_t span = 0;
  return !__builtin_mul_overflow(size - 1, stride, &span) &&
         !__builtin_add_overflow(*bound, span, bound);
}

}  // namespace

absl::StatusOr<Rearrangement> RearrangementOf(const TensorDescriptorSettings& x,
                                              const TensorDescriptorSettings& y,
                                              const convolution::RearrangeParams& params) {
  if (x.dtype != y.dtype) return absl::InvalidArgumentError("rearrange x and y dtypes differ");
  if (x.rank < 0 || x.rank > kMaxRank || y.rank < 0 || y.rank > kMaxRank) {
    return absl::InvalidArgumentError("rearrange tensor rank out of range");
  }
  if (params.summed_rank < 0 || params.summed_rank > kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrCat("rearrange summed rank out of range: ", params.summed_rank));
  }
  Rearrangement r;
  r.dtype = x.dtype;
  r.rank = y.rank;
  r.summed_rank = params.summed_rank;
  VGPU_ASSIGN_OR_RETURN(r.x_elements, CheckedOperandElements("rearrange x", x.dims, x.rank));
  VGPU_ASSIGN_OR_RETURN(r.y_elements, CheckedOperandElements("rearrange y", y.dims, y.rank));
  VGPU_ASSIGN_OR_RETURN(r.summed_count,
                        CheckedOperandElements("rearrange summed dimensions",
                                               params.summed_sizes, params.summed_rank));
  for (int k = 0; k < kMaxRank; ++k) {
    const bool used = k < y.rank;
    if (!used && (params.ties[k] != -1 || params.x_strides[k] != 0)) {
      return absl::InvalidArgumentError("rearrange parameters beyond y's rank must be unset");
    }
    if (used && (params.ties[k] < -1 || params.ties[k] >= k)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rearrange tie of dimension ", k, " must be -1 or an earlier dimension"));
    }
    if (params.x_strides[k] < 0) {
      return absl::InvalidArgumentError("rearrange strides must not be negative");
    }
    if (used) {
      r.y_dims[k] = y.dims[k];
      r.ties[k] = params.ties[k];
      r.x_strides[k] = params.x_strides[k];
    }
  }
  for (int m = 0; m < kMaxRank; ++m) {
    const bool used = m < params.summed_rank;
    if (params.summed_strides[m] < 0 ||
        (!used && (params.summed_sizes[m] != 0 || params.summed_strides[m] != 0))) {
      return absl::InvalidArgumentError("rearrange summed dimensions are malformed");
    }
    if (used) {
      r.summed_sizes[m] = params.summed_sizes[m];
      r.summed_strides[m] = params.summed_strides[m];
    }
  }
  // The summed dimensions are dimensions of x: their index space cannot exceed x's elements.
  // (Without this bound, zero strides would let a launch of a few bytes sum 2^48 terms per
  // output element and hold the executor for hours.)
  if (r.summed_count > std::max<int64_t>(r.x_elements, 1)) {
    return absl::InvalidArgumentError(absl::StrCat("rearrange sums ", r.summed_count,
                                                   " terms, more than x's ", r.x_elements,
                                                   " elements"));
  }
  // Every x index the launch reads must lie inside x.
  if (r.y_elements > 0 && r.summed_count > 0) {
    int64_t last = 0;
    bool ok = true;
    for (int k = 0; k < r.rank; ++k) ok = ok && AddSpan(r.y_dims[k], r.x_strides[k], &last);
    for (int m = 0; m < r.summed_rank; ++m) {
      ok = ok && AddSpan(r.summed_sizes[m], r.summed_strides[m], &last);
    }
    if (!ok || last >= r.x_elements) {
      return absl::InvalidArgumentError(
          absl::StrCat("rearrange reads beyond x's ", r.x_elements, " elements"));
    }
  }
  return r;
}

absl::StatusOr<Rearrangement> ReadRearrangeLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(2));
  TensorDescriptorSettings x, y;
  VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&x, &y));
  VGPU_ASSIGN_OR_RETURN(convolution::RearrangeParams params,
                        launch.Params().Get<convolution::RearrangeParams>());
  return RearrangementOf(x, y, params);
}

}  // namespace vgpu::rearrange_launch
