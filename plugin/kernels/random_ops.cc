// TensorFlow op kernels of the random family on the virtual GPU: StatelessRandomUniformV2, the
// op behind tf.random.stateless_uniform and Keras' dropout. Its shape, key, counter and alg
// inputs are host memory (validated and read here, as TensorFlow's kernel does); the numbers
// themselves are generated on the device by random::kUniform (Philox, TensorFlow's exact
// bits). StatelessRandomGetKeyCounter, which derives key and counter from a seed, has no
// virtual GPU kernel: TensorFlow places it on the CPU, whose host outputs feed this op's
// host-memory inputs without a copy.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/random.h"

namespace vgpu {
namespace {

constexpr int kAlgPhilox = 1;      // TensorFlow's RNG_ALG_PHILOX
constexpr int kAlgAutoSelect = 3;  // RNG_ALG_AUTO_SELECT: Philox on this device

std::string ShapeString(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

class StatelessRandomUniformV2Op : public NoAttributes<StatelessRandomUniformV2Op> {
 public:
  absl::Status Compute(OpContext& context) {
    // Inputs: shape, key, counter, alg (all host memory).
    VGPU_ASSIGN_OR_RETURN(TensorPtr shape_tensor, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(TensorPtr key, context.Input(1));
    VGPU_ASSIGN_OR_RETURN(TensorPtr counter, context.Input(2));
    VGPU_ASSIGN_OR_RETURN(TensorPtr alg_tensor, context.Input(3));

    const std::vector<int64_t> alg_shape = ShapeOf(alg_tensor.get());
    if (!alg_shape.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("input 3 (0-based) must have shape [], not ", ShapeString(alg_shape)));
    }
    int32_t alg = 0;
    std::memcpy(&alg, TF_TensorData(alg_tensor.get()), sizeof(alg));
    if (alg == kAlgAutoSelect) alg = kAlgPhilox;
    const std::vector<int64_t> key_shape = ShapeOf(key.get());
    if (key_shape.size() != 1 || key_shape[0] != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("key must have shape [1], not ", ShapeString(key_shape),
                       ". (Note that batched keys are not supported yet.)"));
    }
    // Philox needs two uint64 counter words (TensorFlow only requires `alg` of them).
    const std::vector<int64_t> counter_shape = ShapeOf(counter.get());
    const int64_t min_counter = std::max(alg, 2);
    if (counter_shape.size() != 1 || counter_shape[0] < min_counter) {
      return absl::InvalidArgumentError(absl::StrCat(
          "counter must be a vector with length at least ", min_counter,
          "; got shape: ", ShapeString(counter_shape),
          ". (Note that batched counters are not supported yet.)"));
    }

    const std::vector<int64_t> shape_dims = ShapeOf(shape_tensor.get());
    if (shape_dims.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape must be a vector of {int32,int64}, got shape ", ShapeString(shape_dims)));
    }
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> dims, context.HostIntegers(0));
    for (int64_t d : dims) {
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat("Dimension ", d, " must be >= 0"));
    }
    const TF_DataType dtype = TF_ExpectedOutputDataType(context.raw(), 0);
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, dims));
    const int64_t count = TF_TensorElementCount(y.get());
    if (count == 0) return absl::OkStatus();
    if (alg != kAlgPhilox) {
      return absl::InvalidArgumentError(absl::StrCat("Unsupported algorithm id: ", alg));
    }

    random::PhiloxParams params;
    VGPU_ASSIGN_OR_RETURN(params.dtype, DTypeOf(dtype));
    params.count = static_cast<uint64_t>(count);
    std::memcpy(&params.key, TF_TensorData(key.get()), sizeof(params.key));
    std::memcpy(params.counter, TF_TensorData(counter.get()), sizeof(params.counter));
    return KernelLaunch(context).Buffer(y.get()).Param(params).Run(random::kUniform);
  }
};

}  // namespace

void RegisterRandomOps(const char* device_type) {
  for (TF_DataType dtype : {TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE}) {
    for (TF_DataType shape_type : {TF_INT32, TF_INT64}) {
      RegisterKernel<StatelessRandomUniformV2Op>(
          "StatelessRandomUniformV2", device_type, {{"dtype", dtype}, {"Tshape", shape_type}},
          {"shape", "key", "counter", "alg"});
    }
  }
}

}  // namespace vgpu
