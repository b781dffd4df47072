// The virtual DNN/BLAS API: cuDNN-shaped create / set / destroy calls for the descriptors the
// op kernels use (protocol/descriptors.h), and the launch that names them. It is the only way
// kernels obtain descriptors. Kernels create, set and destroy descriptors around every launch,
// as TensorFlow's cuDNN kernels do; what crosses to the backing executor is this API's business:
// here every call is answered locally and a launch carries the settings of its descriptors
// inline. (Per-stream reuse queues and a forward mode for comparison: METHOD.md, issue 4.)
#ifndef VGPU_CLIENT_DNN_API_H_
#define VGPU_CLIENT_DNN_API_H_

#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/command.h"

namespace vgpu {

class ClientStream;
class DeviceClient;

// A descriptor object; its address is what the framework holds. Owned by the DnnApi.
class Descriptor {
 public:
  DescriptorKind kind() const { return kind_; }
  bool is_set() const { return settings_size_ != 0; }
  absl::Span<const uint8_t> settings() const { return {settings_, settings_size_}; }

 private:
  friend class DnnApi;
  explicit Descriptor(DescriptorKind kind) : kind_(kind) {}
  DescriptorKind kind_;
  uint16_t settings_size_ = 0;
  alignas(8) uint8_t settings_[kMaxDescriptorSettingsSize] = {};
};

class DnnApi {
 public:
  explicit DnnApi(DeviceClient* device) : device_(device) {}

  // cudnnCreate*Descriptor. The descriptor is tied to `stream` (the stream it was created on).
  absl::StatusOr<Descriptor*> Create(ClientStream& stream, DescriptorKind kind);

  // cudnnSet*Descriptor: stores `settings` (whose kind must match the descriptor's).
  template <typename Settings>
  absl::Status Set(ClientStream& stream, Descriptor* descriptor, const Settings& settings) {
    return SetBytes(stream, descriptor, DescriptorTraits<Settings>::kKind, &settings,
                    sizeof(Settings));
  }

  // cudnnDestroy*Descriptor. `descriptor` must not be used afterwards.
  absl::Status Destroy(ClientStream& stream, Descriptor* descriptor);

  // Launches `kernel` on `stream` with the settings of `descriptors` (each must be set), the
  // device `buffers` and the kernel's parameter block. Posted: returns at once.
  absl::Status Launch(ClientStream& stream, KernelId kernel,
                      absl::Span<Descriptor* const> descriptors,
                      absl::Span<const BufferArg> buffers, absl::Span<const uint8_t> params);

 private:
  absl::Status SetBytes(ClientStream& stream, Descriptor* descriptor, DescriptorKind kind,
                        const void* settings, size_t size);

  DeviceClient* const device_;
};

// RAII ownership of one descriptor for the duration of a kernel invocation: created and set on
// construction, destroyed when it goes out of scope (as TensorFlow's cuDNN wrappers do).
class ScopedDescriptor {
 public:
  template <typename Settings>
  static absl::StatusOr<ScopedDescriptor> Make(DnnApi& dnn, ClientStream& stream,
                                               const Settings& settings) {
    absl::StatusOr<Descriptor*> created =
        dnn.Create(stream, DescriptorTraits<Settings>::kKind);
    if (!created.ok()) return created.status();
    ScopedDescriptor scoped(&dnn, &stream, *created);
    absl::Status set = dnn.Set(stream, *created, settings);
    if (!set.ok()) return set;
    return scoped;
  }
  ScopedDescriptor(ScopedDescriptor&& other) noexcept
      : dnn_(other.dnn_), stream_(other.stream_), descriptor_(std::exchange(other.descriptor_, nullptr)) {}
  ScopedDescriptor& operator=(ScopedDescriptor&&) = delete;
  ScopedDescriptor(const ScopedDescriptor&) = delete;
  ~ScopedDescriptor();

  Descriptor* get() const { return descriptor_; }

 private:
  ScopedDescriptor(DnnApi* dnn, ClientStream* stream, Descriptor* descriptor)
      : dnn_(dnn), stream_(stream), descriptor_(descriptor) {}
  DnnApi* dnn_;
  ClientStream* stream_;
  Descriptor* descriptor_;
};

}  // namespace vgpu

#endif  // VGPU_CLIENT_DNN_API_H_
