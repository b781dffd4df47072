// Names for the plugin's own threads, so that `top -H`, `perf` and debuggers tell them apart from
// TensorFlow's (which are "tf_..."): every thread the plugin starts names itself "vgpu-<role>".
#ifndef VGPU_COMMON_THREAD_NAME_H_
#define VGPU_COMMON_THREAD_NAME_H_

#include <string_view>

namespace vgpu {

// Names the calling thread `name`, cut to the 15 characters Linux keeps. Best effort: a failure
// (another platform) changes nothing. Thread-safe; affects only the calling thread.
void NameCurrentThread(std::string_view name);

}  // namespace vgpu

#endif  // VGPU_COMMON_THREAD_NAME_H_
