// How the CPU executor's convolution, matmul, bias and rearrange kernels compute with Eigen:
// the element type their arithmetic is done in (ComputeType: float for the 16-bit types),
// row-major tensor maps over raw buffers, uninitialised scratch memory, and the bias and
// activation epilogue of the fused convolution and matmul kernels.
#ifndef VGPU_BACKEND_CPU_KERNELS_FLOAT_COMPUTE_H_
#define VGPU_BACKEND_CPU_KERNELS_FLOAT_COMPUTE_H_

#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif
#include <cstdint>
#include <optional>
#include <vector>

#include "plugin/protocol/descriptors.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {

// The element type arithmetic is done in: float for the 16-bit types (as TensorFlow's CPU
// kernels and cuDNN's default math do), the type itself otherwise.
template <typename T>
struct ComputeTypeOf {
  using type = T;
};
template <>
struct ComputeTypeOf<Eigen::half> {
  using type = float;
};
template <>
struct ComputeTypeOf<Eigen::bfloat16> {
  using type = float;
};
template <typename T>
using ComputeType = typename ComputeTypeOf<T>::type;

template <typename T, int kRank>
using RowMajorMap =
    Eigen::TensorMap<Eigen::Tensor<T, kRank, Eigen::RowMajor, Eigen::DenseIndex>, Eigen::Unaligned>;
template <typename T>
using Map4 = RowMajorMap<T, 4>;
template <typename T>
using ConstMap4 = RowMajorMap<const T, 4>;

// Scratch memory of the backing executor for one kernel call (uninitialised, aligned).
template <typename T>
class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(int64_t elements) : storage_(elements) {}
  void Resize(int64_t elements) { storage_.resize(elements); }
  T* data() { return storage_.data(); }

 private:
  Eigen::Tensor<T, 1, Eigen::RowMajor, Eigen::DenseIndex> storage_;
};

// data[r, c] = activation(data[r, c] + bias[c]) over a row-major [rows, channels] array,
// computed in CT on the thread pool: the epilogue of the fused convolution and matmul kernels.
template <typename CT, typename DataT, typename BiasT>
void AddBiasAndActivate(const Eigen::ThreadPoolDevice& device, DataT* data, int64_t rows,
                        int64_t channels, const BiasT* bias,
                        std::optional<ActivationMode> activation) {
  if (rows * channels == 0) return;
  std::vector<CT> converted(channels);
  for (int64_t c = 0; c < channels; ++c) converted[c] = static_cast<CT>(bias[c]);
  RowMajorMap<DataT, 2> out(data, rows, channels);
  const Eigen::array<Eigen::DenseIndex, 2> down_rows{rows, 1};
  const auto biased = out.template cast<CT>() +
                      RowMajorMap<const CT, 2>(converted.data(), 1, channels).broadcast(down_rows);
  if (!activation.has_value()) {
    out.device(device) = biased.template cast<DataT>();
    return;
  }
  switch (*activation) {  // ReadFusedEpilogue admits only these modes
    case ActivationMode::kRelu:
      out.device(device) = biased.cwiseMax(CT(0)).template cast<DataT>();
      break;
    case ActivationMode::kRelu6:
      out.device(device) = biased.cwiseMax(CT(0)).cwiseMin(CT(6)).template cast<DataT>();
      break;
    case ActivationMode::kSigmoid:
      out.device(device) = biased.sigmoid().template cast<DataT>();
      break;
    case ActivationMode::kTanh:
      out.device(device) = biased.tanh().template cast<DataT>();
      break;
    case ActivationMode::kElu:
    case ActivationMode::kSelu:
    case ActivationMode::kSoftplus:
    case ActivationMode::kSoftsign:
    case ActivationMode::kLeakyRelu:
      break;  // never here: ReadFusedEpilogue refuses these modes before the launch runs
  }
}

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_FLOAT_COMPUTE_H_
