// The matmul family's kernels (protocol/kernels/convolution.h: kMatmul, kMatmulBiasActivation)
// on the CUDA executor, from the geometry launch/matmul_launch.h reads: matrix products through
// cuBLASLt (float32 / float16 / bfloat16, float32 accumulation, TF32 off; the bias, and relu
// with it, in cuBLASLt's epilogue where it serves them) and cuBLAS (float64, and operand
// broadcasts that are not a uniform stride), then float_compute.cuh's epilogue kernel for what
// the library did not add. The row-major c = op(a) op(b) is computed as the column-major
// c^T = op(b)^T op(a)^T.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/backend/cuda/cuda_descriptors.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/cuda_libraries.h"
#include "plugin/backend/cuda/kernels/device_types.cuh"
#include "plugin/backend/cuda/kernels/float_compute.cuh"
#include "plugin/backend/cuda/primitive_cache.h"
#include "plugin/backend/launch/matmul_launch.h"
#include "plugin/backend/launch/plan_cache.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::cuda {
namespace {

using dnn::CublasStatus;
using kernels::Dispatch;
using matmul_launch::MatmulBiasActivationLaunch;
using matmul_launch::MatmulGeometry;
using matmul_launch::MatmulOperands;
using matmul_launch::ReadMatmulBiasActivationLaunch;
using matmul_launch::ReadMatmulLaunch;

// The largest power of two (at most 256) dividing a device address: what cuBLASLt may assume.
uint32_t AlignmentOf(const void* pointer) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && (address & (alignment - 1)) != 0) alignment /= 2;
  return alignment;
}

constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;

// A cuBLASLt product of one launch shape: the row-major c = op(a) op(b) as the column-major
// c^T = op(b)^T op(a)^T (Lt's A is the launch's b, Lt's B the launch's a; c is n x m with
// leading dimension n), strided over the batch (stride 0 for a one-matrix operand), with the
// heuristic's algorithm. The bias epilogue (bias of Lt's M = n rows) is set when the launch has
// one matrix; the bias pointer is set per call under `mutex` (the plan is shared by streams).
class MatmulPlan : public Primitive {
 public:
  dnn::MatmulDesc desc;
  dnn::MatrixLayout a, b, c;
  cublasLtMatmulHeuristicResult_t heuristic{};
  bool bias_epilogue = false;
  bool relu_in_epilogue = false;
  std::mutex mutex;
};

absl::Status SetLayoutBatch(cublasLtMatrixLayout_t layout, int32_t batches, int64_t stride) {
  VGPU_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batches,
                                       sizeof(batches)),
      "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)"));
  return CublasStatus(
      cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                       &stride, sizeof(stride)),
      "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
}

absl::StatusOr<dnn::MatrixLayout> MakeLayout(cudaDataType_t type, int64_t rows, int64_t cols,
                                             int32_t batches, int64_t stride) {
  cublasLtMatrixLayout_t handle = nullptr;
  VGPU_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatrixLayoutCreate(&handle, type, static_cast<uint64_t>(rows),
                                 static_cast<uint64_t>(cols), std::max<int64_t>(rows, 1)),
      "cublasLtMatrixLayoutCreate"));
  dnn::MatrixLayout layout(handle);
  if (batches > 1) VGPU_RETURN_IF_ERROR(SetLayoutBatch(handle, batches, stride));
  return layout;
}

absl::StatusOr<std::unique_ptr<MatmulPlan>> MakeMatmulPlan(const CudaKernelContext& context,
                                                           const MatmulGeometry& s,
                                                           bool with_bias, int activation,
                                                           const uint32_t alignments[4]) {
  VGPU_ASSIGN_OR_RETURN(cudaDataType_t type, dnn::CudaDataType(s.dtype));
  auto plan = std::make_unique<MatmulPlan>();
  cublasLtMatmulDesc_t desc = nullptr;
  VGPU_RETURN_IF_ERROR(
      CublasStatus(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                   "cublasLtMatmulDescCreate"));
  plan->desc = dnn::MatmulDesc(desc);
  const cublasOperation_t op_first = s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  VGPU_RETURN_IF_ERROR(dnn::SetMatmulDescAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, op_first,
                                                   "cublasLtMatmulDescSetAttribute(TRANSA)"));
  VGPU_RETURN_IF_ERROR(dnn::SetMatmulDescAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, op_second,
                                                   "cublasLtMatmulDescSetAttribute(TRANSB)"));
  if (with_bias && s.batches == 1) {
    plan->bias_epilogue = true;
    plan->relu_in_epilogue = activation == static_cast<int>(ActivationMode::kRelu);
    const cublasLtEpilogue_t epilogue =
        plan->relu_in_epilogue ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    VGPU_RETURN_IF_ERROR(dnn::SetMatmulDescAttribute(
        desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue, "cublasLtMatmulDescSetAttribute(EPILOGUE)"));
    VGPU_RETURN_IF_ERROR(dnn::SetMatmulDescAttribute(
        desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, type,
        "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)"));
  }
  const int32_t batches = static_cast<int32_t>(s.batches);
  VGPU_ASSIGN_OR_RETURN(plan->a, MakeLayout(type, s.transpose_b ? s.k : s.n,
                                            s.transpose_b ? s.n : s.k, batches,
                                            s.b_matrices == 1 ? 0 : s.k * s.n));
  VGPU_ASSIGN_OR_RETURN(plan->b, MakeLayout(type, s.transpose_a ? s.m : s.k,
                                            s.transpose_a ? s.k : s.m, batches,
                                            s.a_matrices == 1 ? 0 : s.m * s.k));
  VGPU_ASSIGN_OR_RETURN(plan->c, MakeLayout(type, s.n, s.m, batches, s.m * s.n));
  cublasLtMatmulPreference_t preference_handle = nullptr;
  VGPU_RETURN_IF_ERROR(CublasStatus(cublasLtMatmulPreferenceCreate(&preference_handle),
                                    "cublasLtMatmulPreferenceCreate"));
  dnn::MatmulPreference preference(preference_handle);
  const uint64_t workspace = kLtWorkspaceBytes;
  VGPU_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatmulPreferenceSetAttribute(preference_handle,
                                           CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                           sizeof(workspace)),
      "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)"));
  const cublasLtMatmulPreferenceAttributes_t alignment_attributes[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    VGPU_RETURN_IF_ERROR(CublasStatus(
        cublasLtMatmulPreferenceSetAttribute(preference_handle, alignment_attributes[i],
                                             &alignments[i], sizeof(alignments[i])),
        "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)"));
  }
  int found = 0;
  VGPU_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatmulAlgoGetHeuristic(context.device->libraries->cublas_lt(), desc,
                                     plan->a.get(), plan->b.get(), plan->c.get(), plan->c.get(),
                                     preference_handle, 1, &plan->heuristic, &found),
      "cublasLtMatmulAlgoGetHeuristic"));
  if (found == 0) {
    return absl::UnimplementedError("matmul: cuBLASLt has no algorithm for this product");
  }
  return plan;
}

// c (buffer c_buffer) = op(a) op(b) [+ bias, activation]. `bias` null: none; activation -1:
// identity.
template <typename T>
absl::Status MatmulTyped(const CudaKernelContext& context, const MatmulGeometry& s,
                         uint32_t kernel_id, size_t c_buffer, const T* bias, int activation) {
  const CudaLaunchDevice& device = *context.device;
  VGPU_ASSIGN_OR_RETURN(const T* a, context.Buffer<const T>(0, s.a_elements));
  VGPU_ASSIGN_OR_RETURN(const T* b, context.Buffer<const T>(1, s.b_elements));
  VGPU_ASSIGN_OR_RETURN(T* c, context.Buffer<T>(c_buffer, s.c_elements));
  const int64_t c_elements = s.c_elements;
  if (c_elements == 0) return absl::OkStatus();
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  bool epilogue_done = false;   // bias added by the library
  bool activation_done = false; // activation applied by the library
  if (s.k == 0) {
    VGPU_RETURN_IF_ERROR(ZeroAsync(device, c, c_elements * sizeof(T)));
  } else if (!std::is_same_v<T, double> && s.UniformBatches() && s.batches <= kIntMax) {
    const uint32_t alignments[4] = {AlignmentOf(b), AlignmentOf(a), AlignmentOf(c),
                                    AlignmentOf(c)};
    // The bias epilogue only for a 16-byte aligned bias (an assumption on cuBLASLt's needs);
    // otherwise this file's kernel adds it.
    const bool bias_in_library = bias != nullptr && AlignmentOf(bias) >= 16;
    PlanKey key = PlanKey::ForLaunch(kernel_id, context);
    key.AddValue(alignments);
    key.AddValue(bias_in_library);
    VGPU_ASSIGN_OR_RETURN(std::shared_ptr<MatmulPlan> plan,
                          device.primitives->GetOrCreate<MatmulPlan>(key, [&]() {
                            return MakeMatmulPlan(context, s, bias_in_library, activation,
                                                  alignments);
                          }));
    VGPU_ASSIGN_OR_RETURN(void* workspace, device.libraries->Workspace(kLtWorkspaceBytes));
    const float alpha = 1.0f, beta = 0.0f;
    std::lock_guard<std::mutex> lock(plan->mutex);
    if (plan->bias_epilogue) {
      const void* bias_pointer = bias;
      VGPU_RETURN_IF_ERROR(dnn::SetMatmulDescAttribute(
          plan->desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_pointer,
          "cublasLtMatmulDescSetAttribute(BIAS_POINTER)"));
      epilogue_done = true;
      activation_done = plan->relu_in_epilogue;
    }
    VGPU_RETURN_IF_ERROR(CublasStatus(
        cublasLtMatmul(device.libraries->cublas_lt(), plan->desc.get(), &alpha, b, plan->a.get(),
                       a, plan->b.get(), &beta, c, plan->c.get(), c, plan->c.get(),
                       &plan->heuristic.algo, workspace, kLtWorkspaceBytes, device.stream),
        "cublasLtMatmul"));
  } else {
    // cuBLAS: float64, or batch broadcasts that are not a uniform stride (one product per
    // output matrix).
    if (s.m > kIntMax || s.n > kIntMax || s.k > kIntMax || s.batches > kIntMax) {
      return absl::UnimplementedError("matmul: a product too large for cuBLAS's int extents");
    }
    VGPU_ASSIGN_OR_RETURN(cudaDataType_t type, dnn::CudaDataType(s.dtype));
    const bool is_double = std::is_same_v<T, double>;
    const cublasComputeType_t compute = is_double ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
    const float alpha_f = 1.0f, beta_f = 0.0f;
    const double alpha_d = 1.0, beta_d = 0.0;
    const void* alpha = is_double ? static_cast<const void*>(&alpha_d) : &alpha_f;
    const void* beta = is_double ? static_cast<const void*>(&beta_d) : &beta_f;
    const cublasOperation_t op_first = s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_second = s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int M = static_cast<int>(s.n), N = static_cast<int>(s.m), K = static_cast<int>(s.k);
    const int ld_first = static_cast<int>(std::max<int64_t>(s.transpose_b ? s.k : s.n, 1));
    const int ld_second = static_cast<int>(std::max<int64_t>(s.transpose_a ? s.m : s.k, 1));
    cublasHandle_t handle = device.libraries->cublas();
    if (s.UniformBatches()) {
      VGPU_RETURN_IF_ERROR(CublasStatus(
          cublasGemmStridedBatchedEx(handle, op_first, op_second, M, N, K, alpha, b, type,
                                     ld_first, s.b_matrices == 1 ? 0 : s.k * s.n, a, type,
                                     ld_second, s.a_matrices == 1 ? 0 : s.m * s.k, beta, c, type,
                                     M, s.m * s.n, static_cast<int>(s.batches), compute,
                                     CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx"));
    } else {
      for (int64_t batch = 0; batch < s.batches; ++batch) {
        const MatmulOperands operands = s.OperandsOf(batch);
        VGPU_RETURN_IF_ERROR(CublasStatus(
            cublasGemmEx(handle, op_first, op_second, M, N, K, alpha, b + operands.b * s.k * s.n,
                         type, ld_first, a + operands.a * s.m * s.k, type, ld_second, beta,
                         c + batch * s.m * s.n, type, M, compute, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx"));
      }
    }
  }
  const T* remaining_bias = epilogue_done ? nullptr : bias;
  const int remaining_activation = activation_done ? -1 : activation;
  if (remaining_bias != nullptr || remaining_activation >= 0) {
    VGPU_RETURN_IF_ERROR(LaunchGridStride("matmul bias activation", device, c_elements,
                                          BiasActivationKernel<T>, c, c_elements, s.n,
                                          int64_t{1}, remaining_bias, remaining_activation));
  }
  return absl::OkStatus();
}

absl::Status Matmul(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(MatmulGeometry geometry, ReadMatmulLaunch(context));
  return Dispatch::Floating(geometry.dtype, [&](auto zero) {
    using T = decltype(zero);
    return MatmulTyped<T>(context, geometry, static_cast<uint32_t>(convolution::kMatmul),
                          /*c_buffer=*/2, /*bias=*/nullptr, /*activation=*/-1);
  });
}

absl::Status MatmulBiasActivation(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(MatmulBiasActivationLaunch launch,
                        ReadMatmulBiasActivationLaunch(context));
  const MatmulGeometry& geometry = launch.geometry;
  return Dispatch::Floating(geometry.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* bias_data, context.Buffer<const T>(2, geometry.n));
    return MatmulTyped<T>(context, geometry,
                          static_cast<uint32_t>(convolution::kMatmulBiasActivation),
                          /*c_buffer=*/3, bias_data, ActivationCode(launch.activation));
  });
}

}  // namespace

void AddCudaMatmulKernels(CudaKernelTable& table) {
  table.AddFamily(kernel_families::kMatmul, Matmul, MatmulBiasActivation);
}

}  // namespace vgpu::cuda
