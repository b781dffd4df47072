// Resource-variable helpers (see variable_support.h).
#include "plugin/kernels/variable_support.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "plugin/kernels/kernel_support.h"
#include "plugin/kernels/op_catalog.h"
#include "tensorflow/core/framework/kernel_def_builder.h"

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

absl::StatusOr<std::vector<int64_t>> ReadIntegersToHost(ClientStream& stream,
                                                        const tf::Tensor& tensor) {
  const int64_t count = tensor.NumElements();
  std::vector<int64_t> values(static_cast<size_t>(count));
  if (count == 0) return values;
  if (tensor.dtype() == tf::DT_INT32) {
    std::vector<int32_t> narrow(static_cast<size_t>(count));
    absl::Status copied = stream.device().CopyDeviceToHost(
        stream, narrow.data(), BufferOf(tensor).address, narrow.size() * sizeof(int32_t));
    if (!copied.ok()) return copied;
    absl::Status synced = stream.device().SynchronizeStream(stream);
    if (!synced.ok()) return synced;
    values.assign(narrow.begin(), narrow.end());
    return values;
  }
  if (tensor.dtype() != tf::DT_INT64) {
    return absl::InvalidArgumentError("expected an int32 or int64 tensor");
  }
  absl::Status copied = stream.device().CopyDeviceToHost(
      stream, values.data(), BufferOf(tensor).address, values.size() * sizeof(int64_t));
  if (!copied.ok()) return copied;
  absl::Status synced = stream.device().SynchronizeStream(stream);
  if (!synced.ok()) return synced;
  return values;
}

namespace {

// TensorFlow's kernel factory interface over a KernelFactory.
class FunctionKernelFactory : public tf::kernel_factory::OpKernelFactory {
 public:
  explicit FunctionKernelFactory(KernelFactory create) : create_(std::move(create)) {}
  tf::OpKernel* Create(tf::OpKernelConstruction* context) override { return create_(context); }

 private:
  KernelFactory create_;
};

}  // namespace

void RegisterVariableKernel(const char* op_name, const char* device_type,
                            absl::Span<const std::pair<const char*, tf::DataType>> constraints,
                            absl::Span<const char* const> host_memory, KernelFactory create) {
  tf::KernelDefBuilder builder(op_name);
  builder.Device(device_type);
  std::vector<CatalogConstraint> catalog_constraints;
  for (const auto& [attribute, dtype] : constraints) {
    builder.TypeConstraint(attribute, dtype);
    catalog_constraints.push_back({attribute, static_cast<TF_DataType>(dtype)});
  }
  for (const char* name : host_memory) builder.HostMemory(name);
  // The registrar lives for the process, like TensorFlow's static ones.
  new tf::kernel_factory::OpKernelRegistrar(
      builder.Build(), absl::StrCat("Vgpu", op_name),
      std::make_unique<FunctionKernelFactory>(std::move(create)));
  CatalogKernel(op_name, catalog_constraints, host_memory);
}

absl::StatusOr<std::unique_ptr<LockedVariables>> LockedVariables::Acquire(
    tf::OpKernelContext* context, absl::Span<const int> inputs,
    absl::string_view uninitialized_message) {
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
  size_t i = 0;
  for (int input : inputs) {
    if (!locked->variables_[i++]->tensor()->IsInitialized()) {
      if (!uninitialized_message.empty()) {
        return absl::FailedPreconditionError(uninitialized_message);
      }
      return absl::FailedPreconditionError(
          absl::StrCat("Attempting to use uninitialized variables: ",
                       context->op_kernel().requested_input(input)));
    }
  }
  return locked;
}

LockedVariables::~LockedVariables() {
  for (auto it = locked_.rbegin(); it != locked_.rend(); ++it) (*it)->unlock();
}

}  // namespace vgpu::variables
