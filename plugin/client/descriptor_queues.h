// The per-stream descriptor queues of the reuse method (docs/method.md, claims 4-6): one FIFO of
// descriptor pointers per (stream, descriptor kind). During warm-up a destroyed descriptor is
// retained and its pointer appended to the queue of the stream it was created on; in steady
// state a create takes the pointer at the head and moves it to the tail, so every iteration
// reuses the same objects in the same order. Thread-safe.
#ifndef VGPU_CLIENT_DESCRIPTOR_QUEUES_H_
#define VGPU_CLIENT_DESCRIPTOR_QUEUES_H_

#include <cstdint>
#include <deque>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu {

// A queue entry is an opaque pointer owned by the caller (the DnnApi's descriptor objects).
class DescriptorQueues {
 public:
  // At most this many retained descriptors per (stream, kind); beyond it, Retain refuses and
  // the caller frees the descriptor for real: queues never grow without bound.
  static constexpr size_t kMaxQueueLength = 4096;

  // Claim 6: appends `descriptor` to the tail of (stream, kind). False if the queue is full.
  bool Retain(uint64_t stream, DescriptorKind kind, void* descriptor);

  // Claims 4-5: the pointer at the head of (stream, kind), moved to the tail; nullptr if the
  // queue is empty. `usable` is asked about the head candidate: a descriptor still in use (a
  // longer call sequence than the warm-up's) is skipped, rotated to the tail as well; if none
  // of the queue is usable, nullptr.
  template <typename Usable>
  void* Rotate(uint64_t stream, DescriptorKind kind, Usable usable) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = queues_.find(Key(stream, kind));
    if (it == queues_.end()) return nullptr;
    std::deque<void*>& queue = it->second;
    for (size_t tries = 0; tries < queue.size(); ++tries) {
      void* head = queue.front();
      queue.pop_front();
      queue.push_back(head);
      if (usable(head)) return head;
    }
    return nullptr;
  }

  // Removes and returns every retained pointer of `stream` (the stream is being destroyed).
  std::vector<void*> Drain(uint64_t stream);

  // Queue lengths: (stream, kind, length) for every non-empty queue.
  std::vector<std::tuple<uint64_t, DescriptorKind, size_t>> Lengths() const;

  // The contents of one queue, head first (for tests and diagnostics).
  std::vector<void*> Snapshot(uint64_t stream, DescriptorKind kind) const;

 private:
  static std::pair<uint64_t, uint8_t> Key(uint64_t stream, DescriptorKind kind) {
    return {stream, static_cast<uint8_t>(kind)};
  }
  mutable std::mutex mu_;
  absl::flat_hash_map<std::pair<uint64_t, uint8_t>, std::deque<void*>> queues_;
};

}  // namespace vgpu

#endif  // VGPU_CLIENT_DESCRIPTOR_QUEUES_H_
