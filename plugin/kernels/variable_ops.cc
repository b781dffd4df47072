// Resource-variable updates on the virtual GPU: AssignAddVariableOp and AssignSubVariableOp.
// TensorFlow's DEFAULT kernels for these compute on the host and would dereference device
// memory, and the 2.21 wheel does not export the C API for variables, so these use TensorFlow's
// exported C++ kernel API (LookupResource<Var>). The arithmetic runs on the backing executor.
#include "plugin/kernels/variable_support.h"
#include "tensorflow/core/framework/types.h"

#include "absl/strings/str_cat.h"
#include "plugin/device/se_handles.h"
#include "plugin/kernels/dtype_map.h"
#include "plugin/kernels/op_registration.h"
#include "tensorflow/c/kernels.h"

namespace vgpu {
namespace {

namespace tf = ::tensorflow;
using variables::BufferOf;
using variables::PrepareToUpdate;
using variables::StreamOf;

template <BinaryOp kOp>
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
    std::optional<DType> dtype = ToDType(static_cast<TF_DataType>(value.dtype()));
    if (!dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported dtype ", tf::DataTypeString(value.dtype())));
    }
    absl::StatusOr<ClientStream*> stream = StreamOf(context);
    if (!stream.ok()) return stream.status();
    absl::Status prepared = PrepareToUpdate(context, variable.get(), **stream);
    if (!prepared.ok()) return prepared;
    if (value.NumElements() == 0) return absl::OkStatus();
    BinaryElementwiseParams params{kOp, *dtype, static_cast<uint64_t>(value.NumElements())};
    BufferArg buffers[] = {BufferOf(*tensor), BufferOf(value), BufferOf(*tensor)};
    return (*stream)->device().Launch(
        **stream, KernelId::kBinaryElementwise, buffers,
        absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(&params), sizeof(params)));
  }
};

template <BinaryOp kOp>
void RegisterUpdate(const char* op_name, const char* device_type, tf::DataType dtype) {
  // Registered at TF_InitKernel time (the device type is configurable), hence by hand rather
  // than with REGISTER_KERNEL_BUILDER's static registrars. Registrars live for the process.
  new tf::kernel_factory::OpKernelRegistrar(
      tf::KernelDefBuilder(op_name)
          .Device(device_type)
          .HostMemory("resource")
          .TypeConstraint("dtype", dtype)
          .Build(),
      absl::StrCat("Vgpu", op_name),
      [](tf::OpKernelConstruction* context) -> tf::OpKernel* {
        return new AssignUpdateVariableOp<kOp>(context);
      });
}

}  // namespace

void RegisterVariableOps(const char* device_type) {
  for (tf::DataType dtype : {tf::DT_FLOAT, tf::DT_DOUBLE, tf::DT_HALF, tf::DT_BFLOAT16,
                             tf::DT_INT32, tf::DT_INT64}) {
    RegisterUpdate<BinaryOp::kAdd>("AssignAddVariableOp", device_type, dtype);
    RegisterUpdate<BinaryOp::kSub>("AssignSubVariableOp", device_type, dtype);
  }
}

}  // namespace vgpu
