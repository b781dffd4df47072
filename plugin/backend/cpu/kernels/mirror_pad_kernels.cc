// MirrorPad and its gradient (data_movement::kMirrorPad, kMirrorPadGrad) on the CPU backing
// executor. The forward pass is a gather: each output row (the last dimension) reads one input
// row, found through the mirror map of every outer dimension, element by element through the
// map of the last one; rows run in parallel on the thread pool. The gradient folds the padded
// gradient one dimension at a time (central part + mirrored head + mirrored tail), in
// TensorFlow's order of additions, into a shrinking scratch tensor.
#define EIGEN_USE_THREADS
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/data_movement_kernels.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/data_movement.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

using data_movement::kMaxDataMovementRank;
using data_movement::MirrorPadMode;

// No tensor has more elements than this (it keeps every byte count far from overflowing).
constexpr int64_t kMaxElements = kMaxLaunchElements;  // kernel_registry.h

// A validated mirror-pad layout: the unpadded dims, the pads and the padded dims.
struct MirrorLayout {
  std::vector<int64_t> dims, before, after, padded;
  int64_t offset = 0;  // 1 for REFLECT, 0 for SYMMETRIC
  int64_t count = 1, padded_count = 1;

  // The input index along dimension d that padded index p reads.
  int64_t Source(int d, int64_t p) const {
    if (p < before[d]) return before[d] - 1 - p + offset;
    if (p < before[d] + dims[d]) return p - before[d];
    return 2 * dims[d] - 1 - p + before[d] - offset;
  }
};

absl::StatusOr<MirrorLayout> ReadLayout(ParamReader& reader) {
  MirrorLayout layout;
  VGPU_ASSIGN_OR_RETURN(layout.dims, reader.GetArray<int64_t>(kMaxDataMovementRank));
  VGPU_ASSIGN_OR_RETURN(layout.before, reader.GetArray<int64_t>(kMaxDataMovementRank));
  VGPU_ASSIGN_OR_RETURN(layout.after, reader.GetArray<int64_t>(kMaxDataMovementRank));
  VGPU_ASSIGN_OR_RETURN(uint32_t mode, reader.Get<uint32_t>());
  if (mode != static_cast<uint32_t>(MirrorPadMode::kReflect) &&
      mode != static_cast<uint32_t>(MirrorPadMode::kSymmetric)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown mirror pad mode ", mode));
  }
  layout.offset = mode == static_cast<uint32_t>(MirrorPadMode::kReflect) ? 1 : 0;
  const size_t rank = layout.dims.size();
  if (layout.before.size() != rank || layout.after.size() != rank) {
    return absl::InvalidArgumentError("mirror pad: dims and pads differ in rank");
  }
  layout.padded.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t n = layout.dims[d], before = layout.before[d], after = layout.after[d];
    const int64_t limit = n - layout.offset;  // the largest pad the mode allows
    if (n < 0 || n > kMaxElements || before < 0 || after < 0 || before > limit ||
        after > limit) {
      return absl::InvalidArgumentError(absl::StrCat("mirror pad: dimension ", d, " of size ", n,
                                                     " cannot be padded by ", before, " and ",
                                                     after));
    }
    layout.padded[d] = before + n + after;
    for (auto [total, factor] : {std::pair{&layout.count, n},
                                 std::pair{&layout.padded_count, layout.padded[d]}}) {
      if (factor != 0 && *total > kMaxElements / factor) {
        return absl::InvalidArgumentError("mirror pad: too many elements");
      }
      *total *= factor;
    }
  }
  return layout;
}

// y = mirror-padded x, for elements of type E (a type of the element size).
template <typename E>
void MirrorPadRows(const Eigen::ThreadPoolDevice& device, const MirrorLayout& layout,
                   const E* x, E* y) {
  const int rank = static_cast<int>(layout.dims.size());
  if (rank == 0) {
    y[0] = x[0];
    return;
  }
  const int last = rank - 1;
  const int64_t row_length = layout.padded[last];
  const int64_t rows = layout.padded_count / row_length;
  // Input strides (row-major).
  std::vector<int64_t> strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d) strides[d] = strides[d + 1] * layout.dims[d + 1];
  device.parallelFor(
      rows, Eigen::TensorOpCost(row_length * sizeof(E), row_length * sizeof(E), row_length),
      [&](Eigen::Index first, Eigen::Index end) {
        for (int64_t row = first; row < end; ++row) {
          int64_t source = 0, rest = row;
          for (int d = last - 1; d >= 0; --d) {
            source += layout.Source(d, rest % layout.padded[d]) * strides[d];
            rest /= layout.padded[d];
          }
          const E* in = x + source;
          E* out = y + row * row_length;
          const int64_t before = layout.before[last], n = layout.dims[last];
          for (int64_t p = 0; p < before; ++p) out[p] = in[layout.Source(last, p)];
          std::copy(in, in + n, out + before);
          for (int64_t p = before + n; p < row_length; ++p) out[p] = in[layout.Source(last, p)];
        }
      });
}

// data_movement::kMirrorPad.
absl::Status MirrorPad(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(uint32_t element_size, reader.Get<uint32_t>());
  VGPU_ASSIGN_OR_RETURN(MirrorLayout layout, ReadLayout(reader));
  if (layout.padded_count == 0) return absl::OkStatus();
  auto run = [&](auto zero) -> absl::Status {
    using E = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const E* x, context.Buffer<const E>(0, layout.count));
    VGPU_ASSIGN_OR_RETURN(E* y, context.Buffer<E>(1, layout.padded_count));
    MirrorPadRows<E>(*context.device, layout, x, y);
    return absl::OkStatus();
  };
  return Dispatch::ElementSize(element_size, run);
}

// Folds dimension `d` of `in` (viewed as [outer, padded, inner]) into `out` ([outer, n,
// inner]): out[o, j, i] = in[o, before + j, i] + in[o, head(j), i] + in[o, tail(j), i], the
// mirrored terms only where padded positions map to j, added in that order.
template <typename T>
void FoldDimension(const Eigen::ThreadPoolDevice& device, const T* in, T* out, int64_t outer,
                   int64_t padded, int64_t n, int64_t inner, int64_t before, int64_t after,
                   int64_t offset) {
  device.parallelFor(
      outer * n, Eigen::TensorOpCost(3 * inner * sizeof(T), inner * sizeof(T), 2 * inner),
      [&](Eigen::Index first, Eigen::Index end) {
        for (int64_t index = first; index < end; ++index) {
          const int64_t o = index / n, j = index % n;
          const T* plane = in + o * padded * inner;
          T* target = out + index * inner;
          const T* center = plane + (before + j) * inner;
          for (int64_t i = 0; i < inner; ++i) target[i] = center[i];
          // Head position p = before - 1 - j + offset maps to j when 0 <= p < before.
          const int64_t head = before - 1 - j + offset;
          if (head >= 0 && head < before) {
            const T* source = plane + head * inner;
            for (int64_t i = 0; i < inner; ++i) target[i] = target[i] + source[i];
          }
          // Tail position p = 2n - 1 - j + before - offset maps to j when p >= before + n.
          const int64_t tail = 2 * n - 1 - j + before - offset;
          if (tail >= before + n && tail < before + n + after) {
            const T* source = plane + tail * inner;
            for (int64_t i = 0; i < inner; ++i) target[i] = target[i] + source[i];
          }
        }
      });
}

// data_movement::kMirrorPadGrad.
absl::Status MirrorPadGrad(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(uint32_t dtype, reader.Get<uint32_t>());
  VGPU_ASSIGN_OR_RETURN(MirrorLayout layout, ReadLayout(reader));
  return Dispatch::Floating(static_cast<DType>(dtype), [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* dy, context.Buffer<const T>(0, layout.padded_count));
    VGPU_ASSIGN_OR_RETURN(T* dx, context.Buffer<T>(1, layout.count));
    if (layout.count == 0) return absl::OkStatus();
    const int rank = static_cast<int>(layout.dims.size());
    // current: the gradient with dimensions < d folded; it shrinks as dimensions fold.
    std::vector<int64_t> current_dims = layout.padded;
    std::unique_ptr<T[]> buffers[2];
    const T* current = dy;
    int which = 0;
    for (int d = 0; d < rank; ++d) {
      if (layout.before[d] == 0 && layout.after[d] == 0) continue;
      int64_t outer = 1, inner = 1;
      for (int k = 0; k < d; ++k) outer *= current_dims[k];
      for (int k = d + 1; k < rank; ++k) inner *= current_dims[k];
      const int64_t folded = outer * layout.dims[d] * inner;
      T* next = nullptr;
      bool last_fold = true;
      for (int k = d + 1; k < rank; ++k) {
        if (layout.before[k] != 0 || layout.after[k] != 0) last_fold = false;
      }
      if (last_fold) {
        next = dx;
      } else {
        buffers[which].reset(new T[folded]);
        next = buffers[which].get();
        which ^= 1;
      }
      FoldDimension<T>(*context.device, current, next, outer, current_dims[d], layout.dims[d],
                       inner, layout.before[d], layout.after[d], layout.offset);
      current_dims[d] = layout.dims[d];
      current = next;
    }
    if (current == dy) std::memcpy(dx, dy, layout.count * sizeof(T));  // nothing was padded
    return absl::OkStatus();
  });
}

}  // namespace

void AddMirrorPadKernels(KernelTable& table) {
  table.Add(data_movement::kMirrorPad, "mirror_pad", MirrorPad);
  table.Add(data_movement::kMirrorPadGrad, "mirror_pad_grad", MirrorPadGrad);
}

}  // namespace vgpu::cpu_kernels
