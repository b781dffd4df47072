// The `vgpu server` accept loop and its connections (see server.h).
#include "plugin/server/server.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "plugin/common/log.h"
#include "plugin/protocol/wire_format.h"

namespace vgpu {
namespace {

// Tokens the server itself puts on a stream (to send an asynchronous copy's data when the
// stream reaches it). Client tokens with this bit are refused.
constexpr uint64_t kInternalToken = 1ull << 63;
constexpr uint32_t kMaxHelloBytes = 4096;

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

}  // namespace

// One client connection: its session, reader thread and notification sink.
class ServerConnection final : public CompletionSink {
 public:
  ServerConnection(Server* server, uint64_t id, ScopedFd fd, std::string peer)
      : server_(server), id_(id), fd_(std::move(fd)), peer_(std::move(peer)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~ServerConnection() override {
    Close();
    thread_.join();
  }

  void Close() { ::shutdown(fd_.get(), SHUT_RDWR); }
  bool finished() const { return finished_.load(); }
  uint64_t id() const { return id_; }
  const std::string& peer() const { return peer_; }
  bool is_tenant() const { return tenant_.load(); }
  uint64_t commands() const { return commands_.load(); }
  uint64_t bytes_in_use() {
    std::lock_guard<std::mutex> lock(session_mu_);
    return session_ != nullptr ? session_->BytesInUse() : 0;
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
      return;
    }
    std::vector<uint8_t> payload;
    wire::EncodeNotify({token, stream_status}, &payload);
    Write(wire::MessageType::kNotify, 0, {iovec{payload.data(), payload.size()}});
  }

 private:
  struct PendingCopy {
    uint64_t sequence = 0;
    std::shared_ptr<std::vector<uint8_t>> buffer;
    uint64_t size = 0;
  };

  void Write(wire::MessageType type, uint64_t sequence, std::vector<iovec> parts) {
    std::lock_guard<std::mutex> lock(write_mu_);
    absl::Status s = WriteFrame(fd_.get(), type, sequence, std::move(parts));
    if (!s.ok()) Close();  // the reader notices and ends the connection
  }

  void SendReply(uint64_t sequence, const Reply& reply, const void* data, uint64_t size) {
    std::vector<uint8_t> payload;
    wire::EncodeReply(reply, &payload);
    std::vector<iovec> parts{iovec{payload.data(), payload.size()}};
    if (data != nullptr && size > 0) parts.push_back(iovec{const_cast<void*>(data), size});
    Write(wire::MessageType::kReply, sequence, std::move(parts));
  }

  void Refuse(const std::string& reason) {
    std::vector<uint8_t> payload;
    wire::EncodeString(reason, &payload);
    Write(wire::MessageType::kRefused, 0, {iovec{payload.data(), payload.size()}});
    Log(LogLevel::kWarning, absl::StrCat("vgpu server: refused client ", id_, " (", peer_,
                                         "): ", reason));
  }

  void Run() {
    absl::Status end = Serve();
    Close();  // the peer sees EOF now, not when the connection is reaped
    // Reclaim: wait for helper calls, then drain and destroy the session (frees its memory).
    for (std::thread& helper : helpers_) helper.join();
    uint64_t freed = 0;
    std::unique_ptr<ExecutorSession> session;
    {
      std::lock_guard<std::mutex> lock(session_mu_);
      if (session_ != nullptr) freed = session_->BytesInUse();
      session.swap(session_);
    }
    session.reset();
    if (tenant_.load()) {
      Log(LogLevel::kWarning,
          absl::StrCat("vgpu server: client ", id_, " (", peer_, ") disconnected (",
                       end.message(), "); reclaimed ", freed, " bytes"));
    }
    finished_.store(true);
  }

  absl::Status Serve() {
    FrameReader reader(fd_.get());
    absl::StatusOr<wire::FrameHeader> header = reader.ReadHeader();
    if (!header.ok()) return header.status();
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
    if (!server_->options_.token.empty() &&
        !ConstantTimeEquals(hello->token, server_->options_.token)) {
      Refuse("a valid token is required");
      return absl::PermissionDeniedError("bad token");
    }
    if (hello->role == wire::Role::kObserver) return ServeObserver(reader);
    {
      std::lock_guard<std::mutex> lock(session_mu_);
      session_ = server_->executor_->OpenSession(this, server_->options_.client_quota);
    }
    tenant_.store(true);
    Log(LogLevel::kWarning, absl::StrCat("vgpu server: client ", id_, " connected (", peer_, ")"));
    std::vector<uint8_t> welcome;
    wire::EncodeWelcome({static_cast<uint32_t>(server_->executor_->device_count()),
                         server_->options_.memory_limit, server_->options_.client_quota},
                        &welcome);
    Write(wire::MessageType::kWelcome, 0, {iovec{welcome.data(), welcome.size()}});
    for (;;) {
      header = reader.ReadHeader();
      if (!header.ok()) return header.status();
      if (header->type != wire::MessageType::kCommand) {
        return absl::InvalidArgumentError("a tenant may only send commands");
      }
      auto frame = std::make_shared<std::vector<uint8_t>>(header->payload_length);
      if (absl::Status s = reader.ReadExact(frame->data(), frame->size()); !s.ok()) return s;
      absl::StatusOr<wire::DecodedCommand> decoded = wire::DecodeCommand(frame);
      if (!decoded.ok()) {
        Log(LogLevel::kWarning, absl::StrCat("vgpu server: client ", id_,
                                             " sent a malformed frame: ",
                                             decoded.status().message()));
        return decoded.status();
      }
      commands_.fetch_add(1, std::memory_order_relaxed);
      server_->commands_total_.fetch_add(1, std::memory_order_relaxed);
      Dispatch(std::move(decoded->command), decoded->wants_host_data, header->sequence, frame);
    }
  }

  absl::Status ServeObserver(FrameReader& reader) {
    for (;;) {
      absl::StatusOr<wire::FrameHeader> header = reader.ReadHeader();
      if (!header.ok()) return header.status();
      if (header->type != wire::MessageType::kStatsRequest || header->payload_length != 0) {
        return absl::InvalidArgumentError("an observer may only ask for stats");
      }
      std::vector<uint8_t> payload;
      wire::EncodeString(server_->StatsJson(), &payload);
      Write(wire::MessageType::kStatsReply, header->sequence,
            {iovec{payload.data(), payload.size()}});
    }
  }

  void Dispatch(Command command, bool wants_host_data, uint64_t sequence,
                std::shared_ptr<std::vector<uint8_t>> frame) {
    ExecutorSession* session = session_.get();  // set before the loop, reset after it
    if (IsAsynchronous(command.kind)) {
      if ((command.kind == CommandKind::kNotify || command.kind == CommandKind::kRecordEvent) &&
          (command.token & kInternalToken)) {
        RecordAsyncError(absl::InvalidArgumentError("notification token out of range"));
        return;
      }
      if (command.host_src != nullptr) command.host_storage = frame;  // alive until executed
      uint64_t copy_token = 0;
      if (wants_host_data) {  // kMemcpyDtoH: data goes back when the stream reaches it
        auto buffer = std::make_shared<std::vector<uint8_t>>(command.size);
        command.host_dst = buffer->data();
        command.host_storage = buffer;
        copy_token = kInternalToken | next_internal_token_++;
        std::lock_guard<std::mutex> lock(copies_mu_);
        copies_[copy_token] = PendingCopy{sequence, buffer, command.size};
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
      return;
    }
    if (IsBlockingCall(command.kind)) {
      helpers_.emplace_back([this, session, sequence, command = std::move(command)]() mutable {
        const CommandKind kind = command.kind;
        Reply reply = session->Handle(std::move(command));
        if (kind != CommandKind::kDestroyStream && reply.status.ok()) {
          reply.status = TakeAsyncError();
        }
        SendReply(sequence, reply, nullptr, 0);
      });
      ReapHelpers();
      return;
    }
    std::shared_ptr<std::vector<uint8_t>> buffer;
    if (wants_host_data) {  // device-to-host kMemcpyNow: the data rides on the Reply
      buffer = std::make_shared<std::vector<uint8_t>>(command.size);
      command.host_dst = buffer->data();
    }
    const uint64_t size = command.size;
    Reply reply = session->Handle(std::move(command));
    SendReply(sequence, reply, reply.status.ok() && buffer ? buffer->data() : nullptr,
              buffer ? size : 0);
  }

  // Helpers that finished are joined now and then so that they do not accumulate.
  void ReapHelpers() {
    if (helpers_.size() < 64) return;
    for (std::thread& helper : helpers_) helper.join();
    helpers_.clear();
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
  std::thread thread_;
  std::vector<std::thread> helpers_;  // reader thread only
  std::atomic<bool> finished_{false};
  std::atomic<bool> tenant_{false};
  std::atomic<uint64_t> commands_{0};
  std::mutex write_mu_;
  std::mutex session_mu_;
  std::unique_ptr<ExecutorSession> session_;
  std::mutex copies_mu_;
  absl::flat_hash_map<uint64_t, PendingCopy> copies_;
  uint64_t next_internal_token_ = 1;  // reader thread only
  std::mutex async_error_mu_;
  absl::Status async_error_;
};

absl::StatusOr<std::unique_ptr<Server>> Server::Create(const Options& options) {
  absl::StatusOr<SocketAddress> address = ParseSocketAddress(options.listen);
  if (!address.ok()) return address.status();
  CpuExecutor::Options executor_options;
  executor_options.device_count = options.device_count;
  executor_options.memory_limit_per_device = options.memory_limit;
  executor_options.compute_threads = options.compute_threads;
  executor_options.session_limits.max_streams = options.max_streams_per_client;
  absl::StatusOr<std::unique_ptr<CpuExecutor>> executor = CpuExecutor::Create(executor_options);
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
  return server;
}

Server::Server(const Options& options, std::unique_ptr<CpuExecutor> executor, ScopedFd listener,
               std::string address, ScopedFd wake_read, ScopedFd wake_write)
    : options_(options),
      executor_(std::move(executor)),
      listener_(std::move(listener)),
      address_(std::move(address)),
      wake_read_(std::move(wake_read)),
      wake_write_(std::move(wake_write)),
      started_ns_(NowNs()) {}

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
        done.push_back(std::move(*it));
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }
  done.clear();  // joins outside the lock (StatsJson may want it)
}

absl::Status Server::Serve() {
  Log(LogLevel::kWarning, absl::StrCat("vgpu server: listening on ", address_, " (",
                                       options_.device_count, " device(s) of ",
                                       options_.memory_limit, " bytes)"));
  while (!stopping_.load()) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
    int ready = ::poll(fds, 2, 1000);
    Reap(/*all=*/false);
    if (ready <= 0 || stopping_.load()) continue;
    if (fds[0].revents & POLLIN) {
      sockaddr_storage peer{};
      socklen_t length = sizeof(peer);
      int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&peer), &length,
                         SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::string description = "unix socket";
      if (peer.ss_family == AF_INET || peer.ss_family == AF_INET6) {
        TuneSocket(fd);
        char host[NI_MAXHOST] = "?", service[NI_MAXSERV] = "?";
        ::getnameinfo(reinterpret_cast<sockaddr*>(&peer), length, host, sizeof(host), service,
                      sizeof(service), NI_NUMERICHOST | NI_NUMERICSERV);
        description = absl::StrCat(host, ":", service);
      }
      std::lock_guard<std::mutex> lock(mu_);
      connections_.push_back(std::make_unique<ServerConnection>(
          this, next_client_id_.fetch_add(1), ScopedFd(fd), description));
    }
  }
  Reap(/*all=*/true);
  Log(LogLevel::kWarning, "vgpu server: stopped");
  return absl::OkStatus();
}

std::string Server::StatsJson() {
  std::string clients;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& connection : connections_) {
      if (!connection->is_tenant() || connection->finished()) continue;
      absl::StrAppend(&clients, clients.empty() ? "" : ", ", "{\"id\": ", connection->id(),
                      ", \"peer\": \"", connection->peer(), "\", \"bytes_in_use\": ",
                      connection->bytes_in_use(), ", \"commands\": ", connection->commands(),
                      "}");
    }
  }
  std::string devices;
  for (int d = 0; d < executor_->device_count(); ++d) {
    MemoryInfo info = executor_->arena(static_cast<uint32_t>(d)).Info();
    absl::StrAppend(&devices, d == 0 ? "" : ", ", "{\"device\": ", d, ", \"limit_bytes\": ",
                    info.limit_bytes, ", \"bytes_in_use\": ", info.bytes_in_use, "}");
  }
  return absl::StrCat("{\"address\": \"", address_, "\", \"uptime_s\": ",
                      (NowNs() - started_ns_) / 1e9, ", \"commands_total\": ",
                      commands_total_.load(), ", \"client_quota\": ", options_.client_quota,
                      ", \"clients\": [", clients, "], \"devices\": [", devices, "]}");
}

}  // namespace vgpu
