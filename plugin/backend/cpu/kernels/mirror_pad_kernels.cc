// MirrorPad and its gradient (data_movement::kMirrorPad, kMirrorPadGrad) on the CPU backing
// executor, read by the launch layer (launch/data_movement_launch.h). The forward pass is a
// gather: each output row (the last dimension) reads one input row, found through the mirror
// map of every outer dimension, element by element through the map of the last one; rows run in
// parallel on the thread pool. The gradient folds the padded gradient one dimension at a time
// (central part + mirrored head + mirrored tail), in TensorFlow's order of additions, into a
// shrinking scratch tensor.
#define EIGEN_USE_THREADS
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>

#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/launch/data_movement_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/data_movement.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

using data_movement_launch::kMaxDataMovementRank;
using data_movement_launch::MirrorFoldHead;
using data_movement_launch::MirrorFoldTail;
using data_movement_launch::MirrorPadFold;
using data_movement_launch::MirrorPadGeometry;
using data_movement_launch::MirrorSource;

// y = mirror-padded x, for elements of type E (a type of the element size).
template <typename E>
void MirrorPadRows(const Eigen::ThreadPoolDevice& device, const MirrorPadGeometry& g,
                   const E* x, E* y) {
  const int rank = g.rank;
  if (rank == 0) {
    y[0] = x[0];
    return;
  }
  const int last = rank - 1;
  const int64_t row_length = g.padded[last];
  const int64_t rows = g.padded_count / row_length;
  // Input strides (row-major).
  int64_t strides[kMaxDataMovementRank];
  strides[last] = 1;
  for (int d = rank - 2; d >= 0; --d) strides[d] = strides[d + 1] * g.dims[d + 1];
  device.parallelFor(
      rows, Eigen::TensorOpCost(row_length * sizeof(E), row_length * sizeof(E), row_length),
      [&](Eigen::Index first, Eigen::Index end) {
        for (int64_t row = first; row < end; ++row) {
          int64_t source = 0, rest = row;
          for (int d = last - 1; d >= 0; --d) {
            source += MirrorSource(g, d, rest % g.padded[d]) * strides[d];
            rest /= g.padded[d];
          }
          const E* in = x + source;
          E* out = y + row * row_length;
          const int64_t before = g.before[last], n = g.dims[last];
          for (int64_t p = 0; p < before; ++p) out[p] = in[MirrorSource(g, last, p)];
          std::copy(in, in + n, out + before);
          for (int64_t p = before + n; p < row_length; ++p) out[p] = in[MirrorSource(g, last, p)];
        }
      });
}

// data_movement::kMirrorPad.
absl::Status MirrorPad(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(data_movement_launch::MirrorPadLaunch pad,
                        data_movement_launch::ReadMirrorPadLaunch(context));
  return data_movement_launch::WithMirrorPadBuffers(
      context, pad, [&](const auto* x, auto* y) -> absl::Status {
    MirrorPadRows(*context.device, pad.g, x, y);
    return absl::OkStatus();
  });
}

// One fold of the gradient (MirrorPadFold): `in` into `out`, the mirrored terms added in order.
template <typename T>
void FoldDimension(const Eigen::ThreadPoolDevice& device, const MirrorPadFold& f, const T* in,
                   T* out) {
  const int64_t inner = f.inner;
  device.parallelFor(
      f.outer * f.n, Eigen::TensorOpCost(3 * inner * sizeof(T), inner * sizeof(T), 2 * inner),
      [&](Eigen::Index first, Eigen::Index end) {
        for (int64_t index = first; index < end; ++index) {
          const int64_t o = index / f.n, j = index % f.n;
          const T* plane = in + o * f.padded * inner;
          T* target = out + index * inner;
          const T* center = plane + (f.before + j) * inner;
          for (int64_t i = 0; i < inner; ++i) target[i] = center[i];
          const int64_t head = MirrorFoldHead(f, j);
          if (head >= 0) {
            const T* source = plane + head * inner;
            for (int64_t i = 0; i < inner; ++i) target[i] = target[i] + source[i];
          }
          const int64_t tail = MirrorFoldTail(f, j);
          if (tail >= 0) {
            const T* source = plane + tail * inner;
            for (int64_t i = 0; i < inner; ++i) target[i] = target[i] + source[i];
          }
        }
      });
}

// data_movement::kMirrorPadGrad.
absl::Status MirrorPadGrad(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(data_movement_launch::MirrorPadGradLaunch grad,
                        data_movement_launch::ReadMirrorPadGradLaunch(context));
  const MirrorPadGeometry& g = grad.g;
  return data_movement_launch::WithMirrorPadGradBuffers<Dispatch>(
      context, grad, [&](const auto* dy, auto* dx) -> absl::Status {
    using T = std::remove_pointer_t<decltype(dx)>;
    const data_movement_launch::MirrorPadFolds folds = data_movement_launch::MirrorPadFoldsOf(g);
    if (folds.count == 0) {  // nothing was padded
      std::memcpy(dx, dy, g.count * sizeof(T));
      return absl::OkStatus();
    }
    // The intermediate folds alternate between two scratch tensors.
    std::unique_ptr<T[]> scratch[2];
    const T* current = dy;
    for (int k = 0; k < folds.count; ++k) {
      const MirrorPadFold& fold = folds.folds[k];
      T* next = dx;
      if (!fold.into_dx) {
        scratch[k % 2].reset(new T[fold.count]);
        next = scratch[k % 2].get();
      }
      FoldDimension<T>(*context.device, fold, current, next);
      current = next;
    }
    return absl::OkStatus();
  });
}

}  // namespace

void AddMirrorPadKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kMirrorPad, MirrorPad, MirrorPadGrad);
}

}  // namespace vgpu::cpu_kernels
