// Shared pieces of the CPU convolution kernels (protocol/kernels/convolution.h): the geometry a
// convolution launch describes (2-D or 3-D, grouped or depthwise), read and checked from its
// descriptors; channels-last staging of tensors in the computation's element type; and the
// entry points of the depthwise kernels (convolution_depthwise.cc) and of the im2col kernels
// (convolution_im2col.cc), which the kernels of convolution_kernels.cc dispatch to.
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

// Everything a convolution launch describes, in TensorFlow's terms. A 2-D convolution is a 3-D
// one with a single plane: planes (the D dimension) are 1, their stride and dilation 1 and
// their paddings 0. Rows are the H dimension, cols the W dimension; paddings are explicit
// (SAME/VALID are resolved by the caller).
struct ConvolutionGeometry {
  DType dtype = DType::kFloat32;
  DataFormat data_format = DataFormat::kNHWC;  // channels last or first
  int spatial_dims = 2;
  bool depthwise = false;
  int64_t groups = 1;  // filter_in_depth * groups == in_depth
  int64_t batch = 0, in_depth = 0, out_depth = 0;
  int64_t in_planes = 1, in_rows = 0, in_cols = 0;
  int64_t out_planes = 1, out_rows = 0, out_cols = 0;
  int64_t filter_planes = 1, filter_rows = 0, filter_cols = 0;
  int64_t filter_in_depth = 0;  // filter in_channels (of one group)
  int64_t filter_out = 0;       // filter out_channels, or the depthwise channel multiplier
  int64_t pad_front = 0, pad_back = 0, pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t stride_planes = 1, stride_rows = 1, stride_cols = 1;
  int64_t dilation_planes = 1, dilation_rows = 1, dilation_cols = 1;

  int64_t InputPixels() const { return in_planes * in_rows * in_cols; }
  int64_t OutputPixels() const { return out_planes * out_rows * out_cols; }
  int64_t FilterTaps() const { return filter_planes * filter_rows * filter_cols; }
  int64_t InputElements() const { return batch * InputPixels() * in_depth; }
  int64_t OutputElements() const { return batch * OutputPixels() * out_depth; }
  int64_t FilterElements() const { return FilterTaps() * filter_in_depth * filter_out; }
  bool UnitStridesAndDilations() const {
    return stride_planes == 1 && stride_rows == 1 && stride_cols == 1 && dilation_planes == 1 &&
           dilation_rows == 1 && dilation_cols == 1;
  }
  bool NoPadding() const {
    return pad_front == 0 && pad_back == 0 && pad_top == 0 && pad_bottom == 0 && pad_left == 0 &&
           pad_right == 0;
  }
};

// No tensor of a convolution-family launch holds more elements than this (beyond any device
// memory; products of its extents in the index arithmetic stay far from overflow).
inline constexpr int64_t kMaxConvolutionElements = int64_t{1} << 48;

// The number of elements of a tensor of `dims` named `what`, or InvalidArgument if the rank is
// out of range, a dimension is negative or the count exceeds kMaxConvolutionElements (the shared
// checked arithmetic of kernel_registry.h with the family's limit).
inline absl::StatusOr<int64_t> CheckedElementCount(const char* what, const int64_t* dims,
                                                   int rank) {
  return vgpu::CheckedElementCount(what, dims, rank, kMaxConvolutionElements);
}

// Reads descriptors [x tensor, filter, convolution, y tensor] and checks that they describe a
// consistent convolution (ranks, dtypes, depths and groups, output size from input size and
// window).
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

// A read-only channels-last view, in element type CT, of a tensor of T that holds `batch`
// images of `pixels` pixels (the product of the spatial sizes) and `channels` channels, stored
// channels last or first as `format` says. Copies (converting and/or transposing on the thread
// pool) only when the stored tensor is not already channels-last data of type CT.
template <typename T, typename CT>
class ChannelsLastInput {
 public:
  ChannelsLastInput(const Eigen::ThreadPoolDevice& device, const T* data, DataFormat format,
                    int64_t batch, int64_t pixels, int64_t channels) {
    if constexpr (std::is_same_v<T, CT>) {
      if (format == DataFormat::kNHWC) {
        data_ = data;
        return;
      }
    }
    const int64_t elements = batch * pixels * channels;
    scratch_.Resize(elements);
    data_ = scratch_.data();
    if (elements == 0) return;
    RowMajorMap<CT, 3> staged(scratch_.data(), batch, pixels, channels);
    if (format == DataFormat::kNHWC) {
      staged.device(device) = RowMajorMap<const T, 3>(data, batch, pixels, channels)
                                  .template cast<CT>();
    } else {
      // Convert, then transpose: Eigen's block evaluation of shuffle(...).cast<>() writes the
      // shuffled source type into the destination buffer (garbage for half and bfloat16).
      const Eigen::array<Eigen::DenseIndex, 3> to_channels_last{0, 2, 1};
      staged.device(device) = RowMajorMap<const T, 3>(data, batch, channels, pixels)
                                  .template cast<CT>()
                                  .shuffle(to_channels_last);
    }
  }
  const CT* data() const { return data_; }

 private:
  const CT* data_ = nullptr;
  Scratch<CT> scratch_;
};

// A writable channels-last view, in element type CT, of an output tensor of T (`batch` images
// of `pixels` pixels and `channels` channels, stored as `format` says). Writes go straight to
// the output when it is channels-last data of type CT; otherwise to scratch that Finish()
// converts/transposes into the output.
template <typename T, typename CT>
class ChannelsLastOutput {
 public:
  ChannelsLastOutput(T* data, DataFormat format, int64_t batch, int64_t pixels,
                     int64_t channels)
      : output_(data), format_(format), batch_(batch), pixels_(pixels), channels_(channels) {
    if constexpr (std::is_same_v<T, CT>) {
      if (format == DataFormat::kNHWC) {
        data_ = data;
        direct_ = true;
        return;
      }
    }
    scratch_.Resize(batch * pixels * channels);
    data_ = scratch_.data();
  }
  CT* data() { return data_; }

  // Moves the result into the output tensor (no-op when written in place).
  void Finish(const Eigen::ThreadPoolDevice& device) {
    if (direct_ || batch_ * pixels_ * channels_ == 0) return;
    RowMajorMap<const CT, 3> result(data_, batch_, pixels_, channels_);
    if (format_ == DataFormat::kNHWC) {
      RowMajorMap<T, 3>(output_, batch_, pixels_, channels_).device(device) =
          result.template cast<T>();
    } else {
      // Convert, then transpose (see ChannelsLastInput).
      const Eigen::array<Eigen::DenseIndex, 3> to_channels_first{0, 2, 1};
      RowMajorMap<T, 3>(output_, batch_, channels_, pixels_).device(device) =
          result.template cast<T>().shuffle(to_channels_first);
    }
  }

 private:
  T* output_;
  DataFormat format_;
  int64_t batch_, pixels_, channels_;
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

// Convolutions as matrix products of image patches (im2col, convolution_im2col.cc): any
// convolution the geometry describes but depthwise ones, 2-D or 3-D, grouped or not, all
// strides, dilations and paddings; channels-last tensors in element type CT (float or double),
// on the thread pool. The filter is [planes, rows, cols, filter_in_depth, out_depth].
// ResourceExhausted when one output row's patches would exceed the scratch budget.
template <typename CT>
absl::Status Im2colForward(const Eigen::ThreadPoolDevice& device, const ConvolutionGeometry& g,
                           const CT* input, const CT* filter, CT* output);
template <typename CT>
absl::Status Im2colBackwardInput(const Eigen::ThreadPoolDevice& device,
                                 const ConvolutionGeometry& g, const CT* filter,
                                 const CT* out_backprop, CT* in_backprop);
template <typename CT>
absl::Status Im2colBackwardFilter(const Eigen::ThreadPoolDevice& device,
                                  const ConvolutionGeometry& g, const CT* input,
                                  const CT* out_backprop, CT* filter_backprop);

// Kernels of the matmul and bias families (matmul_kernels.cc, convolution_bias_kernels.cc).
absl::Status Matmul(const KernelContext& context);
absl::Status MatmulBiasActivation(const KernelContext& context);
absl::Status BiasAdd(const KernelContext& context);
absl::Status BiasAddGrad(const KernelContext& context);
// The rearrangement Einsum launches (convolution_rearrange.cc).
absl::Status Rearrange(const KernelContext& context);

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_CONVOLUTION_KERNELS_H_
