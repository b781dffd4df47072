// KernelLaunch (see kernel_launch.h).
#include "plugin/kernels/kernel_launch.h"

#include "plugin/kernels/op_kernel.h"

namespace vgpu {

KernelLaunch::KernelLaunch(const OpContext& context) {
  absl::StatusOr<ClientStream*> stream = context.Stream();
  if (stream.ok()) {
    stream_ = *stream;
  } else {
    status_ = stream.status();
  }
}

KernelLaunch& KernelLaunch::DescribeTensor(TF_DataType dtype, absl::Span<const int64_t> dims) {
  if (!status_.ok()) return *this;
  absl::StatusOr<TensorDescriptorSettings> settings = TensorSettings(dtype, dims);
  if (!settings.ok()) {
    status_ = settings.status();
    return *this;
  }
  return Describe(*settings);
}

KernelLaunch& KernelLaunch::DescribeTensor(const TF_Tensor* tensor) {
  return DescribeTensor(TF_TensorType(tensor), ShapeOf(tensor));
}

KernelLaunch& KernelLaunch::Buffer(const TF_Tensor* tensor) { return Buffer(BufferOf(tensor)); }

absl::Status KernelLaunch::Run(KernelId kernel) {
  if (!status_.ok()) return status_;
  absl::InlinedVector<Descriptor*, 6> raw;
  for (const ScopedDescriptor& d : descriptors_) raw.push_back(d.get());
  return stream_->device().dnn().Launch(*stream_, kernel, raw, buffers_, params_);
}

}  // namespace vgpu
