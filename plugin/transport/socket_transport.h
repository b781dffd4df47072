// The client side of a remote backing executor (`vgpu server`) over a Unix or TCP socket.
// Commands are framed by protocol/wire_format.h. Post writes a frame and returns (a launch never
// waits); Call writes a frame and waits for the Reply with its sequence number. One reader
// thread receives replies, device-to-host data (written straight into the host destination) and
// notifications (handed to the CompletionSink, normally the NotificationHub).
// A dead connection fails every pending Call and notification with Unavailable("vgpu server
// <address> is unreachable: ..."), and every later Post/Call at once.
//
// Deadline (VGPU_TIMEOUT): a wedged server (stopped, or behind a network that drops packets)
// must not hang the client. While the client waits for something from the server (a Reply, a
// notification, device-to-host data), a watchdog thread watches for signs of life: any frame
// received. After a short silence it sends one keep-alive probe (a kMemoryInfo call, which the
// server answers on its connection thread even while a long kernel runs), so a legitimately long
// kernel never trips the deadline; a server that stays silent for the whole deadline gets the
// connection failed with DeadlineExceeded("vgpu server <address> did not answer for N s
// (VGPU_TIMEOUT=N) ..."), which every pending and later operation receives. Writes are bounded
// the same way (SO_SNDTIMEO). The hot path pays nothing for this: one relaxed atomic increment
// per frame received; the watchdog wakes every deadline/8 and only then reads the clock.
//
// Shared memory (unix:// only; VGPU_SHM=0 turns it off): after the handshake the client creates
// a sealed memfd staging region (ShmRegion, kDefaultShmBytes) and passes it to the server once
// (ShmAttach). A copy with host memory of at least kShmMinCopyBytes then borrows a range of the
// region (ShmSpace) instead of carrying its bytes in the frame: host-to-device bytes are copied
// into the range before the command is written; device-to-host bytes are copied out of it when
// the server's Data frame (or Reply) says the copy ran. The range is returned then. When the
// region is full for kShmWait, when the server refuses the region, or over TCP, the copy goes
// through the socket as before: nothing ever waits for the region indefinitely.
//
// Batching (VGPU_BATCH=0 turns it off): posted commands without host data (launches, memsets,
// events, notifications, device-to-host copies whose bytes come back later) are gathered into
// one CommandBatch frame, written with one system call when the batch reaches
// kBatchFlushBytes, when a command that somebody waits for joins it (a notification, an event
// recording, a device-to-host copy), before any other frame (a call, a copy with host data:
// commands keep their order), or kBatchDelay after its first command (the flusher thread).
// wire_counters() counts frames and bytes written, beside the commands they carried.
//
// Launch templates (VGPU_TEMPLATES=0 turns them off; batching must be on): a batched launch seen
// a second time with the same device, stream, kernel, params and descriptors becomes a template
// (LaunchTemplateCache, protocol/launch_templates.h), within the budget the server's Welcome
// grants; from then on it goes as the template's id plus the buffers that changed, a few bytes
// instead of a few hundred. Other posted commands without buffers or parameters (events,
// notifications, memsets, copies whose bytes come back later) go in the compact form: their
// non-zero fields only, as varints.
//
// Profiling: the transport is an activity::Source. When a TensorFlow profile starts it asks the
// server to time this connection's copies, memsets and launches (ProfileControl), remembers
// which op issued each command it sends meanwhile (by sequence), and when the profile is
// collected joins the server's times with them, moved onto this process's clock (the offset
// taken from the collect call's own round trip: the server's clock at its answer against the
// middle of the call).
#ifndef VGPU_TRANSPORT_SOCKET_TRANSPORT_H_
#define VGPU_TRANSPORT_SOCKET_TRANSPORT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "plugin/backend/executor_session.h"
#include "plugin/common/activity.h"
#include "plugin/protocol/launch_templates.h"
#include "plugin/protocol/wire_format.h"
#include "plugin/transport/shm_region.h"
#include "plugin/transport/socket_util.h"
#include "plugin/transport/transport.h"

namespace vgpu {

class SocketTransport final : public Transport, public activity::Source {
 public:
  // The staging region a unix:// connection offers the server.
  static constexpr uint64_t kDefaultShmBytes = 64ull << 20;
  // Copies smaller than this go through the socket (a frame is cheaper than a round of
  // range bookkeeping).
  static constexpr uint64_t kShmMinCopyBytes = 64 * 1024;
  // Larger copies through the region are split into chunks of this size, so that the client's
  // copy into the region overlaps the server's copy out of it.
  static constexpr uint64_t kShmChunkBytes = 2ull << 20;
  // How long a copy waits for room in a full region before it takes the socket instead.
  static constexpr std::chrono::milliseconds kShmWait{20};
  // The region size VGPU_SHM asks for: kDefaultShmBytes, 0 when VGPU_SHM is "0".
  static uint64_t ShmBytesFromEnvironment();
  // A batch this large is written at once.
  static constexpr size_t kBatchFlushBytes = 64 * 1024;
  // How long a batch waits for more commands before the flusher writes it.
  static constexpr std::chrono::microseconds kBatchDelay{50};
  // False when VGPU_BATCH is "0" (every command in its own frame and write).
  static bool BatchingFromEnvironment();
  // False when VGPU_TEMPLATES is "0" (every launch goes whole).
  static bool TemplatesFromEnvironment();

  // Connects to `endpoint` (unix:///path or tcp://host:port, without ?device) and completes the
  // handshake with `token` (may be empty); blocks at most ~`timeout_ms`. `sink` receives
  // notifications on the reader thread and must outlive the transport. `welcome` (may be null)
  // receives the server's description. `silence_timeout_ms` > 0 arms the deadline above (the
  // value of VGPU_TIMEOUT, named in its error); 0 waits forever. `shm_bytes`: the size of the
  // shared staging region offered over a Unix socket (0: none; -1: ShmBytesFromEnvironment).
  // A region the server refuses is logged and the connection goes on without it. `tenant`
  // (may be empty: the server's default tenant) is the name the Hello carries (VGPU_TENANT).
  static absl::StatusOr<std::unique_ptr<SocketTransport>> Connect(const std::string& endpoint,
                                                                  const std::string& token,
                                                                  CompletionSink* sink,
                                                                  wire::Welcome* welcome,
                                                                  int timeout_ms = 5000,
                                                                  int silence_timeout_ms = 0,
                                                                  int64_t shm_bytes = -1,
                                                                  const std::string& tenant = "");
  // Closes the connection (the server reclaims this client's memory) and joins the reader.
  ~SocketTransport() override;

  absl::Status Post(Command command) override;
  Reply Call(Command command) override;
  std::string Describe() const override { return endpoint_; }
  bool DeliversNotificationsInline() const override { return false; }
  bool Lost() const override { return dead(); }
  bool CapturesHostDataWhenPosted() const override { return true; }

  // Round trips so far that waited for a Reply (for tests and benchmarks).
  uint64_t calls() const { return calls_.load(); }
  // Keep-alive probes sent by the watchdog (for tests).
  uint64_t probes() const { return probes_.load(); }
  // Size of the shared region the server accepted (0: copies go through the socket).
  uint64_t shm_bytes() const { return shm_ != nullptr ? shm_->size() : 0; }
  // Copy commands (chunks) whose bytes went through the shared region (for tests, benchmarks).
  uint64_t shm_copies() const { return shm_copies_.load(); }
  // Frames and bytes written to the server after the handshake (a CommandBatch counts once),
  // launch templates (see the top of this file), and the commands those frames carried.
  WireCounters wire_counters() const override;
  uint64_t frames_sent() const { return frames_sent_.load(std::memory_order_relaxed); }
  uint64_t commands_written() const { return commands_written_.load(std::memory_order_relaxed); }

  // OK while connected; otherwise the error every operation now gets. Thread-safe.
  absl::Status DeadStatus();
  // True once the connection failed (a lock-free DeadStatus().ok() == false). Thread-safe.
  bool dead() const { return dead_flag_.load(std::memory_order_acquire); }

  // activity::Source (see the top of this file). Block for one round trip each; a dead
  // connection contributes nothing.
  void OnProfileStart() override;
  void Collect(std::vector<activity::Record>* records, uint64_t* dropped) override;

 private:
  struct PendingCall {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Reply reply;
    void* host_dst = nullptr;
    uint64_t size = 0;
    std::vector<uint8_t> answer;  // a ProfileRecords answer's payload
  };
  struct PendingCopy {
    void* host_dst = nullptr;  // null for a host-to-device copy through the region
    uint64_t size = 0;
    bool shm = false;  // the bytes are (or go) in the region at shm_offset
    uint64_t shm_offset = 0;
  };

  SocketTransport(std::string endpoint, ScopedFd fd, CompletionSink* sink,
                  int silence_timeout_ms, std::shared_ptr<ShmRegion> shm,
                  uint64_t first_sequence, bool batching, uint64_t template_bytes);
  // The size of the chunks Post and Call split `command` into: a frame's worth (or a slice of
  // the shared region) for a copy with host memory larger than that, 0 when it goes whole.
  uint64_t SplitChunkBytes(const Command& command) const;
  absl::Status PostOne(Command command);
  Reply CallOne(Command command);
  // A range of the region for this copy's host side, or nullopt (socket path).
  std::optional<uint64_t> LeaseShm(const Command& command);
  // Writes one command frame (header, encoded command, host data or shared-memory offset),
  // after the batch gathered so far. Thread-safe.
  absl::Status WriteCommand(const Command& command, uint64_t sequence,
                            std::optional<uint64_t> shm_offset = std::nullopt);
  // Adds a posted command (no host data) to the batch; writes the batch at once when
  // `flush_now` or when it is full. Thread-safe.
  absl::Status AppendToBatch(const Command& command, uint64_t sequence, bool flush_now);
  // Writes the gathered batch, if any, as one frame; the caller holds write_mu_.
  absl::Status FlushBatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  absl::Status FlushBatch();
  // Marks the connection dead after a failed write (SO_SNDTIMEO: the deadline's error).
  absl::Status WriteFailed(const absl::Status& status, int write_errno);
  // The flusher thread: writes a batch kBatchDelay after its first command.
  void FlusherLoop();
  void ReaderLoop();
  absl::Status ReadReply(FrameReader& reader, const wire::FrameHeader& header);
  absl::Status ReadData(FrameReader& reader, const wire::FrameHeader& header);
  absl::Status ReadProfileRecords(FrameReader& reader, const wire::FrameHeader& header);
  // Sends a ProfileControl and waits for its ProfileRecords. Thread-safe.
  absl::StatusOr<wire::ProfileRecords> ControlProfile(wire::ProfileAction action,
                                                      int64_t* sent_ns, int64_t* answered_ns);
  // While profiling: keeps what the activity log will say of a tagged command (by sequence).
  void NoteProfiled(const Command& command, uint64_t sequence);
  // Marks the connection dead; fails pending calls and notifications. Idempotent. A
  // DeadlineExceeded cause is kept as it is (its message is complete); anything else becomes
  // Unavailable("vgpu server <address> is unreachable: <cause>").
  void Fail(const absl::Status& cause);
  // The watchdog thread (only when silence_timeout_ms_ > 0); see the top of this file.
  void WatchdogLoop();
  // True while the client waits for something from the server.
  bool AwaitingServer();
  // Sends a kMemoryInfo call whose Reply nobody waits for; any frame counts as life.
  void SendProbe();
  absl::Status DeadlineStatus(const std::string& what) const;

  const std::string endpoint_;
  ScopedFd fd_;
  CompletionSink* const sink_;
  const std::shared_ptr<ShmRegion> shm_;  // null: no shared memory
  std::unique_ptr<ShmSpace> shm_space_;   // set with shm_
  std::atomic<uint64_t> shm_copies_{0};
  std::atomic<uint64_t> next_sequence_;
  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> probes_{0};
  const int silence_timeout_ms_;  // 0: no deadline
  // Frames received so far (the reader's only extra work for the deadline).
  std::atomic<uint64_t> frames_received_{0};

  std::mutex write_mu_;  // one frame at a time on the socket

  const bool batching_;
  mutable std::mutex batch_mu_;  // mutable: wire_counters() reads the template counts
  std::condition_variable batch_cv_;
  std::vector<uint8_t> batch_ ABSL_GUARDED_BY(batch_mu_);  // CommandBatch payload so far
  uint64_t batch_commands_ ABSL_GUARDED_BY(batch_mu_) = 0;
  bool flusher_stopping_ ABSL_GUARDED_BY(batch_mu_) = false;
  std::thread flusher_;
  wire::BatchWriter batch_writer_ ABSL_GUARDED_BY(batch_mu_);  // writes into batch_
  // The connection's launch templates (budget 0: none), consulted as entries join the batch.
  LaunchTemplateCache templates_ ABSL_GUARDED_BY(batch_mu_);
  std::atomic<uint64_t> frames_sent_{0};
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> host_data_sent_{0};
  std::atomic<uint64_t> commands_written_{0};

  std::mutex state_mu_;
  absl::Status dead_ ABSL_GUARDED_BY(state_mu_);  // OK while connected
  std::atomic<bool> dead_flag_{false};  // !dead_.ok(), readable without the lock
  absl::flat_hash_map<uint64_t, std::shared_ptr<PendingCall>> calls_pending_
      ABSL_GUARDED_BY(state_mu_);
  // Async device-to-host copies by sequence.
  absl::flat_hash_map<uint64_t, PendingCopy> copies_pending_ ABSL_GUARDED_BY(state_mu_);
  // Notifications expected.
  absl::flat_hash_set<uint64_t> tokens_pending_ ABSL_GUARDED_BY(state_mu_);

  std::thread reader_;

  // Profiling (activity::Source): the commands sent since the profile started, by sequence.
  std::atomic<bool> profiling_{false};  // checked before taking profile_mu_
  std::mutex profile_mu_;
  absl::flat_hash_map<uint64_t, activity::Record> profile_sent_ ABSL_GUARDED_BY(profile_mu_);
  uint64_t profile_dropped_ ABSL_GUARDED_BY(profile_mu_) = 0;

  std::mutex watchdog_mu_;
  std::condition_variable watchdog_cv_;
  bool watchdog_stopping_ ABSL_GUARDED_BY(watchdog_mu_) = false;
  std::thread watchdog_;
};

}  // namespace vgpu

#endif  // VGPU_TRANSPORT_SOCKET_TRANSPORT_H_
