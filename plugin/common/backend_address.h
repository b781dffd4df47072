// Backend addresses of remote backing executors: unix:///abs/path and tcp://host:port, each with
// an optional ?device=N. Parsed in one place for the configuration, the transport and the server.
#ifndef VGPU_COMMON_BACKEND_ADDRESS_H_
#define VGPU_COMMON_BACKEND_ADDRESS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vgpu {

struct SocketAddress {
  enum class Kind { kUnix, kTcp } kind = Kind::kUnix;
  std::string path;   // kUnix
  std::string host;   // kTcp
  uint16_t port = 0;  // kTcp
  uint32_t device = 0;  // ?device=N: the server's device this address names
  // The address without ?device (identifies one server: one connection per server).
  std::string endpoint;
};

// Parses "unix:///abs/path" or "tcp://host:port" (host: name, IPv4, or [IPv6]), each with an
// optional "?device=N". InvalidArgument with a message saying what is wrong.
absl::StatusOr<SocketAddress> ParseSocketAddress(absl::string_view text);

}  // namespace vgpu

#endif  // VGPU_COMMON_BACKEND_ADDRESS_H_
