// IsPlatformRegistered (see platform_probe.h). The only translation unit of the plugin that
// includes StreamExecutor's C++ headers.
#include "plugin/device/platform_probe.h"

#include "xla/stream_executor/platform_manager.h"

namespace vgpu {

bool IsPlatformRegistered(const char* name) {
  return stream_executor::PlatformManager::PlatformWithName(name, /*initialize_platform=*/false)
      .ok();
}

}  // namespace vgpu
