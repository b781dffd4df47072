// Resource-variable updates on the virtual GPU: AssignAddVariableOp, AssignSubVariableOp,
// ResourceStridedSliceAssign (`variable[begin:end:strides] = value`) and the state of
// tf.random.Generator (RngReadAndSkip, RngSkip).
// TensorFlow's DEFAULT kernels for these compute on the host and would dereference device
// memory, and the 2.21 wheel does not export the C API for variables, so these use TensorFlow's
// exported C++ kernel API (LookupResource<Var>). The arithmetic runs on the backing executor for
// the dtypes its element-wise kernel has; for the other numeric dtypes a variable may have on
// the device (int8, uint8, int16, uint16, uint32, uint64, complex64, complex128) the update is
// a round trip through host memory (read both, add, write back), so that no dtype falls to
// TensorFlow's DEFAULT kernel, which would touch device memory from the host (a SIGSEGV).
#include "plugin/kernels/status_op_kernel.h"
#include "plugin/kernels/variable_support.h"
#include "tensorflow/core/framework/types.h"

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "plugin/client/device_client.h"
#include "plugin/common/status_macros.h"
#include "plugin/device/se_handles.h"
#include "plugin/kernels/dtype_map.h"
#include "plugin/kernels/kernel_launch.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/kernels/strided_slice_plan.h"
#include "plugin/protocol/kernels/elementwise.h"
#include "tensorflow/c/kernels.h"

namespace vgpu {
namespace {

namespace tf = ::tensorflow;
using variables::BufferOf;
using variables::PrepareToUpdate;
using variables::StreamOf;

// Input 0's variable, locked for an update by `value` while the result lives (LockedVariables):
// one that holds no value is FailedPrecondition(`uninitialized_message`), one of another dtype
// than the value's InvalidArgument(`dtype_mismatch`(the variable's dtype, the value's)), in the
// words of the op's TensorFlow kernel.
absl::StatusOr<std::unique_ptr<variables::LockedVariables>> LockForUpdate(
    tf::OpKernelContext* context, const tf::Tensor& value, absl::string_view uninitialized_message,
    absl::FunctionRef<std::string(tf::DataType, tf::DataType)> dtype_mismatch) {
  absl::StatusOr<std::unique_ptr<variables::LockedVariables>> locked =
      variables::LockedVariables::Acquire(context, {0}, uninitialized_message);
  if (!locked.ok()) return locked.status();
  const tf::DataType dtype = (*locked)->get(0)->tensor()->dtype();
  if (dtype != value.dtype()) {
    return absl::InvalidArgumentError(dtype_mismatch(dtype, value.dtype()));
  }
  return locked;
}

// HostT void: the update runs as the executor's element-wise kernel; otherwise on the host, on
// elements of type HostT.
template <ElementwiseOp kOp, typename HostT = void>
class AssignUpdateVariableOp : public StatusOpKernel {
 public:
  using StatusOpKernel::StatusOpKernel;

 private:
  absl::Status ComputeWithStatus(tf::OpKernelContext* context) override {
    const tf::Tensor& value = context->input(1);
    absl::StatusOr<std::unique_ptr<variables::LockedVariables>> locked = LockForUpdate(
        context, value, absl::StrCat("attempting to update the uninitialized variable ", name()),
        [&](tf::DataType held, tf::DataType given) {
          return absl::StrCat("variable ", name(), " has dtype ", tf::DataTypeString(held),
                              " but the update has dtype ", tf::DataTypeString(given));
        });
    if (!locked.ok()) return locked.status();
    tf::Var* variable = (*locked)->get(0);
    tf::Tensor* tensor = variable->tensor();
    if (!tensor->shape().IsSameSize(value.shape())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot update variable with shape ", tensor->shape().DebugString(),
          " using a tensor with shape ", value.shape().DebugString(), ", shapes must be equal."));
    }
    absl::StatusOr<ClientStream*> stream = StreamOf(context);
    if (!stream.ok()) return stream.status();
    absl::Status prepared = PrepareToUpdate(context, variable, **stream);
    if (!prepared.ok()) return prepared;
    if (value.NumElements() == 0) return absl::OkStatus();
    if constexpr (!std::is_void_v<HostT>) {
      return UpdateOnHost(**stream, *tensor, value);
    } else {
      return UpdateOnDevice(**stream, *tensor, value);
    }
  }

  // Reads the variable and the update into host memory, combines them and writes the result
  // back; blocks until the write has run (the host buffer must outlive it).
  static absl::Status UpdateOnHost(ClientStream& stream, const tf::Tensor& tensor,
                                   const tf::Tensor& value) {
    const uint64_t count = static_cast<uint64_t>(value.NumElements());
    const uint64_t bytes = count * sizeof(HostT);
    std::vector<HostT> current(count), update(count);
    DeviceClient& device = stream.device();
    absl::Status status = device.CopyDeviceToHost(stream, current.data(), BufferOf(tensor).address,
                                                  bytes);
    if (status.ok()) {
      status = device.CopyDeviceToHost(stream, update.data(), BufferOf(value).address, bytes);
    }
    if (status.ok()) status = device.SynchronizeStream(stream);
    if (!status.ok()) return status;
    for (uint64_t i = 0; i < count; ++i) {
      current[i] = static_cast<HostT>(kOp == ElementwiseOp::kAdd ? current[i] + update[i]
                                                                 : current[i] - update[i]);
    }
    status = device.CopyHostToDevice(stream, BufferOf(tensor).address, current.data(), bytes);
    if (!status.ok()) return status;
    return device.SynchronizeStream(stream);
  }

  static absl::Status UpdateOnDevice(ClientStream& stream, const tf::Tensor& tensor,
                                     const tf::Tensor& value) {
    std::optional<DType> dtype = ToDType(static_cast<TF_DataType>(value.dtype()));
    if (!dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported dtype ", tf::DataTypeString(value.dtype())));
    }
    // The element-wise family's binary kernel, in place on flat [n] views (out aliases a).
    OpTensorDescriptorSettings op_settings;
    op_settings.op = kOp;
    op_settings.dtype = *dtype;
    TensorDescriptorSettings flat;
    flat.dtype = *dtype;
    flat.rank = 1;
    flat.dims[0] = value.NumElements();
    return KernelLaunch(stream)
        .Describe(op_settings)
        .Describe(flat)
        .Describe(flat)
        .Describe(flat)
        .Buffer(BufferOf(tensor))
        .Buffer(BufferOf(value))
        .Buffer(BufferOf(tensor))
        .Run(elementwise::kBinary);
  }
};

template <typename HostT>
void RegisterHostUpdates(const char* device_type, tf::DataType dtype) {
  variables::RegisterVariableKernel(
      "AssignAddVariableOp", device_type, {{"dtype", dtype}}, {"resource"},
      [](tf::OpKernelConstruction* context) -> tf::OpKernel* {
        return new AssignUpdateVariableOp<ElementwiseOp::kAdd, HostT>(context);
      });
  variables::RegisterVariableKernel(
      "AssignSubVariableOp", device_type, {{"dtype", dtype}}, {"resource"},
      [](tf::OpKernelConstruction* context) -> tf::OpKernel* {
        return new AssignUpdateVariableOp<ElementwiseOp::kSub, HostT>(context);
      });
}

// The values of a host-memory int32 / int64 vector input, with its shape.
HostInts HostIntsOf(const tf::Tensor& tensor) {
  HostInts result;
  for (int d = 0; d < tensor.dims(); ++d) result.shape.push_back(tensor.dim_size(d));
  const int64_t n = tensor.NumElements();
  for (int64_t i = 0; i < n; ++i) {
    result.values.push_back(tensor.dtype() == tf::DT_INT32 ? tensor.flat<int32_t>()(i)
                                                           : tensor.flat<int64_t>()(i));
  }
  return result;
}

// ResourceStridedSliceAssign: the variable's slice takes `value`, broadcast to the slice as
// TensorFlow's StridedSliceAssignBCast allows; the rest of the variable keeps its values.
class ResourceStridedSliceAssignOp : public StatusOpKernel {
 public:
  explicit ResourceStridedSliceAssignOp(tf::OpKernelConstruction* context)
      : StatusOpKernel(context) {
    for (auto [name, mask] : {std::pair{"begin_mask", &masks_.begin},
                              std::pair{"end_mask", &masks_.end},
                              std::pair{"ellipsis_mask", &masks_.ellipsis},
                              std::pair{"new_axis_mask", &masks_.new_axis},
                              std::pair{"shrink_axis_mask", &masks_.shrink_axis}}) {
      OP_REQUIRES_OK(context, context->GetAttr(name, mask));
    }
  }


 private:
  absl::Status ComputeWithStatus(tf::OpKernelContext* context) override {
    const tf::Tensor& value = context->input(4);
    absl::StatusOr<std::unique_ptr<variables::LockedVariables>> locked = LockForUpdate(
        context, value,
        absl::StrCat("attempting to assign to a slice of the uninitialized variable ", name()),
        [](tf::DataType held, tf::DataType given) {
          return absl::StrCat("l-value dtype ", tf::DataTypeString(held),
                              " does not match r-value dtype ", tf::DataTypeString(given));
        });
    if (!locked.ok()) return locked.status();
    tf::Var* variable = (*locked)->get(0);
    tf::Tensor* tensor = variable->tensor();
    Dims dims;
    for (int d = 0; d < tensor->dims(); ++d) dims.push_back(tensor->dim_size(d));
    absl::StatusOr<StridedSlicePlan> plan =
        PlanStridedSlice(dims, HostIntsOf(context->input(1)), HostIntsOf(context->input(2)),
                         HostIntsOf(context->input(3)), masks_);
    if (!plan.ok()) return plan.status();
    int64_t count = 1;
    for (int64_t d : plan->processing_dims) count *= d;
    if (count == 0) return absl::OkStatus();
    Dims value_shape;
    for (int d = 0; d < value.dims(); ++d) value_shape.push_back(value.dim_size(d));
    absl::StatusOr<Dims> value_dims = BroadcastAssignedValue(value_shape, plan->final_dims);
    if (!value_dims.ok()) return value_dims.status();
    absl::StatusOr<ClientStream*> stream = StreamOf(context);
    if (!stream.ok()) return stream.status();
    absl::Status prepared = PrepareToUpdate(context, variable, **stream);
    if (!prepared.ok()) return prepared;
    tf::Tensor scratch;
    if (*value_dims != plan->final_dims) {
      tf::TensorShape final_shape;
      for (int64_t d : plan->final_dims) final_shape.AddDim(d);
      absl::Status allocated = context->allocate_temp(value.dtype(), final_shape, &scratch);
      if (!allocated.ok()) return allocated;
    }
    return LaunchSliceAssignment(**stream, static_cast<uint32_t>(tf::DataTypeSize(value.dtype())),
                                 *plan, dims, *value_dims, BufferOf(value),
                                 scratch.IsInitialized() ? BufferOf(scratch) : BufferArg{},
                                 BufferOf(*variable->tensor()));
  }

  StridedSliceMasks masks_;
};

// The counter-based generators' state ops (tf.random.Generator keeps its state in an int64
// variable on the device it was made on, so these must run there). Philox's state is a 128-bit
// counter (elements 0 and 1, low word first) and a key (element 2). Skipping `delta` advances
// the counter by 256 * delta, the product taken modulo 2^64 as TensorFlow's kernels take it.
// RngReadAndSkip (kReadOld) also outputs the state's first three elements as they were. The
// state is read back and written on the host: one synchronisation per call, as a generator's
// draw costs one anyway to be useful.
template <typename AlgT, typename DeltaT, bool kReadOld>
class RngSkipOp : public StatusOpKernel {
 public:
  using StatusOpKernel::StatusOpKernel;

 private:
  // TensorFlow's algorithm ids (random/rng_alg.h).
  static constexpr int64_t kPhilox = 1, kThreeFry = 2, kAutoSelect = 3;
  static constexpr int64_t kPhiloxStateSize = 3;

  absl::Status ComputeWithStatus(tf::OpKernelContext* context) override {
    const tf::Tensor& alg_tensor = context->input(1);
    const tf::Tensor& delta_tensor = context->input(2);
    if (alg_tensor.NumElements() != 1 || delta_tensor.NumElements() != 1) {
      return absl::InvalidArgumentError("the algorithm and delta must be scalars");
    }
    const int64_t alg = static_cast<int64_t>(alg_tensor.flat<AlgT>()(0));
    if (alg == kThreeFry) {
      return absl::UnimplementedError("Non-XLA devices don't support the ThreeFry algorithm.");
    }
    if (alg != kPhilox && alg != kAutoSelect) {
      return absl::InvalidArgumentError(absl::StrCat("Unsupported algorithm id: ", alg));
    }
    const uint64_t advance = static_cast<uint64_t>(delta_tensor.flat<DeltaT>()(0)) * 256;
    absl::StatusOr<std::unique_ptr<variables::LockedVariables>> locked =
        variables::LockedVariables::Acquire(context, {0});
    if (!locked.ok()) return locked.status();
    tf::Var* variable = (*locked)->get(0);
    const tf::Tensor& state = *variable->tensor();
    if (state.dtype() != tf::DT_INT64) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dtype of RNG state variable must be int64, not ", tf::DataTypeString(state.dtype())));
    }
    if (state.dims() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "RNG state must have one and only one dimension, not ", state.dims()));
    }
    if (state.NumElements() < kPhiloxStateSize) {
      return absl::InvalidArgumentError(absl::StrCat(
          "The size of the state must be at least ", kPhiloxStateSize, "; got ",
          state.NumElements()));
    }
    absl::StatusOr<ClientStream*> stream = StreamOf(context);
    if (!stream.ok()) return stream.status();
    if (absl::Status prepared = PrepareToUpdate(context, variable, **stream); !prepared.ok()) {
      return prepared;
    }
    DeviceClient& device = (*stream)->device();
    const uint64_t state_address = BufferOf(*variable->tensor()).address;
    uint64_t words[kPhiloxStateSize];
    absl::Status status = device.CopyDeviceToHost(**stream, words, state_address, sizeof(words));
    if (status.ok()) status = device.SynchronizeStream(**stream);
    if (!status.ok()) return status;
    if constexpr (kReadOld) {
      tf::Tensor* old = nullptr;
      VGPU_RETURN_IF_ERROR(
          context->allocate_output(0, tf::TensorShape({kPhiloxStateSize}), &old));
      VGPU_RETURN_IF_ERROR(
          device.CopyHostToDevice(**stream, BufferOf(*old).address, words, sizeof(words)));
    }
    uint64_t counter[2] = {words[0] + advance, words[1]};
    if (counter[0] < advance) ++counter[1];  // the carry into the counter's high word
    status = device.CopyHostToDevice(**stream, state_address, counter, sizeof(counter));
    if (!status.ok()) return status;
    return device.SynchronizeStream(**stream);  // the host words must outlive the copies
  }
};

}  // namespace

void RegisterVariableOps(const char* device_type) {
  variables::RegisterVariableKernel(
      "RngReadAndSkip", device_type, {}, {"resource", "alg", "delta"},
      [](tf::OpKernelConstruction* context) -> tf::OpKernel* {
        return new RngSkipOp<int32_t, uint64_t, /*kReadOld=*/true>(context);
      });
  DocumentOp("RngReadAndSkip", "",
             "tf.random.Generator's state (Philox; ThreeFry is Unimplemented, as on TensorFlow's "
             "CPU): read back and advanced on the host, one synchronisation per call.");
  variables::RegisterVariableKernel(
      "RngSkip", device_type, {}, {"resource", "algorithm", "delta"},
      [](tf::OpKernelConstruction* context) -> tf::OpKernel* {
        return new RngSkipOp<int64_t, int64_t, /*kReadOld=*/false>(context);
      });
  DocumentOp("RngSkip", "", "As RngReadAndSkip, without the output.");
  for (const char* op : {"AssignAddVariableOp", "AssignSubVariableOp"}) {
    DocumentOp(op, "",
               "int8, uint8, int16, uint16, uint32, uint64 and complex: a round trip through host "
               "memory (the executor has no such element-wise kernel).");
  }
  RegisterHostUpdates<int8_t>(device_type, tf::DT_INT8);
  RegisterHostUpdates<uint8_t>(device_type, tf::DT_UINT8);
  RegisterHostUpdates<int16_t>(device_type, tf::DT_INT16);
  RegisterHostUpdates<uint16_t>(device_type, tf::DT_UINT16);
  RegisterHostUpdates<uint32_t>(device_type, tf::DT_UINT32);
  RegisterHostUpdates<uint64_t>(device_type, tf::DT_UINT64);
  RegisterHostUpdates<tf::complex64>(device_type, tf::DT_COMPLEX64);
  RegisterHostUpdates<tf::complex128>(device_type, tf::DT_COMPLEX128);
  DocumentOp("ResourceStridedSliceAssign", "",
             "begin/end/strides in host memory; the value broadcasts to the slice; every dtype "
             "a variable may have on the device.");
  for (tf::DataType dtype :
       {tf::DT_FLOAT, tf::DT_DOUBLE, tf::DT_HALF, tf::DT_BFLOAT16, tf::DT_INT32, tf::DT_INT64,
        tf::DT_BOOL, tf::DT_INT8, tf::DT_UINT8, tf::DT_INT16, tf::DT_UINT16, tf::DT_UINT32,
        tf::DT_UINT64, tf::DT_COMPLEX64, tf::DT_COMPLEX128}) {
    for (tf::DataType index : {tf::DT_INT32, tf::DT_INT64}) {
      variables::RegisterVariableKernel(
          "ResourceStridedSliceAssign", device_type, {{"T", dtype}, {"Index", index}},
          {"ref", "begin", "end", "strides"},
          [](tf::OpKernelConstruction* context) -> tf::OpKernel* {
            return new ResourceStridedSliceAssignOp(context);
          });
    }
  }
  for (tf::DataType dtype : {tf::DT_FLOAT, tf::DT_DOUBLE, tf::DT_HALF, tf::DT_BFLOAT16,
                             tf::DT_INT32, tf::DT_INT64}) {
    variables::RegisterVariableKernel(
        "AssignAddVariableOp", device_type, {{"dtype", dtype}}, {"resource"},
        [](tf::OpKernelConstruction* context) -> tf::OpKernel* {
          return new AssignUpdateVariableOp<ElementwiseOp::kAdd>(context);
        });
    variables::RegisterVariableKernel(
        "AssignSubVariableOp", device_type, {{"dtype", dtype}}, {"resource"},
        [](tf::OpKernelConstruction* context) -> tf::OpKernel* {
          return new AssignUpdateVariableOp<ElementwiseOp::kSub>(context);
        });
  }
}

}  // namespace vgpu
