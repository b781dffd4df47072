// The element-wise family (protocol/kernels/elementwise.h) on the CUDA executor: the op-tensor
// binary kernel (arithmetic with numpy broadcasting, comparisons into bool, logical ops), the
// unary kernel, select with broadcasting, add-n in TensorFlow's order, fill, set-tensor and
// range, and the family's registration (cast lives in elementwise_cast_kernels.cu). The launch
// layer (launch/elementwise_launch.h) reads and validates every launch on the host, as for the
// CPU executor, before anything is enqueued; each kernel then runs one grid-stride kernel on the
// launch's stream; the op is a runtime switch inside the kernel (uniform across a warp).
//
// Semantics follow the CPU executor: integer division truncates (Div) or floors (FloorDiv,
// FloorMod: the remainder takes the divisor's sign), INT_MIN / -1 wraps, integer arithmetic
// wraps, integer powers square repeatedly; float16/bfloat16 compute in float rounded per
// operation (device_types.cuh); the integer arithmetic is launch/integer_arithmetic.h's, as on
// the CPU. The math functions are CUDA's (erf, erfc, expm1, log1p, trigonometric and
// hyperbolic), within about 1 ulp of glibc's used by the CPU executor. The op/dtype sets served
// are the launch layer's, the CPU's (kSigmoidGrad, kTanhGrad, kRelu6Grad as binary ops are
// refused by the reader).
//
// The one synchronous path: integer Div/FloorDiv/FloorMod must fail with InvalidArgument
// when a divisor is 0, which only the device can see (integer Pow with a negative exponent does
// not fail: it gives TensorFlow's CUDA kernel's 0 / +-1, as the CPU executor does). Their kernel
// raises a device flag; the host copies it back (cudaMemcpyAsync + cudaStreamSynchronize on the
// launch's stream) and turns it into the CPU kernel's error. Only those integer ops wait.
//
// GPU run must confirm: every op/dtype against the CPU executor (float32 rtol 1e-3, integers
// exact: floor div/mod of negative operands, wrap of INT_MIN / -1, integer pow), the
// division-by-zero error (and that the stream stays usable after it), negative powers,
// broadcasting of every rank pattern, aliasing of out with an input, bool inputs holding bytes
// other than 0/1, add-n of 2..40 inputs bit-exact with the CPU, range bit-exact (no FMA).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/device_types.cuh"
#include "plugin/backend/launch/dtype_sets.h"
#include "plugin/backend/launch/element_conversions.h"
#include "plugin/backend/launch/elementwise_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/elementwise.h"

namespace vgpu::cuda {

// elementwise::kCast (elementwise_cast_kernels.cu).
absl::Status CudaElementwiseCast(const CudaKernelContext& context);

namespace {

using namespace kernels;  // NOLINT: the family's own helper namespace
using elementwise_launch::BinaryKind;
using elementwise_launch::UnaryKind;

absl::Status CudaCallStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error));
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

// Integer ops that can fail on a value (a zero divisor).
bool IsCheckedIntegerOp(ElementwiseOp op) {
  return op == ElementwiseOp::kDiv || op == ElementwiseOp::kFloorDiv ||
         op == ElementwiseOp::kFloorMod;
}

// --- Binary arithmetic ------------------------------------------------------------------------

template <typename C>
__device__ C MaxPropagateNaN(C a, C b) {
  if (dmath::IsNan(a)) return a;
  if (dmath::IsNan(b)) return b;
  return a < b ? b : a;
}
template <typename C>
__device__ C MinPropagateNaN(C a, C b) {
  if (dmath::IsNan(a)) return a;
  if (dmath::IsNan(b)) return b;
  return b < a ? b : a;
}

// Integer ops (launch/integer_arithmetic.h); *zero_divisor = true on a zero divisor (the
// result is then 0).
template <typename T>
__device__ T IntegerArithmetic(ElementwiseOp op, T a, T b, bool* zero_divisor) {
  switch (op) {
    case ElementwiseOp::kAdd: return WrapAdd(a, b);
    case ElementwiseOp::kSub: return WrapSub(a, b);
    case ElementwiseOp::kMul: return WrapMul(a, b);
    case ElementwiseOp::kMaximum: return a < b ? b : a;
    case ElementwiseOp::kMinimum: return b < a ? b : a;
    case ElementwiseOp::kSquaredDifference: {
      const T difference = WrapSub(a, b);
      return WrapMul(difference, difference);
    }
    case ElementwiseOp::kDiv: return IntegerDivide(a, b, zero_divisor);
    case ElementwiseOp::kFloorDiv: return IntegerFloorDivide(a, b, zero_divisor);
    case ElementwiseOp::kFloorMod: return IntegerFloorModulo(a, b, zero_divisor);
    case ElementwiseOp::kPow: return IntegerPower(a, b);
    default: return T(0);  // unreachable: the reader checked the op
  }
}

// Floating ops in the compute type C (float, double, Narrow).
template <typename C>
__device__ C FloatingArithmetic(ElementwiseOp op, C a, C b) {
  const C zero(0);
  switch (op) {
    case ElementwiseOp::kAdd: return a + b;
    case ElementwiseOp::kSub: return a - b;
    case ElementwiseOp::kMul: return a * b;
    case ElementwiseOp::kDiv: return a / b;
    case ElementwiseOp::kMaximum: return MaxPropagateNaN(a, b);
    case ElementwiseOp::kMinimum: return MinPropagateNaN(a, b);
    case ElementwiseOp::kSquaredDifference: {
      const C difference = a - b;
      return difference * difference;
    }
    case ElementwiseOp::kFloorDiv: return dmath::Floor(a / b);
    case ElementwiseOp::kFloorMod: {
      const C remainder = dmath::Fmod(a, b);
      return remainder != zero && ((b < zero) != (remainder < zero)) ? C(remainder + b)
                                                                     : remainder;
    }
    case ElementwiseOp::kPow: return dmath::Pow(a, b);
    case ElementwiseOp::kDivNoNan: return b == zero ? zero : C(a / b);
    case ElementwiseOp::kRsqrtGrad: {  // a = y, b = dy: -0.5 * dy * y^3, 0 where y * dy is 0
      const C y_dy = b == zero ? zero : C(a * b);
      return y_dy == zero ? zero : C(C(FromDouble<C>(-0.5) * C(a * a)) * y_dy);
    }
    case ElementwiseOp::kSqrtGrad:  // dy * 0.5 / y, 0 where dy is 0
      return b == zero ? zero : C(C(FromDouble<C>(0.5) / a) * b);
    case ElementwiseOp::kReciprocalGrad:  // -dy * y^2, 0 where dy is 0
      return b == zero ? zero : C(C(-a * a) * b);
    case ElementwiseOp::kAtan2: return dmath::Atan2(a, b);
    case ElementwiseOp::kXlogy: return a == zero ? zero : C(a * dmath::Log(b));
    case ElementwiseOp::kXlog1py: return a == zero ? zero : C(a * dmath::Log1p(b));
    case ElementwiseOp::kXdivy: return a == zero ? zero : C(a / b);
    default: return zero;  // unreachable: the reader checked the op
  }
}

template <typename T>
__global__ void ArithmeticKernel(ElementwiseOp op, BroadcastLayout<2> layout, const Storage<T>* a,
                                 const Storage<T>* b, Storage<T>* out, unsigned* error) {
  bool zero_divisor = false;
  for (int64_t i = GridStart(); i < layout.output_count; i += GridStride()) {
    int64_t offsets[2];
    layout.Offsets(i, offsets);
    const Compute<T> x = Load<T>(a, offsets[0]);
    const Compute<T> y = Load<T>(b, offsets[1]);
    if constexpr (kIsInteger<T>) {
      Store<T>(out, i, IntegerArithmetic<T>(op, x, y, &zero_divisor));
    } else {
      Store<T>(out, i, FloatingArithmetic<Compute<T>>(op, x, y));
    }
  }
  if (zero_divisor && error != nullptr) *error = 1;  // racing writers all write 1
}

// Runs a kernel that may raise *error, waits for it, and returns `message` as InvalidArgument
// when it did. Synchronous by necessity (see the file comment): one 4-byte device flag,
// allocated stream-ordered, copied back, the stream synchronised, the flag freed.
template <typename Enqueue>
absl::Status RunWithErrorFlag(const CudaKernelContext& context, const char* name,
                              const char* message, Enqueue&& enqueue) {
  const cudaStream_t stream = context.device->stream;
  unsigned* flag = nullptr;
  VGPU_RETURN_IF_ERROR(CudaCallStatus(
      cudaMallocAsync(reinterpret_cast<void**>(&flag), sizeof(unsigned), stream), name));
  unsigned raised = 0;
  auto body = [&]() -> absl::Status {
    VGPU_RETURN_IF_ERROR(CudaCallStatus(cudaMemsetAsync(flag, 0, sizeof(unsigned), stream), name));
    VGPU_RETURN_IF_ERROR(enqueue(flag));
    VGPU_RETURN_IF_ERROR(CudaCallStatus(
        cudaMemcpyAsync(&raised, flag, sizeof(unsigned), cudaMemcpyDeviceToHost, stream), name));
    return CudaCallStatus(cudaStreamSynchronize(stream), name);
  };
  absl::Status status = body();
  // Freed in stream order even after a failure (the flag is not touched by later work).
  status.Update(CudaCallStatus(cudaFreeAsync(flag, stream), name));
  VGPU_RETURN_IF_ERROR(status);
  if (raised != 0) return absl::InvalidArgumentError(message);
  return absl::OkStatus();
}

using elementwise_launch::kIntegerDivisionByZero;

template <typename T>
absl::Status RunArithmetic(const CudaKernelContext& context, ElementwiseOp op,
                           const BroadcastLayout<2>& layout) {
  VGPU_ASSIGN_OR_RETURN(const Storage<T>* a,
                        ConstDeviceBuffer<T>(context, 0, layout.input_counts[0]));
  VGPU_ASSIGN_OR_RETURN(const Storage<T>* b,
                        ConstDeviceBuffer<T>(context, 1, layout.input_counts[1]));
  VGPU_ASSIGN_OR_RETURN(Storage<T>* out, DeviceBuffer<T>(context, 2, layout.output_count));
  if (layout.output_count == 0) return absl::OkStatus();
  constexpr char kName[] = "elementwise_binary";
  if constexpr (kIsInteger<T>) {
    if (IsCheckedIntegerOp(op)) {
      return RunWithErrorFlag(context, kName, kIntegerDivisionByZero, [&](unsigned* flag) {
        return LaunchGrid(context, kName, layout.output_count, ArithmeticKernel<T>, op, layout,
                          a, b, out, flag);
      });
    }
  }
  return LaunchGrid(context, kName, layout.output_count, ArithmeticKernel<T>, op, layout, a, b, out,
                    static_cast<unsigned*>(nullptr));
}

// --- Comparisons and logical ops ----------------------------------------------------------------

template <typename T>
__global__ void PredicateKernel(ElementwiseOp op, BroadcastLayout<2> layout, const Storage<T>* a,
                                const Storage<T>* b, uint8_t* out) {
  for (int64_t i = GridStart(); i < layout.output_count; i += GridStride()) {
    int64_t offsets[2];
    layout.Offsets(i, offsets);
    const Compute<T> x = Load<T>(a, offsets[0]);
    const Compute<T> y = Load<T>(b, offsets[1]);
    bool result = false;
    switch (op) {
      case ElementwiseOp::kEqual: result = x == y; break;
      case ElementwiseOp::kNotEqual: result = x != y; break;
      case ElementwiseOp::kGreater: result = x > y; break;
      case ElementwiseOp::kGreaterEqual: result = x >= y; break;
      case ElementwiseOp::kLess: result = x < y; break;
      case ElementwiseOp::kLessEqual: result = x <= y; break;
      case ElementwiseOp::kLogicalAnd:
        if constexpr (std::is_same_v<T, bool>) result = x && y;
        break;
      case ElementwiseOp::kLogicalOr:
        if constexpr (std::is_same_v<T, bool>) result = x || y;
        break;
      default: break;
    }
    out[i] = result ? 1 : 0;
  }
}

template <typename T>
absl::Status RunPredicate(const CudaKernelContext& context, ElementwiseOp op,
                          const BroadcastLayout<2>& layout) {
  VGPU_ASSIGN_OR_RETURN(const Storage<T>* a,
                        ConstDeviceBuffer<T>(context, 0, layout.input_counts[0]));
  VGPU_ASSIGN_OR_RETURN(const Storage<T>* b,
                        ConstDeviceBuffer<T>(context, 1, layout.input_counts[1]));
  VGPU_ASSIGN_OR_RETURN(uint8_t* out, DeviceBuffer<bool>(context, 2, layout.output_count));
  if (layout.output_count == 0) return absl::OkStatus();
  return LaunchGrid(context, "elementwise_binary", layout.output_count, PredicateKernel<T>, op,
                    layout, a, b, out);
}

// elementwise::kBinary.
absl::Status ElementwiseBinary(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(elementwise_launch::BinaryLaunch launch,
                        elementwise_launch::ReadBinaryLaunch(context));
  switch (launch.kind) {
    case BinaryKind::kLogical: return RunPredicate<bool>(context, launch.op, launch.layout);
    case BinaryKind::kComparison:
      return Dispatch::All(launch.dtype, [&](auto zero) -> absl::Status {
        return RunPredicate<decltype(zero)>(context, launch.op, launch.layout);
      });
    case BinaryKind::kArithmetic: break;
  }
  return Dispatch::Numeric(launch.dtype, [&](auto zero) -> absl::Status {
    return RunArithmetic<decltype(zero)>(context, launch.op, launch.layout);
  });
}

// --- Unary ---------------------------------------------------------------------------------------

template <typename C>
__device__ C FloatingUnary(ElementwiseOp op, C x) {
  const C zero(0), one(1);
  switch (op) {
    case ElementwiseOp::kNeg: return -x;
    case ElementwiseOp::kAbs: return dmath::Fabs(x);
    case ElementwiseOp::kSqrt: return dmath::Sqrt(x);
    case ElementwiseOp::kRsqrt: return one / dmath::Sqrt(x);
    case ElementwiseOp::kSquare: return x * x;
    case ElementwiseOp::kExp: return dmath::Exp(x);
    case ElementwiseOp::kLog: return dmath::Log(x);
    case ElementwiseOp::kSign:  // NaN stays NaN (Eigen's sign)
      return dmath::IsNan(x) ? x : (x > zero ? one : (x < zero ? -one : zero));
    case ElementwiseOp::kReciprocal: return one / x;
    case ElementwiseOp::kFloor: return dmath::Floor(x);
    case ElementwiseOp::kCeil: return dmath::Ceil(x);
    case ElementwiseOp::kRound: return dmath::Rint(x);  // half to even
    case ElementwiseOp::kErf: return dmath::Erf(x);
    case ElementwiseOp::kErfc: return dmath::Erfc(x);
    case ElementwiseOp::kExpm1: return dmath::Expm1(x);
    case ElementwiseOp::kLog1p: return dmath::Log1p(x);
    case ElementwiseOp::kSin: return dmath::Sin(x);
    case ElementwiseOp::kCos: return dmath::Cos(x);
    case ElementwiseOp::kTan: return dmath::Tan(x);
    case ElementwiseOp::kAsin: return dmath::Asin(x);
    case ElementwiseOp::kAcos: return dmath::Acos(x);
    case ElementwiseOp::kAtan: return dmath::Atan(x);
    case ElementwiseOp::kSinh: return dmath::Sinh(x);
    case ElementwiseOp::kCosh: return dmath::Cosh(x);
    case ElementwiseOp::kAsinh: return dmath::Asinh(x);
    case ElementwiseOp::kAcosh: return dmath::Acosh(x);
    case ElementwiseOp::kAtanh: return dmath::Atanh(x);
    default: return x;  // unreachable: the reader checked the op
  }
}

template <typename T>
__device__ T IntegerUnary(ElementwiseOp op, T x) {
  switch (op) {
    case ElementwiseOp::kNeg: return WrapNegate(x);
    case ElementwiseOp::kAbs: return x < 0 ? WrapNegate(x) : x;
    case ElementwiseOp::kSquare: return WrapMul(x, x);
    case ElementwiseOp::kSign: return static_cast<T>((x > 0) - (x < 0));
    case ElementwiseOp::kRound: return x;
    default: return x;  // unreachable: the reader checked the op
  }
}

template <typename T>
__global__ void UnaryKernel(ElementwiseOp op, int64_t count, const Storage<T>* x, Storage<T>* y) {
  for (int64_t i = GridStart(); i < count; i += GridStride()) {
    if constexpr (kIsFloating<T>) {
      Store<T>(y, i, FloatingUnary<Compute<T>>(op, Load<T>(x, i)));
    } else if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
      Store<T>(y, i, IntegerUnary<T>(op, Load<T>(x, i)));
    }
  }
}

template <typename T>
__global__ void UnaryPredicateKernel(ElementwiseOp op, int64_t count, const Storage<T>* x,
                                     uint8_t* y) {
  for (int64_t i = GridStart(); i < count; i += GridStride()) {
    const Compute<T> value = Load<T>(x, i);
    bool result = false;
    switch (op) {
      case ElementwiseOp::kIsFinite: result = dmath::IsFinite(value); break;
      case ElementwiseOp::kIsNan: result = dmath::IsNan(value); break;
      case ElementwiseOp::kIsInf: result = dmath::IsInf(value); break;
      case ElementwiseOp::kSignBit: result = dmath::SignBit(value); break;
      default: break;
    }
    y[i] = result ? 1 : 0;
  }
}

__global__ void LogicalNotKernel(int64_t count, const uint8_t* x, uint8_t* y) {
  for (int64_t i = GridStart(); i < count; i += GridStride()) y[i] = x[i] != 0 ? 0 : 1;
}

// elementwise::kUnary.
absl::Status ElementwiseUnary(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(elementwise_launch::UnaryLaunch launch,
                        elementwise_launch::ReadUnaryLaunch(context));
  const int64_t count = launch.count;
  constexpr char kName[] = "elementwise_unary";
  switch (launch.kind) {
    case UnaryKind::kLogicalNot: {
      VGPU_ASSIGN_OR_RETURN(const uint8_t* x, ConstDeviceBuffer<bool>(context, 0, count));
      VGPU_ASSIGN_OR_RETURN(uint8_t* y, DeviceBuffer<bool>(context, 1, count));
      if (count == 0) return absl::OkStatus();
      return LaunchGrid(context, kName, count, LogicalNotKernel, count, x, y);
    }
    case UnaryKind::kPredicate:
      return Dispatch::Floating(launch.dtype, [&](auto zero) -> absl::Status {
        using T = decltype(zero);
        VGPU_ASSIGN_OR_RETURN(const Storage<T>* x, ConstDeviceBuffer<T>(context, 0, count));
        VGPU_ASSIGN_OR_RETURN(uint8_t* y, DeviceBuffer<bool>(context, 1, count));
        if (count == 0) return absl::OkStatus();
        return LaunchGrid(context, kName, count, UnaryPredicateKernel<T>, launch.op, count, x, y);
      });
    case UnaryKind::kMath: break;
  }
  return Dispatch::Numeric(launch.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const Storage<T>* x, ConstDeviceBuffer<T>(context, 0, count));
    VGPU_ASSIGN_OR_RETURN(Storage<T>* y, DeviceBuffer<T>(context, 1, count));
    if (count == 0) return absl::OkStatus();
    return LaunchGrid(context, kName, count, UnaryKernel<T>, launch.op, count, x, y);
  });
}

// --- Select --------------------------------------------------------------------------------------

template <typename T>
__global__ void SelectKernel(BroadcastLayout<3> layout, const uint8_t* condition,
                             const Storage<T>* then_values, const Storage<T>* else_values,
                             Storage<T>* out) {
  for (int64_t i = GridStart(); i < layout.output_count; i += GridStride()) {
    int64_t offsets[3];
    layout.Offsets(i, offsets);
    const bool take_then = condition[offsets[0]] != 0;
    if constexpr (std::is_same_v<T, bool>) {
      out[i] = (take_then ? then_values[offsets[1]] : else_values[offsets[2]]) != 0 ? 1 : 0;
    } else {
      out[i] = take_then ? then_values[offsets[1]] : else_values[offsets[2]];  // bits copied
    }
  }
}

// elementwise::kSelect.
absl::Status ElementwiseSelect(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(elementwise_launch::SelectLaunch launch,
                        elementwise_launch::ReadSelectLaunch(context));
  const BroadcastLayout<3>& layout = launch.layout;
  return Dispatch::All(launch.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const uint8_t* c,
                          ConstDeviceBuffer<bool>(context, 0, layout.input_counts[0]));
    VGPU_ASSIGN_OR_RETURN(const Storage<T>* t,
                          ConstDeviceBuffer<T>(context, 1, layout.input_counts[1]));
    VGPU_ASSIGN_OR_RETURN(const Storage<T>* e,
                          ConstDeviceBuffer<T>(context, 2, layout.input_counts[2]));
    VGPU_ASSIGN_OR_RETURN(Storage<T>* result, DeviceBuffer<T>(context, 3, layout.output_count));
    if (layout.output_count == 0) return absl::OkStatus();
    return LaunchGrid(context, "elementwise_select", layout.output_count, SelectKernel<T>, layout,
                      c, t, e, result);
  });
}

// --- Add-n ---------------------------------------------------------------------------------------

// The input pointers of one add-n launch (kernel parameters; 1 KiB).
inline constexpr int kAddNPointers = 128;
template <typename T>
struct AddNInputs {
  const Storage<T>* inputs[kAddNPointers];
};

// TensorFlow's AddN association, per element: when first_group > 0, sum = inputs[0] + ... +
// inputs[first_group - 1] left to right, else sum = out (a previous launch's partial result);
// then for each of `groups` groups of 8 inputs: sum += (8 inputs summed left to right).
template <typename T>
__global__ void AddNKernel(AddNInputs<T> inputs, int first_group, int groups, int64_t count,
                          Storage<T>* out) {
  using C = Compute<T>;
  for (int64_t i = GridStart(); i < count; i += GridStride()) {
    C sum;
    int next = 0;
    if (first_group > 0) {
      sum = Add(Load<T>(inputs.inputs[0], i), Load<T>(inputs.inputs[1], i));
      for (int k = 2; k < first_group; ++k) sum = Add(sum, Load<T>(inputs.inputs[k], i));
      next = first_group;
    } else {
      sum = Load<T>(out, i);
    }
    for (int g = 0; g < groups; ++g, next += 8) {
      C partial = Add(Load<T>(inputs.inputs[next], i), Load<T>(inputs.inputs[next + 1], i));
      for (int k = 2; k < 8; ++k) partial = Add(partial, Load<T>(inputs.inputs[next + k], i));
      sum = Add(sum, partial);
    }
    Store<T>(out, i, sum);
  }
}

template <typename T>
absl::Status RunAddN(const CudaKernelContext& context,
                     const elementwise_launch::AddNLaunch& launch) {
  const size_t n = launch.inputs;
  const int64_t count = launch.count;
  std::vector<const Storage<T>*> inputs(n);
  for (size_t i = 0; i < n; ++i) {
    VGPU_ASSIGN_OR_RETURN(inputs[i], ConstDeviceBuffer<T>(context, i, count));
  }
  VGPU_ASSIGN_OR_RETURN(Storage<T>* out, DeviceBuffer<T>(context, n, count));
  if (count == 0) return absl::OkStatus();
  const size_t first_group = launch.first_group;
  // Launch 1: the first group and as many groups of 8 as fit; later launches continue from out
  // (each element's chain of additions stays in the same order, launches are stream-ordered).
  size_t next = 0;
  bool first_launch = true;
  while (next < n) {
    AddNInputs<T> launch_inputs = {};
    const size_t head = first_launch ? first_group : 0;
    const size_t groups = std::min((n - next - head) / 8, (kAddNPointers - head) / 8);
    const size_t used = head + 8 * groups;
    for (size_t k = 0; k < used; ++k) launch_inputs.inputs[k] = inputs[next + k];
    VGPU_RETURN_IF_ERROR(LaunchGrid(context, "elementwise_add_n", count, AddNKernel<T>,
                                    launch_inputs, static_cast<int>(head),
                                    static_cast<int>(groups), count, out));
    next += used;
    first_launch = false;
  }
  return absl::OkStatus();
}

// elementwise::kAddN.
absl::Status ElementwiseAddN(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(elementwise_launch::AddNLaunch launch,
                        elementwise_launch::ReadAddNLaunch(context));
  return Dispatch::Numeric(launch.dtype, [&](auto zero) -> absl::Status {
    return RunAddN<decltype(zero)>(context, launch);
  });
}

// --- Fill, set-tensor, range ---------------------------------------------------------------------

template <typename T>
__global__ void FillFromDeviceKernel(const Storage<T>* value, int64_t count, Storage<T>* out) {
  for (int64_t i = GridStart(); i < count; i += GridStride()) {
    if constexpr (std::is_same_v<T, bool>) {
      out[i] = value[0] != 0 ? 1 : 0;
    } else {
      out[i] = value[0];
    }
  }
}

template <typename S>
__global__ void FillWithKernel(S value, int64_t count, S* out) {
  for (int64_t i = GridStart(); i < count; i += GridStride()) out[i] = value;
}

// elementwise::kFill.
absl::Status ElementwiseFill(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(elementwise_launch::FillLaunch launch,
                        elementwise_launch::ReadFillLaunch(context));
  const int64_t count = launch.count;
  return Dispatch::All(launch.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const Storage<T>* value, ConstDeviceBuffer<T>(context, 0, 1));
    VGPU_ASSIGN_OR_RETURN(Storage<T>* out, DeviceBuffer<T>(context, 1, count));
    if (count == 0) return absl::OkStatus();
    return LaunchGrid(context, "elementwise_fill", count, FillFromDeviceKernel<T>, value, count,
                      out);
  });
}

// The stored bits of `value` converted to T as the CPU kernel converts it (FromDouble there):
// integers saturate (NaN -> 0), the 16-bit floats round via float, bool is value != 0.
template <typename T>
Storage<T> StorageFromDouble(double value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value != 0 ? 1 : 0;
  } else if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(static_cast<float>(value));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(value));
  } else if constexpr (std::is_integral_v<T>) {
    return SaturatingInteger<T>(value);  // launch/element_conversions.h
  } else {
    return static_cast<T>(value);
  }
}

// elementwise::kSetTensor.
absl::Status ElementwiseSetTensor(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(elementwise_launch::SetTensorLaunch launch,
                        elementwise_launch::ReadSetTensorLaunch(context));
  const int64_t count = launch.count;
  return Dispatch::All(launch.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(Storage<T>* out, DeviceBuffer<T>(context, 0, count));
    if (count == 0) return absl::OkStatus();
    return LaunchGrid(context, "elementwise_set_tensor", count, FillWithKernel<Storage<T>>,
                      StorageFromDouble<T>(launch.value), count, out);
  });
}

// out[i] = start + T(i) * delta in T, the product rounded before the sum (no FMA), as the CPU
// kernel (compiled with fp-contract=off) computes it; integers wrap.
template <typename T>
__global__ void RangeKernel(Storage<T> start_bits, Storage<T> delta_bits, int64_t count,
                            Storage<T>* out) {
  using C = Compute<T>;
  const C start = Load<T>(&start_bits, 0);
  const C delta = Load<T>(&delta_bits, 0);
  for (int64_t i = GridStart(); i < count; i += GridStride()) {
    C index;
    if constexpr (kIsNarrowFloat<T>) {
      index = C(i);  // Eigen's half(int64): via float, rounded
    } else {
      index = static_cast<C>(i);
    }
    Store<T>(out, i, Add(start, Multiply(index, delta)));
  }
}

// elementwise::kRange.
absl::Status ElementwiseRange(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(elementwise_launch::RangeLaunch launch,
                        elementwise_launch::ReadRangeLaunch(context));
  const int64_t count = launch.count;
  return DispatchSigned<Dispatch>(launch.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    Storage<T> start_value, delta_value;
    // The low DTypeSize bytes of each parameter (little endian).
    std::memcpy(static_cast<void*>(&start_value), &launch.start_bits, sizeof(T));
    std::memcpy(static_cast<void*>(&delta_value), &launch.delta_bits, sizeof(T));
    VGPU_ASSIGN_OR_RETURN(Storage<T>* out, DeviceBuffer<T>(context, 0, count));
    if (count == 0) return absl::OkStatus();
    return LaunchGrid(context, "elementwise_range", count, RangeKernel<T>, start_value,
                      delta_value, count, out);
  });
}

}  // namespace

void AddCudaElementwiseKernels(CudaKernelTable& table) {
  table.AddFamily(kernel_families::kElementwise, ElementwiseBinary, ElementwiseUnary,
                  ElementwiseSelect, CudaElementwiseCast, ElementwiseAddN, ElementwiseFill,
                  ElementwiseSetTensor, ElementwiseRange);
}

}  // namespace vgpu::cuda
