// The virtual DNN/BLAS API (see dnn_api.h).
#include "plugin/client/dnn_api.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "plugin/client/device_client.h"
#include "plugin/common/log.h"
#include "plugin/protocol/launch_params.h"

namespace vgpu {

absl::StatusOr<Descriptor*> DnnApi::Create(ClientStream& stream, DescriptorKind kind) {
  device_->counters().CountDescriptorCall(kind, DescriptorVerb::kCreate, /*forwarded=*/false);
  return new Descriptor(kind);
}

absl::Status DnnApi::SetBytes(ClientStream& stream, Descriptor* descriptor, DescriptorKind kind,
                              const void* settings, size_t size) {
  if (descriptor == nullptr || descriptor->kind() != kind) {
    return absl::InvalidArgumentError(absl::StrCat(
        "setting ", DescriptorKindName(kind), " settings on a ",
        descriptor == nullptr ? "null" : DescriptorKindName(descriptor->kind()), " descriptor"));
  }
  device_->counters().CountDescriptorCall(kind, DescriptorVerb::kSet, /*forwarded=*/false);
  std::memcpy(descriptor->settings_, settings, size);
  descriptor->settings_size_ = static_cast<uint16_t>(size);
  return absl::OkStatus();
}

absl::Status DnnApi::Destroy(ClientStream& stream, Descriptor* descriptor) {
  if (descriptor == nullptr) return absl::OkStatus();
  device_->counters().CountDescriptorCall(descriptor->kind(), DescriptorVerb::kDestroy,
                                          /*forwarded=*/false);
  delete descriptor;
  return absl::OkStatus();
}

absl::Status DnnApi::Launch(ClientStream& stream, KernelId kernel,
                            absl::Span<Descriptor* const> descriptors,
                            absl::Span<const BufferArg> buffers,
                            absl::Span<const uint8_t> params) {
  if (descriptors.size() > 255) return absl::InvalidArgumentError("too many descriptors");
  ParamBlock section;
  ParamWriter writer(&section);
  writer.Put(static_cast<uint8_t>(descriptors.size()));
  for (const Descriptor* descriptor : descriptors) {
    if (descriptor == nullptr || !descriptor->is_set()) {
      return absl::FailedPreconditionError("launch names a descriptor that was never set");
    }
    writer.Put(static_cast<uint8_t>(descriptor->kind()));
    writer.Put(static_cast<uint16_t>(descriptor->settings().size()));
    writer.PutBytes(descriptor->settings().data(), descriptor->settings().size());
  }
  return device_->LaunchWithDescriptors(stream, kernel, section, buffers, params);
}

ScopedDescriptor::~ScopedDescriptor() {
  if (descriptor_ == nullptr) return;
  absl::Status status = dnn_->Destroy(*stream_, descriptor_);
  if (!status.ok()) Log(LogLevel::kWarning, absl::StrCat("destroy descriptor: ", status.message()));
}

}  // namespace vgpu
