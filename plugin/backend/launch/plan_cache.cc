// PlanKey::ForLaunch (see plan_cache.h).
#include "plugin/backend/launch/plan_cache.h"

namespace vgpu {

PlanKey PlanKey::ForLaunch(uint32_t kernel_id, const LaunchView& launch) {
  PlanKey key;
  key.AddValue(kernel_id);
  key.AddValue(static_cast<uint32_t>(launch.descriptors.size()));
  for (const DescriptorView& view : launch.descriptors) {
    key.AddValue(view.kind);
    key.AddValue(static_cast<uint32_t>(view.settings.size()));
    key.AddBytes(view.settings);
  }
  key.AddValue(static_cast<uint32_t>(launch.params.size()));
  key.AddBytes(launch.params);
  return key;
}

}  // namespace vgpu
