// Which TensorFlow the plugin runs in, and whether that is the one it was built for; and the
// functions of TensorFlow's C library (libtensorflow_cc.so.2), which the plugin does not link.
#ifndef VGPU_DEVICE_TF_VERSION_H_
#define VGPU_DEVICE_TF_VERSION_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace vgpu {

// The version string of the TensorFlow loaded in this process ("2.21.0"), or nullopt if it
// cannot be found (TensorFlow's C library is not loaded, e.g. in C++ tests).
std::optional<std::string> RunningTensorFlowVersion();

// The address of function `name` of TensorFlow's C library loaded in this process (looked up
// among the libraries already loaded), or null if it is not loaded or has no such function.
// Thread-safe; a lookup each call (cache the result).
void* LoadedTensorFlowFunction(const char* name);

// OK when `running` has the same major.minor as `built`; FailedPrecondition otherwise.
absl::Status CheckTensorFlowVersion(std::string_view built, std::string_view running);

}  // namespace vgpu

#endif  // VGPU_DEVICE_TF_VERSION_H_
