// The pooling family's launches (protocol/kernels/pooling.h), read once for every executor: the
// pooling and tensor descriptors, validated as a hostile client could send them, become a
// PoolGeometry in the channels-last view. 2-D pooling is 3-D pooling with a depth of 1, and a
// channels-first tensor pooled over its spatial dimensions is a channels-last tensor of
// batch * channels images with one channel each. The geometry types are plain data: executors
// copy them to their devices as they are.
#ifndef VGPU_BACKEND_LAUNCH_POOLING_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_POOLING_LAUNCH_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/backend/launch/host_device.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu::pooling_launch {

// A pooling problem: `images` images of in[0] x in[1] x in[2] positions (depth, rows, columns;
// 2-D problems have in[0] = out[0] = window[0] = 1) with `channels` values each, channels last.
struct PoolGeometry {
  int spatial_dims = 2;
  int64_t images = 0, channels = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t window[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0};  // pad: before
  int64_t input_elements = 0, output_elements = 0;  // images * positions * channels

  VGPU_HOST_DEVICE int64_t InputPositions() const { return in[0] * in[1] * in[2]; }
  VGPU_HOST_DEVICE int64_t OutputPositions() const { return out[0] * out[1] * out[2]; }
};

// The input positions [begin, end) of spatial dimension `dim` covered by output position `o`.
struct WindowRange {
  int64_t begin, end;
};
VGPU_HOST_DEVICE inline WindowRange WindowOf(const PoolGeometry& g, int dim, int64_t o) {
  const int64_t start = o * g.stride[dim] - g.pad[dim];
  const int64_t end = start + g.window[dim];
  return {start > 0 ? start : 0, end < g.in[dim] ? end : g.in[dim]};
}

// The output positions [begin, end) of spatial dimension `dim` whose windows cover input
// position `i`.
VGPU_HOST_DEVICE inline WindowRange OutputsCovering(const PoolGeometry& g, int dim, int64_t i) {
  const int64_t padded = i + g.pad[dim];
  const int64_t begin = padded < g.window[dim] ? 0 : (padded - g.window[dim]) / g.stride[dim] + 1;
  const int64_t end = padded / g.stride[dim] + 1;
  return {begin, end < g.out[dim] ? end : g.out[dim]};
}

// Validates the pooling descriptor and the x / y tensor descriptors of a launch (ranks, dtypes,
// sizes, the output size rule, element counts without overflow) and returns the geometry.
absl::StatusOr<PoolGeometry> PoolGeometryOf(const PoolingDescriptorSettings& pooling,
                                            const TensorDescriptorSettings& x,
                                            const TensorDescriptorSettings& y);

// The kernels of the family, for the readers' buffer rules.
enum class PoolingKernel {
  kForward,   // buffers [x, y]
  kBackward,  // [x, dy, dx] for max pooling, [dy, dx] for average pooling
  kGradGrad,  // [x, y, ddx, ddy]; max pooling only
  kBackwardThroughRelu,  // [x, dy, dx]; max pooling only
  // Max pooling over tiling windows (WindowIndexable), NaNs not propagated:
  kForwardWithWindowIndex,              // [x, y, window_index]
  kBackwardFromWindowIndex,             // [window_index, dy, dx]
  kBackwardFromWindowIndexThroughRelu,  // [window_index, dy, dx]
};

// Whether the window-index kernels take geometry `g`: stride == window and no padding in every
// dimension (the windows tile the input, each wholly inside it), at most
// pooling::kMaxWindowSlots elements per window.
bool WindowIndexable(const PoolGeometry& g);

// pooling::kForward, kBackward, kGradGrad, kBackwardThroughRelu: descriptors [pooling, x, y],
// the buffer count of `kernel` (checked first, except for kBackward, whose count depends on
// the mode and is checked after the descriptors).
struct PoolingLaunch {
  PoolingKernel kernel = PoolingKernel::kForward;
  PoolingDescriptorSettings pooling;
  TensorDescriptorSettings x, y;
  PoolGeometry geometry;
};
absl::StatusOr<PoolingLaunch> ReadPoolingLaunch(const LaunchView& launch, PoolingKernel kernel);

// A pooling launch's buffers, typed and checked against its geometry. `out` is y (kForward),
// dx (kBackward) or ddy (kGradGrad); the inputs a kernel does not have are null (x of average
// pooling's backward pass).
template <typename T>
struct PoolingBuffers {
  const T* x = nullptr;
  const T* y = nullptr;
  const T* dy = nullptr;
  const T* ddx = nullptr;
  const uint8_t* window_index = nullptr;  // the window-index gradients' input
  uint8_t* window_index_out = nullptr;    // kForwardWithWindowIndex's second output
  T* out = nullptr;
};

// Calls fn(PoolingBuffers<T>{...}) with T the element type `Dispatch` (an executor's
// DTypeDispatch) gives the launch's floating-point dtype, the buffers taken from `context` in
// the kernel's order. Returns fn's status, or the first dtype or buffer error.
template <typename Dispatch, typename Context, typename Fn>
absl::Status WithPoolingBuffers(const Context& context, const PoolingLaunch& launch, Fn&& fn) {
  const PoolGeometry& g = launch.geometry;
  return Dispatch::Floating(launch.x.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    PoolingBuffers<T> b;
    size_t next = 0;
    switch (launch.kernel) {
      case PoolingKernel::kForward: {
        VGPU_ASSIGN_OR_RETURN(b.x, context.template Buffer<const T>(next++, g.input_elements));
        VGPU_ASSIGN_OR_RETURN(b.out, context.template Buffer<T>(next++, g.output_elements));
        break;
      }
      case PoolingKernel::kBackward:
      case PoolingKernel::kBackwardThroughRelu: {
        if (launch.pooling.mode == PoolingMode::kMax) {
          VGPU_ASSIGN_OR_RETURN(b.x, context.template Buffer<const T>(next++, g.input_elements));
        }
        VGPU_ASSIGN_OR_RETURN(b.dy, context.template Buffer<const T>(next++, g.output_elements));
        VGPU_ASSIGN_OR_RETURN(b.out, context.template Buffer<T>(next++, g.input_elements));
        break;
      }
      case PoolingKernel::kForwardWithWindowIndex: {
        VGPU_ASSIGN_OR_RETURN(b.x, context.template Buffer<const T>(next++, g.input_elements));
        VGPU_ASSIGN_OR_RETURN(b.out, context.template Buffer<T>(next++, g.output_elements));
        VGPU_ASSIGN_OR_RETURN(b.window_index_out,
                              context.template Buffer<uint8_t>(next++, g.output_elements));
        break;
      }
      case PoolingKernel::kBackwardFromWindowIndex:
      case PoolingKernel::kBackwardFromWindowIndexThroughRelu: {
        VGPU_ASSIGN_OR_RETURN(b.window_index,
                              context.template Buffer<const uint8_t>(next++, g.output_elements));
        VGPU_ASSIGN_OR_RETURN(b.dy, context.template Buffer<const T>(next++, g.output_elements));
        VGPU_ASSIGN_OR_RETURN(b.out, context.template Buffer<T>(next++, g.input_elements));
        break;
      }
      case PoolingKernel::kGradGrad: {
        VGPU_ASSIGN_OR_RETURN(b.x, context.template Buffer<const T>(next++, g.input_elements));
        VGPU_ASSIGN_OR_RETURN(b.y, context.template Buffer<const T>(next++, g.output_elements));
        VGPU_ASSIGN_OR_RETURN(b.ddx, context.template Buffer<const T>(next++, g.input_elements));
        VGPU_ASSIGN_OR_RETURN(b.out, context.template Buffer<T>(next++, g.output_elements));
        break;
      }
    }
    return fn(b);
  });
}

// What the argmax kernels compute with: 2-D NHWC max pooling and where argmax values point.
struct ArgmaxGeometry {
  PoolGeometry g;
  bool include_batch_in_index = false;
  int64_t input_image = 0, output_image = 0;  // elements per image of x and of y
};

// The flat index in x named by argmax value `value` of output element `i`, or -1 when it lies
// outside x (argmax values coming back from a client are untrusted).
VGPU_HOST_DEVICE inline int64_t ArgmaxTarget(const ArgmaxGeometry& a, int64_t i, int64_t value) {
  const int64_t offset = a.include_batch_in_index ? 0 : (i / a.output_image) * a.input_image;
  if (value < 0 || value >= a.g.input_elements - offset) return -1;
  return offset + value;
}

// The argmax kernels: three buffers each.
enum class ArgmaxKernel {
  kForward,   // [x, y, argmax]; argmax int32 or int64
  kBackward,  // [dy, argmax, dx]; argmax int64
  kGradGrad,  // [ddx, argmax, ddy]; argmax int64
};

// pooling::kForwardWithArgmax, kBackwardWithArgmax, kGradGradWithArgmax: three buffers,
// descriptors [pooling, x, y, argmax] and the int32 include_batch_in_index parameter,
// validated: 2-D NHWC max pooling, an argmax tensor of y's shape and of the kernel's dtype.
struct ArgmaxLaunch {
  ArgmaxKernel kernel = ArgmaxKernel::kForward;
  PoolingDescriptorSettings pooling;
  TensorDescriptorSettings x, y, argmax;
  ArgmaxGeometry a;
};
absl::StatusOr<ArgmaxLaunch> ReadArgmaxLaunch(const LaunchView& launch, ArgmaxKernel kernel);

// An argmax launch's buffers, typed and checked against its geometry: `in` is x, dy or ddx and
// `out` y, dx or ddy, in the kernel's order (see ArgmaxKernel).
template <typename T, typename Targmax>
struct ArgmaxBuffers {
  const T* in = nullptr;
  T* out = nullptr;
  Targmax* argmax = nullptr;  // written by kForward, read by the gradients
};

// The buffers of `launch` as ArgmaxBuffers<T, Targmax>, taken from `context` in the kernel's
// order.
template <typename T, typename Targmax, typename Context>
absl::StatusOr<ArgmaxBuffers<T, Targmax>> TakeArgmaxBuffers(const Context& context,
                                                            const ArgmaxLaunch& launch) {
  const PoolGeometry& g = launch.a.g;
  ArgmaxBuffers<T, Targmax> b;
  if (launch.kernel == ArgmaxKernel::kForward) {
    VGPU_ASSIGN_OR_RETURN(b.in, context.template Buffer<const T>(0, g.input_elements));
    VGPU_ASSIGN_OR_RETURN(b.out, context.template Buffer<T>(1, g.output_elements));
    VGPU_ASSIGN_OR_RETURN(b.argmax, context.template Buffer<Targmax>(2, g.output_elements));
    return b;
  }
  const bool backward = launch.kernel == ArgmaxKernel::kBackward;
  VGPU_ASSIGN_OR_RETURN(
      b.in, context.template Buffer<const T>(0, backward ? g.output_elements : g.input_elements));
  VGPU_ASSIGN_OR_RETURN(b.argmax, context.template Buffer<Targmax>(1, g.output_elements));
  VGPU_ASSIGN_OR_RETURN(
      b.out, context.template Buffer<T>(2, backward ? g.input_elements : g.output_elements));
  return b;
}

// Calls fn(ArgmaxBuffers<T, Targmax>{...}) with T the element type `Dispatch` (an executor's
// DTypeDispatch) gives the launch's dtype and Targmax the argmax tensor's type: int32_t or
// int64_t for kForward, int64_t for the gradients (ReadArgmaxLaunch checked it). Returns fn's
// status, or the first dtype or buffer error.
template <typename Dispatch, typename Context, typename Fn>
absl::Status WithArgmaxBuffers(const Context& context, const ArgmaxLaunch& launch, Fn&& fn) {
  return Dispatch::Floating(launch.x.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    auto run = [&](auto typed) -> absl::Status {
      using Targmax = decltype(typed);
      VGPU_ASSIGN_OR_RETURN(auto buffers, (TakeArgmaxBuffers<T, Targmax>(context, launch)));
      return fn(buffers);
    };
    if (launch.argmax.dtype == DType::kInt32) return run(int32_t{});
    return run(int64_t{});
  });
}

// A gradient kernel of the argmax pooling (`kernel`: kBackward or kGradGrad), whose argmax is
// int64: reads the launch (ReadArgmaxLaunch), takes its buffers as T (the element type
// `Dispatch` gives x's dtype) and calls fn(launch.a, in, argmax, out) (kBackward: dy, argmax,
// dx; kGradGrad: ddx, argmax, ddy), unless `out` has no elements (OK then). Returns fn's status,
// or the first read, dtype or buffer error.
template <typename Dispatch, typename Context, typename Fn>
absl::Status RunArgmaxGradient(const Context& context, ArgmaxKernel kernel, Fn&& fn) {
  VGPU_ASSIGN_OR_RETURN(const ArgmaxLaunch launch, ReadArgmaxLaunch(context, kernel));
  const PoolGeometry& g = launch.a.g;
  const int64_t out_elements =
      kernel == ArgmaxKernel::kBackward ? g.input_elements : g.output_elements;
  return Dispatch::Floating(launch.x.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const auto b, (TakeArgmaxBuffers<T, int64_t>(context, launch)));
    if (out_elements == 0) return absl::OkStatus();
    return fn(launch.a, b.in, b.argmax, b.out);
  });
}

}  // namespace vgpu::pooling_launch

#endif  // VGPU_BACKEND_LAUNCH_POOLING_LAUNCH_H_
