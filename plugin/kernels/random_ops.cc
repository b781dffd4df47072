// TensorFlow op kernels of the random family on the virtual GPU: the stateless V2 random ops
// (StatelessRandomUniformV2, StatelessRandomNormalV2, StatelessTruncatedNormalV2,
// StatelessRandomUniformIntV2, StatelessRandomUniformFullIntV2), behind tf.random.stateless_*,
// Keras' initializers (GlorotNormal, HeNormal, TruncatedNormal...), Dropout and GaussianNoise.
// Their shape and alg inputs are host memory (validated and read here, as TensorFlow's kernels
// do); key and counter are device memory, as in TensorFlow's GPU build, and the kernel reads them
// in its stream's order (random::kKeyCounterInBuffers). The numbers are generated on the device
// (Philox, with TensorFlow's exact bits, protocol/kernels/random.h).
//
// The stateful random ops (RandomUniform, RandomStandardNormal, TruncatedNormal,
// RandomUniformInt: tf.random.uniform / normal / truncated_normal in user code) keep their
// generator on the host, as TensorFlow's kernels do (GuardedPhiloxRandom): key = seed, counter =
// [0, seed2] (two fresh random words when both attributes are 0), and each call reserves 256
// counter steps per output element. A call launches the stateless kernel with the reserved key
// and counter in its parameter block, so the numbers are TensorFlow's CPU numbers bit for bit.
//
// StatelessRandomGetKeyCounter derives key and counter from a seed. TensorFlow's GPU build
// registers it with every argument in host memory, so a seed held in a device variable (every
// Keras Dropout, GaussianNoise or random augmentation layer: keras.random.SeedGenerator) is
// copied back to the host in the middle of each step, and the step waits for the device to get
// there. Here the seed, key and counter stay in device memory and the derivation is a kernel
// (random::kKeyCounterFromSeed): nothing waits.
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/random.h"

namespace vgpu {
namespace {

constexpr std::initializer_list<TF_DataType> kFloating = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                          TF_DOUBLE};

constexpr int kAlgPhilox = 1;      // TensorFlow's RNG_ALG_PHILOX
constexpr int kAlgAutoSelect = 3;  // RNG_ALG_AUTO_SELECT: Philox on this device

enum class Distribution { kUniform, kNormal, kTruncatedNormal, kUniformInt, kUniformFullInt };

KernelId KernelOf(Distribution distribution) {
  switch (distribution) {
    case Distribution::kUniform: return random::kUniform;
    case Distribution::kNormal: return random::kNormal;
    case Distribution::kTruncatedNormal: return random::kTruncatedNormal;
    case Distribution::kUniformInt: return random::kUniformInt;
    case Distribution::kUniformFullInt: return random::kUniformFullInt;
  }
  return random::kUniform;
}

// The element type the device kernels compute: uint32/uint64 share int32/int64's bits.
absl::StatusOr<DType> DeviceDTypeOf(TF_DataType dtype) {
  if (dtype == TF_UINT32) return DType::kInt32;
  if (dtype == TF_UINT64) return DType::kInt64;
  return DTypeOf(dtype);
}

// A scalar integer of `dtype` (int32/int64/uint32/uint64) in host memory, as int64.
int64_t HostScalar(const TF_Tensor* tensor) {
  switch (TF_TensorType(tensor)) {
    case TF_INT32: {
      int32_t value;
      std::memcpy(&value, TF_TensorData(tensor), sizeof(value));
      return value;
    }
    case TF_UINT32: {
      uint32_t value;
      std::memcpy(&value, TF_TensorData(tensor), sizeof(value));
      return value;
    }
    default: {
      int64_t value;
      std::memcpy(&value, TF_TensorData(tensor), sizeof(value));
      return value;
    }
  }
}

// The bounds of a uniform integer op: inputs `first` (minval) and `first` + 1 (maxval), scalars in
// host memory, as int64.
absl::StatusOr<std::pair<int64_t, int64_t>> ReadIntegerBounds(const OpContext& context,
                                                              int first) {
  VGPU_ASSIGN_OR_RETURN(TensorPtr minval, context.Input(first));
  VGPU_ASSIGN_OR_RETURN(TensorPtr maxval, context.Input(first + 1));
  for (const auto& [name, tensor] :
       {std::pair{"minval", minval.get()}, std::pair{"maxval", maxval.get()}}) {
    if (TF_NumDims(tensor) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " must be 0-D, got shape ", ShapeString(ShapeOf(tensor))));
    }
  }
  return std::pair{HostScalar(minval.get()), HostScalar(maxval.get())};
}

// TensorFlow's MakeShape for a host-memory shape input: a vector of non-negative dimensions.
absl::StatusOr<std::vector<int64_t>> ReadShapeInput(OpContext& context, int index) {
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> shape_dims, context.InputShape(index));
  if (shape_dims.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shape must be a vector of {int32,int64}, got shape ", ShapeString(shape_dims)));
  }
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> dims, context.HostIntegers(index));
  for (int64_t d : dims) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("Dimension ", d, " must be >= 0"));
  }
  return dims;
}

// The stateless V2 random ops: inputs shape, key, counter, alg (shape and alg in host memory,
// key and counter on the device), and for UniformIntV2 minval, maxval (host memory).
template <Distribution kDistribution>
class StatelessRandomOp : public NoAttributes<StatelessRandomOp<kDistribution>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<4>());
    const auto& [shape_tensor, key, counter, alg_tensor] = inputs;

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

    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadShapeInput(context, 0));
    int64_t minval = 0, maxval = 0;
    if constexpr (kDistribution == Distribution::kUniformInt) {
      VGPU_ASSIGN_OR_RETURN(std::tie(minval, maxval), ReadIntegerBounds(context, 4));
    }
    const TF_DataType dtype = TF_ExpectedOutputDataType(context.raw(), 0);
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, dims));
    const int64_t count = TF_TensorElementCount(y.get());
    if (count == 0) return absl::OkStatus();
    if (alg != kAlgPhilox) {
      return absl::InvalidArgumentError(absl::StrCat("Unsupported algorithm id: ", alg));
    }

    random::PhiloxParams params;
    VGPU_ASSIGN_OR_RETURN(params.dtype, DeviceDTypeOf(dtype));
    params.count = static_cast<uint64_t>(count);
    params.flags = random::kKeyCounterInBuffers;  // read on the device, after whatever wrote them
    if constexpr (kDistribution == Distribution::kUniformInt) {
      if (!(minval < maxval)) {
        return absl::InvalidArgumentError(
            absl::StrCat("Need minval < maxval, got ", minval, " >= ", maxval));
      }
      random::UniformIntParams int_params;
      int_params.philox = params;
      int_params.minval = minval;
      int_params.maxval = maxval;
      return KernelLaunch(context)
          .Buffer(y.get())
          .Buffer(key.get())
          .Buffer(counter.get())
          .Param(int_params)
          .Run(random::kUniformInt);
    } else {
      return KernelLaunch(context)
          .Buffer(y.get())
          .Buffer(key.get())
          .Buffer(counter.get())
          .Param(params)
          .Run(KernelOf(kDistribution));
    }
  }
};

// A stateful op's Philox generator (TensorFlow's GuardedPhiloxRandom), shared by the calls of
// one kernel instance. Thread-safe: TensorFlow may run one node's kernel from several threads.
class PhiloxState {
 public:
  // TensorFlow's PhiloxRandom(seed, seed2): key = seed, counter = [0, seed2]; both 0 means
  // "not seeded" and draws two random words instead.
  void Seed(int64_t seed, int64_t seed2) {
    if (seed == 0 && seed2 == 0) {
      std::random_device device;
      auto word = [&device] { return (uint64_t{device()} << 32) | device(); };
      seed = static_cast<int64_t>(word());
      seed2 = static_cast<int64_t>(word());
    }
    key_ = static_cast<uint64_t>(seed);
    counter_[0] = 0;
    counter_[1] = static_cast<uint64_t>(seed2);
  }

  // The key and counter of the next `outputs` elements, and the generator moved past them:
  // 256 steps of the 128-bit counter per element (TensorFlow's ReserveRandomOutputs(n, 256),
  // enough for any distribution's rejections).
  void Reserve(uint64_t outputs, random::PhiloxParams* params) {
    std::lock_guard<std::mutex> lock(mutex_);
    params->key = key_;
    params->counter[0] = counter_[0];
    params->counter[1] = counter_[1];
    const uint64_t steps = outputs * 256;
    counter_[0] += steps;
    if (counter_[0] < steps) ++counter_[1];  // the carry into the high word
  }

 private:
  std::mutex mutex_;
  uint64_t key_ = 0;
  uint64_t counter_[2] = {0, 0};
};

// RandomUniform, RandomStandardNormal, TruncatedNormal (shape in host memory) and
// RandomUniformInt (shape, minval, maxval in host memory), attributes seed and seed2.
template <Distribution kDistribution>
class StatefulRandomOp {
 public:
  static absl::StatusOr<std::unique_ptr<StatefulRandomOp>> Create(OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(int64_t seed, construction.Int("seed"));
    VGPU_ASSIGN_OR_RETURN(int64_t seed2, construction.Int("seed2"));
    auto kernel = std::make_unique<StatefulRandomOp>();
    kernel->state_.Seed(seed, seed2);
    return kernel;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadShapeInput(context, 0));
    const TF_DataType dtype = TF_ExpectedOutputDataType(context.raw(), 0);
    random::PhiloxParams params;
    VGPU_ASSIGN_OR_RETURN(params.dtype, DeviceDTypeOf(dtype));
    if constexpr (kDistribution == Distribution::kUniformInt) {
      VGPU_ASSIGN_OR_RETURN(auto bounds, ReadIntegerBounds(context, 1));
      VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, dims));
      const int64_t count = TF_TensorElementCount(y.get());
      if (count == 0) return absl::OkStatus();  // TensorFlow's kernel reserves nothing then
      random::UniformIntParams int_params;
      int_params.minval = bounds.first;
      int_params.maxval = bounds.second;
      if (!(int_params.minval < int_params.maxval)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Need minval < maxval, got ", int_params.minval, " >= ", int_params.maxval));
      }
      params.count = static_cast<uint64_t>(count);
      state_.Reserve(params.count, &params);
      int_params.philox = params;
      return KernelLaunch(context).Buffer(y.get()).Param(int_params).Run(random::kUniformInt);
    } else {
      VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, dims));
      const int64_t count = TF_TensorElementCount(y.get());
      params.count = static_cast<uint64_t>(count);
      state_.Reserve(params.count, &params);  // an empty output reserves 0 steps
      if (count == 0) return absl::OkStatus();
      return KernelLaunch(context).Buffer(y.get()).Param(params).Run(KernelOf(kDistribution));
    }
  }

 private:
  PhiloxState state_;
};

template <Distribution kDistribution>
void RegisterStateful(const char* op_name, const char* device_type,
                      std::initializer_list<TF_DataType> dtypes, const char* dtype_attribute,
                      const char* notes) {
  for (TF_DataType dtype : dtypes) {
    for (TF_DataType shape_type : {TF_INT32, TF_INT64}) {
      if constexpr (kDistribution == Distribution::kUniformInt) {
        RegisterKernel<StatefulRandomOp<kDistribution>>(
            op_name, device_type, {{dtype_attribute, dtype}, {"T", shape_type}},
            {"shape", "minval", "maxval"});
      } else {
        RegisterKernel<StatefulRandomOp<kDistribution>>(
            op_name, device_type, {{dtype_attribute, dtype}, {"T", shape_type}}, {"shape"});
      }
    }
  }
  DocumentOp(op_name, "", notes);
}

// StatelessRandomGetKeyCounter(seed) -> key [1], counter [2] (uint64), all in device memory.
class StatelessRandomGetKeyCounterOp : public NoAttributes<StatelessRandomGetKeyCounterOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr seed, context.Input(0));
    const std::vector<int64_t> seed_shape = ShapeOf(seed.get());
    if (seed_shape != std::vector<int64_t>{2}) {
      return absl::InvalidArgumentError(
          absl::StrCat("seed must have shape [2], not ", ShapeString(seed_shape)));
    }
    random::SeedParams params;
    params.dtype = TF_TensorType(seed.get()) == TF_INT32 ? DType::kInt32 : DType::kInt64;
    VGPU_ASSIGN_OR_RETURN(TensorPtr key, context.AllocateOutput(0, TF_UINT64, {1}));
    VGPU_ASSIGN_OR_RETURN(TensorPtr counter, context.AllocateOutput(1, TF_UINT64, {2}));
    return KernelLaunch(context)
        .Buffer(seed.get())
        .Buffer(key.get())
        .Buffer(counter.get())
        .Param(params)
        .Run(random::kKeyCounterFromSeed);
  }
};

template <Distribution kDistribution>
void RegisterStateless(const char* op_name, const char* device_type,
                       std::initializer_list<TF_DataType> dtypes, const char* notes) {
  for (TF_DataType dtype : dtypes) {
    for (TF_DataType shape_type : {TF_INT32, TF_INT64}) {
      if constexpr (kDistribution == Distribution::kUniformInt) {
        RegisterKernel<StatelessRandomOp<kDistribution>>(
            op_name, device_type, {{"dtype", dtype}, {"Tshape", shape_type}},
            {"shape", "alg", "minval", "maxval"});
      } else {
        RegisterKernel<StatelessRandomOp<kDistribution>>(
            op_name, device_type, {{"dtype", dtype}, {"Tshape", shape_type}}, {"shape", "alg"});
      }
    }
  }
  DocumentOp(op_name, "", notes);
}

}  // namespace

void RegisterRandomOps(const char* device_type) {
  RegisterStateless<Distribution::kUniform>(
      "StatelessRandomUniformV2", device_type, kFloating,
      "Philox (alg 1 or 3): TensorFlow's CPU numbers bit for bit.");
  RegisterStateless<Distribution::kNormal>(
      "StatelessRandomNormalV2", device_type, kFloating,
      "Philox + Box-Muller: TensorFlow's CPU numbers bit for bit.");
  RegisterStateless<Distribution::kTruncatedNormal>(
      "StatelessTruncatedNormalV2", device_type, kFloating,
      "Philox, rejection of |x| >= 2 with TensorFlow's per-group counter reservation: "
      "TensorFlow's CPU numbers bit for bit.");
  RegisterStateless<Distribution::kUniformInt>(
      "StatelessRandomUniformIntV2", device_type, {TF_INT32, TF_INT64},
      "minval + bits mod (maxval - minval), TensorFlow's CPU numbers bit for bit.");
  RegisterStateless<Distribution::kUniformFullInt>(
      "StatelessRandomUniformFullIntV2", device_type, {TF_INT32, TF_INT64, TF_UINT32, TF_UINT64},
      "The raw Philox bits, TensorFlow's CPU numbers bit for bit.");
  constexpr char kStatefulNote[] =
      "The generator (seed, seed2) stays on the host; each call launches the stateless kernel "
      "with the counter it reserves: TensorFlow's CPU numbers bit for bit, call after call.";
  RegisterStateful<Distribution::kUniform>("RandomUniform", device_type, kFloating, "dtype",
                                           kStatefulNote);
  RegisterStateful<Distribution::kNormal>("RandomStandardNormal", device_type, kFloating, "dtype",
                                          kStatefulNote);
  RegisterStateful<Distribution::kTruncatedNormal>("TruncatedNormal", device_type, kFloating,
                                                   "dtype", kStatefulNote);
  RegisterStateful<Distribution::kUniformInt>("RandomUniformInt", device_type,
                                              {TF_INT32, TF_INT64}, "Tout", kStatefulNote);
  for (TF_DataType seed_type : {TF_INT32, TF_INT64}) {
    RegisterKernel<StatelessRandomGetKeyCounterOp>("StatelessRandomGetKeyCounter", device_type,
                                                   {{"Tseed", seed_type}}, {});
  }
  DocumentOp("StatelessRandomGetKeyCounter", "",
             "Computed on the device: seed, key and counter stay in device memory (TensorFlow's "
             "GPU build reads the seed back to the host, a wait in every step of a Keras "
             "Dropout layer).");
}

}  // namespace vgpu
