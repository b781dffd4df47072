// A device-memory budget that several sessions share: a `vgpu server` gives every connection of
// one tenant (VGPU_TENANT, --tenant_quota) the same SharedQuota, so the tenant's connections
// together stay within it. The members' usage is what the arenas charge them (live and
// freed-but-still-used memory), summed when a member allocates.
#ifndef VGPU_BACKEND_SHARED_QUOTA_H_
#define VGPU_BACKEND_SHARED_QUOTA_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"

namespace vgpu {

class SharedQuota {
 public:
  // `name` labels messages (the tenant's name); `limit_bytes` > 0.
  SharedQuota(std::string name, uint64_t limit_bytes)
      : name_(std::move(name)), limit_bytes_(limit_bytes) {}

  const std::string& name() const { return name_; }
  uint64_t limit_bytes() const { return limit_bytes_; }

  // Session membership (ClientSession joins when it is created, leaves when destroyed).
  // Thread-safe.
  void Join(uint64_t session_id) {
    std::lock_guard<std::mutex> lock(mu_);
    members_.insert(session_id);
  }
  void Leave(uint64_t session_id) {
    std::lock_guard<std::mutex> lock(mu_);
    members_.erase(session_id);
  }
  std::vector<uint64_t> Members() const {
    std::lock_guard<std::mutex> lock(mu_);
    return std::vector<uint64_t>(members_.begin(), members_.end());
  }

  // Held by a member while it checks the budget and allocates, so that two members cannot both
  // take the last bytes.
  std::mutex& allocation_mutex() { return allocation_mu_; }

 private:
  const std::string name_;
  const uint64_t limit_bytes_;
  mutable std::mutex mu_;
  absl::flat_hash_set<uint64_t> members_ ABSL_GUARDED_BY(mu_);
  std::mutex allocation_mu_;
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_SHARED_QUOTA_H_
