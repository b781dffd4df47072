// DescriptorQueues (see descriptor_queues.h).
#include "plugin/client/descriptor_queues.h"

#include <algorithm>
#include <tuple>

namespace vgpu {

bool DescriptorQueues::Retain(uint64_t stream, DescriptorKind kind, void* descriptor) {
  std::lock_guard<std::mutex> lock(mu_);
  std::deque<void*>& queue = queues_[Key(stream, kind)];
  if (queue.size() >= kMaxQueueLength) return false;
  queue.push_back(descriptor);
  return true;
}

std::vector<void*> DescriptorQueues::Drain(uint64_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<void*> drained;
  for (auto it = queues_.begin(); it != queues_.end();) {
    if (it->first.first == stream) {
      drained.insert(drained.end(), it->second.begin(), it->second.end());
      queues_.erase(it++);
    } else {
      ++it;
    }
  }
  return drained;
}

std::vector<std::tuple<uint64_t, DescriptorKind, size_t>> DescriptorQueues::Lengths() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::tuple<uint64_t, DescriptorKind, size_t>> lengths;
  for (const auto& [key, queue] : queues_) {
    if (!queue.empty()) {
      lengths.emplace_back(key.first, static_cast<DescriptorKind>(key.second), queue.size());
    }
  }
  std::sort(lengths.begin(), lengths.end());
  return lengths;
}

std::vector<void*> DescriptorQueues::Snapshot(uint64_t stream, DescriptorKind kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = queues_.find(Key(stream, kind));
  if (it == queues_.end()) return {};
  return std::vector<void*>(it->second.begin(), it->second.end());
}

}  // namespace vgpu
