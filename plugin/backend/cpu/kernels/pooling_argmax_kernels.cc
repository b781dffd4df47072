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
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(ArgmaxLaunch launch, ReadArgmaxLaunch(context));
  const bool propagate = launch.pooling.nan_propagation == NanPropagation::kPropagate;
  return Dispatch::Floating(launch.x.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, launch.a.g.input_elements));
    VGPU_ASSIGN_OR_RETURN(T* y, context.Buffer<T>(1, launch.a.g.output_elements));
    auto run = [&](auto* argmax) -> absl::Status {
      using Targmax = std::remove_pointer_t<decltype(argmax)>;
      VGPU_ASSIGN_OR_RETURN(argmax, context.Buffer<Targmax>(2, launch.a.g.output_elements));
      if (launch.a.g.output_elements == 0) return absl::OkStatus();
      if (propagate) {
        MaxPoolWithArgmax<T, Targmax, true>(*context.device, launch, x, y, argmax);
      } else {
        MaxPoolWithArgmax<T, Targmax, false>(*context.device, launch, x, y, argmax);
      }
      return absl::OkStatus();
    };
    if (launch.argmax.dtype == DType::kInt64) return run(static_cast<int64_t*>(nullptr));
    return run(static_cast<int32_t*>(nullptr));
  });
}

// pooling::kBackwardWithArgmax (see protocol/kernels/pooling.h).
absl::Status PoolingBackwardWithArgmax(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(ArgmaxLaunch launch, ReadArgmaxLaunch(context));
  if (launch.argmax.dtype != DType::kInt64) {
    return absl::InvalidArgumentError("MaxPoolGradWithArgmax needs an int64 argmax");
  }
  const PoolGeometry& g = launch.a.g;
  return Dispatch::Floating(launch.x.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* dy, context.Buffer<const T>(0, g.output_elements));
    VGPU_ASSIGN_OR_RETURN(const int64_t* argmax,
                          context.Buffer<const int64_t>(1, g.output_elements));
    VGPU_ASSIGN_OR_RETURN(T* dx, context.Buffer<T>(2, g.input_elements));
    if (g.input_elements == 0) return absl::OkStatus();
    // Every target is checked before dx is touched; when each lies in its own image, images are
    // independent and scatter in parallel (each in output order, as serially).
    bool within_own_image = true;
    for (int64_t i = 0; i < g.output_elements; ++i) {
      const int64_t target = ArgmaxTarget(launch.a, i, argmax[i]);
      if (target < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Invalid output gradient index: argmax ", argmax[i], " of output element ", i,
            " lies outside the input of ", g.input_elements, " elements"));
      }
      within_own_image &= target / launch.a.input_image == i / launch.a.output_image;
    }
    auto scatter = [&](int64_t first_image, int64_t end_image) {
      std::fill(dx + first_image * launch.a.input_image, dx + end_image * launch.a.input_image,
                T(0));
      for (int64_t i = first_image * launch.a.output_image; i < end_image * launch.a.output_image;
           ++i) {
        dx[ArgmaxTarget(launch.a, i, argmax[i])] += dy[i];
      }
    };
    if (!within_own_image) {
      scatter(0, g.images);
      return absl::OkStatus();
    }
    const double per_image = static_cast<double>(launch.a.output_image + launch.a.input_image);
    context.device->parallelFor(
        g.images, Eigen::TensorOpCost(per_image * sizeof(T), per_image * sizeof(T), per_image),
        [&](Eigen::Index begin, Eigen::Index end) { scatter(begin, end); });
    return absl::OkStatus();
  });
}

// pooling::kGradGradWithArgmax (see protocol/kernels/pooling.h).
absl::Status PoolingGradGradWithArgmax(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  VGPU_ASSIGN_OR_RETURN(ArgmaxLaunch launch, ReadArgmaxLaunch(context));
  if (launch.argmax.dtype != DType::kInt64) {
    return absl::InvalidArgumentError("MaxPoolGradGradWithArgmax needs an int64 argmax");
  }
  const PoolGeometry& g = launch.a.g;
  return Dispatch::Floating(launch.x.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* ddx, context.Buffer<const T>(0, g.input_elements));
    VGPU_ASSIGN_OR_RETURN(const int64_t* argmax,
                          context.Buffer<const int64_t>(1, g.output_elements));
    VGPU_ASSIGN_OR_RETURN(T* ddy, context.Buffer<T>(2, g.output_elements));
    if (g.output_elements == 0) return absl::OkStatus();
    context.device->parallelFor(
        g.output_elements, Eigen::TensorOpCost(2 * sizeof(T) + 8, sizeof(T), 2),
        [&](Eigen::Index begin, Eigen::Index end) {
          for (int64_t i = begin; i < end; ++i) {
            const int64_t target = ArgmaxTarget(launch.a, i, argmax[i]);
            ddy[i] = target < 0 ? T(0) : ddx[target];
          }
        });
    return absl::OkStatus();
  });
}

}  // namespace vgpu::cpu_kernels
