// ReconnectingTransport (see reconnecting_transport.h).
#include "plugin/transport/reconnecting_transport.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "plugin/common/log.h"

namespace vgpu {
namespace {

// Calls that wait for (or ask about) work already queued: on a dead connection they report the
// loss instead of opening a new session, where they would wrongly succeed.
bool AsksAboutQueuedWork(CommandKind kind) {
  return kind == CommandKind::kSynchronizeStream || kind == CommandKind::kSynchronizeDevice ||
         kind == CommandKind::kStreamStatus || kind == CommandKind::kDestroyStream;
}

// Commands that only release what a session held: on a dead connection there is nothing left
// to release, and they must not open a new session (or wait for one) by themselves.
bool OnlyReleases(CommandKind kind) {
  return kind == CommandKind::kDestroyEvent || kind == CommandKind::kDescriptorDestroy;
}

// Addresses given to TensorFlow for allocations made after a reconnection whose server address
// happens to overlap an address TensorFlow still holds from before: outside the range servers
// hand out (device addresses start 0x7DE...), never dereferenceable, never sent as they are.
constexpr uint64_t kMintedAddressBase = 0x7C00'0000'0000'0000ull;
constexpr uint64_t kMintedAlignment = 1ull << 16;

}  // namespace

absl::StatusOr<std::unique_ptr<ReconnectingTransport>> ReconnectingTransport::Connect(
    const std::string& endpoint, const std::string& token, CompletionSink* sink,
    wire::Welcome* welcome, int handshake_timeout_ms, int silence_timeout_ms,
    const std::string& tenant) {
  absl::StatusOr<std::unique_ptr<SocketTransport>> first =
      SocketTransport::Connect(endpoint, token, sink, welcome, handshake_timeout_ms,
                               silence_timeout_ms, /*shm_bytes=*/-1, tenant);
  if (!first.ok()) return first.status();
  return std::unique_ptr<ReconnectingTransport>(
      new ReconnectingTransport(endpoint, token, tenant, sink, handshake_timeout_ms,
                                silence_timeout_ms, *std::move(first)));
}

ReconnectingTransport::ReconnectingTransport(std::string endpoint, std::string token,
                                             std::string tenant, CompletionSink* sink,
                                             int handshake_timeout_ms, int silence_timeout_ms,
                                             std::unique_ptr<SocketTransport> first)
    : endpoint_(std::move(endpoint)),
      token_(std::move(token)),
      tenant_(std::move(tenant)),
      sink_(sink),
      handshake_timeout_ms_(handshake_timeout_ms),
      silence_timeout_ms_(silence_timeout_ms),
      current_(first.get()),
      next_minted_address_(kMintedAddressBase) {
  connections_.push_back(std::move(first));
}

absl::StatusOr<SocketTransport*> ReconnectingTransport::Live() {
  SocketTransport* connection = current_.load(std::memory_order_acquire);
  if (!connection->dead()) return connection;
  std::lock_guard<std::mutex> reconnect_lock(reconnect_mu_);
  connection = current_.load(std::memory_order_acquire);
  if (!connection->dead()) return connection;  // another thread reconnected meanwhile
  const absl::Status lost = connection->DeadStatus();
  absl::StatusOr<std::unique_ptr<SocketTransport>> fresh =
      SocketTransport::Connect(endpoint_, token_, sink_, nullptr, handshake_timeout_ms_,
                               silence_timeout_ms_, /*shm_bytes=*/-1, tenant_);
  if (!fresh.ok()) {
    return absl::Status(fresh.status().code(),
                        absl::StrCat(fresh.status().message(), " (reconnecting after: ",
                                     lost.message(), ")"));
  }
  SocketTransport* next = fresh->get();
  // The new session knows nothing: create the client's streams and allocations again. Nobody
  // else uses `next` yet, and state_mu_ keeps Track/Translate out meanwhile.
  uint64_t lost_bytes = 0;
  size_t reallocated = 0;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    for (const auto& [stream, device] : streams_) {
      Command create;
      create.kind = CommandKind::kCreateStream;
      create.device = device;
      create.stream = stream;
      Reply reply = next->Call(std::move(create));
      if (!reply.status.ok()) {
        Log(LogLevel::kWarning, absl::StrCat("vgpu server ", endpoint_, ": stream ", stream,
                                             " could not be created again: ",
                                             reply.status.message()));
      }
    }
    for (auto& [address, allocation] : allocations_) {
      lost_bytes += allocation.size;
      Command allocate;
      allocate.kind = CommandKind::kAllocate;
      allocate.device = allocation.device;
      allocate.size = allocation.size;
      Reply reply = next->Call(std::move(allocate));
      allocation.server_address = reply.status.ok() ? reply.value : 0;
      if (reply.status.ok()) {
        ++reallocated;
      } else {
        Log(LogLevel::kWarning, absl::StrCat("vgpu server ", endpoint_, ": ", allocation.size,
                                             " bytes could not be allocated again: ",
                                             reply.status.message()));
      }
    }
    if (!allocations_.empty()) remapped_.store(true, std::memory_order_release);
  }
  connections_.push_back(*std::move(fresh));
  current_.store(next, std::memory_order_release);
  const int session = sessions_.fetch_add(1) + 1;
  Log(LogLevel::kWarning,
      absl::StrCat("vgpu server ", endpoint_, ": reconnected (session ", session, ") after: ",
                   lost.message(), ". The device memory of the lost session (", lost_bytes,
                   " bytes) is gone: tensors made before hold undefined data; ", reallocated,
                   " of ", allocations_.size(), " allocations were made again for new work"));
  return next;
}

uint64_t ReconnectingTransport::TranslateAddress(uint64_t address) {
  if (address == 0) return 0;
  auto it = allocations_.upper_bound(address);
  if (it == allocations_.begin()) return address;
  --it;
  const uint64_t offset = address - it->first;
  if (offset >= std::max<uint64_t>(it->second.size, 1)) return address;  // not inside it
  if (it->second.server_address == 0) return 0;  // lost: the server refuses address 0
  return it->second.server_address + offset;
}

void ReconnectingTransport::Translate(Command& command) {
  std::lock_guard<std::mutex> lock(state_mu_);
  if (command.kind == CommandKind::kAllocate) return;
  command.dst = TranslateAddress(command.dst);
  command.src = TranslateAddress(command.src);
  for (BufferArg& buffer : command.buffers) buffer.address = TranslateAddress(buffer.address);
}

void ReconnectingTransport::Track(const Command& command, Reply& reply) {
  switch (command.kind) {
    case CommandKind::kCreateStream:
      if (reply.status.ok()) {
        std::lock_guard<std::mutex> lock(state_mu_);
        streams_[command.stream] = command.device;
      }
      return;
    case CommandKind::kDestroyStream: {
      std::lock_guard<std::mutex> lock(state_mu_);
      streams_.erase(command.stream);
      return;
    }
    case CommandKind::kAllocate:
      if (reply.status.ok()) {
        std::lock_guard<std::mutex> lock(state_mu_);
        const uint64_t server_address = reply.value;
        const uint64_t size = command.size > 0 ? command.size : 1;
        uint64_t client_address = server_address;
        if (remapped_.load(std::memory_order_relaxed)) {
          // TensorFlow may still hold an address from before in this range: give it another.
          auto after = allocations_.lower_bound(server_address);
          bool overlaps = after != allocations_.end() && after->first < server_address + size;
          if (after != allocations_.begin()) {
            auto before = std::prev(after);
            overlaps = overlaps || before->first + std::max<uint64_t>(before->second.size, 1) >
                                       server_address;
          }
          if (overlaps) {
            client_address = next_minted_address_;
            next_minted_address_ += (size + kMintedAlignment - 1) / kMintedAlignment *
                                    kMintedAlignment;
          }
        }
        allocations_[client_address] = Allocation{command.device, command.size, server_address};
        reply.value = client_address;
      }
      return;
    default:
      return;
  }
}

absl::Status ReconnectingTransport::Post(Command command) {
  if (OnlyReleases(command.kind) && current_.load(std::memory_order_acquire)->dead()) {
    return absl::OkStatus();
  }
  absl::StatusOr<SocketTransport*> connection = Live();
  if (!connection.ok()) return connection.status();
  if (remapped_.load(std::memory_order_acquire)) Translate(command);
  return (*connection)->Post(std::move(command));
}

Reply ReconnectingTransport::Call(Command command) {
  SocketTransport* current = current_.load(std::memory_order_acquire);
  if (current->dead()) {
    if (AsksAboutQueuedWork(command.kind)) {
      Reply reply;
      reply.status = current->DeadStatus();  // the loss is reported where work is waited for
      Track(command, reply);
      return reply;
    }
    if (OnlyReleases(command.kind)) return Reply{};
    if (command.kind == CommandKind::kFree) {  // the memory went with the session
      std::lock_guard<std::mutex> lock(state_mu_);
      allocations_.erase(command.dst);
      return Reply{};
    }
  }
  absl::StatusOr<SocketTransport*> connection = Live();
  if (!connection.ok()) {
    Reply reply;
    reply.status = connection.status();
    return reply;
  }
  const Command original_identity = [&] {
    Command identity;  // what Track needs (kind, device, stream, size, dst as TF holds it)
    identity.kind = command.kind;
    identity.device = command.device;
    identity.stream = command.stream;
    identity.size = command.size;
    identity.dst = command.dst;
    return identity;
  }();
  if (remapped_.load(std::memory_order_acquire)) Translate(command);
  Reply reply = (*connection)->Call(std::move(command));
  if (original_identity.kind == CommandKind::kFree && reply.status.ok()) {
    std::lock_guard<std::mutex> lock(state_mu_);
    allocations_.erase(original_identity.dst);
  }
  Track(original_identity, reply);
  return reply;
}

WireCounters ReconnectingTransport::wire_counters() const {
  std::lock_guard<std::mutex> lock(reconnect_mu_);
  WireCounters counters;
  for (const auto& connection : connections_) counters += connection->wire_counters();
  return counters;
}

}  // namespace vgpu
