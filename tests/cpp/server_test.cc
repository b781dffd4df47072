// `vgpu server` with real socket clients in one process: data round trips, tenant isolation
// (a forged address is an error, never another tenant's data), quota, reclaiming a closed
// client's memory, tokens, malformed frames, and a dead server turning calls into errors.
#include "plugin/server/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "plugin/client/device_client.h"
#include "plugin/client/notification_hub.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/transport/reconnecting_transport.h"
#include "plugin/transport/socket_transport.h"
#include "notification_log.h"
#include "test_commands.h"

namespace vgpu {
namespace {

using namespace vgpu_test;  // NOLINT: test_commands.h's builders, NotificationLog

// A server on a fresh Unix socket, serving on its own thread.
class RunningServer {
 public:
  // `before_serving` runs on the created server before its accept loop starts.
  explicit RunningServer(Server::Options options,
                         const std::function<void(Server&)>& before_serving = nullptr) {
    static std::atomic<int> counter{0};
    options.listen = absl::StrCat("unix:///tmp/vgpu-test-", ::getpid(), "-", counter++, ".sock");
    options.compute_threads = 2;
    auto server = Server::Create(options);
    EXPECT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    if (before_serving) before_serving(*server_);
    thread_ = std::thread([this] { (void)server_->Serve(); });
  }
  ~RunningServer() { Shutdown(); }
  void Shutdown() {
    if (server_ == nullptr) return;
    server_->Stop();
    thread_.join();
    server_.reset();
  }
  Server& server() { return *server_; }
  const std::string& address() const { return address_ = server_->address(), address_; }

 private:
  std::unique_ptr<Server> server_;
  std::thread thread_;
  mutable std::string address_;
};

Server::Options SmallServer() {
  Server::Options options;
  options.memory_limit = 16 << 20;
  return options;
}

struct Client {
  NotificationLog sink;
  std::unique_ptr<SocketTransport> transport;
  uint64_t next_stream = 100;

  // Connects within 2 s; `shm_bytes` as SocketTransport::Connect takes it (-1: its default).
  absl::Status Connect(const std::string& address, const std::string& token = "",
                       int64_t shm_bytes = -1) {
    auto t = SocketTransport::Connect(address, token, &sink, nullptr, 2000, 0, shm_bytes);
    if (!t.ok()) return t.status();
    transport = *std::move(t);
    return absl::OkStatus();
  }
  uint64_t Allocate(uint64_t size) {
    Reply r = transport->Call(MakeCommand(CommandKind::kAllocate, 0, size));
    EXPECT_TRUE(r.status.ok()) << r.status;
    return r.value;
  }
  uint64_t CreateStream() {
    const uint64_t stream = next_stream++;
    EXPECT_TRUE(transport->Call(MakeCommand(CommandKind::kCreateStream, stream)).status.ok());
    return stream;
  }
  absl::Status Sync(uint64_t stream) {
    return transport->Call(MakeCommand(CommandKind::kSynchronizeStream, stream)).status;
  }
  absl::Status Write(uint64_t stream, uint64_t dst, const std::vector<uint8_t>& data) {
    return transport->Post(
        CopyIn(CommandKind::kMemcpyHtoD, stream, dst, data.data(), data.size()));
  }
  absl::Status Read(uint64_t stream, uint64_t src, std::vector<uint8_t>* data) {
    return transport->Post(
        CopyOut(CommandKind::kMemcpyDtoH, stream, src, data->data(), data->size()));
  }
  // kMemcpyNow of `data->size()` bytes from `src`: the data rides on the reply.
  absl::Status ReadNow(uint64_t src, std::vector<uint8_t>* data) {
    return transport->Call(CopyOut(CommandKind::kMemcpyNow, 0, src, data->data(), data->size()))
        .status;
  }
};

TEST(Server, CopiesRoundTripThroughTheServer) {
  RunningServer server(SmallServer());
  Client client;
  ASSERT_TRUE(client.Connect(server.address()).ok());
  uint64_t stream = client.CreateStream();
  uint64_t address = client.Allocate(1 << 20);
  std::vector<uint8_t> data(1 << 20), back(1 << 20, 0);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE(client.Write(stream, address, data).ok());
  ASSERT_TRUE(client.Read(stream, address, &back).ok());
  ASSERT_TRUE(client.Sync(stream).ok());
  EXPECT_EQ(back, data);
  // Synchronous copy back (data rides on the reply).
  std::vector<uint8_t> now(4096);
  ASSERT_TRUE(client.ReadNow(address, &now).ok());
  EXPECT_TRUE(std::equal(now.begin(), now.end(), data.begin()));
}

// Writes `data` to the device and reads it back asynchronously and with kMemcpyNow; both
// copies back must be byte-identical to what was written.
void ExpectCopiesRoundTrip(Client& client, size_t bytes) {
  uint64_t stream = client.CreateStream();
  uint64_t address = client.Allocate(bytes);
  std::vector<uint8_t> data(bytes), back(bytes, 0), now(bytes, 0);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>((i * 131) ^ (i >> 9));
  ASSERT_TRUE(client.Write(stream, address, data).ok());
  ASSERT_TRUE(client.Read(stream, address, &back).ok());
  ASSERT_TRUE(client.Sync(stream).ok());
  EXPECT_TRUE(back == data) << bytes << " bytes";
  ASSERT_TRUE(client.ReadNow(address, &now).ok());
  EXPECT_TRUE(now == data) << bytes << " bytes";
  // A synchronous host-to-device copy, then read back again.
  data = std::vector<uint8_t>(data.rbegin(), data.rend());
  ASSERT_TRUE(client.transport
                  ->Call(CopyIn(CommandKind::kMemcpyNow, 0, address, data.data(), data.size()))
                  .status.ok());
  ASSERT_TRUE(client.Read(stream, address, &back).ok());
  ASSERT_TRUE(client.Sync(stream).ok());
  EXPECT_TRUE(back == data) << bytes << " bytes";
}

Server::Options ShmServer() {
  Server::Options options;
  options.memory_limit = 64 << 20;
  return options;
}

// Connects `client` to `address` asking for a shared-memory region of `requested` bytes, and
// asserts the connection and the region it got: `granted` bytes (0: copies take the socket).
void ConnectExpectingRegion(Client& client, const std::string& address, int64_t requested,
                            uint64_t granted) {
  const absl::Status connected = client.Connect(address, "", requested);
  ASSERT_TRUE(connected.ok()) << connected;
  ASSERT_EQ(client.transport->shm_bytes(), granted);
}

TEST(ServerSharedMemory, CopiesThroughTheRegionAreByteIdentical) {
  RunningServer server(ShmServer());
  Client client;
  ASSERT_NO_FATAL_FAILURE(ConnectExpectingRegion(client, server.address(), 16 << 20, 16u << 20));
  for (size_t bytes : {size_t{1000}, size_t{64 << 10}, size_t{(1 << 20) + 3},
                       size_t{(20 << 20) + 5}}) {  // the last is chunked and exceeds the region
    ExpectCopiesRoundTrip(client, bytes);
  }
  EXPECT_GT(client.transport->shm_copies(), 0u);
}

TEST(ServerSharedMemory, CopiesThatDoNotFitTheRegionInFlightTakeTheSocketAndKeepTheirOrder) {
  RunningServer server(ShmServer());
  Client client;
  ASSERT_NO_FATAL_FAILURE(ConnectExpectingRegion(client, server.address(), 1 << 20, 1u << 20));
  const uint64_t stream = client.CreateStream();
  constexpr size_t kCopy = 384 << 10;  // two fit the region at once
  const uint64_t address = client.Allocate(kCopy);
  std::vector<std::vector<uint8_t>> writes(12, std::vector<uint8_t>(kCopy));
  std::vector<std::vector<uint8_t>> reads(12, std::vector<uint8_t>(kCopy, 0));
  for (size_t i = 0; i < writes.size(); ++i) {
    for (size_t j = 0; j < kCopy; ++j) writes[i][j] = static_cast<uint8_t>(i * 31 + j * 7);
    ASSERT_TRUE(client.Write(stream, address, writes[i]).ok());
    ASSERT_TRUE(client.Read(stream, address, &reads[i]).ok());  // after write i, before i + 1
  }
  ASSERT_TRUE(client.Sync(stream).ok());
  for (size_t i = 0; i < writes.size(); ++i) EXPECT_TRUE(reads[i] == writes[i]) << i;
  EXPECT_GT(client.transport->shm_copies(), 0u);
}

TEST(ServerSharedMemory, WithoutARegionTheSocketPathGivesTheSameBytes) {
  RunningServer server(ShmServer());
  Client client;
  ASSERT_NO_FATAL_FAILURE(ConnectExpectingRegion(client, server.address(), 0, 0u));
  ExpectCopiesRoundTrip(client, (3 << 20) + 1);
  EXPECT_EQ(client.transport->shm_copies(), 0u);
}

TEST(ServerSharedMemory, AServerThatDeclinesTheRegionLeavesTheClientOnTheSocket) {
  Server::Options options = ShmServer();
  options.shared_memory = false;
  RunningServer server(options);
  Client client;
  ASSERT_TRUE(client.Connect(server.address()).ok());
  EXPECT_EQ(client.transport->shm_bytes(), 0u);
  ExpectCopiesRoundTrip(client, (2 << 20) + 7);
}

TEST(ServerSharedMemory, ARegionOverHalfTheStagingBudgetIsDeclined) {
  Server::Options options = ShmServer();
  options.max_staging_bytes = 16 << 20;  // at most 8 MiB of region
  RunningServer server(options);
  Client client;
  ASSERT_NO_FATAL_FAILURE(ConnectExpectingRegion(client, server.address(), 16 << 20, 0u));
  ExpectCopiesRoundTrip(client, 1 << 20);
  // The region counts against the staging budget while the connection lasts.
  Client small;
  ASSERT_NO_FATAL_FAILURE(ConnectExpectingRegion(small, server.address(), 4 << 20, 4u << 20));
  EXPECT_NE(server.server().StatsJson().find("\"shm_bytes\": 4194304"), std::string::npos);
}

TEST(Server, NotificationsArriveAfterTheWorkBeforeThem) {
  RunningServer server(SmallServer());
  Client client;
  ASSERT_TRUE(client.Connect(server.address()).ok());
  uint64_t stream = client.CreateStream();
  ASSERT_TRUE(client.transport->Post(NotifyCommand(stream, 5)).ok());
  EXPECT_TRUE(client.sink.WaitFor(5).ok());
}

// A device client over a real connection: once the notification of the last work on every
// stream came back OK, synchronisations are answered without a round trip, and the read-backs
// (through the shared region and through the socket) are in place; a failed stream still gets
// its synchronisation from the server, with the error.
TEST(Server, SettledSynchronisationsOfARemoteDeviceCostNoRoundTrip) {
  RunningServer server(SmallServer());
  NotificationHub hub;
  auto transport = SocketTransport::Connect(server.address(), "", &hub, nullptr, 2000);
  ASSERT_TRUE(transport.ok()) << transport.status();
  DeviceClient client(0, 0, transport->get(), &hub);
  ASSERT_TRUE(client.tracks_completion());
  auto stream = client.CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (uint64_t size : {uint64_t{1} << 10, uint64_t{256} << 10}) {  // socket, shared region
    absl::StatusOr<uint64_t> buffer = client.Allocate(size);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    std::vector<uint8_t> in(size), out(size, 0);
    for (size_t i = 0; i < size; ++i) in[i] = static_cast<uint8_t>(i * 13 + size);
    ASSERT_TRUE(client.CopyHostToDevice(**stream, *buffer, in.data(), size).ok());
    ASSERT_TRUE(client.CopyDeviceToHost(**stream, out.data(), *buffer, size).ok());
    std::shared_ptr<ClientEvent> event = client.CreateEvent();
    ASSERT_TRUE(client.RecordEvent(**stream, event).ok());
    ASSERT_TRUE(event->Wait().ok());
    const uint64_t calls = (*transport)->calls();
    EXPECT_TRUE(client.SynchronizeDevice().ok());
    EXPECT_TRUE(client.SynchronizeStream(**stream).ok());
    EXPECT_EQ((*transport)->calls(), calls) << size;
    EXPECT_EQ(out, in) << size;
    ASSERT_TRUE(client.DestroyEvent(*event).ok());
    ASSERT_TRUE(client.Free(*buffer, size).ok());
  }
  EXPECT_EQ(client.counters().local_synchronizations(), 4u);

  ASSERT_TRUE(client.dnn().Launch(**stream, static_cast<KernelId>(999), {}, {}, {}).ok());
  std::shared_ptr<ClientEvent> failed = client.CreateEvent();
  ASSERT_TRUE(client.RecordEvent(**stream, failed).ok());
  EXPECT_FALSE(failed->Wait().ok());
  const uint64_t calls = (*transport)->calls();
  absl::Status status = client.SynchronizeDevice();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ((*transport)->calls(), calls + 1);
  ASSERT_TRUE(client.DestroyStream(*std::move(stream)).ok());
}

TEST(Server, AForgedAddressIsAnErrorNeverAnotherTenantsData) {
  RunningServer server(SmallServer());
  Client owner, intruder;
  ASSERT_TRUE(owner.Connect(server.address()).ok());
  ASSERT_TRUE(intruder.Connect(server.address()).ok());
  uint64_t owner_stream = owner.CreateStream();
  uint64_t secret = owner.Allocate(64);
  ASSERT_TRUE(owner.Write(owner_stream, secret, std::vector<uint8_t>(64, 0x5A)).ok());
  ASSERT_TRUE(owner.Sync(owner_stream).ok());

  uint64_t stream = intruder.CreateStream();
  std::vector<uint8_t> stolen(64, 0);
  ASSERT_TRUE(intruder.Read(stream, secret, &stolen).ok());  // posted: fails on the server
  absl::Status status = intruder.Sync(stream);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("memcpy_dtoh"), std::string::npos) << status;
  EXPECT_EQ(stolen, std::vector<uint8_t>(64, 0));
  // Overwriting it fails too, and the owner's data is intact.
  ASSERT_TRUE(intruder.Write(stream, secret, std::vector<uint8_t>(64, 1)).ok());
  EXPECT_FALSE(intruder.Sync(stream).ok());
  std::vector<uint8_t> mine(64, 0);
  ASSERT_TRUE(owner.Read(owner_stream, secret, &mine).ok());
  ASSERT_TRUE(owner.Sync(owner_stream).ok());
  EXPECT_EQ(mine, std::vector<uint8_t>(64, 0x5A));
  // Freeing it is refused.
  EXPECT_FALSE(intruder.transport->Call(FreeCommand(secret)).status.ok());
}

TEST(Server, AllocationsBeyondTheClientQuotaAreResourceExhausted) {
  Server::Options options = SmallServer();
  options.client_quota = 1 << 20;
  RunningServer server(options);
  Client client;
  ASSERT_TRUE(client.Connect(server.address()).ok());
  client.Allocate(768 << 10);
  const Command c = MakeCommand(CommandKind::kAllocate, 0, 512 << 10);
  Reply reply = client.transport->Call(c);
  EXPECT_EQ(reply.status.code(), absl::StatusCode::kResourceExhausted) << reply.status;
  // Another client has its own quota.
  Client other;
  ASSERT_TRUE(other.Connect(server.address()).ok());
  EXPECT_TRUE(other.transport->Call(c).status.ok());
}

// Issue 25, class 6: an observer holding the tenant token sees the aggregates and its own
// tenant only; the operator token sees everything; a server without tokens shows everything.
TEST(Server, StatsShowATenantViewerOnlyItsOwnTenantAndTheOperatorEverything) {
  Server::Options options = SmallServer();
  options.token = "tenant-token";
  options.operator_token = "operator-token";
  options.tenant_quotas = {{"team-b", 1 << 20}};
  RunningServer server(options);
  NotificationLog sink_a, sink_b;
  auto a = SocketTransport::Connect(server.address(), "tenant-token", &sink_a, nullptr, 2000, 0,
                                    0, "team-a");
  auto b = SocketTransport::Connect(server.address(), "tenant-token", &sink_b, nullptr, 2000, 0,
                                    0, "team-b");
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string own_peer = absl::StrCat("uid ", ::getuid());
  const StatsViewer tenant = server.server().ViewerFor("tenant-token", "team-a", own_peer);
  EXPECT_EQ(tenant.scope, StatsViewer::Scope::kTenant);
  const std::string seen = server.server().StatsJson(tenant);
  EXPECT_NE(seen.find("\"view\": \"tenant\""), std::string::npos) << seen;
  EXPECT_NE(seen.find("\"name\": \"team-a\""), std::string::npos) << seen;
  EXPECT_NE(seen.find("\"tenant\": \"team-a\""), std::string::npos) << seen;  // its row
  for (const char* hidden : {"team-b", "peer", "uid", "pid"}) {
    EXPECT_EQ(seen.find(hidden), std::string::npos) << hidden << " in " << seen;
  }
  // Another peer naming team-a gets team-a's totals but no row of its connections.
  const std::string elsewhere =
      server.server().StatsJson(StatsViewer::Tenant("team-a", "uid 4294967294"));
  EXPECT_NE(elsewhere.find("\"name\": \"team-a\""), std::string::npos) << elsewhere;
  EXPECT_NE(elsewhere.find("\"clients\": []"), std::string::npos) << elsewhere;
  // The operator sees both tenants and every peer.
  const StatsViewer operator_view = server.server().ViewerFor("operator-token", "", own_peer);
  EXPECT_EQ(operator_view.scope, StatsViewer::Scope::kFull);
  const std::string all = server.server().StatsJson(operator_view);
  EXPECT_NE(all.find("team-b"), std::string::npos) << all;
  EXPECT_NE(all.find("\"peer\": \"unix socket, uid"), std::string::npos) << all;

  RunningServer open_server(SmallServer());  // no token at all: a single-user setup
  EXPECT_EQ(open_server.server().ViewerFor("", "team-a", own_peer).scope,
            StatsViewer::Scope::kFull);
}

uint64_t ServerBytesInUse(Server& server) {
  std::string json = server.StatsJson();
  size_t devices = json.find("\"devices\"");
  size_t at = json.find("\"bytes_in_use\": ", devices);
  return std::strtoull(json.c_str() + at + 16, nullptr, 10);
}

TEST(Server, AClosedClientsMemoryIsReclaimed) {
  RunningServer server(SmallServer());
  Client client;
  ASSERT_TRUE(client.Connect(server.address()).ok());
  client.Allocate(4 << 20);
  EXPECT_GE(ServerBytesInUse(server.server()), 4u << 20);
  client.transport.reset();  // the connection closes, as when a process dies
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (ServerBytesInUse(server.server()) != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();  // polling a condition, bounded
  }
  EXPECT_EQ(ServerBytesInUse(server.server()), 0u);
}

TEST(Server, AWrongTokenIsRefused) {
  Server::Options options = SmallServer();
  options.token = "right";
  RunningServer server(options);
  Client client;
  absl::Status status = client.Connect(server.address(), "wrong");
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
  EXPECT_NE(status.message().find("token"), std::string::npos);
  EXPECT_TRUE(client.Connect(server.address(), "right").ok());
}

TEST(Server, MalformedFramesCloseOnlyThatConnection) {
  RunningServer server(SmallServer());
  Client good;
  ASSERT_TRUE(good.Connect(server.address()).ok());
  auto address = ParseSocketAddress(server.address());
  for (int variant = 0; variant < 3; ++variant) {
    auto fd = ConnectSocket(*address);
    ASSERT_TRUE(fd.ok());
    std::vector<uint8_t> junk(100, 0xAB);
    if (variant == 1) {  // a header claiming an oversized payload
      wire::EncodeHeader({wire::MessageType::kHello, 0, 0xFFFFFFFF}, junk.data());
    } else if (variant == 2) {  // a valid hello, then a truncated command
      std::vector<uint8_t> hello;
      wire::EncodeHello({}, &hello);
      ASSERT_TRUE(WriteFrame(fd->get(), wire::MessageType::kHello, 0,
                             {iovec{hello.data(), hello.size()}}).ok());
      wire::EncodeHeader({wire::MessageType::kCommand, 1, 10}, junk.data());
      junk.resize(wire::kHeaderBytes + 10);
    }
    ASSERT_TRUE(WriteAll(fd->get(), {iovec{junk.data(), junk.size()}}).ok());
    char byte;
    // The server closes the connection (after a Refused/Welcome frame at most).
    while (::recv(fd->get(), &byte, 1, 0) > 0) {
    }
  }
  EXPECT_NE(good.Allocate(4096), 0u);  // the server still serves the others
}

TEST(Server, ADeadServerTurnsCallsIntoErrorsQuickly) {
  RunningServer server(SmallServer());
  Client client;
  ASSERT_TRUE(client.Connect(server.address()).ok());
  uint64_t stream = client.CreateStream();
  const Command notify = NotifyCommand(stream, 9);
  const std::string address = server.address();
  server.Shutdown();
  const auto start = std::chrono::steady_clock::now();
  Reply reply = client.transport->Call(MakeCommand(CommandKind::kAllocate, 0, 16));
  EXPECT_EQ(reply.status.code(), absl::StatusCode::kUnavailable) << reply.status;
  EXPECT_NE(reply.status.message().find("unreachable"), std::string::npos) << reply.status;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_FALSE(client.transport->Post(notify).ok());
  Client late;
  absl::Status refused = late.Connect(address);
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
}


TEST(Server, AConnectionWithoutHelloIsClosedAtTheHandshakeDeadline) {
  Server::Options options = SmallServer();
  options.handshake_timeout_ms = 200;
  RunningServer server(options);
  auto address = ParseSocketAddress(server.address());
  auto silent = ConnectSocket(*address);
  ASSERT_TRUE(silent.ok());
  timeval bound{30, 0};  // never hang the test: the deadline closes it long before
  ::setsockopt(silent->get(), SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
  char byte;
  EXPECT_EQ(::recv(silent->get(), &byte, 1, 0), 0);  // end of stream, not a timeout
  Client late;  // a client that says Hello at once is served
  ASSERT_TRUE(late.Connect(server.address()).ok());
  EXPECT_NE(late.Allocate(4096), 0u);
}

TEST(Server, ConnectionsPastThePerPeerCapAreRefusedWithTheFlagNamed) {
  Server::Options options = SmallServer();
  options.max_connections_per_peer = 2;
  RunningServer server(options);
  Client first, second, third;
  ASSERT_TRUE(first.Connect(server.address()).ok());
  ASSERT_TRUE(second.Connect(server.address()).ok());
  absl::Status refused = third.Connect(server.address());
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("--max_connections_per_peer"), std::string::npos) << refused;
  EXPECT_NE(first.Allocate(4096), 0u);  // those connected are unaffected
}

// Lowers this process's descriptor limit and opens descriptors up to it, leaving `free` of
// them unused; restores both when destroyed.
class ScarceDescriptors {
 public:
  explicit ScarceDescriptors(int free) {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    int highest = 0;
    for (int fd = 0; fd < 4096; ++fd) {
      if (::fcntl(fd, F_GETFD) != -1) highest = fd;
    }
    rlimit scarce = saved_;
    scarce.rlim_cur = highest + 1 + 8;
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &scarce), 0) << std::strerror(errno);
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers_.emplace_back(fd);
    EXPECT_EQ(errno, EMFILE);
    EXPECT_GE(fillers_.size(), static_cast<size_t>(free));
    fillers_.resize(fillers_.size() - free);
  }
  ~ScarceDescriptors() {
    fillers_.clear();
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }

 private:
  rlimit saved_{};
  std::vector<ScopedFd> fillers_;
};

// A Unix-socket client's socket, made while descriptors are plenty (connecting needs none).
ScopedFd UnconnectedUnixSocket() {
  ScopedFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  timeval bound{10, 0};  // never hang the test
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
  return fd;
}

// Connects `fd` to the Unix-socket server at `address` (into its backlog: no accept needed).
void ConnectUnix(int fd, const std::string& address) {
  auto parsed = ParseSocketAddress(address);
  EXPECT_TRUE(parsed.ok());
  sockaddr_un where{};
  where.sun_family = AF_UNIX;
  std::strncpy(where.sun_path, parsed->path.c_str(), sizeof(where.sun_path) - 1);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&where), sizeof(where)), 0)
      << std::strerror(errno);
}

// All `fd` reads until end of stream (or the socket's receive timeout).
std::string ReadToEnd(int fd) {
  std::string received;
  char chunk[256];
  for (ssize_t n; (n = ::recv(fd, chunk, sizeof(chunk), 0)) > 0;) received.append(chunk, n);
  return received;
}

std::string ConnectAndReadToEnd(int fd, const std::string& address) {
  ConnectUnix(fd, address);
  return ReadToEnd(fd);
}

// The number after "key": in a stats JSON object (-1 if absent).
int64_t StatNumber(const std::string& json, const std::string& key) {
  const std::string quoted = absl::StrCat("\"", key, "\": ");
  const size_t at = json.find(quoted);
  if (at == std::string::npos) return -1;
  return std::strtoll(json.c_str() + at + quoted.size(), nullptr, 10);
}

TEST(Server, OutOfDescriptorsItStillRefusesClientsAfterAnotherThreadTookItsReserve) {
  // The reserve gone, as when another thread opened a file in the moment the accept loop had
  // it closed; the descriptor comes back free. The server must take it back as its reserve
  // rather than hand it to a client, or none of the clients after could be told anything.
  RunningServer server(SmallServer(), [](Server& s) { s.DropReserveForTesting(); });
  ScopedFd first = UnconnectedUnixSocket(), second = UnconnectedUnixSocket();
  {
    ScarceDescriptors scarce(/*free=*/1);
    EXPECT_NE(ConnectAndReadToEnd(first.get(), server.address()).find("out of file descriptors"),
              std::string::npos);
    EXPECT_NE(ConnectAndReadToEnd(second.get(), server.address()).find("out of file descriptors"),
              std::string::npos);
  }
  Client later;  // descriptors free again: served
  ASSERT_TRUE(later.Connect(server.address()).ok());
  EXPECT_NE(later.Allocate(4096), 0u);
}

TEST(Server, OutOfDescriptorsItRefusesTheWholeBacklogWithoutABackOffPerClient) {
  RunningServer server(SmallServer());
  constexpr int kWaiting = 24;
  std::vector<ScopedFd> waiting;
  for (int i = 0; i < kWaiting; ++i) waiting.push_back(UnconnectedUnixSocket());
  {
    ScarceDescriptors scarce(/*free=*/0);  // the server holds its reserve; nothing else is free
    for (const ScopedFd& fd : waiting) ConnectUnix(fd.get(), server.address());
    for (const ScopedFd& fd : waiting) {
      EXPECT_NE(ReadToEnd(fd.get()).find("out of file descriptors"), std::string::npos);
    }
  }
  const std::string stats = server.server().StatsJson();
  EXPECT_EQ(StatNumber(stats, "refused_out_of_descriptors"), kWaiting) << stats;
  // Refused in a round or a few (the clients connect while the server runs), not one per
  // 100 ms back-off: 24 back-offs would keep the last client waiting 2.4 s.
  const int64_t back_offs = StatNumber(stats, "accept_back_offs");
  EXPECT_GE(back_offs, 1) << stats;
  EXPECT_LE(back_offs, kWaiting / 2) << stats;
  Client later;  // descriptors free again: served
  ASSERT_TRUE(later.Connect(server.address()).ok());
  EXPECT_NE(later.Allocate(4096), 0u);
}

TEST(Server, StreamsOfAllClientsTogetherAreBoundedByMaxStreams) {
  // Each stream is a server thread: many connections of one user could otherwise start tens of
  // thousands of them (64 connections x 256 streams) and exhaust the host's threads. One peer
  // (here: this process's uid) may have half of them.
  Server::Options options = SmallServer();
  options.max_streams = 6;
  RunningServer server(options);
  Client first, second;
  ASSERT_TRUE(first.Connect(server.address()).ok());
  ASSERT_TRUE(second.Connect(server.address()).ok());
  auto create = [](Client& client, uint64_t stream) {
    return client.transport->Call(MakeCommand(CommandKind::kCreateStream, stream)).status;
  };
  ASSERT_TRUE(create(first, 1).ok());
  ASSERT_TRUE(create(first, 2).ok());
  ASSERT_TRUE(create(second, 1).ok());
  absl::Status refused = create(second, 2);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("half of --max_streams=6"), std::string::npos) << refused;
  // A stream destroyed gives its thread back, to any client.
  ASSERT_TRUE(first.transport->Call(MakeCommand(CommandKind::kDestroyStream, 2)).status.ok());
  EXPECT_TRUE(create(second, 2).ok());
  // And a client that leaves gives back all of its streams.
  first.transport.reset();
  for (int attempt = 0; attempt < 200 && !create(second, 3).ok(); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // until the server reaps it
  }
  EXPECT_TRUE(second.Sync(3).ok());
}

sockaddr_storage IpAddress(const char* text) {
  sockaddr_storage address{};
  if (std::strchr(text, ':') != nullptr) {
    auto& v6 = reinterpret_cast<sockaddr_in6&>(address);
    v6.sin6_family = AF_INET6;
    EXPECT_EQ(::inet_pton(AF_INET6, text, &v6.sin6_addr), 1) << text;
  } else {
    auto& v4 = reinterpret_cast<sockaddr_in&>(address);
    v4.sin_family = AF_INET;
    EXPECT_EQ(::inet_pton(AF_INET, text, &v4.sin_addr), 1) << text;
  }
  return address;
}

TEST(StreamThreadBudget, ATakeIsRefusedByTheFirstFullBudgetAndTakesNothing) {
  auto server = std::make_shared<StreamThreadBudget>(3, "server");
  StreamThreadBudget peer_a(2, "peer a", server), peer_b(2, "peer b", server);
  EXPECT_EQ(peer_a.TryTake(), nullptr);
  EXPECT_EQ(peer_a.TryTake(), nullptr);
  EXPECT_EQ(peer_a.TryTake(), &peer_a);   // the peer's half
  EXPECT_EQ(peer_b.TryTake(), nullptr);
  EXPECT_EQ(peer_b.TryTake(), server.get());  // the server's whole
  EXPECT_EQ(peer_b.TryTake(), server.get());  // a refused take took nothing from peer b
  peer_a.Give();
  EXPECT_EQ(peer_b.TryTake(), nullptr);
  EXPECT_EQ(server->TryTake(), server.get());
}

TEST(Server, APeerThatHoldsManyAddressesCountsAsOnePeer) {
  // The per-peer limits are per key: a local user binding 127.0.0.2, 127.0.0.3, ... or a host
  // with an IPv6 /64 must not multiply them.
  EXPECT_EQ(IpPeerKey(IpAddress("127.0.0.1")), "loopback");
  EXPECT_EQ(IpPeerKey(IpAddress("127.45.6.7")), "loopback");
  EXPECT_EQ(IpPeerKey(IpAddress("::1")), "loopback");
  EXPECT_EQ(IpPeerKey(IpAddress("::ffff:127.0.0.9")), "loopback");
  EXPECT_EQ(IpPeerKey(IpAddress("2001:db8:1:2:3:4:5:6")), "2001:db8:1:2::/64");
  EXPECT_EQ(IpPeerKey(IpAddress("2001:db8:1:2:ffff:ffff:ffff:ffff")), "2001:db8:1:2::/64");
  EXPECT_EQ(IpPeerKey(IpAddress("2001:db8:1:3::1")), "2001:db8:1:3::/64");
  // Distinct IPv4 hosts stay distinct, mapped or not.
  EXPECT_EQ(IpPeerKey(IpAddress("10.0.0.1")), "10.0.0.1");
  EXPECT_EQ(IpPeerKey(IpAddress("::ffff:10.0.0.1")), "10.0.0.1");
  EXPECT_EQ(IpPeerKey(IpAddress("10.0.0.2")), "10.0.0.2");
}

TEST(Server, ManyReadsAndSynchronisationsPastTheBudgetsComplete) {
  Server::Options options = SmallServer();
  options.max_staging_bytes = 64 << 10;  // backpressure after a couple of reads
  RunningServer server(options);
  Client client;
  ASSERT_TRUE(client.Connect(server.address()).ok());
  uint64_t stream = client.CreateStream();
  uint64_t address = client.Allocate(32 << 10);
  std::vector<uint8_t> data(32 << 10);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13);
  ASSERT_TRUE(client.Write(stream, address, data).ok());
  std::vector<std::vector<uint8_t>> reads(50, std::vector<uint8_t>(data.size()));
  for (auto& read : reads) ASSERT_TRUE(client.Read(stream, address, &read).ok());
  // More blocking calls than a connection runs at once, from several threads.
  std::vector<std::thread> syncs;
  for (int t = 0; t < 4; ++t) {
    syncs.emplace_back([&] {
      for (int i = 0; i < Server::kMaxBlockingCallsPerConnection; ++i) {
        EXPECT_TRUE(client.Sync(stream).ok());
      }
    });
  }
  for (std::thread& t : syncs) t.join();
  for (const auto& read : reads) EXPECT_EQ(read, data);
}

// ---- A wedged server and VGPU_TIMEOUT (issue 10, finding 10) ----

// A server that completes the handshake and then answers only what `answer` accepts (the
// others are read and ignored, as by a wedged server): a stand-in for a stopped process.
class SilentServer {
 public:
  explicit SilentServer(std::function<bool(const Command&)> answer) : answer_(std::move(answer)) {
    static std::atomic<int> counter{0};
    address_ = absl::StrCat("unix:///tmp/vgpu-silent-", ::getpid(), "-", counter++, ".sock");
    absl::StatusOr<SocketAddress> parsed = ParseSocketAddress(address_);
    EXPECT_TRUE(parsed.ok());
    uint16_t port = 0;
    absl::StatusOr<ScopedFd> listener = ListenSocket(*parsed, &port);
    EXPECT_TRUE(listener.ok()) << listener.status();
    listener_ = *std::move(listener);
    path_ = parsed->path;
    thread_ = std::thread([this] { Serve(); });
  }
  ~SilentServer() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (client_ >= 0) ::shutdown(client_, SHUT_RDWR);
    }
    thread_.join();
    ::unlink(path_.c_str());
  }
  const std::string& address() const { return address_; }
  int answered() const { return answered_.load(); }
  int ignored() const { return ignored_.load(); }

 private:
  void Serve() {
    int fd = ::accept(listener_.get(), nullptr, nullptr);
    if (fd < 0) return;
    ScopedFd connection(fd);
    {
      std::lock_guard<std::mutex> lock(mu_);
      client_ = fd;
    }
    FrameReader reader(fd);
    absl::StatusOr<wire::FrameHeader> hello = reader.ReadHeader();
    if (!hello.ok() || !reader.ReadExact(nullptr, hello->payload_length).ok()) return;
    std::vector<uint8_t> welcome;
    wire::EncodeWelcome({1, 16 << 20, 0}, &welcome);
    (void)WriteFrame(fd, wire::MessageType::kWelcome, 0, {iovec{welcome.data(), welcome.size()}});
    for (;;) {
      absl::StatusOr<wire::FrameHeader> header = reader.ReadHeader();
      if (!header.ok()) return;
      auto frame = std::make_shared<std::vector<uint8_t>>(header->payload_length);
      if (!reader.ReadExact(frame->data(), frame->size()).ok()) return;
      if (header->type == wire::MessageType::kShmAttach) {  // declined: the socket path only
        Reply declined;
        declined.status = absl::FailedPreconditionError("no shared memory here");
        std::vector<uint8_t> payload;
        wire::EncodeReply(declined, &payload);
        (void)WriteFrame(fd, wire::MessageType::kReply, header->sequence,
                         {iovec{payload.data(), payload.size()}});
        continue;
      }
      if (header->type == wire::MessageType::kCommandBatch) {
        // Posted commands only (no replies): each is ignored like a lone posted command.
        absl::StatusOr<std::vector<wire::BatchEntry>> entries = wire::SplitBatch(*frame);
        if (!entries.ok()) return;
        ignored_ += static_cast<int>(entries->size());
        continue;
      }
      absl::StatusOr<wire::DecodedCommand> decoded = wire::DecodeCommand(frame);
      if (!decoded.ok()) return;
      if (!answer_(decoded->command)) {
        ++ignored_;
        continue;
      }
      ++answered_;
      Reply reply;
      std::vector<uint8_t> payload;
      wire::EncodeReply(reply, &payload);
      (void)WriteFrame(fd, wire::MessageType::kReply, header->sequence,
                       {iovec{payload.data(), payload.size()}});
    }
  }

  std::function<bool(const Command&)> answer_;
  std::string address_;
  std::string path_;
  ScopedFd listener_;
  std::mutex mu_;
  int client_ = -1;
  std::atomic<int> answered_{0};
  std::atomic<int> ignored_{0};
  std::thread thread_;
};

TEST(ServerTimeout, ACallToASilentServerFailsWithDeadlineExceededNamingServerAndVariable) {
  SilentServer server([](const Command&) { return false; });
  NotificationLog sink;
  auto transport = SocketTransport::Connect(server.address(), "", &sink, nullptr, 2000,
                                            /*silence_timeout_ms=*/300);
  ASSERT_TRUE(transport.ok()) << transport.status();
  const Command notify = NotifyCommand(1, 77);
  ASSERT_TRUE((*transport)->Post(notify).ok());
  const auto start = std::chrono::steady_clock::now();
  Reply reply = (*transport)->Call(MakeCommand(CommandKind::kSynchronizeDevice));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(reply.status.code(), absl::StatusCode::kDeadlineExceeded) << reply.status;
  EXPECT_NE(reply.status.message().find(server.address()), std::string::npos) << reply.status;
  EXPECT_NE(reply.status.message().find("VGPU_TIMEOUT"), std::string::npos) << reply.status;
  EXPECT_GE(waited, std::chrono::milliseconds(300));  // never before the deadline
  EXPECT_LT(waited, std::chrono::seconds(10));        // generous: the point is not hanging
  EXPECT_GE((*transport)->probes(), 1u);               // it asked for a sign of life first
  // The pending notification completes with the same error; later work fails at once.
  EXPECT_EQ(sink.WaitFor(77).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ((*transport)->Post(notify).code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(ServerTimeout, AServerThatAnswersProbesIsNotTimedOutWhileAWaitLastsLonger) {
  // The "long kernel": the synchronisation is never answered, but the server is alive (it
  // answers the keep-alive probes), so the wait outlives several deadlines.
  SilentServer server([](const Command& c) { return c.kind == CommandKind::kMemoryInfo; });
  NotificationLog sink;
  auto transport = SocketTransport::Connect(server.address(), "", &sink, nullptr, 2000,
                                            /*silence_timeout_ms=*/200);
  ASSERT_TRUE(transport.ok()) << transport.status();
  std::atomic<bool> returned{false};
  absl::Status status;
  std::thread waiter([&] {
    status = (*transport)->Call(MakeCommand(CommandKind::kSynchronizeDevice)).status;
    returned = true;
  });
  // Wait until the server has answered probes over more than three deadlines.
  for (int i = 0; i < 1000 && server.answered() < 16; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(server.answered(), 16);
  EXPECT_FALSE(returned.load()) << status;
  EXPECT_TRUE((*transport)->DeadStatus().ok());
  transport->reset();  // closing fails the wait (Unavailable), which ends the thread
  waiter.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
}

TEST(ServerTimeout, NewWorkReconnectsAfterTheServerCameBackAndTheOldAddressesStillWork) {
  Server::Options options = SmallServer();
  static std::atomic<int> counter{0};
  const std::string address =
      absl::StrCat("unix:///tmp/vgpu-reconnect-", ::getpid(), "-", counter++, ".sock");
  options.listen = address;
  options.compute_threads = 2;
  auto first = Server::Create(options);
  ASSERT_TRUE(first.ok()) << first.status();
  std::thread first_thread([&] { (void)(*first)->Serve(); });

  NotificationLog sink;
  auto transport = ReconnectingTransport::Connect(address, "", &sink, nullptr, 2000, 2000);
  ASSERT_TRUE(transport.ok()) << transport.status();
  ReconnectingTransport& client = **transport;
  Reply allocated = client.Call(MakeCommand(CommandKind::kAllocate, 0, 4096));
  ASSERT_TRUE(allocated.status.ok()) << allocated.status;
  const uint64_t buffer = allocated.value;  // what TensorFlow would hold
  ASSERT_TRUE(client.Call(MakeCommand(CommandKind::kCreateStream, 500)).status.ok());

  (*first)->Stop();  // the server goes away
  first_thread.join();
  first->reset();
  const Command sync = MakeCommand(CommandKind::kSynchronizeStream, 500);
  Reply lost = client.Call(sync);  // waits for work queued before: the loss is reported
  EXPECT_FALSE(lost.status.ok());
  EXPECT_NE(lost.status.message().find(address), std::string::npos) << lost.status;
  EXPECT_EQ(client.sessions(), 1);

  auto second = Server::Create(options);  // ... and comes back at the same address
  ASSERT_TRUE(second.ok()) << second.status();
  std::thread second_thread([&] { (void)(*second)->Serve(); });
  std::vector<uint8_t> data(4096);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  // New work on the old stream and the old address.
  EXPECT_TRUE(
      client.Post(CopyIn(CommandKind::kMemcpyHtoD, 500, buffer + 0, data.data(), data.size()))
          .ok());
  EXPECT_EQ(client.sessions(), 2);
  EXPECT_TRUE(client.Call(sync).status.ok());
  std::vector<uint8_t> back(4096, 0);
  Reply read_reply =
      client.Call(CopyOut(CommandKind::kMemcpyNow, 0, buffer + 16, back.data(), back.size() - 16));
  EXPECT_TRUE(read_reply.status.ok()) << read_reply.status;
  EXPECT_TRUE(std::equal(back.begin(), back.end() - 16, data.begin() + 16));
  EXPECT_TRUE(client.Call(FreeCommand(buffer)).status.ok());

  transport->reset();
  (*second)->Stop();
  second_thread.join();
}

}  // namespace
}  // namespace vgpu
