// The transport factory (see transport_factory.h): the built-in schemes and the registry.
#include "plugin/transport/transport_factory.h"

#include <mutex>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/transport/inproc_transport.h"
#include "plugin/transport/reconnecting_transport.h"

namespace vgpu {
namespace {

absl::StatusOr<OpenedTransport> OpenInproc(absl::string_view endpoint,
                                           const TransportContext& context) {
  if (endpoint != "inproc") {
    return absl::InvalidArgumentError(
        absl::StrCat("'", endpoint, "': the in-process transport takes no path"));
  }
  if (!context.open_inproc_session) {
    return absl::FailedPreconditionError("no in-process executor to open a session on");
  }
  absl::StatusOr<std::unique_ptr<ExecutorSession>> session =
      context.open_inproc_session(context.sink);
  if (!session.ok()) return session.status();
  OpenedTransport opened;
  opened.transport = std::make_unique<InprocTransport>(*std::move(session));
  opened.device_count = static_cast<uint32_t>(context.inproc_device_count);
  opened.memory_limit = context.inproc_memory_limit;
  return opened;
}

// unix:// and tcp://: a `vgpu server`, reconnecting for new work after a failure.
absl::StatusOr<OpenedTransport> OpenServer(absl::string_view endpoint,
                                           const TransportContext& context) {
  wire::Welcome welcome;
  absl::StatusOr<std::unique_ptr<ReconnectingTransport>> transport =
      ReconnectingTransport::Connect(std::string(endpoint), context.token, context.sink,
                                     &welcome, context.handshake_timeout_ms,
                                     context.silence_timeout_ms, context.tenant);
  if (!transport.ok()) return transport.status();
  OpenedTransport opened;
  opened.transport = *std::move(transport);
  opened.device_count = welcome.device_count;
  // What the server grants this client is the device memory it may use.
  opened.memory_limit = welcome.memory_limit;
  if (welcome.client_quota > 0 && welcome.client_quota < opened.memory_limit) {
    opened.memory_limit = welcome.client_quota;
  }
  return opened;
}

struct Schemes {
  std::mutex mu;
  absl::flat_hash_map<std::string, TransportOpener> openers;  // guarded by mu
  std::vector<std::string> order;                             // guarded by mu
};

Schemes& GetSchemes() {
  static Schemes* schemes = [] {
    auto* s = new Schemes();  // intentionally never destroyed
    for (auto& [name, opener] : std::vector<std::pair<std::string, TransportOpener>>{
             {"inproc", OpenInproc}, {"unix", OpenServer}, {"tcp", OpenServer}}) {
      s->openers.emplace(name, opener);
      s->order.push_back(name);
    }
    return s;
  }();
  return *schemes;
}

}  // namespace

std::string TransportScheme(absl::string_view endpoint) {
  const size_t separator = endpoint.find("://");
  return std::string(separator == absl::string_view::npos ? endpoint
                                                         : endpoint.substr(0, separator));
}

absl::StatusOr<OpenedTransport> OpenTransport(absl::string_view endpoint,
                                              const TransportContext& context) {
  TransportOpener opener;
  std::string known;
  {
    Schemes& schemes = GetSchemes();
    std::lock_guard<std::mutex> lock(schemes.mu);
    auto it = schemes.openers.find(TransportScheme(endpoint));
    if (it != schemes.openers.end()) {
      opener = it->second;
    } else {
      known = absl::StrJoin(schemes.order, ", ");
    }
  }
  if (!opener) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", endpoint, "' names no known transport; the schemes are: ", known));
  }
  return opener(endpoint, context);
}

absl::Status RegisterTransportScheme(std::string scheme, TransportOpener opener) {
  Schemes& schemes = GetSchemes();
  std::lock_guard<std::mutex> lock(schemes.mu);
  if (schemes.openers.contains(scheme)) {
    return absl::AlreadyExistsError(
        absl::StrCat("a transport for scheme '", scheme, "' is already registered"));
  }
  schemes.openers.emplace(scheme, std::move(opener));
  schemes.order.push_back(std::move(scheme));
  return absl::OkStatus();
}

}  // namespace vgpu
