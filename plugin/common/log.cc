// Implementation of vgpu::Log (see log.h).
#include "plugin/common/log.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace vgpu {
namespace {

bool VerboseEnabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("VGPU_VERBOSE");
    return value != nullptr && *value != '\0' && absl::string_view(value) != "0";
  }();
  return enabled;
}

}  // namespace

void Log(LogLevel level, absl::string_view message) {
  if (level == LogLevel::kInfo && !VerboseEnabled()) return;
  const char* tag = level == LogLevel::kInfo ? "info" : level == LogLevel::kWarning ? "warning" : "error";
  std::string line = absl::StrCat("vgpu ", tag, ": ", message, "\n");
  // One write(2) keeps concurrent messages from interleaving.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace vgpu
