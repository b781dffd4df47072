// The virtual DNN/BLAS API: cuDNN-shaped create / set / destroy calls for the descriptors the
// op kernels use (protocol/descriptors.h), and the launch that names them. It is the only way
// kernels obtain descriptors; kernels create, set and destroy descriptors around every launch,
// as TensorFlow's cuDNN kernels do. What crosses to the backing executor is decided here:
//
//  reuse mode (the method of docs/method.md, the default):
//    warm-up (until the first iteration completes): create really creates the descriptor (on
//    the executor too), set writes its settings, destroy retains it (locally) and appends it to
//    the queue of (creating stream, kind);
//    steady state: create takes the head of that queue and moves it to the tail, set compares
//    and updates the stored settings locally when they differ, destroy answers locally.
//    Nothing is forwarded; a launch carries the settings of its descriptors inline.
//  forward mode (classic API remoting, for comparison): every create, set and destroy is a
//    synchronous call the executor really executes; a launch names descriptors by id.
//
// Both modes launch the same kernels with the same settings, so results are bit-identical.
// Thread-safe (TensorFlow runs kernels of one stream from several threads).
#ifndef VGPU_CLIENT_DNN_API_H_
#define VGPU_CLIENT_DNN_API_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugin/client/descriptor_queues.h"
#include "plugin/client/iteration_detector.h"
#include "plugin/common/config.h"
#include "plugin/protocol/command.h"
#include "plugin/protocol/descriptors.h"

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
  Descriptor(DescriptorKind kind, uint64_t id, uint64_t stream)
      : kind_(kind), id_(id), stream_(stream) {}
  const DescriptorKind kind_;
  const uint64_t id_;      // executor-side id (0: the descriptor exists only here)
  const uint64_t stream_;  // the stream it was created on
  bool retained_ = false;  // in its stream's queue (reuse mode)
  std::atomic<bool> in_use_{false};
  uint16_t settings_size_ = 0;
  alignas(8) uint8_t settings_[kMaxDescriptorSettingsSize] = {};
};

// The role of the op launching a kernel, for iteration detection (forward or backward
// propagation). Set per thread by the op-kernel trampoline around each Compute.
class ScopedLaunchRole {
 public:
  explicit ScopedLaunchRole(LaunchRole role);
  ~ScopedLaunchRole();
  static LaunchRole Current();

 private:
  LaunchRole previous_;
};

class DnnApi {
 public:
  DnnApi(DeviceClient* device, DescriptorMode mode) : device_(device), mode_(mode) {}
  ~DnnApi();

  DescriptorMode mode() const { return mode_; }

  // cudnnCreate*Descriptor on `stream`.
  absl::StatusOr<Descriptor*> Create(ClientStream& stream, DescriptorKind kind);

  // cudnnSet*Descriptor: `settings`' kind must match the descriptor's.
  template <typename Settings>
  absl::Status Set(ClientStream& stream, Descriptor* descriptor, const Settings& settings) {
    return SetBytes(stream, descriptor, DescriptorTraits<Settings>::kKind, &settings,
                    sizeof(Settings));
  }

  // cudnnDestroy*Descriptor. The framework must not use `descriptor` afterwards.
  absl::Status Destroy(ClientStream& stream, Descriptor* descriptor);

  // Launches `kernel` on `stream` with `descriptors` (each set), the device `buffers` (inputs
  // first, the output last: the convention iteration detection relies on) and the kernel's
  // parameter block. Posted: returns at once.
  absl::Status Launch(ClientStream& stream, KernelId kernel,
                      absl::Span<Descriptor* const> descriptors,
                      absl::Span<const BufferArg> buffers, absl::Span<const uint8_t> params);

  // The host waits for the device (a device or stream synchronisation): a possible inference
  // iteration boundary (IterationDetector::ObserveHostWait).
  void ObserveHostWait() { detector_.ObserveHostWait(); }

  // An explicit iteration boundary (vgpu.mark_step()).
  void MarkStep();

  // `observer` is called with the iteration count each time an iteration completes (detected
  // by a launch, or marked): the hook of VGPU_TRACE's step records. Set it before the device is
  // used (it is not synchronised with launches). It runs on the launching or marking thread and
  // must not call back into this DnnApi.
  void SetIterationObserver(std::function<void(uint64_t iterations)> observer) {
    iteration_observer_ = std::move(observer);
  }

  // Frees the descriptors retained for a stream that is being destroyed.
  void ReleaseStream(uint64_t stream_id);

  const IterationDetector& detector() const { return detector_; }
  const DescriptorQueues& queues() const { return queues_; }
  // JSON object: mode, warmup_complete, inference_warmup, iterations_detected, queues [{stream, kind, length}].
  std::string StateJson() const;

 private:
  absl::Status SetBytes(ClientStream& stream, Descriptor* descriptor, DescriptorKind kind,
                        const void* settings, size_t size);
  // A synchronous descriptor call the executor executes (one round trip).
  absl::Status Forward(CommandKind kind, uint64_t id, absl::Span<const uint8_t> params);
  // Frees a descriptor for real (and its executor-side object, if it has one).
  void Free(Descriptor* descriptor);
  bool ReuseActive() const {
    return mode_ == DescriptorMode::kReuse && detector_.warmup_complete();
  }

  DeviceClient* const device_;
  const DescriptorMode mode_;
  DescriptorQueues queues_;
  IterationDetector detector_;
  std::function<void(uint64_t)> iteration_observer_;
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
      : dnn_(other.dnn_), stream_(other.stream_),
        descriptor_(std::exchange(other.descriptor_, nullptr)) {}
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
