// Parsing of remote backend addresses (see backend_address.h).
#include "plugin/common/backend_address.h"

#include <sys/un.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace vgpu {

absl::StatusOr<SocketAddress> ParseSocketAddress(absl::string_view text) {
  SocketAddress address;
  absl::string_view rest = text;
  size_t query = rest.find('?');
  if (query != absl::string_view::npos) {
    absl::string_view option = rest.substr(query + 1);
    rest = rest.substr(0, query);
    uint32_t device = 0;
    if (!absl::StartsWith(option, "device=") ||
        !absl::SimpleAtoi(option.substr(7), &device) || device > 255) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", text, "': the only option is ?device=N (N a device index of the server)"));
    }
    address.device = device;
  }
  address.endpoint = std::string(rest);
  if (absl::StartsWith(rest, "unix://")) {
    address.kind = SocketAddress::Kind::kUnix;
    address.path = std::string(rest.substr(7));
    if (address.path.empty() || address.path[0] != '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", text, "': a Unix socket address needs an absolute path, e.g. unix:///tmp/vgpu.sock"));
    }
    if (address.path.size() >= sizeof(sockaddr_un::sun_path)) {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "': the socket path is too long"));
    }
    return address;
  }
  if (absl::StartsWith(rest, "tcp://")) {
    address.kind = SocketAddress::Kind::kTcp;
    absl::string_view hostport = rest.substr(6);
    size_t colon = hostport.rfind(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "': a TCP address is tcp://host:port"));
    }
    absl::string_view host = hostport.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    uint32_t port = 0;
    if (!absl::SimpleAtoi(hostport.substr(colon + 1), &port) || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text, "': the port must be a number from 0 to 65535"));
    }
    address.host = std::string(host);
    address.port = static_cast<uint16_t>(port);
    return address;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "'", text, "' is not a socket address; expected unix:///path or tcp://host:port"));
}

}  // namespace vgpu
