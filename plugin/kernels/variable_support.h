// Helpers for the kernels that read or update resource variables on the device (AssignAdd/Sub,
// the ResourceApply* / ResourceSparseApply* optimizers, the ResourceGather / ResourceScatter
// families). They use TensorFlow's exported C++ kernel API, because the 2.21 wheel does not
// export the C API for variables; only variable_ops.cc, training_ops.cc and
// resource_sparse_ops.cc include this header (TensorFlow's C++ headers are heavy to compile).
#ifndef VGPU_KERNELS_VARIABLE_SUPPORT_H_
#define VGPU_KERNELS_VARIABLE_SUPPORT_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "plugin/client/device_client.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"

namespace vgpu::variables {

namespace tf = ::tensorflow;

// The client stream this op runs on.
absl::StatusOr<ClientStream*> StreamOf(tf::OpKernelContext* context);

// The device range of a tensor's buffer.
BufferArg BufferOf(const tf::Tensor& tensor);

// Makes the variable's buffer private before an in-place update, dense or sparse: if a read
// still holds it (or the variable is in copy-on-read mode), the update goes to a fresh device
// copy. The caller holds the variable's lock.
//
// Sparse ops use this too, unlike TensorFlow's, which put a variable in copy-on-read mode
// (EnsureSparseVariableAccess) so that reads copy instead: a pluggable device runs TensorFlow's
// DEFAULT AssignVariableOp kernel, which in that mode copies the new value with a host functor
// and would dereference device memory. The plugin never enters copy-on-read mode.
absl::Status PrepareToUpdate(tf::OpKernelContext* context, tf::Var* variable,
                             ClientStream& stream);

// The values of an int32 / int64 device tensor, read back to the host (a round trip: the stream
// is synchronised). For the checks TensorFlow's GPU kernels make on the host too.
absl::StatusOr<std::vector<int64_t>> ReadIntegersToHost(ClientStream& stream,
                                                        const tf::Tensor& tensor);

// Creates a C++ API kernel for a node.
using KernelFactory = std::function<tf::OpKernel*(tf::OpKernelConstruction*)>;

// Registers a kernel written against the C++ API for `op_name` on `device_type` (at
// TF_InitKernel time: the device type is configurable, so TensorFlow's static registration
// macros cannot be used) and records it in the op catalog. The factory lives for the process.
void RegisterVariableKernel(const char* op_name, const char* device_type,
                            absl::Span<const std::pair<const char*, tf::DataType>> constraints,
                            absl::Span<const char* const> host_memory, KernelFactory create);

// The variables named by resource inputs `inputs`, looked up and locked for the lifetime of the
// object (each mutex once, in address order, as TensorFlow does to avoid deadlocks). One that
// holds no value is FailedPrecondition: `uninitialized_message` when given, else TensorFlow's
// "Attempting to use uninitialized variables: <input>".
class LockedVariables {
 public:
  static absl::StatusOr<std::unique_ptr<LockedVariables>> Acquire(
      tf::OpKernelContext* context, absl::Span<const int> inputs,
      absl::string_view uninitialized_message = "");
  ~LockedVariables();
  // The variable of the i-th requested input; its tensor is initialised.
  tf::Var* get(size_t i) const { return variables_[i].get(); }

 private:
  LockedVariables() = default;
  std::vector<tf::core::RefCountPtr<tf::Var>> variables_;
  std::vector<tf::mutex*> locked_;
};

}  // namespace vgpu::variables

#endif  // VGPU_KERNELS_VARIABLE_SUPPORT_H_
