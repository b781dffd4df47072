// The `vgpu server` accept loop and its connections (see server.h).
#include "plugin/server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "plugin/common/activity.h"
#include "plugin/common/config.h"
#include "plugin/common/log.h"
#include "plugin/common/status_macros.h"
#include "plugin/common/thread_name.h"
#include "plugin/protocol/launch_templates.h"
#include "plugin/protocol/wire_format.h"
#include "plugin/transport/shm_region.h"

namespace vgpu {

std::string IpPeerKey(const sockaddr_storage& peer) {
  in_addr v4{};
  if (peer.ss_family == AF_INET) {
    v4 = reinterpret_cast<const sockaddr_in&>(peer).sin_addr;
  } else {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return "loopback";
    if (IN6_IS_ADDR_V4MAPPED(&v6)) {
      std::memcpy(&v4, v6.s6_addr + 12, sizeof(v4));
    } else {
      in6_addr prefix{};
      std::memcpy(prefix.s6_addr, v6.s6_addr, 8);
      char text[INET6_ADDRSTRLEN] = "?";
      ::inet_ntop(AF_INET6, &prefix, text, sizeof(text));
      return absl::StrCat(text, "/64");
    }
  }
  if ((ntohl(v4.s_addr) >> 24) == 127) return "loopback";
  char text[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &v4, text, sizeof(text));
  return text;
}

namespace {

// Tokens the server itself puts on a stream (to send an asynchronous copy's data when the
// stream reaches it). Client tokens with this bit are refused.
constexpr uint64_t kInternalToken = 1ull << 63;
constexpr uint32_t kMaxHelloBytes = 4096;
// Read buffer of a connection during the handshake (enlarged for a tenant).
constexpr size_t kHandshakeBufferBytes = 4096;
// Command frames at least this large are charged to the tenant's staging budget until they have
// executed (their host-to-device data waits on a stream); smaller ones are not, to keep the
// one-frame-per-command path free of locks.
constexpr uint64_t kChargedFrameBytes = 64 * 1024;
// What one staged device-to-host read costs besides its data (bookkeeping), so that many tiny
// reads are bounded too.
constexpr uint64_t kStagingOverheadBytes = 128;
// What one queued command costs the server besides its frame's bytes (the decoded Command, its
// place in the stream's queue, its pins): charged to the tenant's host budget until it has run,
// so that commands queued behind a stalled stream are bounded by --max_staging_bytes.
constexpr uint64_t kQueuedCommandBytes = 512;
// What a queued launch holds per buffer besides that: its argument and the pin that keeps its
// allocation alive.
constexpr uint64_t kQueuedBytesPerBuffer = 64;
// The largest CommandBatch payload accepted. A client flushes its batch once it passes 64 KiB,
// so a batch is at most that plus one command (a launch's 1 MiB of parameters, 1 MiB of
// descriptors and 4096 buffers). Held while its entries are queued, charged to the tenant.
constexpr uint32_t kMaxBatchPayloadBytes = 4u << 20;

// The bytes a queued command holds beyond its frame: its decoded parameters and descriptor
// settings (copies of the frame's, references to forward-mode descriptors resolved into their
// settings) and, per buffer, what kQueuedBytesPerBuffer counts.
uint64_t DecodedCommandBytes(const Command& command) {
  return command.params.size() + ResolvedDescriptorBytes(command.descriptors) +
         command.buffers.size() * kQueuedBytesPerBuffer;
}
// After accept fails for lack of file descriptors (or memory), the listener is left alone this
// long, so the accept loop does not spin.
constexpr int kAcceptBackoffMs = 100;
// Out of descriptors, each back-off refuses up to this many waiting clients, one after another
// on the one reserve descriptor (more than the listener's backlog of 64).
constexpr int kRefusalsPerBackOff = 128;
// A refused connection stays open (write side shut) this long so its client can read why.
constexpr int64_t kRefusalLingerNs = 500'000'000;
constexpr size_t kMaxLingeringRefusals = 64;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

bool IsBlockingCall(CommandKind kind) {
  return kind == CommandKind::kSynchronizeStream || kind == CommandKind::kSynchronizeDevice ||
         kind == CommandKind::kDestroyStream;
}

// Host bytes a tenant holds in flight (staged device-to-host data, large command frames not yet
// executed), bounded by --max_staging_bytes with backpressure. Buffers it charges share it and
// release their charge when their last owner drops them. Thread-safe.
class HostBudget {
 public:
  explicit HostBudget(uint64_t limit) : limit_(limit) {}

  // Blocks until `bytes` fit under the limit (or nothing but the permanent charge is charged:
  // one charge larger than the rest proceeds alone), then charges them. False, charging
  // nothing, once Close() was called. `beside`: bytes the caller itself holds charged and
  // gives back only after this returns (the command batch whose entries it queues); they are
  // not waited for, so the holder never waits for itself.
  bool Acquire(uint64_t bytes, uint64_t beside = 0) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] {
      const uint64_t others = in_use_ - std::min(in_use_, beside);
      return closed_ || others <= permanent_ || bytes <= limit_ - std::min(limit_, others);
    });
    if (closed_) return false;
    in_use_ += bytes;
    return true;
  }
  void Release(uint64_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_use_ -= bytes;
    }
    cv_.notify_all();
  }
  // Charges `bytes` for as long as the budget lives (a shared memory region), if they fit now.
  bool AcquirePermanent(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || bytes > limit_ - std::min(limit_, in_use_)) return false;
    in_use_ += bytes;
    permanent_ += bytes;
    return true;
  }
  // Gives back `bytes` of the permanent charge (AcquirePermanent).
  void ReleasePermanent(uint64_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_use_ -= bytes;
      permanent_ -= bytes;
    }
    cv_.notify_all();
  }
  // Wakes every Acquire (they fail from now on).
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  // What is charged now, the permanent charge (shared memory) excluded.
  uint64_t in_use() {
    std::lock_guard<std::mutex> lock(mu_);
    return in_use_ - permanent_;
  }

  // Keeps `bytes` (already acquired) charged, and `keep` alive, until it is destroyed: what a
  // queued command holds as its host storage.
  static std::shared_ptr<const void> ChargeHolder(std::shared_ptr<HostBudget> budget,
                                                  uint64_t bytes, std::shared_ptr<const void> keep) {
    class Holder {
     public:
      Holder(std::shared_ptr<HostBudget> budget, uint64_t bytes, std::shared_ptr<const void> keep)
          : budget_(std::move(budget)), bytes_(bytes), keep_(std::move(keep)) {}
      ~Holder() { budget_->Release(bytes_); }
      Holder(const Holder&) = delete;
      Holder& operator=(const Holder&) = delete;

     private:
      const std::shared_ptr<HostBudget> budget_;
      const uint64_t bytes_;
      const std::shared_ptr<const void> keep_;
    };
    return std::make_shared<Holder>(std::move(budget), bytes, std::move(keep));
  }

  // An empty buffer that carries a charge of `bytes` (already acquired) until it is destroyed.
  static std::shared_ptr<std::vector<uint8_t>> ChargedBuffer(std::shared_ptr<HostBudget> budget,
                                                             uint64_t bytes) {
    return std::shared_ptr<std::vector<uint8_t>>(
        new std::vector<uint8_t>(), [budget = std::move(budget), bytes](std::vector<uint8_t>* b) {
          delete b;
          budget->Release(bytes);
        });
  }

 private:
  const uint64_t limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t in_use_ = 0;
  uint64_t permanent_ = 0;  // part of in_use_ that is never released
  bool closed_ = false;
};

bool IsUnixSocket(int fd) {
  int domain = -1;
  socklen_t length = sizeof(domain);
  return ::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &length) == 0 && domain == AF_UNIX;
}

// Runs one connection's blocking calls on at most `max_threads` helper threads, created when
// needed and reused. Run() blocks its caller while `max_threads` calls are in flight.
class BlockingCallRunner {
 public:
  explicit BlockingCallRunner(int max_threads) : max_threads_(max_threads) {}
  // Waits for the calls in flight, then joins the threads.
  ~BlockingCallRunner() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& thread : threads_) thread.join();
  }

  // Queues `call` for a helper thread. False (nothing queued) if no helper thread exists and
  // none can be started.
  bool Run(std::function<void()> call) {
    std::unique_lock<std::mutex> lock(mu_);
    slot_cv_.wait(lock, [&] { return in_flight_ < max_threads_; });
    if (idle_ == 0 && static_cast<int>(threads_.size()) < max_threads_) {
      try {
        threads_.emplace_back([this] {
          NameCurrentThread("vgpu-blocking");
          Loop();
        });
      } catch (const std::system_error&) {
        if (threads_.empty()) return false;  // the queued call waits for the ones we have
      }
    }
    ++in_flight_;
    queue_.push_back(std::move(call));
    lock.unlock();
    work_cv_.notify_one();
    return true;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      --idle_;
      if (queue_.empty()) return;  // stopping, nothing left
      std::function<void()> call = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      call();
      call = nullptr;
      lock.lock();
      --in_flight_;
      slot_cv_.notify_one();
    }
  }

  const int max_threads_;
  std::mutex mu_;
  std::condition_variable work_cv_, slot_cv_;
  std::deque<std::function<void()>> queue_;
  int in_flight_ = 0;  // queued or running
  int idle_ = 0;       // threads waiting for work
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// The descriptor the accept loop keeps to accept-and-refuse when out of descriptors.
ScopedFd OpenReserveFd() { return ScopedFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)); }

// Writes Refused(reason) on a fresh connection without blocking (a tiny frame fits the socket
// buffer) and shuts its write side: the client reads the reason, then end of stream.
void SendRefusal(int fd, const std::string& reason) {
  std::vector<uint8_t> payload;
  wire::EncodeString(reason, &payload);
  uint8_t header[wire::kHeaderBytes];
  wire::EncodeHeader({wire::MessageType::kRefused, 0, static_cast<uint32_t>(payload.size())},
                     header);
  std::vector<uint8_t> frame(header, header + sizeof(header));
  frame.insert(frame.end(), payload.begin(), payload.end());
  (void)!::send(fd, frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
}

// "uid N" for a Unix socket peer (SO_PEERCRED), the numeric IP address for TCP: the unit of
// --max_connections_per_peer. `description` gets what the log shows.
std::string PeerKey(int fd, const sockaddr_storage& peer, socklen_t length,
                    std::string* description) {
  if (peer.ss_family == AF_INET || peer.ss_family == AF_INET6) {
    char host[NI_MAXHOST] = "?", service[NI_MAXSERV] = "?";
    ::getnameinfo(reinterpret_cast<const sockaddr*>(&peer), length, host, sizeof(host), service,
                  sizeof(service), NI_NUMERICHOST | NI_NUMERICSERV);
    *description = absl::StrCat(host, ":", service);
    return IpPeerKey(peer);
  }
  ucred credentials{};
  socklen_t size = sizeof(credentials);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) == 0) {
    *description = absl::StrCat("unix socket, uid ", credentials.uid, ", pid ", credentials.pid);
    return absl::StrCat("uid ", credentials.uid);
  }
  *description = "unix socket";
  return "unix";
}

}  // namespace

// One client connection: its session, reader thread and notification sink.
class ServerConnection final : public CompletionSink {
 public:
  ServerConnection(Server* server, uint64_t id, ScopedFd fd, std::string peer,
                   std::string peer_key)
      : server_(server),
        id_(id),
        fd_(std::move(fd)),
        peer_(std::move(peer)),
        peer_key_(std::move(peer_key)),
        handshake_deadline_ns_(NowNs() +
                               int64_t{server->options_.handshake_timeout_ms} * 1'000'000),
        budget_(std::make_shared<HostBudget>(server->options_.max_staging_bytes)),
        helpers_(std::in_place, Server::kMaxBlockingCallsPerConnection) {}
  ~ServerConnection() override {
    Close();
    if (thread_.joinable()) thread_.join();
  }

  // Starts the reader thread. False (the connection is unused) if no thread can be started.
  bool Start() {
    try {
      thread_ = std::thread([this] {
        NameCurrentThread("vgpu-conn");
        Run();
      });
      return true;
    } catch (const std::system_error&) {
      return false;
    }
  }

  // The socket of a connection that never started (Start() returned false).
  ScopedFd TakeFd() { return std::move(fd_); }

  // Ends the connection: the reader and any wait for budget wake up and the reader finishes.
  // Thread-safe, idempotent.
  void Close() {
    if (closing_.exchange(true)) return;
    ::shutdown(fd_.get(), SHUT_RDWR);
    budget_->Close();
    {
      // Its queued work will never be wanted: nothing of the teardown (nor a blocking call in
      // flight) may wait on what the client queued.
      std::lock_guard<std::mutex> lock(session_mu_);
      if (session_ != nullptr) session_->Cancel();
    }
    {
      std::lock_guard<std::mutex> lock(server_->receiving_mu_);  // no missed wake-up
    }
    server_->receiving_cv_.notify_all();
  }
  bool finished() const { return finished_.load(); }
  bool closing() const { return closing_.load(); }
  bool handshaken() const { return handshaken_.load(); }
  uint64_t id() const { return id_; }
  const std::string& peer() const { return peer_; }
  const std::string& peer_key() const { return peer_key_; }
  bool is_tenant() const { return tenant_.load(); }
  uint64_t commands() const { return commands_.load(); }
  // The tenant's name (Server::kDefaultTenant if its Hello named none); set before is_tenant().
  const std::string& tenant_name() const { return tenant_name_; }
  uint64_t round_trips() const { return round_trips_.load(std::memory_order_relaxed); }
  uint64_t templates_created() const { return templates_created_.load(std::memory_order_relaxed); }
  uint64_t launches_by_template() const {
    return launches_by_template_.load(std::memory_order_relaxed);
  }
  // Whether its totals are in the server's tenant totals (read under the server's mu_).
  bool totals_recorded() const { return totals_recorded_; }
  SessionStats session_stats() {
    std::lock_guard<std::mutex> lock(session_mu_);
    return session_ != nullptr ? session_->Stats() : SessionStats{};
  }
  uint64_t staging_bytes() { return budget_->in_use(); }
  uint64_t shm_bytes() const { return shm_bytes_.load(std::memory_order_relaxed); }
  uint64_t bytes_in_use() {
    std::lock_guard<std::mutex> lock(session_mu_);
    return session_ != nullptr ? session_->BytesInUse() : 0;
  }

  // Accept loop only: why this connection should be closed now ("" if it should not).
  std::string Overdue(int64_t now_ns) {
    if (closing_.load()) return "";
    if (!handshaken_.load()) {
      return now_ns > handshake_deadline_ns_ ? "no hello within --handshake_timeout" : "";
    }
    const int64_t frame_timeout_ns = int64_t{server_->options_.frame_timeout_ms} * 1'000'000;
    const int64_t writing_since = write_started_ns_.load(std::memory_order_relaxed);
    if (writing_since != 0 && now_ns - writing_since > frame_timeout_ns) {
      return "the client does not take its data (--frame_timeout)";
    }
    // A frame in progress: bytes must keep arriving (--frame_timeout), at the minimum rate
    // over each window (--min_receive_rate).
    const uint64_t received = received_.load(std::memory_order_relaxed);
    const uint64_t frame = frames_started_.load(std::memory_order_relaxed);
    if (!in_frame_.load(std::memory_order_relaxed) || frame != watched_frame_) {
      watched_frame_ = frame;
      watched_received_ = received;
      watched_since_ns_ = now_ns;
      last_progress_ns_ = now_ns;
      last_received_ = received;
      return "";
    }
    if (received != last_received_) {
      last_received_ = received;
      last_progress_ns_ = now_ns;
    } else if (now_ns - last_progress_ns_ > frame_timeout_ns) {
      return "a frame stopped arriving (--frame_timeout)";
    }
    const uint64_t rate = server_->options_.min_receive_rate;
    const int64_t window_ns =
        std::min<int64_t>(frame_timeout_ns, int64_t{Server::kMaxReceiveRateWindowMs} * 1'000'000);
    const int64_t elapsed_ns = now_ns - watched_since_ns_;
    if (rate == 0 || elapsed_ns < window_ns) return "";
    const double expected = static_cast<double>(rate) * static_cast<double>(elapsed_ns) / 1e9;
    if (static_cast<double>(received - watched_received_) < expected) {
      return absl::StrCat("a frame arrives slower than --min_receive_rate (",
                          received - watched_received_, " bytes in ", elapsed_ns / 1'000'000,
                          " ms)");
    }
    watched_received_ = received;  // the next window
    watched_since_ns_ = now_ns;
    return "";
  }

  // Called on the session's stream workers.
  void OnNotify(uint64_t token, const absl::Status& stream_status) override {
    if (token & kInternalToken) {
      PendingCopy copy;
      {
        std::lock_guard<std::mutex> lock(copies_mu_);
        auto it = copies_.find(token);
        if (it == copies_.end()) return;
        copy = std::move(it->second);
        copies_.erase(it);
      }
      uint8_t ok = stream_status.ok() ? 1 : 0;
      std::vector<iovec> parts{iovec{&ok, 1}};
      if (ok && copy.size > 0) parts.push_back(iovec{copy.buffer->data(), copy.size});
      Write(wire::MessageType::kData, copy.sequence, std::move(parts));
      return;  // `copy` goes: its staging charge is released once the command's is too
    }
    std::vector<uint8_t> payload;
    wire::EncodeNotify({token, stream_status}, &payload);
    Write(wire::MessageType::kNotify, 0, {iovec{payload.data(), payload.size()}});
  }

  // Called on the session's stream workers for the commands Dispatch tagged while profiling.
  void OnExecuted(uint64_t sequence, int64_t start_ns, int64_t end_ns,
                  absl::string_view kernel_name) override {
    std::lock_guard<std::mutex> lock(profile_mu_);
    if (!profiling_.load(std::memory_order_relaxed)) return;  // collected meanwhile
    if (profile_.records.size() >= profile_capacity_) {
      ++profile_.dropped;
      return;
    }
    uint32_t name = 0;
    if (!kernel_name.empty()) {
      auto [it, inserted] = profile_names_.try_emplace(
          kernel_name, static_cast<uint32_t>(profile_.names.size() + 1));
      if (inserted) profile_.names.emplace_back(kernel_name);
      name = it->second;
    }
    profile_.records.push_back({sequence, start_ns, end_ns, name});
  }

 private:
  struct PendingCopy {
    uint64_t sequence = 0;
    std::shared_ptr<std::vector<uint8_t>> buffer;
    uint64_t size = 0;
  };

  void Write(wire::MessageType type, uint64_t sequence, std::vector<iovec> parts) {
    std::lock_guard<std::mutex> lock(write_mu_);
    write_started_ns_.store(NowNs(), std::memory_order_relaxed);
    absl::Status s = WriteFrame(fd_.get(), type, sequence, std::move(parts));
    write_started_ns_.store(0, std::memory_order_relaxed);
    if (!s.ok()) Close();  // the reader notices and ends the connection
  }

  void SendReply(uint64_t sequence, const Reply& reply, const void* data, uint64_t size) {
    std::vector<uint8_t> payload;
    wire::EncodeReply(reply, &payload);
    std::vector<iovec> parts{iovec{payload.data(), payload.size()}};
    if (data != nullptr && size > 0) parts.push_back(iovec{const_cast<void*>(data), size});
    Write(wire::MessageType::kReply, sequence, std::move(parts));
  }

  void Refuse(const std::string& reason, bool log = true) {
    std::vector<uint8_t> payload;
    wire::EncodeString(reason, &payload);
    Write(wire::MessageType::kRefused, 0, {iovec{payload.data(), payload.size()}});
    if (!log) return;
    Log(LogLevel::kWarning, absl::StrCat("vgpu server: refused client ", id_, " (", peer_,
                                         "): ", reason));
  }

  void Run() {
    absl::Status end = Serve();
    Close();  // the peer sees EOF now, not when the connection is reaped
    // Reclaim: wait for helper calls, then drain and destroy the session (frees its memory).
    helpers_.reset();
    uint64_t freed = 0;
    std::unique_ptr<ExecutorSession> session;
    {
      // Cancelled here too: when another thread's Close() set closing_ first, the Close() above
      // returned at once, and that thread may not have reached the session yet (it would find
      // none once it is swapped out, and the queued work would run to the end).
      std::lock_guard<std::mutex> lock(session_mu_);
      if (session_ != nullptr) {
        freed = session_->BytesInUse();
        session_->Cancel();
      }
      session.swap(session_);
    }
    if (tenant_.load()) {
      // Into the tenant's totals, in one step with leaving the live statistics (StatsJson).
      const SessionStats stats = session != nullptr ? session->Stats() : SessionStats{};
      Server::TenantTotals totals;
      totals.commands = commands_.load();
      totals.round_trips = round_trips_.load();
      totals.launches = stats.launches;
      totals.kernel_ns = stats.kernel_ns;
      totals.errors = stats.errors;
      server_->RecordFinishedConnection(tenant_name_, totals, &totals_recorded_);
    }
    session.reset();
    if (tenant_.load()) {
      Log(LogLevel::kWarning,
          absl::StrCat("vgpu server: client ", id_, " (", peer_, ") disconnected (",
                       end.message(), "); reclaimed ", freed, " bytes"));
    }
    finished_.store(true);
  }

  // Reads one command frame's payload into a growing buffer (never the declared size ahead of
  // the bytes), charged to the tenant's budget (large frames, until executed, or for a batch
  // until its entries are queued). A frame larger than the connection's own allowance
  // (FrameReader::kPayloadChunkBytes) first reserves the rest of its length from the server's
  // receive budget (fair share per peer), held until the frame is in: a frame never waits for
  // budget halfway, so reservations cannot deadlock.
  absl::StatusOr<std::shared_ptr<std::vector<uint8_t>>> ReadCommandFrame(FrameReader& reader,
                                                                         uint32_t length) {
    std::shared_ptr<std::vector<uint8_t>> frame;
    if (length >= kChargedFrameBytes) {
      if (!budget_->Acquire(length)) return absl::CancelledError("connection closing");
      frame = HostBudget::ChargedBuffer(budget_, length);
    } else {
      frame = std::make_shared<std::vector<uint8_t>>();
    }
    return ReadCommandFramePayload(reader, length, std::move(frame));
  }

  absl::StatusOr<std::shared_ptr<std::vector<uint8_t>>> ReadCommandFramePayload(
      FrameReader& reader, uint32_t length, std::shared_ptr<std::vector<uint8_t>> frame) {
    const uint64_t reserve =
        length > FrameReader::kPayloadChunkBytes ? length - FrameReader::kPayloadChunkBytes : 0;
    if (reserve > 0) {
      VGPU_RETURN_IF_ERROR(server_->ReserveReceiving(peer_key_, reserve, closing_));
    }
    frames_started_.fetch_add(1, std::memory_order_relaxed);
    in_frame_.store(true, std::memory_order_relaxed);
    absl::Status status = reader.ReadPayload(length, frame.get(),
                                             [](size_t) { return absl::OkStatus(); });
    in_frame_.store(false, std::memory_order_relaxed);
    if (reserve > 0) server_->ReleaseReceiving(peer_key_, reserve);
    if (!status.ok()) return status;
    return frame;
  }

  absl::Status Serve() {
    FrameReader reader(fd_.get(), kHandshakeBufferBytes, &received_);
    absl::StatusOr<wire::FrameHeader> header = reader.ReadHeader();
    if (!header.ok()) {
      // A header that arrived but does not decode (another wire version, not a vgpu peer) is
      // answered with the reason, so that an old client says why instead of "connection closed".
      if (absl::IsInvalidArgument(header.status()) ||
          absl::IsFailedPrecondition(header.status())) {
        Refuse(std::string(header.status().message()));
      }
      return header.status();
    }
    if (header->type != wire::MessageType::kHello || header->payload_length > kMaxHelloBytes) {
      Refuse("the first frame must be a Hello");
      return absl::InvalidArgumentError("no hello");
    }
    std::vector<uint8_t> payload(header->payload_length);
    if (absl::Status s = reader.ReadExact(payload.data(), payload.size()); !s.ok()) return s;
    absl::StatusOr<wire::Hello> hello = wire::DecodeHello(payload);
    if (!hello.ok()) {
      Refuse(std::string(hello.status().message()));
      return hello.status();
    }
    if (hello->protocol_version != wire::kWireVersion) {
      Refuse(absl::StrCat("protocol version ", hello->protocol_version, " is not supported (",
                          wire::kWireVersion, ")"));
      return absl::FailedPreconditionError("version");
    }
    const Server::Options& options = server_->options_;
    if (!options.token.empty() || !options.operator_token.empty()) {
      // A peer that failed too often is refused before its token is even compared.
      if (absl::Status admitted = server_->auth_throttle_.Admit(peer_key_, NowNs());
          !admitted.ok()) {
        Refuse(std::string(admitted.message()), /*log=*/false);
        return admitted;
      }
    }
    const bool is_operator = !options.operator_token.empty() &&
                             ConstantTimeEquals(hello->token, options.operator_token);
    const bool is_tenant = !options.token.empty() && ConstantTimeEquals(hello->token, options.token);
    // A token that matches neither is a failed guess even where none is required (a server with
    // only an operator token): the operator's token is guessed no faster than the tenants'.
    if (!is_operator && !is_tenant &&
        (!options.token.empty() || (!options.operator_token.empty() && !hello->token.empty()))) {
      if (server_->auth_throttle_.RecordFailure(peer_key_, NowNs())) {
        Log(LogLevel::kWarning, absl::StrCat("vgpu server: ", peer_key_,
                                             " failed to authenticate too often; its next "
                                             "attempts are refused for a while"));
      }
      if (!options.token.empty()) {
        Refuse("a valid token is required");
        return absl::PermissionDeniedError("bad token");
      }
    }
    if (!hello->tenant.empty()) {
      if (absl::Status valid = ValidateTenantName(hello->tenant); !valid.ok()) {
        Refuse(std::string(valid.message()));
        return valid;
      }
      tenant_name_ = hello->tenant;
    }
    handshaken_.store(true);
    if (hello->role == wire::Role::kObserver) {
      return ServeObserver(reader, server_->ViewerFor(hello->token, tenant_name_, peer_key_));
    }
    std::shared_ptr<SharedQuota> tenant_budget = server_->TenantBudget(tenant_name_);
    {
      std::lock_guard<std::mutex> lock(session_mu_);
      session_ = server_->executor_->OpenSession(this, server_->options_.client_quota,
                                                 tenant_budget,
                                                 server_->PeerStreamThreads(peer_key_));
      if (closing_.load()) session_->Cancel();  // closed meanwhile (Close saw no session)
    }
    tenant_.store(true);
    Log(LogLevel::kWarning, absl::StrCat("vgpu server: client ", id_, " connected (", peer_, ")"));
    std::vector<uint8_t> welcome;
    // The quota the client sees: the tighter of its own and its tenant's.
    uint64_t quota = server_->options_.client_quota;
    if (tenant_budget != nullptr && (quota == 0 || tenant_budget->limit_bytes() < quota)) {
      quota = tenant_budget->limit_bytes();
    }
    // The launch template budget, charged to the connection's staging budget for its lifetime
    // (none when that does not fit: every launch then comes whole).
    const uint64_t template_bytes = std::min(server_->options_.max_template_bytes,
                                             server_->options_.max_staging_bytes / 8);
    if (template_bytes > 0 && budget_->AcquirePermanent(template_bytes)) {
      templates_.emplace(template_bytes);
    }
    wire::EncodeWelcome({static_cast<uint32_t>(server_->executor_->device_count()),
                         server_->options_.memory_limit, quota,
                         templates_.has_value() ? template_bytes : 0},
                        &welcome);
    Write(wire::MessageType::kWelcome, 0, {iovec{welcome.data(), welcome.size()}});
    reader.EnsureBufferBytes(FrameReader::kDefaultBufferBytes);
    for (;;) {
      const uint64_t frame_begin = reader.consumed();
      header = reader.ReadHeader();
      if (!header.ok()) return header.status();
      // Sequences: a Command or ShmAttach frame's is > 0 (its answer repeats it); a
      // CommandBatch frame's is 0 (each entry has its own, > 0: SplitBatch).
      if ((header->type == wire::MessageType::kCommandBatch) != (header->sequence == 0)) {
        return MalformedFrame(absl::InvalidArgumentError(absl::StrCat(
            "frame of type ", static_cast<int>(header->type), " with sequence ",
            header->sequence, header->sequence == 0 ? " (must be > 0)" : " (must be 0)")));
      }
      if (header->type == wire::MessageType::kShmAttach) {
        if (header->payload_length != wire::kShmAttachBytes) {
          return absl::InvalidArgumentError("malformed shm attach frame");
        }
        uint8_t attach[wire::kShmAttachBytes];
        VGPU_RETURN_IF_ERROR(reader.ReadExact(attach, sizeof(attach)));
        Reply reply;
        reply.status = AttachShm(attach, reader.TakeFdFor(frame_begin, reader.consumed()));
        if (!reply.status.ok()) {
          Log(LogLevel::kWarning, absl::StrCat("vgpu server: client ", id_, ": ",
                                               reply.status.message()));
        }
        SendReply(header->sequence, reply, nullptr, 0);
        continue;
      }
      if (header->type == wire::MessageType::kProfileControl) {
        if (header->payload_length != 1) return MalformedFrame(absl::InvalidArgumentError(
            "profile control frame of the wrong length"));
        uint8_t action_byte = 0;
        VGPU_RETURN_IF_ERROR(reader.ReadExact(&action_byte, 1));
        absl::StatusOr<wire::ProfileAction> action =
            wire::DecodeProfileControl(absl::MakeConstSpan(&action_byte, 1));
        if (!action.ok()) return MalformedFrame(action.status());
        AnswerProfileControl(*action, header->sequence);
        continue;
      }
      if (header->type == wire::MessageType::kCommandBatch) {
        if (header->payload_length > kMaxBatchPayloadBytes) {
          return MalformedFrame(absl::InvalidArgumentError(absl::StrCat(
              "a command batch of ", header->payload_length, " bytes (at most ",
              kMaxBatchPayloadBytes, ")")));
        }
        // Charged (a large one) until its last entry is queued; each entry is charged as well
        // as it is queued, beside the batch's charge: an entry never waits for the frame that
        // holds it.
        absl::StatusOr<std::shared_ptr<std::vector<uint8_t>>> frame =
            ReadCommandFrame(reader, header->payload_length);
        if (!frame.ok()) return frame.status();
        if (absl::Status checked = wire::CheckBatch(**frame); !checked.ok()) {
          return MalformedFrame(checked);
        }
        batch_charge_ = header->payload_length >= kChargedFrameBytes ? header->payload_length : 0;
        absl::Status served = absl::OkStatus();
        wire::BatchCursor cursor(**frame);
        for (wire::BatchEntry entry; served.ok() && cursor.Next(&entry);) {
          served = ServeBatchEntry(entry);
        }
        batch_charge_ = 0;
        VGPU_RETURN_IF_ERROR(served);
        continue;
      }
      if (header->type != wire::MessageType::kCommand) {
        return absl::InvalidArgumentError("a tenant may only send commands");
      }
      absl::StatusOr<std::shared_ptr<std::vector<uint8_t>>> frame =
          ReadCommandFrame(reader, header->payload_length);
      if (!frame.ok()) return frame.status();
      VGPU_RETURN_IF_ERROR(ServeCommand(*std::move(frame), header->sequence, /*in_batch=*/false));
    }
  }

  absl::Status MalformedFrame(const absl::Status& why) {
    Log(LogLevel::kWarning,
        absl::StrCat("vgpu server: client ", id_, " sent a malformed frame: ", why.message()));
    return why;
  }

  // Decodes and dispatches one command whose payload is `frame`. A command of a CommandBatch
  // (`in_batch`) must be asynchronous and carry no host data; one that defines launch template
  // `*define_template` must be a launch that fits the template budget. An error ends the
  // connection.
  absl::Status ServeCommand(std::shared_ptr<std::vector<uint8_t>> frame, uint64_t sequence,
                            bool in_batch, std::optional<uint32_t> define_template = {}) {
    absl::StatusOr<wire::DecodedCommand> decoded = wire::DecodeCommand(frame);
    if (!decoded.ok()) return MalformedFrame(decoded.status());
    if (in_batch && (!IsAsynchronous(decoded->command.kind) || decoded->in_shm ||
                     decoded->command.host_src != nullptr)) {
      return MalformedFrame(absl::InvalidArgumentError(absl::StrCat(
          "a command batch may carry only asynchronous commands without host data, not ",
          CommandKindName(decoded->command.kind))));
    }
    if (define_template.has_value()) {
      if (!templates_.has_value()) {
        return MalformedFrame(absl::InvalidArgumentError(
            "a launch template defined on a connection granted no template budget"));
      }
      // Checked once, here; its later launches check only their bindings.
      if (absl::Status defined = templates_->Define(*define_template, decoded->command);
          !defined.ok()) {
        return MalformedFrame(defined);
      }
      templates_created_.fetch_add(1, std::memory_order_relaxed);
    }
    return Admit(std::move(decoded->command), decoded->wants_host_data, decoded->in_shm,
                 decoded->shm_offset, sequence, std::move(frame));
  }

  // Counts and dispatches a decoded command.
  absl::Status Admit(Command command, bool wants_host_data, bool in_shm, uint64_t shm_offset,
                     uint64_t sequence, std::shared_ptr<std::vector<uint8_t>> frame) {
    commands_.fetch_add(1, std::memory_order_relaxed);
    if (!IsAsynchronous(command.kind)) round_trips_.fetch_add(1, std::memory_order_relaxed);
    server_->commands_total_.fetch_add(1, std::memory_order_relaxed);
    if (!Dispatch(std::move(command), wants_host_data, in_shm, shm_offset, sequence,
                  std::move(frame))) {
      return absl::CancelledError("connection closing");
    }
    return absl::OkStatus();
  }

  // One entry of a CommandBatch (wire::CheckBatch accepted it).
  absl::Status ServeBatchEntry(const wire::BatchEntry& entry) {
    if (entry.form == wire::BatchEntryForm::kReleaseTemplate) {
      const absl::Status released =
          templates_.has_value() ? templates_->Release(entry.template_id)
                                 : absl::InvalidArgumentError(
                                       "a launch template released on a connection granted no "
                                       "template budget");
      return released.ok() ? released : MalformedFrame(released);
    }
    if (entry.form == wire::BatchEntryForm::kTemplatedLaunch) {
      const absl::InlinedVector<wire::TemplateBinding, 4> bindings =
          wire::DecodeBindings(entry);
      absl::StatusOr<Command> launch =
          templates_.has_value()
              ? templates_->Instantiate(entry.template_id, bindings)
              : absl::InvalidArgumentError(absl::StrCat(
                    "a launch names template ", entry.template_id,
                    ", but this connection was granted no template budget"));
      if (!launch.ok()) {  // a launch the executor cannot run: the next synchronisation says so
        commands_.fetch_add(1, std::memory_order_relaxed);
        RecordAsyncError(launch.status());
        return absl::OkStatus();
      }
      launches_by_template_.fetch_add(1, std::memory_order_relaxed);
      return Admit(*std::move(launch), false, false, 0, entry.sequence, nullptr);
    }
    // Each entry's bytes are its own storage (commands keep theirs until executed).
    auto storage = entry.form == wire::BatchEntryForm::kCompactCommand
                       ? std::make_shared<std::vector<uint8_t>>(wire::ExpandCompactCommand(entry))
                       : std::make_shared<std::vector<uint8_t>>(entry.command.begin(),
                                                                entry.command.end());
    if (entry.form == wire::BatchEntryForm::kDefineTemplate) {
      return ServeCommand(std::move(storage), entry.sequence, /*in_batch=*/true,
                          entry.template_id);
    }
    return ServeCommand(std::move(storage), entry.sequence, /*in_batch=*/true);
  }

  // Answers StatsRequests with what `viewer` may see (Server::StatsJson).
  absl::Status ServeObserver(FrameReader& reader, const StatsViewer& viewer) {
    for (;;) {
      absl::StatusOr<wire::FrameHeader> header = reader.ReadHeader();
      if (!header.ok()) return header.status();
      if (header->type != wire::MessageType::kStatsRequest || header->payload_length != 0) {
        return absl::InvalidArgumentError("an observer may only ask for stats");
      }
      std::vector<uint8_t> payload;
      wire::EncodeDocument(server_->StatsJson(viewer), &payload);
      Write(wire::MessageType::kStatsReply, header->sequence,
            {iovec{payload.data(), payload.size()}});
    }
  }

  // A ShmAttach: validates the tenant's region (shm_region.h) and maps it for this connection.
  // Any refusal is this connection's error only; the connection goes on without the region.
  absl::Status AttachShm(absl::Span<const uint8_t> payload, ScopedFd fd) {
    const Server::Options& options = server_->options_;
    VGPU_ASSIGN_OR_RETURN(const uint64_t bytes, wire::DecodeShmAttach(payload));
    if (!options.shared_memory) {
      return absl::FailedPreconditionError("this server does not accept shared memory");
    }
    if (!IsUnixSocket(fd_.get())) {
      return absl::FailedPreconditionError("shared memory needs a Unix socket connection");
    }
    if (shm_ != nullptr) {
      return absl::AlreadyExistsError("this connection already has a shared memory region");
    }
    if (!fd.valid()) {
      return absl::InvalidArgumentError(
          "shared memory refused: no file descriptor came with the ShmAttach frame (SCM_RIGHTS)");
    }
    // The region counts against the tenant's host staging budget for the connection's
    // lifetime, and may take at most half of it (the socket path keeps the rest).
    const uint64_t limit = std::min(options.max_shm_bytes, options.max_staging_bytes / 2);
    VGPU_ASSIGN_OR_RETURN(std::shared_ptr<ShmRegion> region,
                          ShmRegion::Attach(std::move(fd), bytes, limit));
    if (!budget_->AcquirePermanent(bytes)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "shared memory refused: a region of ", bytes, " bytes does not fit the host staging "
          "budget (--max_staging_bytes) left to this connection"));
    }
    shm_ = std::move(region);
    shm_bytes_.store(bytes, std::memory_order_relaxed);
    return absl::OkStatus();
  }

  // Points a kShmData copy's host side into the region after checking its range.
  absl::Status PlaceInShm(Command& command, bool wants_host_data, uint64_t offset) {
    if (shm_ == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          CommandKindName(command.kind), " names shared memory, but none is attached"));
    }
    if (!shm_->Contains(offset, command.size)) {
      return absl::InvalidArgumentError(absl::StrCat(
          CommandKindName(command.kind), ": ", command.size, " bytes at offset ", offset,
          " of shared memory lie outside the region of ", shm_->size(), " bytes"));
    }
    uint8_t* host = shm_->data() + offset;
    if (wants_host_data) {
      command.host_dst = host;
    } else {
      command.host_src = host;
    }
    command.host_storage = shm_;  // the mapping outlives the command
    return absl::OkStatus();
  }

  // Starts timing this connection's commands, or stops and sends what was timed (the
  // ProfileRecords frame of `sequence`). Reader thread.
  // The records are charged to the tenant's host budget (--max_staging_bytes) from the start to
  // the collection: as many as fit, up to wire::kMaxProfileRecords; the rest are dropped.
  void AnswerProfileControl(wire::ProfileAction action, uint64_t sequence) {
    wire::ProfileRecords answer;
    {
      std::lock_guard<std::mutex> lock(profile_mu_);
      profiling_.store(false, std::memory_order_relaxed);
      if (action == wire::ProfileAction::kCollect) answer = std::move(profile_);
      profile_ = {};
      profile_names_.clear();
      budget_->ReleasePermanent(profile_capacity_ * sizeof(wire::ExecutedCommand));
      profile_capacity_ = 0;
      if (action == wire::ProfileAction::kStart) {
        for (uint64_t capacity = wire::kMaxProfileRecords; capacity > 0; capacity /= 2) {
          if (budget_->AcquirePermanent(capacity * sizeof(wire::ExecutedCommand))) {
            profile_capacity_ = capacity;
            break;
          }
        }
        profile_.records.reserve(std::min<uint64_t>(profile_capacity_, 4096));
        profiling_.store(true, std::memory_order_relaxed);
      }
    }
    answer.server_now_ns = activity::NowNs();  // the clock OnExecuted's times are on
    std::vector<uint8_t> payload;
    wire::EncodeProfileRecords(answer, &payload);
    Write(wire::MessageType::kProfileRecords, sequence, {iovec{payload.data(), payload.size()}});
  }

  // Hands one command to the session. False when the connection is closing (stop reading).
  bool Dispatch(Command command, bool wants_host_data, bool in_shm, uint64_t shm_offset,
                uint64_t sequence, std::shared_ptr<std::vector<uint8_t>> frame) {
    ExecutorSession* session = session_.get();  // set before the loop, reset after it
    // Profiling: the session reports when the command ran (OnExecuted).
    if (profiling_.load(std::memory_order_relaxed)) command.activity.sequence = sequence;
    if (in_shm) {
      if (absl::Status placed = PlaceInShm(command, wants_host_data, shm_offset); !placed.ok()) {
        if (IsAsynchronous(command.kind)) {
          RecordAsyncError(placed);
          uint8_t ok = 0;  // the client stops waiting for the copy and takes its range back
          Write(wire::MessageType::kData, sequence, {iovec{&ok, 1}});
        } else {
          Reply reply;
          reply.status = placed;
          SendReply(sequence, reply, nullptr, 0);
        }
        return true;
      }
    }
    if (IsAsynchronous(command.kind)) {
      if ((command.kind == CommandKind::kNotify || command.kind == CommandKind::kRecordEvent) &&
          (command.token & kInternalToken)) {
        RecordAsyncError(absl::InvalidArgumentError("notification token out of range"));
        return true;
      }
      if (command.host_src != nullptr && !in_shm) command.host_storage = frame;  // until executed
      if (!(wants_host_data && !in_shm)) {  // a staged read is charged with its data below
        // Charged until it has run (backpressure: wait while the tenant's budget is full). A
        // frame charged already (large) is kept with the command, its charge with it.
        // A templated launch has no frame: its params and descriptors are what it holds.
        // Its decoded parameters, descriptors and buffers' pins are held besides the frame; a
        // wait on an event recorded on several streams queues one wait per recording.
        const uint64_t frame_bytes = frame != nullptr ? frame->size() : 0;
        const bool frame_charged = frame_bytes >= kChargedFrameBytes;
        const uint64_t charge = kQueuedCommandBytes * session->QueueEntries(command) +
                                (frame_charged ? 0 : frame_bytes) + DecodedCommandBytes(command);
        if (!budget_->Acquire(charge, batch_charge_)) return false;
        command.host_storage = HostBudget::ChargeHolder(
            budget_, charge,
            frame_charged ? std::shared_ptr<const void>(frame) : std::move(command.host_storage));
      }
      uint64_t copy_token = 0;
      if (in_shm) {  // a Data frame without bytes says when the copy has run
        copy_token = kInternalToken | next_internal_token_++;
        std::lock_guard<std::mutex> lock(copies_mu_);
        copies_[copy_token] = PendingCopy{sequence, nullptr, 0};
      } else if (wants_host_data) {  // kMemcpyDtoH: data goes back when the stream reaches it
        // Backpressure: wait until earlier reads have gone out (--max_staging_bytes).
        const uint64_t charge = command.size + kStagingOverheadBytes;
        if (!budget_->Acquire(charge, batch_charge_)) return false;
        std::shared_ptr<std::vector<uint8_t>> buffer = HostBudget::ChargedBuffer(budget_, charge);
        buffer->resize(command.size);
        command.host_dst = buffer->data();
        command.host_storage = buffer;
        copy_token = kInternalToken | next_internal_token_++;
        std::lock_guard<std::mutex> lock(copies_mu_);
        copies_[copy_token] = PendingCopy{sequence, std::move(buffer), command.size};
      }
      const uint64_t stream = command.stream;
      const uint32_t device = command.device;
      const CommandKind kind = command.kind;
      const uint64_t token = command.token;
      Reply reply = session->Handle(std::move(command));
      if (copy_token != 0) {
        if (reply.status.ok()) {
          Command notify;
          notify.kind = CommandKind::kNotify;
          notify.device = device;
          notify.stream = stream;
          notify.token = copy_token;
          reply = session->Handle(std::move(notify));
        }
        if (!reply.status.ok()) OnNotify(copy_token, reply.status);  // the client stops waiting
      }
      if (!reply.status.ok()) {
        RecordAsyncError(reply.status);
        // A notification that could not be queued still arrives (with the error): nobody waits
        // forever for it.
        if (kind == CommandKind::kNotify || kind == CommandKind::kRecordEvent) {
          OnNotify(token, reply.status);
        }
      }
      return true;
    }
    if (IsBlockingCall(command.kind)) {
      // At most kMaxBlockingCallsPerConnection at once: past that the reader waits for one.
      const bool queued = helpers_->Run([this, session, sequence,
                                         command = std::move(command)]() mutable {
        const CommandKind kind = command.kind;
        Reply reply = session->Handle(std::move(command));
        if (kind != CommandKind::kDestroyStream && reply.status.ok()) {
          reply.status = TakeAsyncError();
        }
        SendReply(sequence, reply, nullptr, 0);
      });
      if (!queued) {
        Reply reply;
        reply.status = absl::ResourceExhaustedError(
            "the server cannot start a thread for a blocking call; try again");
        SendReply(sequence, reply, nullptr, 0);
      }
      return true;
    }
    std::shared_ptr<std::vector<uint8_t>> buffer;
    if (wants_host_data && !in_shm) {  // device-to-host kMemcpyNow: the data rides on the Reply
      // Charged until the Reply is written (a client that does not read holds it).
      const uint64_t charge = command.size + kStagingOverheadBytes;
      if (!budget_->Acquire(charge)) return false;
      buffer = HostBudget::ChargedBuffer(budget_, charge);
      buffer->resize(command.size);
      command.host_dst = buffer->data();
    }
    const uint64_t size = command.size;
    Reply reply = session->Handle(std::move(command));
    SendReply(sequence, reply, reply.status.ok() && buffer ? buffer->data() : nullptr,
              buffer ? size : 0);
    return true;
  }

  // An asynchronous command that could not even be queued (e.g. an unknown stream): reported
  // by the connection's next synchronisation.
  void RecordAsyncError(const absl::Status& status) {
    std::lock_guard<std::mutex> lock(async_error_mu_);
    if (async_error_.ok()) async_error_ = status;
  }
  absl::Status TakeAsyncError() {
    std::lock_guard<std::mutex> lock(async_error_mu_);
    absl::Status status = async_error_;
    async_error_ = absl::OkStatus();
    return status;
  }

  Server* const server_;
  const uint64_t id_;
  ScopedFd fd_;
  const std::string peer_;
  const std::string peer_key_;
  const int64_t handshake_deadline_ns_;
  std::thread thread_;
  std::atomic<bool> closing_{false};
  std::atomic<bool> finished_{false};
  std::atomic<bool> handshaken_{false};
  std::atomic<bool> tenant_{false};
  std::string tenant_name_{Server::kDefaultTenant};  // set by the reader before tenant_
  bool totals_recorded_ = false;  // guarded by server_->mu_: counted in the tenant's totals
  std::atomic<uint64_t> commands_{0};
  std::atomic<uint64_t> round_trips_{0};
  // Launch templates (wire_format.h): the table (reader thread only; absent when the
  // connection was granted no budget) and what it did, for the stats.
  std::optional<LaunchTemplateTable> templates_;
  // The charge of the command batch whose entries the reader is queueing (0 between batches
  // and for small ones): the entries' charges do not wait for it. Reader thread only.
  uint64_t batch_charge_ = 0;
  std::atomic<uint64_t> templates_created_{0};
  std::atomic<uint64_t> launches_by_template_{0};
  // Progress, watched by the accept loop (Overdue).
  std::atomic<bool> in_frame_{false};        // the reader waits for a frame's payload
  std::atomic<uint64_t> frames_started_{0};  // payloads the reader started to read
  std::atomic<uint64_t> received_{0};        // bytes received (counted by the reader)
  std::atomic<int64_t> write_started_ns_{0};  // 0: no write in progress
  // Accept loop only: the frame watched, the start of its rate window, its last progress.
  uint64_t watched_frame_ = 0;
  uint64_t watched_received_ = 0;
  int64_t watched_since_ns_ = 0;
  uint64_t last_received_ = 0;
  int64_t last_progress_ns_ = 0;
  const std::shared_ptr<HostBudget> budget_;
  std::optional<BlockingCallRunner> helpers_;  // reset (joined) when the reader ends
  std::mutex write_mu_;
  std::mutex session_mu_;
  std::unique_ptr<ExecutorSession> session_;
  std::mutex copies_mu_;
  absl::flat_hash_map<uint64_t, PendingCopy> copies_;
  uint64_t next_internal_token_ = 1;  // reader thread only
  std::mutex async_error_mu_;
  absl::Status async_error_;
  // ProfileControl: whether commands are timed, and what was timed since the start (bounded by
  // profile_capacity_; the kernel names interned per connection).
  std::atomic<bool> profiling_{false};
  std::mutex profile_mu_;
  uint64_t profile_capacity_ = 0;  // records charged to budget_ (AnswerProfileControl)
  wire::ProfileRecords profile_;
  absl::flat_hash_map<std::string, uint32_t> profile_names_;
  std::shared_ptr<ShmRegion> shm_;  // reader thread only (commands hold it while queued)
  std::atomic<uint64_t> shm_bytes_{0};
};

absl::StatusOr<std::unique_ptr<Server>> Server::Create(const Options& options) {
  absl::StatusOr<SocketAddress> address = ParseSocketAddress(options.listen);
  if (!address.ok()) return address.status();
  if (options.max_connections < 1 || options.max_connections_per_peer < 1 ||
      options.max_streams < 1 ||
      options.max_handshakes < 1 || options.max_allocations_per_client < 1 ||
      options.handshake_timeout_ms < 1 || options.frame_timeout_ms < 1 ||
      options.max_staging_bytes == 0 || options.max_receiving_bytes == 0) {
    return absl::InvalidArgumentError(
        "server limits (connections, handshakes, allocations, timeouts, staging and receiving "
        "bytes) must be positive");
  }
  absl::flat_hash_map<std::string, uint64_t> seen_tenants;
  for (const auto& [name, limit] : options.tenant_quotas) {
    if (absl::Status valid = ValidateTenantName(name); !valid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--tenant_quota: ", valid.message()));
    }
    if (limit == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--tenant_quota: ", name, "'s quota is 0"));
    }
    if (!seen_tenants.emplace(name, limit).second) {
      return absl::InvalidArgumentError(absl::StrCat("--tenant_quota names ", name, " twice"));
    }
  }
  ExecutorOptions executor_options;
  executor_options.device_count = options.device_count;
  executor_options.memory_limit_per_device = options.memory_limit;
  executor_options.compute_threads = options.compute_threads;
  executor_options.session_limits.max_streams = options.max_streams_per_client;
  executor_options.session_limits.max_allocations = options.max_allocations_per_client;
  executor_options.shared_by_tenants = options.fair_scheduling;
  absl::StatusOr<std::unique_ptr<BackingExecutor>> executor =
      CreateExecutor(options.executor, executor_options);
  if (!executor.ok()) return executor.status();
  uint16_t port = 0;
  absl::StatusOr<ScopedFd> listener = ListenSocket(*address, &port);
  if (!listener.ok()) return listener.status();
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError("pipe");
  std::string bound = address->endpoint;
  if (address->kind == SocketAddress::Kind::kTcp) {
    std::string host = address->host.find(':') != std::string::npos
                           ? absl::StrCat("[", address->host, "]")
                           : address->host;
    bound = absl::StrCat("tcp://", host, ":", port);
  }
  auto server = std::unique_ptr<Server>(new Server(options, *std::move(executor),
                                                   *std::move(listener), bound,
                                                   ScopedFd(pipe_fds[0]), ScopedFd(pipe_fds[1])));
  if (address->kind == SocketAddress::Kind::kUnix) server->unix_path_ = address->path;
  // Non-blocking, so that a connection gone between poll and accept cannot block the loop.
  ::fcntl(server->listener_.get(), F_SETFL,
          ::fcntl(server->listener_.get(), F_GETFL, 0) | O_NONBLOCK);
  server->reserve_fd_ = OpenReserveFd();
  return server;
}

Server::Server(const Options& options, std::unique_ptr<BackingExecutor> executor, ScopedFd listener,
               std::string address, ScopedFd wake_read, ScopedFd wake_write)
    : options_(options),
      executor_(std::move(executor)),
      listener_(std::move(listener)),
      address_(std::move(address)),
      wake_read_(std::move(wake_read)),
      wake_write_(std::move(wake_write)),
      started_ns_(NowNs()),
      stream_threads_(std::make_shared<StreamThreadBudget>(
          options.max_streams,
          absl::StrCat("the most the server may have (--max_streams=", options.max_streams,
                       ")"))) {
  for (const auto& [name, limit] : options_.tenant_quotas) {
    tenant_budgets_[name] = std::make_shared<SharedQuota>(name, limit);
  }
}

std::shared_ptr<SharedQuota> Server::TenantBudget(const std::string& tenant) const {
  auto it = tenant_budgets_.find(tenant);
  return it == tenant_budgets_.end() ? nullptr : it->second;
}

std::shared_ptr<StreamThreadBudget> Server::PeerStreamThreads(const std::string& peer) {
  std::lock_guard<std::mutex> lock(mu_);
  // Entries of peers that left are dropped as the map grows (a bounded sweep per new peer).
  if (peer_stream_threads_.size() >= 64) {
    absl::erase_if(peer_stream_threads_, [](const auto& entry) { return entry.second.expired(); });
  }
  std::weak_ptr<StreamThreadBudget>& slot = peer_stream_threads_[peer];
  std::shared_ptr<StreamThreadBudget> budget = slot.lock();
  if (budget == nullptr) {
    const int limit = std::max(1, options_.max_streams / 2);
    budget = std::make_shared<StreamThreadBudget>(
        limit, absl::StrCat("the most one peer (", peer, ") may have: half of --max_streams=",
                            options_.max_streams),
        stream_threads_);
    slot = budget;
  }
  return budget;
}

void Server::RecordFinishedConnection(const std::string& tenant, const TenantTotals& totals,
                                      bool* recorded) {
  std::lock_guard<std::mutex> lock(mu_);
  // Tenant names are the clients' choice: past kMaxRememberedTenants names, the totals of
  // tenants no quota names are summed under kOtherTenants, so the table stays bounded.
  if (finished_tenants_.size() >= kMaxRememberedTenants && !finished_tenants_.contains(tenant) &&
      !tenant_budgets_.contains(tenant)) {
    finished_tenants_[kOtherTenants].Add(totals);
  } else {
    finished_tenants_[tenant].Add(totals);
  }
  *recorded = true;
}

Server::~Server() {
  Stop();
  Reap(/*all=*/true);
  if (!unix_path_.empty()) ::unlink(unix_path_.c_str());
}

void Server::Stop() {
  if (stopping_.exchange(true)) return;
  char byte = 1;
  (void)!::write(wake_write_.get(), &byte, 1);
}

void Server::Reap(bool all) {
  std::list<std::unique_ptr<ServerConnection>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (all) (*it)->Close();
      if (all || (*it)->finished()) {
        auto peer = connections_per_peer_.find((*it)->peer_key());
        if (peer != connections_per_peer_.end() && --peer->second <= 0) {
          connections_per_peer_.erase(peer);
        }
        done.push_back(std::move(*it));
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }
  done.clear();  // joins outside the lock (StatsJson may want it)
}

void Server::EnforceDeadlines() {
  const int64_t now = NowNs();
  std::vector<ServerConnection*> overdue;
  std::string reason, example;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& connection : connections_) {
    std::string why = connection->Overdue(now);
    if (why.empty()) continue;
    if (overdue.empty()) {
      reason = why;
      example = absl::StrCat(connection->id(), " (", connection->peer(), ")");
    }
    overdue.push_back(connection.get());
  }
  if (overdue.empty()) return;
  // Logged before closing: whoever sees the connection end finds the reason already written.
  Log(LogLevel::kWarning, absl::StrCat("vgpu server: closed ", overdue.size(),
                                       " connection(s): ", reason, "; e.g. client ", example));
  for (ServerConnection* connection : overdue) connection->Close();
}

absl::Status Server::ReserveReceiving(const std::string& peer, uint64_t bytes,
                                      const std::atomic<bool>& abandon) {
  const uint64_t limit = options_.max_receiving_bytes;
  std::unique_lock<std::mutex> lock(receiving_mu_);
  PeerReceiving* entry = &receiving_by_peer_[peer];
  entry->waiting += 1;
  receiving_cv_.wait(lock, [&] {
    if (abandon.load() || receiving_bytes_ == 0) return true;
    entry = &receiving_by_peer_[peer];  // the map may have rehashed meanwhile
    // Never more than half the budget, even while no other peer wants any: reservations are
    // not taken back, so a peer that took everything while alone (frames trickling in at the
    // minimum rate) would keep the next peer waiting for as long as its frames take.
    const uint64_t share = limit / std::max<uint64_t>(2, receiving_by_peer_.size());
    return bytes <= limit - std::min(limit, receiving_bytes_) &&
           (entry->reserved == 0 || entry->reserved + bytes <= share);
  });
  entry = &receiving_by_peer_[peer];
  entry->waiting -= 1;
  if (abandon.load()) {
    if (entry->waiting == 0 && entry->reserved == 0) receiving_by_peer_.erase(peer);
    lock.unlock();
    receiving_cv_.notify_all();  // the shares grew
    return absl::CancelledError("connection closing while waiting for receive budget");
  }
  entry->reserved += bytes;
  receiving_bytes_ += bytes;
  return absl::OkStatus();
}

void Server::ReleaseReceiving(const std::string& peer, uint64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(receiving_mu_);
    receiving_bytes_ -= bytes;
    auto it = receiving_by_peer_.find(peer);
    if (it != receiving_by_peer_.end()) {
      it->second.reserved -= bytes;
      if (it->second.reserved == 0 && it->second.waiting == 0) receiving_by_peer_.erase(it);
    }
  }
  receiving_cv_.notify_all();
}

void Server::RefuseAndClose(ScopedFd fd, const std::string& reason) {
  SendRefusal(fd.get(), reason);
  const int64_t now = NowNs();
  // Keep it open a moment so that its client reads the reason rather than a reset.
  while (!lingering_.empty() &&
         (lingering_.size() >= kMaxLingeringRefusals ||
          now - lingering_.front().first > kRefusalLingerNs)) {
    lingering_.pop_front();
  }
  lingering_.emplace_back(now, std::move(fd));
  ++refusals_unlogged_;
  if (now - last_refusal_log_ns_ >= 1'000'000'000) {
    Log(LogLevel::kWarning, absl::StrCat("vgpu server: refused ", refusals_unlogged_,
                                         " connection(s) since the last report: ", reason));
    refusals_unlogged_ = 0;
    last_refusal_log_ns_ = now;
  }
}

std::optional<Server::Accepted> Server::RefuseBacklogOutOfDescriptors() {
  // The whole backlog in one round, not one client per back-off: a backlog of dozens would
  // otherwise wait seconds for its reason, past its clients' connect timeouts.
  for (int i = 0; i < kRefusalsPerBackOff; ++i) {
    Accepted waiting;
    waiting.fd = ScopedFd(::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&waiting.peer),
                                    &waiting.peer_length, SOCK_CLOEXEC));
    if (!waiting.fd.valid()) return std::nullopt;  // nobody left, or the descriptor was taken
    // Room for the reserve as well: descriptors came back during the round (a client left).
    // This client is served, not refused.
    if (ScopedFd reserve = OpenReserveFd(); reserve.valid()) {
      reserve_fd_ = std::move(reserve);
      return waiting;
    }
    SendRefusal(waiting.fd.get(), "the server is out of file descriptors; try again later");
    // It cannot linger as other refusals do (its descriptor is the reserve's). Reading what
    // its client already sent (a Hello) lets the close end the stream instead of resetting it,
    // which over TCP could discard the reason before the client reads it.
    char unread[512];
    for (int reads = 0; reads < 8; ++reads) {
      if (::recv(waiting.fd.get(), unread, sizeof(unread), MSG_DONTWAIT) <= 0) break;
    }
    refused_out_of_descriptors_.fetch_add(1, std::memory_order_relaxed);
  }
  return std::nullopt;
}

void Server::LogAcceptBackOff(const char* why) {
  const int64_t now = NowNs();
  if (now - last_refusal_log_ns_ < 1'000'000'000) return;
  Log(LogLevel::kWarning, absl::StrCat("vgpu server: cannot accept connections: ", why,
                                       "; backing off"));
  last_refusal_log_ns_ = now;
}

bool Server::AcceptOne() {
  // The reserve first. Another thread can take the descriptor freed between closing a refused
  // connection and reopening the reserve below (glibc opens /sys/devices/system/cpu/online the
  // first time a thread needs a malloc arena: a new connection's thread). Were the descriptor
  // it gives back then handed to a connection, the next time descriptors run out nobody waiting
  // could be told, and the backlog would wait until some client left.
  if (!reserve_fd_.valid()) {
    reserve_fd_ = OpenReserveFd();
    if (!reserve_fd_.valid()) {
      LogAcceptBackOff("no file descriptor left, not even to refuse");
      return false;
    }
  }
  Accepted accepted;
  accepted.fd = ScopedFd(::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&accepted.peer),
                                   &accepted.peer_length, SOCK_CLOEXEC));
  if (!accepted.fd.valid()) {
    const int error = errno;
    if (error != EMFILE && error != ENFILE && error != ENOBUFS && error != ENOMEM) return true;
    // Out of descriptors: free the reserve to accept the waiting clients and tell them why, so
    // the backlog does not keep the listener readable (and the loop spinning).
    lingering_.clear();
    reserve_fd_.Reset();
    std::optional<Accepted> served = RefuseBacklogOutOfDescriptors();
    if (served.has_value()) {
      Admit(*std::move(served));
      return true;
    }
    reserve_fd_ = OpenReserveFd();  // if another thread took the descriptor: the next call
    accept_back_offs_.fetch_add(1, std::memory_order_relaxed);
    LogAcceptBackOff(std::strerror(error));
    return false;
  }
  Admit(std::move(accepted));
  return true;
}

void Server::Admit(Accepted accepted) {
  const int fd = accepted.fd.get();
  const sockaddr_storage& peer = accepted.peer;
  ScopedFd connection_fd = std::move(accepted.fd);
  std::string description;
  const std::string key = PeerKey(fd, peer, accepted.peer_length, &description);
  if (peer.ss_family == AF_INET || peer.ss_family == AF_INET6) TuneSocket(fd);
  std::string refusal;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Connections being closed (not reaped yet) hold no slot; past --max_handshakes, the
    // oldest connection still in its handshake makes room for this one.
    int open = 0, handshaking = 0;
    ServerConnection* oldest_handshake = nullptr;
    for (const auto& connection : connections_) {
      if (connection->closing()) continue;
      ++open;
      if (!connection->handshaken()) {
        ++handshaking;
        if (oldest_handshake == nullptr) oldest_handshake = connection.get();
      }
    }
    if (handshaking >= options_.max_handshakes && oldest_handshake != nullptr) {
      oldest_handshake->Close();
      --open;
      ++handshakes_evicted_;
    }
    int& from_peer = connections_per_peer_[key];
    if (open >= options_.max_connections) {
      refusal = absl::StrCat("the server has too many connections (", options_.max_connections,
                             ", --max_connections); try again later");
    } else if (from_peer >= options_.max_connections_per_peer) {
      refusal = absl::StrCat("too many connections from ", key, " (",
                             options_.max_connections_per_peer,
                             ", --max_connections_per_peer)");
    } else {
      auto connection = std::make_unique<ServerConnection>(
          this, next_client_id_.fetch_add(1), std::move(connection_fd), description, key);
      if (connection->Start()) {
        ++from_peer;
        connections_.push_back(std::move(connection));
        return;
      }
      connection_fd = connection->TakeFd();  // to tell the client why
      refusal = "the server cannot start a thread for the connection; try again later";
    }
    if (from_peer == 0) connections_per_peer_.erase(key);
  }
  if (connection_fd.valid()) RefuseAndClose(std::move(connection_fd), refusal);
}

absl::Status Server::Serve() {
  Log(LogLevel::kWarning, absl::StrCat("vgpu server: listening on ", address_, " (",
                                       options_.device_count, " device(s) of ",
                                       options_.memory_limit, " bytes)"));
  int64_t listen_again_ns = 0;  // back-off after accept ran out of resources
  while (!stopping_.load()) {
    const int64_t now = NowNs();
    const bool backing_off = now < listen_again_ns;
    pollfd fds[2] = {{wake_read_.get(), POLLIN, 0}, {listener_.get(), POLLIN, 0}};
    const int timeout_ms = backing_off ? static_cast<int>((listen_again_ns - now) / 1'000'000) + 1
                                       : (lingering_.empty() ? 1000 : 250);
    int ready = ::poll(fds, backing_off ? 1 : 2, std::min(timeout_ms, 1000));
    Reap(/*all=*/false);
    EnforceDeadlines();
    while (!lingering_.empty() && NowNs() - lingering_.front().first > kRefusalLingerNs) {
      lingering_.pop_front();
    }
    if (ready <= 0 || stopping_.load() || backing_off) continue;
    if (fds[1].revents & POLLIN) {
      for (int i = 0; i < 16; ++i) {  // a few per wake-up; the listener is non-blocking
        if (!AcceptOne()) {
          listen_again_ns = NowNs() + int64_t{kAcceptBackoffMs} * 1'000'000;
          break;
        }
      }
    }
  }
  lingering_.clear();
  Reap(/*all=*/true);
  Log(LogLevel::kWarning, "vgpu server: stopped");
  return absl::OkStatus();
}

StatsViewer Server::ViewerFor(const std::string& token, const std::string& tenant,
                              const std::string& peer_key) const {
  if (!options_.operator_token.empty() && ConstantTimeEquals(token, options_.operator_token)) {
    return StatsViewer::Full();
  }
  // No credential configured at all: a single-user local setup, where everyone may see all.
  if (options_.operator_token.empty() && options_.token.empty()) return StatsViewer::Full();
  return StatsViewer::Tenant(tenant.empty() ? std::string(kDefaultTenant) : tenant, peer_key);
}

std::string Server::StatsJson(const StatsViewer& viewer) {
  const bool full = viewer.scope == StatsViewer::Scope::kFull;
  struct TenantView {
    TenantTotals totals;
    uint64_t connections = 0;
    uint64_t bytes_in_use = 0;
  };
  std::string clients;
  size_t connection_count = 0;
  uint64_t receiving = 0;
  uint64_t streams = 0, queued = 0, handshakes_evicted = 0;
  absl::flat_hash_map<std::string, TenantView> tenants;
  for (const auto& [name, budget] : tenant_budgets_) {  // configured: always shown (if allowed)
    if (full || name == viewer.tenant) tenants[name];
  }
  {
    std::lock_guard<std::mutex> lock(receiving_mu_);
    receiving = receiving_bytes_;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    connection_count = connections_.size();
    handshakes_evicted = handshakes_evicted_;
    for (const auto& [name, totals] : finished_tenants_) {
      if (full || name == viewer.tenant) tenants[name].totals.Add(totals);
    }
    for (auto& connection : connections_) {
      if (!connection->is_tenant() || connection->finished() || connection->totals_recorded()) {
        continue;
      }
      const SessionStats stats = connection->session_stats();
      const uint64_t in_use = connection->bytes_in_use();
      streams += stats.streams;  // server-wide aggregates count every tenant
      queued += stats.queued;
      if (!full && connection->tenant_name() != viewer.tenant) continue;
      TenantView& tenant = tenants[connection->tenant_name()];
      tenant.connections += 1;
      tenant.bytes_in_use += in_use;
      tenant.totals.Add({connection->commands(), connection->round_trips(), stats.launches,
                         stats.kernel_ns, stats.errors});
      // A tenant viewer sees the rows of its own peer's connections only, without the peer.
      if (!full && connection->peer_key() != viewer.peer_key) continue;
      absl::StrAppend(&clients, clients.empty() ? "" : ", ", "{\"id\": ", connection->id(),
                      full ? absl::StrCat(", \"peer\": \"", connection->peer(), "\"") : "",
                      ", \"tenant\": \"", connection->tenant_name(),
                      "\", \"bytes_in_use\": ", in_use,
                      ", \"staging_bytes\": ", connection->staging_bytes(),
                      ", \"shm_bytes\": ", connection->shm_bytes(),
                      ", \"commands\": ", connection->commands(),
                      ", \"round_trips\": ", connection->round_trips(),
                      ", \"templates_created\": ", connection->templates_created(),
                      ", \"launches_by_template\": ", connection->launches_by_template(),
                      ", \"launches\": ", stats.launches, ", \"kernel_ns\": ", stats.kernel_ns,
                      ", \"errors\": ", stats.errors, ", \"streams\": ", stats.streams,
                      ", \"queued_commands\": ", stats.queued, "}");
    }
  }
  std::vector<std::string> names;
  for (const auto& [name, view] : tenants) names.push_back(name);
  std::sort(names.begin(), names.end());
  std::string tenant_json;
  for (const std::string& name : names) {
    const TenantView& view = tenants[name];
    std::shared_ptr<SharedQuota> budget = TenantBudget(name);
    absl::StrAppend(&tenant_json, tenant_json.empty() ? "" : ", ", "{\"name\": \"", name,
                    "\", \"quota_bytes\": ", budget != nullptr ? budget->limit_bytes() : 0,
                    ", \"connections\": ", view.connections,
                    ", \"bytes_in_use\": ", view.bytes_in_use,
                    ", \"commands\": ", view.totals.commands,
                    ", \"round_trips\": ", view.totals.round_trips,
                    ", \"launches\": ", view.totals.launches,
                    ", \"kernel_ns\": ", view.totals.kernel_ns,
                    ", \"errors\": ", view.totals.errors, "}");
  }
  std::string devices;
  for (int d = 0; d < executor_->device_count(); ++d) {
    MemoryInfo info = executor_->DeviceMemoryInfo(static_cast<uint32_t>(d));
    absl::StrAppend(&devices, d == 0 ? "" : ", ", "{\"device\": ", d, ", \"limit_bytes\": ",
                    info.limit_bytes, ", \"bytes_in_use\": ", info.bytes_in_use, "}");
  }
  return absl::StrCat("{\"view\": \"", full ? "full" : "tenant", "\", \"address\": \"",
                      address_, "\", \"executor\": \"",
                      executor_->name(), "\", \"uptime_s\": ",
                      (NowNs() - started_ns_) / 1e9, ", \"commands_total\": ",
                      commands_total_.load(), ", \"client_quota\": ", options_.client_quota,
                      ", \"connections\": ", connection_count, ", \"receiving_bytes\": ",
                      receiving, ", \"handshakes_evicted\": ", handshakes_evicted,
                      ", \"accept_back_offs\": ", accept_back_offs_.load(),
                      ", \"refused_out_of_descriptors\": ", refused_out_of_descriptors_.load(),
                      ", \"max_staging_bytes\": ", options_.max_staging_bytes,
                      ", \"streams\": ", streams, ", \"queued_commands\": ", queued,
                      ", \"clients\": [", clients, "], \"tenants\": [", tenant_json,
                      "], \"devices\": [", devices, "]}");
}

}  // namespace vgpu
