// Parsing of the VGPU_* environment variables (see config.h).
#include "plugin/common/config.h"

#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "plugin/common/backend_address.h"

namespace vgpu {
namespace {

constexpr int kMaxDevices = 16;

}  // namespace

absl::Status ValidateTenantName(absl::string_view name) {
  bool valid = !name.empty() && name.size() <= Config::kMaxTenantNameLength;
  for (char c : name) {
    valid = valid && (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
                      c == '_' || c == '-');
  }
  if (valid) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "tenant name '", absl::CHexEscape(name.substr(0, Config::kMaxTenantNameLength)),
      "' must be 1 to ", Config::kMaxTenantNameLength, " characters of A-Z a-z 0-9 . _ -"));
}

namespace {

bool IsValidTypeName(absl::string_view name) {
  if (name.empty() || !(name[0] >= 'A' && name[0] <= 'Z')) return false;
  for (char c : name) {
    if (!((c >= 'A' && c <= 'Z') || c == '_')) return false;
  }
  return true;
}

absl::Status ValidateBackend(absl::string_view backend) {
  if (backend == "inproc") return absl::OkStatus();
  if (absl::StartsWith(backend, "unix://") || absl::StartsWith(backend, "tcp://")) {
    absl::StatusOr<SocketAddress> address = ParseSocketAddress(backend);
    if (!address.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("VGPU_BACKEND: ", address.status().message()));
    }
    if (address->kind == SocketAddress::Kind::kTcp && address->port == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("VGPU_BACKEND='", backend, "': a server's TCP port cannot be 0"));
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "VGPU_BACKEND='", backend,
      "' is not understood; expected 'inproc', 'unix:///path/to.sock' or 'tcp://host:port'"));
}

}  // namespace

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  std::string s = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  size_t unit_start = 0;
  while (unit_start < s.size() && (std::isdigit(static_cast<unsigned char>(s[unit_start])) ||
                                   s[unit_start] == '.')) {
    ++unit_start;
  }
  std::string number = s.substr(0, unit_start);
  std::string unit(absl::StripAsciiWhitespace(s.substr(unit_start)));
  if (number.empty() || number == "." || number.find('.') != number.rfind('.')) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a byte size"));
  }
  double multiplier = 0;
  if (unit.empty() || unit == "b") multiplier = 1;
  else if (unit == "k" || unit == "kib") multiplier = 1024.0;
  else if (unit == "m" || unit == "mib") multiplier = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib") multiplier = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib") multiplier = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb") multiplier = 1e3;
  else if (unit == "mb") multiplier = 1e6;
  else if (unit == "gb") multiplier = 1e9;
  else if (unit == "tb") multiplier = 1e12;
  else {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "' has an unknown unit '", unit, "' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"));
  }
  double value = std::strtod(number.c_str(), nullptr) * multiplier;
  if (!(value >= 1.0) || value > 1024.0 * 1024 * 1024 * 1024 * 1024) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a usable byte size"));
  }
  return static_cast<uint64_t>(std::floor(value));
}

absl::StatusOr<double> ParseTimeoutSeconds(absl::string_view text) {
  std::string s(absl::StripAsciiWhitespace(text));
  char* end = nullptr;
  double value = s.empty() ? -1 : std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(value >= 0) || value > Config::kMaxTimeoutSeconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "VGPU_TIMEOUT='", text, "' must be a number of seconds from 0 (no deadline) to ",
        Config::kMaxTimeoutSeconds));
  }
  return value;
}

uint64_t DefaultMemoryLimit(int device_count, uint64_t physical_bytes) {
  if (device_count < 1) device_count = 1;
  uint64_t share = physical_bytes / 2 / static_cast<uint64_t>(device_count);
  constexpr uint64_t kFloor = 256ull << 20;
  return share < kFloor ? kFloor : share;
}

absl::StatusOr<Config> LoadConfig(
    const std::function<std::optional<std::string>(const char*)>& getenv) {
  Config config;
  if (auto count = getenv("VGPU_DEVICE_COUNT")) {
    char* end = nullptr;
    long value = std::strtol(count->c_str(), &end, 10);
    if (count->empty() || *end != '\0' || value < 1 || value > kMaxDevices) {
      return absl::InvalidArgumentError(absl::StrCat(
          "VGPU_DEVICE_COUNT='", *count, "' must be a whole number from 1 to ", kMaxDevices));
    }
    config.device_count = static_cast<int>(value);
  }
  std::string backend_text = getenv("VGPU_BACKEND").value_or("inproc");
  if (backend_text.empty()) backend_text = "inproc";
  for (absl::string_view part : absl::StrSplit(backend_text, ',')) {
    std::string backend(absl::StripAsciiWhitespace(part));
    absl::Status valid = ValidateBackend(backend);
    if (!valid.ok()) return valid;
    config.backends.push_back(backend);
  }
  if (config.backends.size() == 1) {
    config.backends.assign(config.device_count, config.backends[0]);
  } else if (getenv("VGPU_DEVICE_COUNT").has_value() &&
             static_cast<int>(config.backends.size()) != config.device_count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "VGPU_BACKEND names ", config.backends.size(), " backends but VGPU_DEVICE_COUNT is ",
        config.device_count, "; give one backend, or one per device"));
  } else {
    if (static_cast<int>(config.backends.size()) > kMaxDevices) {
      return absl::InvalidArgumentError(absl::StrCat("VGPU_BACKEND names ",
                                                     config.backends.size(),
                                                     " backends; at most ", kMaxDevices));
    }
    config.device_count = static_cast<int>(config.backends.size());
  }
  if (auto executor = getenv("VGPU_EXECUTOR")) {
    config.executor = absl::AsciiStrToLower(absl::StripAsciiWhitespace(*executor));
    if (config.executor.empty()) config.executor = "cpu";
  }
  if (auto mode = getenv("VGPU_DESCRIPTOR_MODE")) {
    std::string m = absl::AsciiStrToLower(*mode);
    if (m == "reuse") config.descriptor_mode = DescriptorMode::kReuse;
    else if (m == "forward") config.descriptor_mode = DescriptorMode::kForward;
    else {
      return absl::InvalidArgumentError(
          absl::StrCat("VGPU_DESCRIPTOR_MODE='", *mode, "' must be 'reuse' or 'forward'"));
    }
  }
  if (auto limit = getenv("VGPU_MEMORY_LIMIT")) {
    absl::StatusOr<uint64_t> bytes = ParseByteSize(*limit);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("VGPU_MEMORY_LIMIT: ", bytes.status().message()));
    }
    if (*bytes < (1ull << 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("VGPU_MEMORY_LIMIT='", *limit, "' is below the 1MiB minimum"));
    }
    config.memory_limit_bytes = *bytes;
  } else {
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGESIZE);
    uint64_t physical = (pages > 0 && page_size > 0)
                            ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)
                            : (8ull << 30);
    config.memory_limit_bytes = DefaultMemoryLimit(config.device_count, physical);
  }
  if (auto token = getenv("VGPU_TOKEN")) config.token = *token;
  if (auto path = getenv("VGPU_TOKEN_FILE")) {
    std::ifstream file(*path);
    if (!file) {
      return absl::InvalidArgumentError(
          absl::StrCat("VGPU_TOKEN_FILE='", *path, "' cannot be read"));
    }
    std::stringstream text;
    text << file.rdbuf();
    config.token = std::string(absl::StripAsciiWhitespace(text.str()));
  }
  if (auto tenant = getenv("VGPU_TENANT")) {
    absl::Status valid = ValidateTenantName(*tenant);
    if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat("VGPU_TENANT: ", valid.message()));
    config.tenant = *tenant;
  }
  if (auto timeout = getenv("VGPU_TIMEOUT")) {
    absl::StatusOr<double> seconds = ParseTimeoutSeconds(*timeout);
    if (!seconds.ok()) return seconds.status();
    config.timeout_seconds = *seconds;
  }
  if (auto threads = getenv("VGPU_THREADS")) {
    const std::string text(absl::StripAsciiWhitespace(*threads));
    int value = -1;
    if (!absl::SimpleAtoi(text, &value) || value < 0 || value > Config::kMaxComputeThreads) {
      return absl::InvalidArgumentError(absl::StrCat(
          "VGPU_THREADS='", *threads, "' must be a whole number of threads from 0 (the CPUs this "
          "process may use) to ", Config::kMaxComputeThreads));
    }
    config.compute_threads = value;
  }
  if (auto bytes = getenv("VGPU_INLINE_LAUNCH_BYTES")) {
    const std::string text(absl::StripAsciiWhitespace(*bytes));
    absl::StatusOr<uint64_t> value = text == "0" ? absl::StatusOr<uint64_t>(0) : ParseByteSize(text);
    if (!value.ok() || *value > Config::kMaxInlineLaunchBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "VGPU_INLINE_LAUNCH_BYTES='", *bytes, "' must be 0 (off) or a size such as 64KiB, at most ",
          Config::kMaxInlineLaunchBytes >> 20, "MiB"));
    }
    config.inline_launch_bytes = *value;
  }
  if (auto fusions = getenv("VGPU_GRAPH_FUSIONS")) {
    const absl::string_view text = absl::StripAsciiWhitespace(*fusions);
    if (text != "0" && text != "1") {
      return absl::InvalidArgumentError(absl::StrCat(
          "VGPU_GRAPH_FUSIONS='", *fusions, "' must be 0 (the graph optimizer fuses nothing) or 1"));
    }
    config.graph_fusions = text == "1";
  }
  if (auto queues = getenv("VGPU_STREAM_QUEUES")) {
    const absl::string_view text = absl::StripAsciiWhitespace(*queues);
    if (text != "device" && text != "stream") {
      return absl::InvalidArgumentError(absl::StrCat(
          "VGPU_STREAM_QUEUES='", *queues,
          "' must be device (one queue for all of a device's streams) or stream (one each)"));
    }
    config.one_queue_per_device = text == "device";
  }
  if (auto isa = getenv("VGPU_CPU_ISA")) {
    // Read by the CPU executor itself (backend/cpu/cpu_isa.h); checked here so that a value it
    // would not understand gives no device instead of a silent default.
    const absl::string_view text = absl::StripAsciiWhitespace(*isa);
    if (text != "baseline" && text != "avx2" && text != "avx512") {
      return absl::InvalidArgumentError(absl::StrCat(
          "VGPU_CPU_ISA='", *isa, "' must be baseline, avx2 or avx512 (the widest instruction "
          "set the executor's vector kernels may use)"));
    }
  }
  if (auto trace = getenv("VGPU_TRACE")) {
    config.trace_path = std::string(absl::StripAsciiWhitespace(*trace));
  }
  if (auto type = getenv("VGPU_DEVICE_TYPE")) {
    if (!IsValidTypeName(*type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "VGPU_DEVICE_TYPE='", *type, "' must be capital letters and underscores, e.g. GPU"));
    }
    config.device_type = *type;
  }
  return config;
}

absl::StatusOr<Config> LoadConfigFromEnvironment() {
  return LoadConfig([](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

const char* DescriptorModeName(DescriptorMode mode) {
  return mode == DescriptorMode::kReuse ? "reuse" : "forward";
}

}  // namespace vgpu
