// A remote backing executor that survives a lost connection: the transport the plugin gives its
// devices for a `vgpu server`. It holds one SocketTransport at a time. When that connection dies
// (the server went away, or was silent past VGPU_TIMEOUT), whatever waited on it gets the error
// (Unavailable / DeadlineExceeded, naming the server); synchronisations asked for afterwards get
// the same error, so the loss is reported wherever work is waited for; and the next NEW work
// (any other command) opens a new session: the streams the client holds are created again, and
// every live allocation is allocated again, its old address translated to the new one from then
// on (TensorFlow's allocator keeps its regions, so new tensors land in them and work). The old
// session's memory is gone: tensors made before the loss hold undefined bytes.
//
// Cost while nothing was lost: one atomic load per command (is the connection alive, was memory
// re-mapped). After a reconnection with re-mapped memory, addresses in commands are translated
// through a small ordered map (one entry per allocation TensorFlow's allocator holds).
//
// Not carried into a new session: forward-mode descriptors (VGPU_DESCRIPTOR_MODE=forward) and
// events recorded before the loss (they completed with the error).
#ifndef VGPU_TRANSPORT_RECONNECTING_TRANSPORT_H_
#define VGPU_TRANSPORT_RECONNECTING_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "plugin/transport/socket_transport.h"
#include "plugin/transport/transport.h"

namespace vgpu {

class ReconnectingTransport final : public Transport {
 public:
  // Connects the first session (see SocketTransport::Connect); the parameters are kept for
  // reconnections. `sink` must outlive the transport. Blocks at most ~`handshake_timeout_ms`.
  static absl::StatusOr<std::unique_ptr<ReconnectingTransport>> Connect(
      const std::string& endpoint, const std::string& token, CompletionSink* sink,
      wire::Welcome* welcome, int handshake_timeout_ms, int silence_timeout_ms,
      const std::string& tenant = "");
  // Closes the connection (the server reclaims the session).
  ~ReconnectingTransport() override = default;

  // Thread-safe. New work on a dead connection first reconnects (blocking up to the handshake
  // timeout); if that fails, the command fails with the reason.
  absl::Status Post(Command command) override;
  Reply Call(Command command) override;
  std::string Describe() const override { return endpoint_; }
  bool DeliversNotificationsInline() const override { return false; }
  bool Lost() const override { return current_.load()->dead(); }
  bool CapturesHostDataWhenPosted() const override { return true; }

  // Frames written over every session so far. Thread-safe.
  WireCounters wire_counters() const override;
  // Sessions opened so far (1 + successful reconnections). Thread-safe.
  int sessions() const { return sessions_.load(); }

 private:
  struct Allocation {
    uint32_t device = 0;
    uint64_t size = 0;
    uint64_t server_address = 0;  // in the current session; 0: lost (re-allocation failed)
  };

  ReconnectingTransport(std::string endpoint, std::string token, std::string tenant,
                        CompletionSink* sink, int handshake_timeout_ms, int silence_timeout_ms,
                        std::unique_ptr<SocketTransport> first);
  // The live connection for new work: the current one, or a new session if it died. Errors
  // say why no session could be opened.
  absl::StatusOr<SocketTransport*> Live();
  // Rewrites the device addresses in `command` from what TensorFlow holds to the current
  // session's. Only called once memory was re-mapped.
  void Translate(Command& command);
  uint64_t TranslateAddress(uint64_t address);  // state_mu_ held
  // Records streams and allocations created/destroyed by a successful call.
  void Track(const Command& command, Reply& reply);

  const std::string endpoint_;
  const std::string token_;
  const std::string tenant_;  // VGPU_TENANT, carried by every reconnection's Hello
  CompletionSink* const sink_;
  const int handshake_timeout_ms_;
  const int silence_timeout_ms_;

  std::atomic<SocketTransport*> current_;
  std::atomic<bool> remapped_{false};
  std::atomic<int> sessions_{1};

  mutable std::mutex reconnect_mu_;  // one reconnection at a time
  // Every connection ever made; dead ones stay (closed, their reader ended) so that a thread
  // still inside one of them never touches freed memory.
  std::vector<std::unique_ptr<SocketTransport>> connections_ ABSL_GUARDED_BY(reconnect_mu_);

  std::mutex state_mu_;
  // Stream id -> device.
  absl::flat_hash_map<uint64_t, uint32_t> streams_ ABSL_GUARDED_BY(state_mu_);
  // By the address TensorFlow holds.
  std::map<uint64_t, Allocation> allocations_ ABSL_GUARDED_BY(state_mu_);
  uint64_t next_minted_address_;
};

}  // namespace vgpu

#endif  // VGPU_TRANSPORT_RECONNECTING_TRANSPORT_H_
