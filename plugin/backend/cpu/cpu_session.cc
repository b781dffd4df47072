// A client's session on the CPU backing executor (see cpu_session.h).
#include "plugin/backend/cpu/cpu_session.h"

#define EIGEN_USE_THREADS
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/fair_compute_pool.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu {
namespace {

Reply ErrorReply(absl::Status status) {
  Reply reply;
  reply.status = std::move(status);
  return reply;
}

std::string Hex(uint64_t value) { return absl::StrCat("0x", absl::Hex(value)); }

}  // namespace

CpuSession::CpuSession(CpuExecutor* executor, uint64_t session_id, CompletionSink* sink,
                       uint64_t quota_bytes, SessionLimits limits)
    : executor_(executor),
      session_id_(session_id),
      sink_(sink),
      quota_bytes_(quota_bytes),
      limits_(limits) {}

DeviceArena::Usage CpuSession::TotalUsage() const {
  DeviceArena::Usage total;
  for (int d = 0; d < executor_->device_count(); ++d) {
    DeviceArena::Usage usage = executor_->arena(static_cast<uint32_t>(d)).UsageOf(session_id_);
    total.charged += usage.charged;
    total.pending_free += usage.pending_free;
  }
  return total;
}

uint64_t CpuSession::BytesInUse() const { return TotalUsage().charged; }

CpuSession::~CpuSession() {
  absl::flat_hash_map<uint64_t, std::shared_ptr<CpuStream>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams.swap(streams_);
    events_.clear();
  }
  streams.clear();  // each stream drains its queue before it stops
  for (int d = 0; d < executor_->device_count(); ++d) {
    executor_->arena(static_cast<uint32_t>(d)).FreeAllOwnedBy(session_id_);
  }
}

absl::Status CpuSession::CheckDevice(uint32_t device) const {
  if (device >= static_cast<uint32_t>(executor_->device_count())) {
    return absl::InvalidArgumentError(absl::StrCat("no device ", device, " on this executor (it has ",
                                                   executor_->device_count(), ")"));
  }
  return absl::OkStatus();
}

std::shared_ptr<CpuStream> CpuSession::FindStream(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second;
}

absl::Status CpuSession::PinRanges(absl::Span<const BufferArg> ranges, PinnedRanges* pins) {
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

absl::Status CpuSession::PinCommandRanges(const Command& command, PinnedRanges* pins) {
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
      const KernelInfo* kernel = Kernels().Find(static_cast<uint32_t>(command.object));
      return absl::Status(
          status.code(),
          absl::StrCat(kernel != nullptr ? kernel->name : absl::StrCat("kernel ", command.object),
                       ": ", status.message()));
    }
    default:
      return absl::OkStatus();
  }
}

absl::StatusOr<uint64_t> CpuSession::TryAllocate(uint32_t device, uint64_t size) {
  DeviceArena& arena = executor_->arena(device);
  std::lock_guard<std::mutex> memory_lock(memory_mu_);
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

void CpuSession::WaitForQueuedWork(std::chrono::milliseconds timeout) {
  std::vector<std::pair<std::shared_ptr<CpuStream>, uint64_t>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams.reserve(streams_.size());
    for (auto& [id, stream] : streams_) streams.emplace_back(stream, stream->enqueued());
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& [stream, position] : streams) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !stream->WaitUntilCompletedFor(position, left)) return;
  }
}

Reply CpuSession::HandleAllocate(Command& command) {
  if (absl::Status s = CheckDevice(command.device); !s.ok()) return ErrorReply(s);
  absl::StatusOr<uint64_t> address = TryAllocate(command.device, command.size);
  if (!address.ok() && absl::IsResourceExhausted(address.status()) &&
      TotalUsage().pending_free > 0) {
    // Memory this client freed is still used by its own queued work (stream-ordered free):
    // let that work finish (bounded), then try once more.
    WaitForQueuedWork(limits_.pending_free_wait);
    address = TryAllocate(command.device, command.size);
  }
  if (!address.ok()) return ErrorReply(address.status());
  Reply reply;
  reply.value = *address;
  return reply;
}

// One handler per command kind; the stream-ordered commands share EnqueueOnStream.
const CpuSession::Handler* CpuSession::HandlerTable() {
  static const auto* table = [] {
    auto* t = new std::array<Handler, static_cast<size_t>(CommandKind::kNumKinds)>();
    auto set = [t](CommandKind kind, Handler handler) {
      (*t)[static_cast<size_t>(kind)] = handler;
    };
    set(CommandKind::kAllocate, &CpuSession::HandleAllocate);
    set(CommandKind::kFree, &CpuSession::HandleFree);
    set(CommandKind::kMemoryInfo, &CpuSession::HandleMemoryInfo);
    set(CommandKind::kCreateStream, &CpuSession::HandleCreateStream);
    set(CommandKind::kDestroyStream, &CpuSession::HandleDestroyStream);
    set(CommandKind::kSynchronizeStream, &CpuSession::HandleStreamStatus);
    set(CommandKind::kStreamStatus, &CpuSession::HandleStreamStatus);
    set(CommandKind::kSynchronizeDevice, &CpuSession::HandleSynchronizeDevice);
    set(CommandKind::kMemcpyNow, &CpuSession::HandleMemcpyNow);
    set(CommandKind::kDestroyEvent, &CpuSession::HandleDestroyEvent);
    set(CommandKind::kDescriptorCreate, &CpuSession::HandleDescriptorCreate);
    set(CommandKind::kDescriptorSet, &CpuSession::HandleDescriptorSet);
    set(CommandKind::kDescriptorDestroy, &CpuSession::HandleDescriptorDestroy);
    for (CommandKind kind : {CommandKind::kRecordEvent, CommandKind::kWaitEvent,
                             CommandKind::kMemcpyHtoD, CommandKind::kMemcpyDtoH,
                             CommandKind::kMemcpyDtoD, CommandKind::kMemset, CommandKind::kLaunch,
                             CommandKind::kNotify}) {
      set(kind, &CpuSession::EnqueueOnStream);
    }
    return t;
  }();
  return table->data();
}

Reply CpuSession::Handle(Command command) {
  const auto index = static_cast<size_t>(command.kind);
  if (index >= static_cast<size_t>(CommandKind::kNumKinds) || HandlerTable()[index] == nullptr) {
    return ErrorReply(absl::InvalidArgumentError(
        absl::StrCat("unknown command kind ", static_cast<int>(command.kind))));
  }
  return (this->*HandlerTable()[index])(command);
}

Reply CpuSession::HandleFree(Command& command) {
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

Reply CpuSession::HandleMemoryInfo(Command& command) {
  if (absl::Status s = CheckDevice(command.device); !s.ok()) return ErrorReply(s);
  Reply reply;
  reply.memory = executor_->arena(command.device).Info();
  if (quota_bytes_ > 0) {  // what this client may still use
    const uint64_t in_use = std::min(TotalUsage().charged, quota_bytes_);
    reply.memory.limit_bytes = std::min(reply.memory.limit_bytes, quota_bytes_);
    reply.memory.bytes_in_use = in_use;
    reply.memory.largest_free_block =
        std::min(reply.memory.largest_free_block, quota_bytes_ - in_use);
  }
  return reply;
}

Reply CpuSession::HandleCreateStream(Command& command) {
  if (absl::Status s = CheckDevice(command.device); !s.ok()) return ErrorReply(s);
  std::lock_guard<std::mutex> lock(mu_);
  if (command.stream == 0 || streams_.contains(command.stream)) {
    return ErrorReply(absl::AlreadyExistsError(
        absl::StrCat("stream id ", command.stream, " is zero or already in use")));
  }
  if (streams_.size() >= static_cast<size_t>(limits_.max_streams)) {
    return ErrorReply(absl::ResourceExhaustedError(absl::StrCat(
        "this client already has ", streams_.size(), " streams, the most it may have "
        "(--max_streams_per_client=", limits_.max_streams, ")")));
  }
  std::shared_ptr<CpuStream> stream;
  try {  // each stream is a worker thread, which the system may refuse
    stream = std::make_shared<CpuStream>(
        command.stream, command.device,
        [this](CpuStream::Work& work, const absl::Status& s) { return Execute(work, s); });
  } catch (const std::system_error& error) {
    return ErrorReply(absl::ResourceExhaustedError(
        absl::StrCat("cannot start a worker thread for stream ", command.stream, ": ",
                     error.what())));
  }
  streams_.emplace(command.stream, std::move(stream));
  return Reply{};
}

Reply CpuSession::HandleDestroyStream(Command& command) {
  std::shared_ptr<CpuStream> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(command.stream);
    if (it == streams_.end()) {
      return ErrorReply(absl::NotFoundError(absl::StrCat("no stream ", command.stream)));
    }
    stream = std::move(it->second);
    streams_.erase(it);
  }
  stream->WaitUntilCompleted(stream->enqueued());
  return Reply{};
}

// kSynchronizeStream waits and reports the first error once; kStreamStatus only looks.
Reply CpuSession::HandleStreamStatus(Command& command) {
  std::shared_ptr<CpuStream> stream = FindStream(command.stream);
  if (stream == nullptr) {
    return ErrorReply(absl::NotFoundError(absl::StrCat("no stream ", command.stream)));
  }
  Reply reply;
  if (command.kind == CommandKind::kSynchronizeStream) {
    stream->WaitUntilCompleted(stream->enqueued());
    reply.status = stream->TakeStatus();  // reported once
  } else {
    reply.status = stream->status();
  }
  return reply;
}

Reply CpuSession::HandleSynchronizeDevice(Command& command) {
  if (absl::Status s = CheckDevice(command.device); !s.ok()) return ErrorReply(s);
  std::vector<std::shared_ptr<CpuStream>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, stream] : streams_) {
      if (stream->device() == command.device) streams.push_back(stream);
    }
  }
  Reply reply;
  for (auto& stream : streams) {
    stream->WaitUntilCompleted(stream->enqueued());
    absl::Status status = stream->TakeStatus();  // reported once
    if (reply.status.ok()) reply.status = status;
  }
  return reply;
}

Reply CpuSession::HandleMemcpyNow(Command& command) {
  PinnedRanges pins;  // held while copying: a concurrent Free waits for the copy
  Reply reply;
  reply.status = PinCommandRanges(command, &pins);
  if (reply.status.ok()) {
    reply.status = Copy(command, pins.empty() ? nullptr : pins[0].host(),
                        pins.empty() ? nullptr : pins[1].host());
  }
  return reply;
}

Reply CpuSession::HandleDestroyEvent(Command& command) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.erase(command.object);
  return Reply{};
}

Reply CpuSession::HandleDescriptorCreate(Command& command) {
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
  if (!descriptors_.try_emplace(command.object, StoredDescriptor{command.params[0], {}}).second) {
    return ErrorReply(absl::AlreadyExistsError(
        absl::StrCat("descriptor id ", command.object, " already exists")));
  }
  return Reply{};
}

Reply CpuSession::HandleDescriptorSet(Command& command) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = descriptors_.find(command.object);
  if (it == descriptors_.end()) {
    return ErrorReply(absl::NotFoundError(absl::StrCat("no descriptor ", command.object)));
  }
  if (command.params.empty() || command.params.size() > kMaxDescriptorSettingsSize) {
    return ErrorReply(absl::InvalidArgumentError("descriptor_set: bad settings size"));
  }
  it->second.settings.assign(command.params.begin(), command.params.end());
  return Reply{};
}

Reply CpuSession::HandleDescriptorDestroy(Command& command) {
  std::lock_guard<std::mutex> lock(mu_);
  if (descriptors_.erase(command.object) == 0) {
    return ErrorReply(absl::NotFoundError(absl::StrCat("no descriptor ", command.object)));
  }
  return Reply{};
}

Reply CpuSession::EnqueueOnStream(Command& command) {
  // Validate and pin the memory it names now, outside the session lock: a bad range fails
  // the stream in its turn without touching memory, and a Free waits for this command.
  CpuStream::Work work;
  work.rejected = PinCommandRanges(command, &work.pins);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(command.stream);
  if (it == streams_.end()) {
    return ErrorReply(absl::NotFoundError(absl::StrCat(
        CommandKindName(command.kind), " names stream ", command.stream,
        ", which does not exist")));
  }
  CpuStream& stream = *it->second;
  if (command.kind == CommandKind::kLaunch && !command.descriptors.empty()) {
    if (absl::Status s = ResolveDescriptorReferencesLocked(command); !s.ok()) {
      return ErrorReply(s);
    }
  }
  if (command.kind == CommandKind::kRecordEvent &&
      events_.size() >= static_cast<size_t>(limits_.max_events) &&
      !events_.contains(command.object)) {
    return ErrorReply(absl::ResourceExhaustedError(absl::StrCat(
        "this client already has ", events_.size(),
        " recorded events, the most it may have (max_events); destroy some")));
  }
  if (command.kind == CommandKind::kWaitEvent) {
    auto event = events_.find(command.object);
    if (event == events_.end()) return Reply{};  // never recorded: nothing to wait for
    if (event->second.stream_id == command.stream) return Reply{};  // FIFO already orders it
    command.dst = event->second.stream_id;
    command.src = event->second.position;
  }
  const uint64_t event_id = command.object;
  const bool is_record = command.kind == CommandKind::kRecordEvent;
  work.command = std::move(command);
  const uint64_t position = stream.Enqueue(std::move(work));
  if (is_record) events_[event_id] = EventMark{stream.id(), position};
  return Reply{};
}

absl::Status CpuSession::ResolveDescriptorReferencesLocked(Command& command) {
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
    if (it == descriptors_.end() || it->second.settings.empty() ||
        it->second.kind != (kind & ~kDescriptorReference)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "launch names descriptor ", id, ", which does not exist or was never set"));
    }
    writer.Put(it->second.kind)
        .Put(static_cast<uint16_t>(it->second.settings.size()))
        .PutBytes(it->second.settings.data(), it->second.settings.size());
  }
  command.descriptors.assign(resolved.begin(), resolved.end());
  return absl::OkStatus();
}

absl::Status CpuSession::Execute(CpuStream::Work& work, const absl::Status& stream_status) {
  Command& command = work.command;
  const PinnedRanges& pins = work.pins;
  switch (command.kind) {
    case CommandKind::kMemcpyHtoD:
    case CommandKind::kMemcpyDtoH:
    case CommandKind::kMemcpyDtoD:
    case CommandKind::kMemset: {
      // Pins: none for an empty command, else src then dst.
      uint8_t* device_src = pins.empty() ? nullptr : pins[0].host();
      uint8_t* device_dst = pins.empty() ? nullptr : pins[1].host();
      // Name the failing command: its error surfaces later, at a synchronisation.
      absl::Status status = command.kind == CommandKind::kMemset
                                ? Memset(command, device_dst)
                                : Copy(command, device_src, device_dst);
      if (status.ok()) return status;
      return absl::Status(status.code(),
                          absl::StrCat(CommandKindName(command.kind), ": ", status.message()));
    }
    case CommandKind::kLaunch:
      return Launch(command, pins);
    case CommandKind::kRecordEvent:
    case CommandKind::kNotify:
      if (sink_ != nullptr) sink_->OnNotify(command.token, stream_status);
      return absl::OkStatus();
    case CommandKind::kWaitEvent: {
      // The stream that recorded the event; if it is gone, its work has all completed.
      std::shared_ptr<CpuStream> other = FindStream(command.dst);
      if (other != nullptr) other->WaitUntilCompleted(command.src);
      return absl::OkStatus();
    }
    default:
      return absl::InternalError(absl::StrCat(CommandKindName(command.kind),
                                              " cannot run on a stream"));
  }
}

absl::Status CpuSession::Copy(const Command& command, const uint8_t* device_src,
                              uint8_t* device_dst) {
  ComputeTenantScope compute_tenant(session_id_);  // fair share of the compute pool
  if (command.size == 0) return absl::OkStatus();
  const uint8_t* source =
      command.src != 0 ? device_src : static_cast<const uint8_t*>(command.host_src);
  uint8_t* destination = command.dst != 0 ? device_dst : static_cast<uint8_t*>(command.host_dst);
  if (source == nullptr || destination == nullptr) {
    return absl::InvalidArgumentError("copy without a source or a destination");
  }
  executor_->compute_device().memcpy(destination, source, command.size);
  return absl::OkStatus();
}

absl::Status CpuSession::Memset(const Command& command, uint8_t* device_dst) {
  if (command.size == 0) return absl::OkStatus();  // empty tensors may have no memory at all
  if (device_dst == nullptr) return absl::InternalError("memset without its pinned memory");
  uint8_t* const dst = device_dst;  // validated and pinned when queued
  if (command.pattern_bytes == 1) {
    std::memset(dst, static_cast<int>(command.pattern & 0xFF), command.size);
    return absl::OkStatus();
  }
  if (command.pattern_bytes == 4) {
    if (command.size % 4 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("memset32 of ", command.size, " bytes, not a multiple of 4"));
    }
    uint32_t* words = reinterpret_cast<uint32_t*>(dst);
    for (uint64_t i = 0; i < command.size / 4; ++i) words[i] = command.pattern;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("memset pattern of ", static_cast<int>(command.pattern_bytes), " bytes"));
}

absl::Status CpuSession::Launch(const Command& command, const PinnedRanges& pins) {
  ComputeTenantScope compute_tenant(session_id_);  // fair share of the compute pool
  const KernelInfo* kernel = Kernels().Find(static_cast<uint32_t>(command.object));
  if (kernel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown kernel id ", command.object));
  }
  absl::InlinedVector<DescriptorView, 6> descriptors;
  if (absl::Status parsed = ParseLaunchDescriptors(command.descriptors, &descriptors); !parsed.ok()) {
    return absl::Status(parsed.code(), absl::StrCat(kernel->name, ": ", parsed.message()));
  }
  if (pins.size() != command.buffers.size()) {
    return absl::InternalError(absl::StrCat(kernel->name, ": buffers were not pinned"));
  }
  // Every buffer was validated and pinned when the launch was queued (empty ones: null).
  absl::InlinedVector<uint8_t*, 4> pointers;
  absl::InlinedVector<uint64_t, 4> sizes;
  for (size_t i = 0; i < command.buffers.size(); ++i) {
    pointers.push_back(pins[i].host());
    sizes.push_back(command.buffers[i].size);
  }
  KernelContext context{pointers, sizes, command.params, &executor_->compute_device(),
                        descriptors};
  absl::Status status = RunKernel(*kernel, context);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat(kernel->name, ": ", status.message()));
  }
  return absl::OkStatus();
}

}  // namespace vgpu
