// Shared pieces of the CPU convolution kernels (protocol/kernels/convolution.h): the geometry
// of a convolution launch (2-D or 3-D, grouped or depthwise) as the launch layer reads it
// (launch/convolution_launch.h), channels-last staging of tensors in the computation's element
// type, and the entry points of the depthwise kernels (convolution_depthwise.cc) and of the
// im2col kernels (convolution_im2col.cc), which the kernels of convolution_kernels.cc dispatch to.
#ifndef VGPU_BACKEND_CPU_KERNELS_CONVOLUTION_KERNELS_H_
#define VGPU_BACKEND_CPU_KERNELS_CONVOLUTION_KERNELS_H_

#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "plugin/backend/cpu/kernels/float_compute.h"
#include "plugin/backend/cpu/kernels/float_staging.h"
#include "plugin/backend/launch/convolution_launch.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu::cpu_kernels {

using convolution_launch::ConvolutionGeometry;
using convolution_launch::kCols;
using convolution_launch::kPlanes;
using convolution_launch::kRows;

// The index type and the matrix views of the convolution files: row-major 2-D maps and the
// dimension pairs of a contraction over one dimension.
using Index = Eigen::DenseIndex;
using ContractDims = Eigen::array<Eigen::IndexPair<Index>, 1>;
template <typename T>
using Map2 = RowMajorMap<T, 2>;
template <typename T>
using ConstMap2 = RowMajorMap<const T, 2>;

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
    if constexpr (kIsFloat16Bit<T> && std::is_same_v<CT, float>) {
      if (format == DataFormat::kNHWC) {
        WidenToFloat(device, data, scratch_.data(), elements);  // F16C for half
        return;
      }
    }
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
    if constexpr (kIsFloat16Bit<T> && std::is_same_v<CT, float>) {
      if (format_ == DataFormat::kNHWC) {
        NarrowFromFloat(device, data_, output_, batch_ * pixels_ * channels_);
        return;
      }
    }
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

// Depthwise convolution in NHWC, element type CT (float or double), on the thread pool
// (convolution_depthwise.cc). Filters are [rows, cols, in_depth, multiplier]; output channel
// c * multiplier + m reads input channel c.
template <typename CT>
struct DepthwiseNhwc {
  static void Forward(const Eigen::ThreadPoolDevice& device, const ConvolutionGeometry& g,
                      const CT* input, const CT* filter, CT* output);
  static void BackwardInput(const Eigen::ThreadPoolDevice& device, const ConvolutionGeometry& g,
                            const CT* filter, const CT* out_backprop, CT* in_backprop);
  static void BackwardFilter(const Eigen::ThreadPoolDevice& device, const ConvolutionGeometry& g,
                             const CT* input, const CT* out_backprop, CT* filter_backprop);
};

// Convolutions as matrix products of image patches (im2col, convolution_im2col.cc): any
// convolution the geometry describes but depthwise ones, 2-D or 3-D, grouped or not, all
// strides, dilations and paddings; channels-last tensors in element type CT (float or double),
// on the thread pool. The filter is [planes, rows, cols, filter_in_depth, out_depth].
// ResourceExhausted when one output row's patches would exceed the scratch budget.
template <typename CT>
struct Im2col {
  static absl::Status Forward(const Eigen::ThreadPoolDevice& device,
                              const ConvolutionGeometry& g, const CT* input, const CT* filter,
                              CT* output);
  static absl::Status BackwardInput(const Eigen::ThreadPoolDevice& device,
                                    const ConvolutionGeometry& g, const CT* filter,
                                    const CT* out_backprop, CT* in_backprop);
  static absl::Status BackwardFilter(const Eigen::ThreadPoolDevice& device,
                                     const ConvolutionGeometry& g, const CT* input,
                                     const CT* out_backprop, CT* filter_backprop);
};

}  // namespace vgpu::cpu_kernels

#endif  // VGPU_BACKEND_CPU_KERNELS_CONVOLUTION_KERNELS_H_
