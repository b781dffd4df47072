// The argmax kernels of 2-D max pooling on the CPU backing executor (MaxPoolWithArgmax,
// MaxPoolGradWithArgmax, MaxPoolGradGradWithArgmax; protocol/kernels/pooling.h): NHWC only, as
// TensorFlow's ops (launch/pooling_launch.h reads and validates the launch). The forward pass
// takes the element TensorFlow's CPU kernel takes, so outputs and argmax indices match it
// exactly; argmax values coming back from a client are untrusted and checked (ArgmaxTarget)
// before any element is addressed with them.
#define EIGEN_USE_THREADS

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/pooling_kernels.h"
#include "plugin/common/status_macros.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

using pooling_launch::ArgmaxKernel;

// Forward max pooling with argmax, TensorFlow's CPU rule: the window's first element, replaced
// by every larger one (and with NaN propagation by a NaN over a non-NaN), in window order.
template <typename T, typename Targmax, bool kPropagateNan>
void MaxPoolWithArgmax(const Eigen::ThreadPoolDevice& device, const ArgmaxLaunch& launch,
                       const T* x, T* y, Targmax* argmax) {
  const PoolGeometry& g = launch.a.g;
  const int64_t channels = g.channels, in_h = g.in[1], in_w = g.in[2];
  const int64_t rows = g.images * g.out[1];
  const double per_row =
      static_cast<double>(g.out[2] * g.window[1] * g.window[2] * channels);
  device.parallelFor(
      rows, Eigen::TensorOpCost(per_row * sizeof(T), g.out[2] * channels * 16.0, per_row),
      [&](Eigen::Index begin, Eigen::Index end) {
        for (int64_t row = begin; row < end; ++row) {
          const int64_t b = row / g.out[1], oh = row % g.out[1];
          const WindowRange hs = WindowOf(g, 1, oh);
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            const WindowRange ws = WindowOf(g, 2, ow);
            T* out = y + (row * g.out[2] + ow) * channels;
            Targmax* arg = argmax + (row * g.out[2] + ow) * channels;
            bool first = true;
            for (int64_t h = hs.begin; h < hs.end; ++h) {
              for (int64_t w = ws.begin; w < ws.end; ++w) {
                const int64_t image_index = (h * in_w + w) * channels;
                const int64_t index = b * in_h * in_w * channels + image_index;
                const int64_t reported = launch.a.include_batch_in_index ? index : image_index;
                const T* in = x + index;
                for (int64_t c = 0; c < channels; ++c) {
                  if (first || out[c] < in[c] ||
                      (kPropagateNan && Eigen::numext::isnan(in[c]) &&
                       !Eigen::numext::isnan(out[c]))) {
                    out[c] = in[c];
                    arg[c] = static_cast<Targmax>(reported + c);
                  }
                }
                first = false;
              }
            }
            if (first) {  // an empty window (impossible for validated geometries)
              std::fill(out, out + channels, Eigen::NumTraits<T>::lowest());
              std::fill(arg, arg + channels, Targmax(-1));
            }
          }
        }
      });
}

}  // namespace

// pooling::kForwardWithArgmax (see protocol/kernels/pooling.h).
absl::Status PoolingForwardWithArgmax(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(ArgmaxLaunch launch, ReadArgmaxLaunch(context, ArgmaxKernel::kForward));
  const bool propagate = launch.pooling.nan_propagation == NanPropagation::kPropagate;
  return WithArgmaxBuffers<Dispatch>(context, launch, [&](auto b) -> absl::Status {
    using T = std::remove_pointer_t<decltype(b.out)>;
    using Targmax = std::remove_pointer_t<decltype(b.argmax)>;
    if (launch.a.g.output_elements == 0) return absl::OkStatus();
    if (propagate) {
      MaxPoolWithArgmax<T, Targmax, true>(*context.device, launch, b.in, b.out, b.argmax);
    } else {
      MaxPoolWithArgmax<T, Targmax, false>(*context.device, launch, b.in, b.out, b.argmax);
    }
    return absl::OkStatus();
  });
}

// pooling::kBackwardWithArgmax (see protocol/kernels/pooling.h).
absl::Status PoolingBackwardWithArgmax(const KernelContext& context) {
  return RunArgmaxGradient<Dispatch>(context, ArgmaxKernel::kBackward,
                                     [&](const ArgmaxGeometry& a, const auto* dy,
                                         const int64_t* argmax, auto* dx) -> absl::Status {
    using T = std::remove_pointer_t<decltype(dx)>;
    // Every target is checked before dx is touched; when each lies in its own image, images are
    // independent and scatter in parallel (each in output order, as serially).
    bool within_own_image = true;
    for (int64_t i = 0; i < a.g.output_elements; ++i) {
      const int64_t target = ArgmaxTarget(a, i, argmax[i]);
      if (target < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Invalid output gradient index: argmax ", argmax[i], " of output element ", i,
            " lies outside the input of ", a.g.input_elements, " elements"));
      }
      within_own_image &= target / a.input_image == i / a.output_image;
    }
    auto scatter = [&](int64_t first_image, int64_t end_image) {
      std::fill(dx + first_image * a.input_image, dx + end_image * a.input_image, T(0));
      for (int64_t i = first_image * a.output_image; i < end_image * a.output_image; ++i) {
        dx[ArgmaxTarget(a, i, argmax[i])] += dy[i];
      }
    };
    if (!within_own_image) {
      scatter(0, a.g.images);
      return absl::OkStatus();
    }
    const double per_image = static_cast<double>(a.output_image + a.input_image);
    context.device->parallelFor(
        a.g.images, Eigen::TensorOpCost(per_image * sizeof(T), per_image * sizeof(T), per_image),
        [&](Eigen::Index begin, Eigen::Index end) { scatter(begin, end); });
    return absl::OkStatus();
  });
}

// pooling::kGradGradWithArgmax (see protocol/kernels/pooling.h).
absl::Status PoolingGradGradWithArgmax(const KernelContext& context) {
  return RunArgmaxGradient<Dispatch>(context, ArgmaxKernel::kGradGrad,
                                     [&](const ArgmaxGeometry& a, const auto* ddx,
                                         const int64_t* argmax, auto* ddy) -> absl::Status {
    using T = std::remove_pointer_t<decltype(ddy)>;
    context.device->parallelFor(
        a.g.output_elements, Eigen::TensorOpCost(2 * sizeof(T) + 8, sizeof(T), 2),
        [&](Eigen::Index begin, Eigen::Index end) {
          for (int64_t i = begin; i < end; ++i) {
            const int64_t target = ArgmaxTarget(a, i, argmax[i]);
            ddy[i] = target < 0 ? T(0) : ddx[target];
          }
        });
    return absl::OkStatus();
  });
}

}  // namespace vgpu::cpu_kernels
