// The plugin's StreamExecutor registration, callable without TensorFlow's runtime (C++ tests
// drive the device through the tables it fills, exactly as TensorFlow would).
#ifndef VGPU_DEVICE_PLATFORM_REGISTRATION_H_
#define VGPU_DEVICE_PLATFORM_REGISTRATION_H_

#include "tensorflow/c/experimental/stream_executor/stream_executor.h"

namespace vgpu {

// Fills `params` (platform, platform_fns, destroy functions, API version). The caller owns the
// structs `params` points to. Builds the PluginRuntime on first use.
void FillPlatformRegistration(SE_PlatformRegistrationParams* params);

}  // namespace vgpu

#endif  // VGPU_DEVICE_PLATFORM_REGISTRATION_H_
