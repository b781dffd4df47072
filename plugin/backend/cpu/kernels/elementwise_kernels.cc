// Element-wise kernels of the CPU backing executor, vectorised and multi-threaded with Eigen's
// tensor module: the entry of the op-tensor binary kernel, select, add-n, fill, set-tensor and
// range, and the family's registration. The launch layer (launch/elementwise_launch.h) reads
// and validates every launch; these only compute. The binary functors, unary ops and casts live
// in elementwise_{binary,compare,unary,cast}_kernels.cc.
#define EIGEN_USE_THREADS
#include "plugin/backend/cpu/kernels/elementwise_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/elementwise_binary.h"
#include "plugin/backend/cpu/kernels/elementwise_broadcast.h"
#include "plugin/backend/launch/dtype_sets.h"
#include "plugin/backend/launch/element_conversions.h"
#include "plugin/backend/launch/elementwise_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/protocol/kernels/elementwise.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {

using elementwise_launch::AddNLaunch;
using elementwise_launch::BinaryKind;
using elementwise_launch::BinaryLaunch;
using elementwise_launch::FillLaunch;
using elementwise_launch::RangeLaunch;
using elementwise_launch::SelectLaunch;
using elementwise_launch::SetTensorLaunch;
using elementwise_launch::ReadAddNLaunch;
using elementwise_launch::ReadBinaryLaunch;
using elementwise_launch::ReadFillLaunch;
using elementwise_launch::ReadRangeLaunch;
using elementwise_launch::ReadSelectLaunch;
using elementwise_launch::ReadSetTensorLaunch;

namespace {

// out[i] = condition[i] ? then[i] : else[i] over n elements, where an operand that is not
// contiguous is one element repeated. Branch-free (bit masks) so that random conditions cost no
// mispredictions and the loop vectorises.
template <bool kThenContiguous, bool kElseContiguous, typename T>
void SelectBits(const bool* condition, const T* then_values, const T* else_values, T* out,
                int64_t n) {
  using Bits = std::conditional_t<
      sizeof(T) == 1, uint8_t,
      std::conditional_t<sizeof(T) == 2, uint16_t,
                         std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  static_assert(sizeof(Bits) == sizeof(T));
  for (int64_t i = 0; i < n; ++i) {
    Bits then_bits, else_bits;
    std::memcpy(&then_bits, then_values + (kThenContiguous ? i : 0), sizeof(T));
    std::memcpy(&else_bits, else_values + (kElseContiguous ? i : 0), sizeof(T));
    const Bits mask = static_cast<Bits>(Bits{0} - static_cast<Bits>(condition[i] ? 1 : 0));
    const Bits chosen = static_cast<Bits>((then_bits & mask) | (else_bits & ~mask));
    std::memcpy(out + i, &chosen, sizeof(T));
  }
}

template <typename T>
absl::Status RunSelect(const KernelContext& context, const BroadcastLayout<3>& layout) {
  VGPU_ASSIGN_OR_RETURN(const bool* condition,
                        context.Buffer<const bool>(0, layout.input_counts[0]));
  VGPU_ASSIGN_OR_RETURN(const T* then_values, context.Buffer<const T>(1, layout.input_counts[1]));
  VGPU_ASSIGN_OR_RETURN(const T* else_values, context.Buffer<const T>(2, layout.input_counts[2]));
  VGPU_ASSIGN_OR_RETURN(T* out, context.Buffer<T>(3, layout.output_count));
  if (layout.output_count == 0) return absl::OkStatus();
  const Eigen::TensorOpCost cost = ElementCost(1 + 2 * sizeof(T), sizeof(T), 1);
  ForEachSegment(*context.device, layout, cost, [&](const Segment<3>& segment) {
    const Eigen::Index n = segment.length;
    FlatMap<T> result(out + segment.output_offset, n);
    const bool* c = condition + segment.input_offsets[0];
    const T* t = then_values + segment.input_offsets[1];
    const T* e = else_values + segment.input_offsets[2];
    const int64_t c_stride = segment.input_strides[0];
    const int64_t t_stride = segment.input_strides[1];
    const int64_t e_stride = segment.input_strides[2];
    if (c_stride == 0) {  // one condition for the whole segment: a copy or a fill
      const T* chosen = *c ? t : e;
      if ((*c ? t_stride : e_stride) != 0) {
        result = ConstFlatMap<T>(chosen, n);
      } else {
        result.setConstant(*chosen);
      }
      return;
    }
    if (t_stride != 0 && e_stride != 0) {
      SelectBits<true, true>(c, t, e, result.data(), n);
    } else if (t_stride != 0) {
      SelectBits<true, false>(c, t, e, result.data(), n);
    } else if (e_stride != 0) {
      SelectBits<false, true>(c, t, e, result.data(), n);
    } else {
      SelectBits<false, false>(c, t, e, result.data(), n);
    }
  });
  return absl::OkStatus();
}

// out = inputs[0] + ... + inputs[n-1] with TensorFlow's AddN association: a first group of
// 2..9 inputs summed left to right, then out += (sum of the next 8) until all are added.
template <typename T>
absl::Status RunAddN(const KernelContext& context, const AddNLaunch& launch) {
  const size_t n = launch.inputs;
  const int64_t count = launch.count;
  std::vector<const T*> inputs(n);
  for (size_t i = 0; i < n; ++i) {
    VGPU_ASSIGN_OR_RETURN(inputs[i], context.Buffer<const T>(i, count));
  }
  VGPU_ASSIGN_OR_RETURN(T* out, context.Buffer<T>(n, count));
  const size_t first_group = launch.first_group;
  constexpr int64_t kChunk = 1024;  // elements summed through the stack buffer at a time
  const Eigen::TensorOpCost cost = ElementCost(n * sizeof(T), sizeof(T), n);
  ParallelBlocks(*context.device, count, cost, [&](int64_t begin, int64_t end) {
    T partial_storage[kChunk];
    for (int64_t start = begin; start < end; start += kChunk) {
      const int64_t length = std::min(kChunk, end - start);
      FlatMap<T> sum(out + start, length);
      sum = ConstFlatMap<T>(inputs[0] + start, length) + ConstFlatMap<T>(inputs[1] + start, length);
      for (size_t i = 2; i < first_group; ++i) {
        sum = sum + ConstFlatMap<T>(inputs[i] + start, length);
      }
      FlatMap<T> partial(partial_storage, length);
      for (size_t group = first_group; group < n; group += 8) {
        partial = ConstFlatMap<T>(inputs[group] + start, length) +
                  ConstFlatMap<T>(inputs[group + 1] + start, length);
        for (size_t i = group + 2; i < group + 8; ++i) {
          partial = partial + ConstFlatMap<T>(inputs[i] + start, length);
        }
        sum = sum + partial;
      }
    }
  });
  return absl::OkStatus();
}

template <typename T>
T FromDouble(double value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value != 0;
  } else if constexpr (std::is_same_v<T, Eigen::half> || std::is_same_v<T, Eigen::bfloat16>) {
    return T(static_cast<float>(value));
  } else if constexpr (std::is_integral_v<T>) {
    // Converting a double that is NaN or out of T's range is undefined behaviour; a tenant can
    // send any bits, so saturate (NaN becomes 0).
    return SaturatingInteger<T>(value);
  } else {
    return static_cast<T>(value);
  }
}

template <typename T>
void FillWith(const KernelContext& context, T* out, int64_t count, T value) {
  ParallelBlocks(*context.device, count, ElementCost(0, sizeof(T), 0),
                 [&](int64_t begin, int64_t end) {
                   FlatMap<T>(out + begin, end - begin).setConstant(value);
                 });
}

// out[i] = start + T(i) * delta (elementwise::kRange), the product rounded before the sum as
// TensorFlow's CPU kernel (built without FMA) rounds it: no fused multiply-add here.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
template <typename T>
absl::Status RunRange(const KernelContext& context, int64_t count, uint64_t start_bits,
                      uint64_t delta_bits) {
  T start, delta;
  std::memcpy(&start, &start_bits, sizeof(T));
  std::memcpy(&delta, &delta_bits, sizeof(T));
  VGPU_ASSIGN_OR_RETURN(T* out, context.Buffer<T>(0, count));
  ParallelBlocks(*context.device, count, ElementCost(0, sizeof(T), 2),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t i = begin; i < end; ++i) {
                     out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
                   }
                 });
  return absl::OkStatus();
}
#pragma GCC pop_options

}  // namespace

// elementwise::kBinary (see protocol/kernels/elementwise.h).
absl::Status ElementwiseBinary(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(BinaryLaunch launch, ReadBinaryLaunch(context));
  if (launch.kind == BinaryKind::kArithmetic) {
    return RunBinaryArithmetic(context, launch.op, launch.dtype, launch.layout);
  }
  return RunBinaryPredicate(context, launch.op, launch.dtype, launch.layout);
}

// elementwise::kSelect.
absl::Status ElementwiseSelect(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(SelectLaunch launch, ReadSelectLaunch(context));
  return Dispatch::All(launch.dtype, [&](auto zero) -> absl::Status {
    return RunSelect<decltype(zero)>(context, launch.layout);
  });
}

// elementwise::kAddN.
absl::Status ElementwiseAddN(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(AddNLaunch launch, ReadAddNLaunch(context));
  return Dispatch::Numeric(launch.dtype, [&](auto zero) -> absl::Status {
    return RunAddN<decltype(zero)>(context, launch);
  });
}

// elementwise::kFill.
absl::Status ElementwiseFill(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(FillLaunch launch, ReadFillLaunch(context));
  return Dispatch::All(launch.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* value, context.Buffer<const T>(0, 1));
    VGPU_ASSIGN_OR_RETURN(T* out, context.Buffer<T>(1, launch.count));
    if (launch.count > 0) FillWith<T>(context, out, launch.count, *value);
    return absl::OkStatus();
  });
}

// elementwise::kSetTensor.
absl::Status ElementwiseSetTensor(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(SetTensorLaunch launch, ReadSetTensorLaunch(context));
  return Dispatch::All(launch.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(T* out, context.Buffer<T>(0, launch.count));
    if (launch.count > 0) FillWith<T>(context, out, launch.count, FromDouble<T>(launch.value));
    return absl::OkStatus();
  });
}

// elementwise::kRange.
absl::Status ElementwiseRange(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(RangeLaunch launch, ReadRangeLaunch(context));
  return DispatchSigned<Dispatch>(launch.dtype, [&](auto zero) -> absl::Status {
    return RunRange<decltype(zero)>(context, launch.count, launch.start_bits, launch.delta_bits);
  });
}

void AddElementwiseKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kElementwise, ElementwiseBinary, ElementwiseUnary,
                  ElementwiseSelect, ElementwiseCast, ElementwiseAddN, ElementwiseFill,
                  ElementwiseSetTensor, ElementwiseRange);
}

}  // namespace vgpu::cpu_kernels
