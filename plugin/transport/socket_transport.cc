// SocketTransport (see socket_transport.h).
#include "plugin/transport/socket_transport.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/common/log.h"
#include "plugin/protocol/command_activity.h"
#include "plugin/common/status_macros.h"
#include "plugin/common/thread_name.h"

namespace vgpu {
namespace {

void SetSocketTimeout(int fd, int option, int timeout_ms) {
  timeval tv{};
  tv.tv_sec = timeout_ms / 1000;
  tv.tv_usec = (timeout_ms % 1000) * 1000;
  ::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof(tv));
}

void SetReceiveTimeout(int fd, int timeout_ms) { SetSocketTimeout(fd, SO_RCVTIMEO, timeout_ms); }

// The watchdog looks at the connection this many times per deadline: the deadline fires after
// between 1 and 1 + 2/kWatchdogTicksPerDeadline deadlines of silence.
constexpr int kWatchdogTicksPerDeadline = 8;

std::string Seconds(int milliseconds) {
  return absl::StrCat(static_cast<double>(milliseconds) / 1000.0);
}

bool IsNotifying(CommandKind kind) {
  return kind == CommandKind::kNotify || kind == CommandKind::kRecordEvent;
}

// Offers a shared staging region of `bytes` to the server on a connection that just got its
// Welcome (sequence 1, before the reader thread starts). The region, or null when memfd is
// unavailable or the server refused it (logged: copies then go through the socket); an error
// only when the connection itself failed.
absl::StatusOr<std::shared_ptr<ShmRegion>> AttachShm(int fd, FrameReader& reader,
                                                    const std::string& endpoint,
                                                    uint64_t bytes) {
  absl::StatusOr<std::shared_ptr<ShmRegion>> region = ShmRegion::Create(bytes);
  if (!region.ok()) {
    Log(LogLevel::kWarning, absl::StrCat("vgpu: no shared memory for ", endpoint, " (",
                                         region.status().message(),
                                         "); copies go through the socket"));
    return std::shared_ptr<ShmRegion>();
  }
  std::vector<uint8_t> payload;
  wire::EncodeShmAttach(bytes, &payload);
  VGPU_RETURN_IF_ERROR(WriteFrameWithFd(fd, wire::MessageType::kShmAttach, 1,
                                        {iovec{payload.data(), payload.size()}},
                                        (*region)->fd()));
  absl::StatusOr<wire::FrameHeader> header = reader.ReadHeader();
  if (!header.ok()) return header.status();
  std::vector<uint8_t> answer(header->payload_length);
  VGPU_RETURN_IF_ERROR(reader.ReadExact(answer.data(), answer.size()));
  if (header->type != wire::MessageType::kReply || header->sequence != 1) {
    return absl::InvalidArgumentError("the server answered the shared memory offer oddly");
  }
  absl::StatusOr<Reply> reply = wire::DecodeReply(answer, nullptr);
  if (!reply.ok()) return reply.status();
  if (!reply->status.ok()) {
    Log(LogLevel::kWarning, absl::StrCat("vgpu: server ", endpoint, " declined shared memory (",
                                         reply->status.message(),
                                         "); copies go through the socket"));
    return std::shared_ptr<ShmRegion>();
  }
  return *std::move(region);
}

// The part of copy `command` that starts `offset` bytes in and holds at most `chunk_bytes`
// bytes: every address it names (device and host, source and destination) moved by `offset`.
Command CopyChunk(const Command& command, uint64_t offset, uint64_t chunk_bytes) {
  Command chunk = command;
  chunk.size = std::min(chunk_bytes, command.size - offset);
  if (chunk.dst != 0) chunk.dst += offset;
  if (chunk.src != 0) chunk.src += offset;
  if (chunk.host_src != nullptr) chunk.host_src = static_cast<const uint8_t*>(chunk.host_src) + offset;
  if (chunk.host_dst != nullptr) chunk.host_dst = static_cast<uint8_t*>(chunk.host_dst) + offset;
  return chunk;
}

}  // namespace

uint64_t SocketTransport::ShmBytesFromEnvironment() {
  const char* value = std::getenv("VGPU_SHM");
  if (value != nullptr && std::string(value) == "0") return 0;
  return kDefaultShmBytes;
}

absl::StatusOr<std::unique_ptr<SocketTransport>> SocketTransport::Connect(
    const std::string& endpoint, const std::string& token, CompletionSink* sink,
    wire::Welcome* welcome, int timeout_ms, int silence_timeout_ms, int64_t shm_bytes,
    const std::string& tenant) {
  absl::StatusOr<SocketAddress> address = ParseSocketAddress(endpoint);
  if (!address.ok()) return address.status();
  auto unreachable = [&](const absl::Status& s) {
    return absl::UnavailableError(
        absl::StrCat("vgpu server ", endpoint, " is unreachable: ", s.message()));
  };
  absl::StatusOr<ScopedFd> fd = ConnectSocket(*address, timeout_ms);
  if (!fd.ok()) return unreachable(fd.status());
  // Handshake, bounded by the receive timeout.
  SetReceiveTimeout(fd->get(), timeout_ms);
  std::vector<uint8_t> hello;
  wire::EncodeHello({wire::kWireVersion, wire::Role::kTenant, token, tenant}, &hello);
  if (absl::Status s = WriteFrame(fd->get(), wire::MessageType::kHello, 0,
                                  {iovec{hello.data(), hello.size()}});
      !s.ok()) {
    return unreachable(s);
  }
  FrameReader reader(fd->get());
  absl::StatusOr<wire::FrameHeader> header = reader.ReadHeader();
  if (!header.ok()) return unreachable(header.status());
  std::vector<uint8_t> payload(header->payload_length);
  if (absl::Status s = reader.ReadExact(payload.data(), payload.size()); !s.ok()) {
    return unreachable(s);
  }
  if (header->type == wire::MessageType::kRefused) {
    absl::StatusOr<std::string> reason = wire::DecodeString(payload);
    return absl::PermissionDeniedError(absl::StrCat(
        "vgpu server ", endpoint, " refused the connection: ",
        reason.ok() ? *reason : std::string("(no reason given)")));
  }
  if (header->type != wire::MessageType::kWelcome) {
    return absl::InvalidArgumentError(
        absl::StrCat("vgpu server ", endpoint, " answered the handshake with an unexpected frame"));
  }
  absl::StatusOr<wire::Welcome> decoded = wire::DecodeWelcome(payload);
  if (!decoded.ok()) return decoded.status();
  if (welcome != nullptr) *welcome = *decoded;
  std::shared_ptr<ShmRegion> shm;
  const uint64_t region_bytes =
      shm_bytes < 0 ? ShmBytesFromEnvironment() : static_cast<uint64_t>(shm_bytes);
  if (address->kind == SocketAddress::Kind::kUnix && region_bytes > 0) {
    absl::StatusOr<std::shared_ptr<ShmRegion>> attached =
        AttachShm(fd->get(), reader, endpoint, region_bytes);
    if (!attached.ok()) return unreachable(attached.status());
    shm = *std::move(attached);
  }
  SetReceiveTimeout(fd->get(), 0);  // from now on the reader blocks until data or EOF
  // A write that makes no progress for the deadline fails (EAGAIN) instead of blocking forever.
  if (silence_timeout_ms > 0) SetSocketTimeout(fd->get(), SO_SNDTIMEO, silence_timeout_ms);
  // Sequence 1 went to the shared memory offer (if any).
  const bool batching = BatchingFromEnvironment();
  const uint64_t template_bytes =
      batching && TemplatesFromEnvironment() ? decoded->template_bytes : 0;
  return std::unique_ptr<SocketTransport>(new SocketTransport(
      endpoint, std::move(*fd), sink, silence_timeout_ms, std::move(shm), 2, batching,
      template_bytes));
}

bool SocketTransport::BatchingFromEnvironment() {
  const char* value = std::getenv("VGPU_BATCH");
  return value == nullptr || std::string_view(value) != "0";
}

bool SocketTransport::TemplatesFromEnvironment() {
  const char* value = std::getenv("VGPU_TEMPLATES");
  return value == nullptr || std::string_view(value) != "0";
}

WireCounters SocketTransport::wire_counters() const {
  WireCounters counters;
  counters.frames = frames_sent_.load(std::memory_order_relaxed);
  counters.bytes = bytes_sent_.load(std::memory_order_relaxed);
  counters.host_data_bytes = host_data_sent_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(batch_mu_);
  counters.templates_created = templates_.templates_created();
  counters.launches_by_template = templates_.launches_by_template();
  return counters;
}

SocketTransport::SocketTransport(std::string endpoint, ScopedFd fd, CompletionSink* sink,
                                 int silence_timeout_ms, std::shared_ptr<ShmRegion> shm,
                                 uint64_t first_sequence, bool batching, uint64_t template_bytes)
    : endpoint_(std::move(endpoint)),
      fd_(std::move(fd)),
      sink_(sink),
      shm_(std::move(shm)),
      shm_space_(shm_ != nullptr ? std::make_unique<ShmSpace>(shm_->size()) : nullptr),
      next_sequence_(first_sequence),
      silence_timeout_ms_(silence_timeout_ms > 0 ? silence_timeout_ms : 0),
      batching_(batching),
      batch_writer_(&batch_),
      templates_(template_bytes) {
  reader_ = std::thread([this] {
    NameCurrentThread("vgpu-reader");
    ReaderLoop();
  });
  if (batching_) {
    flusher_ = std::thread([this] {
      NameCurrentThread("vgpu-flusher");
      FlusherLoop();
    });
  }
  if (silence_timeout_ms_ > 0) {
    watchdog_ = std::thread([this] {
      NameCurrentThread("vgpu-watchdog");
      WatchdogLoop();
    });
  }
  activity::RegisterSource(this);
}

SocketTransport::~SocketTransport() {
  activity::UnregisterSource(this);  // waits for a profile call on this transport to return
  if (flusher_.joinable()) {
    (void)FlushBatch();  // what was posted still goes out before the connection closes
    {
      std::lock_guard<std::mutex> lock(batch_mu_);
      flusher_stopping_ = true;
    }
    batch_cv_.notify_all();
    flusher_.join();
  }
  {
    std::lock_guard<std::mutex> lock(watchdog_mu_);
    watchdog_stopping_ = true;
  }
  watchdog_cv_.notify_all();
  ::shutdown(fd_.get(), SHUT_RDWR);  // the reader sees EOF and fails what is pending
  reader_.join();
  if (watchdog_.joinable()) watchdog_.join();
}

absl::Status SocketTransport::DeadlineStatus(const std::string& what) const {
  return absl::DeadlineExceededError(absl::StrCat(
      "vgpu server ", endpoint_, " ", what, " for ", Seconds(silence_timeout_ms_),
      " s (VGPU_TIMEOUT=", Seconds(silence_timeout_ms_),
      "); the connection was closed: work and device memory of this session are lost, "
      "new work reconnects"));
}

bool SocketTransport::AwaitingServer() {
  std::lock_guard<std::mutex> lock(state_mu_);
  return dead_.ok() &&
         (!calls_pending_.empty() || !copies_pending_.empty() || !tokens_pending_.empty());
}

void SocketTransport::SendProbe() {
  Command probe;
  probe.kind = CommandKind::kMemoryInfo;
  probe.device = 0;  // every server has a device 0
  const uint64_t sequence = next_sequence_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (!dead_.ok()) return;
    calls_pending_[sequence] = std::make_shared<PendingCall>();  // nobody waits on it
  }
  probes_.fetch_add(1, std::memory_order_relaxed);
  (void)WriteCommand(probe, sequence);  // a failure fails the connection
}

void SocketTransport::WatchdogLoop() {
  using Clock = std::chrono::steady_clock;
  const auto deadline = std::chrono::milliseconds(silence_timeout_ms_);
  const auto tick = std::max<Clock::duration>(std::chrono::milliseconds(5),
                                              deadline / kWatchdogTicksPerDeadline);
  uint64_t frames_seen = frames_received_.load(std::memory_order_relaxed);
  bool waiting = false;        // the previous tick found the client waiting
  bool probed = false;         // a probe went out during this silence
  Clock::time_point silent_since;
  std::unique_lock<std::mutex> lock(watchdog_mu_);
  for (;;) {
    if (watchdog_cv_.wait_for(lock, tick, [&] { return watchdog_stopping_; })) return;
    lock.unlock();
    const uint64_t frames = frames_received_.load(std::memory_order_relaxed);
    const bool awaiting = AwaitingServer();
    const Clock::time_point now = Clock::now();
    if (!awaiting || !waiting || frames != frames_seen) {
      // Idle, just started waiting, or the server said something: the silence starts now.
      silent_since = now;
      probed = false;
    } else if (now - silent_since >= deadline) {
      Log(LogLevel::kError, absl::StrCat("vgpu server ", endpoint_, " did not answer for ",
                                         Seconds(silence_timeout_ms_),
                                         " s (VGPU_TIMEOUT); closing the connection"));
      Fail(DeadlineStatus("did not answer"));
      return;
    } else if (!probed) {
      probed = true;
      SendProbe();  // a live server answers at once, even while a long kernel runs
    }
    frames_seen = frames;
    waiting = awaiting;
    if (!DeadStatus().ok()) return;
    lock.lock();
  }
}

absl::Status SocketTransport::DeadStatus() {
  std::lock_guard<std::mutex> lock(state_mu_);
  return dead_;
}

void SocketTransport::Fail(const absl::Status& cause) {
  absl::flat_hash_map<uint64_t, std::shared_ptr<PendingCall>> calls;
  absl::flat_hash_set<uint64_t> tokens;
  absl::Status error;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (dead_.ok()) {
      dead_ = cause.code() == absl::StatusCode::kDeadlineExceeded
                  ? cause
                  : absl::UnavailableError(absl::StrCat("vgpu server ", endpoint_,
                                                        " is unreachable: ", cause.message()));
    }
    error = dead_;
    dead_flag_.store(true, std::memory_order_release);
    calls.swap(calls_pending_);
    tokens.swap(tokens_pending_);
    copies_pending_.clear();
  }
  if (shm_space_ != nullptr) {
    shm_space_->Close();  // nobody waits for room any more
    // A dead connection stays around (ReconnectingTransport keeps it): free the region's pages
    // now, keeping the mapping for any thread still copying.
    shm_->Discard();
  }
  ::shutdown(fd_.get(), SHUT_RDWR);
  for (auto& [sequence, call] : calls) {
    std::lock_guard<std::mutex> lock(call->mu);
    call->reply.status = error;
    call->done = true;
    call->cv.notify_all();
  }
  // Events and host callbacks waiting on this server complete with the error: nobody hangs.
  for (uint64_t token : tokens) {
    if (sink_ != nullptr) sink_->OnNotify(token, error);
  }
}

absl::Status SocketTransport::WriteCommand(const Command& command, uint64_t sequence,
                                          std::optional<uint64_t> shm_offset) {
  std::vector<uint8_t> encoded;
  encoded.reserve(wire::kCommandFixedBytes + command.buffers.size() * 16 +
                  command.params.size() + command.descriptors.size() + 8);
  if (shm_offset.has_value()) {
    wire::EncodeShmCommand(command, *shm_offset, &encoded);
  } else {
    wire::EncodeCommand(command, &encoded);
  }
  std::vector<iovec> parts{iovec{encoded.data(), encoded.size()}};
  uint64_t host_data = 0;
  if (!shm_offset.has_value() && wire::HasHostData(command) && command.size > 0) {
    parts.push_back(iovec{const_cast<void*>(command.host_src), command.size});
    host_data = command.size;
  }
  absl::Status status;
  int write_errno = 0;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (batching_) VGPU_RETURN_IF_ERROR(FlushBatchLocked());
    status = WriteFrame(fd_.get(), wire::MessageType::kCommand, sequence, std::move(parts));
    write_errno = errno;
    if (status.ok()) {
      frames_sent_.fetch_add(1, std::memory_order_relaxed);
      bytes_sent_.fetch_add(wire::kHeaderBytes + encoded.size() + host_data,
                            std::memory_order_relaxed);
      host_data_sent_.fetch_add(host_data, std::memory_order_relaxed);
      commands_written_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (!status.ok()) return WriteFailed(status, write_errno);
  return absl::OkStatus();
}

absl::Status SocketTransport::WriteFailed(const absl::Status& status, int write_errno) {
  // SO_SNDTIMEO expired: the server took no byte for the whole deadline.
  const bool timed_out =
      silence_timeout_ms_ > 0 && (write_errno == EAGAIN || write_errno == EWOULDBLOCK);
  Fail(timed_out ? DeadlineStatus("accepted no data") : status);
  return DeadStatus();
}

absl::Status SocketTransport::AppendToBatch(const Command& command, uint64_t sequence,
                                            bool flush_now) {
  bool full, was_empty;
  {
    std::lock_guard<std::mutex> lock(batch_mu_);
    was_empty = batch_.empty();
    // Entries join the batch in the order they are written, which is the order the server
    // applies them: the template tables of both ends stay in step.
    const LaunchPlan plan = templates_.Plan(command);
    switch (plan.form) {
      case wire::BatchEntryForm::kDefineTemplate:
        for (uint32_t id : plan.released) batch_writer_.AddRelease(sequence, id);
        batch_writer_.AddDefinition(sequence, plan.template_id, command);
        break;
      case wire::BatchEntryForm::kTemplatedLaunch:
        batch_writer_.AddTemplatedLaunch(sequence, plan.template_id, plan.bindings);
        break;
      default:  // kCommand (a plan is never a release or a compact command)
        batch_writer_.AddCommandOrCompact(sequence, command);
        break;
    }
    ++batch_commands_;
    full = batch_.size() >= kBatchFlushBytes;
  }
  if (flush_now || full) return FlushBatch();
  if (was_empty) batch_cv_.notify_one();  // the flusher writes it after kBatchDelay
  return absl::OkStatus();
}

absl::Status SocketTransport::FlushBatch() {
  std::lock_guard<std::mutex> lock(write_mu_);
  return FlushBatchLocked();
}

absl::Status SocketTransport::FlushBatchLocked() {
  std::vector<uint8_t> payload;
  uint64_t commands;
  {
    std::lock_guard<std::mutex> lock(batch_mu_);
    if (batch_.empty()) return absl::OkStatus();
    payload.swap(batch_);
    batch_writer_.Reset();
    commands = batch_commands_;
    batch_commands_ = 0;
    batch_.reserve(payload.capacity());
  }
  const absl::Status status = WriteFrame(fd_.get(), wire::MessageType::kCommandBatch, 0,
                                         {iovec{payload.data(), payload.size()}});
  const int write_errno = errno;
  if (!status.ok()) return WriteFailed(status, write_errno);
  frames_sent_.fetch_add(1, std::memory_order_relaxed);
  bytes_sent_.fetch_add(wire::kHeaderBytes + payload.size(), std::memory_order_relaxed);
  commands_written_.fetch_add(commands, std::memory_order_relaxed);
  return absl::OkStatus();
}

void SocketTransport::FlusherLoop() {
  std::unique_lock<std::mutex> lock(batch_mu_);
  for (;;) {
    batch_cv_.wait(lock, [&] { return flusher_stopping_ || !batch_.empty(); });
    if (flusher_stopping_) return;
    lock.unlock();
    std::this_thread::sleep_for(kBatchDelay);  // let more commands join
    (void)FlushBatch();  // a failed write fails the connection: later posts see it
    lock.lock();
  }
}

uint64_t SocketTransport::SplitChunkBytes(const Command& command) const {
  // Copies with host memory go in chunks that fit a frame (or pipeline through the region).
  const bool host_copy = wire::HasHostData(command) || wire::WantsHostData(command);
  const uint64_t chunk_bytes = shm_ != nullptr ? kShmChunkBytes : wire::kMaxCopyChunkBytes;
  return host_copy && command.size > chunk_bytes ? chunk_bytes : 0;
}

absl::Status SocketTransport::Post(Command command) {
  const uint64_t chunk_bytes = SplitChunkBytes(command);
  if (chunk_bytes == 0) return PostOne(std::move(command));
  for (uint64_t offset = 0; offset < command.size; offset += chunk_bytes) {
    if (absl::Status s = PostOne(CopyChunk(command, offset, chunk_bytes)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::optional<uint64_t> SocketTransport::LeaseShm(const Command& command) {
  if (shm_ == nullptr || command.size < kShmMinCopyBytes) return std::nullopt;
  if (!wire::HasHostData(command) && !wire::WantsHostData(command)) return std::nullopt;
  std::optional<uint64_t> offset = shm_space_->Allocate(command.size, kShmWait);
  if (offset.has_value() && wire::HasHostData(command)) {
    std::memcpy(shm_->data() + *offset, command.host_src, command.size);
  }
  return offset;
}

void SocketTransport::NoteProfiled(const Command& command, uint64_t sequence) {
  std::optional<activity::Record> record = ActivityRecordOf(command);
  if (!record.has_value()) return;
  std::lock_guard<std::mutex> lock(profile_mu_);
  if (!profiling_.load(std::memory_order_relaxed)) return;
  if (profile_sent_.size() >= wire::kMaxProfileRecords) {
    ++profile_dropped_;
    return;
  }
  profile_sent_.emplace(sequence, *record);
}

absl::StatusOr<wire::ProfileRecords> SocketTransport::ControlProfile(wire::ProfileAction action,
                                                                     int64_t* sent_ns,
                                                                     int64_t* answered_ns) {
  const uint64_t sequence = next_sequence_.fetch_add(1);
  auto pending = std::make_shared<PendingCall>();
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (!dead_.ok()) return dead_;
    calls_pending_[sequence] = pending;
  }
  std::vector<uint8_t> payload;
  wire::EncodeProfileControl(action, &payload);
  *sent_ns = activity::NowNs();
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    absl::Status status = batching_ ? FlushBatchLocked() : absl::OkStatus();
    if (status.ok()) {
      status = WriteFrame(fd_.get(), wire::MessageType::kProfileControl, sequence,
                          {iovec{payload.data(), payload.size()}});
      if (!status.ok()) (void)WriteFailed(status, errno);  // answers the pending call
      if (status.ok()) {
        frames_sent_.fetch_add(1, std::memory_order_relaxed);
        bytes_sent_.fetch_add(wire::kHeaderBytes + payload.size(), std::memory_order_relaxed);
      }
    }
  }
  std::unique_lock<std::mutex> lock(pending->mu);
  pending->cv.wait(lock, [&] { return pending->done; });
  *answered_ns = activity::NowNs();
  if (!pending->reply.status.ok()) return pending->reply.status;
  return wire::DecodeProfileRecords(pending->answer);
}

void SocketTransport::OnProfileStart() {
  {
    std::lock_guard<std::mutex> lock(profile_mu_);
    profile_sent_.clear();
    profile_dropped_ = 0;
    profiling_.store(true, std::memory_order_relaxed);
  }
  int64_t sent_ns = 0, answered_ns = 0;
  absl::StatusOr<wire::ProfileRecords> started =
      ControlProfile(wire::ProfileAction::kStart, &sent_ns, &answered_ns);
  if (!started.ok()) {
    Log(LogLevel::kWarning, absl::StrCat("vgpu: the profile has no executor times from ",
                                         endpoint_, ": ", started.status().message()));
  }
}

void SocketTransport::Collect(std::vector<activity::Record>* records, uint64_t* dropped) {
  if (!profiling_.exchange(false)) return;  // no profile started on this connection
  int64_t sent_ns = 0, answered_ns = 0;
  absl::StatusOr<wire::ProfileRecords> answer =
      ControlProfile(wire::ProfileAction::kCollect, &sent_ns, &answered_ns);
  absl::flat_hash_map<uint64_t, activity::Record> sent;
  {
    std::lock_guard<std::mutex> lock(profile_mu_);
    sent.swap(profile_sent_);
    *dropped += profile_dropped_;
    profile_dropped_ = 0;
  }
  if (!answer.ok()) {
    Log(LogLevel::kWarning, absl::StrCat("vgpu: the profile has no executor times from ",
                                         endpoint_, ": ", answer.status().message()));
    return;
  }
  *dropped += answer->dropped;
  // The server answered between sent_ns and answered_ns: take it as the middle.
  const int64_t offset_ns = answer->server_now_ns - (sent_ns + (answered_ns - sent_ns) / 2);
  std::vector<activity::NameId> names;
  names.reserve(answer->names.size());
  for (const std::string& name : answer->names) names.push_back(activity::Intern(name));
  for (const wire::ExecutedCommand& executed : answer->records) {
    auto it = sent.find(executed.sequence);
    if (it == sent.end()) continue;  // not a command the client tagged (a keep-alive probe)
    activity::Record record = it->second;
    record.start_ns = executed.start_ns - offset_ns;
    record.end_ns = executed.end_ns - offset_ns;
    if (executed.name != 0) record.name = names[executed.name - 1];
    records->push_back(record);
  }
}

absl::Status SocketTransport::PostOne(Command command) {
  const uint64_t sequence = next_sequence_.fetch_add(1);
  if (command.activity.recorded && profiling_.load(std::memory_order_relaxed)) {
    NoteProfiled(command, sequence);
  }
  const std::optional<uint64_t> lease = LeaseShm(command);
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (!dead_.ok()) {
      if (lease.has_value()) shm_space_->Release(*lease, command.size);
      return dead_;
    }
    if (IsNotifying(command.kind)) tokens_pending_.insert(command.token);
    if (lease.has_value()) {
      // Answered by a Data frame once the copy ran: then the range is returned (and, device to
      // host, its bytes copied out).
      copies_pending_[sequence] =
          PendingCopy{wire::WantsHostData(command) ? command.host_dst : nullptr, command.size,
                      true, *lease};
      shm_copies_.fetch_add(1, std::memory_order_relaxed);
    } else if (wire::WantsHostData(command)) {
      copies_pending_[sequence] = PendingCopy{command.host_dst, command.size};
    }
  }
  // Posted commands without host data join the batch; a notification, an event recording and
  // a device-to-host copy are waited for, so they go out at once (with the batch before them).
  const bool batchable = batching_ && !lease.has_value() && !wire::HasHostData(command);
  absl::Status status =
      batchable ? AppendToBatch(command, sequence,
                                IsNotifying(command.kind) || wire::WantsHostData(command))
                : WriteCommand(command, sequence, lease);
  if (!status.ok() && IsNotifying(command.kind)) {
    // The caller unregisters the token itself when Post fails: do not notify it as well.
    std::lock_guard<std::mutex> lock(state_mu_);
    tokens_pending_.erase(command.token);
  }
  return status;
}

Reply SocketTransport::Call(Command command) {
  const uint64_t chunk_bytes = SplitChunkBytes(command);
  if (chunk_bytes == 0) return CallOne(std::move(command));
  Reply reply;
  for (uint64_t offset = 0; offset < command.size; offset += chunk_bytes) {
    reply = CallOne(CopyChunk(command, offset, chunk_bytes));
    if (!reply.status.ok()) return reply;
  }
  return reply;
}

Reply SocketTransport::CallOne(Command command) {
  calls_.fetch_add(1);
  const uint64_t sequence = next_sequence_.fetch_add(1);
  if (command.activity.recorded && profiling_.load(std::memory_order_relaxed)) {
    NoteProfiled(command, sequence);
  }
  auto pending = std::make_shared<PendingCall>();
  const std::optional<uint64_t> lease = LeaseShm(command);
  // Through the region the Reply carries no data (any would be "of the wrong size").
  if (wire::WantsHostData(command) && !lease.has_value()) {
    pending->host_dst = command.host_dst;
    pending->size = command.size;
  }
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (!dead_.ok()) {
      if (lease.has_value()) shm_space_->Release(*lease, command.size);
      Reply reply;
      reply.status = dead_;
      return reply;
    }
    calls_pending_[sequence] = pending;
  }
  if (lease.has_value()) shm_copies_.fetch_add(1, std::memory_order_relaxed);
  if (absl::Status s = WriteCommand(command, sequence, lease); !s.ok()) {
    // Fail() answered every pending call, this one included.
  }
  std::unique_lock<std::mutex> lock(pending->mu);
  pending->cv.wait(lock, [&] { return pending->done; });
  Reply reply = std::move(pending->reply);
  if (lease.has_value()) {
    // The Reply came after the copy ran: the range holds the bytes (device to host).
    if (reply.status.ok() && wire::WantsHostData(command)) {
      std::memcpy(command.host_dst, shm_->data() + *lease, command.size);
    }
    shm_space_->Release(*lease, command.size);
  }
  return reply;
}

absl::Status SocketTransport::ReadReply(FrameReader& reader, const wire::FrameHeader& header) {
  // The fixed part: int32 code, string message, uint64 value, 6 x uint64 memory; data follows.
  uint8_t head[8];
  if (header.payload_length < sizeof(head)) return absl::InvalidArgumentError("short reply");
  if (absl::Status s = reader.ReadExact(head, sizeof(head)); !s.ok()) return s;
  uint32_t message_length = 0;
  std::memcpy(&message_length, head + 4, sizeof(message_length));
  const uint64_t fixed = sizeof(head) + static_cast<uint64_t>(message_length) + 56;
  if (message_length > wire::kMaxStringBytes || fixed > header.payload_length) {
    return absl::InvalidArgumentError("malformed reply frame");
  }
  std::vector<uint8_t> bytes(fixed);
  std::memcpy(bytes.data(), head, sizeof(head));
  if (absl::Status s = reader.ReadExact(bytes.data() + sizeof(head), fixed - sizeof(head));
      !s.ok()) {
    return s;
  }
  absl::StatusOr<Reply> reply = wire::DecodeReply(bytes, nullptr);
  if (!reply.ok()) return reply.status();
  const uint64_t data = header.payload_length - fixed;
  std::shared_ptr<PendingCall> call;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    auto it = calls_pending_.find(header.sequence);
    if (it != calls_pending_.end()) {
      call = std::move(it->second);
      calls_pending_.erase(it);
    }
  }
  if (call == nullptr) return reader.ReadExact(nullptr, data);  // nobody waits: discard
  absl::Status read;
  if (data > 0) {
    if (call->host_dst != nullptr && data == call->size) {
      read = reader.ReadExact(call->host_dst, data);
    } else {
      read = reader.ReadExact(nullptr, data);
      if (reply->status.ok()) reply->status = absl::InternalError("reply data of the wrong size");
    }
  }
  std::lock_guard<std::mutex> lock(call->mu);
  call->reply = *std::move(reply);
  if (!read.ok()) call->reply.status = read;
  call->done = true;
  call->cv.notify_all();
  return read;
}

absl::Status SocketTransport::ReadProfileRecords(FrameReader& reader,
                                                 const wire::FrameHeader& header) {
  std::vector<uint8_t> payload(header.payload_length);
  VGPU_RETURN_IF_ERROR(reader.ReadExact(payload.data(), payload.size()));
  std::shared_ptr<PendingCall> call;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    auto it = calls_pending_.find(header.sequence);
    if (it == calls_pending_.end()) return absl::OkStatus();  // nobody waits: discard
    call = std::move(it->second);
    calls_pending_.erase(it);
  }
  std::lock_guard<std::mutex> lock(call->mu);
  call->answer = std::move(payload);
  call->done = true;
  call->cv.notify_all();
  return absl::OkStatus();
}

absl::Status SocketTransport::ReadData(FrameReader& reader, const wire::FrameHeader& header) {
  if (header.payload_length < 1) return absl::InvalidArgumentError("short data frame");
  uint8_t ok = 0;
  if (absl::Status s = reader.ReadExact(&ok, 1); !s.ok()) return s;
  const uint64_t data = header.payload_length - 1;
  PendingCopy copy;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    auto it = copies_pending_.find(header.sequence);
    if (it != copies_pending_.end()) {
      copy = it->second;
      copies_pending_.erase(it);
    }
  }
  if (copy.shm) {
    // The copy ran (or was skipped): its range is done with. Device to host, the bytes are in
    // the range; they reach TensorFlow's buffer before any later frame is looked at.
    if (ok && copy.host_dst != nullptr && data == 0) {
      std::memcpy(copy.host_dst, shm_->data() + copy.shm_offset, copy.size);
    }
    shm_space_->Release(copy.shm_offset, copy.size);
    return reader.ReadExact(nullptr, data);
  }
  if (ok && copy.host_dst != nullptr && data == copy.size) {
    return reader.ReadExact(copy.host_dst, data);  // straight into TensorFlow's host buffer
  }
  return reader.ReadExact(nullptr, data);
}

void SocketTransport::ReaderLoop() {
  FrameReader reader(fd_.get());
  absl::Status status;
  std::vector<uint8_t> payload;
  for (;;) {
    absl::StatusOr<wire::FrameHeader> header = reader.ReadHeader();
    if (!header.ok()) {
      status = header.status();
      break;
    }
    frames_received_.fetch_add(1, std::memory_order_relaxed);  // a sign of life (deadline)
    if (header->type == wire::MessageType::kReply) {
      status = ReadReply(reader, *header);
    } else if (header->type == wire::MessageType::kData) {
      status = ReadData(reader, *header);
    } else if (header->type == wire::MessageType::kProfileRecords) {
      status = ReadProfileRecords(reader, *header);
    } else if (header->type == wire::MessageType::kNotify) {
      payload.resize(header->payload_length);
      status = reader.ReadExact(payload.data(), payload.size());
      if (status.ok()) {
        absl::StatusOr<wire::NotifyMessage> notify = wire::DecodeNotify(payload);
        if (!notify.ok()) {
          status = notify.status();
        } else {
          bool expected;
          {
            std::lock_guard<std::mutex> lock(state_mu_);
            expected = tokens_pending_.erase(notify->token) > 0;
          }
          if (expected && sink_ != nullptr) sink_->OnNotify(notify->token, notify->status);
        }
      }
    } else {
      status = absl::InvalidArgumentError("unexpected message from the server");
    }
    if (!status.ok()) break;
  }
  Fail(status);
}

}  // namespace vgpu
