// Resource-variable helpers (see variable_support.h).
#include "plugin/kernels/variable_support.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "plugin/kernels/kernel_support.h"

namespace vgpu::variables {

absl::StatusOr<ClientStream*> StreamOf(tf::OpKernelContext* context) {
  // TF_GetStream accepts the C++ context cast to the C API's context.
  return GetClientStream(reinterpret_cast<TF_OpKernelContext*>(context));
}

BufferArg BufferOf(const tf::Tensor& tensor) {
  return BufferArg{reinterpret_cast<uint64_t>(tensor.data()),
                   static_cast<uint64_t>(tensor.TotalBytes())};
}

absl::Status PrepareToUpdate(tf::OpKernelContext* context, tf::Var* variable,
                             ClientStream& stream) {
  tf::Tensor* tensor = variable->tensor();
  if (!variable->copy_on_read_mode.load() && tensor->RefCountIsOne()) return absl::OkStatus();
  tf::Tensor copy;
  tf::AllocatorAttributes attributes;
  attributes.set_gpu_compatible(true);
  absl::Status allocated =
      context->allocate_temp(tensor->dtype(), tensor->shape(), &copy, attributes);
  if (!allocated.ok()) return allocated;
  if (tensor->TotalBytes() > 0) {
    absl::Status copied = stream.device().CopyDeviceToDevice(
        stream, BufferOf(copy).address, BufferOf(*tensor).address, tensor->TotalBytes());
    if (!copied.ok()) return copied;
  }
  *tensor = copy;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LockedVariables>> LockedVariables::Acquire(
    tf::OpKernelContext* context, std::initializer_list<int> inputs) {
  std::unique_ptr<LockedVariables> locked(new LockedVariables());
  for (int input : inputs) {
    tf::core::RefCountPtr<tf::Var> variable;
    absl::Status found = tf::LookupResource(context, tf::HandleFromInput(context, input), &variable);
    if (!found.ok()) return found;
    locked->variables_.push_back(std::move(variable));
  }
  std::vector<tf::mutex*> mutexes;
  for (const auto& variable : locked->variables_) mutexes.push_back(variable->mu());
  std::sort(mutexes.begin(), mutexes.end());
  mutexes.erase(std::unique(mutexes.begin(), mutexes.end()), mutexes.end());
  for (tf::mutex* mu : mutexes) {
    mu->lock();
    locked->locked_.push_back(mu);
  }
  for (size_t i = 0; i < locked->variables_.size(); ++i) {
    if (!locked->variables_[i]->tensor()->IsInitialized()) {
      return absl::FailedPreconditionError(
          absl::StrCat("attempting to use an uninitialized variable (input ", i, ")"));
    }
  }
  return locked;
}

LockedVariables::~LockedVariables() {
  for (auto it = locked_.rbegin(); it != locked_.rend(); ++it) (*it)->unlock();
}

}  // namespace vgpu::variables
