// DeviceClient and its stream, event and timer objects (see device_client.h).
#include "plugin/client/device_client.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <new>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "plugin/backend/device_address.h"
#include "plugin/common/activity.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/wire_format.h"

namespace vgpu {
namespace {

// Stream and event ids are unique in the process, hence in every session.
std::atomic<uint64_t> next_object_id{1};

// The stream whose host callback this thread is running (host callbacks run on their stream's
// worker and occupy the stream, as on a real GPU), or nullptr.
thread_local const ClientStream* running_callback_of = nullptr;

uint64_t NowNanoseconds() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

ClientEvent::State ClientEvent::Query() {
  std::lock_guard<std::mutex> lock(mu_);
  // A reached event is complete even on a failed stream: the error is reported by the stream's
  // status (TensorFlow's event manager aborts the process on an event in the error state).
  return reached_ >= recorded_ ? State::kComplete : State::kPending;
}

DeviceClient* ClientEvent::recorder() const {
  std::lock_guard<std::mutex> lock(mu_);
  return recorder_;
}

absl::Status ClientEvent::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = recorded_;
  cv_.wait(lock, [&] { return reached_ >= target; });
  return error_;
}

uint64_t ClientTimer::ElapsedNanoseconds() const {
  uint64_t start = start_ns_.load();
  uint64_t stop = stop_ns_.load();
  return stop > start ? stop - start : 0;
}

DeviceClient::DeviceClient(int ordinal, uint32_t backend_device, Transport* transport,
                           NotificationHub* hub, DescriptorMode descriptor_mode)
    : ordinal_(ordinal),
      backend_device_(backend_device),
      transport_(transport),
      hub_(hub),
      dnn_(this, descriptor_mode),
      tracks_completion_(!transport->DeliversNotificationsInline() &&
                         LocalSynchronizationFromEnvironment()),
      // Remote: needs the notifications' tracking and a transport that takes copies' bytes. In
      // process this client takes them itself (CopyHostToDevice).
      completes_events_early_(EarlyEventsFromEnvironment() &&
                              (tracks_completion_ ? transport->CapturesHostDataWhenPosted()
                                                  : transport->DeliversNotificationsInline())),
      captures_host_data_(completes_events_early_ && !transport->CapturesHostDataWhenPosted()),
      tracks_posts_(tracks_completion_ || completes_events_early_),
      staging_(captures_host_data_ ? StagingPool::Create(kStagingKeptBytes) : nullptr) {}

ClientStream::~ClientStream() { device_->ForgetStream(this); }

void ClientStream::Settle(uint64_t position) {
  uint64_t current = settled_.load(std::memory_order_relaxed);
  while (current < position &&
         !settled_.compare_exchange_weak(current, position, std::memory_order_release,
                                         std::memory_order_relaxed)) {
  }
}

Command DeviceClient::MakeCommand(CommandKind kind) const {
  Command command;
  command.kind = kind;
  command.device = backend_device_;
  if (activity::Enabled()) {
    command.activity.recorded = true;
    command.activity.op = activity::CurrentOp();
    command.activity.op_name = activity::CurrentOpName();
    command.activity.device = static_cast<uint32_t>(ordinal_);
  }
  return command;
}

Command DeviceClient::MakeCommand(CommandKind kind, const ClientStream& stream) const {
  Command command = MakeCommand(kind);
  command.stream = stream.id();
  return command;
}

void DeviceClient::SetPeers(std::vector<DeviceClient*> peers) {
  peers_ = std::move(peers);
  for (const DeviceClient* peer : peers_) {
    if (peer != nullptr && peer != this && SharesBackendWith(*peer)) {
      completes_events_early_ = false;
      captures_host_data_ = false;
      tracks_posts_ = tracks_completion_;
    }
  }
}

DeviceClient* DeviceClient::OwnerOf(uint64_t address) const {
  uint32_t device;
  uint64_t offset;
  if (!DecodeDeviceAddress(address, &device, &offset)) return nullptr;
  if (device == static_cast<uint32_t>(ordinal_)) return const_cast<DeviceClient*>(this);
  return device < peers_.size() ? peers_[device] : nullptr;
}

uint64_t DeviceClient::ToClientAddress(uint64_t backend_address) const {
  uint32_t device;
  uint64_t offset;
  if (!DecodeDeviceAddress(backend_address, &device, &offset)) return backend_address;
  return MakeDeviceAddress(static_cast<uint32_t>(ordinal_), offset);
}

absl::StatusOr<uint64_t> DeviceClient::ToBackendAddress(uint64_t address) const {
  uint32_t device;
  uint64_t offset;
  if (!DecodeDeviceAddress(address, &device, &offset)) return address;
  const DeviceClient* owner = OwnerOf(address);
  if (owner == nullptr || (owner != this && !SharesBackendWith(*owner))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPU:", ordinal_, " was given memory of GPU:", device,
        owner == nullptr ? ", which does not exist"
                         : ", which another backend serves (only copies may cross backends)"));
  }
  return MakeDeviceAddress(owner->backend_device_, offset);
}

absl::Status DeviceClient::TranslateAddresses(Command& command) const {
  switch (command.kind) {
    case CommandKind::kMemcpyHtoD:
    case CommandKind::kMemcpyDtoH:
    case CommandKind::kMemcpyDtoD:
    case CommandKind::kMemcpyNow:
    case CommandKind::kMemset:
    case CommandKind::kFree: {
      VGPU_ASSIGN_OR_RETURN(command.src, ToBackendAddress(command.src));
      VGPU_ASSIGN_OR_RETURN(command.dst, ToBackendAddress(command.dst));
      return absl::OkStatus();
    }
    case CommandKind::kLaunch:
      for (BufferArg& buffer : command.buffers) {
        VGPU_ASSIGN_OR_RETURN(buffer.address, ToBackendAddress(buffer.address));
      }
      return absl::OkStatus();
    default:
      return absl::OkStatus();  // no device addresses
  }
}

absl::Status DeviceClient::Post(Command command) {
  VGPU_RETURN_IF_ERROR(TranslateAddresses(command));
  counters_.CountCommand(command.kind, /*round_trip=*/false);
  counters_.AddBytesSent(wire::kHeaderBytes + wire::CommandPayloadLength(command));
  if (command.kind == CommandKind::kMemcpyDtoH) {  // its data comes back in a data frame
    counters_.AddBytesReceived(wire::kHeaderBytes + command.size);
  }
  return transport_->Post(std::move(command));
}

Reply DeviceClient::Call(Command command) {
  if (absl::Status translated = TranslateAddresses(command); !translated.ok()) {
    Reply refused;
    refused.status = std::move(translated);
    return refused;
  }
  counters_.CountCommand(command.kind, /*round_trip=*/true);
  counters_.AddBytesSent(wire::kHeaderBytes + wire::CommandPayloadLength(command));
  const uint64_t returned_data = command.host_dst != nullptr ? command.size : 0;
  // While a profile is taken: the wait, as a round trip of the issuing op.
  const bool recorded = command.activity.recorded && activity::Enabled();
  activity::Record record;
  if (recorded) {
    activity::CountRoundTrip();
    record.kind = activity::Kind::kCall;
    record.device = command.activity.device;
    record.name = activity::Intern(CommandKindName(command.kind));
    record.op = command.activity.op;
    record.op_name = command.activity.op_name;
    record.start_ns = activity::NowNs();
  }
  Reply reply = transport_->Call(std::move(command));
  if (recorded) {
    record.end_ns = activity::NowNs();
    activity::Add(record);
  }
  counters_.AddBytesReceived(wire::kHeaderBytes + wire::ReplyPayloadLength(reply) +
                             returned_data);
  return reply;
}

absl::StatusOr<uint64_t> DeviceClient::Allocate(uint64_t size) {
  Command command = MakeCommand(CommandKind::kAllocate);
  command.size = size;
  Reply reply = Call(std::move(command));
  if (!reply.status.ok()) return reply.status;
  counters_.AddAllocation(size);
  return ToClientAddress(reply.value);
}

absl::Status DeviceClient::Free(uint64_t address, uint64_t size) {
  AwaitFences();  // a copy the host was told is complete may still write there
  Command command = MakeCommand(CommandKind::kFree);
  command.dst = address;
  Reply reply = Call(std::move(command));
  if (reply.status.ok()) counters_.AddFree(size);
  return reply.status;
}

absl::StatusOr<MemoryInfo> DeviceClient::QueryMemory() {
  Reply reply = Call(MakeCommand(CommandKind::kMemoryInfo));
  if (!reply.status.ok()) return reply.status;
  return reply.memory;
}

absl::StatusOr<std::unique_ptr<ClientStream>> DeviceClient::CreateStream() {
  Command command = MakeCommand(CommandKind::kCreateStream);
  command.stream = next_object_id.fetch_add(1);
  const uint64_t id = command.stream;
  Reply reply = Call(std::move(command));
  if (!reply.status.ok()) return reply.status;
  auto stream = std::make_unique<ClientStream>(this, id);
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_.push_back(stream.get());
  return stream;
}

absl::Status DeviceClient::DestroyStream(std::unique_ptr<ClientStream> stream) {
  if (stream == nullptr) return absl::OkStatus();
  ForgetStream(stream.get());
  dnn_.ReleaseStream(stream->id());
  Command command = MakeCommand(CommandKind::kDestroyStream);
  command.stream = stream->id();
  absl::Status status = Call(std::move(command)).status;
  // Callbacks already notified still reference the stream's counters: let them finish.
  if (running_callback_of != stream.get()) {
    std::unique_lock<std::mutex> lock(stream->mu_);
    stream->cv_.wait(lock, [&] { return stream->callbacks_done_ >= stream->callbacks_posted_; });
  }
  return status;
}

absl::Status DeviceClient::CopyHostToDevice(ClientStream& stream, uint64_t dst, const void* src,
                                            uint64_t size) {
  Command command = MakeCommand(CommandKind::kMemcpyHtoD, stream);
  command.dst = dst;
  command.host_src = src;
  command.size = size;
  if (captures_host_data_ && size > 0 && size <= kMaxTakenCopyBytes) {
    // In process the stream reads the source when it reaches the copy: take the bytes now, so
    // that an event recorded after the copy may complete at once (RecordEvent). Past the bound,
    // or without memory for them, the copy reads the source in place and the event waits.
    std::shared_ptr<uint8_t> taken = staging_->Take(size);
    if (taken != nullptr) {
      std::memcpy(taken.get(), src, size);
      command.host_src = taken.get();
      command.host_storage = std::move(taken);
    }
  }
  counters_.AddBytesToDevice(size);
  return PostOnStream(stream, std::move(command));
}

absl::Status DeviceClient::CopyHostToDevice(ClientStream& stream, uint64_t dst, const void* src,
                                            uint64_t size, std::shared_ptr<const void> owner) {
  Command command = MakeCommand(CommandKind::kMemcpyHtoD, stream);
  command.dst = dst;
  command.host_src = src;
  command.size = size;
  // Held, not taken: the bytes cannot change while `owner` lives, so the copy counts as taken
  // for early events (HostCanObserve) without copying them.
  command.host_storage = std::move(owner);
  counters_.AddBytesToDevice(size);
  return PostOnStream(stream, std::move(command));
}

absl::Status DeviceClient::CopyDeviceToHost(ClientStream& stream, void* dst, uint64_t src,
                                            uint64_t size) {
  Command command = MakeCommand(CommandKind::kMemcpyDtoH, stream);
  command.src = src;
  command.host_dst = dst;
  command.size = size;
  counters_.AddBytesFromDevice(size);
  return PostOnStream(stream, std::move(command));
}

absl::Status DeviceClient::CopyDeviceToDevice(ClientStream& stream, uint64_t dst, uint64_t src,
                                              uint64_t size) {
  if (DeviceClient* destination = OwnerOf(dst);
      destination != nullptr && destination != this && !SharesBackendWith(*destination)) {
    return CopyToOtherBackend(stream, *destination, dst, src, size);
  }
  Command command = MakeCommand(CommandKind::kMemcpyDtoD, stream);
  command.dst = dst;
  command.src = src;
  command.size = size;
  return PostOnStream(stream, std::move(command));
}

absl::Status DeviceClient::Memset(ClientStream& stream, uint64_t dst, uint32_t pattern,
                                  uint8_t pattern_bytes, uint64_t size) {
  Command command = MakeCommand(CommandKind::kMemset, stream);
  command.dst = dst;
  command.pattern = pattern;
  command.pattern_bytes = pattern_bytes;
  command.size = size;
  return PostOnStream(stream, std::move(command));
}

absl::Status DeviceClient::PostLaunch(ClientStream& stream, KernelId kernel,
                                      absl::Span<const uint8_t> descriptor_section,
                                      absl::Span<const BufferArg> buffers,
                                      absl::Span<const uint8_t> params) {
  Command command = MakeCommand(CommandKind::kLaunch, stream);
  command.object = static_cast<uint64_t>(kernel);
  command.buffers.assign(buffers.begin(), buffers.end());
  command.params.assign(params.begin(), params.end());
  command.descriptors.assign(descriptor_section.begin(), descriptor_section.end());
  return PostOnStream(stream, std::move(command));
}

absl::Status DeviceClient::CopyToOtherBackend(ClientStream& stream, DeviceClient& destination,
                                              uint64_t dst, uint64_t src, uint64_t size) {
  if (size == 0) return absl::OkStatus();
  if (running_callback_of == &stream) {
    return absl::FailedPreconditionError(
        "a host callback cannot copy to another backend on the stream it runs on");
  }
  // Read the bytes into host memory in `stream`'s order and wait for them there (an event: the
  // stream's error, if any, is reported without being taken), then write them on the
  // destination's backend before returning.
  std::unique_ptr<uint8_t[]> staging(new (std::nothrow) uint8_t[size]);
  if (staging == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "no host memory to stage a copy of ", size, " bytes between backends"));
  }
  VGPU_RETURN_IF_ERROR(CopyDeviceToHost(stream, staging.get(), src, size));
  std::shared_ptr<ClientEvent> arrived = CreateEvent();
  absl::Status status = RecordEvent(stream, arrived);
  if (status.ok()) {
    status = arrived->Wait();
  } else {
    // The read may still be queued: the staging buffer must outlive it.
    SynchronizeStream(stream).IgnoreError();
  }
  DestroyEvent(*arrived).IgnoreError();
  if (!status.ok()) return status;
  return destination.CopyNow(nullptr, dst, staging.get(), 0, size);
}

absl::Status DeviceClient::CopyNowAcrossBackends(DeviceClient* destination, uint64_t dst,
                                                 DeviceClient* source, uint64_t src,
                                                 uint64_t size) {
  if (size == 0) return absl::OkStatus();
  std::unique_ptr<uint8_t[]> staging(new (std::nothrow) uint8_t[size]);
  if (staging == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "no host memory to stage a copy of ", size, " bytes between backends"));
  }
  VGPU_RETURN_IF_ERROR(source->CopyNow(staging.get(), 0, nullptr, src, size));
  return destination->CopyNow(nullptr, dst, staging.get(), 0, size);
}

absl::Status DeviceClient::CopyNow(void* host_dst, uint64_t dst, const void* host_src,
                                   uint64_t src, uint64_t size) {
  if (host_dst == nullptr && host_src == nullptr) {  // device to device: maybe across backends
    DeviceClient* destination = OwnerOf(dst);
    DeviceClient* source = OwnerOf(src);
    if (destination != nullptr && source != nullptr && !destination->SharesBackendWith(*source)) {
      return CopyNowAcrossBackends(destination, dst, source, src, size);
    }
  }
  AwaitFences();  // outside the streams: ordered after early-completed copies by waiting
  Command command = MakeCommand(CommandKind::kMemcpyNow);
  command.host_dst = host_dst;
  command.dst = dst;
  command.host_src = host_src;
  command.src = src;
  command.size = size;
  if (host_src != nullptr) counters_.AddBytesToDevice(size);
  if (host_dst != nullptr) counters_.AddBytesFromDevice(size);
  return Call(std::move(command)).status;
}

std::shared_ptr<ClientEvent> DeviceClient::CreateEvent() {
  return std::make_shared<ClientEvent>(next_object_id.fetch_add(1));
}

absl::Status DeviceClient::DestroyEvent(const ClientEvent& event) {
  // The backend that saw its recordings holds it.
  DeviceClient* recorder = event.recorder();
  if (recorder != nullptr && recorder != this && !SharesBackendWith(*recorder)) {
    return recorder->DestroyEvent(event);
  }
  // A fence's waits name the event: it must outlive them on the backend.
  AwaitFences(event.id());
  Command command = MakeCommand(CommandKind::kDestroyEvent);
  command.object = event.id();
  return Post(std::move(command));
}

absl::Status DeviceClient::RecordEvent(ClientStream& stream,
                                       const std::shared_ptr<ClientEvent>& event) {
  return Record(stream, event, /*may_complete_early=*/true);
}

absl::Status DeviceClient::Record(ClientStream& stream, const std::shared_ptr<ClientEvent>& event,
                                  bool may_complete_early) {
  if (&stream.device() != this) return stream.device().Record(stream, event, may_complete_early);
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(event->mu_);
    generation = ++event->recorded_;
    event->recorder_ = this;
  }
  Command command = MakeCommand(CommandKind::kRecordEvent, stream);
  command.object = event->id();
  bool completed_early = false;
  absl::Status status = PostWithNotification(
      stream, std::move(command),
      [event, generation](const absl::Status& stream_status) {
        std::lock_guard<std::mutex> lock(event->mu_);
        if (generation > event->reached_) event->reached_ = generation;
        if (!stream_status.ok() && event->error_.ok()) event->error_ = stream_status;
        event->cv_.notify_all();
      },
      /*on_callback_thread=*/false,
      may_complete_early && completes_events_early_ ? &completed_early : nullptr);
  if (!status.ok() || completed_early) {
    if (completed_early) counters_.CountEarlyEvent();
    std::lock_guard<std::mutex> lock(event->mu_);
    if (generation > event->reached_) event->reached_ = generation;
    event->cv_.notify_all();
  }
  return status;
}

absl::Status DeviceClient::WaitForEvent(ClientStream& stream, const ClientEvent& event) {
  if (&stream.device() != this) return stream.device().WaitForEvent(stream, event);
  DeviceClient* recorder = event.recorder();
  if (recorder != nullptr && !SharesBackendWith(*recorder)) {
    // Recorded on another backend, whose events this one cannot see: the stream's later work
    // is posted once the recording is reached (its stream's error is that stream's to report).
    const_cast<ClientEvent&>(event).Wait().IgnoreError();
    return absl::OkStatus();
  }
  Command command = MakeCommand(CommandKind::kWaitEvent, stream);
  command.object = event.id();
  return PostOnStream(stream, std::move(command));
}

absl::Status DeviceClient::CreateStreamDependency(ClientStream& dependent, ClientStream& other) {
  // Each stream is driven by its own device (TensorFlow may pass another device's stream).
  std::shared_ptr<ClientEvent> marker = other.device().CreateEvent();
  // Waited for by the backend only: completing it early would gain nothing.
  absl::Status status = other.device().Record(other, marker, /*may_complete_early=*/false);
  if (status.ok()) status = dependent.device().WaitForEvent(dependent, *marker);
  absl::Status destroyed = other.device().DestroyEvent(*marker);
  return status.ok() ? destroyed : status;
}

absl::Status DeviceClient::PostNotify(ClientStream& stream, NotificationHub::Handler handler,
                                      bool on_callback_thread) {
  return PostWithNotification(stream, MakeCommand(CommandKind::kNotify, stream),
                              std::move(handler), on_callback_thread);
}

absl::Status DeviceClient::PostWithNotification(ClientStream& stream, Command command,
                                                NotificationHub::Handler handler,
                                                bool on_callback_thread, bool* completed_early) {
  std::unique_lock<std::mutex> order(stream.post_mu_, std::defer_lock);
  uint64_t position = 0;
  uint64_t fence = 0;
  const bool host_can_observe = HostCanObserve(command);
  if (TracksPostsOn(stream)) {
    order.lock();
    VGPU_RETURN_IF_ERROR(OrderAfterFences(stream));
    position = stream.posted_.load(std::memory_order_relaxed) + 1;
    // Early completion: nothing before the recording that the host could observe is unfinished.
    if (completed_early != nullptr && stream.last_host_visible_ <= stream.settled()) {
      fence = OpenFence(stream, command.object);
    }
    // Settled before the handler runs: whoever the handler wakes finds the stream settled.
    handler = [this, s = &stream, position, fence,
               inner = std::move(handler)](const absl::Status& status) {
      if (status.ok()) s->Settle(position);
      if (fence != 0) CloseFence(fence);
      NotificationReturned(*s, position);
      inner(status);
    };
  }
  command.token = hub_->Register(std::move(handler), on_callback_thread);
  const uint64_t token = command.token;
  absl::Status status = Post(std::move(command));
  if (!status.ok()) {
    hub_->Unregister(token);
    if (fence != 0) CloseFence(fence);
    return status;
  }
  if (position != 0) {
    stream.notification_posted_.store(position, std::memory_order_release);
    stream.posted_.store(position, std::memory_order_release);
    if (host_can_observe) stream.last_host_visible_ = position;
  }
  if (fence != 0) PublishFence(fence);
  if (completed_early != nullptr) *completed_early = fence != 0;
  return status;
}

bool DeviceClient::HostCanObserve(const Command& command) const {
  switch (command.kind) {
    case CommandKind::kMemcpyHtoD:
      // Not once its bytes are taken (by the transport when posted, or by CopyHostToDevice);
      // until then it reads the caller's memory.
      return captures_host_data_ && command.host_storage == nullptr && command.size > 0;
    case CommandKind::kWaitEvent:
    case CommandKind::kRecordEvent:
      return false;
    default:
      return true;
  }
}

absl::Status DeviceClient::OrderAfterFences(ClientStream& stream) {
  const uint64_t latest = fence_sequence_.load(std::memory_order_acquire);
  if (latest <= stream.fences_ordered_) return absl::OkStatus();
  std::vector<uint64_t> events;
  {
    std::lock_guard<std::mutex> lock(fence_mu_);
    for (const Fence& fence : fences_) {
      // Unpublished fences (sequence 0) are left out: their recordings are not posted yet.
      if (fence.sequence > stream.fences_ordered_ && fence.sequence <= latest &&
          fence.stream != &stream) {
        events.push_back(fence.event_id);
      }
    }
  }
  // A wait names the event's last recording when the backend receives it: that one, or a later
  // one, which can only wait for work posted before it (no cycle).
  for (uint64_t event_id : events) {
    Command wait = MakeCommand(CommandKind::kWaitEvent, stream);
    wait.object = event_id;
    VGPU_RETURN_IF_ERROR(Post(std::move(wait)));
    stream.posted_.fetch_add(1, std::memory_order_release);
  }
  stream.fences_ordered_ = latest;
  return absl::OkStatus();
}

uint64_t DeviceClient::OpenFence(const ClientStream& stream, uint64_t event_id) {
  std::lock_guard<std::mutex> lock(fence_mu_);
  const uint64_t id = ++last_fence_id_;
  fences_.push_back(Fence{id, /*sequence=*/0, &stream, event_id});
  return id;
}

void DeviceClient::PublishFence(uint64_t id) {
  std::lock_guard<std::mutex> lock(fence_mu_);
  auto fence = std::find_if(fences_.begin(), fences_.end(),
                            [&](const Fence& open) { return open.id == id; });
  if (fence == fences_.end()) return;  // its notification came first: nothing to order after
  fence->sequence = fence_sequence_.load(std::memory_order_relaxed) + 1;
  fence_sequence_.store(fence->sequence, std::memory_order_release);
}

void DeviceClient::CloseFence(uint64_t id) {
  std::lock_guard<std::mutex> lock(fence_mu_);
  fences_.erase(std::remove_if(fences_.begin(), fences_.end(),
                               [&](const Fence& fence) { return fence.id == id; }),
                fences_.end());
  fence_cv_.notify_all();
}

bool DeviceClient::AwaitFences(uint64_t event_id) {
  // A host callback runs on its stream's worker in process: a fence behind that stream would
  // never close while it waits. TensorFlow's callbacks do not touch device memory.
  if (!completes_events_early_ || running_callback_of != nullptr) return false;
  std::unique_lock<std::mutex> lock(fence_mu_);
  // Only those open now: fences opened meanwhile belong to later work.
  const uint64_t latest = last_fence_id_;
  bool waited = false;
  fence_cv_.wait(lock, [&] {
    const bool open = std::any_of(fences_.begin(), fences_.end(), [&](const Fence& fence) {
      return fence.id <= latest && (event_id == 0 || fence.event_id == event_id);
    });
    waited = waited || open;
    return !open;
  });
  return waited;
}

bool DeviceClient::AwaitNotifications() {
  if (!tracks_completion_ || running_callback_of != nullptr) return false;
  std::vector<std::pair<ClientStream*, uint64_t>> awaited;
  // Held while waiting, so that no awaited stream goes away meanwhile (notifications arrive
  // without it).
  std::lock_guard<std::mutex> streams_lock(streams_mu_);
  for (ClientStream* stream : streams_) {
    if (stream->untracked_.load(std::memory_order_acquire)) return false;
    const uint64_t posted = stream->posted();
    if (stream->settled() >= posted) continue;
    if (stream->notification_posted_.load(std::memory_order_acquire) != posted) return false;
    {
      // A host callback still to run: its notification comes on the callback thread, which
      // runs TensorFlow code that may itself synchronise (and take streams_mu_): ask instead.
      std::lock_guard<std::mutex> callbacks(stream->mu_);
      if (stream->callbacks_done_ < stream->callbacks_posted_) return false;
    }
    awaited.emplace_back(stream, posted);
  }
  if (awaited.empty()) return false;
  std::unique_lock<std::mutex> lock(notification_mu_);
  for (const auto& [stream, position] : awaited) {
    // The connection may fail meanwhile (its notifications then never come): look again now
    // and then; the backend reports the failure.
    while (stream->notification_returned_.load(std::memory_order_acquire) < position) {
      if (transport_->Lost()) return false;
      notification_cv_.wait_for(lock, std::chrono::milliseconds(20));
    }
  }
  return true;
}

void DeviceClient::NotificationReturned(ClientStream& stream, uint64_t position) {
  {
    std::lock_guard<std::mutex> lock(notification_mu_);
    uint64_t current = stream.notification_returned_.load(std::memory_order_relaxed);
    if (position > current) {
      stream.notification_returned_.store(position, std::memory_order_release);
    }
  }
  notification_cv_.notify_all();
}

bool DeviceClient::EarlyEventsFromEnvironment() {
  const char* value = std::getenv("VGPU_LOCAL_EVENTS");
  return value == nullptr || std::string_view(value) != "0";
}

bool DeviceClient::TracksPostsOn(ClientStream& stream) const {
  if (tracks_posts_ && (&stream.device() == this || SharesBackendWith(stream.device()))) {
    return true;
  }
  // A stream of a device on another backend (TensorFlow may pass another device's stream): the
  // stream's notifications would not follow these posts in order, so its synchronisations go to
  // its backend from now on.
  if (tracks_posts_ || stream.device().tracks_posts_) {
    stream.untracked_.store(true, std::memory_order_release);
  }
  return false;
}

absl::Status DeviceClient::PostOnStream(ClientStream& stream, Command command) {
  if (!TracksPostsOn(stream)) return Post(std::move(command));
  std::lock_guard<std::mutex> order(stream.post_mu_);
  VGPU_RETURN_IF_ERROR(OrderAfterFences(stream));
  const bool host_can_observe = HostCanObserve(command);
  VGPU_RETURN_IF_ERROR(Post(std::move(command)));
  const uint64_t position = stream.posted_.fetch_add(1, std::memory_order_release) + 1;
  if (host_can_observe) stream.last_host_visible_ = position;
  return absl::OkStatus();
}

bool DeviceClient::AllStreamsSettled() {
  if (!tracks_completion_ || transport_->Lost()) return false;
  std::lock_guard<std::mutex> lock(streams_mu_);
  return std::all_of(streams_.begin(), streams_.end(),
                     [](ClientStream* stream) { return NothingPendingOn(*stream); });
}

bool DeviceClient::StreamSettled(ClientStream& stream) {
  return tracks_completion_ && !transport_->Lost() && NothingPendingOn(stream);
}

bool DeviceClient::NothingPendingOn(ClientStream& stream) {
  if (stream.untracked_.load(std::memory_order_acquire)) return false;
  // posted() first: a command whose post ends after it is not covered (it was concurrent with
  // the synchronisation).
  const uint64_t posted = stream.posted();
  if (stream.settled() < posted) return false;
  std::lock_guard<std::mutex> lock(stream.mu_);
  return stream.callbacks_done_ >= stream.callbacks_posted_;
}

void DeviceClient::ForgetStream(const ClientStream* stream) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_.erase(std::remove(streams_.begin(), streams_.end(), stream), streams_.end());
}

bool DeviceClient::LocalSynchronizationFromEnvironment() {
  const char* value = std::getenv("VGPU_LOCAL_SYNC");
  return value == nullptr || std::string_view(value) != "0";
}

absl::Status DeviceClient::PostSettlingNotification(ClientStream& stream) {
  if (!tracks_completion_) return absl::OkStatus();
  // The handler PostWithNotification wraps around this one settles the stream.
  return PostNotify(stream, [](const absl::Status&) {}, /*on_callback_thread=*/false);
}

absl::Status DeviceClient::HostCallback(ClientStream& stream,
                                        std::function<void(const absl::Status&)> callback) {
  {
    std::lock_guard<std::mutex> lock(stream.mu_);
    ++stream.callbacks_posted_;
  }
  ClientStream* s = &stream;
  // In-process: runs on the stream's worker when the stream reaches it, and later work on the
  // stream waits for the callback to return. Remote: runs on the hub's callback thread once the
  // server's stream reached it; the server's stream does not wait for it (SynchronizeStream
  // still waits for it on the client).
  absl::Status status = PostNotify(
      stream,
      [s, callback = std::move(callback)](const absl::Status& stream_status) {
        const ClientStream* outer = running_callback_of;
        running_callback_of = s;
        callback(stream_status);
        running_callback_of = outer;
        std::lock_guard<std::mutex> lock(s->mu_);
        ++s->callbacks_done_;
        s->cv_.notify_all();
      },
      // Remote: notifications arrive on the transport's reader thread, which must never run
      // TensorFlow code (a callback that waits for a reply would deadlock it).
      /*on_callback_thread=*/!transport_->DeliversNotificationsInline());
  if (!status.ok()) {
    std::lock_guard<std::mutex> lock(stream.mu_);
    --stream.callbacks_posted_;
  }
  return status;
}

absl::Status DeviceClient::StartTimer(ClientStream& stream,
                                      const std::shared_ptr<ClientTimer>& timer) {
  return PostNotify(
      stream, [timer](const absl::Status&) { timer->start_ns_.store(NowNanoseconds()); },
      /*on_callback_thread=*/false);
}

absl::Status DeviceClient::StopTimer(ClientStream& stream,
                                     const std::shared_ptr<ClientTimer>& timer) {
  return PostNotify(
      stream, [timer](const absl::Status&) { timer->stop_ns_.store(NowNanoseconds()); },
      /*on_callback_thread=*/false);
}

absl::Status DeviceClient::SynchronizeStream(ClientStream& stream) {
  if (running_callback_of == &stream) {
    // The stream is occupied by this very callback: waiting for it would never end.
    return absl::FailedPreconditionError(
        "a host callback cannot wait for the stream it runs on");
  }
  uint64_t callbacks_target;
  {
    std::lock_guard<std::mutex> lock(stream.mu_);
    callbacks_target = stream.callbacks_posted_;
  }
  dnn_.ObserveHostWait();
  // Early-completed recordings (RecordEvent) leave their streams unsettled until the backend's
  // reports arrive, which are already on their way: waiting for them is cheaper than asking.
  if (StreamSettled(stream) || (tracks_completion_ && AwaitFences() && StreamSettled(stream))) {
    counters_.CountLocalSynchronization();
    return absl::OkStatus();
  }
  Command command = MakeCommand(CommandKind::kSynchronizeStream, stream);
  absl::Status status = Call(std::move(command)).status;
  std::unique_lock<std::mutex> lock(stream.mu_);
  stream.cv_.wait(lock, [&] { return stream.callbacks_done_ >= callbacks_target; });
  return status;
}

absl::Status DeviceClient::StreamStatus(ClientStream& stream) {
  Command command = MakeCommand(CommandKind::kStreamStatus, stream);
  return Call(std::move(command)).status;
}

absl::Status DeviceClient::SynchronizeDevice() {
  dnn_.ObserveHostWait();
  if (AllStreamsSettled() ||
      (tracks_completion_ && AwaitFences() && AllStreamsSettled()) ||
      (tracks_completion_ && AwaitNotifications() && AllStreamsSettled())) {
    counters_.CountLocalSynchronization();
    return absl::OkStatus();
  }
  return Call(MakeCommand(CommandKind::kSynchronizeDevice)).status;
}

}  // namespace vgpu
