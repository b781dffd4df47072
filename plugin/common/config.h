// The plugin's configuration, read from VGPU_* environment variables when TensorFlow loads the
// plugin (see the configuration table in README.md). Parsing is strict: a value that cannot be
// understood is an error with a message naming the variable, never a silent default.
#ifndef VGPU_COMMON_CONFIG_H_
#define VGPU_COMMON_CONFIG_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace vgpu {

enum class DescriptorMode { kReuse, kForward };

struct Config {
  // One backend address per virtual device ("inproc", "unix:///path", "tcp://host:port").
  std::vector<std::string> backends;
  DescriptorMode descriptor_mode = DescriptorMode::kReuse;
  // VGPU_EXECUTOR: the backing executor of in-process devices, by registered name (lower-cased;
  // the registry, backend/executor_registry.h, judges whether it exists).
  std::string executor = "cpu";
  int device_count = 1;
  uint64_t memory_limit_bytes = 0;  // per virtual device
  std::string device_type = "GPU";
  // Shared secret presented to remote servers (VGPU_TOKEN, or the contents of VGPU_TOKEN_FILE).
  std::string token;
  // VGPU_TENANT: the name this process's connections carry on a server (its statistics,
  // metrics and --tenant_quota group connections by it); empty: tenant "default".
  std::string tenant;
  static constexpr size_t kMaxTenantNameLength = 64;
  // VGPU_TIMEOUT: how long a client waits for a remote server that shows no sign of life before
  // the waiting operation fails with DeadlineExceeded (0: wait forever). See
  // transport/socket_transport.h for what counts as a sign of life.
  double timeout_seconds = kDefaultTimeoutSeconds;
  // VGPU_THREADS: the in-process executor's compute threads (Eigen's pool and oneDNN's OpenMP
  // team alike); 0: the CPUs this process may use (common/cpu_count.h).
  int compute_threads = 0;
  static constexpr int kMaxComputeThreads = 1024;
  // VGPU_INLINE_LAUNCH_BYTES: in-process launches whose buffers total at most this many bytes,
  // and copies and memsets of at most this many bytes, run on TensorFlow's thread when their
  // stream is idle (SessionLimits::inline_launch_bytes); 0: everything goes to its stream's
  // worker. Unset: the executor's default.
  std::optional<uint64_t> inline_launch_bytes;
  static constexpr uint64_t kMaxInlineLaunchBytes = 64ull << 20;
  // VGPU_GRAPH_FUSIONS: "0" turns off the graph optimizer's fusions (graph/graph_fusions.h),
  // "1" (the default) leaves them on.
  bool graph_fusions = true;
  // VGPU_STREAM_QUEUES (in-process only): "device" (the default) runs all of a device's
  // streams through one queue and worker thread, in the order their work was submitted, so that
  // a copy waited for by the compute stream, or a read-back waiting for it, costs no hand-off
  // between threads (SessionLimits::one_queue_per_device); "stream" gives each stream its own,
  // as a server does.
  bool one_queue_per_device = true;
  // VGPU_TRACE: record every command of every device into this file (trace/trace_format.h);
  // empty: no recording (and no cost).
  std::string trace_path;
  static constexpr double kDefaultTimeoutSeconds = 60;
  static constexpr double kMaxTimeoutSeconds = 86400;
};

// A tenant name (VGPU_TENANT, --tenant_quota, the Hello of a connection): 1 to
// Config::kMaxTenantNameLength characters of A-Z a-z 0-9 . _ -; InvalidArgument saying so.
absl::Status ValidateTenantName(absl::string_view name);

// Parses "512MiB", "4GiB", "1.5GB", "1000000" (bytes). Binary (KiB/MiB/GiB/TiB) and decimal
// (KB/MB/GB/TB) units; case-insensitive; must be > 0.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// The default device memory per virtual device: half the host's physical memory, shared by the
// devices. `physical_bytes` is injectable for tests.
uint64_t DefaultMemoryLimit(int device_count, uint64_t physical_bytes);

// Parses VGPU_TIMEOUT: seconds (decimals allowed, e.g. "2.5"), 0 for no deadline, at most
// Config::kMaxTimeoutSeconds. Errors name the variable.
absl::StatusOr<double> ParseTimeoutSeconds(absl::string_view text);

// Reads the configuration from `getenv` (injectable for tests). Errors name the variable.
absl::StatusOr<Config> LoadConfig(
    const std::function<std::optional<std::string>(const char*)>& getenv);

// LoadConfig over the process environment.
absl::StatusOr<Config> LoadConfigFromEnvironment();

const char* DescriptorModeName(DescriptorMode mode);

}  // namespace vgpu

#endif  // VGPU_COMMON_CONFIG_H_
