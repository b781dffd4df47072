// `vgpu server`: hosts a backing executor (any registered one, the CPU executor by default) and
// serves many clients (TensorFlow processes) over a Unix or TCP socket, speaking
// protocol/wire_format.h. Each connection is one tenant: one ExecutorSession, so a client can
// only touch memory it allocated (every address is validated against the session's ownership)
// and everything it held is reclaimed when it disconnects or dies. Each connection has one
// reader thread that decodes frames and hands the commands to the session; blocking calls
// (synchronisations, stream destruction) run on a helper thread so that the reader keeps
// accepting the client's other streams' work. Against hostile clients every per-connection
// resource is bounded (Options, the constants below): connections in all and per peer, the
// handshake's time and pending handshakes, failed authentications per peer, host memory in
// flight per tenant (every queued command and staged read is charged to it; backpressure: the
// reader stops reading that tenant), large frames being received (a server-wide budget with a
// fair share per peer), frames arriving too slowly, and helper threads per connection.
// Teardown never waits on work a client queued (ExecutorSession::Cancel).
#ifndef VGPU_SERVER_SERVER_H_
#define VGPU_SERVER_SERVER_H_

#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "plugin/backend/executor_registry.h"
#include "plugin/backend/shared_quota.h"
#include "plugin/server/auth_throttle.h"
#include "plugin/transport/socket_util.h"

namespace vgpu {

// The peer an IP address counts as for the per-peer limits (--max_connections_per_peer, the
// failed-authentication throttle, the receive budget's fair share). One address is one peer,
// except where one party holds many: every loopback address (any local user can use all of
// 127.0.0.0/8 and ::1) is the single peer "loopback", and an IPv6 address counts by its /64 (the
// block one host or site is usually given). An IPv4-mapped IPv6 address counts as its IPv4 one.
// `peer` is an AF_INET or AF_INET6 address.
std::string IpPeerKey(const sockaddr_storage& peer);

class ServerConnection;

// Who asks for the server's statistics, and so what StatsJson shows (docs/security.md, "Who may
// see what"). The full view names every connection's peer (uid and pid, or IP address and
// port), tenant, memory, kernel time and errors; the tenant view shows server-wide aggregates
// that name nobody, the aggregate of the viewer's own tenant, and the rows of that tenant's
// connections from the viewer's own peer (same uid over a Unix socket, same IP address over
// TCP), without their peer.
struct StatsViewer {
  enum class Scope { kFull, kTenant };
  Scope scope = Scope::kFull;
  std::string tenant;    // kTenant: the tenant the viewer named in its Hello
  std::string peer_key;  // kTenant: the viewer's peer (the unit of --max_connections_per_peer)

  // Everything: the operator, or anyone on a server without any token.
  static StatsViewer Full() { return StatsViewer{}; }
  // A holder of the tenant token (or of no token, where only an operator token is configured).
  static StatsViewer Tenant(std::string tenant, std::string peer_key) {
    return StatsViewer{Scope::kTenant, std::move(tenant), std::move(peer_key)};
  }
};

class Server {
 public:
  struct Options {
    std::string listen;               // unix:///path or tcp://host:port (port 0: any)
    std::string executor{kDefaultExecutorName};  // a registered executor (executor_registry.h)
    int device_count = 1;
    uint64_t memory_limit = 1ull << 30;  // per device
    uint64_t client_quota = 0;        // per client, 0: the device limit only
    // Device memory the connections of a named tenant (VGPU_TENANT) may hold together
    // (--tenant_quota name=SIZE,...); tenants not named here have none beyond client_quota.
    std::vector<std::pair<std::string, uint64_t>> tenant_quotas;
    std::string token;                // empty: no token required
    // The operator's credential (--operator_token_file): a Hello presenting it is admitted in
    // any role, and an observer presenting it sees every connection (StatsViewer::Operator).
    // Empty: no operator; then a server with no token either shows everything to everyone (a
    // single-user local setup) and one with a token shows each observer its own tenant only.
    std::string operator_token;
    int compute_threads = 0;          // 0: one per core
    // Streams one client may have at once (each is a worker thread on the server).
    int max_streams_per_client = SessionLimits::kDefaultMaxStreams;
    // Streams of all clients together (each a thread; a host's threads are finite).
    int max_streams = kDefaultMaxStreams;
    // Share compute fairly among tenants (ExecutorOptions::shared_by_tenants; on the CPU
    // executor the FairComputePool); off: for a server with one trusted tenant.
    // --[no]fair_scheduling.
    bool fair_scheduling = true;
    // Limits against hostile or broken clients (docs/security.md). See the constants below.
    uint64_t max_staging_bytes = kDefaultMaxStagingBytes;      // per tenant
    uint64_t max_receiving_bytes = kDefaultMaxReceivingBytes;  // whole server
    int handshake_timeout_ms = kDefaultHandshakeTimeoutMs;
    int frame_timeout_ms = kDefaultFrameTimeoutMs;
    int max_connections = kDefaultMaxConnections;
    int max_connections_per_peer = kDefaultMaxConnectionsPerPeer;
    int max_handshakes = kDefaultMaxHandshakes;
    uint64_t min_receive_rate = kDefaultMinReceiveRate;  // bytes per second; 0: no rate rule
    int max_allocations_per_client = SessionLimits::kDefaultMaxAllocations;
    // Accept a client's shared memory staging region (ShmAttach, Unix sockets only) and the
    // copies that name it; at most max_shm_bytes and half of max_staging_bytes, charged to the
    // tenant's staging budget while the connection lasts.
    bool shared_memory = true;
    uint64_t max_shm_bytes = kDefaultMaxShmBytes;
    // Launch templates one connection may hold (wire_format.h; bytes of
    // wire::TemplateChargeBytes), at most an eighth of max_staging_bytes, charged to the staging
    // budget while the connection lasts. 0: no templates (every launch comes whole).
    uint64_t max_template_bytes = kDefaultMaxTemplateBytes;
  };

  // Host memory one tenant may hold in flight: device-to-host data staged until the client
  // takes it, plus large received command frames (host-to-device data) not yet executed. Past
  // it the server stops reading that tenant's commands until earlier ones are done
  // (backpressure); one frame alone may always proceed. --max_staging_bytes.
  static constexpr uint64_t kDefaultMaxStagingBytes = 256ull << 20;
  static constexpr int kDefaultMaxStreams = 4096;
  // Bytes of large frames being received over all connections: a frame larger than
  // FrameReader::kPayloadChunkBytes reserves the rest of its length before its payload is read,
  // waiting while the budget is full or its peer holds more than a fair share (the budget
  // divided among the peers holding or waiting for some, at most half of it).
  // --max_receiving_bytes.
  static constexpr uint64_t kDefaultMaxReceivingBytes = 512ull << 20;
  // A frame being received must progress at this many bytes per second, measured over windows
  // of min(--frame_timeout, 5 s), or its connection is closed: a trickle cannot hold a frame's
  // reservation (or a connection's buffer) for long. --min_receive_rate.
  static constexpr uint64_t kDefaultMinReceiveRate = 1ull << 20;
  static constexpr int kMaxReceiveRateWindowMs = 5'000;
  // Connections that have not completed their Hello at once; a new one past it closes the
  // oldest such connection instead of being refused. --max_handshakes.
  static constexpr int kDefaultMaxHandshakes = 64;
  // A connection that has not completed its Hello by then is closed. --handshake_timeout.
  static constexpr int kDefaultHandshakeTimeoutMs = 10'000;
  // A frame whose bytes stop arriving for this long, or whose client stops taking the data sent
  // to it for this long, closes its connection. --frame_timeout.
  static constexpr int kDefaultFrameTimeoutMs = 30'000;
  // Open connections (tenants, observers and handshakes) in all. --max_connections.
  static constexpr int kDefaultMaxConnections = 256;
  // Open connections from one peer: one IP address over TCP, one uid (SO_PEERCRED) over a Unix
  // socket. --max_connections_per_peer.
  static constexpr int kDefaultMaxConnectionsPerPeer = 64;
  // The largest shared memory region one connection may attach (also at most half of
  // --max_staging_bytes).
  static constexpr uint64_t kDefaultMaxShmBytes = 256ull << 20;
  // Launch templates of one connection (--max_template_bytes): a training step's distinct
  // launches, a few hundred bytes each (a few thousand for the largest models).
  static constexpr uint64_t kDefaultMaxTemplateBytes = 4ull << 20;
  // Blocking calls (synchronisations, stream destruction) one connection runs at once; its
  // next one waits. Not a flag: a client uses a few streams per device.
  static constexpr int kMaxBlockingCallsPerConnection = 32;

  // Creates the executor and binds the listening socket (so clients can connect as soon as this
  // returns; Serve accepts them).
  static absl::StatusOr<std::unique_ptr<Server>> Create(const Options& options);
  // Stops (if serving), disconnects every client and releases everything.
  ~Server();

  // Accepts and serves clients until Stop(). Blocks; call from one thread.
  absl::Status Serve();
  // Makes Serve() return after closing every connection. Thread-safe; returns at once.
  void Stop();

  // Tests only: closes the descriptor kept to refuse clients when descriptors run out, as when
  // another thread took it while the accept loop was using it. Call before Serve().
  void DropReserveForTesting() { reserve_fd_.Reset(); }

  // The address clients use (with the port chosen for tcp port 0).
  const std::string& address() const { return address_; }
  // {"view": "full"|"tenant", "clients": [...], "tenants": [...], "devices": [...],
  // "commands_total": N, "uptime_s": S, "streams": N, "queued_commands": N, ...}, filtered for
  // `viewer` (StatsViewer): the one place that decides what an observer sees. Thread-safe.
  std::string StatsJson(const StatsViewer& viewer = StatsViewer::Full());
  // What an observer whose Hello presented `token` and named `tenant` (empty: the default
  // tenant) from `peer_key` may see, by the tokens configured (Options::operator_token).
  StatsViewer ViewerFor(const std::string& token, const std::string& tenant,
                        const std::string& peer_key) const;

  // The tenant name of connections whose Hello names none.
  static constexpr char kDefaultTenant[] = "default";
  // Tenant names whose totals the server remembers after their connections ended; the totals of
  // later names (not named by --tenant_quota) are summed under kOtherTenants.
  static constexpr size_t kMaxRememberedTenants = 1024;
  static constexpr char kOtherTenants[] = "(other tenants)";

 private:
  friend class ServerConnection;
  Server(const Options& options, std::unique_ptr<BackingExecutor> executor, ScopedFd listener,
         std::string address, ScopedFd wake_read, ScopedFd wake_write);
  void Reap(bool all);
  // Accepts one pending connection (or refuses it: caps, out of file descriptors). Returns
  // false when the accept loop should back off from the listener for a while.
  bool AcceptOne();
  // A connection accept() returned, with its peer's address.
  struct Accepted {
    ScopedFd fd;
    sockaddr_storage peer{};
    socklen_t peer_length = sizeof(sockaddr_storage);
  };
  // Out of descriptors, with the reserve closed: accepts and refuses the clients waiting in the
  // backlog (a bounded number), each on the one descriptor freed. If descriptors come back
  // meanwhile it reopens the reserve and returns the client just accepted, to be served.
  // Accept loop only.
  std::optional<Accepted> RefuseBacklogOutOfDescriptors();
  // Serves a new connection, or refuses it past the connection caps. Accept loop only.
  void Admit(Accepted accepted);
  // Logs, at most once a second, that the accept loop backs off because of `why`.
  void LogAcceptBackOff(const char* why);
  // Sends Refused(reason) on a fresh connection without blocking, then closes it.
  void RefuseAndClose(ScopedFd fd, const std::string& reason);
  // Closes connections past their handshake deadline or stalled in a frame (accept loop).
  void EnforceDeadlines();
  // The server-wide budget of large frames being received (--max_receiving_bytes), shared
  // fairly among peers: ReserveReceiving blocks until `bytes` fit under the budget and within
  // the fair share of `peer` (the budget divided by the peers holding or waiting for some, at
  // most half of it; a peer's first frame is only held to the budget), or
  // nothing at all is reserved (one frame alone always proceeds); Cancelled once `abandon`
  // turns true (the connection is closing).
  absl::Status ReserveReceiving(const std::string& peer, uint64_t bytes,
                                const std::atomic<bool>& abandon);
  void ReleaseReceiving(const std::string& peer, uint64_t bytes);
  // The memory budget the connections of `tenant` share (null: none configured).
  std::shared_ptr<SharedQuota> TenantBudget(const std::string& tenant) const;
  // The stream threads the connections of `peer` share: half of --max_streams, within the
  // server's (kept while a connection of the peer holds it). Thread-safe.
  std::shared_ptr<StreamThreadBudget> PeerStreamThreads(const std::string& peer);
  // What a tenant's connections did, summed (finished connections are added as they end).
  struct TenantTotals {
    uint64_t commands = 0;
    uint64_t round_trips = 0;
    uint64_t launches = 0;
    uint64_t kernel_ns = 0;
    uint64_t errors = 0;
    void Add(const TenantTotals& other) {
      commands += other.commands;
      round_trips += other.round_trips;
      launches += other.launches;
      kernel_ns += other.kernel_ns;
      errors += other.errors;
    }
  };
  // Adds a connection's final totals to its tenant's and sets `*recorded` (the connection's
  // flag, guarded by mu_) in the same step, so StatsJson counts it once.
  void RecordFinishedConnection(const std::string& tenant, const TenantTotals& totals,
                                bool* recorded);

  const Options options_;
  std::unique_ptr<BackingExecutor> executor_;
  ScopedFd listener_;
  std::string address_;
  std::string unix_path_;  // removed at shutdown
  ScopedFd wake_read_, wake_write_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> commands_total_{0};
  std::atomic<uint64_t> next_client_id_{1};
  const int64_t started_ns_;

  // Closed to accept-and-refuse when out of file descriptors; taken back before any other
  // connection is accepted (accept loop only).
  ScopedFd reserve_fd_;
  std::deque<std::pair<int64_t, ScopedFd>> lingering_;  // refused, closed soon; accept loop only
  int64_t last_refusal_log_ns_ = 0;  // accept loop only
  // Times accept ran out of descriptors (or memory) and the loop backed off, and the clients
  // refused then (StatsJson; written by the accept loop only).
  std::atomic<uint64_t> accept_back_offs_{0};
  std::atomic<uint64_t> refused_out_of_descriptors_{0};
  uint64_t refusals_unlogged_ = 0;   // accept loop only

  std::mutex receiving_mu_;
  std::condition_variable receiving_cv_;
  uint64_t receiving_bytes_ ABSL_GUARDED_BY(receiving_mu_) = 0;
  struct PeerReceiving {
    uint64_t reserved = 0;  // bytes its connections hold
    int waiting = 0;        // its connections waiting for a reservation
  };
  // Peers holding or waiting for receive budget (erased when neither).
  absl::flat_hash_map<std::string, PeerReceiving> receiving_by_peer_
      ABSL_GUARDED_BY(receiving_mu_);

  // Failed authentications per peer (when a token is required).
  AuthThrottle auth_throttle_;

  // By tenant name, built from options_.tenant_quotas; read-only after construction.
  absl::flat_hash_map<std::string, std::shared_ptr<SharedQuota>> tenant_budgets_;

  std::mutex mu_;
  std::list<std::unique_ptr<ServerConnection>> connections_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, TenantTotals> finished_tenants_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> connections_per_peer_ ABSL_GUARDED_BY(mu_);
  uint64_t handshakes_evicted_ ABSL_GUARDED_BY(mu_) = 0;  // closed by --max_handshakes
  // Stream threads: all clients' (--max_streams), and each peer's within it.
  const std::shared_ptr<StreamThreadBudget> stream_threads_;
  absl::flat_hash_map<std::string, std::weak_ptr<StreamThreadBudget>> peer_stream_threads_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace vgpu

#endif  // VGPU_SERVER_SERVER_H_
