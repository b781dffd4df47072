// The session layer: one client's session on any backing executor (see client_session.h).
#include "plugin/backend/client_session.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/launch/kernel_families.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/common/activity.h"
#include "plugin/protocol/command_activity.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/launch_params.h"

namespace vgpu {
namespace {

Reply ErrorReply(absl::Status status) {
  Reply reply;
  reply.status = std::move(status);
  return reply;
}

std::string Hex(uint64_t value) { return absl::StrCat("0x", absl::Hex(value)); }

}  // namespace

ClientSession::ClientSession(BackingExecutor* executor, uint64_t session_id, CompletionSink* sink,
                             uint64_t quota_bytes, SessionLimits limits,
                             std::shared_ptr<SharedQuota> shared_quota)
    : executor_(executor),
      session_id_(session_id),
      sink_(sink),
      quota_bytes_(quota_bytes),
      limits_(limits),
      shared_quota_(std::move(shared_quota)) {
  if (shared_quota_ != nullptr) shared_quota_->Join(session_id_);
}

DeviceArena::Usage ClientSession::UsageOf(uint64_t session_id) const {
  DeviceArena::Usage total;
  for (int d = 0; d < executor_->device_count(); ++d) {
    DeviceArena::Usage usage = executor_->arena(static_cast<uint32_t>(d)).UsageOf(session_id);
    total.charged += usage.charged;
    total.pending_free += usage.pending_free;
    total.blocks += usage.blocks;
  }
  return total;
}

DeviceArena::Usage ClientSession::TotalUsage() const { return UsageOf(session_id_); }

uint64_t ClientSession::BytesInUse() const { return TotalUsage().charged; }

DeviceArena::Usage ClientSession::SharedQuotaUsage() const {
  DeviceArena::Usage total;
  for (uint64_t member : shared_quota_->Members()) {
    const DeviceArena::Usage usage = UsageOf(member);
    total.charged += usage.charged;
    total.pending_free += usage.pending_free;
  }
  return total;
}

SessionStats ClientSession::Stats() const {
  SessionStats stats;
  stats.launches = launches_.load(std::memory_order_relaxed);
  stats.kernel_ns = kernel_ns_.load(std::memory_order_relaxed);
  stats.errors = errors_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  stats.streams = streams_.size();
  for (const Stream* stream : DistinctStreamsLocked()) stats.queued += stream->queue->pending();
  return stats;
}

absl::Status ClientSession::CheckSharedQuota(uint64_t size) const {
  const uint64_t limit = shared_quota_->limit_bytes();
  const DeviceArena::Usage usage = SharedQuotaUsage();
  const uint64_t used = usage.charged, pending = usage.pending_free;
  const uint64_t charged = size > limit ? size : DeviceArena::ChargedSize(size);
  if (charged <= limit && used <= limit - charged) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "allocation of ", size, " bytes (", charged, " charged) exceeds tenant '",
      shared_quota_->name(), "''s quota of ", limit, " bytes (--tenant_quota): ", used,
      " bytes in use by its connections",
      pending > 0 ? absl::StrCat(", ", pending, " of them freed but still used by queued work")
                  : ""));
}

ClientSession::~ClientSession() {
  absl::flat_hash_map<uint64_t, std::shared_ptr<Stream>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams.swap(streams_);
    events_.clear();
  }
  streams.clear();  // each stream drains its queue before it stops
  for (int d = 0; d < executor_->device_count(); ++d) {
    executor_->arena(static_cast<uint32_t>(d)).FreeAllOwnedBy(session_id_);
  }
  if (shared_quota_ != nullptr) shared_quota_->Leave(session_id_);
}

absl::Status ClientSession::CheckDevice(uint32_t device) const {
  if (device >= static_cast<uint32_t>(executor_->device_count())) {
    return absl::InvalidArgumentError(absl::StrCat("no device ", device, " on this executor (it has ",
                                                   executor_->device_count(), ")"));
  }
  return absl::OkStatus();
}

std::shared_ptr<ClientSession::Stream> ClientSession::FindStream(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second;
}

std::vector<const ClientSession::Stream*> ClientSession::DistinctStreamsLocked() const {
  std::vector<const Stream*> distinct;
  for (const auto& [id, stream] : streams_) {
    if (!absl::c_linear_search(distinct, stream.get())) distinct.push_back(stream.get());
  }
  return distinct;
}

bool ClientSession::ReachedLocked(const EventMark& mark) const {
  const std::shared_ptr<Stream> stream = FindStreamBySerialLocked(mark.stream_serial);
  // A stream that is gone has run everything it was given.
  return stream == nullptr || stream->queue->IsCompleted(mark.position);
}

std::shared_ptr<ClientSession::Stream> ClientSession::FindStreamBySerial(uint64_t serial) {
  std::lock_guard<std::mutex> lock(mu_);
  return FindStreamBySerialLocked(serial);
}

std::shared_ptr<ClientSession::Stream> ClientSession::FindStreamBySerialLocked(
    uint64_t serial) const {
  for (const auto& [id, stream] : streams_) {
    if (stream->serial == serial) return stream;
  }
  for (const std::shared_ptr<Stream>& stream : draining_) {
    if (stream->serial == serial) return stream;
  }
  return nullptr;
}

void ClientSession::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  for (const auto& [id, stream] : streams_) stream->queue->Cancel();
  for (const std::shared_ptr<Stream>& stream : draining_) stream->queue->Cancel();
}

absl::string_view ClientSession::KernelName(uint64_t kernel_id) const {
  return kernel_id <= UINT32_MAX ? executor_->KernelName(static_cast<uint32_t>(kernel_id))
                                 : absl::string_view();
}

std::string ClientSession::KernelLabel(uint64_t kernel_id) const {
  absl::string_view name = KernelName(kernel_id);
  return name.empty() ? absl::StrCat("kernel ", kernel_id) : std::string(name);
}

absl::Status ClientSession::PinRanges(absl::Span<const BufferArg> ranges, PinnedRanges* pins) {
  // Usually every range lies on one device: pin them all under that arena's lock.
  DeviceArena* arena = nullptr;
  bool one_arena = true;
  for (const BufferArg& range : ranges) {
    if (range.size == 0) continue;
    DeviceArena* range_arena = executor_->ArenaForAddress(range.address);
    if (range_arena == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(Hex(range.address), " is not a device address of this executor"));
    }
    if (arena != nullptr && range_arena != arena) one_arena = false;
    arena = range_arena;
  }
  if (arena == nullptr) {  // nothing but empty ranges
    pins->resize(pins->size() + ranges.size());
    return absl::OkStatus();
  }
  if (one_arena) return arena->PinRanges(ranges, session_id_, pins);
  const size_t first = pins->size();
  for (size_t i = 0; i < ranges.size(); ++i) {
    DeviceArena* range_arena =
        ranges[i].size == 0 ? arena : executor_->ArenaForAddress(ranges[i].address);
    if (absl::Status s = range_arena->PinRanges(ranges.subspan(i, 1), session_id_, pins);
        !s.ok()) {
      pins->resize(first);
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ClientSession::PinCommandRanges(const Command& command, PinnedRanges* pins) {
  switch (command.kind) {
    case CommandKind::kMemcpyHtoD:
    case CommandKind::kMemcpyDtoH:
    case CommandKind::kMemcpyDtoD:
    case CommandKind::kMemcpyNow:
    case CommandKind::kMemset: {
      if (command.size == 0) return absl::OkStatus();  // touches no memory
      // Two slots, src then dst. A copy's zero address names host memory: its slot stays an
      // empty range (an empty Pin). A memset always names device memory.
      BufferArg ranges[2];
      if (command.kind == CommandKind::kMemset) {
        ranges[1] = {command.dst, command.size};
      } else {
        if (command.src != 0) ranges[0] = {command.src, command.size};
        if (command.dst != 0) ranges[1] = {command.dst, command.size};
      }
      absl::Status status = PinRanges(ranges, pins);
      if (status.ok() || command.kind == CommandKind::kMemcpyNow) return status;
      return absl::Status(status.code(),
                          absl::StrCat(CommandKindName(command.kind), ": ", status.message()));
    }
    case CommandKind::kLaunch: {
      absl::Status status = PinRanges(command.buffers, pins);
      if (status.ok()) return status;
      return absl::Status(status.code(),
                          absl::StrCat(KernelLabel(command.object), ": ", status.message()));
    }
    default:
      return absl::OkStatus();
  }
}

absl::StatusOr<uint64_t> ClientSession::TryAllocate(uint32_t device, uint64_t size) {
  DeviceArena& arena = executor_->arena(device);
  std::lock_guard<std::mutex> memory_lock(memory_mu_);
  // The tenant's budget is checked and taken in one step with its other connections.
  std::unique_lock<std::mutex> shared_lock;
  if (shared_quota_ != nullptr) {
    shared_lock = std::unique_lock<std::mutex>(shared_quota_->allocation_mutex());
    if (absl::Status s = CheckSharedQuota(size); !s.ok()) return s;
  }
  if (const uint64_t held = TotalUsage().blocks;
      held >= static_cast<uint64_t>(limits_.max_allocations)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this client already holds ", held, " allocations, the most it may have "
        "(--max_allocations_per_client=", limits_.max_allocations, ")"));
  }
  if (quota_bytes_ > 0) {
    const DeviceArena::Usage usage = TotalUsage();
    // Charge what the arena takes: its rounding, and a whole block for zero bytes.
    const uint64_t charged = size > quota_bytes_ ? size : DeviceArena::ChargedSize(size);
    if (charged > quota_bytes_ || usage.charged > quota_bytes_ - charged) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "allocation of ", size, " bytes (", charged, " charged) exceeds this client's quota of ",
          quota_bytes_, " bytes (--client_quota): ", usage.charged, " bytes in use",
          usage.pending_free > 0
              ? absl::StrCat(", ", usage.pending_free, " of them freed but still used by queued work")
              : ""));
    }
  }
  return arena.Allocate(size, session_id_);
}

void ClientSession::WaitForQueuedWork(std::chrono::milliseconds timeout) {
  std::vector<std::pair<std::shared_ptr<Stream>, uint64_t>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams.reserve(streams_.size());
    for (auto& [id, stream] : streams_) {
      if (!absl::c_any_of(streams, [&](const auto& seen) { return seen.first == stream; })) {
        streams.emplace_back(stream, stream->queue->enqueued());
      }
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& [stream, position] : streams) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !stream->queue->WaitUntilCompletedFor(position, left)) return;
  }
}

Reply ClientSession::HandleAllocate(Command& command) {
  if (absl::Status s = CheckDevice(command.device); !s.ok()) return ErrorReply(s);
  absl::StatusOr<uint64_t> address = TryAllocate(command.device, command.size);
  if (!address.ok() && absl::IsResourceExhausted(address.status())) {
    // Memory this client freed may still be used by its own queued work (stream-ordered free):
    // let that work finish (bounded; only this session's own queued work can be awaited), then
    // try once more. The retry runs also when nothing is pending now: the queued work may have
    // released the memory between the first attempt and this check.
    if (TotalUsage().pending_free > 0) WaitForQueuedWork(limits_.pending_free_wait);
    address = TryAllocate(command.device, command.size);
  }
  if (!address.ok()) return ErrorReply(address.status());
  Reply reply;
  reply.value = *address;
  return reply;
}

// One handler per command kind; the stream-ordered commands share EnqueueOnStream.
const ClientSession::Handler* ClientSession::HandlerTable() {
  static const auto* table = [] {
    auto* t = new std::array<Handler, static_cast<size_t>(CommandKind::kNumKinds)>();
    auto set = [t](CommandKind kind, Handler handler) {
      (*t)[static_cast<size_t>(kind)] = handler;
    };
    set(CommandKind::kAllocate, &ClientSession::HandleAllocate);
    set(CommandKind::kFree, &ClientSession::HandleFree);
    set(CommandKind::kMemoryInfo, &ClientSession::HandleMemoryInfo);
    set(CommandKind::kCreateStream, &ClientSession::HandleCreateStream);
    set(CommandKind::kDestroyStream, &ClientSession::HandleDestroyStream);
    set(CommandKind::kSynchronizeStream, &ClientSession::HandleStreamStatus);
    set(CommandKind::kStreamStatus, &ClientSession::HandleStreamStatus);
    set(CommandKind::kSynchronizeDevice, &ClientSession::HandleSynchronizeDevice);
    set(CommandKind::kMemcpyNow, &ClientSession::HandleMemcpyNow);
    set(CommandKind::kDestroyEvent, &ClientSession::HandleDestroyEvent);
    set(CommandKind::kDescriptorCreate, &ClientSession::HandleDescriptorCreate);
    set(CommandKind::kDescriptorSet, &ClientSession::HandleDescriptorSet);
    set(CommandKind::kDescriptorDestroy, &ClientSession::HandleDescriptorDestroy);
    for (CommandKind kind : {CommandKind::kRecordEvent, CommandKind::kWaitEvent,
                             CommandKind::kMemcpyHtoD, CommandKind::kMemcpyDtoH,
                             CommandKind::kMemcpyDtoD, CommandKind::kMemset, CommandKind::kLaunch,
                             CommandKind::kNotify}) {
      set(kind, &ClientSession::EnqueueOnStream);
    }
    return t;
  }();
  return table->data();
}

Reply ClientSession::Handle(Command command) {
  const auto index = static_cast<size_t>(command.kind);
  if (index >= static_cast<size_t>(CommandKind::kNumKinds) || HandlerTable()[index] == nullptr) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    return ErrorReply(absl::InvalidArgumentError(
        absl::StrCat("unknown command kind ", static_cast<int>(command.kind))));
  }
  const CommandKind kind = command.kind;
  Reply reply = (this->*HandlerTable()[index])(command);
  // A synchronisation that reports a stream's error is not a new one (counted when it failed).
  const bool reports_stream_errors =
      kind == CommandKind::kSynchronizeStream || kind == CommandKind::kSynchronizeDevice ||
      kind == CommandKind::kStreamStatus || kind == CommandKind::kDestroyStream;
  if (!reply.status.ok() && !reports_stream_errors) {
    errors_.fetch_add(1, std::memory_order_relaxed);
  }
  return reply;
}

Reply ClientSession::HandleFree(Command& command) {
  DeviceArena* arena = executor_->ArenaForAddress(command.dst);
  if (arena == nullptr) {
    return ErrorReply(absl::InvalidArgumentError(
        absl::StrCat("free of ", Hex(command.dst), ", which is not a device address")));
  }
  // Stream-ordered: queued work that uses the memory keeps it until it has run.
  Reply reply;
  reply.status = arena->Free(command.dst, session_id_);
  return reply;
}

Reply ClientSession::HandleMemoryInfo(Command& command) {
  if (absl::Status s = CheckDevice(command.device); !s.ok()) return ErrorReply(s);
  Reply reply;
  reply.memory = executor_->arena(command.device).Info();
  if (shared_quota_ != nullptr) {  // what the tenant's connections may still use together
    const uint64_t used = SharedQuotaUsage().charged;
    const uint64_t limit = shared_quota_->limit_bytes();
    reply.memory.limit_bytes = std::min(reply.memory.limit_bytes, limit);
    reply.memory.largest_free_block =
        std::min(reply.memory.largest_free_block, limit - std::min(used, limit));
  }
  if (quota_bytes_ > 0) {  // what this client may still use
    const uint64_t in_use = std::min(TotalUsage().charged, quota_bytes_);
    reply.memory.limit_bytes = std::min(reply.memory.limit_bytes, quota_bytes_);
    reply.memory.bytes_in_use = in_use;
    reply.memory.largest_free_block =
        std::min(reply.memory.largest_free_block, quota_bytes_ - in_use);
  }
  return reply;
}

Reply ClientSession::HandleCreateStream(Command& command) {
  if (absl::Status s = CheckDevice(command.device); !s.ok()) return ErrorReply(s);
  std::lock_guard<std::mutex> lock(mu_);
  if (command.stream == 0 || streams_.contains(command.stream)) {
    return ErrorReply(absl::AlreadyExistsError(
        absl::StrCat("stream id ", command.stream, " is zero or already in use")));
  }
  if (streams_.size() + draining_.size() >= static_cast<size_t>(limits_.max_streams)) {
    return ErrorReply(absl::ResourceExhaustedError(absl::StrCat(
        "this client already has ", streams_.size() + draining_.size(),
        " streams, the most it may have (--max_streams_per_client=", limits_.max_streams,
        ")")));
  }
  if (limits_.one_queue_per_device) {
    // The device's first stream's queue runs this one's work too (SessionLimits): the id is
    // another name for it, counted against max_streams like any stream.
    std::shared_ptr<Stream> shared;  // a copy: inserting may move streams_'s elements
    for (const auto& [id, existing] : streams_) {
      if (existing->queue->device() == command.device) {
        shared = existing;
        break;
      }
    }
    if (shared != nullptr) {
      streams_.emplace(command.stream, std::move(shared));
      return Reply{};
    }
  }
  if (limits_.stream_threads != nullptr) {
    if (const StreamThreadBudget* full = limits_.stream_threads->TryTake(); full != nullptr) {
      return ErrorReply(absl::ResourceExhaustedError(absl::StrCat(
          "cannot start stream ", command.stream, ": ", full->limit(), " streams run already, ",
          full->what(), "; try again later")));
    }
  }
  auto stream = std::make_shared<Stream>();
  stream->thread_budget = limits_.stream_threads;  // given back however this ends
  absl::StatusOr<std::unique_ptr<ExecutorStream>> executor_stream =
      executor_->CreateStream(command.device);
  if (!executor_stream.ok()) return ErrorReply(executor_stream.status());
  stream->serial = next_stream_serial_++;
  stream->executor_stream = *std::move(executor_stream);
  try {  // each stream is a worker thread, which the system may refuse
    ExecutorStream* const on_executor = stream->executor_stream.get();
    stream->queue = std::make_unique<StreamQueue>(
        command.stream, command.device,
        [this, on_executor](StreamQueue::Work& work, const absl::Status& s) {
          return Execute(on_executor, work, s);
        });
  } catch (const std::system_error& error) {
    return ErrorReply(absl::ResourceExhaustedError(
        absl::StrCat("cannot start a worker thread for stream ", command.stream, ": ",
                     error.what())));
  }
  if (cancelled_) stream->queue->Cancel();
  streams_.emplace(command.stream, std::move(stream));
  return Reply{};
}

Reply ClientSession::HandleDestroyStream(Command& command) {
  std::shared_ptr<Stream> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(command.stream);
    if (it == streams_.end()) {
      return ErrorReply(absl::NotFoundError(absl::StrCat("no stream ", command.stream)));
    }
    if (it->second->queue->RunningOnCallingThread()) {
      return ErrorReply(absl::FailedPreconditionError(
          "a host callback cannot destroy a stream whose queue it runs on"));
    }
    stream = std::move(it->second);
    streams_.erase(it);
    draining_.push_back(stream);  // the id is free again; the stream is still cancellable
  }
  stream->queue->WaitUntilCompleted(stream->queue->enqueued());
  Reply reply;
  reply.status = executor_->SynchronizeStream(stream->executor_stream.get());
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_.erase(std::find(draining_.begin(), draining_.end(), stream));
  }
  return reply;
}

// kSynchronizeStream waits and reports the first error once; kStreamStatus only looks.
Reply ClientSession::HandleStreamStatus(Command& command) {
  std::shared_ptr<Stream> stream = FindStream(command.stream);
  if (stream == nullptr) {
    return ErrorReply(absl::NotFoundError(absl::StrCat("no stream ", command.stream)));
  }
  Reply reply;
  if (command.kind == CommandKind::kSynchronizeStream) {
    reply.status = SynchronizeStream(*stream);
  } else {
    reply.status = stream->queue->status();
  }
  return reply;
}

Reply ClientSession::HandleSynchronizeDevice(Command& command) {
  if (absl::Status s = CheckDevice(command.device); !s.ok()) return ErrorReply(s);
  std::vector<std::shared_ptr<Stream>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, stream] : streams_) {
      if (stream->queue->device() == command.device && !absl::c_linear_search(streams, stream)) {
        streams.push_back(stream);
      }
    }
  }
  Reply reply;
  for (auto& stream : streams) {
    absl::Status status = SynchronizeStream(*stream);
    if (reply.status.ok()) reply.status = status;
  }
  return reply;
}

absl::Status ClientSession::SynchronizeStream(Stream& stream) {
  if (stream.queue->RunningOnCallingThread()) {
    // A command of this very queue (a host callback run in process) waiting for the queue to
    // pass it would wait for ever; with one queue per device the stream may be another of its
    // device's.
    return absl::FailedPreconditionError(
        "a host callback cannot wait for its own stream, nor, in process, for another stream "
        "of its device (they share one queue: VGPU_STREAM_QUEUES)");
  }
  stream.queue->WaitUntilCompleted(stream.queue->enqueued());
  absl::Status status = stream.queue->TakeStatus();  // reported once
  absl::Status device_status = executor_->SynchronizeStream(stream.executor_stream.get());
  return status.ok() ? device_status : status;
}

Reply ClientSession::HandleMemcpyNow(Command& command) {
  PinnedRanges pins;  // held while copying: a concurrent Free waits for the copy
  Reply reply;
  reply.status = PinCommandRanges(command, &pins);
  if (reply.status.ok()) reply.status = Copy(nullptr, command, pins);
  return reply;
}

Reply ClientSession::HandleDestroyEvent(Command& command) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.erase(command.object);
  return Reply{};
}

Reply ClientSession::HandleDescriptorCreate(Command& command) {
  if (command.params.size() != 1 || command.params[0] < 1 ||
      command.params[0] > kNumDescriptorKinds) {
    return ErrorReply(absl::InvalidArgumentError("descriptor_create: bad descriptor kind"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (descriptors_.size() >= static_cast<size_t>(limits_.max_descriptors) &&
      !descriptors_.contains(command.object)) {
    return ErrorReply(absl::ResourceExhaustedError(absl::StrCat(
        "this client already has ", descriptors_.size(),
        " descriptors, the most it may have (max_descriptors)")));
  }
  if (descriptors_.contains(command.object)) {
    return ErrorReply(absl::AlreadyExistsError(
        absl::StrCat("descriptor id ", command.object, " already exists")));
  }
  absl::StatusOr<std::unique_ptr<ExecutorDescriptor>> descriptor =
      executor_->CreateDescriptor(command.params[0]);
  if (!descriptor.ok()) return ErrorReply(descriptor.status());
  descriptors_.emplace(command.object, *std::move(descriptor));
  return Reply{};
}

Reply ClientSession::HandleDescriptorSet(Command& command) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = descriptors_.find(command.object);
  if (it == descriptors_.end()) {
    return ErrorReply(absl::NotFoundError(absl::StrCat("no descriptor ", command.object)));
  }
  if (command.params.empty() || command.params.size() > kMaxDescriptorSettingsSize) {
    return ErrorReply(absl::InvalidArgumentError("descriptor_set: bad settings size"));
  }
  Reply reply;
  reply.status = executor_->SetDescriptor(*it->second, command.params);
  return reply;
}

Reply ClientSession::HandleDescriptorDestroy(Command& command) {
  std::lock_guard<std::mutex> lock(mu_);
  if (descriptors_.erase(command.object) == 0) {
    return ErrorReply(absl::NotFoundError(absl::StrCat("no descriptor ", command.object)));
  }
  return Reply{};
}

uint64_t ClientSession::QueueEntries(const Command& command) const {
  if (command.kind != CommandKind::kWaitEvent) return 1;
  std::lock_guard<std::mutex> lock(mu_);
  auto event = events_.find(command.object);
  return event == events_.end() ? 1 : std::max<uint64_t>(1, event->second.size());
}

Reply ClientSession::EnqueueOnStream(Command& command) {
  // Validate and pin the memory it names now, outside the session lock: a bad range fails
  // the stream in its turn without touching memory, and a Free waits for this command.
  StreamQueue::Work work;
  if (command.activity.recorded && activity::Enabled()) work.queued_ns = activity::NowNs();
  work.rejected = PinCommandRanges(command, &work.pins);
  if (!work.rejected.ok()) errors_.fetch_add(1, std::memory_order_relaxed);
  std::unique_lock<std::mutex> lock(mu_);
  auto it = streams_.find(command.stream);
  if (it == streams_.end()) {
    return ErrorReply(absl::NotFoundError(absl::StrCat(
        CommandKindName(command.kind), " names stream ", command.stream,
        ", which does not exist")));
  }
  StreamQueue& stream = *it->second->queue;
  if (command.kind == CommandKind::kLaunch && !command.descriptors.empty()) {
    if (absl::Status s = ResolveDescriptorReferencesLocked(command); !s.ok()) {
      return ErrorReply(s);
    }
  }
  const bool is_record = command.kind == CommandKind::kRecordEvent;
  if (!is_record && RunsInline(command, limits_)) {
    // Outside the session lock: the kernel or copy runs now, and other streams must not wait
    // for it.
    std::shared_ptr<Stream> keep = it->second;
    lock.unlock();
    work.command = std::move(command);
    keep->queue->RunInlineOrEnqueue(std::move(work));
    return Reply{};
  }
  if (command.kind == CommandKind::kRecordEvent &&
      events_.size() >= static_cast<size_t>(limits_.max_events) &&
      !events_.contains(command.object)) {
    return ErrorReply(absl::ResourceExhaustedError(absl::StrCat(
        "this client already has ", events_.size(),
        " recorded events, the most it may have (max_events); destroy some")));
  }
  const uint64_t serial = it->second->serial;
  if (command.kind == CommandKind::kWaitEvent) {
    auto event = events_.find(command.object);
    if (event == events_.end()) return Reply{};  // never recorded: nothing to wait for
    // Recordings on this stream need no wait (FIFO orders them), nor those reached already
    // (their stream has run them, or is gone): then the stream stays idle for what follows (a
    // small copy runs inline).
    EventMarks pending;
    for (const EventMark& mark : event->second) {
      if (mark.stream_serial != serial && !ReachedLocked(mark)) pending.push_back(mark);
    }
    if (pending.empty()) return Reply{};
    // Executed as: wait until stream `dst` (a serial) has run up to position `src`; one such
    // wait per recording pending.
    for (size_t i = 0; i + 1 < pending.size(); ++i) {
      StreamQueue::Work wait;  // only what a wait reads, not a copy of the whole command
      wait.command.kind = command.kind;
      wait.command.device = command.device;
      wait.command.stream = command.stream;
      wait.command.object = command.object;
      wait.command.activity = command.activity;
      wait.command.dst = pending[i].stream_serial;
      wait.command.src = pending[i].position;
      wait.queued_ns = work.queued_ns;
      stream.Enqueue(std::move(wait));
    }
    command.dst = pending.back().stream_serial;
    command.src = pending.back().position;
  }
  const uint64_t event_id = command.object;
  if (is_record && RunsInline(command, limits_)) {
    // In process, an idle stream records at once on the calling thread: whoever polls the
    // event next (TensorFlow's event manager polls right after recording) finds it complete,
    // instead of waiting for the stream's worker to wake and run it.
    std::shared_ptr<Stream> keep = it->second;
    lock.unlock();
    work.command = std::move(command);
    const uint64_t position = keep->queue->RunInlineOrEnqueue(std::move(work));
    lock.lock();
    AddRecordingLocked(event_id, EventMark{serial, position});
    return Reply{};
  }
  work.command = std::move(command);
  const uint64_t position = stream.Enqueue(std::move(work));
  if (is_record) AddRecordingLocked(event_id, EventMark{serial, position});
  return Reply{};
}

void ClientSession::AddRecordingLocked(uint64_t event_id, const EventMark& mark) {
  EventMarks& marks = events_[event_id];
  bool superseded = false;  // by a later recording of the same stream (recorded inline)
  marks.erase(std::remove_if(marks.begin(), marks.end(),
                             [&](const EventMark& old) {
                               if (old.stream_serial != mark.stream_serial) {
                                 return ReachedLocked(old);
                               }
                               superseded = superseded || old.position > mark.position;
                               return old.position < mark.position;
                             }),
              marks.end());
  if (!superseded) marks.push_back(mark);
}

bool ClientSession::RunsInline(const Command& command, const SessionLimits& limits) {
  if (limits.inline_launch_bytes == 0) return false;
  switch (command.kind) {
    case CommandKind::kMemcpyHtoD:
    case CommandKind::kMemcpyDtoH:
    case CommandKind::kMemcpyDtoD:
    case CommandKind::kMemset:
      return limits.inline_copies && command.size <= limits.inline_copy_bytes;
    case CommandKind::kRecordEvent:
      // In process, an event recording (its notification) is as cheap as a small copy.
      return limits.inline_copies;
    case CommandKind::kLaunch:
      break;
    default:
      return false;
  }
  // A costly kernel counts its bytes several times (ByteWorkWeight): the bound stands for
  // the time the submitting thread may be held.
  const uint64_t weight =
      kernel_families::ByteWorkWeight(static_cast<KernelId>(command.object));
  const uint64_t bound = limits.inline_launch_bytes / weight;
  uint64_t bytes = 0;
  for (const BufferArg& buffer : command.buffers) {
    if (buffer.size > bound - bytes) return false;
    bytes += buffer.size;
  }
  return true;
}

absl::Status ClientSession::ResolveDescriptorReferencesLocked(Command& command) {
  const auto& section = command.descriptors;
  bool has_reference = false;
  // Walk the section once to see whether anything needs resolving (reuse mode: nothing does).
  ParamReader scan(section);
  absl::StatusOr<uint8_t> count = scan.Get<uint8_t>();
  if (!count.ok()) return count.status();
  for (int i = 0; i < *count; ++i) {
    absl::StatusOr<uint8_t> kind = scan.Get<uint8_t>();
    absl::StatusOr<uint16_t> size = kind.ok() ? scan.Get<uint16_t>() : kind.status();
    if (!size.ok()) return size.status();
    if (*kind & kDescriptorReference) has_reference = true;
    if (!scan.GetBytes(*size).ok()) return absl::InvalidArgumentError("truncated descriptors");
  }
  if (!has_reference) return absl::OkStatus();
  ParamBlock resolved;
  ParamWriter writer(&resolved);
  ParamReader reader(section);
  writer.Put(*reader.Get<uint8_t>());
  for (int i = 0; i < *count; ++i) {
    uint8_t kind = *reader.Get<uint8_t>();
    uint16_t size = *reader.Get<uint16_t>();
    absl::Span<const uint8_t> bytes = *reader.GetBytes(size);
    if ((kind & kDescriptorReference) == 0) {
      writer.Put(kind).Put(size).PutBytes(bytes.data(), bytes.size());
      continue;
    }
    uint64_t id = 0;
    if (size != sizeof(id)) return absl::InvalidArgumentError("bad descriptor reference");
    std::memcpy(&id, bytes.data(), sizeof(id));
    auto it = descriptors_.find(id);
    if (it == descriptors_.end() || it->second->settings().empty() ||
        it->second->kind() != (kind & ~kDescriptorReference)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "launch names descriptor ", id, ", which does not exist or was never set"));
    }
    const std::vector<uint8_t>& settings = it->second->settings();
    writer.Put(it->second->kind())
        .Put(static_cast<uint16_t>(settings.size()))
        .PutBytes(settings.data(), settings.size());
  }
  command.descriptors.assign(resolved.begin(), resolved.end());
  return absl::OkStatus();
}

absl::Status ClientSession::Execute(ExecutorStream* stream, StreamQueue::Work& work,
                                    const absl::Status& stream_status) {
  const Command& command = work.command;
  // Through a server: the connection asked for this command's times (it is profiling).
  if (command.activity.sequence != 0 && sink_ != nullptr && ActivityKindOf(command.kind)) {
    const uint64_t sequence = command.activity.sequence;
    const absl::string_view kernel_name =
        command.kind == CommandKind::kLaunch ? KernelName(command.object) : absl::string_view();
    const int64_t start_ns = activity::NowNs();
    absl::Status status = ExecuteCommand(stream, work, stream_status);
    sink_->OnExecuted(sequence, start_ns, activity::NowNs(), kernel_name);
    return status;
  }
  std::optional<activity::Record> record =
      command.activity.recorded && activity::Enabled() ? ActivityRecordOf(command) : std::nullopt;
  if (!record.has_value()) return ExecuteCommand(stream, work, stream_status);
  // The executor's own call on the stream worker: for an executor that computes on the calling
  // thread (cpu), the kernel's or copy's duration.
  if (command.kind == CommandKind::kLaunch) {
    record->name = activity::Intern(KernelLabel(command.object));
  }
  record->queued_ns = work.queued_ns;
  record->start_ns = activity::NowNs();
  absl::Status status = ExecuteCommand(stream, work, stream_status);
  record->end_ns = activity::NowNs();
  activity::Add(*record);
  return status;
}

size_t ClientSession::WaitersOn(uint64_t stream) {
  std::shared_ptr<Stream> found = FindStream(stream);
  return found == nullptr ? 0 : found->queue->waiters();
}

absl::Status ClientSession::ExecuteCommand(ExecutorStream* stream, StreamQueue::Work& work,
                                           const absl::Status& stream_status) {
  Command& command = work.command;
  switch (command.kind) {
    case CommandKind::kMemcpyHtoD:
    case CommandKind::kMemcpyDtoH:
    case CommandKind::kMemcpyDtoD:
    case CommandKind::kMemset: {
      // Name the failing command: its error surfaces later, at a synchronisation.
      absl::Status status = command.kind == CommandKind::kMemset
                                ? Memset(stream, command, work.pins)
                                : Copy(stream, command, work.pins);
      if (status.ok()) return status;
      return absl::Status(status.code(),
                          absl::StrCat(CommandKindName(command.kind), ": ", status.message()));
    }
    case CommandKind::kLaunch:
      return Launch(stream, command, work.pins);
    case CommandKind::kRecordEvent:
    case CommandKind::kNotify: {
      // Whoever waits for it may read what the stream wrote: the device must have finished.
      absl::Status device_status = executor_->SynchronizeStream(stream);
      if (sink_ != nullptr) {
        sink_->OnNotify(command.token, stream_status.ok() ? device_status : stream_status);
      }
      return device_status;
    }
    case CommandKind::kWaitEvent: {
      // The stream that recorded the event (by serial: a reused id is another stream); if it
      // is gone, its work has all completed. A cancelled session stops waiting.
      std::shared_ptr<Stream> other = FindStreamBySerial(command.dst);
      if (other == nullptr) return absl::OkStatus();
      // While a profile is taken, a wait that blocks is a record: the stream idles meanwhile.
      const bool recorded = command.activity.recorded && activity::Enabled() &&
                            !other->queue->IsCompleted(command.src);
      const int64_t start_ns = recorded ? activity::NowNs() : 0;
      other->queue->WaitUntilCompleted(command.src);
      if (recorded) {
        activity::Record wait;
        wait.kind = activity::Kind::kEventWait;
        wait.device = command.activity.device;
        wait.stream = command.stream;
        wait.name = activity::Intern(absl::StrCat("wait for stream ", other->queue->id()));
        wait.start_ns = start_ns;
        wait.end_ns = activity::NowNs();
        activity::Add(wait);
      }
      return absl::OkStatus();
    }
    default:
      return absl::InternalError(absl::StrCat(CommandKindName(command.kind),
                                              " cannot run on a stream"));
  }
}

absl::Status ClientSession::Copy(ExecutorStream* stream, const Command& command,
                                 PinnedRanges& pins) {
  if (command.size == 0) return absl::OkStatus();
  // Pins: src then dst (validated when queued); a zero address names host memory instead.
  CopyRequest request;
  request.kind = command.kind;
  request.device = command.device;
  request.size = command.size;
  request.source_on_device = command.src != 0;
  request.destination_on_device = command.dst != 0;
  request.source = request.source_on_device ? (pins.size() == 2 ? pins[0].host() : nullptr)
                                            : static_cast<const uint8_t*>(command.host_src);
  request.destination = request.destination_on_device
                            ? (pins.size() == 2 ? pins[1].host() : nullptr)
                            : static_cast<uint8_t*>(command.host_dst);
  if (request.source == nullptr || request.destination == nullptr) {
    return absl::InvalidArgumentError("copy without a source or a destination");
  }
  return executor_->Copy(stream, session_id_, request, pins);
}

absl::Status ClientSession::Memset(ExecutorStream* stream, const Command& command,
                                   PinnedRanges& pins) {
  if (command.size == 0) return absl::OkStatus();  // empty tensors may have no memory at all
  if (pins.size() != 2 || pins[1].host() == nullptr) {
    return absl::InternalError("memset without its pinned memory");
  }
  if (command.pattern_bytes != 1 && command.pattern_bytes != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("memset pattern of ", static_cast<int>(command.pattern_bytes), " bytes"));
  }
  if (command.pattern_bytes == 4 && command.size % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("memset32 of ", command.size, " bytes, not a multiple of 4"));
  }
  MemsetRequest request;
  request.device = command.device;
  request.destination = pins[1].host();
  request.size = command.size;
  request.pattern = command.pattern;
  request.pattern_bytes = command.pattern_bytes;
  return executor_->Memset(stream, session_id_, request, pins);
}

absl::Status ClientSession::Launch(ExecutorStream* stream, const Command& command,
                                   PinnedRanges& pins) {
  const absl::string_view kernel_name = KernelName(command.object);
  if (kernel_name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown kernel id ", command.object));
  }
  if (pins.size() != command.buffers.size()) {
    return absl::InternalError(absl::StrCat(kernel_name, ": buffers were not pinned"));
  }
  // Every buffer was validated and pinned when the launch was queued (empty ones: null).
  absl::InlinedVector<uint8_t*, 8> pointers;
  absl::InlinedVector<uint64_t, 8> sizes;
  pointers.reserve(command.buffers.size());
  sizes.reserve(command.buffers.size());
  for (size_t i = 0; i < command.buffers.size(); ++i) {
    pointers.push_back(pins[i].host());
    sizes.push_back(command.buffers[i].size);
  }
  absl::InlinedVector<DescriptorView, 6> descriptors;
  if (absl::Status parsed = ParseLaunchDescriptors(command.descriptors, &descriptors);
      !parsed.ok()) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    return absl::Status(parsed.code(), absl::StrCat(kernel_name, ": ", parsed.message()));
  }
  LaunchRequest request;
  request.device = command.device;
  request.kernel_id = static_cast<uint32_t>(command.object);
  request.launch.buffers = pointers;
  request.launch.buffer_sizes = sizes;
  request.launch.params = command.params;
  request.launch.descriptors = descriptors;
  const auto started = std::chrono::steady_clock::now();
  absl::Status status = executor_->Launch(stream, session_id_, request, pins);
  launches_.fetch_add(1, std::memory_order_relaxed);
  kernel_ns_.fetch_add(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                 std::chrono::steady_clock::now() - started)
                                                 .count()),
                       std::memory_order_relaxed);
  if (!status.ok()) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    return absl::Status(status.code(), absl::StrCat(kernel_name, ": ", status.message()));
  }
  return absl::OkStatus();
}

}  // namespace vgpu
