// TensorFlow op kernels that check or summarise a tensor's values on the virtual GPU:
//   L2Loss(t) = sum(t * t) / 2 (tf.nn.l2_loss; tf.clip_by_global_norm and tf.linalg.global_norm
//   colocate one with each tensor they are given, so a tensor on GPU:0 needs it here), and
//   CheckNumerics(tensor, message) (tf.debugging.check_numerics and assert_all_finite, also
//   colocated with the tensor checked).
// Both are compositions of the element-wise and reduction kernels the executors already have:
// nothing new crosses to a backing executor.
#include "plugin/kernels/numerics_ops.h"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/strings/str_cat.h"
#include "plugin/kernels/elementwise_launch.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/protocol/kernels/reduction.h"

namespace vgpu {
namespace {

constexpr std::initializer_list<TF_DataType> kFloatingTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                               TF_DOUBLE};

// out[0] = op over the `count` elements of x.
absl::Status LaunchReduceAll(OpContext& context, ReduceOp op, TF_DataType dtype, int64_t count,
                             const TF_Tensor* x, const TF_Tensor* out) {
  ReduceDescriptorSettings settings;
  settings.op = op;
  VGPU_ASSIGN_OR_RETURN(settings.dtype, DTypeOf(dtype));
  reduction::ReduceLayoutParams layout;
  layout.reduce_first_axis = 1;
  const std::array<int64_t, 1> runs = {count};
  return KernelLaunch(context)
      .Describe(settings)
      .DescribeTensor(dtype, runs)
      .DescribeTensor(dtype, absl::Span<const int64_t>())
      .Buffer(x)
      .Buffer(out)
      .Param(layout)
      .Run(reduction::kReduce);
}

// L2Loss(t): as TensorFlow's kernel, each square halved, then summed (halving is exact, so
// this is the sum of the squares halved); 0 for an empty tensor.
class L2LossOp : public NoAttributes<L2LossOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.AllocateOutput(0, dtype, {}));
    const int64_t count = TF_TensorElementCount(x.get());
    if (count == 0) return LaunchSetTensor(KernelLaunch(context), out.get(), 0.0);
    VGPU_ASSIGN_OR_RETURN(TensorPtr half, context.AllocateTemp(dtype, {}));
    VGPU_ASSIGN_OR_RETURN(TensorPtr squares, context.AllocateTemp(dtype, {count}));
    VGPU_RETURN_IF_ERROR(LaunchSetTensor(KernelLaunch(context), half.get(), 0.5));
    VGPU_RETURN_IF_ERROR(
        LaunchUnary(context, ElementwiseOp::kSquare, dtype, count, x.get(), squares.get()));
    const std::array<int64_t, 1> flat = {count};
    const std::array<int64_t, 1> one = {1};
    VGPU_RETURN_IF_ERROR(LaunchBinary(context, ElementwiseOp::kMul, dtype, flat, one, dtype, flat,
                                      squares.get(), half.get(), squares.get()));
    return LaunchReduceAll(context, ReduceOp::kSum, dtype, count, squares.get(), out.get());
  }
};

absl::StatusOr<std::string> ReadMessage(OpConstruction& construction) {
  return construction.String("message");
}

// CheckNumerics(tensor, message): the tensor itself, or InvalidArgument "<message> : Tensor had
// NaN values" (Inf, Inf and NaN), TensorFlow's words. Two flags (any NaN, any infinity) are
// computed on the device and read back: one synchronisation per call, as TensorFlow's GPU
// kernel copies its flags to the host too.
class CheckNumericsOp : public WithAttributes<CheckNumericsOp, std::string, ReadMessage> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    const TF_DataType dtype = TF_TensorType(x.get());
    const int64_t count = TF_TensorElementCount(x.get());
    if (count > 0) {
      VGPU_ASSIGN_OR_RETURN(TensorPtr flags, context.AllocateTemp(TF_BOOL, {count}));
      VGPU_ASSIGN_OR_RETURN(TensorPtr nan_found, context.AllocateTemp(TF_BOOL, {}));
      VGPU_ASSIGN_OR_RETURN(TensorPtr inf_found, context.AllocateTemp(TF_BOOL, {}));
      VGPU_RETURN_IF_ERROR(
          LaunchUnary(context, ElementwiseOp::kIsNan, dtype, count, x.get(), flags.get()));
      VGPU_RETURN_IF_ERROR(LaunchReduceAll(context, ReduceOp::kAny, TF_BOOL, count, flags.get(),
                                           nan_found.get()));
      VGPU_RETURN_IF_ERROR(
          LaunchUnary(context, ElementwiseOp::kIsInf, dtype, count, x.get(), flags.get()));
      VGPU_RETURN_IF_ERROR(LaunchReduceAll(context, ReduceOp::kAny, TF_BOOL, count, flags.get(),
                                           inf_found.get()));
      VGPU_ASSIGN_OR_RETURN(ClientStream * stream, context.Stream());
      bool nan = false, inf = false;
      VGPU_RETURN_IF_ERROR(stream->device().CopyDeviceToHost(
          *stream, &nan, BufferOf(nan_found.get()).address, sizeof(nan)));
      VGPU_RETURN_IF_ERROR(stream->device().CopyDeviceToHost(
          *stream, &inf, BufferOf(inf_found.get()).address, sizeof(inf)));
      VGPU_RETURN_IF_ERROR(stream->device().SynchronizeStream(*stream));
      if (nan || inf) {
        return absl::InvalidArgumentError(
            absl::StrCat(attributes_, " : Tensor had ",
                         nan && inf ? "Inf and NaN" : (inf ? "Inf" : "NaN"), " values"));
      }
    }
    return context.SetOutput(0, x.get());
  }
};

}  // namespace

void RegisterNumericsOps(const char* device_type) {
  RegisterKernelForTypes<L2LossOp>("L2Loss", device_type, "T", kFloatingTypes);
  DocumentOp("L2Loss", "",
             "Squares halved and summed (three launches and a fill); the sum's order is the "
             "reduction kernel's, so results match the CPU's to rounding.");
  RegisterKernelForTypes<CheckNumericsOp>("CheckNumerics", device_type, "T", kFloatingTypes);
  DocumentOp("CheckNumerics", "",
             "Outputs its input; NaN or Inf is InvalidArgument with TensorFlow's message. The "
             "verdict is read back: one synchronisation per call.");
}

}  // namespace vgpu
