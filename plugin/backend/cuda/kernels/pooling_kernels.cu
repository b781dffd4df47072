// CUDA kernels of the pooling family (protocol/kernels/pooling.h) on the CUDA executor: max and
// average pooling forward and backward over 2 or 3 spatial dimensions, max pooling's
// second-order gradient, and the argmax kernels of TensorFlow's MaxPoolWithArgmax family.
//
// These are this file's own kernels, not cuDNN's cudnnPoolingForward / Backward: the protocol
// fixes semantics cuDNN does not have — max starts from the dtype's lowest finite value (cuDNN
// gives -inf for a window of -inf), paddings may differ before and after (cuDNN pads
// symmetrically), the max gradient goes to the first maximum in window order, and gradients add
// up in the dtype in TensorFlow's loop order — and the CPU executor follows them bit for bit.
// Every kernel here is a gather (one thread per output element, or per input-gradient element
// walking the windows that cover it in the CPU kernel's order), so results are deterministic
// and equal the CPU executor's up to the device's float arithmetic (no contraction into FMAs:
// products and sums are rounded separately, as on the CPU). Only MaxPoolGradWithArgmax scatters
// (atomic adds, order not fixed) since its targets come from the client.
//
// The launch layer (launch/pooling_launch.h) reads and validates every launch into a
// PoolGeometry, as for the CPU executor; these kernels only compute. A channels-first tensor is
// pooled as a channels-last one of batch * channels images with one channel each; 2-D pooling
// is 3-D pooling with a depth of 1.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cuda/cuda_descriptors.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/float_compute.cuh"
#include "plugin/backend/cuda/kernels/device_types.cuh"
#include "plugin/backend/launch/pooling_launch.h"
#include "plugin/backend/cuda/cuda_libraries.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/pooling.h"

namespace vgpu::cuda {
namespace {

using kernels::Dispatch;

using namespace pooling_launch;  // NOLINT: the family's geometry, readers and buffers

using dnn::RuntimeStatus;

// --- Element arithmetic in T's rounding ------------------------------------------------------

template <typename T>
struct Arith;
template <>
struct Arith<float> {
  static __device__ float ToF(float v) { return v; }
  static __device__ float Add(float a, float b) { return __fadd_rn(a, b); }
  static __device__ float Mul(float a, float b) { return __fmul_rn(a, b); }
  static __device__ float Div(float a, float b) { return __fdiv_rn(a, b); }
  static __device__ bool Less(float a, float b) { return a < b; }
  static __device__ bool IsNan(float a) { return isnan(a); }
  static __device__ float Lowest() { return -FLT_MAX; }
  static __device__ float NegInf() { return -INFINITY; }
  static __device__ float Zero() { return 0.0f; }
  static __device__ float FromDouble(double v) { return static_cast<float>(v); }
};
template <>
struct Arith<double> {
  static __device__ double Add(double a, double b) { return __dadd_rn(a, b); }
  static __device__ double Mul(double a, double b) { return __dmul_rn(a, b); }
  static __device__ double Div(double a, double b) { return __ddiv_rn(a, b); }
  static __device__ bool Less(double a, double b) { return a < b; }
  static __device__ bool IsNan(double a) { return isnan(a); }
  static __device__ double Lowest() { return -DBL_MAX; }
  static __device__ double NegInf() { return -INFINITY; }
  static __device__ double Zero() { return 0.0; }
  static __device__ double FromDouble(double v) { return v; }
};
// The 16-bit types compute in float and round every result to the type (Eigen's half and
// bfloat16 operators do the same on the CPU).
template <typename T, float (*ToFloat)(T), T (*FromFloat)(float)>
struct Arith16 {
  static __device__ T Add(T a, T b) { return FromFloat(__fadd_rn(ToFloat(a), ToFloat(b))); }
  static __device__ T Mul(T a, T b) { return FromFloat(__fmul_rn(ToFloat(a), ToFloat(b))); }
  static __device__ T Div(T a, T b) { return FromFloat(__fdiv_rn(ToFloat(a), ToFloat(b))); }
  static __device__ bool Less(T a, T b) { return ToFloat(a) < ToFloat(b); }
  static __device__ bool IsNan(T a) { return isnan(ToFloat(a)); }
  static __device__ T Zero() { return FromFloat(0.0f); }
  static __device__ T NegInf() { return FromFloat(-INFINITY); }
  static __device__ T FromDouble(double v) { return FromFloat(static_cast<float>(v)); }
};
__device__ float HalfToFloat(__half v) { return __half2float(v); }
__device__ __half FloatToHalf(float v) { return __float2half_rn(v); }
__device__ float Bf16ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __nv_bfloat16 FloatToBf16(float v) { return __float2bfloat16_rn(v); }
template <>
struct Arith<__half> : Arith16<__half, HalfToFloat, FloatToHalf> {
  static __device__ __half Lowest() { return __ushort_as_half(0xFBFF); }  // -65504
};
template <>
struct Arith<__nv_bfloat16> : Arith16<__nv_bfloat16, Bf16ToFloat, FloatToBf16> {
  static __device__ __nv_bfloat16 Lowest() { return __ushort_as_bfloat16(0xFF7F); }
};

// Equality as the CPU kernels compare (NaN equals nothing).
template <typename T>
__device__ __forceinline__ bool Equal(T a, T b) {
  return !Arith<T>::Less(a, b) && !Arith<T>::Less(b, a) && !Arith<T>::IsNan(a) &&
         !Arith<T>::IsNan(b);
}

// Splits a channels-last element index into (image, d, h, w, channel).
struct Position {
  int64_t b, p[3], c;
};
__device__ __forceinline__ Position Split(int64_t i, const int64_t* dims, int64_t channels) {
  Position q;
  q.c = i % channels;
  i /= channels;
  q.p[2] = i % dims[2];
  i /= dims[2];
  q.p[1] = i % dims[1];
  i /= dims[1];
  q.p[0] = i % dims[0];
  q.b = i / dims[0];
  return q;
}
__device__ __forceinline__ int64_t IndexOf(const int64_t* dims, int64_t channels, int64_t b,
                                           int64_t z, int64_t h, int64_t w, int64_t c) {
  return (((b * dims[0] + z) * dims[1] + h) * dims[2] + w) * channels + c;
}

#define VGPU_GRID_STRIDE(i, n)                                                   \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += int64_t{blockDim.x} * gridDim.x)

// --- Kernels ---------------------------------------------------------------------------------

// Forward max pooling of output element o: the window's max from lowest(), NaN winning with
// propagation.
template <typename T, bool kPropagateNan>
__device__ T WindowMax(const PoolGeometry& g, const T* x, const Position& o) {
  using A = Arith<T>;
  const WindowRange zs = WindowOf(g, 0, o.p[0]), hs = WindowOf(g, 1, o.p[1]),
              ws = WindowOf(g, 2, o.p[2]);
  T best = A::Lowest();
  for (int64_t z = zs.begin; z < zs.end; ++z) {
    for (int64_t h = hs.begin; h < hs.end; ++h) {
      for (int64_t w = ws.begin; w < ws.end; ++w) {
        const T v = x[IndexOf(g.in, g.channels, o.b, z, h, w, o.c)];
        if (A::Less(best, v) || (kPropagateNan && A::IsNan(v))) best = v;
      }
    }
  }
  return best;
}

template <typename T, bool kPropagateNan>
__global__ void MaxPoolForwardKernel(PoolGeometry g, const T* x, T* y) {
  VGPU_GRID_STRIDE(i, g.output_elements) {
    y[i] = WindowMax<T, kPropagateNan>(g, x, Split(i, g.out, g.channels));
  }
}

template <typename T>
__global__ void AvgPoolForwardKernel(PoolGeometry g, const T* x, T* y) {
  using A = Arith<T>;
  VGPU_GRID_STRIDE(i, g.output_elements) {
    const Position o = Split(i, g.out, g.channels);
    const WindowRange zs = WindowOf(g, 0, o.p[0]), hs = WindowOf(g, 1, o.p[1]),
                ws = WindowOf(g, 2, o.p[2]);
    T sum = A::Zero();
    int64_t count = 0;
    for (int64_t z = zs.begin; z < zs.end; ++z) {
      for (int64_t h = hs.begin; h < hs.end; ++h) {
        for (int64_t w = ws.begin; w < ws.end; ++w) {
          sum = A::Add(sum, x[IndexOf(g.in, g.channels, o.b, z, h, w, o.c)]);
          ++count;
        }
      }
    }
    // TensorFlow divides by T(static_cast<float>(count)).
    y[i] = A::Div(sum, A::FromDouble(static_cast<float>(count)));
  }
}

// The flat index of the element holding the max of output (b, od, oh, ow)'s window in channel
// c, as the CPU executor's backward pass finds it, or -1 when the window has none.
template <typename T, bool kPropagateNan>
__device__ int64_t MaxElement(const PoolGeometry& g, const T* x, int64_t b, int64_t od,
                              int64_t oh, int64_t ow, int64_t c) {
  using A = Arith<T>;
  const WindowRange zs = WindowOf(g, 0, od), hs = WindowOf(g, 1, oh), ws = WindowOf(g, 2, ow);
  if (kPropagateNan) {
    int64_t best_index = -1;
    T best = A::Zero();
    for (int64_t z = zs.begin; z < zs.end; ++z) {
      for (int64_t h = hs.begin; h < hs.end; ++h) {
        for (int64_t w = ws.begin; w < ws.end; ++w) {
          const int64_t index = IndexOf(g.in, g.channels, b, z, h, w, c);
          const T v = x[index];
          if (best_index < 0 || (!A::IsNan(best) && (A::IsNan(v) || A::Less(best, v)))) {
            best = v;
            best_index = index;
          }
        }
      }
    }
    return best_index;
  }
  // The max of the non-NaN elements from -inf, then the first element equal to it.
  T best = A::NegInf();
  for (int64_t z = zs.begin; z < zs.end; ++z) {
    for (int64_t h = hs.begin; h < hs.end; ++h) {
      for (int64_t w = ws.begin; w < ws.end; ++w) {
        const T v = x[IndexOf(g.in, g.channels, b, z, h, w, c)];
        if (A::Less(best, v)) best = v;
      }
    }
  }
  for (int64_t z = zs.begin; z < zs.end; ++z) {
    for (int64_t h = hs.begin; h < hs.end; ++h) {
      for (int64_t w = ws.begin; w < ws.end; ++w) {
        const int64_t index = IndexOf(g.in, g.channels, b, z, h, w, c);
        if (Equal(x[index], best)) return index;
      }
    }
  }
  return -1;
}

// Calls visit(od, oh, ow) for every output (b, od, oh, ow) whose window covers the input
// element at q, in the CPU kernel's order (2-D: D, H, W loops outermost first; 3-D: W, H, D).
template <typename Visit>
__device__ void ForEachCoveringOutput(const PoolGeometry& g, const Position& q, Visit visit) {
  const int order[3] = {g.spatial_dims == 3 ? 2 : 0, 1, g.spatial_dims == 3 ? 0 : 2};
  const WindowRange ranges[3] = {OutputsCovering(g, 0, q.p[0]), OutputsCovering(g, 1, q.p[1]),
                                 OutputsCovering(g, 2, q.p[2])};
  int64_t o[3];
  for (o[order[0]] = ranges[order[0]].begin; o[order[0]] < ranges[order[0]].end; ++o[order[0]]) {
    for (o[order[1]] = ranges[order[1]].begin; o[order[1]] < ranges[order[1]].end;
         ++o[order[1]]) {
      for (o[order[2]] = ranges[order[2]].begin; o[order[2]] < ranges[order[2]].end;
           ++o[order[2]]) {
        visit(o[0], o[1], o[2]);
      }
    }
  }
}

// dx[i] = the sum, in T, over the outputs whose window covers i in the CPU kernel's order
// (ForEachCoveringOutput), of dy where i holds that window's max. kThroughRelu: that sum times
// (x[i] > 0), ReLU's gradient (kBackwardThroughRelu).
template <typename T, bool kPropagateNan, bool kThroughRelu>
__global__ void MaxPoolBackwardKernel(PoolGeometry g, const T* x, const T* dy, T* dx) {
  using A = Arith<T>;
  VGPU_GRID_STRIDE(i, g.input_elements) {
    const Position q = Split(i, g.in, g.channels);
    T sum = A::Zero();
    ForEachCoveringOutput(g, q, [&](int64_t od, int64_t oh, int64_t ow) {
      if (MaxElement<T, kPropagateNan>(g, x, q.b, od, oh, ow, q.c) == i) {
        sum = A::Add(sum, dy[IndexOf(g.out, g.channels, q.b, od, oh, ow, q.c)]);
      }
    });
    if constexpr (kThroughRelu) {
      sum = A::Mul(sum, A::Less(A::Zero(), x[i]) ? A::FromDouble(1.0) : A::Zero());
    }
    dx[i] = sum;
  }
}

// pooling::kForwardWithWindowIndex: y as MaxPoolForwardKernel<T, false>, and the slot of the
// element MaxElement<T, false> routes to (windows tile the input: WindowIndexable) with the
// flag (that element > 0).
template <typename T>
__global__ void MaxPoolWithWindowIndexKernel(PoolGeometry g, const T* x, T* y,
                                             uint8_t* window_index) {
  using A = Arith<T>;
  VGPU_GRID_STRIDE(i, g.output_elements) {
    const Position o = Split(i, g.out, g.channels);
    const WindowRange zs = WindowOf(g, 0, o.p[0]), hs = WindowOf(g, 1, o.p[1]),
                ws = WindowOf(g, 2, o.p[2]);
    y[i] = WindowMax<T, false>(g, x, o);
    const int64_t routed = MaxElement<T, false>(g, x, o.b, o.p[0], o.p[1], o.p[2], o.c);
    uint8_t byte = pooling::kNoWindowSlot;
    if (routed >= 0) {
      const Position q = Split(routed, g.in, g.channels);
      const int64_t slot =
          ((q.p[0] - zs.begin) * g.window[1] + (q.p[1] - hs.begin)) * g.window[2] +
          (q.p[2] - ws.begin);
      byte = static_cast<uint8_t>(slot | (A::Less(A::Zero(), x[routed]) ? 0x80 : 0));
    }
    window_index[i] = byte;
  }
}

// pooling::kBackwardFromWindowIndex(ThroughRelu): dx[i] = dy of the window covering i where
// that window's byte names i's slot (masked by the byte's flag with kThroughRelu), else 0.
template <typename T, bool kThroughRelu>
__global__ void MaxPoolBackwardFromWindowIndexKernel(PoolGeometry g, const uint8_t* window_index,
                                                     const T* dy, T* dx) {
  using A = Arith<T>;
  VGPU_GRID_STRIDE(i, g.input_elements) {
    const Position q = Split(i, g.in, g.channels);
    int64_t o[3], slot = 0;
    bool covered = true;
    for (int d = 0; d < 3; ++d) {
      o[d] = q.p[d] / g.window[d];
      covered = covered && o[d] < g.out[d];
      slot = slot * g.window[d] + q.p[d] % g.window[d];
    }
    T value = A::Zero();
    if (covered) {
      const int64_t j = IndexOf(g.out, g.channels, q.b, o[0], o[1], o[2], q.c);
      const uint8_t byte = window_index[j];
      if ((byte & 0x7F) == slot) {
        value = dy[j];
        if (kThroughRelu && (byte & 0x80) == 0) value = A::Mul(value, A::Zero());
      }
    }
    dx[i] = value;
  }
}

// dx[i] = the sum over the windows covering i (in ForEachCoveringOutput's order) of
// dy * T(1 / that window's element count).
template <typename T>
__global__ void AvgPoolBackwardKernel(PoolGeometry g, const T* dy, T* dx) {
  using A = Arith<T>;
  VGPU_GRID_STRIDE(i, g.input_elements) {
    const Position q = Split(i, g.in, g.channels);
    T sum = A::Zero();
    ForEachCoveringOutput(g, q, [&](int64_t od, int64_t oh, int64_t ow) {
      const WindowRange zs = WindowOf(g, 0, od), hs = WindowOf(g, 1, oh), ws = WindowOf(g, 2, ow);
      const int64_t count = (zs.end - zs.begin) * (hs.end - hs.begin) * (ws.end - ws.begin);
      const T scale = A::FromDouble(1.0 / static_cast<double>(count));
      const T grad = dy[IndexOf(g.out, g.channels, q.b, od, oh, ow, q.c)];
      sum = A::Add(sum, A::Mul(grad, scale));
    });
    dx[i] = sum;
  }
}

// ddy = ddx at the first element of the window equal to y, or 0.
template <typename T>
__global__ void MaxPoolGradGradKernel(PoolGeometry g, const T* x, const T* y, const T* ddx,
                                      T* ddy) {
  using A = Arith<T>;
  VGPU_GRID_STRIDE(i, g.output_elements) {
    const Position o = Split(i, g.out, g.channels);
    const WindowRange zs = WindowOf(g, 0, o.p[0]), hs = WindowOf(g, 1, o.p[1]),
                ws = WindowOf(g, 2, o.p[2]);
    const T max = y[i];
    T value = A::Zero();
    bool found = false;
    for (int64_t z = zs.begin; z < zs.end && !found; ++z) {
      for (int64_t h = hs.begin; h < hs.end && !found; ++h) {
        for (int64_t w = ws.begin; w < ws.end && !found; ++w) {
          const int64_t index = IndexOf(g.in, g.channels, o.b, z, h, w, o.c);
          if (Equal(x[index], max)) {
            value = ddx[index];
            found = true;
          }
        }
      }
    }
    ddy[i] = value;
  }
}

// --- Argmax kernels --------------------------------------------------------------------------

template <typename T, typename Targmax, bool kPropagateNan>
__global__ void MaxPoolWithArgmaxKernel(ArgmaxGeometry a, const T* x, T* y, Targmax* argmax) {
  using A = Arith<T>;
  const PoolGeometry& g = a.g;
  VGPU_GRID_STRIDE(i, g.output_elements) {
    const Position o = Split(i, g.out, g.channels);
    const WindowRange hs = WindowOf(g, 1, o.p[1]), ws = WindowOf(g, 2, o.p[2]);
    bool first = true;
    T best = A::Lowest();
    int64_t reported_best = -1;
    for (int64_t h = hs.begin; h < hs.end; ++h) {
      for (int64_t w = ws.begin; w < ws.end; ++w) {
        const int64_t image_index = (h * g.in[2] + w) * g.channels;
        const int64_t index = o.b * g.in[1] * g.in[2] * g.channels + image_index;
        const T v = x[index + o.c];
        if (first || A::Less(best, v) || (kPropagateNan && A::IsNan(v) && !A::IsNan(best))) {
          best = v;
          reported_best = (a.include_batch_in_index ? index : image_index) + o.c;
        }
        first = false;
      }
    }
    y[i] = best;
    argmax[i] = static_cast<Targmax>(reported_best);
  }
}

// Records in *first_bad the smallest output index whose argmax target lies outside dx.
__global__ void CheckArgmaxKernel(ArgmaxGeometry a, const int64_t* argmax,
                                  unsigned long long* first_bad) {
  VGPU_GRID_STRIDE(i, a.g.output_elements) {
    if (ArgmaxTarget(a, i, argmax[i]) < 0) {
      atomicMin(first_bad, static_cast<unsigned long long>(i));
    }
  }
}

template <typename T>
__device__ __forceinline__ void AtomicAdd(T* address, T value) {
  atomicAdd(address, value);
}

template <typename T>
__global__ void ScatterArgmaxKernel(ArgmaxGeometry a, const T* dy, const int64_t* argmax,
                                    T* dx) {
  VGPU_GRID_STRIDE(i, a.g.output_elements) {
    const int64_t target = ArgmaxTarget(a, i, argmax[i]);
    if (target >= 0) AtomicAdd(dx + target, dy[i]);
  }
}

template <typename T>
__global__ void GatherArgmaxKernel(ArgmaxGeometry a, const T* ddx, const int64_t* argmax,
                                   T* ddy) {
  VGPU_GRID_STRIDE(i, a.g.output_elements) {
    const int64_t target = ArgmaxTarget(a, i, argmax[i]);
    ddy[i] = target < 0 ? Arith<T>::Zero() : ddx[target];
  }
}

// --- Launches --------------------------------------------------------------------------------

absl::Status PoolingForward(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(PoolingLaunch launch, ReadPoolingLaunch(context, PoolingKernel::kForward));
  const PoolGeometry& g = launch.geometry;
  const bool propagate = launch.pooling.nan_propagation == NanPropagation::kPropagate;
  return WithPoolingBuffers<Dispatch>(context, launch, [&](auto b) -> absl::Status {
    using T = std::remove_pointer_t<decltype(b.out)>;
    const CudaLaunchDevice& device = *context.device;
    if (launch.pooling.mode == PoolingMode::kAverage) {
      return LaunchGridStride("pooling_forward", device, g.output_elements,
                              AvgPoolForwardKernel<T>, g, b.x, b.out);
    }
    if (propagate) {
      return LaunchGridStride("pooling_forward", device, g.output_elements,
                              MaxPoolForwardKernel<T, true>, g, b.x, b.out);
    }
    return LaunchGridStride("pooling_forward", device, g.output_elements,
                            MaxPoolForwardKernel<T, false>, g, b.x, b.out);
  });
}

// pooling::kBackward and kBackwardThroughRelu.
template <PoolingKernel kKernel>
absl::Status PoolingBackward(const CudaKernelContext& context) {
  constexpr bool kThroughRelu = kKernel == PoolingKernel::kBackwardThroughRelu;
  VGPU_ASSIGN_OR_RETURN(PoolingLaunch launch, ReadPoolingLaunch(context, kKernel));
  const PoolGeometry& g = launch.geometry;
  const bool propagate = launch.pooling.nan_propagation == NanPropagation::kPropagate;
  return WithPoolingBuffers<Dispatch>(context, launch, [&](auto b) -> absl::Status {
    using T = std::remove_pointer_t<decltype(b.out)>;
    const CudaLaunchDevice& device = *context.device;
    if (launch.pooling.mode != PoolingMode::kMax) {
      return LaunchGridStride("pooling_backward", device, g.input_elements,
                              AvgPoolBackwardKernel<T>, g, b.dy, b.out);
    }
    if (propagate) {
      return LaunchGridStride("pooling_backward", device, g.input_elements,
                              MaxPoolBackwardKernel<T, true, kThroughRelu>, g, b.x, b.dy, b.out);
    }
    return LaunchGridStride("pooling_backward", device, g.input_elements,
                            MaxPoolBackwardKernel<T, false, kThroughRelu>, g, b.x, b.dy, b.out);
  });
}

absl::Status PoolingGradGrad(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(PoolingLaunch launch,
                        ReadPoolingLaunch(context, PoolingKernel::kGradGrad));
  const PoolGeometry& g = launch.geometry;
  return WithPoolingBuffers<Dispatch>(context, launch, [&](auto b) -> absl::Status {
    using T = std::remove_pointer_t<decltype(b.out)>;
    return LaunchGridStride("pooling_grad_grad", *context.device, g.output_elements,
                            MaxPoolGradGradKernel<T>, g, b.x, b.y, b.ddx, b.out);
  });
}

absl::Status PoolingForwardWithArgmax(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(ArgmaxLaunch launch, ReadArgmaxLaunch(context, ArgmaxKernel::kForward));
  const bool propagate = launch.pooling.nan_propagation == NanPropagation::kPropagate;
  const PoolGeometry& g = launch.a.g;
  return WithArgmaxBuffers<Dispatch>(context, launch, [&](auto b) -> absl::Status {
    using T = std::remove_pointer_t<decltype(b.out)>;
    using Targmax = std::remove_pointer_t<decltype(b.argmax)>;
    if (propagate) {
      return LaunchGridStride("pooling_forward_with_argmax", *context.device, g.output_elements,
                              MaxPoolWithArgmaxKernel<T, Targmax, true>, launch.a, b.in, b.out,
                              b.argmax);
    }
    return LaunchGridStride("pooling_forward_with_argmax", *context.device, g.output_elements,
                            MaxPoolWithArgmaxKernel<T, Targmax, false>, launch.a, b.in, b.out,
                            b.argmax);
  });
}

absl::Status PoolingBackwardWithArgmax(const CudaKernelContext& context) {
  return RunArgmaxGradient<Dispatch>(context, ArgmaxKernel::kBackward,
                                     [&](const ArgmaxGeometry& a, const auto* dy,
                                         const int64_t* argmax, auto* dx) -> absl::Status {
    using T = std::remove_pointer_t<decltype(dx)>;
    const CudaLaunchDevice& device = *context.device;
    if (a.g.output_elements > 0) {
      // The argmax values are tenant data on the device: they are checked there, and the launch
      // waits for the verdict (this kernel blocks its stream's worker) so that a bad index fails
      // it before dx is written, as on the CPU executor.
      VGPU_ASSIGN_OR_RETURN(void* workspace, device.libraries->Workspace(sizeof(uint64_t)));
      auto* first_bad = static_cast<unsigned long long*>(workspace);
      VGPU_RETURN_IF_ERROR(RuntimeStatus(
          cudaMemsetAsync(first_bad, 0xFF, sizeof(*first_bad), device.stream),
          "cudaMemsetAsync"));
      VGPU_RETURN_IF_ERROR(LaunchGridStride("pooling_backward_with_argmax check", device,
                                            a.g.output_elements, CheckArgmaxKernel, a, argmax,
                                            first_bad));
      unsigned long long verdict = 0;
      VGPU_RETURN_IF_ERROR(RuntimeStatus(cudaMemcpyAsync(&verdict, first_bad, sizeof(verdict),
                                                         cudaMemcpyDeviceToHost, device.stream),
                                         "cudaMemcpyAsync"));
      VGPU_RETURN_IF_ERROR(
          RuntimeStatus(cudaStreamSynchronize(device.stream), "cudaStreamSynchronize"));
      if (verdict != ~0ull) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Invalid output gradient index: the argmax of output element ", verdict,
            " lies outside the input of ", a.g.input_elements, " elements"));
      }
    }
    VGPU_RETURN_IF_ERROR(RuntimeStatus(
        cudaMemsetAsync(dx, 0, a.g.input_elements * sizeof(T), device.stream), "cudaMemsetAsync"));
    return LaunchGridStride("pooling_backward_with_argmax", device, a.g.output_elements,
                            ScatterArgmaxKernel<T>, a, dy, argmax, dx);
  });
}

absl::Status PoolingGradGradWithArgmax(const CudaKernelContext& context) {
  return RunArgmaxGradient<Dispatch>(context, ArgmaxKernel::kGradGrad,
                                     [&](const ArgmaxGeometry& a, const auto* ddx,
                                         const int64_t* argmax, auto* ddy) -> absl::Status {
    using T = std::remove_pointer_t<decltype(ddy)>;
    return LaunchGridStride("pooling_grad_grad_with_argmax", *context.device, a.g.output_elements,
                            GatherArgmaxKernel<T>, a, ddx, argmax, ddy);
  });
}

absl::Status PoolingForwardWithWindowIndex(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(PoolingLaunch launch,
                        ReadPoolingLaunch(context, PoolingKernel::kForwardWithWindowIndex));
  const PoolGeometry& g = launch.geometry;
  return WithPoolingBuffers<Dispatch>(context, launch, [&](auto b) -> absl::Status {
    using T = std::remove_pointer_t<decltype(b.out)>;
    return LaunchGridStride("pooling_forward_with_window_index", *context.device,
                            g.output_elements, MaxPoolWithWindowIndexKernel<T>, g, b.x, b.out,
                            b.window_index_out);
  });
}

// pooling::kBackwardFromWindowIndex and kBackwardFromWindowIndexThroughRelu.
template <PoolingKernel kKernel>
absl::Status PoolingBackwardFromWindowIndex(const CudaKernelContext& context) {
  constexpr bool kThroughRelu = kKernel == PoolingKernel::kBackwardFromWindowIndexThroughRelu;
  VGPU_ASSIGN_OR_RETURN(PoolingLaunch launch, ReadPoolingLaunch(context, kKernel));
  const PoolGeometry& g = launch.geometry;
  return WithPoolingBuffers<Dispatch>(context, launch, [&](auto b) -> absl::Status {
    using T = std::remove_pointer_t<decltype(b.out)>;
    return LaunchGridStride("pooling_backward_from_window_index", *context.device,
                            g.input_elements, MaxPoolBackwardFromWindowIndexKernel<T, kThroughRelu>,
                            g, b.window_index, b.dy, b.out);
  });
}

}  // namespace

void AddCudaPoolingKernels(CudaKernelTable& table) {
  table.AddFamily(kernel_families::kPooling, PoolingForward,
                  PoolingBackward<PoolingKernel::kBackward>, PoolingForwardWithArgmax,
                  PoolingBackwardWithArgmax, PoolingGradGradWithArgmax, PoolingGradGrad,
                  PoolingBackward<PoolingKernel::kBackwardThroughRelu>,
                  PoolingForwardWithWindowIndex,
                  PoolingBackwardFromWindowIndex<PoolingKernel::kBackwardFromWindowIndex>,
                  PoolingBackwardFromWindowIndex<PoolingKernel::kBackwardFromWindowIndexThroughRelu>);
}

}  // namespace vgpu::cuda
