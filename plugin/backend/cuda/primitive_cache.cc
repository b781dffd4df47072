// PrimitiveCache (primitive_cache.h): a mutex-guarded LRU list with a hash index over the key
// bytes.
#include "plugin/backend/cuda/primitive_cache.h"

#include <algorithm>

namespace vgpu::cuda {

PrimitiveKey PrimitiveKey::ForLaunch(uint32_t kernel_id, const CudaKernelContext& context) {
  PrimitiveKey key;
  key.AddValue(kernel_id);
  const uint32_t descriptors = static_cast<uint32_t>(context.descriptors.size());
  key.AddValue(descriptors);
  for (const DescriptorView& view : context.descriptors) {
    key.AddValue(view.kind);
    const uint32_t size = static_cast<uint32_t>(view.settings.size());
    key.AddValue(size);
    key.Add(view.settings);
  }
  const uint32_t params = static_cast<uint32_t>(context.params.size());
  key.AddValue(params);
  key.Add(context.params);
  return key;
}

PrimitiveKey& PrimitiveKey::Add(absl::Span<const uint8_t> bytes) {
  bytes_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return *this;
}

PrimitiveCache::PrimitiveCache(size_t capacity) : capacity_(std::max<size_t>(capacity, 1)) {}

size_t PrimitiveCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

std::shared_ptr<Primitive> PrimitiveCache::Find(const PrimitiveKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key.bytes());
  if (it == index_.end()) return nullptr;
  entries_.splice(entries_.begin(), entries_, it->second);
  reused_.fetch_add(1, std::memory_order_relaxed);
  return it->second->second;
}

std::shared_ptr<Primitive> PrimitiveCache::Insert(const PrimitiveKey& key,
                                                  std::shared_ptr<Primitive> primitive) {
  std::list<Entry> evicted;
  std::shared_ptr<Primitive> kept;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key.bytes());
    if (it != index_.end()) {
      entries_.splice(entries_.begin(), entries_, it->second);
      return it->second->second;
    }
    entries_.emplace_front(key.bytes(), std::move(primitive));
    index_.emplace(key.bytes(), entries_.begin());
    kept = entries_.front().second;
    while (entries_.size() > capacity_) {
      index_.erase(entries_.back().first);
      evicted.splice(evicted.begin(), entries_, std::prev(entries_.end()));
    }
  }
  return kept;
}

}  // namespace vgpu::cuda
