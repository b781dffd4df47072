// `vgpu server`: hosts a CPU backing executor and serves many clients (TensorFlow processes)
// over a Unix or TCP socket, speaking protocol/wire_format.h. Each connection is one tenant: one
// ExecutorSession, so a client can only touch memory it allocated (every address is validated
// against the session's ownership) and everything it held is reclaimed when it disconnects or
// dies. Each connection has one reader thread that decodes frames and hands the commands to the
// session; blocking calls (synchronisations, stream destruction) run on a helper thread so that
// the reader keeps accepting the client's other streams' work. Streams of all clients run on
// their own worker threads over one shared compute pool, so the OS interleaves them fairly.
#ifndef VGPU_SERVER_SERVER_H_
#define VGPU_SERVER_SERVER_H_

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "plugin/backend/cpu/cpu_executor.h"
#include "plugin/transport/socket_util.h"

namespace vgpu {

class ServerConnection;

class Server {
 public:
  struct Options {
    std::string listen;               // unix:///path or tcp://host:port (port 0: any)
    int device_count = 1;
    uint64_t memory_limit = 1ull << 30;  // per device
    uint64_t client_quota = 0;        // per client, 0: the device limit only
    std::string token;                // empty: no token required
    int compute_threads = 0;          // 0: one per core
    // Streams one client may have at once (each is a worker thread on the server).
    int max_streams_per_client = CpuSessionLimits::kDefaultMaxStreams;
  };

  // Creates the executor and binds the listening socket (so clients can connect as soon as this
  // returns; Serve accepts them).
  static absl::StatusOr<std::unique_ptr<Server>> Create(const Options& options);
  // Stops (if serving), disconnects every client and releases everything.
  ~Server();

  // Accepts and serves clients until Stop(). Blocks; call from one thread.
  absl::Status Serve();
  // Makes Serve() return after closing every connection. Thread-safe; returns at once.
  void Stop();

  // The address clients use (with the port chosen for tcp port 0).
  const std::string& address() const { return address_; }
  // {"clients": [...], "devices": [...], "commands_total": N, "uptime_s": S}. Thread-safe.
  std::string StatsJson();

 private:
  friend class ServerConnection;
  Server(const Options& options, std::unique_ptr<CpuExecutor> executor, ScopedFd listener,
         std::string address, ScopedFd wake_read, ScopedFd wake_write);
  void Reap(bool all);

  const Options options_;
  std::unique_ptr<CpuExecutor> executor_;
  ScopedFd listener_;
  std::string address_;
  std::string unix_path_;  // removed at shutdown
  ScopedFd wake_read_, wake_write_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> commands_total_{0};
  std::atomic<uint64_t> next_client_id_{1};
  const int64_t started_ns_;

  std::mutex mu_;  // guards connections_
  std::list<std::unique_ptr<ServerConnection>> connections_;
};

}  // namespace vgpu

#endif  // VGPU_SERVER_SERVER_H_
