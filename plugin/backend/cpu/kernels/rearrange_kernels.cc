// The rearrange family's kernel (protocol/kernels/convolution.h: kRearrange) on the CPU backing
// executor: permuted dimensions, generalized diagonals, summed dimensions and inflated diagonals
// in one strided pass, which Einsum launches around its matrix products, from the
// Rearrangement launch/rearrange_launch.h reads. Output elements are spread over the thread
// pool; each one's sum is taken in one fixed order (float for the 16-bit types), so results do
// not depend on scheduling.
#include "plugin/backend/cpu/kernels/float_compute.h"  // first: EIGEN_USE_THREADS

#include <algorithm>

#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/launch/rearrange_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::cpu_kernels {
namespace {

using rearrange_launch::ReadRearrangeLaunch;
using rearrange_launch::Rearrangement;
using Index = Eigen::DenseIndex;

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

// convolution::kRearrange: y from x in one strided pass, each output's sum in one fixed order.
struct Rearrange : FloatingKernel<Rearrange, ReadRearrangeLaunch> {
  template <typename T>
  static absl::Status Run(const KernelContext& context, const Rearrangement& r) {
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
};

}  // namespace

void AddRearrangeKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kRearrange, Rearrange::Launch);
}

}  // namespace vgpu::cpu_kernels
