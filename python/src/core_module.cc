// vgpu._core: connects the Python package to the plugin instance TensorFlow loaded. It finds the
// plugin among the process's loaded libraries (it never loads a second copy) and calls the
// plugin's exported C API (plugin/c_api/vgpu_c_api.h). It also holds the clients of a running
// `vgpu server` the package uses (statistics, round-trip latency), the wire-format decoder the
// fuzz test drives, `vgpu trace` (plugin/trace) and the cost of the profiling hooks with no
// profile taken (`vgpu bench`); the server itself is the vgpu-server executable.
#include <dlfcn.h>
#include <link.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "plugin/c_api/vgpu_c_api.h"
#include "plugin/common/activity.h"
#include "plugin/common/backend_address.h"
#include "plugin/protocol/wire_format.h"
#include "plugin/trace/trace_replay.h"
#include "plugin/transport/socket_transport.h"
#include "plugin/transport/socket_util.h"

namespace py = pybind11;

namespace {

constexpr char kPluginFileName[] = "libvgpu_plugin.so";

int CollectPlugin(struct dl_phdr_info* info, size_t, void* data) {
  const char* name = info->dlpi_name;
  if (name == nullptr) return 0;
  size_t length = std::strlen(name);
  size_t suffix = sizeof(kPluginFileName) - 1;
  if (length >= suffix && std::strcmp(name + length - suffix, kPluginFileName) == 0) {
    static_cast<std::vector<std::string>*>(data)->push_back(name);
  }
  return 0;
}

// The plugin TensorFlow loaded, as a dlopen handle with its C API resolved.
class Plugin {
 public:
  explicit Plugin(const std::string& path) : path_(path) {
    handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (handle_ == nullptr) {
      throw std::runtime_error("the vgpu plugin " + path + " is not loaded in this process");
    }
    auto version = reinterpret_cast<int (*)()>(::dlsym(handle_, "VGPU_ApiVersion"));
    stats_ = reinterpret_cast<size_t (*)(char*, size_t)>(::dlsym(handle_, "VGPU_StatsJson"));
    info_ = reinterpret_cast<size_t (*)(char*, size_t)>(::dlsym(handle_, "VGPU_InfoJson"));
    op_catalog_ =
        reinterpret_cast<size_t (*)(char*, size_t)>(::dlsym(handle_, "VGPU_OpCatalogJson"));
    reset_ = reinterpret_cast<void (*)()>(::dlsym(handle_, "VGPU_ResetStats"));
    mark_step_ = reinterpret_cast<void (*)()>(::dlsym(handle_, "VGPU_MarkStep"));
    if (version == nullptr || stats_ == nullptr || info_ == nullptr || op_catalog_ == nullptr ||
        reset_ == nullptr || mark_step_ == nullptr) {
      throw std::runtime_error(path + " does not export the vgpu C API");
    }
    if (version() != VGPU_C_API_VERSION) {
      throw std::runtime_error(path + " speaks vgpu C API version " + std::to_string(version()) +
                               ", this package version " + std::to_string(VGPU_C_API_VERSION) +
                               "; reinstall tensorflow-vgpu");
    }
  }
  ~Plugin() {
    if (handle_ != nullptr) ::dlclose(handle_);
  }
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  std::string StatsJson() const { return Read(stats_); }
  std::string InfoJson() const { return Read(info_); }
  std::string OpCatalogJson() const { return Read(op_catalog_); }
  void ResetStats() const { reset_(); }
  void MarkStep() const { mark_step_(); }
  const std::string& path() const { return path_; }

 private:
  static std::string Read(size_t (*fn)(char*, size_t)) {
    std::string buffer(4096, '\0');
    for (;;) {
      size_t needed = fn(buffer.data(), buffer.size());
      if (needed < buffer.size()) {
        buffer.resize(needed);
        return buffer;
      }
      buffer.assign(needed + 1, '\0');
    }
  }

  std::string path_;
  void* handle_ = nullptr;
  size_t (*stats_)(char*, size_t) = nullptr;
  size_t (*info_)(char*, size_t) = nullptr;
  size_t (*op_catalog_)(char*, size_t) = nullptr;
  void (*reset_)() = nullptr;
  void (*mark_step_)() = nullptr;
};

py::object FindLoadedPlugin() {
  std::vector<std::string> found;
  ::dl_iterate_phdr(CollectPlugin, &found);
  if (found.empty()) return py::none();
  return py::str(found.front());
}

// Asks a running server for its statistics (an observer connection presenting `token` and
// naming `tenant`, "" for the default one): what that viewer may see (server.h, StatsViewer).
// Raises on failure.
std::string QueryServerStats(const std::string& address, const std::string& token,
                             int timeout_ms, const std::string& tenant) {
  using namespace vgpu;
  absl::StatusOr<SocketAddress> parsed = ParseSocketAddress(address);
  if (!parsed.ok()) throw std::invalid_argument(std::string(parsed.status().message()));
  absl::StatusOr<ScopedFd> fd = ConnectSocket(*parsed, timeout_ms);
  if (!fd.ok()) throw std::runtime_error(std::string(fd.status().message()));
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(fd->get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::vector<uint8_t> hello;
  wire::EncodeHello({wire::kWireVersion, wire::Role::kObserver, token, tenant}, &hello);
  absl::Status s = WriteFrame(fd->get(), wire::MessageType::kHello, 0,
                              {iovec{hello.data(), hello.size()}});
  if (!s.ok()) throw std::runtime_error(std::string(s.message()));
  // A server that refuses the Hello (a wrong token) may have closed the connection before the
  // request arrives: its Refused frame, read next, says why better than the failed write.
  const absl::Status request = WriteFrame(fd->get(), wire::MessageType::kStatsRequest, 1, {});
  FrameReader reader(fd->get());
  absl::StatusOr<wire::FrameHeader> header = reader.ReadHeader();
  if (!header.ok()) {
    throw std::runtime_error(std::string((request.ok() ? header.status() : request).message()));
  }
  std::vector<uint8_t> payload(header->payload_length);
  s = reader.ReadExact(payload.data(), payload.size());
  if (!s.ok()) throw std::runtime_error(std::string(s.message()));
  absl::StatusOr<std::string> text = header->type == wire::MessageType::kStatsReply
                                         ? wire::DecodeDocument(payload)
                                         : wire::DecodeString(payload);
  if (!text.ok()) throw std::runtime_error(std::string(text.status().message()));
  if (header->type == wire::MessageType::kRefused) {
    throw std::runtime_error("the server refused the connection: " + *text);
  }
  return *text;
}

// Decodes one frame (header + payload) as the server would; for the fuzz test. Returns the
// message type name; raises ValueError for anything the decoders reject.
std::string DecodeFrame(const py::bytes& frame) {
  using namespace vgpu;
  std::string bytes = frame;
  absl::Span<const uint8_t> span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  absl::StatusOr<wire::FrameHeader> header = wire::DecodeHeader(span);
  if (!header.ok()) throw py::value_error(std::string(header.status().message()));
  if (span.size() - wire::kHeaderBytes != header->payload_length) {
    throw py::value_error("payload length does not match the header");
  }
  absl::Span<const uint8_t> payload = span.subspan(wire::kHeaderBytes);
  absl::Status status;
  switch (header->type) {
    case wire::MessageType::kHello: status = wire::DecodeHello(payload).status(); break;
    case wire::MessageType::kWelcome: status = wire::DecodeWelcome(payload).status(); break;
    case wire::MessageType::kNotify: status = wire::DecodeNotify(payload).status(); break;
    case wire::MessageType::kReply: status = wire::DecodeReply(payload, nullptr).status(); break;
    case wire::MessageType::kCommand:
      status = wire::DecodeCommand(
                   std::make_shared<std::vector<uint8_t>>(payload.begin(), payload.end()))
                   .status();
      break;
    case wire::MessageType::kStatsReply: status = wire::DecodeDocument(payload).status(); break;
    default: status = wire::DecodeString(payload).status(); break;
  }
  if (!status.ok()) throw py::value_error(std::string(status.message()));
  return std::to_string(static_cast<int>(header->type));
}

// Round-trip latency of a server: `iterations` kMemoryInfo calls over a real client transport.
// Returns the seconds of each call.
std::vector<double> PingPong(const std::string& address, int iterations,
                             const std::string& token) {
  using namespace vgpu;
  absl::StatusOr<std::unique_ptr<SocketTransport>> transport =
      SocketTransport::Connect(address, token, nullptr, nullptr);
  if (!transport.ok()) throw std::runtime_error(std::string(transport.status().message()));
  std::vector<double> seconds;
  seconds.reserve(iterations);
  for (int i = 0; i < iterations; ++i) {
    Command command;
    command.kind = CommandKind::kMemoryInfo;
    auto start = std::chrono::steady_clock::now();
    Reply reply = (*transport)->Call(command);
    auto stop = std::chrono::steady_clock::now();
    if (!reply.status.ok()) throw std::runtime_error(std::string(reply.status.message()));
    seconds.push_back(std::chrono::duration<double>(stop - start).count());
  }
  return seconds;
}

// `vgpu trace replay|stats ...` (trace/trace_replay.h): (exit code, stdout text, stderr text).
std::tuple<int, std::string, std::string> RunTraceTool(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int code = vgpu::trace::RunTraceTool(args, out, err);
  return {code, out.str(), err.str()};
}

// Nanoseconds per op of what the client runs for the profiler on every op kernel and command
// while no profile is taken (plugin/common/activity.h): the op kernel's ScopedOp, the command's
// tag check (DeviceClient::MakeCommand), a call's and the socket transport's checks. The same
// code as the plugin's, on this module's copy of the (disabled) activity log.
double ActivityHooksOffNs(int64_t iterations) {
  const vgpu::activity::NameId op = vgpu::activity::Intern("Sin");
  const vgpu::activity::NameId op_name = vgpu::activity::Intern("sin");
  vgpu::Command command;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iterations; ++i) {
    vgpu::activity::ScopedOp scoped(op, op_name, 0);
    if (vgpu::activity::Enabled()) command.activity.recorded = true;
    bool recorded = command.activity.recorded && vgpu::activity::Enabled();
    asm volatile("" : "+r"(recorded) : : "memory");  // keep every check in the loop
  }
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(stop - start).count() /
         static_cast<double>(iterations);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "Bridge from the vgpu package to the loaded TensorFlow plugin";
  m.attr("PLUGIN_FILE_NAME") = kPluginFileName;
  m.attr("C_API_VERSION") = VGPU_C_API_VERSION;
  m.def("find_loaded_plugin", &FindLoadedPlugin,
        "Path of the loaded libvgpu_plugin.so, or None if TensorFlow has not loaded it.");
  py::class_<Plugin>(m, "Plugin")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("path", &Plugin::path)
      .def("stats_json", &Plugin::StatsJson, py::call_guard<py::gil_scoped_release>())
      .def("info_json", &Plugin::InfoJson, py::call_guard<py::gil_scoped_release>())
      .def("op_catalog_json", &Plugin::OpCatalogJson, py::call_guard<py::gil_scoped_release>())
      .def("reset_stats", &Plugin::ResetStats, py::call_guard<py::gil_scoped_release>())
      .def("mark_step", &Plugin::MarkStep, py::call_guard<py::gil_scoped_release>());
  m.def("ping_pong", &PingPong, py::arg("address"), py::arg("iterations") = 10000,
        py::arg("token") = "", py::call_guard<py::gil_scoped_release>(),
        "Seconds per round trip of `iterations` calls to a vgpu server (the transport latency).");
  m.def("decode_frame", &DecodeFrame, py::arg("frame"),
        "Decodes one wire frame as the server would (for fuzzing); ValueError if malformed.");
  m.def("run_trace_tool", &RunTraceTool, py::arg("args"),
        py::call_guard<py::gil_scoped_release>(),
        "`vgpu trace` with its arguments ([\"replay\"|\"stats\", FILE, flags...]): "
        "(exit code, output, errors).");
  m.def("activity_hooks_off_ns", &ActivityHooksOffNs, py::arg("iterations") = 10'000'000,
        py::call_guard<py::gil_scoped_release>(),
        "Nanoseconds per op of the profiling hooks while no profile is taken.");
  m.def("query_server_stats", &QueryServerStats, py::arg("address"), py::arg("token") = "",
        py::arg("timeout_ms") = 5000, py::arg("tenant") = "",
        py::call_guard<py::gil_scoped_release>(),
        "The JSON statistics of a running vgpu server, as the holder of `token` naming "
        "`tenant` may see them: everything with the operator token (or on a server without "
        "tokens), else the server's aggregates and that tenant's own (docs/security.md).");
}
