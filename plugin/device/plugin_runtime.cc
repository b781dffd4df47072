// Building the plugin's process-wide state (see plugin_runtime.h).
#include "plugin/device/plugin_runtime.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/backend/cpu/cpu_executor.h"
#include "plugin/common/log.h"
#include "plugin/device/tf_version.h"
#include "plugin/transport/inproc_transport.h"

namespace vgpu {
namespace {

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
  transports_.clear();
  cpu_executor_.reset();
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

  hub_ = std::make_unique<NotificationHub>();
  // Every backend is "inproc" in this build (config.cc rejects the others with a clear reason):
  // one CPU executor hosts all devices, so device-to-device copies stay inside it.
  CpuExecutor::Options options;
  options.device_count = config_.device_count;
  options.memory_limit_per_device = config_.memory_limit_bytes;
  absl::StatusOr<std::unique_ptr<CpuExecutor>> executor = CpuExecutor::Create(options);
  if (!executor.ok()) {
    Decline(absl::StrCat("the in-process backing executor could not start: ",
                         executor.status().message()));
    return;
  }
  cpu_executor_ = *std::move(executor);
  transports_.push_back(std::make_unique<InprocTransport>(cpu_executor_->OpenSession(hub_.get())));
  for (int i = 0; i < config_.device_count; ++i) {
    devices_.push_back(std::make_unique<DeviceClient>(i, static_cast<uint32_t>(i),
                                                      transports_.back().get(), hub_.get(),
                                                      config_.descriptor_mode));
  }
  Log(LogLevel::kInfo, absl::StrCat(config_.device_count, " virtual ", config_.device_type,
                                    "(s) on the in-process backing executor"));
}

std::string PluginRuntime::StatsJson() const {
  std::string json = "{\"devices\": [";
  for (int i = 0; i < device_count(); ++i) {
    absl::StrAppend(&json, i == 0 ? "" : ", ", "{\"ordinal\": ", i,
                    ", \"backend\": ", JsonString(devices_[i]->backend_name()),
                    ", \"counters\": ", devices_[i]->counters().ToJson(),
                    ", \"descriptor_reuse\": ", devices_[i]->dnn().StateJson(), "}");
  }
  absl::StrAppend(&json, "]}");
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
      ", \"descriptor_mode\": ", JsonString(DescriptorModeName(config_.descriptor_mode)),
      ", \"memory_limit_bytes\": ", config_.memory_limit_bytes,
      ", \"declined\": ", decline_reason_.empty() ? "null" : JsonString(decline_reason_), "}");
}

void PluginRuntime::MarkStep() {
  for (auto& device : devices_) device->dnn().MarkStep();
}

void PluginRuntime::ResetStats() {
  for (auto& device : devices_) device->counters().Reset();
}

}  // namespace vgpu
