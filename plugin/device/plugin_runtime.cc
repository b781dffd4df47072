// Building the plugin's process-wide state (see plugin_runtime.h).
#include "plugin/device/plugin_runtime.h"

#include <algorithm>
#include <chrono>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/backend/executor_registry.h"
#include "plugin/common/backend_address.h"
#include "plugin/common/log.h"
#include "plugin/device/tf_version.h"
#include "plugin/transport/transport_factory.h"

namespace vgpu {
namespace {

// The most a connection's handshake may take (at load, and when new work reconnects).
constexpr int kHandshakeTimeoutMs = 5000;

std::string JsonString(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrCat("\\u00", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace

PluginRuntime& PluginRuntime::Get() {
  static PluginRuntime* runtime = new PluginRuntime();  // intentionally never destroyed
  return *runtime;
}

DeviceClient* PluginRuntime::device(int ordinal) const {
  if (ordinal < 0 || ordinal >= device_count()) return nullptr;
  return devices_[ordinal].get();
}

void PluginRuntime::Decline(std::string reason) {
  decline_reason_ = std::move(reason);
  devices_.clear();
  tracing_transports_.clear();
  transports_.clear();
  inproc_executor_.reset();
  Log(LogLevel::kError, absl::StrCat("no virtual GPU is offered: ", decline_reason_));
}

PluginRuntime::PluginRuntime() {
  absl::StatusOr<Config> config = LoadConfigFromEnvironment();
  if (!config.ok()) {
    Decline(std::string(config.status().message()));
    return;
  }
  config_ = *std::move(config);

  if (std::optional<std::string> running = RunningTensorFlowVersion()) {
    absl::Status compatible = CheckTensorFlowVersion(VGPU_BUILT_AGAINST_TF, *running);
    if (!compatible.ok()) {
      Decline(std::string(compatible.message()));
      return;
    }
  } else {
    Log(LogLevel::kInfo, "could not determine the running TensorFlow version");
  }

  // An executor name this build does not offer is refused even when every device is remote:
  // the user asked for something that does not exist.
  bool executor_known = false;
  for (const ExecutorRegistration& r : RegisteredExecutors()) {
    executor_known |= r.name == config_.executor;
  }
  if (!executor_known) {
    Decline(absl::StrCat("VGPU_EXECUTOR='", config_.executor,
                         "' is not an executor of this build; it offers: ",
                         RegisteredExecutorNames()));
    return;
  }

  hub_ = std::make_unique<NotificationHub>();
  // In-process devices share one executor (device-to-device copies stay inside it); remote
  // devices share one connection per server (address without ?device). Each distinct endpoint
  // is opened once, by the transport of its scheme (transport/transport_factory.h).
  int inproc_devices = 0;
  for (const std::string& backend : config_.backends) inproc_devices += backend == "inproc";
  TransportContext context;
  context.sink = hub_.get();
  if (!config_.trace_path.empty()) {
    trace::TraceHeader header;
    header.device_count = static_cast<uint32_t>(config_.device_count);
    header.memory_limit = config_.memory_limit_bytes;
    header.created_unix_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count());
    header.producer = absl::StrCat("tensorflow-vgpu ", VGPU_VERSION);
    std::vector<std::string> backends;
    for (const std::string& backend : config_.backends) {
      backends.push_back(backend == "inproc" ? absl::StrCat("inproc (", config_.executor, ")")
                                             : backend);
    }
    header.backends = absl::StrJoin(backends, ", ");
    absl::StatusOr<std::unique_ptr<trace::TraceRecorder>> recorder =
        trace::TraceRecorder::Create(config_.trace_path, header);
    if (!recorder.ok()) {
      Decline(absl::StrCat("VGPU_TRACE: ", recorder.status().message()));
      return;
    }
    trace_recorder_ = *std::move(recorder);
    trace_sink_ = std::make_unique<trace::TracingSink>(trace_recorder_.get(), hub_.get());
    context.sink = trace_sink_.get();
  }
  context.token = config_.token;
  context.tenant = config_.tenant;
  // VGPU_TIMEOUT bounds every wait for a silent server, and the handshake of a new session.
  context.silence_timeout_ms =
      config_.timeout_seconds > 0 ? std::max(1, static_cast<int>(config_.timeout_seconds * 1000))
                                  : 0;
  context.handshake_timeout_ms = context.silence_timeout_ms > 0
                                     ? std::min(kHandshakeTimeoutMs, context.silence_timeout_ms)
                                     : kHandshakeTimeoutMs;
  if (inproc_devices > 0) {
    ExecutorOptions options;
    options.device_count = inproc_devices;
    options.memory_limit_per_device = config_.memory_limit_bytes;
    options.compute_threads = config_.compute_threads;
    if (config_.inline_launch_bytes.has_value()) {
      options.session_limits.inline_launch_bytes = *config_.inline_launch_bytes;
    }
    options.session_limits.inline_copies = true;  // the submitting thread is TensorFlow's
    options.session_limits.one_queue_per_device = config_.one_queue_per_device;
    absl::StatusOr<std::unique_ptr<BackingExecutor>> executor =
        CreateExecutor(config_.executor, options);
    if (!executor.ok()) {
      Decline(absl::StrCat("VGPU_EXECUTOR: the in-process backing executor could not start: ",
                           executor.status().message()));
      return;
    }
    inproc_executor_ = *std::move(executor);
    context.open_inproc_session = [this](CompletionSink* sink)
        -> absl::StatusOr<std::unique_ptr<ExecutorSession>> {
      absl::StatusOr<std::unique_ptr<ExecutorSession>> session =
          inproc_executor_->OpenSession(sink);
      if (session.ok()) {
        std::lock_guard<std::mutex> lock(inproc_sessions_mu_);
        inproc_sessions_.push_back(session->get());
      }
      return session;
    };
    context.inproc_device_count = inproc_devices;
    context.inproc_memory_limit = config_.memory_limit_bytes;
  }
  struct Endpoint {
    Transport* transport;
    uint32_t device_count;
  };
  absl::flat_hash_map<std::string, Endpoint> endpoints;
  uint32_t next_inproc = 0;
  for (int i = 0; i < config_.device_count; ++i) {
    const std::string& backend = config_.backends[i];
    std::string endpoint = backend;
    uint32_t device = 0;
    if (backend == "inproc") {
      device = next_inproc++;
    } else {
      absl::StatusOr<SocketAddress> address = ParseSocketAddress(backend);
      if (!address.ok()) {  // config.cc validated it already
        Decline(std::string(address.status().message()));
        return;
      }
      endpoint = address->endpoint;
      device = address->device;
    }
    auto it = endpoints.find(endpoint);
    if (it == endpoints.end()) {
      absl::StatusOr<OpenedTransport> opened = OpenTransport(endpoint, context);
      if (!opened.ok()) {
        Decline(absl::StrCat("VGPU_BACKEND: ", opened.status().message()));
        return;
      }
      transports_.push_back(std::move(opened->transport));
      it = endpoints.emplace(endpoint, Endpoint{transports_.back().get(), opened->device_count})
               .first;
      // Remote: what the server grants this client is the device memory TensorFlow sees.
      if (backend != "inproc") config_.memory_limit_bytes = opened->memory_limit;
    }
    if (device >= it->second.device_count) {
      Decline(absl::StrCat("VGPU_BACKEND='", backend, "' names device ", device,
                           ", but the server has ", it->second.device_count));
      return;
    }
    Transport* transport = it->second.transport;
    if (trace_recorder_ != nullptr) {
      tracing_transports_.push_back(std::make_unique<trace::TracingTransport>(
          transport, trace_recorder_.get(), static_cast<uint16_t>(i)));
      transport = tracing_transports_.back().get();
    }
    devices_.push_back(std::make_unique<DeviceClient>(i, device, transport, hub_.get(),
                                                      config_.descriptor_mode));
    if (trace_recorder_ != nullptr) {
      trace::TraceRecorder* recorder = trace_recorder_.get();
      devices_.back()->dnn().SetIterationObserver([recorder, i](uint64_t iterations) {
        recorder->RecordStep(static_cast<uint16_t>(i), iterations);
      });
    }
  }
  // Every device knows the others: addresses of devices on different backends never alias, and
  // copies between them are staged through this process.
  std::vector<DeviceClient*> peers;
  for (auto& device : devices_) peers.push_back(device.get());
  for (auto& device : devices_) device->SetPeers(peers);
  if (trace_recorder_ != nullptr) {
    trace_recorder_->SetMemoryLimit(config_.memory_limit_bytes);  // a server's grant, if remote
    Log(LogLevel::kInfo, absl::StrCat("recording a command trace into ", config_.trace_path));
  }
  Log(LogLevel::kInfo, absl::StrCat(config_.device_count, " virtual ", config_.device_type,
                                    "(s) on ", absl::StrJoin(config_.backends, ", ")));
}

std::string PluginRuntime::StatsJson(absl::string_view more_members) const {
  std::string json = "{\"devices\": [";
  for (int i = 0; i < device_count(); ++i) {
    absl::StrAppend(&json, i == 0 ? "" : ", ", "{\"ordinal\": ", i,
                    ", \"backend\": ", JsonString(devices_[i]->backend_name()),
                    ", \"counters\": ", devices_[i]->counters().ToJson(),
                    ", \"descriptor_reuse\": ", devices_[i]->dnn().StateJson(), "}");
  }
  WireCounters wire = Wire();
  {
    std::lock_guard<std::mutex> lock(wire_at_reset_mu_);
    wire -= wire_at_reset_;
  }
  absl::StrAppend(&json, "], \"frames_sent\": ", wire.frames,
                  ", \"wire\": {\"frames\": ", wire.frames, ", \"bytes\": ", wire.bytes,
                  ", \"host_data_bytes\": ", wire.host_data_bytes,
                  ", \"templates_created\": ", wire.templates_created,
                  ", \"launches_by_template\": ", wire.launches_by_template,
                  "}, \"executor\": ");
  if (inproc_executor_ == nullptr) {
    absl::StrAppend(&json, "null");  // remote devices: the server's executor
  } else {
    const ExecutorStats stats = inproc_executor_->stats();
    uint64_t kernel_ns = 0;
    {
      std::lock_guard<std::mutex> lock(inproc_sessions_mu_);
      for (const ExecutorSession* session : inproc_sessions_) {
        kernel_ns += session->Stats().kernel_ns;
      }
    }
    absl::StrAppend(&json, "{\"name\": ", JsonString(inproc_executor_->name()),
                    ", \"kernel_ns\": ", kernel_ns,
                    ", \"launches\": ", stats.launches, ", \"copies\": ", stats.copies,
                    ", \"bytes_copied\": ", stats.bytes_copied, ", \"memsets\": ", stats.memsets,
                    ", \"descriptors_created\": ", stats.descriptors_created,
                    ", \"primitives_created\": ", stats.primitives_created,
                    ", \"primitives_reused\": ", stats.primitives_reused, "}");
  }
  if (!more_members.empty()) absl::StrAppend(&json, ", ", more_members);
  absl::StrAppend(&json, "}");
  return json;
}

std::string PluginRuntime::InfoJson() const {
  std::vector<std::string> backends;
  for (const std::string& b : config_.backends) backends.push_back(JsonString(b));
  std::optional<std::string> running = RunningTensorFlowVersion();
  return absl::StrCat(
      "{\"version\": ", JsonString(VGPU_VERSION),
      ", \"tensorflow_built_against\": ", JsonString(VGPU_BUILT_AGAINST_TF),
      ", \"tensorflow_running\": ", JsonString(running.value_or("unknown")),
      ", \"platform\": \"VGPU\", \"device_type\": ", JsonString(config_.device_type),
      ", \"device_count\": ", device_count(),
      ", \"backends\": [", absl::StrJoin(backends, ", "), "]",
      ", \"executor\": ", JsonString(config_.executor),
      ", \"executors_available\": ", JsonString(RegisteredExecutorNames()),
      ", \"descriptor_mode\": ", JsonString(DescriptorModeName(config_.descriptor_mode)),
      ", \"memory_limit_bytes\": ", config_.memory_limit_bytes,
      ", \"timeout_seconds\": ", config_.timeout_seconds,
      ", \"trace\": ", config_.trace_path.empty() ? "null" : JsonString(config_.trace_path),
      ", \"declined\": ", decline_reason_.empty() ? "null" : JsonString(decline_reason_), "}");
}

void PluginRuntime::MarkStep() {
  for (auto& device : devices_) device->dnn().MarkStep();
}

void PluginRuntime::ResetStats() {
  for (auto& device : devices_) device->counters().Reset();
  const WireCounters wire = Wire();
  std::lock_guard<std::mutex> lock(wire_at_reset_mu_);
  wire_at_reset_ = wire;
}

WireCounters PluginRuntime::Wire() const {
  WireCounters wire;
  for (const auto& transport : transports_) wire += transport->wire_counters();
  return wire;
}

}  // namespace vgpu
