// Resource-variable updates on the virtual GPU: AssignAddVariableOp and AssignSubVariableOp.
// TensorFlow's DEFAULT kernels for these compute on the host and would dereference device
// memory, and the 2.21 wheel does not export the C API for variables, so these use TensorFlow's
// exported C++ kernel API (LookupResource<Var>). The arithmetic runs on the backing executor.
#include "plugin/kernels/variable_support.h"
#include "tensorflow/core/framework/types.h"

#include "absl/strings/str_cat.h"
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

template <ElementwiseOp kOp>
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
    // The element-wise family's binary kernel, in place on flat [n] views (out aliases a).
    OpTensorDescriptorSettings op_settings;
    op_settings.op = kOp;
    op_settings.dtype = *dtype;
    TensorDescriptorSettings flat;
    flat.dtype = *dtype;
    flat.rank = 1;
    flat.dims[0] = value.NumElements();
    return KernelLaunch(**stream)
        .Describe(op_settings)
        .Describe(flat)
        .Describe(flat)
        .Describe(flat)
        .Buffer(BufferOf(*tensor))
        .Buffer(BufferOf(value))
        .Buffer(BufferOf(*tensor))
        .Run(elementwise::kBinary);
  }
};

}  // namespace

void RegisterVariableOps(const char* device_type) {
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
