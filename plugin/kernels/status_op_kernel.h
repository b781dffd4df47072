// The base of the plugin's kernels written against TensorFlow's C++ kernel API (the variable
// updates, optimizers, resource gathers/scatters and variant ops, for which the 2.21 wheel
// exports no C API): the body returns an absl::Status that becomes the op's, and runs with the
// op's activity tag (plugin/common/activity.h), as RegisterKernel's kernels do, so that what it
// launches is attributed to the op while a profile is taken. Include only where TensorFlow's
// C++ headers are needed anyway.
#ifndef VGPU_KERNELS_STATUS_OP_KERNEL_H_
#define VGPU_KERNELS_STATUS_OP_KERNEL_H_

#include "absl/status/status.h"
#include "plugin/common/activity.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace vgpu {

class StatusOpKernel : public tensorflow::OpKernel {
 public:
  explicit StatusOpKernel(tensorflow::OpKernelConstruction* context)
      : tensorflow::OpKernel(context),
        op_(activity::Intern(type_string())),
        op_name_(activity::Intern(name())) {}

  void Compute(tensorflow::OpKernelContext* context) final {
    activity::ScopedOp op(op_, op_name_,
                          activity::Enabled() ? DeviceOrdinal(context) : 0);
    absl::Status status = ComputeWithStatus(context);
    if (!status.ok()) context->SetStatus(status);
  }

 protected:
  virtual absl::Status ComputeWithStatus(tensorflow::OpKernelContext* context) = 0;

 private:
  static uint32_t DeviceOrdinal(tensorflow::OpKernelContext* context) {
    const auto& parsed = context->device()->parsed_name();
    return parsed.has_id ? static_cast<uint32_t>(parsed.id) : 0;
  }

  activity::NameId op_, op_name_;
};

}  // namespace vgpu

#endif  // VGPU_KERNELS_STATUS_OP_KERNEL_H_
