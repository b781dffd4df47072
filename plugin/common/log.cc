// Implementation of vgpu::Log (see log.h).
#include "plugin/common/log.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace vgpu {
namespace {

bool VerboseEnabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("VGPU_VERBOSE");
    return value != nullptr && *value != '\0' && std::string_view(value) != "0";
  }();
  return enabled;
}

}  // namespace

void Log(LogLevel level, std::string_view message) {
  if (level == LogLevel::kInfo && !VerboseEnabled()) return;
  const char* tag = level == LogLevel::kInfo ? "info" : level == LogLevel::kWarning ? "warning" : "error";
  std::string line = "vgpu ";
  line += tag;
  line += ": ";
  line += message;
  line += '\n';
  // One write(2) keeps concurrent messages from interleaving.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace vgpu
