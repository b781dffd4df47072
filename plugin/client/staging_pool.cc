// StagingPool (see staging_pool.h).
#include "plugin/client/staging_pool.h"

#include <algorithm>
#include <new>
#include <utility>

namespace vgpu {

std::shared_ptr<StagingPool> StagingPool::Create(uint64_t max_kept_bytes) {
  return std::shared_ptr<StagingPool>(new StagingPool(max_kept_bytes));
}

std::shared_ptr<uint8_t> StagingPool::Take(uint64_t size) {
  std::unique_ptr<uint8_t[]> buffer;
  uint64_t capacity = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The smallest kept buffer that fits without wasting more than the request.
    auto best = kept_.end();
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (it->capacity >= size && it->capacity <= 2 * size &&
          (best == kept_.end() || it->capacity < best->capacity)) {
        best = it;
      }
    }
    if (best != kept_.end()) {
      capacity = best->capacity;
      buffer = std::move(best->buffer);
      kept_bytes_ -= capacity;
      kept_.erase(best);
    }
  }
  if (buffer == nullptr) {
    buffer.reset(new (std::nothrow) uint8_t[size]);
    if (buffer == nullptr) return nullptr;
    capacity = size;
  }
  std::shared_ptr<StagingPool> pool = shared_from_this();
  return std::shared_ptr<uint8_t>(buffer.release(), [pool, capacity](uint8_t* returned) {
    pool->Return(returned, capacity);
  });
}

void StagingPool::Return(uint8_t* buffer, uint64_t capacity) {
  std::unique_ptr<uint8_t[]> owned(buffer);
  if (capacity > max_kept_bytes_) return;  // never kept: freed as `owned` goes
  std::lock_guard<std::mutex> lock(mu_);
  // Past the bound the oldest kept buffers go first (they were returned longest ago).
  while (!kept_.empty() && kept_bytes_ + capacity > max_kept_bytes_) {
    kept_bytes_ -= kept_.front().capacity;
    kept_.erase(kept_.begin());
  }
  kept_.push_back(Kept{capacity, std::move(owned)});
  kept_bytes_ += capacity;
}

uint64_t StagingPool::kept_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kept_bytes_;
}

}  // namespace vgpu
