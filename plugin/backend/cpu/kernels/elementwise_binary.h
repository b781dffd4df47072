// The shared body of the binary op-tensor kernel (elementwise::kBinary) on the CPU backing
// executor: RunBinary evaluates any Eigen-style binary functor over a broadcast layout, and
// ErrorFlag lets a functor report a bad element (an integer division by zero) without slowing
// down the others. The functors themselves live in elementwise_binary_kernels.cc (arithmetic)
// and elementwise_compare_kernels.cc (comparisons and logical ops).
#ifndef VGPU_BACKEND_CPU_KERNELS_ELEMENTWISE_BINARY_H_
#define VGPU_BACKEND_CPU_KERNELS_ELEMENTWISE_BINARY_H_

#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif
#include <atomic>

#include "absl/status/status.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/elementwise_broadcast.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/descriptors.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {

// Set by a functor, from any thread, when it meets an element it cannot compute.
class ErrorFlag {
 public:
  void Raise() const { raised_.store(true, std::memory_order_relaxed); }
  bool raised() const { return raised_.load(std::memory_order_relaxed); }

 private:
  mutable std::atomic<bool> raised_{false};
};

// out[i] = functor(a[i or 0], b[i or 0]) for i in [0, n): a plain loop per operand shape. `out`
// may be `a` or `b` itself (a forwarded input), so nothing is declared __restrict.
template <typename Tin, typename Tout, typename Functor>
inline void BinaryLoops(const Tin* a, bool a_contiguous, const Tin* b, bool b_contiguous,
                        Tout* out, int64_t n, const Functor& functor) {
  if (a_contiguous && b_contiguous) {
    for (int64_t i = 0; i < n; ++i) out[i] = functor(a[i], b[i]);
  } else if (b_contiguous) {
    const Tin a0 = *a;
    for (int64_t i = 0; i < n; ++i) out[i] = functor(a0, b[i]);
  } else if (a_contiguous) {
    const Tin b0 = *b;
    for (int64_t i = 0; i < n; ++i) out[i] = functor(a[i], b0);
  } else {
    const Tout value = functor(*a, *b);
    for (int64_t i = 0; i < n; ++i) out[i] = value;
  }
}

// out = functor(a, b) over `layout` (buffers [a, b, out] of the launch). Each segment of the
// output is one flat Eigen expression on the calling thread of the pool: both operands
// contiguous, or one of them a repeated element (a constant expression, never materialised).
// A functor Eigen has no packet form of (the comparisons, whose bool results it would compute
// one element at a time) runs as plain loops over the segment instead, which the compiler
// vectorises where the including file lets it (`vect-cost-model=dynamic`): the same scalar
// operator() on every element, so the same results.
template <typename Tin, typename Tout, typename Functor>
absl::Status RunBinary(const KernelContext& context, const BroadcastLayout<2>& layout,
                       const Functor& functor) {
  VGPU_ASSIGN_OR_RETURN(const Tin* a, context.Buffer<const Tin>(0, layout.input_counts[0]));
  VGPU_ASSIGN_OR_RETURN(const Tin* b, context.Buffer<const Tin>(1, layout.input_counts[1]));
  VGPU_ASSIGN_OR_RETURN(Tout* out, context.Buffer<Tout>(2, layout.output_count));
  if (layout.output_count == 0) return absl::OkStatus();
  const Eigen::TensorOpCost cost = ElementCost(
      2 * sizeof(Tin), sizeof(Tout), Eigen::internal::functor_traits<Functor>::Cost);
  ForEachSegment(*context.device, layout, cost, [&](const Segment<2>& segment) {
    const Eigen::Index n = segment.length;
    FlatMap<Tout> result(out + segment.output_offset, n);
    const Tin* a_start = a + segment.input_offsets[0];
    const Tin* b_start = b + segment.input_offsets[1];
    const bool a_contiguous = segment.input_strides[0] != 0;
    const bool b_contiguous = segment.input_strides[1] != 0;
    if constexpr (!Eigen::internal::functor_traits<Functor>::PacketAccess) {
      BinaryLoops(a_start, a_contiguous, b_start, b_contiguous, out + segment.output_offset, n,
                  functor);
      return;
    }
    if (a_contiguous && b_contiguous) {
      result = ConstFlatMap<Tin>(a_start, n).binaryExpr(ConstFlatMap<Tin>(b_start, n), functor);
    } else if (b_contiguous) {
      ConstFlatMap<Tin> b_map(b_start, n);
      result = b_map.constant(*a_start).binaryExpr(b_map, functor);
    } else if (a_contiguous) {
      ConstFlatMap<Tin> a_map(a_start, n);
      result = a_map.binaryExpr(a_map.constant(*b_start), functor);
    } else {
      result.setConstant(functor(*a_start, *b_start));
    }
  });
  return absl::OkStatus();
}

// The arithmetic half of kBinary (elementwise_binary_kernels.cc): every op that is neither a
// comparison nor a logical op, for a launch ReadBinaryLaunch (launch/elementwise_launch.h) has
// validated.
absl::Status RunBinaryArithmetic(const KernelContext& context, ElementwiseOp op, DType dtype,
                                 const BroadcastLayout<2>& layout);

// Comparisons (bool output) and logical ops (elementwise_compare_kernels.cc), likewise.
absl::Status RunBinaryPredicate(const KernelContext& context, ElementwiseOp op, DType dtype,
                                const BroadcastLayout<2>& layout);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_ELEMENTWISE_BINARY_H_
