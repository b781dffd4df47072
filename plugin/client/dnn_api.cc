// The virtual DNN/BLAS API in reuse and forward mode (see dnn_api.h).
#include "plugin/client/dnn_api.h"

#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "plugin/client/device_client.h"
#include "plugin/common/log.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/launch_params.h"

namespace vgpu {
namespace {

thread_local LaunchRole current_role = LaunchRole::kForward;
std::atomic<uint64_t> next_descriptor_id{1};

}  // namespace

ScopedLaunchRole::ScopedLaunchRole(LaunchRole role) : previous_(current_role) {
  current_role = role;
}
ScopedLaunchRole::~ScopedLaunchRole() { current_role = previous_; }
LaunchRole ScopedLaunchRole::Current() { return current_role; }

DnnApi::~DnnApi() {
  // Retained descriptors of streams never destroyed are released with the API (the executor
  // session ends with the client, taking its descriptor objects along).
  for (const auto& [stream, kind, length] : queues_.Lengths()) {
    for (void* descriptor : queues_.Drain(stream)) delete static_cast<Descriptor*>(descriptor);
  }
}

absl::Status DnnApi::Forward(CommandKind kind, uint64_t id, absl::Span<const uint8_t> params) {
  Command command = device_->MakeCommand(kind);
  command.object = id;
  command.params.assign(params.begin(), params.end());
  return device_->Call(std::move(command)).status;
}

absl::StatusOr<Descriptor*> DnnApi::Create(ClientStream& stream, DescriptorKind kind) {
  ClientCounters& counters = device_->counters();
  if (ReuseActive()) {
    // Steady state, claims 1, 4, 5: the head of this stream's queue, moved to the tail.
    counters.CountDescriptorCall(kind, DescriptorVerb::kCreate, /*forwarded=*/false);
    void* reused = queues_.Rotate(stream.id(), kind, [](void* candidate) {
      bool expected = false;
      return static_cast<Descriptor*>(candidate)->in_use_.compare_exchange_strong(expected, true);
    });
    if (reused != nullptr) return static_cast<Descriptor*>(reused);
    counters.CountQueueMiss();  // a call sequence longer than the warm-up's: a local object
    auto* descriptor = new Descriptor(kind, /*id=*/0, stream.id());
    descriptor->in_use_.store(true);
    return descriptor;
  }
  // Forward mode, and the warm-up of reuse mode (claim 2): the executor really creates it.
  counters.CountDescriptorCall(kind, DescriptorVerb::kCreate, /*forwarded=*/true);
  auto* descriptor = new Descriptor(kind, next_descriptor_id.fetch_add(1), stream.id());
  const uint8_t kind_byte = static_cast<uint8_t>(kind);
  absl::Status created = Forward(CommandKind::kDescriptorCreate, descriptor->id_, {&kind_byte, 1});
  if (!created.ok()) {
    delete descriptor;
    return created;
  }
  descriptor->in_use_.store(true);
  return descriptor;
}

absl::Status DnnApi::SetBytes(ClientStream& stream, Descriptor* descriptor, DescriptorKind kind,
                              const void* settings, size_t size) {
  if (descriptor == nullptr || descriptor->kind() != kind) {
    return absl::InvalidArgumentError(absl::StrCat(
        "setting ", DescriptorKindName(kind), " settings on a ",
        descriptor == nullptr ? "null" : DescriptorKindName(descriptor->kind()), " descriptor"));
  }
  ClientCounters& counters = device_->counters();
  const bool forward = mode_ == DescriptorMode::kForward ||
                       (descriptor->id_ != 0 && !descriptor->retained_ && !ReuseActive());
  if (forward) {
    counters.CountDescriptorCall(kind, DescriptorVerb::kSet, /*forwarded=*/true);
    VGPU_RETURN_IF_ERROR(Forward(CommandKind::kDescriptorSet, descriptor->id_,
                                 {static_cast<const uint8_t*>(settings), size}));
  } else {
    counters.CountDescriptorCall(kind, DescriptorVerb::kSet, /*forwarded=*/false);
    // Beyond the patent: a reused descriptor whose stored settings differ (a new shape, a last
    // partial batch) is updated here, locally, so a launch is never stale.
    if (descriptor->retained_ &&
        (descriptor->settings_size_ != size ||
         std::memcmp(descriptor->settings_, settings, size) != 0)) {
      counters.CountSettingsUpdate();
    }
  }
  std::memcpy(descriptor->settings_, settings, size);
  descriptor->settings_size_ = static_cast<uint16_t>(size);
  return absl::OkStatus();
}

absl::Status DnnApi::Destroy(ClientStream& stream, Descriptor* descriptor) {
  if (descriptor == nullptr) return absl::OkStatus();
  ClientCounters& counters = device_->counters();
  if (mode_ == DescriptorMode::kForward) {
    counters.CountDescriptorCall(descriptor->kind(), DescriptorVerb::kDestroy, /*forwarded=*/true);
    absl::Status status = Forward(CommandKind::kDescriptorDestroy, descriptor->id_, {});
    delete descriptor;
    return status;
  }
  counters.CountDescriptorCall(descriptor->kind(), DescriptorVerb::kDestroy, /*forwarded=*/false);
  if (descriptor->retained_) {  // steady state: already back at the tail of its queue
    descriptor->in_use_.store(false);
    return absl::OkStatus();
  }
  // Claims 3 and 6: keep the data; its pointer goes to the queue of the creating stream.
  descriptor->retained_ = true;
  descriptor->in_use_.store(false);
  if (!queues_.Retain(descriptor->stream_, descriptor->kind(), descriptor)) {
    Free(descriptor);  // the queue is full: free it for real
  }
  return absl::OkStatus();
}

void DnnApi::Free(Descriptor* descriptor) {
  if (descriptor->id_ != 0) {
    absl::Status status = Forward(CommandKind::kDescriptorDestroy, descriptor->id_, {});
    if (!status.ok()) Log(LogLevel::kWarning, absl::StrCat("free descriptor: ", status.message()));
  }
  delete descriptor;
}

namespace {

// What a launch ran, for the detector's inference runs: FNV-1a over the kernel id, the
// descriptor section (the settings) and the parameters. Buffer addresses are left out (they
// change from run to run).
uint64_t LaunchSignature(KernelId kernel, absl::Span<const uint8_t> section,
                         absl::Span<const uint8_t> params) {
  uint64_t hash = 0xcbf29ce484222325ull;
  auto mix = [&hash](uint8_t byte) { hash = (hash ^ byte) * 0x100000001b3ull; };
  const uint32_t id = static_cast<uint32_t>(kernel);
  for (int i = 0; i < 4; ++i) mix(static_cast<uint8_t>(id >> (8 * i)));
  for (uint8_t byte : section) mix(byte);
  mix(0xff);
  for (uint8_t byte : params) mix(byte);
  return hash;
}

}  // namespace

absl::Status DnnApi::Launch(ClientStream& stream, KernelId kernel,
                            absl::Span<Descriptor* const> descriptors,
                            absl::Span<const BufferArg> buffers,
                            absl::Span<const uint8_t> params) {
  if (descriptors.size() > 255) return absl::InvalidArgumentError("too many descriptors");
  // Inline room for the settings of a few descriptors (a tensor's are 72 bytes): no heap
  // allocation per launch.
  absl::InlinedVector<uint8_t, 320> section;
  BasicParamWriter writer(&section);
  writer.Put(static_cast<uint8_t>(descriptors.size()));
  for (const Descriptor* descriptor : descriptors) {
    if (descriptor == nullptr || !descriptor->is_set()) {
      return absl::FailedPreconditionError("launch names a descriptor that was never set");
    }
    if (mode_ == DescriptorMode::kForward) {
      writer.Put(static_cast<uint8_t>(static_cast<uint8_t>(descriptor->kind()) |
                                      kDescriptorReference));
      writer.Put(static_cast<uint16_t>(sizeof(uint64_t)));
      writer.Put(descriptor->id_);
    } else {
      writer.Put(static_cast<uint8_t>(descriptor->kind()));
      writer.Put(static_cast<uint16_t>(descriptor->settings().size()));
      writer.PutBytes(descriptor->settings().data(), descriptor->settings().size());
    }
  }
  // Claim 8: the first computation's output, and backward computations' inputs.
  absl::InlinedVector<uint64_t, 6> inputs;
  for (size_t i = 0; i + 1 < buffers.size(); ++i) inputs.push_back(buffers[i].address);
  // The signature only serves to recognise repeated inference runs before the warm-up ends.
  const uint64_t signature =
      detector_.warmup_complete() ? 0 : LaunchSignature(kernel, section, params);
  const bool completed = detector_.Observe(ScopedLaunchRole::Current(), inputs,
                                           buffers.empty() ? 0 : buffers.back().address, signature);
  if (completed && iteration_observer_) iteration_observer_(detector_.iterations());
  return device_->PostLaunch(stream, kernel, section, buffers, params);
}

void DnnApi::MarkStep() {
  const uint64_t before = detector_.iterations();
  detector_.MarkStep();
  const uint64_t after = detector_.iterations();
  if (after != before && iteration_observer_) iteration_observer_(after);
}

void DnnApi::ReleaseStream(uint64_t stream_id) {
  for (void* descriptor : queues_.Drain(stream_id)) Free(static_cast<Descriptor*>(descriptor));
}

std::string DnnApi::StateJson() const {
  std::string queues;
  for (const auto& [stream, kind, length] : queues_.Lengths()) {
    absl::StrAppend(&queues, queues.empty() ? "" : ", ", "{\"stream\": ", stream,
                    ", \"kind\": \"", DescriptorKindName(kind), "\", \"length\": ", length, "}");
  }
  return absl::StrCat("{\"mode\": \"", DescriptorModeName(mode_), "\", \"warmup_complete\": ",
                      detector_.warmup_complete() ? "true" : "false",
                      ", \"inference_warmup\": ", detector_.inference_warmup() ? "true" : "false",
                      ", \"iterations_detected\": ", detector_.iterations(), ", \"queues\": [",
                      queues, "]}");
}

ScopedDescriptor::~ScopedDescriptor() {
  if (descriptor_ == nullptr) return;
  absl::Status status = dnn_->Destroy(*stream_, descriptor_);
  if (!status.ok()) Log(LogLevel::kWarning, absl::StrCat("destroy descriptor: ", status.message()));
}

}  // namespace vgpu
