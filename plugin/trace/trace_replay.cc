// Replay, comparison and profiling of command traces, and the `vgpu trace` command line (see
// trace_replay.h).
#include "plugin/trace/trace_replay.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <iomanip>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/executor_registry.h"
#include "plugin/common/config.h"
#include "plugin/transport/inproc_transport.h"
#include "plugin/transport/transport_factory.h"

namespace vgpu {
namespace trace {
namespace {

// Tokens of the replay's own notifications (recorded tokens come from the client's hub, which
// counts up from 1 and never reaches this bit; a `vgpu server` keeps bit 63 for itself).
constexpr uint64_t kReplayTokenBit = 1ull << 62;
// An in-process replay of a trace that names no memory limit grants each device this much (at
// most DefaultReplayMemoryLimit()).
constexpr uint64_t kUnrecordedMemoryLimit = 1ull << 30;

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// A command of the replay's own (a synchronisation, a notification).
Command ReplayCommand(CommandKind kind, uint32_t device, uint64_t stream, uint64_t token = 0) {
  Command command;
  command.kind = kind;
  command.device = device;
  command.stream = stream;
  command.token = token;
  return command;
}

std::string KernelName(uint32_t id) {
  const KernelInfo* info = Kernels().Find(id);
  return info != nullptr ? info->name : "";
}

// Receives the replay session's notifications: the replay waits for its own tokens (copies) and
// for the recorded ones whose arrival the trace recorded.
class ReplaySink final : public CompletionSink {
 public:
  void OnNotify(uint64_t token, const absl::Status& stream_status) override {
    std::lock_guard<std::mutex> lock(mu_);
    reached_[token] = stream_status;
    cv_.notify_all();
  }
  // Waits until `token` was notified; its stream's status then, or DeadlineExceeded.
  absl::Status Wait(uint64_t token, int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return reached_.contains(token); })) {
      return absl::DeadlineExceededError(
          absl::StrCat("the stream did not get there within ", timeout_ms,
                       " ms (--wait_timeout)"));
    }
    absl::Status status = reached_[token];
    reached_.erase(token);
    return status;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  absl::flat_hash_map<uint64_t, absl::Status> reached_;
};

// An asynchronous device-to-host copy of the replay, waiting for its recorded result.
struct PendingResult {
  std::shared_ptr<std::vector<uint8_t>> bytes;
  uint64_t token;
  CommandKind kind;
  uint16_t ordinal;
  uint64_t stream;
};

class Replayer {
 public:
  Replayer(const ReplayOptions& options, const TraceHeader& header)
      : options_(options), translators_(header.device_count) {
    report_.header = header;
    if (options.memory_limit > 0) {
      memory_limit_ = options.memory_limit;
    } else {
      memory_limit_ =
          std::min(header.memory_limit > 0 ? header.memory_limit : kUnrecordedMemoryLimit,
                   DefaultReplayMemoryLimit(header.device_count));
    }
  }

  // The session is drained before the host buffers its copies may still write go (pending_ is
  // declared after transport_, so it would otherwise be destroyed first: an error that stops
  // the replay with copies in flight).
  ~Replayer() { transport_.reset(); }

  absl::Status Open() {
    const TraceHeader& header = report_.header;
    if (options_.server.empty()) {
      ExecutorOptions executor_options;
      executor_options.device_count = static_cast<int>(header.device_count);
      executor_options.memory_limit_per_device = memory_limit_;
      absl::StatusOr<std::unique_ptr<BackingExecutor>> executor =
          CreateExecutor(options_.executor, executor_options);
      if (!executor.ok()) return executor.status();
      executor_ = *std::move(executor);
      transport_ = std::make_unique<InprocTransport>(executor_->OpenSession(&sink_));
      report_.executor_description = absl::StrCat(options_.executor, " (in-process)");
      return absl::OkStatus();
    }
    TransportContext context;
    context.sink = &sink_;
    context.token = options_.token;
    absl::StatusOr<OpenedTransport> opened = OpenTransport(options_.server, context);
    if (!opened.ok()) return opened.status();
    if (opened->device_count < header.device_count) {
      return absl::FailedPreconditionError(
          absl::StrCat("the trace has ", header.device_count, " device(s), the server ",
                       options_.server, " offers ", opened->device_count));
    }
    transport_ = std::move(opened->transport);
    report_.executor_description = options_.server;
    return absl::OkStatus();
  }

  absl::Status Handle(TraceRecord& record) {
    ++report_.records;
    switch (record.type) {
      case RecordType::kPost: return HandlePost(record);
      case RecordType::kCall: return HandleCall(record);
      case RecordType::kResult: return HandleResult(record);
      case RecordType::kStep: HandleStep(record); return absl::OkStatus();
      case RecordType::kNotified: return HandleNotified(record);
    }
    return absl::OkStatus();
  }

  // After the last record: waits for the streams (their errors are the replay's errors).
  absl::Status Finish() {
    for (uint32_t device = 0; device < report_.header.device_count; ++device) {
      Reply reply = transport_->Call(ReplayCommand(CommandKind::kSynchronizeDevice, device, 0));
      if (!reply.status.ok()) {
        return absl::Status(reply.status.code(),
                            absl::StrCat("device ", device, " failed during the replay: ",
                                         reply.status.message()));
      }
    }
    for (auto& [ordinal, segment] : segments_) {
      if (segment.commands == 0) continue;
      StepStats step = segment;
      step.complete = false;
      step.replay_ns = NowNs() - segment.replay_ns;
      step.recorded_ns = last_time_ns_ - segment.recorded_ns;
      report_.steps.push_back(step);
    }
    for (auto& [id, stats] : kernels_) report_.kernels.push_back(stats);
    return absl::OkStatus();
  }

  ReplayReport TakeReport() { return std::move(report_); }
  bool stopped() const { return stopped_; }

 private:
  absl::Status Context(const TraceRecord& record, const absl::Status& status) const {
    std::string what = absl::StrCat("record ", record.index, " (", CommandKindName(
                                        record.command.kind), ", device ", record.ordinal);
    if (record.command.stream != 0) absl::StrAppend(&what, ", stream ", record.command.stream);
    if (record.command.kind == CommandKind::kLaunch) {
      const uint32_t id = static_cast<uint32_t>(record.command.object);
      absl::StrAppend(&what, ", kernel ", id, " ", KernelName(id));
    }
    absl::StrAppend(&what, ", at byte offset ", record.offset);
    return absl::Status(status.code(), absl::StrCat(what, "): ", status.message()));
  }

  // Before a host buffer is allocated for a device-to-host copy of the trace (a kMemcpyDtoH
  // post, a kMemcpyNow call): its source range must lie inside one recorded allocation (so its
  // size is at most an allocation's, which the replay's memory limit bounds) and the host
  // memory held for copies in flight must stay within the memory limit. Adds the size to that
  // count (ReleaseHostBuffer gives it back).
  absl::Status ReserveHostBuffer(const TraceRecord& record) {
    const uint64_t size = record.command.size;
    if (size == 0) return absl::OkStatus();
    bool inside = false;
    for (size_t i = 0; !inside && i < translators_.size(); ++i) {
      inside = translators_[i].TranslateRange(record.command.src, size).has_value();
    }
    if (!inside) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a device-to-host copy of ", size, " bytes from device address 0x",
          absl::Hex(record.command.src), " does not lie inside one recorded allocation"));
    }
    if (size > memory_limit_ || host_bytes_in_flight_ > memory_limit_ - size) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "a device-to-host copy of ", size, " bytes would hold ", host_bytes_in_flight_ + size,
          " bytes of host memory for copies in flight, over the replay's memory limit of ",
          memory_limit_, " bytes (--memory_limit)"));
    }
    host_bytes_in_flight_ += size;
    return absl::OkStatus();
  }
  void ReleaseHostBuffer(uint64_t size) { host_bytes_in_flight_ -= size; }

  absl::Status Translate(const TraceRecord& record, Command& command) {
    auto translate = [&](uint64_t* address) -> absl::Status {
      if (*address == 0) return absl::OkStatus();
      std::optional<uint64_t> mapped = translators_[record.ordinal].Translate(*address);
      for (size_t i = 0; !mapped && i < translators_.size(); ++i) {
        mapped = translators_[i].Translate(*address);  // device-to-device across devices
      }
      if (!mapped) {
        return absl::FailedPreconditionError(absl::StrCat(
            "device address 0x", absl::Hex(*address), " lies in no recorded allocation"));
      }
      *address = *mapped;
      return absl::OkStatus();
    };
    absl::Status status;
    if (command.kind != CommandKind::kAllocate) {
      status.Update(translate(&command.dst));
      status.Update(translate(&command.src));
    }
    for (BufferArg& buffer : command.buffers) status.Update(translate(&buffer.address));
    command.device = record.ordinal;
    return status;
  }

  void Count(const TraceRecord& record, bool call) {
    const Command& command = record.command;
    ++report_.commands_replayed;
    ++report_.commands_by_kind[static_cast<size_t>(command.kind)];
    if (record.host_side == HostSide::kSource) report_.bytes_to_device += command.size;
    if (record.host_side == HostSide::kDestination) report_.bytes_from_device += command.size;
    StepStats& segment = Segment(record);
    ++segment.commands;
    if (call) ++segment.calls;
  }

  StepStats& Segment(const TraceRecord& record) {
    auto it = segments_.find(record.ordinal);
    if (it == segments_.end()) {
      StepStats fresh;
      fresh.ordinal = record.ordinal;
      fresh.replay_ns = NowNs();
      fresh.recorded_ns = record.time_ns;
      it = segments_.emplace(record.ordinal, fresh).first;
    }
    return it->second;
  }

  absl::Status HandlePost(TraceRecord& record) {
    Command command = record.command;
    absl::Status translated = Translate(record, command);
    if (!translated.ok()) return Context(record, translated);
    Count(record, /*call=*/false);
    if (record.host_side == HostSide::kSource) {
      command.host_src = record.host_data->data();
      command.host_storage = record.host_data;
    }
    const bool notifies =
        command.kind == CommandKind::kNotify || command.kind == CommandKind::kRecordEvent;
    if (notifies && command.token >= kReplayTokenBit) {
      return Context(record, absl::InvalidArgumentError(absl::StrCat(
                                 "token 0x", absl::Hex(command.token),
                                 " uses bits 62-63, which the replay and servers keep")));
    }
    std::shared_ptr<std::vector<uint8_t>> destination;
    if (record.host_side == HostSide::kDestination) {
      absl::Status room = ReserveHostBuffer(record);
      if (!room.ok()) return Context(record, room);
      destination = std::make_shared<std::vector<uint8_t>>(command.size);
      command.host_dst = destination->data();
    }
    const bool launch = command.kind == CommandKind::kLaunch;
    if (launch) {
      last_launch_[command.stream] = {record.index, static_cast<uint32_t>(command.object)};
    }
    const uint64_t stream = command.stream;
    const uint64_t start = NowNs();
    absl::Status posted = transport_->Post(std::move(command));
    if (!posted.ok()) {
      if (destination != nullptr) ReleaseHostBuffer(destination->size());
      return Context(record, posted);
    }
    if (notifies) ++posted_tokens_[record.command.token];
    if (destination != nullptr) {
      // The replay's own notification tells when the copy's bytes are there.
      posted = transport_->Post(ReplayCommand(CommandKind::kNotify, record.ordinal, stream,
                                              kReplayTokenBit | record.index));
      if (!posted.ok()) return Context(record, posted);
      pending_[record.index] = PendingResult{destination, kReplayTokenBit | record.index,
                                             record.command.kind, record.ordinal, stream};
    }
    if (options_.time_launches && stream != 0) {
      Reply reply =
          transport_->Call(ReplayCommand(CommandKind::kSynchronizeStream, record.ordinal, stream));
      if (!reply.status.ok()) return Context(record, reply.status);
    }
    if (launch) {
      const uint32_t id = static_cast<uint32_t>(record.command.object);
      KernelStats& stats = kernels_[id];
      stats.kernel_id = id;
      if (stats.launches == 0) stats.name = KernelName(id);
      ++stats.launches;
      if (options_.time_launches) stats.total_ns += NowNs() - start;
      for (const BufferArg& buffer : record.command.buffers) stats.buffer_bytes += buffer.size;
    }
    return absl::OkStatus();
  }

  absl::Status HandleCall(TraceRecord& record) {
    const Command& recorded = record.command;
    if (recorded.kind == CommandKind::kAllocate && !record.reply.status.ok()) {
      Count(record, /*call=*/true);
      return absl::OkStatus();  // failed when recorded: there is nothing to map
    }
    Command command = recorded;
    absl::Status translated = Translate(record, command);
    if (!translated.ok()) return Context(record, translated);
    Count(record, /*call=*/true);
    std::vector<uint8_t> destination;
    if (record.host_side == HostSide::kSource) {
      command.host_src = record.host_data->data();
      command.host_storage = record.host_data;
    } else if (record.host_side == HostSide::kDestination) {
      absl::Status room = ReserveHostBuffer(record);
      if (!room.ok()) return Context(record, room);
      destination.resize(command.size);
      command.host_dst = destination.data();
    }
    Reply reply = transport_->Call(std::move(command));
    ReleaseHostBuffer(destination.size());
    if (!reply.status.ok() && record.reply.status.ok()) {
      return Context(record, absl::Status(reply.status.code(),
                                          absl::StrCat("failed on replay (it succeeded when "
                                                       "recorded): ",
                                                       reply.status.message())));
    }
    if (!reply.status.ok()) return absl::OkStatus();  // failed when recorded too
    switch (recorded.kind) {
      case CommandKind::kAllocate:
        translators_[record.ordinal].Map(record.reply.value, recorded.size, reply.value);
        break;
      case CommandKind::kFree:
        for (AddressTranslator& translator : translators_) translator.Unmap(recorded.dst);
        break;
      case CommandKind::kMemcpyNow:
        if (record.host_side == HostSide::kDestination) {
          Compare(record, record.result, destination, recorded.kind, recorded.stream);
        }
        break;
      default:
        break;
    }
    return absl::OkStatus();
  }

  absl::Status HandleResult(TraceRecord& record) {
    auto it = pending_.find(record.target_record);
    if (it == pending_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "record ", record.index, " (result): names record ", record.target_record,
          ", which is no device-to-host copy of this trace"));
    }
    PendingResult pending = std::move(it->second);
    pending_.erase(it);
    ReleaseHostBuffer(pending.bytes->size());  // freed when `pending` goes
    absl::Status reached = sink_.Wait(pending.token, options_.wait_timeout_ms);
    if (!reached.ok() && record.result.form != ResultForm::kNotCaptured) {
      return absl::Status(reached.code(),
                          absl::StrCat("record ", record.target_record, " (", CommandKindName(
                                           pending.kind), ", device ", pending.ordinal,
                                       ", stream ", pending.stream,
                                       "): the replay's stream failed: ", reached.message()));
    }
    TraceRecord target;
    target.index = record.target_record;
    target.ordinal = pending.ordinal;
    Compare(target, record.result, *pending.bytes, pending.kind, pending.stream);
    return absl::OkStatus();
  }

  void Compare(const TraceRecord& record, const TraceResult& recorded,
               absl::Span<const uint8_t> replayed, CommandKind kind, uint64_t stream) {
    if (recorded.form == ResultForm::kNotCaptured) return;
    ComparisonResult comparison =
        CompareResult(recorded, replayed, options_.rtol, options_.atol);
    ++report_.results_compared;
    if (comparison.exact) ++report_.results_exact;
    report_.max_abs_error = std::max(report_.max_abs_error, comparison.max_abs_error);
    report_.max_rel_error = std::max(report_.max_rel_error, comparison.max_rel_error);
    if (comparison.equal) return;
    ++report_.mismatches;
    if (!report_.first_mismatch) {
      Mismatch mismatch;
      mismatch.record_index = record.index;
      mismatch.kind = kind;
      mismatch.ordinal = record.ordinal;
      mismatch.stream = stream;
      mismatch.detail = comparison.detail;
      auto launch = last_launch_.find(stream);
      if (launch != last_launch_.end() && launch->second.first < record.index) {
        mismatch.last_launch_record = launch->second.first;
        mismatch.last_launch_kernel = launch->second.second;
      }
      report_.first_mismatch = mismatch;
    }
    if (options_.stop_at_mismatch) stopped_ = true;
  }

  // The recorded run saw this notification before what follows: so must the replay. (The
  // stream's status is not checked here: a failed stream is reported at the next
  // synchronisation, as when recorded.)
  // A token no earlier post carried (or one notified more often than posted) can never come: an
  // error at once, not a wait.
  absl::Status HandleNotified(const TraceRecord& record) {
    const std::string what = absl::StrCat("record ", record.index, " (notified, token ",
                                          record.token, ", at byte offset ", record.offset, ")");
    auto posted = posted_tokens_.find(record.token);
    if (posted == posted_tokens_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": no earlier notify or record_event post of this trace carries this token, so "
          "its notification can never come"));
    }
    if (--posted->second == 0) posted_tokens_.erase(posted);
    absl::Status reached = sink_.Wait(record.token, options_.wait_timeout_ms);
    if (absl::IsDeadlineExceeded(reached)) {
      return absl::Status(reached.code(), absl::StrCat(what, ": ", reached.message()));
    }
    return absl::OkStatus();
  }

  void HandleStep(const TraceRecord& record) {
    StepStats& segment = Segment(record);
    StepStats step = segment;
    step.iterations = record.iterations;
    step.replay_ns = NowNs() - segment.replay_ns;
    step.recorded_ns = record.time_ns - segment.recorded_ns;
    report_.steps.push_back(step);
    segment = StepStats();
    segment.ordinal = record.ordinal;
    segment.replay_ns = NowNs();
    segment.recorded_ns = record.time_ns;
  }

 public:
  void SetLastTime(uint64_t time_ns) { last_time_ns_ = time_ns; }

 private:
  const ReplayOptions options_;
  ReplaySink sink_;  // outlives the session (declared before it)
  std::unique_ptr<BackingExecutor> executor_;
  std::unique_ptr<Transport> transport_;  // destroyed first: drains the session
  std::vector<AddressTranslator> translators_;  // per ordinal
  absl::flat_hash_map<uint64_t, PendingResult> pending_;  // by kPost record index
  uint64_t memory_limit_ = 0;  // per device in-process; bounds host_bytes_in_flight_
  uint64_t host_bytes_in_flight_ = 0;  // host buffers of device-to-host copies not yet compared
  // Tokens of the notify / record_event posts replayed so far, less those a kNotified record
  // has waited for: how many notifications of each may still come.
  absl::flat_hash_map<uint64_t, uint64_t> posted_tokens_;
  absl::flat_hash_map<uint64_t, std::pair<uint64_t, uint32_t>> last_launch_;  // by stream
  std::map<uint32_t, KernelStats> kernels_;
  std::map<uint16_t, StepStats> segments_;  // the step in progress, per ordinal
  uint64_t last_time_ns_ = 0;
  bool stopped_ = false;
  ReplayReport report_;
};

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, units[unit]);
}

}  // namespace

void AddressTranslator::Map(uint64_t recorded, uint64_t size, uint64_t replayed) {
  allocations_[recorded] = Allocation{std::max<uint64_t>(size, 1), replayed};
}

void AddressTranslator::Unmap(uint64_t recorded) { allocations_.erase(recorded); }

std::optional<uint64_t> AddressTranslator::TranslateRange(uint64_t recorded,
                                                          uint64_t size) const {
  auto it = allocations_.upper_bound(recorded);
  if (it == allocations_.begin()) return std::nullopt;
  --it;
  const uint64_t offset = recorded - it->first;
  if (offset > it->second.size || size > it->second.size - offset) return std::nullopt;
  return it->second.replayed + offset;
}

uint64_t DefaultReplayMemoryLimit(uint32_t device_count) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  const uint64_t physical = pages > 0 && page_size > 0
                                ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)
                                : (8ull << 30);
  return DefaultMemoryLimit(static_cast<int>(std::max<uint32_t>(device_count, 1)), physical);
}

std::optional<uint64_t> AddressTranslator::Translate(uint64_t recorded) const {
  auto it = allocations_.upper_bound(recorded);
  if (it == allocations_.begin()) return std::nullopt;
  --it;
  const uint64_t offset = recorded - it->first;
  // One past the end is a valid address too (an empty range at the end of a buffer).
  if (offset > it->second.size) return std::nullopt;
  return it->second.replayed + offset;
}

ComparisonResult CompareResult(const TraceResult& recorded, absl::Span<const uint8_t> replayed,
                               double rtol, double atol) {
  ComparisonResult result;
  if (recorded.form == ResultForm::kNotCaptured) {
    result.equal = true;
    return result;
  }
  if (recorded.size != replayed.size()) {
    result.detail = absl::StrCat("recorded ", recorded.size, " bytes, replayed ",
                                 replayed.size());
    return result;
  }
  if (recorded.form == ResultForm::kChecksum) {
    result.exact = result.equal = Fnv1a64(replayed) == recorded.checksum;
    if (!result.equal) {
      result.detail = absl::StrCat("the ", recorded.size,
                                   " bytes differ (only a checksum was recorded: results over ",
                                   kMaxInlineResultBytes, " bytes are compared exactly)");
    }
    return result;
  }
  if (recorded.bytes.size() != replayed.size()) {
    result.detail = "recorded bytes and size disagree";
    return result;
  }
  if (std::memcmp(recorded.bytes.data(), replayed.data(), replayed.size()) == 0) {
    result.exact = result.equal = true;
    return result;
  }
  if (replayed.size() % sizeof(float) != 0) {
    size_t first = 0;
    while (recorded.bytes[first] == replayed[first]) ++first;
    result.detail = absl::StrCat("byte ", first, " differs (recorded ",
                                 static_cast<int>(recorded.bytes[first]), ", replayed ",
                                 static_cast<int>(replayed[first]),
                                 "); not float32-sized, so compared exactly");
    return result;
  }
  const size_t count = replayed.size() / sizeof(float);
  result.equal = true;
  std::optional<size_t> first_bad;
  float bad_recorded = 0, bad_replayed = 0;
  for (size_t i = 0; i < count; ++i) {
    float expected, actual;
    std::memcpy(&expected, recorded.bytes.data() + i * sizeof(float), sizeof(float));
    std::memcpy(&actual, replayed.data() + i * sizeof(float), sizeof(float));
    if (expected == actual || (std::isnan(expected) && std::isnan(actual))) continue;
    double abs_error = std::fabs(static_cast<double>(actual) - static_cast<double>(expected));
    if (std::isnan(abs_error)) abs_error = INFINITY;  // NaN against a number, inf vs -inf
    const double rel_error =
        expected != 0 ? abs_error / std::fabs(static_cast<double>(expected)) : abs_error;
    result.max_abs_error = std::max(result.max_abs_error, abs_error);
    result.max_rel_error = std::max(result.max_rel_error, rel_error);
    if (!(abs_error <= atol + rtol * std::fabs(static_cast<double>(expected)))) {
      if (!first_bad) {
        first_bad = i;
        bad_recorded = expected;
        bad_replayed = actual;
      }
      result.equal = false;
    }
  }
  if (!result.equal) {
    result.detail = absl::StrFormat(
        "float32 element %d of %d differs: recorded %.9g, replayed %.9g (max abs error %.3g, "
        "max rel error %.3g; rtol %.3g, atol %.3g)",
        *first_bad, count, bad_recorded, bad_replayed, result.max_abs_error,
        result.max_rel_error, rtol, atol);
  }
  return result;
}

absl::StatusOr<ReplayReport> ReplayTrace(const std::string& path, const ReplayOptions& options) {
  absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::Open(path);
  if (!reader.ok()) return reader.status();
  return ReplayTrace(**reader, options);
}

absl::StatusOr<ReplayReport> ReplayTrace(TraceReader& reader, const ReplayOptions& options) {
  Replayer replayer(options, reader.header());
  absl::Status opened = replayer.Open();
  if (!opened.ok()) return opened;
  const uint64_t start = NowNs();
  TraceRecord record;
  for (;;) {
    absl::StatusOr<bool> next = reader.Next(&record);
    if (!next.ok()) return next.status();
    if (!*next) break;
    replayer.SetLastTime(record.time_ns);
    absl::Status handled = replayer.Handle(record);
    if (!handled.ok()) return handled;
    if (replayer.stopped()) break;
  }
  if (!replayer.stopped()) {
    absl::Status finished = replayer.Finish();
    if (!finished.ok()) return finished;
  }
  ReplayReport report = replayer.TakeReport();
  report.replay_ns = NowNs() - start;
  return report;
}

void PrintStats(const ReplayReport& report, std::ostream& out) {
  out << "trace: " << report.records << " records, " << report.header.device_count
      << " device(s), recorded by " << report.header.producer << " on "
      << report.header.backends << "; timed on " << report.executor_description
      << " (synchronised after every command)\n\n";
  out << "commands by kind:\n";
  for (size_t kind = 0; kind < report.commands_by_kind.size(); ++kind) {
    if (report.commands_by_kind[kind] == 0) continue;
    out << absl::StrFormat("  %-20s %10d\n", CommandKindName(static_cast<CommandKind>(kind)),
                           report.commands_by_kind[kind]);
  }
  out << absl::StrFormat("bytes host->device: %d (%s)   device->host: %d (%s)\n\n",
                         report.bytes_to_device, FormatBytes(report.bytes_to_device),
                         report.bytes_from_device, FormatBytes(report.bytes_from_device));
  out << "kernels:\n";
  out << absl::StrFormat("  %8s  %-36s %8s %12s %12s %14s\n", "id", "name", "count",
                         "total ms", "mean us", "buffer bytes");
  std::vector<KernelStats> kernels = report.kernels;
  std::sort(kernels.begin(), kernels.end(), [](const KernelStats& a, const KernelStats& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.kernel_id < b.kernel_id;
  });
  for (const KernelStats& k : kernels) {
    out << absl::StrFormat("  %8d  %-36s %8d %12.3f %12.1f %14d\n", k.kernel_id,
                           k.name.empty() ? "?" : k.name, k.launches, k.total_ns / 1e6,
                           k.launches > 0 ? k.total_ns / 1e3 / k.launches : 0.0,
                           k.buffer_bytes);
  }
  out << "\nsteps:\n";
  out << absl::StrFormat("  %6s %6s %10s %10s %10s %14s %12s\n", "step", "device", "iteration",
                         "commands", "calls", "recorded ms", "replay ms");
  std::map<uint16_t, int> numbers;
  for (const StepStats& s : report.steps) {
    const int number = ++numbers[s.ordinal];
    out << absl::StrFormat("  %6s %6d %10s %10d %10d %14.3f %12.3f\n",
                           s.complete ? absl::StrCat(number) : "end", s.ordinal,
                           s.complete ? absl::StrCat(s.iterations) : "-", s.commands, s.calls,
                           s.recorded_ns / 1e6, s.replay_ns / 1e6);
  }
  out << absl::StrFormat("\nreplayed %d commands in %.3f ms\n", report.commands_replayed,
                         report.replay_ns / 1e6);
}

namespace {

void PrintMismatch(const ReplayReport& report, std::ostream& out) {
  const Mismatch& m = *report.first_mismatch;
  out << "MISMATCH at record " << m.record_index << " (" << CommandKindName(m.kind)
      << ", device " << m.ordinal << ", stream " << m.stream << "): " << m.detail << "\n";
  if (m.last_launch_record) {
    out << "  the last launch on that stream before it: record " << *m.last_launch_record
        << ", kernel " << m.last_launch_kernel << " ("
        << (KernelName(m.last_launch_kernel).empty() ? "?" : KernelName(m.last_launch_kernel))
        << ")\n";
  }
  out << "  " << report.mismatches << " of " << report.results_compared
      << " compared results differ so far\n";
}

constexpr char kUsage[] =
    "usage: vgpu trace replay FILE [--executor NAME | --server ADDRESS] [--token TOKEN] "
    "[--rtol X] [--atol Y] [--memory_limit BYTES] [--wait_timeout SECONDS]\n"
    "       vgpu trace stats FILE [--executor NAME | --server ADDRESS] [--token TOKEN] "
    "[--memory_limit BYTES] [--wait_timeout SECONDS]\n";

// The longest --wait_timeout accepted (an hour).
constexpr double kMaxWaitTimeoutSeconds = 3600;

int RunTraceToolUnguarded(const std::vector<std::string>& args, std::ostream& out,
                          std::ostream& err) {
  if (args.empty() || (args[0] != "replay" && args[0] != "stats")) {
    err << kUsage;
    return 2;
  }
  const bool stats = args[0] == "stats";
  ReplayOptions options;
  std::string path;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg.rfind("--", 0) != 0) {
      if (!path.empty()) {
        err << "vgpu trace: one trace file, got '" << path << "' and '" << arg << "'\n" << kUsage;
        return 2;
      }
      path = arg;
      continue;
    }
    std::string name = arg.substr(2), value;
    const size_t equals = name.find('=');
    if (equals != std::string::npos) {
      value = name.substr(equals + 1);
      name = name.substr(0, equals);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      err << "vgpu trace: --" << name << " needs a value\n" << kUsage;
      return 2;
    }
    if (name == "executor") {
      options.executor = value;
    } else if (name == "server") {
      options.server = value;
    } else if (name == "token") {
      options.token = value;
    } else if (name == "rtol" || name == "atol") {
      double number = 0;
      if (!absl::SimpleAtod(value, &number) || !(number >= 0)) {
        err << "vgpu trace: --" << name << "='" << value << "' must be a number >= 0\n";
        return 2;
      }
      (name == "rtol" ? options.rtol : options.atol) = number;
    } else if (name == "memory_limit") {
      absl::StatusOr<uint64_t> bytes = ParseByteSize(value);
      if (!bytes.ok()) {
        err << "vgpu trace: --memory_limit='" << value << "': " << bytes.status().message()
            << "\n";
        return 2;
      }
      options.memory_limit = *bytes;
    } else if (name == "wait_timeout") {
      double seconds = 0;
      if (!absl::SimpleAtod(value, &seconds) || !(seconds > 0) ||
          seconds > kMaxWaitTimeoutSeconds) {
        err << "vgpu trace: --wait_timeout='" << value << "' must be seconds in (0, "
            << kMaxWaitTimeoutSeconds << "]\n";
        return 2;
      }
      options.wait_timeout_ms = std::max(1, static_cast<int>(seconds * 1000));
    } else {
      err << "vgpu trace: unknown flag --" << name << "\n" << kUsage;
      return 2;
    }
  }
  if (path.empty()) {
    err << "vgpu trace " << args[0] << ": the trace FILE is missing\n" << kUsage;
    return 2;
  }
  options.time_launches = stats;
  options.stop_at_mismatch = !stats;
  absl::StatusOr<ReplayReport> report = ReplayTrace(path, options);
  if (!report.ok()) {
    err << "vgpu trace " << args[0] << ": " << report.status().message() << "\n";
    return 1;
  }
  if (stats) {
    PrintStats(*report, out);
    if (report->first_mismatch) PrintMismatch(*report, err);
    return 0;
  }
  if (report->first_mismatch) {
    PrintMismatch(*report, out);
    return 1;
  }
  out << absl::StrFormat(
      "OK: replayed %d commands (%d records) on %s; %d results compared (%d exact), max abs "
      "error %.3g, max rel error %.3g\n",
      report->commands_replayed, report->records, report->executor_description,
      report->results_compared, report->results_exact, report->max_abs_error,
      report->max_rel_error);
  return 0;
}

}  // namespace

int RunTraceTool(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // The replay reports every error of a trace as a status; this is the last line of defence, so
  // that nothing a trace does ends a server binary with std::terminate or reaches Python as an
  // exception.
  const char* command = args.empty() ? "" : args[0].c_str();
  try {
    return RunTraceToolUnguarded(args, out, err);
  } catch (const std::bad_alloc&) {
    err << "vgpu trace " << command << ": out of host memory during the replay\n";
  } catch (const std::exception& e) {
    err << "vgpu trace " << command << ": internal error: " << e.what() << "\n";
  }
  return 1;
}

}  // namespace trace
}  // namespace vgpu
