// Shared pieces of the CPU convolution kernels (protocol/kernels/convolution.h): the geometry a
// convolution launch describes, read and checked from its descriptors; NHWC staging of
// tensors in the computation's element type; and the depthwise entry points
// (convolution_depthwise.cc), which the kernels of convolution_kernels.cc dispatch to.
#ifndef VGPU_BACKEND_CPU_KERNELS_CONVOLUTION_KERNELS_H_
#define VGPU_BACKEND_CPU_KERNELS_CONVOLUTION_KERNELS_H_

#define EIGEN_USE_THREADS
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "plugin/backend/cpu/kernel_registry.h"
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

// Everything a convolution launch describes, in TensorFlow's terms. Rows are the H dimension,
// cols the W dimension; paddings are explicit (SAME/VALID are resolved by the caller).
struct ConvolutionGeometry {
  DType dtype = DType::kFloat32;
  DataFormat data_format = DataFormat::kNHWC;
  bool depthwise = false;
  int64_t batch = 0, in_rows = 0, in_cols = 0, in_depth = 0;
  int64_t filter_rows = 0, filter_cols = 0;
  int64_t filter_in_depth = 0;  // filter dims[2]
  int64_t filter_out = 0;       // filter dims[3]: out_depth, or the depthwise channel multiplier
  int64_t out_rows = 0, out_cols = 0, out_depth = 0;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t stride_rows = 1, stride_cols = 1, dilation_rows = 1, dilation_cols = 1;

  int64_t InputElements() const { return batch * in_rows * in_cols * in_depth; }
  int64_t OutputElements() const { return batch * out_rows * out_cols * out_depth; }
  int64_t FilterElements() const { return filter_rows * filter_cols * filter_in_depth * filter_out; }
  bool UnitStridesAndDilations() const {
    return stride_rows == 1 && stride_cols == 1 && dilation_rows == 1 && dilation_cols == 1;
  }
  bool NoPadding() const { return pad_top == 0 && pad_bottom == 0 && pad_left == 0 && pad_right == 0; }
};

// The number of elements of a tensor of `dims` named `what`, or InvalidArgument if a dimension
// is negative or the count exceeds 2^48 (beyond any device memory; byte counts and index
// arithmetic stay far from overflow).
absl::StatusOr<int64_t> CheckedElementCount(const char* what, const int64_t* dims, int rank);

// Reads descriptors [x tensor, filter, convolution, y tensor] and checks that they describe a
// consistent convolution (ranks, dtypes, depths, output size from input size and window).
absl::StatusOr<ConvolutionGeometry> ReadConvolutionGeometry(const KernelContext& context);

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

// A read-only NHWC view, in element type CT, of a 4-D tensor of T stored in `format`. Copies
// (transposing and/or converting on the thread pool) only when the stored tensor is not
// already NHWC data of type CT.
template <typename T, typename CT>
class NhwcInput {
 public:
  // dims are N, H, W, C whatever the stored layout.
  NhwcInput(const Eigen::ThreadPoolDevice& device, const T* data, DataFormat format, int64_t n,
            int64_t h, int64_t w, int64_t c)
      : n_(n), h_(h), w_(w), c_(c) {
    if constexpr (std::is_same_v<T, CT>) {
      if (format == DataFormat::kNHWC) {
        data_ = data;
        return;
      }
    }
    scratch_.Resize(n * h * w * c);
    Map4<CT> staged(scratch_.data(), n, h, w, c);
    if (n * h * w * c > 0) {
      if (format == DataFormat::kNHWC) {
        staged.device(device) = ConstMap4<T>(data, n, h, w, c).template cast<CT>();
      } else {
        // Convert, then transpose: Eigen's block evaluation of shuffle(...).cast<>() writes
        // the shuffled source type into the destination buffer (garbage for half/bfloat16).
        const Eigen::array<Eigen::DenseIndex, 4> to_nhwc{0, 2, 3, 1};
        staged.device(device) =
            ConstMap4<T>(data, n, c, h, w).template cast<CT>().shuffle(to_nhwc);
      }
    }
    data_ = scratch_.data();
  }
  ConstMap4<CT> tensor() const { return ConstMap4<CT>(data_, n_, h_, w_, c_); }
  const CT* data() const { return data_; }

 private:
  int64_t n_, h_, w_, c_;
  const CT* data_ = nullptr;
  Scratch<CT> scratch_;
};

// A writable NHWC view, in element type CT, of a 4-D output tensor of T stored in `format`.
// Writes go straight to the output when it is NHWC data of type CT; otherwise to scratch that
// Finish() converts/transposes into the output.
template <typename T, typename CT>
class NhwcOutput {
 public:
  NhwcOutput(T* data, DataFormat format, int64_t n, int64_t h, int64_t w, int64_t c)
      : output_(data), format_(format), n_(n), h_(h), w_(w), c_(c) {
    if constexpr (std::is_same_v<T, CT>) {
      if (format == DataFormat::kNHWC) {
        data_ = data;
        direct_ = true;
        return;
      }
    }
    scratch_.Resize(n * h * w * c);
    data_ = scratch_.data();
  }
  Map4<CT> tensor() { return Map4<CT>(data_, n_, h_, w_, c_); }
  CT* data() { return data_; }

  // Moves the result into the output tensor (no-op when written in place).
  void Finish(const Eigen::ThreadPoolDevice& device) {
    if (direct_ || n_ * h_ * w_ * c_ == 0) return;
    ConstMap4<CT> result(data_, n_, h_, w_, c_);
    if (format_ == DataFormat::kNHWC) {
      Map4<T>(output_, n_, h_, w_, c_).device(device) = result.template cast<T>();
    } else {
      const Eigen::array<Eigen::DenseIndex, 4> to_nchw{0, 3, 1, 2};
      // Convert, then transpose (see NhwcInput).
      Map4<T>(output_, n_, c_, h_, w_).device(device) =
          result.template cast<T>().shuffle(to_nchw);
    }
  }

 private:
  T* output_;
  DataFormat format_;
  int64_t n_, h_, w_, c_;
  CT* data_ = nullptr;
  bool direct_ = false;
  Scratch<CT> scratch_;
};

// The activation of a fused launch: descriptor `index` if the launch carries one (an
// activation descriptor), none (identity) otherwise.
absl::StatusOr<std::optional<ActivationMode>> ReadOptionalActivation(const KernelContext& context,
                                                                     size_t index);

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
  switch (*activation) {  // ReadOptionalActivation admits only these modes
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
  }
}

// Depthwise convolution in NHWC, element type CT (float or double), on the thread pool
// (convolution_depthwise.cc). Filters are [rows, cols, in_depth, multiplier]; output channel
// c * multiplier + m reads input channel c.
template <typename CT>
void DepthwiseForwardNhwc(const Eigen::ThreadPoolDevice& device, const ConvolutionGeometry& g,
                          const CT* input, const CT* filter, CT* output);
template <typename CT>
void DepthwiseBackwardInputNhwc(const Eigen::ThreadPoolDevice& device,
                                const ConvolutionGeometry& g, const CT* filter,
                                const CT* out_backprop, CT* in_backprop);
template <typename CT>
void DepthwiseBackwardFilterNhwc(const Eigen::ThreadPoolDevice& device,
                                 const ConvolutionGeometry& g, const CT* input,
                                 const CT* out_backprop, CT* filter_backprop);

// Kernels of the matmul and bias families (matmul_kernels.cc, convolution_bias_kernels.cc).
absl::Status Matmul(const KernelContext& context);
absl::Status MatmulBiasActivation(const KernelContext& context);
absl::Status BiasAdd(const KernelContext& context);
absl::Status BiasAddGrad(const KernelContext& context);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_CONVOLUTION_KERNELS_H_
