// The memory of one virtual device: a reserved (not committed) host mapping of `limit` bytes,
// carved by a best-fit allocator with coalescing. Every allocation has an owner (a session); a
// range is usable only by its owner, so a forged or stale address is an error, not a data leak.
#ifndef VGPU_BACKEND_CPU_DEVICE_ARENA_H_
#define VGPU_BACKEND_CPU_DEVICE_ARENA_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "absl/status/statusor.h"
#include "plugin/protocol/command.h"

namespace vgpu {

class DeviceArena {
 public:
  // Alignment of every allocation, as CUDA's allocator guarantees.
  static constexpr uint64_t kAlignment = 256;

  // Reserves `limit_bytes` of address space (pages are committed on first touch).
  static absl::StatusOr<std::unique_ptr<DeviceArena>> Create(uint32_t device_index,
                                                             uint64_t limit_bytes);
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // Returns a tagged device address, or ResourceExhausted when no free block is large enough.
  // Thread-safe.
  absl::StatusOr<uint64_t> Allocate(uint64_t size, uint64_t owner);

  // Releases the allocation that starts at `address`. NotFound / PermissionDenied if it is not a
  // live allocation of `owner`. Thread-safe.
  absl::Status Free(uint64_t address, uint64_t owner);

  // Host pointer for [address, address + size), which must lie inside one live allocation of
  // `owner`. The pointer stays valid while that allocation lives. Thread-safe.
  absl::StatusOr<uint8_t*> Translate(uint64_t address, uint64_t size, uint64_t owner) const;

  // Releases every allocation of `owner` (a session that ended). Returns how many.
  size_t FreeAllOwnedBy(uint64_t owner);

  MemoryInfo Info() const;
  uint32_t device_index() const { return device_index_; }

 private:
  struct Allocation {
    uint64_t size;
    uint64_t owner;
  };
  DeviceArena(uint32_t device_index, uint8_t* base, uint64_t limit);
  void ReleaseLocked(uint64_t offset, uint64_t size);  // returns a block to the free lists

  const uint32_t device_index_;
  uint8_t* const base_;
  const uint64_t limit_;

  mutable std::mutex mu_;
  std::map<uint64_t, Allocation> allocations_;           // by offset
  std::map<uint64_t, uint64_t> free_by_offset_;          // offset -> size
  std::set<std::pair<uint64_t, uint64_t>> free_by_size_; // (size, offset)
  uint64_t bytes_in_use_ = 0;
  uint64_t peak_bytes_in_use_ = 0;
  uint64_t num_allocs_ = 0;
  uint64_t largest_alloc_size_ = 0;
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_CPU_DEVICE_ARENA_H_
