// The plugin's StreamExecutor registration, callable without TensorFlow's runtime (C++ tests
// drive the device through the tables it fills, exactly as TensorFlow would).
#ifndef VGPU_DEVICE_PLATFORM_REGISTRATION_H_
#define VGPU_DEVICE_PLATFORM_REGISTRATION_H_

#include "tensorflow/c/experimental/stream_executor/stream_executor.h"

namespace vgpu {

// Fills `params` (platform, platform_fns, destroy functions, API version). The caller owns the
// structs `params` points to. Builds the PluginRuntime on first use.
// If "VGPU" is already registered in the process (the plugin was loaded twice), it registers an
// inert platform with a unique name, no devices, and IsDuplicateLoad() becomes true.
void FillPlatformRegistration(SE_PlatformRegistrationParams* params);

// True when this copy of the plugin is a duplicate load (see above): it must not register
// kernels either.
bool IsDuplicateLoad();

// The device type this load registered ("GPU", or a duplicate load's inert type).
const char* RegisteredDeviceType();

}  // namespace vgpu

#endif  // VGPU_DEVICE_PLATFORM_REGISTRATION_H_
