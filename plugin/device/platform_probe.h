// Asks TensorFlow's StreamExecutor platform registry whether a platform name is taken. The
// plugin uses it to survive being loaded twice (from tensorflow-plugins/ and from
// TF_PLUGGABLE_DEVICE_LIBRARY_PATH, or from two copies of the file): registering "VGPU" again
// would make TensorFlow abort the process.
#ifndef VGPU_DEVICE_PLATFORM_PROBE_H_
#define VGPU_DEVICE_PLATFORM_PROBE_H_

namespace vgpu {

// True if a StreamExecutor platform called `name` is already registered in this process. Does
// not initialise the platform. Safe to call without a TensorFlow runtime (then false).
bool IsPlatformRegistered(const char* name);

}  // namespace vgpu

#endif  // VGPU_DEVICE_PLATFORM_PROBE_H_
