// What the CPU and CUDA executors share as executors over one DeviceArena per virtual device:
// the arenas and the session limits they were created with, the address-to-arena lookup, the
// operation counters behind stats(), and the checks of the ExecutorOptions both take.
#ifndef VGPU_BACKEND_ARENA_BACKED_EXECUTOR_H_
#define VGPU_BACKEND_ARENA_BACKED_EXECUTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "plugin/backend/backing_executor.h"
#include "plugin/backend/device_address.h"
#include "plugin/backend/device_arena.h"

namespace vgpu {

class ArenaBackedExecutor : public BackingExecutor {
 public:
  int device_count() const override { return static_cast<int>(arenas_.size()); }
  SessionLimits session_limits() const override { return session_limits_; }
  DeviceArena& arena(uint32_t device) override { return *arenas_[device]; }
  // The arena of the device that `address` encodes (device_address.h), null if none.
  DeviceArena* ArenaForAddress(uint64_t address) override {
    uint32_t device;
    uint64_t offset;
    if (!DecodeDeviceAddress(address, &device, &offset) || device >= arenas_.size()) {
      return nullptr;
    }
    return arenas_[device].get();
  }

 protected:
  ArenaBackedExecutor() = default;
  explicit ArenaBackedExecutor(std::vector<std::unique_ptr<DeviceArena>> arenas)
      : arenas_(std::move(arenas)) {}

  // InvalidArgument unless 1 <= options.device_count <= the devices an address can name.
  static absl::Status CheckDeviceCount(const ExecutorOptions& options) {
    if (options.device_count < 1 ||
        options.device_count > static_cast<int>(kMaxDeviceIndex) + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("device count ", options.device_count, " is out of range"));
    }
    return absl::OkStatus();
  }
  // InvalidArgument unless every limit is positive (the wait: not negative).
  static absl::Status CheckSessionLimits(const SessionLimits& limits) {
    if (limits.max_streams < 1 || limits.max_events < 1 || limits.max_descriptors < 1 ||
        limits.max_allocations < 1 || limits.pending_free_wait.count() < 0) {
      return absl::InvalidArgumentError("session limits must be positive");
    }
    return absl::OkStatus();
  }

  // The name in a kernel table's entry (`kernel->name`), empty for no entry (null).
  template <typename KernelInfo>
  static absl::string_view NameOf(const KernelInfo* kernel) {
    return kernel == nullptr ? absl::string_view() : absl::string_view(kernel->name);
  }

  // stats() with the counters below and descriptors_created filled in; the executor adds the
  // rest (its primitive counts).
  ExecutorStats CountedStats() const {
    ExecutorStats stats;
    stats.launches = launches_.load(std::memory_order_relaxed);
    stats.copies = copies_.load(std::memory_order_relaxed);
    stats.bytes_copied = bytes_copied_.load(std::memory_order_relaxed);
    stats.memsets = memsets_.load(std::memory_order_relaxed);
    stats.descriptors_created = descriptors_created_.load(std::memory_order_relaxed);
    return stats;
  }

  std::vector<std::unique_ptr<DeviceArena>> arenas_;  // one per virtual device
  SessionLimits session_limits_;
  std::atomic<uint64_t> launches_{0};
  std::atomic<uint64_t> copies_{0};
  std::atomic<uint64_t> bytes_copied_{0};
  std::atomic<uint64_t> memsets_{0};
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_ARENA_BACKED_EXECUTOR_H_
