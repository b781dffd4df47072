// Minimal logging for the plugin: one line per message on stderr, prefixed "vgpu". The plugin
// must not depend on TensorFlow's logging internals, and its messages must be easy to grep.
#ifndef VGPU_COMMON_LOG_H_
#define VGPU_COMMON_LOG_H_

#include "absl/strings/string_view.h"

namespace vgpu {

enum class LogLevel { kInfo, kWarning, kError };

// Writes one line to stderr. Thread-safe (a single write per message). Info messages are
// shown only when VGPU_VERBOSE is set to a non-empty value other than "0".
void Log(LogLevel level, absl::string_view message);

}  // namespace vgpu

#endif  // VGPU_COMMON_LOG_H_
