// Relu and ReluGrad on the CPU backing executor, vectorised and multi-threaded with Eigen's
// tensor module on the executor's thread pool.
#include "plugin/backend/cpu/kernels/activation_kernels.h"

#define EIGEN_USE_THREADS
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "plugin/protocol/kernel_ids.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

using FlatF32 = Eigen::TensorMap<Eigen::Tensor<float, 1, Eigen::RowMajor>, Eigen::Aligned>;
using ConstFlatF32 =
    Eigen::TensorMap<Eigen::Tensor<const float, 1, Eigen::RowMajor>, Eigen::Aligned>;

absl::StatusOr<int64_t> ElementCount(const KernelContext& context, size_t element_size) {
  ElementwiseParams params;
  std::memcpy(&params, context.params.data(), sizeof(params));
  for (size_t i = 0; i < context.buffers.size(); ++i) {
    if (context.buffer_sizes[i] < params.count * element_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "buffer ", i, " holds ", context.buffer_sizes[i], " bytes, fewer than ", params.count,
          " elements"));
    }
  }
  return static_cast<int64_t>(params.count);
}

}  // namespace

absl::Status ReluF32(const KernelContext& context) {
  absl::StatusOr<int64_t> n = ElementCount(context, sizeof(float));
  if (!n.ok()) return n.status();
  if (*n == 0) return absl::OkStatus();
  ConstFlatF32 input(reinterpret_cast<const float*>(context.buffers[0]), *n);
  FlatF32 output(reinterpret_cast<float*>(context.buffers[1]), *n);
  output.device(*context.device) = input.cwiseMax(0.0f);
  return absl::OkStatus();
}

absl::Status ReluGradF32(const KernelContext& context) {
  absl::StatusOr<int64_t> n = ElementCount(context, sizeof(float));
  if (!n.ok()) return n.status();
  if (*n == 0) return absl::OkStatus();
  ConstFlatF32 gradients(reinterpret_cast<const float*>(context.buffers[0]), *n);
  ConstFlatF32 features(reinterpret_cast<const float*>(context.buffers[1]), *n);
  FlatF32 output(reinterpret_cast<float*>(context.buffers[2]), *n);
  // Same rule as TensorFlow's ReluGrad: pass the gradient where the feature is positive.
  output.device(*context.device) =
      gradients * (features > 0.0f).template cast<float>();
  return absl::OkStatus();
}

}  // namespace vgpu::cpu_kernels
