// The matmul family's kernels (protocol/kernels/convolution.h: kMatmul, kMatmulBiasActivation)
// on the CPU backing executor, from the geometry launch/matmul_launch.h reads: Eigen tensor
// contractions, as TensorFlow's CPU MatMul and BatchMatMulV2 use, with float accumulation for
// the 16-bit types, then the fused bias and activation. A batch of small products runs one
// product per thread; large products use the whole thread pool each. Float32 products go to
// oneDNN first (matmul_onednn.cc) when the build has it, bfloat16 ones too where the CPU has
// bfloat16 math, and so do float32 copies of the other half/bfloat16 ones (Keras' mixed
// precision).
#include "plugin/backend/cpu/kernels/float_compute.h"  // first: EIGEN_USE_THREADS

#include <optional>

#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/float_staging.h"
#include "plugin/backend/cpu/kernels/onednn_kernels.h"
#include "plugin/backend/cpu/kernels/onednn_primitives.h"
#include "plugin/backend/launch/matmul_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::cpu_kernels {
namespace {

using matmul_launch::MatmulBiasActivationLaunch;
using matmul_launch::MatmulGeometry;
using matmul_launch::MatmulOperands;
using matmul_launch::ReadMatmulBiasActivationLaunch;
using matmul_launch::ReadMatmulLaunch;
using Index = Eigen::DenseIndex;

// Products at least this large (m * n * k) get the whole thread pool each.
constexpr double kLargeProduct = 64.0 * 64.0 * 64.0;

// Products of a and b (buffers 0 and 1) into buffer `c_buffer`.
template <typename T>
absl::Status MatmulTyped(const KernelContext& context, const MatmulGeometry& s, size_t c_buffer) {
  using CT = ComputeType<T>;
  const Index batches = s.batches;
  VGPU_ASSIGN_OR_RETURN(const T* a, context.Buffer<const T>(0, s.a_elements));
  VGPU_ASSIGN_OR_RETURN(const T* b, context.Buffer<const T>(1, s.b_elements));
  VGPU_ASSIGN_OR_RETURN(T* c, context.Buffer<T>(c_buffer, s.c_elements));
  const Eigen::ThreadPoolDevice& device = *context.device;
  if (s.c_elements == 0) return absl::OkStatus();
  if (s.k == 0) {
    FlatMap<T> flat(c, s.c_elements);
    flat.device(device) = flat.constant(T(0));
    return absl::OkStatus();
  }
  if constexpr (kIsFloat16Bit<T>) {
    if (ExecutorUsesOnednn()) {
      // oneDNN's float32 product of float32 copies, rounded to T once: what the Eigen
      // contraction below computes (float accumulation), on oneDNN's kernels.
      Scratch<float> a32(s.a_elements), b32(s.b_elements), c32(s.c_elements);
      WidenToFloat(device, a, a32.data(), s.a_elements);
      WidenToFloat(device, b, b32.data(), s.b_elements);
      MatmulGeometry staged = s;
      staged.dtype = DType::kFloat32;
      VGPU_ASSIGN_OR_RETURN(bool done,
                            OnednnMatmul<float>(device, staged, a32.data(), b32.data(),
                                                /*bias=*/nullptr, std::nullopt, c32.data()));
      if (done) {
        NarrowFromFloat(device, c32.data(), c, s.c_elements);
        return absl::OkStatus();
      }
    }
  }
  // TensorFlow's contraction pairs for transposed operands.
  const Eigen::array<Eigen::IndexPair<Index>, 1> pair{
      Eigen::IndexPair<Index>(s.transpose_a ? 0 : 1, s.transpose_b ? 1 : 0)};
  auto multiply = [&](const auto& on, Index batch) {
    const MatmulOperands operands = s.OperandsOf(batch);
    RowMajorMap<const T, 2> lhs(a + operands.a * s.m * s.k,
                                s.transpose_a ? s.k : s.m, s.transpose_a ? s.m : s.k);
    RowMajorMap<const T, 2> rhs(b + operands.b * s.k * s.n,
                                s.transpose_b ? s.n : s.k, s.transpose_b ? s.k : s.n);
    RowMajorMap<T, 2> out(c + batch * s.m * s.n, s.m, s.n);
    if constexpr (std::is_same_v<T, CT>) {
      out.device(on) = lhs.contract(rhs, pair);
    } else {
      out.device(on) = lhs.template cast<CT>()
                           .contract(rhs.template cast<CT>(), pair)
                           .template cast<T>();
    }
  };
  const double product = static_cast<double>(s.m) * s.n * s.k;
  if (batches == 1 || product >= kLargeProduct) {
    for (Index batch = 0; batch < batches; ++batch) multiply(device, batch);
    return absl::OkStatus();
  }
  const Eigen::TensorOpCost cost((s.m * s.k + s.k * s.n) * sizeof(T), s.m * s.n * sizeof(T),
                                 2 * product);
  device.parallelFor(batches, cost, [&](Index first, Index last) {
    Eigen::DefaultDevice single_thread;
    for (Index batch = first; batch < last; ++batch) multiply(single_thread, batch);
  });
  return absl::OkStatus();
}

// Runs the product of buffers 0 and 1 (float32, or bfloat16 where the CPU has bfloat16 math)
// into buffer `c_buffer` with oneDNN, adding the bias in buffer `bias_buffer` (none: -1) and
// the activation: true when oneDNN did, false when the Eigen kernel must.
template <typename T>
absl::StatusOr<bool> TryOnednnMatmul(const KernelContext& context, const MatmulGeometry& s,
                                     size_t c_buffer, int bias_buffer,
                                     std::optional<ActivationMode> activation) {
  VGPU_ASSIGN_OR_RETURN(const T* a, context.Buffer<const T>(0, s.a_elements));
  VGPU_ASSIGN_OR_RETURN(const T* b, context.Buffer<const T>(1, s.b_elements));
  VGPU_ASSIGN_OR_RETURN(T* c, context.Buffer<T>(c_buffer, s.c_elements));
  const T* bias = nullptr;
  if (bias_buffer >= 0) {
    VGPU_ASSIGN_OR_RETURN(bias, context.Buffer<const T>(bias_buffer, s.n));
  }
  if (s.c_elements == 0 || s.k == 0) return false;
  return OnednnMatmul(*context.device, s, a, b, bias, activation, c);
}

// TryOnednnMatmul in the geometry's type when oneDNN takes that type as it is; false otherwise.
absl::StatusOr<bool> TryOnednnMatmulOfType(const KernelContext& context, const MatmulGeometry& s,
                                           size_t c_buffer, int bias_buffer,
                                           std::optional<ActivationMode> activation) {
  if (s.dtype == DType::kFloat32) {
    return TryOnednnMatmul<float>(context, s, c_buffer, bias_buffer, activation);
  }
  if (s.dtype == DType::kBFloat16) {
    return TryOnednnMatmul<Eigen::bfloat16>(context, s, c_buffer, bias_buffer, activation);
  }
  return false;
}

absl::Status Matmul(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(MatmulGeometry geometry, ReadMatmulLaunch(context));
  VGPU_ASSIGN_OR_RETURN(bool done, TryOnednnMatmulOfType(context, geometry, /*c_buffer=*/2,
                                                         /*bias_buffer=*/-1, std::nullopt));
  if (done) return absl::OkStatus();
  return Dispatch::Floating(geometry.dtype, [&](auto zero) {
    return MatmulTyped<decltype(zero)>(context, geometry, /*c_buffer=*/2);
  });
}

absl::Status MatmulBiasActivation(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(MatmulBiasActivationLaunch launch,
                        ReadMatmulBiasActivationLaunch(context));
  const MatmulGeometry& geometry = launch.geometry;
  VGPU_ASSIGN_OR_RETURN(bool done, TryOnednnMatmulOfType(context, geometry, /*c_buffer=*/3,
                                                         /*bias_buffer=*/2, launch.activation));
  if (done) return absl::OkStatus();
  return Dispatch::Floating(geometry.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_RETURN_IF_ERROR(MatmulTyped<T>(context, geometry, /*c_buffer=*/3));
    VGPU_ASSIGN_OR_RETURN(const T* bias_data, context.Buffer<const T>(2, geometry.n));
    VGPU_ASSIGN_OR_RETURN(T* c, context.Buffer<T>(3, geometry.c_elements));
    AddBiasAndActivate<ComputeType<T>>(*context.device, c, geometry.batches * geometry.m,
                                       geometry.n, bias_data, launch.activation);
    return absl::OkStatus();
  });
}

}  // namespace

void AddMatmulKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kMatmul, Matmul, MatmulBiasActivation);
}

}  // namespace vgpu::cpu_kernels
