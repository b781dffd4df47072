// The rearrange family's kernel (protocol/kernels/convolution.h: kRearrange, Einsum's
// permutations, diagonals and summed dimensions) on the CUDA executor, from the Rearrangement
// launch/rearrange_launch.h reads: one thread per y element, its sum taken in Acc<T> in the CPU
// kernel's order.
#include <cstdint>

#include "absl/status/status.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/device_types.cuh"
#include "plugin/backend/cuda/kernels/float_compute.cuh"
#include "plugin/backend/launch/rearrange_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::cuda {
namespace {

using kernels::Dispatch;
using rearrange_launch::ReadRearrangeLaunch;
using rearrange_launch::Rearrangement;

// One thread per y element: 0 off the diagonals the ties name, else the sum (in Acc<T>, in the
// CPU kernel's order: the summed dimensions row-major) of x over the summed dimensions.
template <typename T>
__global__ void RearrangeKernel(Rearrangement r, const T* x, T* y) {
  for (int64_t element = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; element < r.y_elements;
       element += int64_t{blockDim.x} * gridDim.x) {
    int64_t index[kMaxRank];
    int64_t rest = element;
    for (int k = r.rank - 1; k >= 0; --k) {
      index[k] = rest % r.y_dims[k];
      rest /= r.y_dims[k];
    }
    bool on_diagonal = true;
    int64_t offset = 0;
    for (int k = 0; k < r.rank; ++k) {
      if (r.ties[k] >= 0 && index[k] != index[r.ties[k]]) on_diagonal = false;
      offset += index[k] * r.x_strides[k];
    }
    Acc<T> total = 0;
    if (on_diagonal) {
      if (r.summed_rank == 0) {
        total = ToAcc(x[offset]);
      } else if (r.summed_count > 0) {
        int64_t position[kMaxRank] = {};
        int64_t at = offset;
        for (int64_t term = 0; term < r.summed_count; ++term) {
          total += ToAcc(x[at]);
          for (int m = r.summed_rank - 1; m >= 0; --m) {
            at += r.summed_strides[m];
            if (++position[m] < r.summed_sizes[m]) break;
            at -= position[m] * r.summed_strides[m];
            position[m] = 0;
          }
        }
      }
    }
    y[element] = FromAcc<T>(total);
  }
}

absl::Status Rearrange(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(Rearrangement r, ReadRearrangeLaunch(context));
  return Dispatch::Floating(r.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* x_data, context.Buffer<const T>(0, r.x_elements));
    VGPU_ASSIGN_OR_RETURN(T* y_data, context.Buffer<T>(1, r.y_elements));
    return LaunchGridStride("rearrange", *context.device, r.y_elements, RearrangeKernel<T>, r,
                            x_data, y_data);
  });
}

}  // namespace

void AddCudaRearrangeKernels(CudaKernelTable& table) {
  table.AddFamily(kernel_families::kRearrange, Rearrange);
}

}  // namespace vgpu::cuda
