// Resource-variable updates on the virtual GPU: AssignAddVariableOp and AssignSubVariableOp.
// TensorFlow's DEFAULT kernels for these compute on the host and would dereference device
// memory, and the 2.21 wheel does not export the C API for variables, so these use TensorFlow's
// exported C++ kernel API (LookupResource<Var>). The arithmetic runs on the backing executor for
// the dtypes its element-wise kernel has; for the other numeric dtypes a variable may have on
// the device (int8, uint8, int16, uint16, uint32, uint64, complex64, complex128) the update is
// a round trip through host memory (read both, add, write back), so that no dtype falls to
// TensorFlow's DEFAULT kernel, which would touch device memory from the host (a SIGSEGV).
#include "plugin/kernels/variable_support.h"
#include "tensorflow/core/framework/types.h"

#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/client/device_client.h"
#include "plugin/device/se_handles.h"
#include "plugin/kernels/dtype_map.h"
#include "plugin/kernels/kernel_launch.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/elementwise.h"
#include "tensorflow/c/kernels.h"

namespace vgpu {
namespace {

namespace tf = ::tensorflow;
using variables::BufferOf;
using variables::PrepareToUpdate;
using variables::StreamOf;

// HostT void: the update runs as the executor's element-wise kernel; otherwise on the host, on
// elements of type HostT.
template <ElementwiseOp kOp, typename HostT = void>
class AssignUpdateVariableOp : public tf::OpKernel {
 public:
  explicit AssignUpdateVariableOp(tf::OpKernelConstruction* context) : tf::OpKernel(context) {}

  void Compute(tf::OpKernelContext* context) override {
    absl::Status status = Update(context);
    if (!status.ok()) context->SetStatus(status);
  }

 private:
  absl::Status Update(tf::OpKernelContext* context) {
    tf::core::RefCountPtr<tf::Var> variable;
    absl::Status found = tf::LookupResource(context, tf::HandleFromInput(context, 0), &variable);
    if (!found.ok()) return found;
    const tf::Tensor& value = context->input(1);
    tf::mutex_lock lock(*variable->mu());
    tf::Tensor* tensor = variable->tensor();
    if (!tensor->IsInitialized()) {
      return absl::FailedPreconditionError(
          absl::StrCat("attempting to update the uninitialized variable ", name()));
    }
    if (tensor->dtype() != value.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable ", name(), " has dtype ", tf::DataTypeString(tensor->dtype()),
          " but the update has dtype ", tf::DataTypeString(value.dtype())));
    }
    if (!tensor->shape().IsSameSize(value.shape())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot update variable with shape ", tensor->shape().DebugString(),
          " using a tensor with shape ", value.shape().DebugString(), ", shapes must be equal."));
    }
    absl::StatusOr<ClientStream*> stream = StreamOf(context);
    if (!stream.ok()) return stream.status();
    absl::Status prepared = PrepareToUpdate(context, variable.get(), **stream);
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

}  // namespace

void RegisterVariableOps(const char* device_type) {
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
