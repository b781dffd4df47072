// The activation family (protocol/kernels/activation.h) on the CPU backing executor, vectorised
// and multi-threaded with Eigen's tensor module on the executor's thread pool. Each mode is the
// Eigen expression TensorFlow's CPU kernel evaluates (relu_op_functor.h, softplus_op.h,
// softsign_op.h), so results round as TensorFlow's do (the ReLU family's 16-bit kernels compute
// in float32 and round once, which gives the same values). The launch layer
// (launch/activation_launch.h) reads and validates every launch; these only compute.
#include "plugin/backend/cpu/kernel_registry.h"

#define EIGEN_USE_THREADS
#include <array>
#include <cstring>
#include <type_traits>

#include "absl/status/statusor.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/elementwise_broadcast.h"
#include "plugin/backend/cpu/kernels/float_staging.h"
#include "plugin/backend/launch/activation_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/protocol/kernels/activation.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

// The identity, as an Eigen functor whose result is a plain T: applied to an operand of
// `const T` (an input's map), it gives an expression of T (see PacketSelect).
template <typename T>
struct AsPlainScalar {
  T operator()(const T& x) const { return x; }
  template <typename Packet>
  Packet packetOp(const Packet& x) const {
    return x;
  }
};

}  // namespace
}  // namespace vgpu::cpu_kernels

template <typename T>
struct Eigen::internal::functor_traits<vgpu::cpu_kernels::AsPlainScalar<T>> {
  enum { Cost = 0, PacketAccess = true };
};

namespace vgpu::cpu_kernels {
namespace {

using activation_launch::ActivationLaunch;
using activation_launch::ReadActivationBackward;
using activation_launch::ReadActivationForward;
using activation_launch::kSeluScale;
using activation_launch::kSeluScaleAlpha;

// The leaky relu's alpha as TensorFlow's kernel holds it: the float attribute cast to T.
template <typename T>
T Coefficient(const ActivationLaunch& launch) {
  return T(launch.LeakyAlpha());
}

// Below this x, softplus(x) == exp(x) within epsilon; above -threshold, softplus(x) == x.
template <typename T>
T SoftplusThreshold() {
  return Eigen::numext::log(Eigen::NumTraits<T>::epsilon()) + T(2);
}

// Whether T's Relu and Relu6 take Eigen's plain max, then add 0: for float and double the packet
// max and the scalar max agree lane for lane (both keep x where x is NaN or a zero), and adding
// 0 turns -0 into TensorFlow-CPU's +0 and leaves every other value, NaNs included, as it is.
// The NaN-propagating max, needed for the 16-bit types, took 5.5x as long on the AVX build
// (5.4 ms against 1.0 ms for a Relu over mobilenetv2's 64x48x48x96 activations).
template <typename T>
inline constexpr bool kFastMax = std::is_same_v<T, float> || std::is_same_v<T, double>;

// The ReLU family's 16-bit kernels, in float32 run by run (float_staging.h's
// TransformThroughFloat). Each result is one exact float32 operation on 16-bit values (a
// selection, or a product of two 16-bit numbers, exact in float32) rounded once to T: the value
// Eigen's evaluation in T gives, in vector code (Eigen's bfloat16 max and select run ~4x as
// long). A NaN stays the NaN it was and -0 stays -0, as TensorFlow-CPU's 16-bit ReLU keeps them
// (its float32 ReLU gives +0). The loops below, one per mode, are written for the vectoriser:
// each stores a selection of values computed on both sides, which GCC vectorises only when it
// may compute the product a lane does not take (no-trapping-math: no FP exception is ever
// observed here, and no value changes).
#define VGPU_VECTORISE \
  __attribute__((optimize("vect-cost-model=dynamic", "no-trapping-math")))

VGPU_VECTORISE void ReluRun(float* __restrict v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = v[i] < 0.0f ? 0.0f : v[i];
}
VGPU_VECTORISE void Relu6Run(float* __restrict v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = v[i] < 0.0f ? 0.0f : v[i] > 6.0f ? 6.0f : v[i];
}
VGPU_VECTORISE void LeakyReluRun(float* __restrict v, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) v[i] = v[i] > 0.0f ? v[i] : v[i] * alpha;
}
// g: the gradients (rewritten), f: the features.
VGPU_VECTORISE void ReluGradRun(float* __restrict g, const float* __restrict f, int64_t n) {
  for (int64_t i = 0; i < n; ++i) g[i] = f[i] > 0.0f ? g[i] : g[i] * 0.0f;
}
VGPU_VECTORISE void Relu6GradRun(float* __restrict g, const float* __restrict f, int64_t n) {
  for (int64_t i = 0; i < n; ++i) g[i] = f[i] > 0.0f && f[i] < 6.0f ? g[i] : g[i] * 0.0f;
}
VGPU_VECTORISE void LeakyReluGradRun(float* __restrict g, const float* __restrict f, int64_t n,
                                     float alpha) {
  for (int64_t i = 0; i < n; ++i) g[i] = f[i] > 0.0f ? g[i] : g[i] * alpha;
}
#undef VGPU_VECTORISE

// ReLU, ReLU6 and leaky ReLU: the modes whose 16-bit kernels compute through float32.
bool IsReluFamily(ActivationMode mode) {
  return mode == ActivationMode::kRelu || mode == ActivationMode::kRelu6 ||
         mode == ActivationMode::kLeakyRelu;
}

// The 16-bit forward pass of the ReLU family through float32; false for the other modes (Eigen
// computes them in T, with T's roundings between their steps).
template <typename T>
bool ReluFamilyForwardThroughFloat(const Eigen::ThreadPoolDevice& device,
                                   const ActivationLaunch& launch, const T* x, T* y, int64_t n) {
  const ActivationMode mode = launch.activation.mode;
  if (!IsReluFamily(mode)) return false;
  const float alpha = static_cast<float>(Coefficient<T>(launch));
  TransformThroughFloat<T, 1>(device, {x}, y, n, 1,
                              [&](const std::array<float*, 1>& v, int64_t, int64_t count) {
    if (mode == ActivationMode::kRelu) {
      ReluRun(v[0], count);
    } else if (mode == ActivationMode::kRelu6) {
      Relu6Run(v[0], count);
    } else {
      LeakyReluRun(v[0], count, alpha);
    }
  });
  return true;
}

// The 16-bit backward pass of the ReLU family through float32 (a = gradients, b = features);
// false for the other modes.
template <typename T>
bool ReluFamilyBackwardThroughFloat(const Eigen::ThreadPoolDevice& device,
                                    const ActivationLaunch& launch, const T* a, const T* b,
                                    T* out, int64_t n) {
  const ActivationMode mode = launch.activation.mode;
  if (!IsReluFamily(mode)) return false;
  const float alpha = static_cast<float>(Coefficient<T>(launch));
  TransformThroughFloat<T, 2>(device, {a, b}, out, n, 1,
                              [&](const std::array<float*, 2>& v, int64_t, int64_t count) {
    if (mode == ActivationMode::kRelu) {
      ReluGradRun(v[0], v[1], count);
    } else if (mode == ActivationMode::kRelu6) {
      Relu6GradRun(v[0], v[1], count);
    } else {
      LeakyReluGradRun(v[0], v[1], count, alpha);
    }
  });
  return true;
}

// 1 where `x <cmp> bound` holds, else 0, as T: Eigen's typed comparison, evaluated a packet at a
// time. (A comparison's bool cast to T, as TensorFlow's kernels write the relu gradients, is
// evaluated element by element with a branch each: 5x slower on unpredictable features, the
// largest item of issue 28's per-op account of mobilenetv2.) The products with it are the same
// to the bit: gradient * 1 or gradient * 0.
template <Eigen::internal::ComparisonName kCmp, typename T>
auto Indicator(ConstFlatMap<T> x, T bound) {
  return x.binaryExpr(x.constant(bound), Eigen::internal::scalar_cmp_op<T, T, kCmp, true>());
}

// `condition ? then_value : else_value`, element-wise, a packet at a time. Eigen's select is
// vectorised only when its condition and both branches have exactly one scalar type T: a bool
// condition, or an operand of `const T` (an input's map), makes it gather the condition lane by
// lane with a branch each, which ran the ELU family, leaky ReLU and softplus 5-7x slower than
// TensorFlow-CPU's kernels. `condition` is an Indicator; AsPlainScalar gives every operand the
// type T. The result refers to its operands: evaluate it in the statement that builds it.
template <typename T, typename Condition, typename Then, typename Else>
auto PacketSelect(const Condition& condition, const Then& then_value, const Else& else_value) {
  const auto plain = [](const auto& operand) { return operand.unaryExpr(AsPlainScalar<T>()); };
  auto selected = plain(condition).select(plain(then_value), plain(else_value));
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    static_assert(Eigen::TensorEvaluator<const decltype(selected),
                                         Eigen::ThreadPoolDevice>::TernaryPacketAccess,
                  "a select that Eigen would evaluate lane by lane");
  }
  return selected;
}

template <typename T>
absl::Status Forward(const Eigen::ThreadPoolDevice& device, const ActivationLaunch& launch,
                     ConstFlatMap<T> x, FlatMap<T> y) {
  const T zero(0), one(1);
  switch (launch.activation.mode) {
    case ActivationMode::kRelu:
      if constexpr (kFastMax<T>) {
        y.device(device) = x.cwiseMax(zero) + x.constant(zero);
      } else {
        y.device(device) = x.template cwiseMax<Eigen::PropagateNaN>(zero);
      }
      break;
    case ActivationMode::kRelu6:
      if constexpr (kFastMax<T>) {
        y.device(device) = x.cwiseMax(zero).cwiseMin(T(6)) + x.constant(zero);
      } else if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
        // bfloat16's packets round-trip through float, and a NaN's sign follows
        // TensorFlow-CPU's only with both NaN-propagating.
        y.device(device) = x.template cwiseMax<Eigen::PropagateNaN>(zero)
                               .template cwiseMin<Eigen::PropagateNaN>(T(6));
      } else {
        // The min needs no NaN handling of its own (6 is neither NaN nor a signed zero, and a
        // NaN first operand is returned as is).
        y.device(device) = x.template cwiseMax<Eigen::PropagateNaN>(zero).cwiseMin(T(6));
      }
      break;
    case ActivationMode::kSigmoid: y.device(device) = x.sigmoid(); break;
    case ActivationMode::kTanh: y.device(device) = x.tanh(); break;
    case ActivationMode::kElu:
      y.device(device) = PacketSelect<T>(Indicator<Eigen::internal::cmp_LT>(x, zero),
                                         x.exp() - x.constant(one), x);
      break;
    case ActivationMode::kSelu:
      y.device(device) = PacketSelect<T>(
          Indicator<Eigen::internal::cmp_LT>(x, zero),
          x.constant(T(kSeluScaleAlpha)) * (x.exp() - x.constant(one)),
          x.constant(T(kSeluScale)) * x);
      break;
    case ActivationMode::kSoftplus: {
      static const T threshold = SoftplusThreshold<T>();
      const auto exp_x = x.exp();
      y.device(device) = PacketSelect<T>(
          Indicator<Eigen::internal::cmp_GT>(x, T(-threshold)), x,
          PacketSelect<T>(Indicator<Eigen::internal::cmp_LT>(x, threshold), exp_x, exp_x.log1p()));
      break;
    }
    case ActivationMode::kSoftsign:
      y.device(device) = x / (x.abs() + x.constant(one));
      break;
    case ActivationMode::kLeakyRelu:
      y.device(device) = PacketSelect<T>(Indicator<Eigen::internal::cmp_GT>(x, zero), x,
                                         x * Coefficient<T>(launch));
      break;
    default: return activation_launch::UnknownActivationMode(launch.activation.mode);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Backward(const Eigen::ThreadPoolDevice& device, const ActivationLaunch& launch,
                      ConstFlatMap<T> a, ConstFlatMap<T> b, FlatMap<T> out) {
  const T zero(0), one(1);
  switch (launch.activation.mode) {
    case ActivationMode::kRelu:  // a = gradients, b = features
      out.device(device) = a * Indicator<Eigen::internal::cmp_GT>(b, zero);
      break;
    case ActivationMode::kRelu6:
      out.device(device) = a * (Indicator<Eigen::internal::cmp_GT>(b, zero) *
                                Indicator<Eigen::internal::cmp_LT>(b, T(6)));
      break;
    case ActivationMode::kLeakyRelu:
      out.device(device) = PacketSelect<T>(Indicator<Eigen::internal::cmp_GT>(b, zero), a,
                                           a * Coefficient<T>(launch));
      break;
    case ActivationMode::kSigmoid:  // a = y, b = dy
      out.device(device) = b * a * (one - a);
      break;
    case ActivationMode::kTanh:
      out.device(device) = b * (one - a * a);
      break;
    case ActivationMode::kElu:  // a = gradients, b = outputs
      out.device(device) =
          PacketSelect<T>(Indicator<Eigen::internal::cmp_LT>(b, zero), (b + one) * a, a);
      break;
    case ActivationMode::kSelu:
      out.device(device) = PacketSelect<T>(Indicator<Eigen::internal::cmp_LT>(b, zero),
                                           a * (b + b.constant(T(kSeluScaleAlpha))),
                                           a * a.constant(T(kSeluScale)));
      break;
    case ActivationMode::kSoftplus:  // a = gradients, b = features
      out.device(device) = a / ((-b).exp() + b.constant(one));
      break;
    case ActivationMode::kSoftsign:
      out.device(device) = a / (b.abs() + b.constant(one)).square();
      break;
    default: return activation_launch::UnknownActivationMode(launch.activation.mode);
  }
  return absl::OkStatus();
}

// activation::kForward: y = f(x).
struct ActivationForward : FloatingKernel<ActivationForward, ReadActivationForward> {
  template <typename T>
  static absl::Status Run(const KernelContext& context, const ActivationLaunch& launch) {
    VGPU_ASSIGN_OR_RETURN(auto x_y, (TakeElementwiseBuffers<T, 1>(context, launch.count)));
    if (launch.count == 0) return absl::OkStatus();
    if constexpr (kIsFloat16Bit<T>) {
      if (ReluFamilyForwardThroughFloat(*context.device, launch, x_y.in[0], x_y.out,
                                        launch.count)) {
        return absl::OkStatus();
      }
    }
    return Forward<T>(*context.device, launch, ConstFlatMap<T>(x_y.in[0], launch.count),
                      FlatMap<T>(x_y.out, launch.count));
  }
};

// activation::kBackward (see protocol/kernels/activation.h for the buffer order [a, b, out]).
struct ActivationBackward : FloatingKernel<ActivationBackward, ReadActivationBackward> {
  template <typename T>
  static absl::Status Run(const KernelContext& context, const ActivationLaunch& launch) {
    VGPU_ASSIGN_OR_RETURN(auto a_b_out, (TakeElementwiseBuffers<T, 2>(context, launch.count)));
    if (launch.count == 0) return absl::OkStatus();
    const int64_t n = launch.count;
    const auto& [a, b] = a_b_out.in;
    if constexpr (kIsFloat16Bit<T>) {
      if (ReluFamilyBackwardThroughFloat(*context.device, launch, a, b, a_b_out.out, n)) {
        return absl::OkStatus();
      }
    }
    return Backward<T>(*context.device, launch, ConstFlatMap<T>(a, n), ConstFlatMap<T>(b, n),
                       FlatMap<T>(a_b_out.out, n));
  }
};

// activation::kReluInt8: y = max(x, 0) over signed bytes.
absl::Status ReluInt8(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const int64_t count, activation_launch::ReadReluInt8Launch(context));
  VGPU_ASSIGN_OR_RETURN(const int8_t* x, context.Buffer<const int8_t>(0, count));
  VGPU_ASSIGN_OR_RETURN(int8_t* y, context.Buffer<int8_t>(1, count));
  if (count == 0) return absl::OkStatus();
  FlatMap<int8_t>(y, count).device(*context.device) =
      ConstFlatMap<int8_t>(x, count).cwiseMax(int8_t{0});
  return absl::OkStatus();
}

}  // namespace

void AddActivationKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kActivation, ActivationForward::Launch,
                  ActivationBackward::Launch, ReluInt8);
}

}  // namespace vgpu::cpu_kernels
