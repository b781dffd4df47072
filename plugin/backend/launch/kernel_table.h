// The kernel table every executor keeps: kernel id (protocol/kernels/*.h) -> the executor's
// function for it, and the guard every launch runs through. One template for all executors;
// each instantiates it with its kernel context (cpu/kernel_registry.h,
// cuda/cuda_kernel_registry.h) and adds its functions family by family under the ids and names
// of kernel_families.h.
#ifndef VGPU_BACKEND_LAUNCH_KERNEL_TABLE_H_
#define VGPU_BACKEND_LAUNCH_KERNEL_TABLE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "plugin/backend/launch/kernel_families.h"
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

  // Adds a family of kernel_families.h: functions[i] runs family[i], under its id and name; a
  // null function is a kernel this executor does not serve (it is not added). One function or
  // nullptr per kernel of the family, in its order (checked when it compiles).
  template <size_t kFamilySize, typename... Fns>
  void AddFamily(const KernelIdentity (&family)[kFamilySize], Fns... functions) {
    static_assert(sizeof...(Fns) == kFamilySize,
                  "one function (or nullptr) per kernel of the family, in its order");
    const Fn runs[] = {functions...};
    for (size_t i = 0; i < kFamilySize; ++i) {
      if (runs[i] != nullptr) Add(family[i].id, family[i].name, runs[i]);
    }
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

// A new table holding the kernels that each of `add_families` adds (an executor's Add*Kernels
// functions), for the executor's process-wide table (built once, never destroyed).
template <typename Context>
const KernelRegistry<Context>* NewKernelTable(
    std::initializer_list<void (*)(KernelRegistry<Context>&)> add_families) {
  auto* table = new KernelRegistry<Context>();
  for (auto add : add_families) add(*table);
  return table;
}

}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_KERNEL_TABLE_H_
