// The CPU executor as the tests create it: by name, from the executor registry, with the device
// count and per-device memory a test needs (every other option at its default).
#ifndef VGPU_TESTS_CPP_TEST_EXECUTORS_H_
#define VGPU_TESTS_CPP_TEST_EXECUTORS_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "plugin/backend/executor_registry.h"

namespace vgpu_test {

// CreateExecutor("cpu") with `device_count` devices of `memory_limit` bytes each.
inline absl::StatusOr<std::unique_ptr<vgpu::BackingExecutor>> CreateCpuExecutor(
    int device_count, uint64_t memory_limit) {
  vgpu::ExecutorOptions options;
  options.device_count = device_count;
  options.memory_limit_per_device = memory_limit;
  return vgpu::CreateExecutor("cpu", options);
}

}  // namespace vgpu_test

#endif  // VGPU_TESTS_CPP_TEST_EXECUTORS_H_
