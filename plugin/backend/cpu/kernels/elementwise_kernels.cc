// Element-wise kernels of the CPU backing executor, vectorised and multi-threaded with Eigen's
// tensor module: the entry of the op-tensor binary kernel, select, add-n, fill and set-tensor,
// and the family's registration.
// The binary functors, unary ops and casts live in elementwise_{binary,compare,unary,cast}_
// kernels.cc.
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
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/protocol/kernels/elementwise.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {

namespace {

bool IsComparison(ElementwiseOp op) {
  switch (op) {
    case ElementwiseOp::kEqual: case ElementwiseOp::kNotEqual: case ElementwiseOp::kGreater:
    case ElementwiseOp::kGreaterEqual: case ElementwiseOp::kLess: case ElementwiseOp::kLessEqual:
      return true;
    default: return false;
  }
}

bool IsLogical(ElementwiseOp op) {
  return op == ElementwiseOp::kLogicalAnd || op == ElementwiseOp::kLogicalOr;
}

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
absl::Status RunAddN(const KernelContext& context, int64_t count) {
  const size_t n = context.buffers.size() - 1;
  std::vector<const T*> inputs(n);
  for (size_t i = 0; i < n; ++i) {
    VGPU_ASSIGN_OR_RETURN(inputs[i], context.Buffer<const T>(i, count));
  }
  VGPU_ASSIGN_OR_RETURN(T* out, context.Buffer<T>(n, count));
  size_t first_group = n % 8;
  if (first_group == 0) first_group = 8;
  if (first_group == 1) first_group = 9;
  first_group = std::min(first_group, n);
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
    if (std::isnan(value)) return T(0);
    if (value <= static_cast<double>(std::numeric_limits<T>::min())) {
      return std::numeric_limits<T>::min();
    }
    if (value >= static_cast<double>(std::numeric_limits<T>::max())) {
      return std::numeric_limits<T>::max();
    }
    return static_cast<T>(value);
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
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(OpTensorDescriptorSettings op,
                        context.Descriptor<OpTensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings a, context.Descriptor<TensorDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings b, context.Descriptor<TensorDescriptorSettings>(2));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings out,
                        context.Descriptor<TensorDescriptorSettings>(3));
  if (a.dtype != op.dtype || b.dtype != op.dtype) {
    return absl::InvalidArgumentError("the operands' dtypes differ from the op-tensor's");
  }
  const bool predicate = IsComparison(op.op) || IsLogical(op.op);
  if (out.dtype != (predicate ? DType::kBool : op.dtype)) {
    return absl::InvalidArgumentError("the output descriptor has the wrong dtype for the op");
  }
  VGPU_ASSIGN_OR_RETURN(BroadcastLayout<2> layout, MakeBroadcastLayout<2>(out, {a, b}));
  if (predicate) return RunBinaryPredicate(context, op.op, op.dtype, layout);
  return RunBinaryArithmetic(context, op.op, op.dtype, layout);
}

// elementwise::kSelect.
absl::Status ElementwiseSelect(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(4));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings condition,
                        context.Descriptor<TensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings then_tensor,
                        context.Descriptor<TensorDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings else_tensor,
                        context.Descriptor<TensorDescriptorSettings>(2));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings out,
                        context.Descriptor<TensorDescriptorSettings>(3));
  if (condition.dtype != DType::kBool) {
    return absl::InvalidArgumentError("select's condition must be bool");
  }
  if (then_tensor.dtype != out.dtype || else_tensor.dtype != out.dtype) {
    return absl::InvalidArgumentError("select's then, else and output dtypes differ");
  }
  VGPU_ASSIGN_OR_RETURN(BroadcastLayout<3> layout,
                        MakeBroadcastLayout<3>(out, {condition, then_tensor, else_tensor}));
  return Dispatch::All(out.dtype, [&](auto zero) -> absl::Status {
    return RunSelect<decltype(zero)>(context, layout);
  });
}

// elementwise::kAddN.
absl::Status ElementwiseAddN(const KernelContext& context) {
  if (context.buffers.size() < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("add-n needs at least 2 inputs and an output, got ", context.buffers.size(),
                     " buffers"));
  }
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings tensor,
                        context.Descriptor<TensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(const int64_t count, DenseElementCount(tensor));
  return Dispatch::Numeric(tensor.dtype, [&](auto zero) -> absl::Status {
    return RunAddN<decltype(zero)>(context, count);
  });
}

// elementwise::kFill.
absl::Status ElementwiseFill(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings tensor,
                        context.Descriptor<TensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(const int64_t count, DenseElementCount(tensor));
  return Dispatch::All(tensor.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* value, context.Buffer<const T>(0, 1));
    VGPU_ASSIGN_OR_RETURN(T* out, context.Buffer<T>(1, count));
    if (count > 0) FillWith<T>(context, out, count, *value);
    return absl::OkStatus();
  });
}

// elementwise::kSetTensor.
absl::Status ElementwiseSetTensor(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(1));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings tensor,
                        context.Descriptor<TensorDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(const int64_t count, DenseElementCount(tensor));
  ParamReader params = context.Params();
  VGPU_ASSIGN_OR_RETURN(const double value, params.Get<double>());
  return Dispatch::All(tensor.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(T* out, context.Buffer<T>(0, count));
    if (count > 0) FillWith<T>(context, out, count, FromDouble<T>(value));
    return absl::OkStatus();
  });
}

// elementwise::kRange.
absl::Status ElementwiseRange(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(1));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings tensor,
                        context.Descriptor<TensorDescriptorSettings>(0));
  if (tensor.rank != 1) return absl::InvalidArgumentError("range takes a rank-1 output");
  VGPU_ASSIGN_OR_RETURN(const int64_t count, DenseElementCount(tensor));
  ParamReader params = context.Params();
  VGPU_ASSIGN_OR_RETURN(const uint64_t start, params.Get<uint64_t>());
  VGPU_ASSIGN_OR_RETURN(const uint64_t delta, params.Get<uint64_t>());
  if (tensor.dtype == DType::kUInt8) {
    return absl::InvalidArgumentError("range takes floating, int32 or int64 dtypes");
  }
  return Dispatch::Numeric(tensor.dtype, [&](auto zero) -> absl::Status {
    return RunRange<decltype(zero)>(context, count, start, delta);
  });
}

}  // namespace vgpu::cpu_kernels

namespace vgpu {

void AddElementwiseKernels(KernelTable& table) {
  table.Add(elementwise::kBinary, "elementwise_binary", cpu_kernels::ElementwiseBinary);
  table.Add(elementwise::kUnary, "elementwise_unary", cpu_kernels::ElementwiseUnary);
  table.Add(elementwise::kSelect, "elementwise_select", cpu_kernels::ElementwiseSelect);
  table.Add(elementwise::kCast, "elementwise_cast", cpu_kernels::ElementwiseCast);
  table.Add(elementwise::kAddN, "elementwise_add_n", cpu_kernels::ElementwiseAddN);
  table.Add(elementwise::kFill, "elementwise_fill", cpu_kernels::ElementwiseFill);
  table.Add(elementwise::kSetTensor, "elementwise_set_tensor", cpu_kernels::ElementwiseSetTensor);
  table.Add(elementwise::kRange, "elementwise_range", cpu_kernels::ElementwiseRange);
}

}  // namespace vgpu
