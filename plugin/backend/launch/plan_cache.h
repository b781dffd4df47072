// The executors' reuse of the plans they build for a launch (the executor-side mirror of the
// client's descriptor reuse): the CPU executor's oneDNN primitives with their reorders, the CUDA
// executor's cuDNN descriptors with their algorithm choice and cuBLASLt matmul layouts with
// their heuristic result. A plan is made once per distinct settings (its PlanKey) and found
// again by every later launch with the same settings, from a bounded LRU map that counts what
// it made and what it found (executor_primitives_created / _reused of the statistics). Each
// executor supplies its plan type.
#ifndef VGPU_BACKEND_LAUNCH_PLAN_CACHE_H_
#define VGPU_BACKEND_LAUNCH_PLAN_CACHE_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugin/backend/launch/launch_view.h"

namespace vgpu {

// The key of a plan: the bytes of everything its creation depended on. A value type.
class PlanKey {
 public:
  PlanKey() = default;

  // The kernel id, then every descriptor (kind and settings bytes) and the parameter block of
  // `launch`: two launches of one kernel with equal keys describe the same problem.
  static PlanKey ForLaunch(uint32_t kernel_id, const LaunchView& launch);

  // Appends more of what the plan depends on (a variant tag, a derived setting).
  PlanKey& AddBytes(absl::Span<const uint8_t> bytes) {
    bytes_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return *this;
  }
  template <typename T>
  PlanKey& AddValue(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "a key holds plain values");
    return AddBytes(
        absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(&value), sizeof(T)));
  }

  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// A bounded LRU map from PlanKey to a shared, immutable-once-made Plan. Entries are shared: a
// plan evicted while a kernel runs it lives until that kernel lets it go. Thread-safe.
template <typename Plan>
class PlanCache {
 public:
  explicit PlanCache(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  // The plan cached under `key`, or the one `make()` makes: `make` returns
  // absl::StatusOr<std::shared_ptr<Plan>>, and runs without the cache's lock (two threads
  // missing one key may both make a plan; the first inserted is kept and returned to both).
  //   - an error is returned and nothing is cached (the next launch tries again);
  //   - a null plan means "this executor does not serve these settings": it is cached too, so
  //     the caller's fallback is chosen without trying again, and counted neither way.
  // A non-null plan found counts as reused, one made as created.
  template <typename Make>
  absl::StatusOr<std::shared_ptr<Plan>> FindOrCreate(const PlanKey& key, Make&& make) {
    bool found = false;
    std::shared_ptr<Plan> cached = Find(key.bytes(), &found);
    if (found) return cached;
    absl::StatusOr<std::shared_ptr<Plan>> made = make();
    if (!made.ok()) return made.status();
    if (*made != nullptr) created_.fetch_add(1, std::memory_order_relaxed);
    return Insert(key.bytes(), *std::move(made));
  }

  uint64_t created() const { return created_.load(std::memory_order_relaxed); }
  uint64_t reused() const { return reused_.load(std::memory_order_relaxed); }
  // Zeroes both counts (the cached plans stay).
  void ResetCounts() {
    created_.store(0, std::memory_order_relaxed);
    reused_.store(0, std::memory_order_relaxed);
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
  }
  // Drops every entry (plans still held by a kernel live until it lets them go).
  void Clear() {
    std::list<Entry> dropped;
    std::lock_guard<std::mutex> lock(mutex_);
    index_.clear();
    dropped.swap(entries_);
  }

 private:
  using Entry = std::pair<std::string, std::shared_ptr<Plan>>;

  // The plan of `key` (moved to the front; a non-null one counted as reused), with *found.
  std::shared_ptr<Plan> Find(const std::string& key, bool* found) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    *found = it != index_.end();
    if (!*found) return nullptr;
    entries_.splice(entries_.begin(), entries_, it->second);
    if (it->second->second != nullptr) reused_.fetch_add(1, std::memory_order_relaxed);
    return it->second->second;
  }

  // Inserts `plan` unless `key` has one already; returns the one kept. Evicts the least
  // recently used entries beyond the capacity; their plans are released after the lock.
  std::shared_ptr<Plan> Insert(const std::string& key, std::shared_ptr<Plan> plan) {
    std::list<Entry> evicted;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      entries_.splice(entries_.begin(), entries_, it->second);
      return it->second->second;
    }
    entries_.emplace_front(key, std::move(plan));
    index_.emplace(key, entries_.begin());
    std::shared_ptr<Plan> kept = entries_.front().second;
    while (entries_.size() > capacity_) {
      index_.erase(entries_.back().first);
      evicted.splice(evicted.begin(), entries_, std::prev(entries_.end()));
    }
    return kept;
  }

  const size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, typename std::list<Entry>::iterator> index_;
  std::atomic<uint64_t> created_{0};
  std::atomic<uint64_t> reused_{0};
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_PLAN_CACHE_H_
