// The matrix-multiplication kernel of the convolution family (protocol/kernels/convolution.h,
// kMatmul) on the CPU backing executor: Eigen tensor contractions, as TensorFlow's CPU MatMul
// and BatchMatMulV2 use, with float accumulation for the 16-bit types. A batch of small
// products runs one product per thread; large products use the whole thread pool each. Float32
// products go to oneDNN first (matmul_onednn.cc) when the build has it.
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernels/convolution_kernels.h"
#include "plugin/backend/cpu/kernels/onednn_kernels.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/common/status_macros.h"

namespace vgpu::cpu_kernels {
namespace {

using Index = Eigen::DenseIndex;

// Products at least this large (m * n * k) get the whole thread pool each.
constexpr double kLargeProduct = 64.0 * 64.0 * 64.0;

// The shape of a (batched) product. Batch dimensions are right-aligned and padded with 1s to
// the output's batch rank; a dimension of 1 in a or b is broadcast.
struct MatmulShape {
  bool transpose_a = false, transpose_b = false;
  Index m = 0, n = 0, k = 0;
  Index a_matrices = 1, b_matrices = 1, batches = 1;
  std::vector<Index> a_dims, b_dims, out_dims;

  // The a and b matrices output matrix `batch` reads.
  std::pair<Index, Index> Operands(Index batch) const {
    Index a_index = 0, b_index = 0, a_stride = 1, b_stride = 1;
    for (int i = static_cast<int>(out_dims.size()) - 1; i >= 0; --i) {
      const Index position = batch % out_dims[i];
      batch /= out_dims[i];
      if (a_dims[i] != 1) a_index += position * a_stride;
      if (b_dims[i] != 1) b_index += position * b_stride;
      a_stride *= a_dims[i];
      b_stride *= b_dims[i];
    }
    return {a_index, b_index};
  }
};

Index Product(const int64_t* dims, int count) {
  Index product = 1;
  for (int i = 0; i < count; ++i) product *= dims[i];
  return product;
}

absl::StatusOr<MatmulShape> ReadMatmulShape(const MatmulDescriptorSettings& matmul,
                                            const TensorDescriptorSettings& a,
                                            const TensorDescriptorSettings& b,
                                            const TensorDescriptorSettings& c) {
  if (a.rank < 2 || b.rank < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("matmul operands must have rank >= 2, got ", a.rank, " and ", b.rank));
  }
  if (a.dtype != matmul.dtype || b.dtype != matmul.dtype || c.dtype != matmul.dtype) {
    return absl::InvalidArgumentError("matmul operand and result dtypes differ");
  }
  if (a.rank > kMaxRank || b.rank > kMaxRank || c.rank > kMaxRank) {
    return absl::InvalidArgumentError("matmul tensor rank too large");
  }
  VGPU_RETURN_IF_ERROR(CheckedElementCount("matmul a", a.dims, a.rank).status());
  VGPU_RETURN_IF_ERROR(CheckedElementCount("matmul b", b.dims, b.rank).status());
  VGPU_RETURN_IF_ERROR(CheckedElementCount("matmul c", c.dims, c.rank).status());
  MatmulShape shape;
  shape.transpose_a = matmul.transpose_a != 0;
  shape.transpose_b = matmul.transpose_b != 0;
  const int64_t a_rows = a.dims[a.rank - 2], a_cols = a.dims[a.rank - 1];
  const int64_t b_rows = b.dims[b.rank - 2], b_cols = b.dims[b.rank - 1];
  shape.m = shape.transpose_a ? a_cols : a_rows;
  shape.k = shape.transpose_a ? a_rows : a_cols;
  const int64_t b_k = shape.transpose_b ? b_cols : b_rows;
  shape.n = shape.transpose_b ? b_rows : b_cols;
  if (b_k != shape.k) {
    return absl::InvalidArgumentError(
        absl::StrCat("matmul inner dimensions differ: ", shape.k, " vs ", b_k));
  }
  const int a_batch_rank = a.rank - 2, b_batch_rank = b.rank - 2;
  const int batch_rank = std::max(a_batch_rank, b_batch_rank);
  if (c.rank != batch_rank + 2 || c.dims[c.rank - 2] != shape.m ||
      c.dims[c.rank - 1] != shape.n) {
    return absl::InvalidArgumentError("matmul result shape does not match its operands");
  }
  // Broadcast the batch dimensions (right-aligned) and check them against c's.
  shape.a_dims.assign(batch_rank, 1);
  shape.b_dims.assign(batch_rank, 1);
  shape.out_dims.resize(batch_rank);
  for (int i = 0; i < a_batch_rank; ++i) shape.a_dims[batch_rank - a_batch_rank + i] = a.dims[i];
  for (int i = 0; i < b_batch_rank; ++i) shape.b_dims[batch_rank - b_batch_rank + i] = b.dims[i];
  for (int i = 0; i < batch_rank; ++i) {
    const Index a_dim = shape.a_dims[i], b_dim = shape.b_dims[i];
    if (a_dim != b_dim && a_dim != 1 && b_dim != 1) {
      return absl::InvalidArgumentError("matmul batch dimensions do not broadcast");
    }
    shape.out_dims[i] = a_dim == 1 ? b_dim : a_dim;
    if (c.dims[i] != shape.out_dims[i]) {
      return absl::InvalidArgumentError("matmul result batch dimensions do not match");
    }
  }
  shape.a_matrices = Product(a.dims, a_batch_rank);
  shape.b_matrices = Product(b.dims, b_batch_rank);
  shape.batches = Product(c.dims, batch_rank);
  return shape;
}

// Products of a and b (buffers 0 and 1) into buffer `c_buffer`.
template <typename T>
absl::Status MatmulTyped(const KernelContext& context, const MatmulShape& s, size_t c_buffer) {
  using CT = ComputeType<T>;
  const Index batches = s.batches;
  VGPU_ASSIGN_OR_RETURN(const T* a, context.Buffer<const T>(0, s.a_matrices * s.m * s.k));
  VGPU_ASSIGN_OR_RETURN(const T* b, context.Buffer<const T>(1, s.b_matrices * s.k * s.n));
  VGPU_ASSIGN_OR_RETURN(T* c, context.Buffer<T>(c_buffer, batches * s.m * s.n));
  const Eigen::ThreadPoolDevice& device = *context.device;
  if (batches * s.m * s.n == 0) return absl::OkStatus();
  if (s.k == 0) {
    FlatMap<T> flat(c, batches * s.m * s.n);
    flat.device(device) = flat.constant(T(0));
    return absl::OkStatus();
  }
  // TensorFlow's contraction pairs for transposed operands.
  const Eigen::array<Eigen::IndexPair<Index>, 1> pair{
      Eigen::IndexPair<Index>(s.transpose_a ? 0 : 1, s.transpose_b ? 1 : 0)};
  auto multiply = [&](const auto& on, Index batch) {
    const auto [a_index, b_index] = s.Operands(batch);
    RowMajorMap<const T, 2> lhs(a + a_index * s.m * s.k,
                                s.transpose_a ? s.k : s.m, s.transpose_a ? s.m : s.k);
    RowMajorMap<const T, 2> rhs(b + b_index * s.k * s.n,
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

// Runs a float32 product of buffers 0 and 1 into buffer `c_buffer` with oneDNN, adding `bias`
// (null: none) and the activation: true when oneDNN did, false when the Eigen kernel must.
absl::StatusOr<bool> TryOnednnMatmul(const KernelContext& context, const MatmulShape& s,
                                     size_t c_buffer, const float* bias,
                                     std::optional<ActivationMode> activation) {
  VGPU_ASSIGN_OR_RETURN(const float* a, context.Buffer<const float>(0, s.a_matrices * s.m * s.k));
  VGPU_ASSIGN_OR_RETURN(const float* b, context.Buffer<const float>(1, s.b_matrices * s.k * s.n));
  VGPU_ASSIGN_OR_RETURN(float* c, context.Buffer<float>(c_buffer, s.batches * s.m * s.n));
  if (s.batches * s.m * s.n == 0 || s.k == 0) return false;
  OnednnMatmulShape shape;
  shape.transpose_a = s.transpose_a;
  shape.transpose_b = s.transpose_b;
  shape.m = s.m;
  shape.n = s.n;
  shape.k = s.k;
  shape.a_batch.assign(s.a_dims.begin(), s.a_dims.end());
  shape.b_batch.assign(s.b_dims.begin(), s.b_dims.end());
  shape.out_batch.assign(s.out_dims.begin(), s.out_dims.end());
  return OnednnMatmul(*context.device, shape, a, b, bias, activation, c);
}

// The shape of a matmul launch from its descriptors [matmul, a, b, c, ...].
absl::StatusOr<MatmulShape> ReadMatmulLaunch(const KernelContext& context, DType* dtype) {
  VGPU_ASSIGN_OR_RETURN(MatmulDescriptorSettings matmul,
                        context.Descriptor<MatmulDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings a, context.Descriptor<TensorDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings b, context.Descriptor<TensorDescriptorSettings>(2));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings c, context.Descriptor<TensorDescriptorSettings>(3));
  *dtype = matmul.dtype;
  return ReadMatmulShape(matmul, a, b, c);
}

}  // namespace

absl::Status Matmul(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  DType dtype;
  VGPU_ASSIGN_OR_RETURN(MatmulShape shape, ReadMatmulLaunch(context, &dtype));
  if (dtype == DType::kFloat32) {
    VGPU_ASSIGN_OR_RETURN(bool done, TryOnednnMatmul(context, shape, /*c_buffer=*/2,
                                                     /*bias=*/nullptr, std::nullopt));
    if (done) return absl::OkStatus();
  }
  return Dispatch::Floating(dtype, [&](auto zero) {
    return MatmulTyped<decltype(zero)>(context, shape, /*c_buffer=*/2);
  });
}

absl::Status MatmulBiasActivation(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(4));
  DType dtype;
  VGPU_ASSIGN_OR_RETURN(MatmulShape shape, ReadMatmulLaunch(context, &dtype));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings bias,
                        context.Descriptor<TensorDescriptorSettings>(4));
  if (bias.rank != 1 || bias.dims[0] != shape.n || bias.dtype != dtype) {
    return absl::InvalidArgumentError("the bias must be a vector of the product's columns");
  }
  VGPU_ASSIGN_OR_RETURN(std::optional<ActivationMode> activation,
                        ReadOptionalActivation(context, 5));
  if (dtype == DType::kFloat32) {
    VGPU_ASSIGN_OR_RETURN(const float* bias_data, context.Buffer<const float>(2, shape.n));
    VGPU_ASSIGN_OR_RETURN(bool done,
                          TryOnednnMatmul(context, shape, /*c_buffer=*/3, bias_data, activation));
    if (done) return absl::OkStatus();
  }
  return Dispatch::Floating(dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_RETURN_IF_ERROR(MatmulTyped<T>(context, shape, /*c_buffer=*/3));
    VGPU_ASSIGN_OR_RETURN(const T* bias_data, context.Buffer<const T>(2, shape.n));
    VGPU_ASSIGN_OR_RETURN(T* c, context.Buffer<T>(3, shape.batches * shape.m * shape.n));
    AddBiasAndActivate<ComputeType<T>>(*context.device, c, shape.batches * shape.m, shape.n,
                                       bias_data, activation);
    return absl::OkStatus();
  });
}

}  // namespace vgpu::cpu_kernels
