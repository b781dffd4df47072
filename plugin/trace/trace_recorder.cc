// TraceRecorder, TracingTransport (see trace_recorder.h).
#include "plugin/trace/trace_recorder.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/common/log.h"
#include "plugin/protocol/wire_format.h"

namespace vgpu {
namespace trace {
namespace {

absl::Span<const uint8_t> HostBytes(const void* data, uint64_t size) {
  return {static_cast<const uint8_t*>(data), static_cast<size_t>(size)};
}

void PutU64(std::vector<uint8_t>* out, uint64_t value) {
  const size_t at = out->size();
  out->resize(at + sizeof(value));
  std::memcpy(out->data() + at, &value, sizeof(value));  // the host is little-endian
}

HostSide HostSideOf(const Command& command) {
  if (command.host_src != nullptr && (command.kind == CommandKind::kMemcpyHtoD ||
                                      command.kind == CommandKind::kMemcpyNow)) {
    return HostSide::kSource;
  }
  if (command.host_dst != nullptr && (command.kind == CommandKind::kMemcpyDtoH ||
                                      command.kind == CommandKind::kMemcpyNow)) {
    return HostSide::kDestination;
  }
  return HostSide::kNone;
}

// A post or call record's command part: the command, and its host data if it has a source.
std::vector<uint8_t> CommandBody(const Command& command, HostSide side) {
  std::vector<uint8_t> body;
  EncodeCommandBody(command, side,
                    side == HostSide::kSource ? HostBytes(command.host_src, command.size)
                                              : absl::Span<const uint8_t>(),
                    &body);
  return body;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TraceRecorder>> TraceRecorder::Create(const std::string& path,
                                                                     const TraceHeader& header) {
  absl::StatusOr<std::unique_ptr<TraceWriter>> writer = TraceWriter::Create(path, header);
  if (!writer.ok()) return writer.status();
  return std::unique_ptr<TraceRecorder>(new TraceRecorder(*std::move(writer)));
}

TraceRecorder::TraceRecorder(std::unique_ptr<TraceWriter> writer) : writer_(std::move(writer)) {}

TraceRecorder::~TraceRecorder() { Flush(); }

uint64_t TraceRecorder::NowNs() const {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now() - start_)
                                   .count());
}

uint64_t TraceRecorder::AppendLocked(RecordType type, uint16_t ordinal,
                                     absl::Span<const uint8_t> body) {
  const uint64_t index = next_index_++;
  if (failed_) return index;
  if (body.size() > UINT32_MAX) {
    failed_ = true;
    Log(LogLevel::kError, absl::StrCat("VGPU_TRACE: a record of ", body.size(),
                                       " bytes exceeds the format's 4 GiB limit; the trace '",
                                       writer_->path(), "' stops here"));
    return index;
  }
  std::vector<uint8_t> record;
  EncodeRecord(type, ordinal, NowNs(), body, &record);
  absl::Status written = writer_->Append(record);
  if (!written.ok()) {
    failed_ = true;
    Log(LogLevel::kError, absl::StrCat("VGPU_TRACE: ", written.message(), "; recording stops"));
  }
  return index;
}

void TraceRecorder::RecordPost(uint16_t ordinal, const Command& command) {
  const HostSide side = HostSideOf(command);
  std::vector<uint8_t> body = CommandBody(command, side);
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t index = AppendLocked(RecordType::kPost, ordinal, body);
  const uint64_t sequence = next_sequence_++;
  if (side == HostSide::kDestination) {
    copies_[command.stream].push_back(
        PendingCopy{index, ordinal, sequence, command.host_dst, command.size});
    stream_ordinal_[command.stream] = ordinal;
  } else if (command.kind == CommandKind::kNotify || command.kind == CommandKind::kRecordEvent) {
    tokens_[command.token] = PendingToken{command.stream, sequence, ordinal};
  }
}

uint64_t TraceRecorder::BeginCall() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_sequence_++;
}

void TraceRecorder::CaptureLocked(uint64_t stream, uint64_t sequence, bool failed) {
  auto it = copies_.find(stream);
  if (it == copies_.end()) return;
  std::deque<PendingCopy>& pending = it->second;
  while (!pending.empty() && pending.front().sequence < sequence) {
    const PendingCopy& copy = pending.front();
    TraceResult result;
    if (failed) {
      result.form = ResultForm::kNotCaptured;
      result.size = copy.size;
    } else {
      result = MakeResult(HostBytes(copy.host_dst, copy.size));
    }
    std::vector<uint8_t> body;
    PutU64(&body, copy.record_index);
    EncodeResult(result, &body);
    AppendLocked(RecordType::kResult, copy.ordinal, body);
    pending.pop_front();
  }
  if (pending.empty()) {
    copies_.erase(it);
    stream_ordinal_.erase(stream);
  }
}

void TraceRecorder::RecordCall(uint16_t ordinal, const Command& command, const Reply& reply,
                               uint64_t begin) {
  const HostSide side = HostSideOf(command);
  std::vector<uint8_t> body = CommandBody(command, side);
  std::vector<uint8_t> encoded_reply;
  wire::EncodeReply(reply, &encoded_reply);
  body.insert(body.end(), encoded_reply.begin(), encoded_reply.end());
  if (side == HostSide::kDestination && reply.status.ok()) {
    EncodeResult(MakeResult(HostBytes(command.host_dst, command.size)), &body);
  }
  std::lock_guard<std::mutex> lock(mu_);
  // The copies a synchronisation waited for are complete: record their bytes first, so a
  // replay compares them before it reaches the call.
  const bool failed = !reply.status.ok();
  switch (command.kind) {
    case CommandKind::kSynchronizeStream:
    case CommandKind::kDestroyStream:
      CaptureLocked(command.stream, begin, failed);
      break;
    case CommandKind::kSynchronizeDevice: {
      std::vector<uint64_t> streams;
      for (const auto& [stream, owner] : stream_ordinal_) {
        if (owner == ordinal) streams.push_back(stream);
      }
      for (uint64_t stream : streams) CaptureLocked(stream, begin, failed);
      break;
    }
    default:
      break;
  }
  AppendLocked(RecordType::kCall, ordinal, body);
}

void TraceRecorder::OnNotify(uint64_t token, const absl::Status& stream_status) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tokens_.find(token);
  if (it == tokens_.end()) return;
  const PendingToken pending = it->second;
  tokens_.erase(it);
  CaptureLocked(pending.stream, pending.sequence, !stream_status.ok());
  std::vector<uint8_t> body;
  PutU64(&body, token);
  AppendLocked(RecordType::kNotified, pending.ordinal, body);
}

void TraceRecorder::RecordStep(uint16_t ordinal, uint64_t iterations) {
  std::vector<uint8_t> body;
  PutU64(&body, iterations);
  std::lock_guard<std::mutex> lock(mu_);
  AppendLocked(RecordType::kStep, ordinal, body);
  if (!failed_) (void)writer_->Flush();
}

void TraceRecorder::SetMemoryLimit(uint64_t memory_limit) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_) return;
  absl::Status rewritten = writer_->RewriteMemoryLimit(memory_limit);
  if (!rewritten.ok()) {
    failed_ = true;
    Log(LogLevel::kError, absl::StrCat("VGPU_TRACE: ", rewritten.message(), "; recording stops"));
  }
}

void TraceRecorder::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_) (void)writer_->Flush();
}

absl::Status TracingTransport::Post(Command command) {
  std::lock_guard<std::mutex> order(post_order_mu_);
  recorder_->RecordPost(ordinal_, command);
  return inner_->Post(std::move(command));
}

Reply TracingTransport::Call(Command command) {
  std::unique_lock<std::mutex> memory_order(recorder_->memory_calls_mutex(), std::defer_lock);
  if (command.kind == CommandKind::kAllocate || command.kind == CommandKind::kFree) {
    memory_order.lock();
  }
  // The reply does not own the command's host memory: keep what RecordCall needs.
  Command recorded = command;
  uint64_t begin = 0;
  {
    // Every post recorded before `begin` has been handed on, so a synchronisation covers it.
    std::lock_guard<std::mutex> order(post_order_mu_);
    begin = recorder_->BeginCall();
  }
  Reply reply = inner_->Call(std::move(command));
  recorder_->RecordCall(ordinal_, recorded, reply, begin);
  return reply;
}

}  // namespace trace
}  // namespace vgpu
