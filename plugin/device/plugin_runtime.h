// The process-wide state of the plugin: the configuration read at load, the backing executor(s)
// and transports, and one DeviceClient per virtual device. Built once, when TensorFlow calls
// SE_InitPlugin, and never destroyed (TensorFlow keeps using devices until the process ends).
#ifndef VGPU_DEVICE_PLUGIN_RUNTIME_H_
#define VGPU_DEVICE_PLUGIN_RUNTIME_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "plugin/client/device_client.h"
#include "plugin/client/notification_hub.h"
#include "plugin/common/config.h"
#include "plugin/trace/trace_recorder.h"
#include "plugin/transport/transport.h"

namespace vgpu {

class BackingExecutor;

class PluginRuntime {
 public:
  // The runtime, built from the environment on first use. Never fails: on a bad configuration or
  // a TensorFlow version mismatch it has zero devices and decline_reason() says why (TensorFlow
  // aborts the process if SE_InitPlugin fails, so declining is the only safe answer).
  static PluginRuntime& Get();

  int device_count() const { return static_cast<int>(devices_.size()); }
  // The client of device `ordinal`, or nullptr if out of range.
  DeviceClient* device(int ordinal) const;
  const Config& config() const { return config_; }
  const std::string& decline_reason() const { return decline_reason_; }
  const std::string& device_type() const { return config_.device_type; }

  // JSON documents for `vgpu.stats()` and `vgpu info` (see c_api/vgpu_c_api.h).
  // `more_members`: members the layers above the runtime add at the document's top level
  // ("\"name\": value, ..."; empty: none).
  std::string StatsJson(absl::string_view more_members = "") const;
  std::string InfoJson() const;
  void ResetStats();
  // An explicit training-step boundary on every device (see client/iteration_detector.h).
  void MarkStep();

 private:
  PluginRuntime();
  void Decline(std::string reason);

  Config config_;
  std::string decline_reason_;
  std::unique_ptr<NotificationHub> hub_;
  std::unique_ptr<BackingExecutor> inproc_executor_;  // of the in-process devices, if any
  // The sessions opened on it (owned by their transports, which live as long as the runtime):
  // their kernel time is the executor's in `vgpu.stats()`.
  mutable std::mutex inproc_sessions_mu_;
  std::vector<const ExecutorSession*> inproc_sessions_;
  std::vector<std::unique_ptr<Transport>> transports_;
  // What went over the wire to remote backends, over all transports (nothing in process), and
  // the counts at the last ResetStats.
  WireCounters Wire() const;
  mutable std::mutex wire_at_reset_mu_;
  WireCounters wire_at_reset_;
  // VGPU_TRACE only: the recording, the sink in front of hub_ and one tracing transport per
  // device (in front of its shared transport). Absent otherwise: tracing off costs nothing.
  std::unique_ptr<trace::TraceRecorder> trace_recorder_;
  std::unique_ptr<trace::TracingSink> trace_sink_;
  std::vector<std::unique_ptr<trace::TracingTransport>> tracing_transports_;
  std::vector<std::unique_ptr<DeviceClient>> devices_;
};

}  // namespace vgpu

#endif  // VGPU_DEVICE_PLUGIN_RUNTIME_H_
