// TensorFlow's MatMul, BatchMatMulV2 and BatchMatMulV3 on the virtual GPU, written as
// TensorFlow's cuBLAS kernels are: validate as TensorFlow does, allocate the product, then per
// call create and set a matmul descriptor and tensor descriptors for a, b and c and launch
// (protocol/kernels/convolution.h, kMatmul).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/kernels/convolution_ops.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::conv {
namespace {

constexpr std::initializer_list<TF_DataType> kMatmulTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                             TF_DOUBLE};

// MatMul (kBatched = false: rank-2 operands, transpose_a/transpose_b), BatchMatMulV2 and
// BatchMatMulV3 (kBatched = true: rank >= 2 with broadcast batch dimensions, adj_x/adj_y, which
// are plain transposes for real types) and _FusedMatMul (kFused: MatMul, then BiasAdd with the
// third input and optionally an activation; Grappler makes these on GPUs when
// TF_USE_CUBLASLT=1).
template <bool kBatched, bool kFused = false>
class MatmulOp {
 public:
  static absl::StatusOr<std::unique_ptr<MatmulOp>> Create(OpConstruction& construction) {
    auto op = std::make_unique<MatmulOp>();
    VGPU_ASSIGN_OR_RETURN(op->transpose_a_,
                          construction.Bool(kBatched ? "adj_x" : "transpose_a"));
    VGPU_ASSIGN_OR_RETURN(op->transpose_b_,
                          construction.Bool(kBatched ? "adj_y" : "transpose_b"));
    if constexpr (kFused) {
      VGPU_ASSIGN_OR_RETURN(op->fused_, ReadFusedBiasActivation(
                                            construction, {"Relu", "Relu6", "Sigmoid", "Tanh"}));
    }
    return op;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [a, b] = inputs;
    const auto [a_shape, b_shape] = ShapesOf(inputs);
    VGPU_RETURN_IF_ERROR(ValidateRanks(a_shape, b_shape));
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> c_shape, BroadcastBatch(a_shape, b_shape));
    int64_t m = a_shape[a_shape.size() - 2], k = a_shape[a_shape.size() - 1];
    int64_t b_k = b_shape[b_shape.size() - 2], n = b_shape[b_shape.size() - 1];
    if (transpose_a_) std::swap(m, k);
    if (transpose_b_) std::swap(b_k, n);
    if (k != b_k) {
      return absl::InvalidArgumentError(absl::StrCat("Matrix size-incompatible: In[0]: ",
                                                     ShapeString(a_shape),
                                                     ", In[1]: ", ShapeString(b_shape)));
    }
    c_shape.push_back(m);
    c_shape.push_back(n);
    const TF_DataType dtype = TF_TensorType(a.get());
    TensorPtr bias;
    if constexpr (kFused) {
      VGPU_ASSIGN_OR_RETURN(bias, context.Input(2));
      const std::vector<int64_t> bias_shape = ShapeOf(bias.get());
      if (bias_shape.size() != 1 || bias_shape[0] != n || TF_TensorType(bias.get()) != dtype) {
        return absl::InvalidArgumentError(absl::StrCat(
            "_FusedMatMul: the bias must be a vector of ", n, " elements, got ",
            ShapeString(bias_shape)));
      }
    }
    VGPU_ASSIGN_OR_RETURN(TensorPtr c, context.AllocateOutput(0, dtype, c_shape));
    if (TF_TensorElementCount(c.get()) == 0) return absl::OkStatus();
    // Empty operands (k == 0) give zeros; the kernel writes them.

    MatmulDescriptorSettings matmul_settings;
    matmul_settings.transpose_a = transpose_a_ ? 1 : 0;
    matmul_settings.transpose_b = transpose_b_ ? 1 : 0;
    VGPU_ASSIGN_OR_RETURN(matmul_settings.dtype, DTypeOf(dtype));
    KernelLaunch launch(context);
    launch.Describe(matmul_settings)
        .DescribeTensor(a.get())
        .DescribeTensor(b.get())
        .DescribeTensor(c.get());
    if constexpr (kFused) {
      DescribeEpilogue(launch, bias.get(), fused_);
      return launch.Buffer(a.get()).Buffer(b.get()).Buffer(bias.get()).Buffer(c.get())
          .Run(convolution::kMatmulBiasActivation);
    }
    return launch.Buffer(a.get()).Buffer(b.get()).Buffer(c.get()).Run(convolution::kMatmul);
  }

 private:
  // TensorFlow's ValidateInputTensors of MatMul / BatchMatMulV2.
  static absl::Status ValidateRanks(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    if (!kBatched) {
      if (a.size() != b.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "In[0] and In[1] has different ndims: ", ShapeString(a), " vs. ", ShapeString(b)));
      }
      if (a.size() != 2) {
        return absl::InvalidArgumentError(
            absl::StrCat("In[0] and In[1] ndims must be == 2: ", a.size()));
      }
      return absl::OkStatus();
    }
    if (a.size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat("In[0] ndims must be >= 2: ", a.size()));
    }
    if (b.size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat("In[1] ndims must be >= 2: ", b.size()));
    }
    if (a.size() - 2 > static_cast<size_t>(kMaxRank - 2) ||
        b.size() - 2 > static_cast<size_t>(kMaxRank - 2)) {
      return absl::InvalidArgumentError(
          absl::StrCat("matmul operands of rank above ", kMaxRank, " are not supported"));
    }
    return absl::OkStatus();
  }

  // The broadcast of the batch dimensions (all but the last two), right-aligned.
  static absl::StatusOr<std::vector<int64_t>> BroadcastBatch(const std::vector<int64_t>& a,
                                                             const std::vector<int64_t>& b) {
    const size_t a_rank = a.size() - 2, b_rank = b.size() - 2;
    const size_t rank = std::max(a_rank, b_rank);
    std::vector<int64_t> batch(rank);
    for (size_t i = 0; i < rank; ++i) {
      const int64_t a_dim = i + a_rank >= rank ? a[i + a_rank - rank] : 1;
      const int64_t b_dim = i + b_rank >= rank ? b[i + b_rank - rank] : 1;
      if (a_dim != b_dim && a_dim != 1 && b_dim != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("In[0] and In[1] must have compatible batch dimensions: ",
                         ShapeString(a), " vs. ", ShapeString(b)));
      }
      batch[i] = a_dim == 1 ? b_dim : a_dim;
    }
    return batch;
  }

  bool transpose_a_ = false;
  bool transpose_b_ = false;
  FusedBiasActivation fused_;  // kFused only
};

}  // namespace

void RegisterMatmulOps(const char* device_type) {
  RegisterKernelForTypes<MatmulOp<false>>("MatMul", device_type, "T", kMatmulTypes);
  DocumentOp("MatMul", "", "transpose_a/transpose_b; sums in float for float16/bfloat16.");
  RegisterKernelForTypes<MatmulOp<true>>("BatchMatMulV2", device_type, "T", kMatmulTypes);
  DocumentOp("BatchMatMulV2", "", "Broadcast batch dimensions; adj_x/adj_y; rank <= 8.");
  // BatchMatMulV3 as TensorFlow's GPU build registers it: Ta = Tb = Tout.
  for (TF_DataType dtype : kMatmulTypes) {
    RegisterKernel<MatmulOp<true>>("BatchMatMulV3", device_type,
                                   {{"Ta", dtype}, {"Tb", dtype}, {"Tout", dtype}});
  }
  DocumentOp("BatchMatMulV3", "",
             "Ta = Tb = Tout (TensorFlow's GPU registrations); broadcast batch dimensions; "
             "adj_x/adj_y; rank <= 8.");
  RegisterKernelForTypes<MatmulOp<false, /*kFused=*/true>>("_FusedMatMul", device_type, "T",
                                                          {TF_FLOAT, TF_HALF, TF_BFLOAT16});
  DocumentOp("_FusedMatMul", "",
             "Grappler's MatMul + BiasAdd (+ Relu/Relu6/Sigmoid/Tanh) fusion.");
}

}  // namespace vgpu::conv
