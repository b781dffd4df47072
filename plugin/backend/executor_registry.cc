// The executor registry (see executor_registry.h). Built-in executors are listed here rather than
// registered by static initialisers, which a static library would drop.
#include "plugin/backend/executor_registry.h"

#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/backend/cpu/cpu_executor.h"
#ifdef VGPU_HAVE_CUDA_EXECUTOR
#include "plugin/backend/cuda/cuda_executor.h"  // vgpu-server built with VGPU_CUDA=ON
#endif

namespace vgpu {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<ExecutorRegistration> executors;  // guarded by mu
};

Registry& GetRegistry() {
  static Registry* registry = [] {
    auto* r = new Registry();  // intentionally never destroyed
    r->executors.push_back(
        {"cpu", "host memory and host cores (Eigen), the default",
         [](const ExecutorOptions& options)
             -> absl::StatusOr<std::unique_ptr<BackingExecutor>> {
           absl::StatusOr<std::unique_ptr<CpuExecutor>> executor = CpuExecutor::Create(options);
           if (!executor.ok()) return executor.status();
           return std::unique_ptr<BackingExecutor>(*std::move(executor));
         }});
#ifdef VGPU_HAVE_CUDA_EXECUTOR
    r->executors.push_back({"cuda", "an NVIDIA GPU (CUDA, cuDNN, cuBLAS; docs/cuda.md)",
                            cuda::CreateCudaExecutor});
#endif
    return r;
  }();
  return *registry;
}

}  // namespace

std::vector<ExecutorRegistration> RegisteredExecutors() {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  return registry.executors;
}

std::string RegisteredExecutorNames() {
  std::vector<std::string> names;
  for (const ExecutorRegistration& r : RegisteredExecutors()) names.push_back(r.name);
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<std::unique_ptr<BackingExecutor>> CreateExecutor(absl::string_view name,
                                                                const ExecutorOptions& options) {
  for (const ExecutorRegistration& r : RegisteredExecutors()) {
    if (r.name == name) return r.create(options);
  }
  if (name == "cuda") {
    return absl::NotFoundError(absl::StrCat(
        "this build has no CUDA executor; build it with scripts/build_cuda.sh (docs/cuda.md). "
        "This build offers: ", RegisteredExecutorNames()));
  }
  return absl::NotFoundError(absl::StrCat("unknown executor '", name,
                                          "'; this build offers: ", RegisteredExecutorNames()));
}

absl::Status RegisterExecutor(ExecutorRegistration registration) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  for (const ExecutorRegistration& r : registry.executors) {
    if (r.name == registration.name) {
      return absl::AlreadyExistsError(
          absl::StrCat("an executor named '", registration.name, "' is already registered"));
    }
  }
  registry.executors.push_back(std::move(registration));
  return absl::OkStatus();
}

}  // namespace vgpu
