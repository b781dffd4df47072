// The kernel table every executor keeps: kernel id (protocol/kernels/*.h) -> the executor's
// function for it, and the guard every launch runs through. One template for all executors;
// each instantiates it with its kernel context (cpu/kernel_registry.h,
// cuda/cuda_kernel_registry.h).
#ifndef VGPU_BACKEND_LAUNCH_KERNEL_TABLE_H_
#define VGPU_BACKEND_LAUNCH_KERNEL_TABLE_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "plugin/protocol/kernel_ids.h"

namespace vgpu {

// Logs that `id` was added twice (a build mistake: two families claim one id).
void ReportDuplicateKernel(uint32_t id, const char* kept, const char* dropped);

// Runs `body`, the launch of `kernel_name`: a C++ exception escaping it becomes the launch's
// error (std::bad_alloc -> ResourceExhausted, anything else -> Internal), logged once, instead of
// terminating the process. Blocks while `body` runs.
absl::Status RunGuarded(const char* kernel_name, absl::FunctionRef<absl::Status()> body);

// Built once, then read-only (thread-safe to read).
template <typename Context>
class KernelRegistry {
 public:
  using Fn = absl::Status (*)(const Context& context);
  struct Entry {
    const char* name;
    Fn run;
  };

  // Adds `run` for `id`; a second function for the same id is dropped and reported.
  void Add(KernelId id, const char* name, Fn run) {
    const uint32_t key = static_cast<uint32_t>(id);
    auto at = LowerBound(key);
    if (at != kernels_.end() && at->first == key) {
      ReportDuplicateKernel(key, at->second.name, name);
      return;
    }
    kernels_.insert(at, {key, Entry{name, run}});
  }

  // The kernel registered for `kernel_id`, or nullptr.
  const Entry* Find(uint32_t kernel_id) const {
    auto at = std::lower_bound(kernels_.begin(), kernels_.end(), kernel_id,
                               [](const auto& entry, uint32_t k) { return entry.first < k; });
    if (at == kernels_.end() || at->first != kernel_id) return nullptr;
    return &at->second;
  }

  // Every registered kernel id, ascending (for fuzzers and exhaustive tests).
  std::vector<uint32_t> Ids() const {
    std::vector<uint32_t> ids;
    ids.reserve(kernels_.size());
    for (const auto& entry : kernels_) ids.push_back(entry.first);
    return ids;
  }

 private:
  typename std::vector<std::pair<uint32_t, Entry>>::iterator LowerBound(uint32_t key) {
    return std::lower_bound(kernels_.begin(), kernels_.end(), key,
                            [](const auto& entry, uint32_t k) { return entry.first < k; });
  }

  std::vector<std::pair<uint32_t, Entry>> kernels_;  // sorted by id
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_KERNEL_TABLE_H_
