// Depthwise 2-D convolution and its backward passes on the CPU backing executor (NHWC, float
// or double; see convolution_kernels.h). Each output pixel is a short sum over the filter
// window of channel-contiguous vectors, so the loops run over channels innermost (vectorised
// by the compiler) and are spread over the thread pool by rows of pixels.
#include <algorithm>
#include <cstring>

#include "plugin/backend/cpu/kernels/convolution_kernels.h"

namespace vgpu::cpu_kernels {
namespace {

// out[c * multiplier + m] += in[c] * filter[c * multiplier + m] for every channel.
template <typename CT>
inline void MultiplyAccumulate(Index depth, Index multiplier, const CT* __restrict in,
                               const CT* __restrict filter, CT* __restrict out) {
  if (multiplier == 1) {
    for (Index c = 0; c < depth; ++c) out[c] += in[c] * filter[c];
    return;
  }
  for (Index c = 0; c < depth; ++c) {
    const CT value = in[c];
    const CT* f = filter + c * multiplier;
    CT* o = out + c * multiplier;
    for (Index m = 0; m < multiplier; ++m) o[m] += value * f[m];
  }
}

// in[c] += sum over m of gradient[c * multiplier + m] * filter[c * multiplier + m].
template <typename CT>
inline void ReduceMultiplyAccumulate(Index depth, Index multiplier, const CT* __restrict gradient,
                                     const CT* __restrict filter, CT* __restrict in) {
  if (multiplier == 1) {
    for (Index c = 0; c < depth; ++c) in[c] += gradient[c] * filter[c];
    return;
  }
  for (Index c = 0; c < depth; ++c) {
    const CT* g = gradient + c * multiplier;
    const CT* f = filter + c * multiplier;
    CT sum = 0;
    for (Index m = 0; m < multiplier; ++m) sum += g[m] * f[m];
    in[c] += sum;
  }
}

// The input position of filter tap `tap` for output position `out`, or -1 outside the input.
inline Index InputPosition(const ConvolutionGeometry& g, int dim, Index out, Index tap) {
  const Index position = out * g.stride[dim] - g.pad_before[dim] + tap * g.dilation[dim];
  return position >= 0 && position < g.in[dim] ? position : -1;
}

// For output row `row` (of the batch * out[kRows] rows): calls fn(ow, tap, pixel) for every
// output column ow and every filter tap (kh, kw) that reads inside the input, in (ow, kh, kw)
// order; tap = (kh * filter[kCols] + kw) * out_depth is the tap's offset in the filter and
// pixel the element offset of the input pixel it reads.
template <typename Fn>
inline void ForEachInputTap(const ConvolutionGeometry& g, Index row, Fn&& fn) {
  const Index n = row / g.out[kRows];
  const Index oh = row % g.out[kRows];
  for (Index ow = 0; ow < g.out[kCols]; ++ow) {
    for (Index kh = 0; kh < g.filter[kRows]; ++kh) {
      const Index ih = InputPosition(g, kRows, oh, kh);
      if (ih < 0) continue;
      for (Index kw = 0; kw < g.filter[kCols]; ++kw) {
        const Index iw = InputPosition(g, kCols, ow, kw);
        if (iw < 0) continue;
        fn(ow, (kh * g.filter[kCols] + kw) * g.out_depth,
           ((n * g.in[kRows] + ih) * g.in[kCols] + iw) * g.in_depth);
      }
    }
  }
}

Eigen::TensorOpCost RowCost(const ConvolutionGeometry& g, Index pixels_per_row, size_t size) {
  const double macs =
      static_cast<double>(pixels_per_row) * g.filter[kRows] * g.filter[kCols] * g.out_depth;
  return Eigen::TensorOpCost(macs * size, static_cast<double>(pixels_per_row) * g.out_depth * size,
                             macs * 2);
}

}  // namespace

template <typename CT>
void DepthwiseNhwc<CT>::Forward(const Eigen::ThreadPoolDevice& device,
                                const ConvolutionGeometry& g, const CT* input, const CT* filter,
                                CT* output) {
  const Index rows = g.batch * g.out[kRows];
  device.parallelFor(rows, RowCost(g, g.out[kCols], sizeof(CT)), [&](Index first, Index last) {
    for (Index row = first; row < last; ++row) {
      CT* out_row = output + row * g.out[kCols] * g.out_depth;
      std::fill(out_row, out_row + g.out[kCols] * g.out_depth, CT(0));
      ForEachInputTap(g, row, [&](Index ow, Index tap, Index pixel) {
        MultiplyAccumulate(g.in_depth, g.filter_out, input + pixel, filter + tap,
                           out_row + ow * g.out_depth);
      });
    }
  });
}

template <typename CT>
void DepthwiseNhwc<CT>::BackwardInput(const Eigen::ThreadPoolDevice& device,
                                      const ConvolutionGeometry& g, const CT* filter,
                                      const CT* out_backprop, CT* in_backprop) {
  const Index rows = g.batch * g.in[kRows];
  device.parallelFor(rows, RowCost(g, g.in[kCols], sizeof(CT)), [&](Index first, Index last) {
    for (Index row = first; row < last; ++row) {
      const Index n = row / g.in[kRows];
      const Index ih = row % g.in[kRows];
      for (Index iw = 0; iw < g.in[kCols]; ++iw) {
        CT* in = in_backprop + (row * g.in[kCols] + iw) * g.in_depth;
        std::fill(in, in + g.in_depth, CT(0));
        for (Index kh = 0; kh < g.filter[kRows]; ++kh) {
          // The output row whose window puts tap kh on input row ih, if any.
          const Index h = ih + g.pad_before[kRows] - kh * g.dilation[kRows];
          if (h < 0 || h % g.stride[kRows] != 0) continue;
          const Index oh = h / g.stride[kRows];
          if (oh >= g.out[kRows]) continue;
          for (Index kw = 0; kw < g.filter[kCols]; ++kw) {
            const Index w = iw + g.pad_before[kCols] - kw * g.dilation[kCols];
            if (w < 0 || w % g.stride[kCols] != 0) continue;
            const Index ow = w / g.stride[kCols];
            if (ow >= g.out[kCols]) continue;
            ReduceMultiplyAccumulate(
                g.in_depth, g.filter_out,
                out_backprop + ((n * g.out[kRows] + oh) * g.out[kCols] + ow) * g.out_depth,
                filter + (kh * g.filter[kCols] + kw) * g.out_depth, in);
          }
        }
      }
    }
  });
}

template <typename CT>
void DepthwiseNhwc<CT>::BackwardFilter(const Eigen::ThreadPoolDevice& device,
                                       const ConvolutionGeometry& g, const CT* input,
                                       const CT* out_backprop, CT* filter_backprop) {
  // Rows of output pixels are split into a fixed number of blocks, each summing into its own
  // copy of the filter gradient; the copies are added at the end. The result does not depend
  // on scheduling.
  const Index rows = g.batch * g.out[kRows];
  const Index filter_size = g.filter_elements;
  const Index blocks = std::max<Index>(1, std::min<Index>(rows, 4 * device.numThreads()));
  Scratch<CT> partial(blocks * filter_size);
  std::fill(partial.data(), partial.data() + blocks * filter_size, CT(0));
  Eigen::TensorOpCost block_cost = RowCost(g, g.out[kCols], sizeof(CT));
  block_cost *= static_cast<double>(rows) / blocks;
  device.parallelFor(blocks, block_cost, [&](Index first_block, Index last_block) {
    for (Index block = first_block; block < last_block; ++block) {
      CT* accumulator = partial.data() + block * filter_size;
      const Index first = rows * block / blocks;
      const Index last = rows * (block + 1) / blocks;
      for (Index row = first; row < last; ++row) {
        const CT* gradient_row = out_backprop + row * g.out[kCols] * g.out_depth;
        ForEachInputTap(g, row, [&](Index ow, Index tap, Index pixel) {
          MultiplyAccumulate(g.in_depth, g.filter_out, input + pixel,
                             gradient_row + ow * g.out_depth, accumulator + tap);
        });
      }
    }
  });
  Eigen::IndexList<Eigen::type2index<0>> over_blocks;  // static: the vectorised reduction
  RowMajorMap<CT, 1>(filter_backprop, filter_size).device(device) =
      RowMajorMap<const CT, 2>(partial.data(), blocks, filter_size).sum(over_blocks);
}

template struct DepthwiseNhwc<float>;
template struct DepthwiseNhwc<double>;

}  // namespace vgpu::cpu_kernels
