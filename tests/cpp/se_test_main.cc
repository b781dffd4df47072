// main() of vgpu_stream_executor_tests: puts the plugin's configuration in the environment before
// anything builds the PluginRuntime (it reads the environment once), as a user would before
// importing TensorFlow. Death tests re-execute this binary, so the child gets the same setup.
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "se_test_support.h"

int main(int argc, char** argv) {
  setenv("VGPU_MEMORY_LIMIT", "64MiB", /*overwrite=*/1);
  setenv("VGPU_DEVICE_COUNT", std::to_string(vgpu_test::kDeviceCount).c_str(), 1);
  unsetenv("VGPU_BACKEND");
  unsetenv("VGPU_DEVICE_TYPE");
  unsetenv("VGPU_DESCRIPTOR_MODE");
  testing::InitGoogleTest(&argc, argv);
  // The plugin runs worker threads; re-execute rather than fork a threaded process.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  return RUN_ALL_TESTS();
}
