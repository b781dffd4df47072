// Recording a command trace (VGPU_TRACE; format: trace/trace_format.h). A TraceRecorder owns the
// file; a TracingTransport decorates one device's transport and records every command it
// carries; a TracingSink decorates the CompletionSink that receives the executor's
// notifications, so that the bytes of an asynchronous device-to-host copy are captured as soon
// as its stream is known to have reached it (a later notification of that stream, or a
// synchronisation call that returned), before anyone else sees the notification and may reuse
// the host buffer. Recording never changes what is sent or answered; a write error stops the
// recording (logged once) and nothing else.
#ifndef VGPU_TRACE_TRACE_RECORDER_H_
#define VGPU_TRACE_TRACE_RECORDER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "plugin/backend/executor_session.h"
#include "plugin/trace/trace_format.h"
#include "plugin/transport/transport.h"

namespace vgpu {
namespace trace {

// The shared state of one recording: the file, the async device-to-host copies waiting for
// their bytes, and which stream each pending notification token belongs to. Thread-safe.
class TraceRecorder {
 public:
  // Creates `path` and writes the header. Error naming the path when it cannot be created.
  static absl::StatusOr<std::unique_ptr<TraceRecorder>> Create(const std::string& path,
                                                               const TraceHeader& header);
  // Flushes and closes the file.
  ~TraceRecorder();

  // An asynchronous command `ordinal` is about to post. Records it (with its host data),
  // remembers where a kMemcpyDtoH writes and which stream a kNotify/kRecordEvent token
  // belongs to. Called before the command is handed on (its notification may come at once).
  void RecordPost(uint16_t ordinal, const Command& command);
  // Snapshot taken before a call is handed on: what a synchronisation call waits for.
  uint64_t BeginCall();
  // A call `ordinal` made and its reply. `begin` is BeginCall's value. A synchronisation call
  // (SynchronizeStream, DestroyStream: that stream; SynchronizeDevice: every stream of the
  // device) captures the copies queued before it.
  void RecordCall(uint16_t ordinal, const Command& command, const Reply& reply, uint64_t begin);
  // A notification arrived (before it is handed on): captures the copies its stream reached
  // and records the arrival (kNotified).
  void OnNotify(uint64_t token, const absl::Status& stream_status);
  // A training-step boundary of device `ordinal`; `iterations` counted so far.
  void RecordStep(uint16_t ordinal, uint64_t iterations);
  // Writes buffered records to the file.
  void Flush();
  // The memory limit per device the run got (a server's grant), into the header.
  void SetMemoryLimit(uint64_t memory_limit);
  // Held across an Allocate or Free call and its recording, on every device: the trace then
  // has allocations and frees in the order the executor answered them (an address freed by one
  // thread and handed out again to another is never recorded in the wrong order).
  std::mutex& memory_calls_mutex() { return memory_calls_mu_; }

  const std::string& path() const { return writer_->path(); }

 private:
  struct PendingCopy {
    uint64_t record_index;
    uint16_t ordinal;
    uint64_t sequence;  // order among this recording's posts
    const void* host_dst;
    uint64_t size;
  };
  struct PendingToken {
    uint64_t stream;
    uint64_t sequence;
    uint16_t ordinal;
  };
  explicit TraceRecorder(std::unique_ptr<TraceWriter> writer);
  uint64_t NowNs() const;
  // Encodes and writes one record; returns its index.
  uint64_t AppendLocked(RecordType type, uint16_t ordinal, absl::Span<const uint8_t> body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Captures the pending copies of `stream` posted before `sequence` (failed: not captured).
  void CaptureLocked(uint64_t stream, uint64_t sequence, bool failed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::mutex memory_calls_mu_;
  std::mutex mu_;
  std::unique_ptr<TraceWriter> writer_ ABSL_GUARDED_BY(mu_);
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_index_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, std::deque<PendingCopy>> copies_ ABSL_GUARDED_BY(mu_);
  // The device of each stream with pending copies (for SynchronizeDevice).
  absl::flat_hash_map<uint64_t, uint16_t> stream_ordinal_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, PendingToken> tokens_ ABSL_GUARDED_BY(mu_);
};

// Records what one device sends through `inner` (not owned; shared by several devices when they
// share an executor). Posts are recorded and handed on under one lock, so the trace has this
// device's posts in the order the executor received them. Thread-safe as `inner` is.
class TracingTransport final : public Transport {
 public:
  TracingTransport(Transport* inner, TraceRecorder* recorder, uint16_t ordinal)
      : inner_(inner), recorder_(recorder), ordinal_(ordinal) {}

  absl::Status Post(Command command) override;
  Reply Call(Command command) override;
  std::string Describe() const override { return inner_->Describe(); }
  WireCounters wire_counters() const override { return inner_->wire_counters(); }
  bool DeliversNotificationsInline() const override {
    return inner_->DeliversNotificationsInline();
  }
  bool Lost() const override { return inner_->Lost(); }
  bool CapturesHostDataWhenPosted() const override {
    return inner_->CapturesHostDataWhenPosted();
  }

 private:
  Transport* const inner_;
  TraceRecorder* const recorder_;
  const uint16_t ordinal_;
  std::mutex post_order_mu_;  // held across record + hand-on of a post
};

// Hands every notification to the recorder first (it captures copied bytes), then to `inner`.
class TracingSink final : public CompletionSink {
 public:
  TracingSink(TraceRecorder* recorder, CompletionSink* inner)
      : recorder_(recorder), inner_(inner) {}
  void OnNotify(uint64_t token, const absl::Status& stream_status) override {
    recorder_->OnNotify(token, stream_status);
    inner_->OnNotify(token, stream_status);
  }

 private:
  TraceRecorder* const recorder_;
  CompletionSink* const inner_;
};

}  // namespace trace
}  // namespace vgpu

#endif  // VGPU_TRACE_TRACE_RECORDER_H_
