// Element-wise arithmetic on the CPU backing executor, vectorised and multi-threaded with
// Eigen's tensor module.
#include "plugin/backend/cpu/kernels/elementwise_kernels.h"

#define EIGEN_USE_THREADS
#include <cstring>

#include "absl/strings/str_cat.h"
#include "plugin/protocol/kernel_ids.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

template <typename T>
using Flat = Eigen::TensorMap<Eigen::Tensor<T, 1, Eigen::RowMajor>, Eigen::Unaligned>;
template <typename T>
using ConstFlat = Eigen::TensorMap<Eigen::Tensor<const T, 1, Eigen::RowMajor>, Eigen::Unaligned>;

template <typename T>
absl::Status RunBinary(const KernelContext& context, const BinaryElementwiseParams& params) {
  const Eigen::Index n = static_cast<Eigen::Index>(params.count);
  ConstFlat<T> lhs(reinterpret_cast<const T*>(context.buffers[0]), n);
  ConstFlat<T> rhs(reinterpret_cast<const T*>(context.buffers[1]), n);
  Flat<T> out(reinterpret_cast<T*>(context.buffers[2]), n);
  switch (params.op) {
    case BinaryOp::kAdd:
      out.device(*context.device) = lhs + rhs;
      return absl::OkStatus();
    case BinaryOp::kSub:
      out.device(*context.device) = lhs - rhs;
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown binary op ", static_cast<uint32_t>(params.op)));
}

}  // namespace

absl::Status BinaryElementwise(const KernelContext& context) {
  if (absl::Status s = context.ExpectBuffers(3); !s.ok()) return s;
  absl::StatusOr<BinaryElementwiseParams> read = context.Params().Get<BinaryElementwiseParams>();
  if (!read.ok()) return read.status();
  const BinaryElementwiseParams params = *read;
  const uint64_t element_size = DTypeSize(params.dtype);
  if (element_size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown dtype ", static_cast<uint32_t>(params.dtype)));
  }
  for (size_t i = 0; i < context.buffers.size(); ++i) {
    if (context.buffer_sizes[i] < params.count * element_size) {
      return absl::InvalidArgumentError(absl::StrCat("buffer ", i, " holds ",
                                                     context.buffer_sizes[i], " bytes, fewer than ",
                                                     params.count, " elements"));
    }
  }
  if (params.count == 0) return absl::OkStatus();
  switch (params.dtype) {
    case DType::kFloat32: return RunBinary<float>(context, params);
    case DType::kFloat64: return RunBinary<double>(context, params);
    case DType::kFloat16: return RunBinary<Eigen::half>(context, params);
    case DType::kBFloat16: return RunBinary<Eigen::bfloat16>(context, params);
    case DType::kInt32: return RunBinary<int32_t>(context, params);
    case DType::kInt64: return RunBinary<int64_t>(context, params);
    case DType::kUInt8: return RunBinary<uint8_t>(context, params);
    case DType::kBool: break;
  }
  return absl::InvalidArgumentError("binary arithmetic is not defined for bool");
}

}  // namespace vgpu::cpu_kernels

namespace vgpu {

void AddElementwiseKernels(KernelTable& table) {
  table.Add(KernelId::kBinaryElementwise, "binary_elementwise", cpu_kernels::BinaryElementwise);
}

}  // namespace vgpu
