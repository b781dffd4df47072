// The activation family (protocol/kernels/activation.h) on the CUDA executor: forward and
// backward of every ActivationMode the CPU executor serves (relu, relu6, sigmoid, tanh, elu, selu,
// softplus, softsign, leaky relu) for float32, float64, float16 and bfloat16, one grid-stride
// kernel per launch. The formulas are the CPU executor's (TensorFlow's CPU expressions), computed
// in the dtype (float16/bfloat16 rounded per operation, see device_types.cuh), with CUDA's math
// library for exp/log1p/tanh. The launch layer (launch/activation_launch.h) reads and validates
// every launch on the host, as for the CPU executor.
//
// GPU run must confirm: every mode and dtype within rtol 1e-3 of the CPU executor (sigmoid: the
// CPU's float path is Eigen's rational approximation, here 1 / (1 + exp(-x))); softplus at the
// thresholds; NaN propagation of relu/relu6 (NaN in, NaN out).
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/device_types.cuh"
#include "plugin/backend/launch/activation_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/activation.h"

namespace vgpu::cuda {
namespace {

using namespace kernels;  // NOLINT: the family's own helper namespace

using activation_launch::ActivationLaunch;
using activation_launch::ReadActivationBackward;
using activation_launch::ReadActivationForward;
using activation_launch::kSeluScale;
using activation_launch::kSeluScaleAlpha;

// max(x, 0) / min(x, 6) that keep a NaN x (Eigen's PropagateNaN).
template <typename C>
__device__ C MaxPropagateNaN(C x, C bound) {
  return dmath::IsNan(x) ? x : (x > bound ? x : bound);
}
template <typename C>
__device__ C MinPropagateNaN(C x, C bound) {
  return dmath::IsNan(x) ? x : (x < bound ? x : bound);
}

template <typename T>
__global__ void ForwardKernel(ActivationMode mode, float coef, const Storage<T>* x, Storage<T>* y,
                              int64_t n) {
  using C = Compute<T>;
  const C zero(0), one(1);
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    const C v = Load<T>(x, i);
    C result;
    switch (mode) {
      case ActivationMode::kRelu: result = MaxPropagateNaN(v, zero); break;
      case ActivationMode::kRelu6: result = MinPropagateNaN(MaxPropagateNaN(v, zero), C(6)); break;
      case ActivationMode::kSigmoid: result = one / (one + dmath::Exp(-v)); break;
      case ActivationMode::kTanh: result = dmath::Tanh(v); break;
      case ActivationMode::kElu: result = v < zero ? dmath::Exp(v) - one : v; break;
      case ActivationMode::kSelu:
        result = v < zero ? FromDouble<C>(kSeluScaleAlpha) * (dmath::Exp(v) - one)
                          : FromDouble<C>(kSeluScale) * v;
        break;
      case ActivationMode::kSoftplus: {
        // threshold = log(epsilon) + 2 in the dtype: below it softplus(x) == exp(x), above
        // -threshold softplus(x) == x.
        const C threshold = dmath::Log(dmath::Epsilon<C>()) + C(2);
        const C exp_v = dmath::Exp(v);
        result = v > -threshold ? v : (v < threshold ? exp_v : dmath::Log1p(exp_v));
        break;
      }
      case ActivationMode::kSoftsign: result = v / (dmath::Fabs(v) + one); break;
      case ActivationMode::kLeakyRelu: result = v > zero ? v : v * C(coef); break;
      default: result = v; break;  // unreachable: the reader checked the mode
    }
    Store<T>(y, i, result);
  }
}

template <typename T>
__global__ void BackwardKernel(ActivationMode mode, float coef, const Storage<T>* a_data,
                               const Storage<T>* b_data, Storage<T>* out, int64_t n) {
  using C = Compute<T>;
  const C zero(0), one(1);
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    const C a = Load<T>(a_data, i);
    const C b = Load<T>(b_data, i);
    C result;
    switch (mode) {
      case ActivationMode::kRelu:  // a = gradients, b = features
        result = a * (b > zero ? one : zero);
        break;
      case ActivationMode::kRelu6:
        result = a * ((b > zero && b < C(6)) ? one : zero);
        break;
      case ActivationMode::kLeakyRelu: result = b > zero ? a : a * C(coef); break;
      case ActivationMode::kSigmoid:  // a = y, b = dy
        result = b * a * (one - a);
        break;
      case ActivationMode::kTanh: result = b * (one - a * a); break;
      case ActivationMode::kElu:  // a = gradients, b = outputs
        result = b < zero ? (b + one) * a : a;
        break;
      case ActivationMode::kSelu:
        result = b < zero ? a * (b + FromDouble<C>(kSeluScaleAlpha))
                          : a * FromDouble<C>(kSeluScale);
        break;
      case ActivationMode::kSoftplus:  // a = gradients, b = features
        result = a / (dmath::Exp(-b) + one);
        break;
      case ActivationMode::kSoftsign: {
        const C denominator = dmath::Fabs(b) + one;
        result = a / (denominator * denominator);
        break;
      }
      default: result = a; break;  // unreachable: the reader checked the mode
    }
    Store<T>(out, i, result);
  }
}

// activation::kForward (kInputs 1: y = f(x)) and kBackward (kInputs 2: buffers [a, b, out], see
// protocol/kernels/activation.h), read by kRead: one thread per element.
template <size_t kInputs, auto kRead>
struct Activation : FloatingKernel<Activation<kInputs, kRead>, kRead> {
  template <typename T>
  static absl::Status Run(const CudaKernelContext& context, const ActivationLaunch& launch) {
    VGPU_ASSIGN_OR_RETURN(auto b, (TakeElementwiseBuffers<T, kInputs>(context, launch.count)));
    const int64_t n = launch.count;
    if (n == 0) return absl::OkStatus();
    const ActivationMode mode = launch.activation.mode;
    // The leaky relu's alpha as TensorFlow holds it: the float attribute, cast to T on device.
    const float alpha = launch.LeakyAlpha();
    if constexpr (kInputs == 1) {
      return LaunchGrid(context, "activation_forward", n, ForwardKernel<T>, mode, alpha, b.in[0],
                        b.out, n);
    } else {
      return LaunchGrid(context, "activation_backward", n, BackwardKernel<T>, mode, alpha,
                        b.in[0], b.in[1], b.out, n);
    }
  }
};

}  // namespace

void AddCudaActivationKernels(CudaKernelTable& table) {
  // relu_int8 is not served yet (docs/cuda.md).
  table.AddFamily(kernel_families::kActivation, Activation<1, ReadActivationForward>::Launch,
                  Activation<2, ReadActivationBackward>::Launch, nullptr);
}

}  // namespace vgpu::cuda
