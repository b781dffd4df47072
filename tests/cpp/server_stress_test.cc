// A multi-tenant stress test of `vgpu server` (issue 10): one real Server on a Unix socket, and
// for a bounded time several tenant threads at once:
//   - honest tenants do random LEGAL work (allocate, free, streams, host<->device copies,
//     device-to-device copies, memsets, relu and binary-max launches, events across streams,
//     notifications, synchronisations) and check EVERY result they read against a shadow copy
//     kept on the host: their data intact, their results exact, every synchronisation OK;
//   - hostile tenants do random ILLEGAL work (forged, freed and other tenants' addresses,
//     extents past an allocation, wrong streams, malformed launches and descriptors, bad
//     memsets, foreign frees, quota overruns, bad devices) and check that each one is refused
//     with an error and that nothing of another tenant's comes back;
//   - a raw-socket attacker sends garbage, truncated and oversized frames, bad handshakes,
//     mutated commands, and disconnects abruptly mid-frame and with work in flight.
// At the end the server must be alive (an honest bystander's round trip works) and must have
// reclaimed every byte of every tenant.
//
// Deterministic seeds (each thread's random sequence is fixed by the seed; the interleaving of
// threads is the OS's). Environment, for longer runs (scripts/sanitize.sh):
//   VGPU_STRESS_SECONDS   how long the tenants run (default 3)
//   VGPU_STRESS_SEED      the base seed (default 20250610)
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/activation.h"
#include "plugin/protocol/kernels/elementwise.h"
#include "plugin/protocol/launch_params.h"
#include "plugin/protocol/wire_format.h"
#include "plugin/server/server.h"
#include "plugin/transport/socket_transport.h"
#include "notification_log.h"

namespace vgpu {
namespace {

using Clock = std::chrono::steady_clock;
using vgpu_test::NotificationLog;

// ---------------------------------------------------------------------------------------------
// Configuration

struct StressConfig {
  double seconds = 3.0;
  uint64_t seed = 20250610;
  int honest_tenants = 3;
  int hostile_tenants = 2;
  int raw_attackers = 1;
};

StressConfig ConfigFromEnvironment() {
  StressConfig config;
  if (const char* s = std::getenv("VGPU_STRESS_SECONDS")) config.seconds = std::atof(s);
  if (const char* s = std::getenv("VGPU_STRESS_SEED")) config.seed = std::strtoull(s, nullptr, 10);
  if (config.seconds <= 0) config.seconds = 3.0;
  return config;
}

// Server sizes: small enough that quota and arena pressure happen, large enough that honest
// tenants mostly succeed.
constexpr uint64_t kMemoryLimit = 96ull << 20;
constexpr uint64_t kClientQuota = 12ull << 20;
constexpr int kMaxStreamsPerTenant = 5;
constexpr int kMaxAllocationsPerTenant = 24;
constexpr uint32_t kMaxElements = 1u << 15;  // per honest allocation (128 KiB of float32)
// Every wait in the test is bounded by this (the server must never make a client wait longer).
constexpr auto kWaitBound = std::chrono::seconds(60);

// ---------------------------------------------------------------------------------------------
// Helpers shared by the tenants

// Addresses the honest tenants hold now: the hostile tenants' targets. An honest tenant removes
// an address before it frees it.
class VictimAddresses {
 public:
  void Add(uint64_t address, uint64_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    live_[address] = size;
  }
  void Remove(uint64_t address) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(address);
  }
  // A live victim address and its size, or {0, 0} if there is none.
  std::pair<uint64_t, uint64_t> Pick(std::mt19937_64& rng) {
    std::lock_guard<std::mutex> lock(mu_);
    if (live_.empty()) return {0, 0};
    auto it = live_.begin();
    std::advance(it, rng() % live_.size());
    return *it;
  }

 private:
  std::mutex mu_;
  std::map<uint64_t, uint64_t> live_;
};

// Each honest tenant t writes only floats whose magnitude lies in its band
// [t * kBandWidth, (t + 1) * kBandWidth), or 0; relu and max keep values in the band. A float of
// another band in a tenant's memory is another tenant's data.
constexpr int kBandWidth = 1024;
int BandOf(float value) {
  float magnitude = value < 0 ? -value : value;
  if (!(magnitude >= kBandWidth) || magnitude >= 64.0f * kBandWidth) return -1;
  return static_cast<int>(magnitude / kBandWidth);
}

TensorDescriptorSettings Vector(int64_t n, DType dtype = DType::kFloat32) {
  TensorDescriptorSettings tensor;
  tensor.dtype = dtype;
  tensor.rank = 1;
  tensor.dims[0] = n;
  return tensor;
}

// A launch's descriptor section (Command::descriptors) from settings structs.
class DescriptorSection {
 public:
  template <typename Settings>
  DescriptorSection& Add(const Settings& settings) {
    ++count_;
    ParamWriter writer(&bytes_);
    writer.Put(static_cast<uint8_t>(DescriptorTraits<Settings>::kKind))
        .Put(static_cast<uint16_t>(sizeof(Settings)))
        .PutBytes(&settings, sizeof(Settings));
    return *this;
  }
  // Appends raw bytes as one more entry's worth (for malformed sections).
  DescriptorSection& Raw(std::vector<uint8_t> bytes, bool counts = true) {
    count_ += counts ? 1 : 0;
    bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
    return *this;
  }
  absl::InlinedVector<uint8_t, 128> Build() const {
    absl::InlinedVector<uint8_t, 128> out;
    out.push_back(count_);
    out.insert(out.end(), bytes_.begin(), bytes_.end());
    return out;
  }

 private:
  uint8_t count_ = 0;
  ParamBlock bytes_;
};

Command ReluLaunch(uint64_t stream, uint64_t x, uint64_t y, int64_t n) {
  Command c;
  c.kind = CommandKind::kLaunch;
  c.stream = stream;
  c.object = static_cast<uint32_t>(activation::kForward);
  c.descriptors = DescriptorSection().Add(ActivationDescriptorSettings{}).Add(Vector(n)).Build();
  c.buffers = {BufferArg{x, uint64_t(n) * 4}, BufferArg{y, uint64_t(n) * 4}};
  return c;
}

Command MaxLaunch(uint64_t stream, uint64_t a, uint64_t b, uint64_t out, int64_t n) {
  Command c;
  c.kind = CommandKind::kLaunch;
  c.stream = stream;
  c.object = static_cast<uint32_t>(elementwise::kBinary);
  OpTensorDescriptorSettings op;
  op.op = ElementwiseOp::kMaximum;
  c.descriptors = DescriptorSection().Add(op).Add(Vector(n)).Add(Vector(n)).Add(Vector(n)).Build();
  c.buffers = {BufferArg{a, uint64_t(n) * 4}, BufferArg{b, uint64_t(n) * 4},
               BufferArg{out, uint64_t(n) * 4}};
  return c;
}

// One connected client over SocketTransport with bounded notification waits.
class Client {
 public:
  absl::Status Connect(const std::string& address) {
    auto transport = SocketTransport::Connect(address, "", &log_, nullptr, 10000);
    if (!transport.ok()) return transport.status();
    transport_ = *std::move(transport);
    return absl::OkStatus();
  }
  void Disconnect() { transport_.reset(); }
  Reply Call(Command c) { return transport_->Call(std::move(c)); }
  absl::Status Post(Command c) { return transport_->Post(std::move(c)); }
  NotificationLog& log() { return log_; }

  absl::StatusOr<uint64_t> Allocate(uint64_t size, uint32_t device = 0) {
    Command c;
    c.kind = CommandKind::kAllocate;
    c.size = size;
    c.device = device;
    Reply r = Call(std::move(c));
    if (!r.status.ok()) return r.status;
    return r.value;
  }
  absl::Status Free(uint64_t address) {
    Command c;
    c.kind = CommandKind::kFree;
    c.dst = address;
    return Call(std::move(c)).status;
  }
  absl::Status CreateStream(uint64_t id) {
    Command c;
    c.kind = CommandKind::kCreateStream;
    c.stream = id;
    return Call(std::move(c)).status;
  }
  absl::Status DestroyStream(uint64_t id) {
    Command c;
    c.kind = CommandKind::kDestroyStream;
    c.stream = id;
    return Call(std::move(c)).status;
  }
  absl::Status Sync(uint64_t stream) {
    Command c;
    c.kind = CommandKind::kSynchronizeStream;
    c.stream = stream;
    return Call(std::move(c)).status;
  }
  absl::Status SyncDevice() {
    Command c;
    c.kind = CommandKind::kSynchronizeDevice;
    return Call(std::move(c)).status;
  }
  absl::Status Write(uint64_t stream, uint64_t dst, const void* data, uint64_t size) {
    Command c;
    c.kind = CommandKind::kMemcpyHtoD;
    c.stream = stream;
    c.dst = dst;
    c.size = size;
    c.host_src = data;
    return Post(std::move(c));
  }
  absl::Status ReadAsync(uint64_t stream, uint64_t src, void* data, uint64_t size) {
    Command c;
    c.kind = CommandKind::kMemcpyDtoH;
    c.stream = stream;
    c.src = src;
    c.size = size;
    c.host_dst = data;
    return Post(std::move(c));
  }
  absl::Status ReadNow(uint64_t src, void* data, uint64_t size) {
    Command c;
    c.kind = CommandKind::kMemcpyNow;
    c.src = src;
    c.size = size;
    c.host_dst = data;
    return Call(std::move(c)).status;
  }
  absl::Status WriteNow(uint64_t dst, const void* data, uint64_t size) {
    Command c;
    c.kind = CommandKind::kMemcpyNow;
    c.dst = dst;
    c.size = size;
    c.host_src = data;
    return Call(std::move(c)).status;
  }

 private:
  NotificationLog log_;  // outlives transport_ (declared first, destroyed last)
  std::unique_ptr<SocketTransport> transport_;
};

// Counts what the tenants did, for the test's log.
struct Tally {
  std::atomic<uint64_t> legal{0}, illegal{0}, refused{0}, raw_connections{0}, checks{0};
};

// What one tenant thread is doing now: the watchdog prints it if the test wedges.
struct Progress {
  std::string name;
  std::atomic<const char*> doing{"starting"};
  std::atomic<uint64_t> steps{0};
};

uint64_t ServerBytesInUse(Server& server) {
  std::string json = server.StatsJson();
  size_t devices = json.find("\"devices\"");
  uint64_t total = 0;
  for (size_t at = json.find("\"bytes_in_use\": ", devices); at != std::string::npos;
       at = json.find("\"bytes_in_use\": ", at + 1)) {
    total += std::strtoull(json.c_str() + at + 16, nullptr, 10);
  }
  return total;
}

bool ServerHasClients(Server& server) {
  return server.StatsJson().find("\"clients\": []") == std::string::npos;
}

// ---------------------------------------------------------------------------------------------
// What every tenant thread has

// One tenant thread's random source, the server's address and the test's tally, and its
// progress for the watchdog (set before Run()).
class TenantThread {
 public:
  Progress* progress_ = nullptr;

 protected:
  TenantThread(uint64_t seed, const std::string& address, Tally* tally)
      : rng_(seed), address_(address), tally_(tally) {}

  // Records the step this thread is taking now, for the watchdog.
  void Doing(const char* what) {
    progress_->doing = what;
    progress_->steps++;
  }

  std::mt19937_64 rng_;
  const std::string address_;
  Tally* tally_;
};

// A tenant that talks to the server through its own Client and knows the honest tenants'
// addresses (the victims).
class ClientTenant : public TenantThread {
 public:
  virtual ~ClientTenant() = default;

  // Connects and Start()s, then takes Step()s until the deadline, a fatal failure, or more than
  // 20 steps after a failure, and then Finish()es (not after a failed connect or start).
  void Run(Clock::time_point deadline) {
    ASSERT_TRUE(client_.Connect(address_).ok());
    ASSERT_TRUE(Start());
    while (Clock::now() < deadline && !::testing::Test::HasFatalFailure()) {
      Step();
      if (::testing::Test::HasFailure() && failures_reported_++ > 20) break;
    }
    Finish();
  }

 protected:
  ClientTenant(uint64_t seed, const std::string& address, VictimAddresses* victims, Tally* tally,
               const StressConfig& config)
      : TenantThread(seed, address, tally), victims_(victims), config_(config) {}

  // Creates what the steps need; false (after a test failure) stops the tenant.
  virtual bool Start() = 0;
  // One random command (or a few).
  virtual void Step() = 0;
  // Leaves the server, cleanly or not.
  virtual void Finish() = 0;

  VictimAddresses* victims_;
  const StressConfig config_;
  Client client_;

 private:
  int failures_reported_ = 0;
};

// ---------------------------------------------------------------------------------------------
// The honest tenant

class HonestTenant : public ClientTenant {
 public:
  HonestTenant(int band, uint64_t seed, const std::string& address, VictimAddresses* victims,
               Tally* tally, const StressConfig& config)
      : ClientTenant(seed, address, victims, tally, config), band_(band) {}

 private:
  bool Start() override { return NewStream(); }

  void Finish() override {
    // Half of the tenants clean up; the others just vanish with memory and streams held (the
    // server reclaims them).
    if (band_ % 2 == 0) {
      for (auto& [id, unused] : streams_) EXPECT_TRUE(client_.Sync(id).ok());
      while (!buffers_.empty()) FreeBuffer(0);
      for (auto& [id, unused] : streams_) EXPECT_TRUE(client_.DestroyStream(id).ok());
    }
    for (auto& buffer : buffers_) victims_->Remove(buffer.address);
    client_.Disconnect();
  }

  struct Buffer {
    uint64_t address = 0;
    uint32_t count = 0;          // float32 elements
    std::vector<float> shadow;   // what the device must hold
    uint64_t last_stream = 0;    // the stream of its last use (0: no work pending on it)
  };

  float RandomValue() {
    if (rng_() % 5 == 0) return 0.0f;
    float magnitude = static_cast<float>(band_ * kBandWidth + rng_() % kBandWidth);
    return rng_() % 2 ? magnitude : -magnitude;
  }
  uint64_t RandomStream() {
    auto it = streams_.begin();
    std::advance(it, rng_() % streams_.size());
    return it->first;
  }
  Buffer& RandomBuffer() { return buffers_[rng_() % buffers_.size()]; }

  bool NewStream() {
    uint64_t id = next_stream_++;
    absl::Status status = client_.CreateStream(id);
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok()) return false;
    streams_[id] = true;
    return true;
  }

  // Orders `buffer`'s next use on `stream` after its previous use on another stream (an event
  // recorded there, waited for here), as a real client orders cross-stream work.
  void Use(Buffer& buffer, uint64_t stream) {
    if (buffer.last_stream != 0 && buffer.last_stream != stream) {
      Command record;
      record.kind = CommandKind::kRecordEvent;
      record.stream = buffer.last_stream;
      record.object = next_event_++;
      record.token = next_token_++;
      EXPECT_TRUE(client_.Post(record).ok());
      Command wait;
      wait.kind = CommandKind::kWaitEvent;
      wait.stream = stream;
      wait.object = record.object;
      EXPECT_TRUE(client_.Post(wait).ok());
      // The event's notification comes back too: it must report an OK stream.
      pending_tokens_.push_back(record.token);
      Command destroy;
      destroy.kind = CommandKind::kDestroyEvent;
      destroy.object = record.object;
      EXPECT_TRUE(client_.Post(destroy).ok());  // asynchronous: no reply
    }
    buffer.last_stream = stream;
  }

  void CheckContents(const Buffer& buffer, const std::vector<float>& got, const char* how) {
    tally_->checks++;
    if (got == buffer.shadow) return;
    size_t first = 0;
    while (first < got.size() && got[first] == buffer.shadow[first]) ++first;
    ADD_FAILURE() << "tenant " << band_ << ": " << how << " of " << buffer.count
                  << " floats at 0x" << std::hex << buffer.address << std::dec
                  << " differs at element " << first << ": got " << got[first] << ", expected "
                  << buffer.shadow[first] << " (a value of tenant band " << BandOf(got[first])
                  << ")";
  }

  void Step() override {
    tally_->legal++;
    const int op = static_cast<int>(rng_() % 100);
    if (buffers_.size() < 2 || (op < 12 && buffers_.size() < kMaxAllocationsPerTenant)) {
      AllocateBuffer();
    } else if (op < 20) {
      FreeBuffer(rng_() % buffers_.size());
    } else if (op < 32) {
      WriteBuffer();
    } else if (op < 44) {
      Relu();
    } else if (op < 54) {
      Maximum();
    } else if (op < 64) {
      ReadBack();
    } else if (op < 70) {
      ReadNow();
    } else if (op < 76) {
      Memset();
    } else if (op < 82) {
      CopyDeviceToDevice();
    } else if (op < 87) {
      NotifyAndWait();
    } else if (op < 91) {
      if (streams_.size() < kMaxStreamsPerTenant) NewStream();
    } else if (op < 94) {
      DestroyAStream();
    } else if (op < 97) {
      SyncAll();
    } else {
      CheckMemoryInfo();
    }
  }

  void AllocateBuffer() {
    Doing("AllocateBuffer");
    Buffer buffer;
    buffer.count = 1 + static_cast<uint32_t>(rng_() % kMaxElements);
    absl::StatusOr<uint64_t> address = client_.Allocate(uint64_t(buffer.count) * 4);
    if (!address.ok()) {
      // The shared arena may be full (the other tenants); the quota is never reached here.
      EXPECT_EQ(address.status().code(), absl::StatusCode::kResourceExhausted) << address.status();
      return;
    }
    buffer.address = *address;
    {  // a fresh allocation holds nobody else's bytes (memory is scrubbed between tenants)
      std::vector<float> fresh(buffer.count);
      absl::Status status = client_.ReadNow(buffer.address, fresh.data(), fresh.size() * 4);
      EXPECT_TRUE(status.ok()) << status;
      for (float value : fresh) {
        int band = BandOf(value);
        if (band >= 0 && band != band_) {
          ADD_FAILURE() << "tenant " << band_ << ": a fresh allocation of " << buffer.count
                        << " floats holds tenant " << band << "'s value " << value
                        << " (stale memory, issue 10 finding 2)";
          break;
        }
      }
    }
    buffer.shadow.resize(buffer.count);
    for (float& v : buffer.shadow) v = RandomValue();
    uint64_t stream = RandomStream();
    EXPECT_TRUE(client_.Write(stream, buffer.address, buffer.shadow.data(),
                              buffer.shadow.size() * 4)
                    .ok());
    buffer.last_stream = stream;
    victims_->Add(buffer.address, uint64_t(buffer.count) * 4);
    buffers_.push_back(std::move(buffer));
  }

  void FreeBuffer(size_t index) {
    Doing("FreeBuffer");
    Buffer& buffer = buffers_[index];
    // Free only when this tenant's own work on it is done (stream-ordered free is finding 1's
    // fix; an honest client synchronises first, as TensorFlow's allocator does).
    if (buffer.last_stream != 0) {
      absl::Status status = client_.Sync(buffer.last_stream);
      EXPECT_TRUE(status.ok()) << "tenant " << band_ << ": " << status;
    }
    // Verify its final contents once more, then free it.
    std::vector<float> got(buffer.count);
    absl::Status read = client_.ReadNow(buffer.address, got.data(), got.size() * 4);
    EXPECT_TRUE(read.ok()) << read;
    if (read.ok()) CheckContents(buffer, got, "final read");
    victims_->Remove(buffer.address);
    absl::Status status = client_.Free(buffer.address);
    EXPECT_TRUE(status.ok()) << status;
    buffers_.erase(buffers_.begin() + index);
  }

  void WriteBuffer() {
    Doing("WriteBuffer");
    Buffer& buffer = RandomBuffer();
    uint64_t stream = RandomStream();
    Use(buffer, stream);
    // A random sub-range.
    uint32_t begin = rng_() % buffer.count;
    uint32_t end = begin + 1 + rng_() % (buffer.count - begin);
    std::vector<float> data(end - begin);
    for (float& v : data) v = RandomValue();
    std::copy(data.begin(), data.end(), buffer.shadow.begin() + begin);
    EXPECT_TRUE(client_.Write(stream, buffer.address + uint64_t(begin) * 4, data.data(),
                              data.size() * 4)
                    .ok());
  }

  void Relu() {
    Doing("Relu");
    Buffer& x = RandomBuffer();
    Buffer& y = RandomBuffer();  // may be x: in place
    uint32_t n = std::min(x.count, y.count);
    uint64_t stream = RandomStream();
    Use(x, stream);
    Use(y, stream);
    EXPECT_TRUE(client_.Post(ReluLaunch(stream, x.address, y.address, n)).ok());
    for (uint32_t i = 0; i < n; ++i) y.shadow[i] = std::max(x.shadow[i], 0.0f);
  }

  void Maximum() {
    Doing("Maximum");
    Buffer& a = RandomBuffer();
    Buffer& b = RandomBuffer();
    Buffer& out = RandomBuffer();
    uint32_t n = std::min({a.count, b.count, out.count});
    // out may alias an input only when it has the output's element count (all of them here).
    uint64_t stream = RandomStream();
    Use(a, stream);
    Use(b, stream);
    Use(out, stream);
    EXPECT_TRUE(client_.Post(MaxLaunch(stream, a.address, b.address, out.address, n)).ok());
    std::vector<float> result(n);
    for (uint32_t i = 0; i < n; ++i) result[i] = std::max(a.shadow[i], b.shadow[i]);
    std::copy(result.begin(), result.end(), out.shadow.begin());
  }

  void ReadBack() {
    Doing("ReadBack");
    Buffer& buffer = RandomBuffer();
    uint64_t stream = RandomStream();
    Use(buffer, stream);
    std::vector<float> got(buffer.count, -1.0f);
    EXPECT_TRUE(client_.ReadAsync(stream, buffer.address, got.data(), got.size() * 4).ok());
    absl::Status status = client_.Sync(stream);
    EXPECT_TRUE(status.ok()) << "tenant " << band_ << ": " << status;
    buffer.last_stream = 0;
    CollectNotifications();
    if (status.ok()) CheckContents(buffer, got, "asynchronous read");
  }

  void ReadNow() {
    Doing("ReadNow");
    Buffer& buffer = RandomBuffer();
    if (buffer.last_stream != 0) {
      absl::Status status = client_.Sync(buffer.last_stream);
      EXPECT_TRUE(status.ok()) << "tenant " << band_ << ": " << status;
      buffer.last_stream = 0;
    }
    std::vector<float> got(buffer.count, -1.0f);
    absl::Status status = client_.ReadNow(buffer.address, got.data(), got.size() * 4);
    EXPECT_TRUE(status.ok()) << status;
    if (status.ok()) CheckContents(buffer, got, "synchronous read");
  }

  void Memset() {
    Doing("Memset");
    Buffer& buffer = RandomBuffer();
    uint64_t stream = RandomStream();
    Use(buffer, stream);
    Command c;
    c.kind = CommandKind::kMemset;
    c.stream = stream;
    c.dst = buffer.address;
    c.size = uint64_t(buffer.count) * 4;
    if (rng_() % 2) {
      c.pattern_bytes = 1;
      c.pattern = 0;
      std::fill(buffer.shadow.begin(), buffer.shadow.end(), 0.0f);
    } else {
      float value = RandomValue();
      c.pattern_bytes = 4;
      std::memcpy(&c.pattern, &value, 4);
      std::fill(buffer.shadow.begin(), buffer.shadow.end(), value);
    }
    EXPECT_TRUE(client_.Post(c).ok());
  }

  void CopyDeviceToDevice() {
    Doing("CopyDeviceToDevice");
    Buffer& from = RandomBuffer();
    Buffer& to = RandomBuffer();
    if (&from == &to) return;
    uint32_t n = std::min(from.count, to.count);
    uint64_t stream = RandomStream();
    Use(from, stream);
    Use(to, stream);
    Command c;
    c.kind = CommandKind::kMemcpyDtoD;
    c.stream = stream;
    c.src = from.address;
    c.dst = to.address;
    c.size = uint64_t(n) * 4;
    EXPECT_TRUE(client_.Post(c).ok());
    std::copy(from.shadow.begin(), from.shadow.begin() + n, to.shadow.begin());
  }

  void NotifyAndWait() {
    Doing("NotifyAndWait");
    Command c;
    c.kind = CommandKind::kNotify;
    c.stream = RandomStream();
    c.token = next_token_++;
    EXPECT_TRUE(client_.Post(c).ok());
    absl::Status status = client_.log().WaitFor(c.token, kWaitBound);
    EXPECT_TRUE(status.ok()) << "tenant " << band_ << ": notify: " << status;
  }

  void DestroyAStream() {
    Doing("DestroyAStream");
    if (streams_.size() < 2) return;
    uint64_t id = RandomStream();
    absl::Status status = client_.Sync(id);
    EXPECT_TRUE(status.ok()) << "tenant " << band_ << ": " << status;
    status = client_.DestroyStream(id);
    EXPECT_TRUE(status.ok()) << status;
    streams_.erase(id);
    // Work on the buffers that used it is complete: no ordering needed any more.
    for (Buffer& buffer : buffers_) {
      if (buffer.last_stream == id) buffer.last_stream = 0;
    }
  }

  void SyncAll() {
    Doing("SyncAll");
    absl::Status status = client_.SyncDevice();
    EXPECT_TRUE(status.ok()) << "tenant " << band_ << ": " << status;
    for (Buffer& buffer : buffers_) buffer.last_stream = 0;
    CollectNotifications();
  }

  // The events this tenant recorded have all been reached (after a synchronisation): each
  // notification reports an OK stream.
  void CollectNotifications() {
    Doing("CollectNotifications");
    for (uint64_t token : pending_tokens_) {
      absl::Status status = client_.log().WaitFor(token, kWaitBound);
      EXPECT_TRUE(status.ok()) << "tenant " << band_ << ": event: " << status;
    }
    pending_tokens_.clear();
  }

  void CheckMemoryInfo() {
    Doing("CheckMemoryInfo");
    Command c;
    c.kind = CommandKind::kMemoryInfo;
    Reply reply = client_.Call(c);
    EXPECT_TRUE(reply.status.ok()) << reply.status;
    uint64_t mine = 0;
    for (const Buffer& buffer : buffers_) mine += uint64_t(buffer.count) * 4;
    // With a quota the reply is this client's view: at least what it allocated, within quota.
    EXPECT_GE(reply.memory.bytes_in_use, mine);
    EXPECT_LE(reply.memory.bytes_in_use, kClientQuota);
  }

  const int band_;
  std::map<uint64_t, bool> streams_;
  std::vector<Buffer> buffers_;
  std::vector<uint64_t> pending_tokens_;
  uint64_t next_stream_ = 1;
  uint64_t next_event_ = 1;
  uint64_t next_token_ = 1;
};

// ---------------------------------------------------------------------------------------------
// The hostile tenant

class HostileTenant : public ClientTenant {
 public:
  HostileTenant(int index, uint64_t seed, const std::string& address, VictimAddresses* victims,
                Tally* tally, const StressConfig& config)
      : ClientTenant(seed, address, victims, tally, config), index_(index) {}

 private:
  bool Start() override { return client_.CreateStream(stream_).ok(); }

  void Finish() override {
    client_.Disconnect();  // with whatever it still holds: the server reclaims it
  }

 private:
  struct Own {
    uint64_t address = 0;
    uint64_t size = 0;
  };

  // Whether [address, address + size) lies inside one of this tenant's live allocations (then
  // an access to it is legal). The arena hands out whole 256-byte units, and the tenant may use
  // all of its block: a freed address that came back in a smaller allocation is still its own
  // up to the rounding.
  bool Mine(uint64_t address, uint64_t size) const {
    for (const Own& own : own_) {
      const uint64_t block = std::max<uint64_t>(256, (own.size + 255) / 256 * 256);
      if (address >= own.address && address - own.address <= block &&
          size <= block - (address - own.address)) {
        return true;
      }
    }
    return false;
  }

  // Synchronises the stream until it is clean again; the first synchronisation must report
  // the error the illegal command caused.
  void ExpectStreamError(const char* what) {
    progress_->doing = what;
    absl::Status status = client_.Sync(stream_);
    EXPECT_FALSE(status.ok()) << "hostile " << index_ << ": " << what << " was not refused";
    if (!status.ok()) tally_->refused++;
    // A stream error and a connection-level error may both be pending: drain them.
    for (int i = 0; i < 3 && !client_.Sync(stream_).ok(); ++i) {
    }
  }
  // Synchronises without expecting anything (the command may legally have succeeded).
  void Drain() {
    for (int i = 0; i < 3 && !client_.Sync(stream_).ok(); ++i) {
    }
  }

  uint64_t ForgedAddress() {
    switch (rng_() % 4) {
      case 0: return rng_();                                              // anything
      case 1: return 0x7DE0'0000'0000'0000ull | (rng_() & 0xFFF'FFFF'FFFFull);  // tagged
      case 2: return 0x7DE0'0000'0000'0000ull | (uint64_t(1 + rng_() % 200) << 44);  // device
      default: return 0x7DE0'0000'0000'0000ull + kMemoryLimit + rng_() % 4096;  // past arena
    }
  }

  // A target: another tenant's live address (most of the time), a forged one, or one of this
  // tenant's freed ones. Returns {address, size}; the access is illegal unless Mine().
  std::pair<uint64_t, uint64_t> Target() {
    uint64_t pick = rng_() % 10;
    if (pick < 6) {
      auto victim = victims_->Pick(rng_);
      if (victim.first != 0) {
        uint64_t offset = rng_() % victim.second;
        return {victim.first + offset, 1 + rng_() % (victim.second - offset)};
      }
    }
    if (pick < 8 && !freed_.empty()) return {freed_[rng_() % freed_.size()], 4 + rng_() % 64};
    return {ForgedAddress(), 4 + rng_() % 4096};
  }

  void Step() override {
    const int op = static_cast<int>(rng_() % 22);
    tally_->illegal++;
    switch (op) {
      case 0: StealByReadNow(); break;
      case 1: StealByAsyncRead(); break;
      case 2: OverwriteByWrite(); break;
      case 3: OverwriteByRelu(); break;
      case 4: OverwriteByMemset(); break;
      case 5: FreeForeign(); break;
      case 6: ExtentPastAllocation(); break;
      case 7: WrongStream(); break;
      case 8: BadStreamIds(); break;
      case 9: MalformedLaunch(); break;
      case 10: BadMemset(); break;
      case 11: BadDescriptorCalls(); break;
      case 12: BadDeviceAndSizes(); break;
      case 13: InternalToken(); break;
      case 14: UnknownEvents(); break;
      case 15: DoubleFree(); break;
      case 16: CopyToForeign(); break;
      case 17: OverflowingLaunch(); break;
      case 18: FreeWhileInFlight(); break;
      default: Legal(); break;
    }
  }

  void Legal() {
    Doing("Legal");
    tally_->illegal--;
    tally_->legal++;
    if (own_.size() < 8) {
      uint64_t size = 4 * (1 + rng_() % 8192);
      absl::StatusOr<uint64_t> address = client_.Allocate(size);
      if (address.ok()) {
        own_.push_back({*address, size});
        std::vector<uint8_t> junk(size, static_cast<uint8_t>(rng_()));
        EXPECT_TRUE(client_.Write(stream_, *address, junk.data(), size).ok());
      }
      return;
    }
    Own& own = own_[rng_() % own_.size()];
    uint64_t n = own.size / 4;
    EXPECT_TRUE(client_.Post(ReluLaunch(stream_, own.address, own.address, n)).ok());
    if (rng_() % 4 == 0) {
      // Free (after its work: the hostile tenant's own frees are the honest kind here).
      Drain();
      EXPECT_TRUE(client_.Free(own.address).ok());
      freed_.push_back(own.address);
      own = own_.back();
      own_.pop_back();
    }
  }

  void StealByReadNow() {
    Doing("StealByReadNow");
    auto [address, size] = Target();
    std::vector<uint8_t> stolen(size, 0xEE);
    absl::Status status = client_.ReadNow(address, stolen.data(), size);
    if (Mine(address, size)) return;
    EXPECT_FALSE(status.ok()) << "hostile " << index_ << " read 0x" << std::hex << address;
    if (!status.ok()) tally_->refused++;
    EXPECT_EQ(stolen, std::vector<uint8_t>(size, 0xEE)) << "bytes came back from a refused read";
  }

  void StealByAsyncRead() {
    Doing("StealByAsyncRead");
    auto [address, size] = Target();
    std::vector<uint8_t> stolen(size, 0xEE);
    EXPECT_TRUE(client_.ReadAsync(stream_, address, stolen.data(), size).ok());
    if (Mine(address, size)) {
      Drain();
      return;
    }
    ExpectStreamError("an asynchronous read of a foreign address");
    EXPECT_EQ(stolen, std::vector<uint8_t>(size, 0xEE)) << "bytes came back from a refused read";
  }

  void OverwriteByWrite() {
    Doing("OverwriteByWrite");
    auto [address, size] = Target();
    std::vector<uint8_t> junk(size, 0x66);
    if (rng_() % 2) {
      absl::Status status = client_.WriteNow(address, junk.data(), size);
      if (!Mine(address, size)) {
        EXPECT_FALSE(status.ok()) << "a foreign synchronous write";
      }
      if (!status.ok()) tally_->refused++;
      return;
    }
    EXPECT_TRUE(client_.Write(stream_, address, junk.data(), size).ok());
    if (Mine(address, size)) return Drain();
    ExpectStreamError("a write to a foreign address");
  }

  void OverwriteByRelu() {
    Doing("OverwriteByRelu");
    auto [address, size] = Target();
    uint64_t n = std::max<uint64_t>(1, size / 4);
    uint64_t source = own_.empty() ? ForgedAddress() : own_[0].address;
    uint64_t source_size = own_.empty() ? n * 4 : own_[0].size;
    n = std::min(n, source_size / 4);
    EXPECT_TRUE(client_.Post(ReluLaunch(stream_, source, address, n)).ok());
    if (Mine(address, n * 4) && !own_.empty()) return Drain();
    ExpectStreamError("a relu into a foreign address");
  }

  void OverwriteByMemset() {
    Doing("OverwriteByMemset");
    auto [address, size] = Target();
    Command c;
    c.kind = CommandKind::kMemset;
    c.stream = stream_;
    c.dst = address;
    c.size = size;
    c.pattern_bytes = 1;
    c.pattern = 0x77;
    EXPECT_TRUE(client_.Post(c).ok());
    if (Mine(address, size)) return Drain();
    ExpectStreamError("a memset of a foreign address");
  }

  void FreeForeign() {
    Doing("FreeForeign");
    auto [address, size] = Target();
    if (Mine(address, 1)) return;
    absl::Status status = client_.Free(address);
    EXPECT_FALSE(status.ok()) << "hostile " << index_ << " freed 0x" << std::hex << address;
    if (!status.ok()) tally_->refused++;
  }

  void ExtentPastAllocation() {
    Doing("ExtentPastAllocation");
    if (own_.empty()) return Legal();
    const Own& own = own_[rng_() % own_.size()];
    // Past the end even of the arena's rounding of the allocation (256 bytes).
    uint64_t size = own.size + 257 + rng_() % (1 << 20);
    if (rng_() % 3 == 0) size = ~0ull - rng_() % 16;  // wraps the address space
    std::vector<uint8_t> out(std::min<uint64_t>(size, 1 << 21), 0xEE);
    // A read whose extent overruns: the transport would split a huge one, so use the raw size
    // through a memset and a device-to-device copy instead.
    Command memset;
    memset.kind = CommandKind::kMemset;
    memset.stream = stream_;
    memset.dst = own.address;
    memset.size = size;
    memset.pattern_bytes = 1;
    EXPECT_TRUE(client_.Post(memset).ok());
    ExpectStreamError("a memset past the allocation");
    Command copy;
    copy.kind = CommandKind::kMemcpyDtoD;
    copy.stream = stream_;
    copy.src = own.address;
    copy.dst = own.address;
    copy.size = size;
    EXPECT_TRUE(client_.Post(copy).ok());
    ExpectStreamError("a copy past the allocation");
    if (size <= out.size()) {
      absl::Status status = client_.ReadNow(own.address, out.data(), size);
      EXPECT_FALSE(status.ok()) << "a read past the allocation";
    }
  }

  void WrongStream() {
    Doing("WrongStream");
    // Work posted to a stream that does not exist: reported by the next synchronisation.
    uint64_t bogus = 1000 + rng_() % 1000;
    Command c;
    c.kind = CommandKind::kNotify;
    c.stream = bogus;
    c.token = 1;
    EXPECT_TRUE(client_.Post(c).ok());
    client_.log().Forget(1);  // its failure is notified too
    ExpectStreamError("a command on a stream that does not exist");
    client_.log().Forget(1);
    EXPECT_EQ(client_.Sync(bogus).code(), absl::StatusCode::kNotFound);
    EXPECT_FALSE(client_.DestroyStream(bogus).ok());
  }

  void BadStreamIds() {
    Doing("BadStreamIds");
    EXPECT_FALSE(client_.CreateStream(0).ok()) << "stream id 0";
    EXPECT_FALSE(client_.CreateStream(stream_).ok()) << "a stream id in use";
    // A second stream, created and destroyed while work is queued on it.
    uint64_t extra = 2 + rng_() % 100;
    if (client_.CreateStream(extra).ok()) {
      if (!own_.empty()) {
        EXPECT_TRUE(client_.Post(ReluLaunch(extra, own_[0].address, own_[0].address,
                                            own_[0].size / 4))
                        .ok());
      }
      EXPECT_TRUE(client_.DestroyStream(extra).ok());
    }
    tally_->refused += 2;
  }

  void MalformedLaunch() {
    Doing("MalformedLaunch");
    uint64_t a = own_.empty() ? ForgedAddress() : own_[0].address;
    uint64_t n = own_.empty() ? 16 : own_[0].size / 4;
    Command c = ReluLaunch(stream_, a, a, n);
    switch (rng_() % 9) {
      case 0: c.object = 9999 + rng_() % 1000; break;                 // unknown kernel
      case 1: c.buffers.pop_back(); break;                             // one buffer short
      case 2: c.descriptors.clear(); break;                            // no descriptors
      case 3: c.descriptors.resize(c.descriptors.size() / 2); break;   // truncated section
      case 4: for (auto& b : c.descriptors) b = static_cast<uint8_t>(rng_()); break;  // garbage
      case 5:  // tensor larger than the buffers
        c.descriptors = DescriptorSection().Add(ActivationDescriptorSettings{})
                            .Add(Vector(int64_t(n) + 1 + rng_() % 100)).Build();
        break;
      case 6: {  // bad rank, negative dims
        TensorDescriptorSettings t = Vector(int64_t(n));
        t.rank = rng_() % 2 ? 99 : -1;
        if (rng_() % 2) { t.rank = 1; t.dims[0] = -5; }
        c.descriptors = DescriptorSection().Add(ActivationDescriptorSettings{}).Add(t).Build();
        break;
      }
      case 7: {  // wrong descriptor kinds, unknown activation mode, dtype mismatch
        ActivationDescriptorSettings act;
        act.mode = static_cast<ActivationMode>(77);
        if (rng_() % 2) act.dtype = DType::kInt32;
        c.descriptors = rng_() % 2
                            ? DescriptorSection().Add(Vector(n)).Add(Vector(n)).Build()
                            : DescriptorSection().Add(act).Add(Vector(n)).Build();
        break;
      }
      default:  // a descriptor reference to a descriptor that does not exist
        c.descriptors = DescriptorSection()
                            .Raw({uint8_t(uint8_t(DescriptorKind::kActivation) | 0x80), 8, 0,
                                  1, 2, 3, 4, 5, 6, 7, 8})
                            .Add(Vector(n))
                            .Build();
        break;
    }
    absl::Status posted = client_.Post(c);
    EXPECT_TRUE(posted.ok()) << posted;
    ExpectStreamError("a malformed launch");
  }

  void BadMemset() {
    Doing("BadMemset");
    if (own_.empty()) return Legal();
    Command c;
    c.kind = CommandKind::kMemset;
    c.stream = stream_;
    c.dst = own_[0].address;
    if (rng_() % 2) {
      c.size = own_[0].size;
      c.pattern_bytes = static_cast<uint8_t>(rng_() % 2 ? 3 : 0);
    } else {
      c.size = 6;  // memset32 of a size that is not a multiple of 4
      c.pattern_bytes = 4;
    }
    EXPECT_TRUE(client_.Post(c).ok());
    ExpectStreamError("a malformed memset");
  }

  void BadDescriptorCalls() {
    Doing("BadDescriptorCalls");
    Command create;
    create.kind = CommandKind::kDescriptorCreate;
    create.object = 5;
    create.params = {static_cast<uint8_t>(rng_() % 2 ? 0 : 200)};
    EXPECT_FALSE(client_.Call(create).status.ok()) << "a descriptor of kind 0/200";
    Command set;
    set.kind = CommandKind::kDescriptorSet;
    set.object = 123456;
    set.params = {1, 2, 3};
    EXPECT_FALSE(client_.Call(set).status.ok()) << "settings for a missing descriptor";
    Command good = create;
    good.object = 77;
    good.params = {uint8_t(DescriptorKind::kTensor)};
    if (client_.Call(good).status.ok()) {
      Command too_big;
      too_big.kind = CommandKind::kDescriptorSet;
      too_big.object = 77;
      too_big.params.assign(kMaxDescriptorSettingsSize + 1 + rng_() % 1000, 0xAB);
      EXPECT_FALSE(client_.Call(too_big).status.ok()) << "oversized settings";
      Command destroy;
      destroy.kind = CommandKind::kDescriptorDestroy;
      destroy.object = 77;
      EXPECT_TRUE(client_.Call(destroy).status.ok());
      EXPECT_FALSE(client_.Call(destroy).status.ok()) << "a double destroy";
    }
    tally_->refused += 3;
  }

  void BadDeviceAndSizes() {
    Doing("BadDeviceAndSizes");
    EXPECT_FALSE(client_.Allocate(64, 1 + rng_() % 300).ok()) << "a device that does not exist";
    absl::StatusOr<uint64_t> huge = client_.Allocate(~0ull - rng_() % 4096);
    EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
    absl::StatusOr<uint64_t> over = client_.Allocate(kClientQuota + 1 + rng_() % 4096);
    EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
    Command info;
    info.kind = CommandKind::kMemoryInfo;
    info.device = 9;
    EXPECT_FALSE(client_.Call(info).status.ok());
    Command sync;
    sync.kind = CommandKind::kSynchronizeDevice;
    sync.device = 9;
    EXPECT_FALSE(client_.Call(sync).status.ok());
    tally_->refused += 5;
  }

  void InternalToken() {
    Doing("InternalToken");
    Command c;
    c.kind = rng_() % 2 ? CommandKind::kNotify : CommandKind::kRecordEvent;
    c.stream = stream_;
    c.object = 3;
    c.token = (1ull << 63) | rng_() % 16;  // the server's own token space
    EXPECT_TRUE(client_.Post(c).ok());
    ExpectStreamError("a notification token of the server's range");
    client_.log().Forget(c.token);
  }

  void UnknownEvents() {
    Doing("UnknownEvents");
    Command wait;
    wait.kind = CommandKind::kWaitEvent;
    wait.stream = stream_;
    wait.object = rng_();
    EXPECT_TRUE(client_.Post(wait).ok());
    Command destroy;
    destroy.kind = CommandKind::kDestroyEvent;
    destroy.object = rng_();
    EXPECT_TRUE(client_.Post(destroy).ok());  // harmless: nothing to destroy
    Drain();
  }

  void DoubleFree() {
    Doing("DoubleFree");
    if (own_.empty()) return Legal();
    Drain();
    Own own = own_.back();
    own_.pop_back();
    EXPECT_TRUE(client_.Free(own.address).ok());
    freed_.push_back(own.address);
    EXPECT_FALSE(client_.Free(own.address).ok()) << "a double free";
    tally_->refused++;
    // Use after free.
    std::vector<uint8_t> junk(16, 1);
    EXPECT_TRUE(client_.Write(stream_, own.address, junk.data(), junk.size()).ok());
    if (Mine(own.address, junk.size())) return Drain();
    ExpectStreamError("a write after free");
  }

  void CopyToForeign() {
    Doing("CopyToForeign");
    if (own_.empty()) return Legal();
    auto [address, size] = Target();
    Command c;
    c.kind = CommandKind::kMemcpyDtoD;
    c.stream = stream_;
    bool outward = rng_() % 2;
    c.src = outward ? own_[0].address : address;
    c.dst = outward ? address : own_[0].address;
    c.size = std::min(size, own_[0].size);
    EXPECT_TRUE(client_.Post(c).ok());
    if (Mine(address, c.size)) return Drain();
    ExpectStreamError("a device-to-device copy with a foreign address");
  }

  // Finding 3: element counts whose byte sizes overflow 64 bits, for the relu and binary kernels
  // (both already refuse them on main; the other kernel families are attacked by their own
  // tests).
  void OverflowingLaunch() {
    Doing("OverflowingLaunch");
    if (own_.empty()) return Legal();
    const Own& own = own_[0];
    Command c = ReluLaunch(stream_, own.address, own.address, 1);
    TensorDescriptorSettings t;
    t.rank = 1;
    t.dims[0] = int64_t(1) << (61 + rng_() % 2);  // * 4 bytes wraps to 0 or 2^63
    if (rng_() % 2) {
      t.rank = 8;
      for (int i = 0; i < 8; ++i) t.dims[i] = int64_t(1) << 8;  // 2^64 elements
    }
    if (rng_() % 2) {
      c.descriptors = DescriptorSection().Add(ActivationDescriptorSettings{}).Add(t).Build();
      c.buffers = {BufferArg{own.address, own.size}, BufferArg{own.address, own.size}};
    } else {
      c = MaxLaunch(stream_, own.address, own.address, own.address, 1);
      c.descriptors = DescriptorSection().Add(OpTensorDescriptorSettings{}).Add(t).Add(t).Add(t)
                          .Build();
      c.buffers = {BufferArg{own.address, own.size}, BufferArg{own.address, own.size},
                   BufferArg{own.address, own.size}};
    }
    EXPECT_TRUE(client_.Post(c).ok());
    ExpectStreamError("a launch whose size overflows");
  }

  // Finding 1: frees allocations while this tenant's queued work still writes them; whoever
  // gets the memory next must not see that work land in it (the honest tenants' checks). On
  // main each queued command re-validates its addresses when it runs, so this attack is already
  // refused there; the window that remains (a kernel RUNNING while its memory is freed) is too
  // narrow to hit at random and is attacked by finding 1's own test. With stream-ordered frees
  // the memsets simply complete before the memory is released.
  void FreeWhileInFlight() {
    Doing("FreeWhileInFlight");
    // A slow start to the stream (a big relu, several times), so that everything queued after
    // it is still in flight long after the frees below.
    const uint64_t delay_size = 4 << 20;
    absl::StatusOr<uint64_t> delay = client_.Allocate(delay_size);
    if (!delay.ok()) return;
    for (int i = 0; i < 8; ++i) {
      EXPECT_TRUE(client_.Post(ReluLaunch(stream_, *delay, *delay, delay_size / 4)).ok());
    }
    // Blocks of the honest tenants' sizes (so that their allocations reuse them), each written
    // by queued memsets, then freed at once.
    std::vector<uint64_t> blocks;
    for (int i = 0; i < 16; ++i) {
      const uint64_t size = 4 * (1 + rng_() % kMaxElements);
      absl::StatusOr<uint64_t> block = client_.Allocate(size);
      if (!block.ok()) break;
      blocks.push_back(*block);
      for (int k = 0; k < 4; ++k) {
        Command memset;
        memset.kind = CommandKind::kMemset;
        memset.stream = stream_;
        memset.dst = *block;
        memset.size = size;
        memset.pattern_bytes = 4;
        memset.pattern = 0xC0C0C0C0;  // the float -6.0235: in no honest tenant's band
        EXPECT_TRUE(client_.Post(memset).ok());
      }
    }
    for (uint64_t block : blocks) {
      (void)client_.Free(block);  // at once: the memsets above are still queued
      freed_.push_back(block);
    }
    // Give the honest tenants time to allocate while the memsets are pending.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Drain();
    EXPECT_TRUE(client_.Free(*delay).ok());
  }

  const int index_;
  const uint64_t stream_ = 1;
  std::vector<Own> own_;
  std::vector<uint64_t> freed_;
};

// ---------------------------------------------------------------------------------------------
// The raw-socket attacker: frames no honest client sends, and abrupt disconnects.

class RawAttacker : public TenantThread {
 public:
  RawAttacker(uint64_t seed, const std::string& address, Tally* tally)
      : TenantThread(seed, address, tally) {}

  void Run(Clock::time_point deadline) {
    absl::StatusOr<SocketAddress> parsed = ParseSocketAddress(address_);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    socket_address_ = *parsed;
    while (Clock::now() < deadline && !::testing::Test::HasFatalFailure()) {
      Attack(static_cast<int>(rng_() % 11));
      tally_->raw_connections++;
    }
  }

 private:
  ScopedFd Connect() {
    absl::StatusOr<ScopedFd> fd = ConnectSocket(socket_address_, 5000);
    EXPECT_TRUE(fd.ok()) << "the server stopped accepting: " << fd.status();
    if (!fd.ok()) return ScopedFd();
    // Reads below wait at most this long: the server closes a bad connection at once, but a
    // frame it is still waiting the rest of (or a valid command) keeps it open, and then the
    // attacker just leaves.
    timeval tv{0, 300 * 1000};
    ::setsockopt(fd->get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return *std::move(fd);
  }

  std::vector<uint8_t> Frame(wire::MessageType type, uint64_t sequence,
                             const std::vector<uint8_t>& payload, uint32_t declared) {
    std::vector<uint8_t> bytes(wire::kHeaderBytes);
    wire::EncodeHeader({type, sequence, declared}, bytes.data());
    bytes.insert(bytes.end(), payload.begin(), payload.end());
    return bytes;
  }
  std::vector<uint8_t> Hello(uint16_t version = wire::kWireVersion) {
    std::vector<uint8_t> payload;
    wire::EncodeHello({version, wire::Role::kTenant, ""}, &payload);
    return Frame(wire::MessageType::kHello, 0, payload, payload.size());
  }
  std::vector<uint8_t> Random(size_t size) {
    std::vector<uint8_t> bytes(size);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng_());
    return bytes;
  }
  // A valid command of a random kind, encoded (payload only).
  std::vector<uint8_t> ValidCommand() {
    Command c;
    c.kind = static_cast<CommandKind>(rng_() % static_cast<int>(CommandKind::kNumKinds));
    c.stream = 1 + rng_() % 3;
    c.size = rng_() % 64;
    c.dst = 0x7DE0'0000'0000'0000ull + (rng_() % 4096);
    c.object = rng_() % 300;
    if (c.kind == CommandKind::kLaunch) c = ReluLaunch(1, c.dst, c.dst, 4);
    std::vector<uint8_t> data(c.size, 0x11);
    if (c.kind == CommandKind::kMemcpyHtoD) c.host_src = data.data();
    if (c.kind == CommandKind::kMemcpyNow) c.host_src = data.data();
    if (c.kind == CommandKind::kMemcpyDtoH) c.host_dst = data.data();
    std::vector<uint8_t> payload;
    wire::EncodeCommand(c, &payload);
    if (wire::HasHostData(c)) payload.insert(payload.end(), data.begin(), data.end());
    return payload;
  }

  static void Send(int fd, const std::vector<uint8_t>& bytes) {
    // Errors are expected (the server may close first); MSG_NOSIGNAL inside.
    (void)WriteAll(fd, {iovec{const_cast<uint8_t*>(bytes.data()), bytes.size()}});
  }
  // Reads until the server closes (bounded by the receive timeout) or `limit` bytes.
  static void DrainUntilClosed(int fd, size_t limit = 1 << 20) {
    char buffer[4096];
    size_t total = 0;
    while (total < limit) {
      ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
      if (got <= 0) return;
      total += got;
    }
  }

  void Attack(int kind) {
    static const char* const kNames[] = {"vanish", "garbage", "oversized", "cut mid-frame", "bad version", "command before hello", "mutated commands", "random payload", "stalled payload", "half header", "leave with work queued"};
    Doing(kNames[kind]);
    ScopedFd fd = Connect();
    if (!fd.valid()) return;
    switch (kind) {
      case 0:  // connect and vanish
        break;
      case 1:  // garbage instead of a Hello
        Send(fd.get(), Random(1 + rng_() % 200));
        DrainUntilClosed(fd.get());
        break;
      case 2: {  // a header claiming more than the frame limit
        auto bytes = Frame(wire::MessageType::kHello, 0, {}, wire::kMaxPayloadBytes + 1 +
                                                                 rng_() % 1000);
        Send(fd.get(), bytes);
        DrainUntilClosed(fd.get());
        break;
      }
      case 3: {  // Hello, then a command cut off mid-frame, then gone
        Send(fd.get(), Hello());
        auto payload = ValidCommand();
        auto bytes = Frame(wire::MessageType::kCommand, 1, payload, payload.size() + 100);
        bytes.resize(wire::kHeaderBytes + rng_() % (payload.size() + 1));
        Send(fd.get(), bytes);
        break;
      }
      case 4:  // a Hello of another version
        Send(fd.get(), Hello(static_cast<uint16_t>(wire::kWireVersion + 1 + rng_() % 100)));
        DrainUntilClosed(fd.get());
        break;
      case 5: {  // a command before the Hello
        auto payload = ValidCommand();
        Send(fd.get(), Frame(wire::MessageType::kCommand, 1, payload, payload.size()));
        DrainUntilClosed(fd.get());
        break;
      }
      case 6: {  // Hello, then valid commands with random fields, then mutated ones
        Send(fd.get(), Hello());
        for (int i = 0; i < 8; ++i) {
          auto payload = ValidCommand();
          if (i >= 4) {
            for (int flips = 0; flips < 3; ++flips) {
              payload[rng_() % payload.size()] ^= static_cast<uint8_t>(1u << (rng_() % 8));
            }
          }
          Send(fd.get(), Frame(wire::MessageType::kCommand, i + 1, payload, payload.size()));
        }
        if (rng_() % 2) DrainUntilClosed(fd.get(), 4096);
        break;
      }
      case 7: {  // Hello, then a frame of random payload
        Send(fd.get(), Hello());
        auto payload = Random(rng_() % 300);
        Send(fd.get(), Frame(wire::MessageType::kCommand, 1, payload, payload.size()));
        DrainUntilClosed(fd.get());
        break;
      }
      case 8: {  // Hello, then a header declaring a big payload that never comes
        Send(fd.get(), Hello());
        auto bytes = Frame(wire::MessageType::kCommand, 1, {}, 1u << 20);
        Send(fd.get(), bytes);
        break;
      }
      case 9: {  // Hello, then half a header
        Send(fd.get(), Hello());
        auto bytes = Frame(wire::MessageType::kCommand, 1, {}, 72);
        bytes.resize(1 + rng_() % (wire::kHeaderBytes - 1));
        Send(fd.get(), bytes);
        break;
      }
      default: {  // a real client that leaves with work queued and memory held
        fd.Reset();
        Client client;
        if (!client.Connect(address_).ok()) {
          ADD_FAILURE() << "an honest connection was refused";
          return;
        }
        absl::StatusOr<uint64_t> address = client.Allocate(1 << 20);
        if (address.ok() && client.CreateStream(1).ok()) {
          for (int i = 0; i < 6; ++i) {
            (void)client.Post(ReluLaunch(1, *address, *address, (1 << 20) / 4));
          }
          std::vector<uint8_t> out(1 << 20);
          (void)client.ReadAsync(1, *address, out.data(), out.size());
          client.Disconnect();  // abrupt: nothing synchronised
        }
        break;
      }
    }
  }

  SocketAddress socket_address_;
};

// ---------------------------------------------------------------------------------------------
// The test

class RunningServer {
 public:
  RunningServer() {
    Server::Options options;
    options.listen = absl::StrCat("unix:///tmp/vgpu-stress-", ::getpid(), ".sock");
    options.memory_limit = kMemoryLimit;
    options.client_quota = kClientQuota;
    options.compute_threads = 2;
    auto server = Server::Create(options);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return;
    server_ = *std::move(server);
    thread_ = std::thread([this] { (void)server_->Serve(); });
  }
  ~RunningServer() {
    if (server_ == nullptr) return;
    server_->Stop();
    thread_.join();
  }
  bool ok() const { return server_ != nullptr; }
  Server& server() { return *server_; }

 private:
  std::unique_ptr<Server> server_;
  std::thread thread_;
};

// An honest bystander's whole job after the storm: allocate, write, relu, read back.
void ExpectBystanderRoundTrip(const std::string& address) {
  Client client;
  absl::Status connected = client.Connect(address);
  ASSERT_TRUE(connected.ok()) << "the server no longer serves: " << connected;
  absl::StatusOr<uint64_t> x = client.Allocate(4096 * 4);
  absl::StatusOr<uint64_t> y = client.Allocate(4096 * 4);
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_TRUE(client.CreateStream(1).ok());
  std::vector<float> in(4096), out(4096, 7.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = i % 2 ? float(i) : -float(i);
  ASSERT_TRUE(client.Write(1, *x, in.data(), in.size() * 4).ok());
  ASSERT_TRUE(client.Post(ReluLaunch(1, *x, *y, 4096)).ok());
  ASSERT_TRUE(client.ReadAsync(1, *y, out.data(), out.size() * 4).ok());
  ASSERT_TRUE(client.Sync(1).ok());
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], std::max(in[i], 0.0f)) << i;
}

TEST(ServerStress, TenantsDoingRandomLegalAndIllegalWorkNeverHurtEachOtherOrTheServer) {
  ::signal(SIGPIPE, SIG_IGN);
  const StressConfig config = ConfigFromEnvironment();
  RunningServer running;
  ASSERT_TRUE(running.ok());
  const std::string address = running.server().address();
  VictimAddresses victims;
  Tally tally;

  std::deque<Progress> progress;  // one per tenant thread, for the watchdog
  // A watchdog: a wedged server must fail the test with a message, not hang CI.
  std::mutex done_mu;
  std::condition_variable done_cv;
  bool done = false;
  const auto budget = std::chrono::duration<double>(config.seconds) + kWaitBound * 2;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(done_mu);
    if (!done_cv.wait_for(lock, budget, [&] { return done; })) {
      std::fprintf(stderr, "server_stress_test: the tenants did not finish within %.0f s; "
                   "the server (or a client) is wedged\n", budget.count());
      for (const Progress& p : progress) {
        std::fprintf(stderr, "  %s: step %llu, %s\n", p.name.c_str(),
                     static_cast<unsigned long long>(p.steps.load()), p.doing.load());
      }
      std::fprintf(stderr, "  server: %s\n", running.server().StatsJson().c_str());
      std::_Exit(3);
    }
  });

  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(config.seconds));
  std::vector<std::unique_ptr<HonestTenant>> honest;
  std::vector<std::unique_ptr<HostileTenant>> hostile;
  std::vector<std::unique_ptr<RawAttacker>> raw;
  std::vector<std::thread> threads;
  auto track = [&](auto* tenant, std::string name) {
    progress.emplace_back();
    progress.back().name = std::move(name);
    tenant->progress_ = &progress.back();
  };
  for (int i = 0; i < config.honest_tenants; ++i) {
    honest.push_back(std::make_unique<HonestTenant>(/*band=*/i + 1, config.seed * 101 + i,
                                                    address, &victims, &tally, config));
    track(honest.back().get(), absl::StrCat("honest ", i + 1));
    threads.emplace_back([&, t = honest.back().get()] { t->Run(deadline); });
  }
  for (int i = 0; i < config.hostile_tenants; ++i) {
    hostile.push_back(std::make_unique<HostileTenant>(i, config.seed * 103 + i, address,
                                                      &victims, &tally, config));
    track(hostile.back().get(), absl::StrCat("hostile ", i));
    threads.emplace_back([&, t = hostile.back().get()] { t->Run(deadline); });
  }
  for (int i = 0; i < config.raw_attackers; ++i) {
    raw.push_back(std::make_unique<RawAttacker>(config.seed * 107 + i, address, &tally));
    track(raw.back().get(), absl::StrCat("raw ", i));
    threads.emplace_back([&, t = raw.back().get()] { t->Run(deadline); });
  }
  for (std::thread& thread : threads) thread.join();

  // Every tenant has gone: the server reclaims everything (bounded poll).
  const auto reclaim_deadline = Clock::now() + std::chrono::seconds(20);
  while ((ServerBytesInUse(running.server()) != 0 || ServerHasClients(running.server())) &&
         Clock::now() < reclaim_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(ServerBytesInUse(running.server()), 0u) << running.server().StatsJson();
  EXPECT_FALSE(ServerHasClients(running.server())) << running.server().StatsJson();

  ExpectBystanderRoundTrip(address);
  {
    std::lock_guard<std::mutex> lock(done_mu);
    done = true;
  }
  done_cv.notify_all();
  watchdog.join();

  std::printf("server stress: %.1f s, seed %llu: %llu legal and %llu illegal commands "
              "(%llu refused as they must be), %llu result checks, %llu raw connections\n",
              config.seconds, static_cast<unsigned long long>(config.seed),
              static_cast<unsigned long long>(tally.legal.load()),
              static_cast<unsigned long long>(tally.illegal.load()),
              static_cast<unsigned long long>(tally.refused.load()),
              static_cast<unsigned long long>(tally.checks.load()),
              static_cast<unsigned long long>(tally.raw_connections.load()));
}

}  // namespace
}  // namespace vgpu
