// The rearrangement kernel of the convolution family (protocol/kernels/convolution.h,
// kRearrange) on the CPU backing executor: permuted dimensions, generalized diagonals, summed
// dimensions and inflated diagonals in one strided pass, which Einsum launches around its
// matrix products. Output elements are spread over the thread pool; each one's sum is taken
// in one fixed order (float for the 16-bit types), so results do not depend on scheduling.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernels/convolution_kernels.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::cpu_kernels {
namespace {

using Index = Eigen::DenseIndex;
using convolution::RearrangeParams;

// A checked launch: the shapes and strides of one rearrangement.
struct Rearrangement {
  int rank = 0;  // y's
  Index y_dims[kMaxRank] = {};
  int32_t ties[kMaxRank] = {};
  Index x_strides[kMaxRank] = {};
  int summed_rank = 0;
  Index summed_sizes[kMaxRank] = {};
  Index summed_strides[kMaxRank] = {};
  Index x_elements = 0, y_elements = 0, summed_count = 1;
};

// (size - 1) * stride added to *bound, or false on overflow.
bool AddSpan(int64_t size, int64_t stride, int64_t* bound) {
  int64_t span = 0;
  return !__builtin_mul_overflow(size - 1, stride, &span) &&
         !__builtin_add_overflow(*bound, span, bound);
}

absl::StatusOr<Rearrangement> ReadRearrangement(const TensorDescriptorSettings& x,
                                                const TensorDescriptorSettings& y,
                                                const RearrangeParams& params) {
  if (x.dtype != y.dtype) return absl::InvalidArgumentError("rearrange x and y dtypes differ");
  if (x.rank < 0 || x.rank > kMaxRank || y.rank < 0 || y.rank > kMaxRank) {
    return absl::InvalidArgumentError("rearrange tensor rank out of range");
  }
  if (params.summed_rank < 0 || params.summed_rank > kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrCat("rearrange summed rank out of range: ", params.summed_rank));
  }
  Rearrangement r;
  r.rank = y.rank;
  r.summed_rank = params.summed_rank;
  VGPU_ASSIGN_OR_RETURN(r.x_elements, CheckedElementCount("rearrange x", x.dims, x.rank));
  VGPU_ASSIGN_OR_RETURN(r.y_elements, CheckedElementCount("rearrange y", y.dims, y.rank));
  VGPU_ASSIGN_OR_RETURN(r.summed_count, CheckedElementCount("rearrange summed dimensions",
                                                            params.summed_sizes,
                                                            params.summed_rank));
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
    if (params.summed_strides[m] < 0 || (!used && (params.summed_sizes[m] != 0 ||
                                                   params.summed_strides[m] != 0))) {
      return absl::InvalidArgumentError("rearrange summed dimensions are malformed");
    }
    if (used) {
      r.summed_sizes[m] = params.summed_sizes[m];
      r.summed_strides[m] = params.summed_strides[m];
    }
  }
  // The summed dimensions are dimensions of x: their index space cannot exceed x's elements.
  // (Without this bound, zero strides would let a launch of a few bytes sum 2^48 terms per
  // output element and hold the compute pool for hours.)
  if (r.summed_count > std::max<Index>(r.x_elements, 1)) {
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

// The sum over the summed dimensions of x starting at `base`, in CT.
template <typename T, typename CT>
CT SumFrom(const Rearrangement& r, const T* x, Index base) {
  if (r.summed_rank == 0) return static_cast<CT>(x[base]);
  if (r.summed_count == 0) return CT(0);
  // The innermost summed dimension is a strided run; the others advance like an odometer.
  const int inner = r.summed_rank - 1;
  const Index run = r.summed_sizes[inner], run_stride = r.summed_strides[inner];
  Index position[kMaxRank] = {};
  Index offset = base;
  CT total(0);
  for (Index outer = r.summed_count / run; outer > 0; --outer) {
    const T* p = x + offset;
    for (Index t = 0; t < run; ++t) total += static_cast<CT>(p[t * run_stride]);
    for (int m = inner - 1; m >= 0; --m) {
      offset += r.summed_strides[m];
      if (++position[m] < r.summed_sizes[m]) break;
      offset -= position[m] * r.summed_strides[m];
      position[m] = 0;
    }
  }
  return total;
}

template <typename T>
absl::Status RearrangeTyped(const KernelContext& context, const Rearrangement& r) {
  using CT = ComputeType<T>;
  VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, r.x_elements));
  VGPU_ASSIGN_OR_RETURN(T* y, context.Buffer<T>(1, r.y_elements));
  if (r.y_elements == 0) return absl::OkStatus();
  const double terms = static_cast<double>(std::max<Index>(1, r.summed_count));
  const Eigen::TensorOpCost cost(terms * sizeof(T), sizeof(T), terms + r.rank);
  context.device->parallelFor(r.y_elements, cost, [&](Index first, Index last) {
    Index index[kMaxRank] = {};
    for (Index rest = first, k = r.rank - 1; k >= 0; --k) {
      index[k] = rest % r.y_dims[k];
      rest /= r.y_dims[k];
    }
    for (Index element = first; element < last; ++element) {
      bool on_diagonal = true;
      Index offset = 0;
      for (int k = 0; k < r.rank; ++k) {
        if (r.ties[k] >= 0 && index[k] != index[r.ties[k]]) on_diagonal = false;
        offset += index[k] * r.x_strides[k];
      }
      y[element] = on_diagonal ? static_cast<T>(SumFrom<T, CT>(r, x, offset)) : T(0);
      for (int k = r.rank - 1; k >= 0; --k) {
        if (++index[k] < r.y_dims[k]) break;
        index[k] = 0;
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::Status Rearrange(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings x,
                        context.Descriptor<TensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings y,
                        context.Descriptor<TensorDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(RearrangeParams params, context.Params().Get<RearrangeParams>());
  VGPU_ASSIGN_OR_RETURN(Rearrangement r, ReadRearrangement(x, y, params));
  return Dispatch::Floating(x.dtype, [&](auto zero) {
    return RearrangeTyped<decltype(zero)>(context, r);
  });
}

}  // namespace vgpu::cpu_kernels
