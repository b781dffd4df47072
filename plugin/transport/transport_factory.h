// Opens the transport an address names, chosen by the address's scheme: "inproc" (a session on
// an executor in this process), "unix://" and "tcp://" (a `vgpu server`). A new transport is one
// opener registered under its scheme (RegisterTransportScheme); the client runtime only calls
// OpenTransport. (VGPU_BACKEND accepts only the built-in schemes today: config.cc and
// plugin_runtime.cc parse it.) See docs/architecture.md, "Adding a transport".
#ifndef VGPU_TRANSPORT_TRANSPORT_FACTORY_H_
#define VGPU_TRANSPORT_TRANSPORT_FACTORY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "plugin/backend/executor_session.h"
#include "plugin/transport/transport.h"

namespace vgpu {

// What opening a transport needs besides the address.
struct TransportContext {
  CompletionSink* sink = nullptr;  // receives the session's notifications; outlives the transport
  std::string token;               // presented to servers that require one
  std::string tenant;              // VGPU_TENANT: the name servers group this client under
  int handshake_timeout_ms = 5000;
  int silence_timeout_ms = 0;  // VGPU_TIMEOUT for remote waits; 0: wait forever
  // "inproc": opens a session on the executor that serves this process's in-process devices
  // (the caller creates it: one executor for all of them). Unset: "inproc" is refused.
  std::function<absl::StatusOr<std::unique_ptr<ExecutorSession>>(CompletionSink*)>
      open_inproc_session;
  int inproc_device_count = 0;       // devices of that executor
  uint64_t inproc_memory_limit = 0;  // per device
};

// An open transport and what the executor behind it offers this client.
struct OpenedTransport {
  std::unique_ptr<Transport> transport;
  uint32_t device_count = 0;
  uint64_t memory_limit = 0;  // per device, as granted to this client (a server's quota applies)
};

using TransportOpener = std::function<absl::StatusOr<OpenedTransport>(
    absl::string_view endpoint, const TransportContext& context)>;

// The scheme of `endpoint`: "inproc", "unix", "tcp", ... (the text before "://", or the whole
// address when it has none).
std::string TransportScheme(absl::string_view endpoint);

// Opens `endpoint` (an address without ?device) with the opener of its scheme. InvalidArgument
// naming the known schemes when none is registered; the opener's error otherwise (e.g.
// Unavailable for a server that does not answer). Blocking: a remote opener connects and
// completes the handshake. Thread-safe.
absl::StatusOr<OpenedTransport> OpenTransport(absl::string_view endpoint,
                                              const TransportContext& context);

// Registers `opener` for `scheme`; AlreadyExists if taken. Thread-safe.
absl::Status RegisterTransportScheme(std::string scheme, TransportOpener opener);

}  // namespace vgpu

#endif  // VGPU_TRANSPORT_TRANSPORT_FACTORY_H_
