// The executors this build offers, by name: the in-process plugin (VGPU_EXECUTOR), `vgpu server
// --executor` and `vgpu trace replay --executor` create theirs here, so that a new executor is
// one registration (executor_registry.cc) and every front end knows it.
#ifndef VGPU_BACKEND_EXECUTOR_REGISTRY_H_
#define VGPU_BACKEND_EXECUTOR_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "plugin/backend/backing_executor.h"

namespace vgpu {

// The executor used when none is named.
inline constexpr absl::string_view kDefaultExecutorName = "cpu";

using ExecutorFactory =
    std::function<absl::StatusOr<std::unique_ptr<BackingExecutor>>(const ExecutorOptions&)>;

struct ExecutorRegistration {
  std::string name;         // lower case, as users type it
  std::string description;  // one line, for listings
  ExecutorFactory create;
};

// Every executor this build offers, built-in ones first, in registration order. Thread-safe.
std::vector<ExecutorRegistration> RegisteredExecutors();

// The registered names, comma-separated ("cpu"), for messages. Thread-safe.
std::string RegisteredExecutorNames();

// Creates the executor registered as `name`. NotFound naming the known executors when there is
// none; the factory's own error (e.g. no device) otherwise. Thread-safe.
absl::StatusOr<std::unique_ptr<BackingExecutor>> CreateExecutor(absl::string_view name,
                                                                const ExecutorOptions& options);

// Adds an executor (tests, or an executor built outside this library). AlreadyExists if the
// name is taken. Thread-safe.
absl::Status RegisterExecutor(ExecutorRegistration registration);

}  // namespace vgpu

#endif  // VGPU_BACKEND_EXECUTOR_REGISTRY_H_
