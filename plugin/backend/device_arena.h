// The memory of one virtual device: an executor's memory of `limit` bytes (ArenaStorage; on the
// CPU executor a reserved, not committed, host mapping), carved by a best-fit allocator with
// coalescing. The bookkeeping is executor-independent: an executor with memory of its own (a
// GPU's) gives the arena a storage over it, and the pins then hold that memory's addresses. Every allocation has an owner (a session); a
// range is usable only by its owner, so a forged or stale address is an error, not a data leak.
//
// Tenants do not trust each other, so the arena also guarantees:
//  - stream-ordered free: work queued on a stream PINS the allocations it names (Pin) when it is
//    queued; Free marks an allocation dead for new work at once, but its block returns to the
//    free lists only when the last pin is released (like cudaFreeAsync). Until then it stays
//    charged to its owner.
//  - scrubbing: a block is zeroed before it returns to the free lists, so every free byte is zero
//    and no allocation ever shows a previous owner's data.
//  - honest accounting: what an owner is charged is what the arena takes (ChargedSize).
#ifndef VGPU_BACKEND_DEVICE_ARENA_H_
#define VGPU_BACKEND_DEVICE_ARENA_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugin/protocol/command.h"

namespace vgpu {

// The contiguous memory an arena carves, in an executor's address space. Implementations zero it
// when asked (scrubbing) and release it when destroyed.
class ArenaStorage {
 public:
  virtual ~ArenaStorage() = default;
  // The first byte, as the executor's kernels and copies address it (host memory: a host
  // pointer; a GPU's memory: a device pointer, never dereferenced on the host).
  virtual uint8_t* base() const = 0;
  virtual uint64_t size() const = 0;
  // Sets [offset, offset + size) to zero. Called outside the arena's lock, from any thread.
  virtual void Zero(uint64_t offset, uint64_t size) = 0;
};

// Reserves `limit_bytes` (rounded up to DeviceArena::kAlignment) of host address space whose
// pages are committed on first touch and given back to the OS when large blocks are scrubbed.
absl::StatusOr<std::unique_ptr<ArenaStorage>> ReserveHostArenaStorage(uint32_t device_index,
                                                                       uint64_t limit_bytes);

class DeviceArena {
 private:
  struct Block;

 public:
  // Alignment of every allocation, as CUDA's allocator guarantees; also the smallest block (a
  // zero-byte allocation takes one).
  static constexpr uint64_t kAlignment = 256;
  // Freed blocks at least this large give their pages back to the OS (madvise) instead of being
  // zeroed byte by byte; the next touch reads zeros.
  static constexpr uint64_t kReturnToOsThreshold = 1ull << 20;

  // What an allocation of `size` bytes takes from the arena (and is charged): `size` rounded up
  // to kAlignment, at least kAlignment. Only meaningful for size <= the arena's limit.
  static constexpr uint64_t ChargedSize(uint64_t size) {
    return size == 0 ? kAlignment : (size + kAlignment - 1) / kAlignment * kAlignment;
  }

  // A pinned device range: while it lives, the allocation it lies in keeps its block (a Free
  // only marks it dead). Move-only RAII; releasing the last pin of a freed allocation scrubs its
  // block and returns it to the free lists, on the releasing thread. Must not outlive the arena.
  class Pin {
   public:
    Pin() = default;
    Pin(Pin&& other) noexcept { *this = std::move(other); }
    Pin& operator=(Pin&& other) noexcept;
    ~Pin() { Reset(); }
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;

    // The address of the pinned range's first byte in the executor's address space (a host
    // address on the CPU executor; null for an empty Pin).
    uint8_t* host() const { return host_; }
    // Releases the pin now (no-op if empty).
    void Reset();

   private:
    friend class DeviceArena;
    DeviceArena* arena_ = nullptr;
    Block* block_ = nullptr;
    uint8_t* host_ = nullptr;
  };

  // An owner's device memory on this arena, in bytes.
  struct Usage {
    uint64_t charged = 0;        // live + freed-but-pinned allocations
    uint64_t pending_free = 0;   // freed, waiting for their pins to be released
    uint64_t blocks = 0;         // allocations counted in `charged`
  };

  // An arena over host memory: reserves `limit_bytes` of address space (ReserveHostArenaStorage).
  static absl::StatusOr<std::unique_ptr<DeviceArena>> Create(uint32_t device_index,
                                                             uint64_t limit_bytes);
  // An arena over `storage`, which it owns; the storage must read as zeros.
  static absl::StatusOr<std::unique_ptr<DeviceArena>> Create(uint32_t device_index,
                                                             std::unique_ptr<ArenaStorage> storage);
  // Every Pin must have been released before.
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // Returns a tagged device address of ChargedSize(size) zeroed bytes, or ResourceExhausted when
  // no free block is large enough. Thread-safe.
  absl::StatusOr<uint64_t> Allocate(uint64_t size, uint64_t owner);

  // Frees the allocation that starts at `address`: new Pins/Translates of it fail at once; its
  // block is scrubbed and reused when its last Pin is released (now, if it has none).
  // NotFound if it is not a live allocation of `owner` (the same error whoever else holds the
  // address, if anyone: errors do not map other owners' memory). Thread-safe.
  absl::Status Free(uint64_t address, uint64_t owner);

  // Host pointer for [address, address + size), which must lie inside one live allocation of
  // `owner`. The pointer stays valid while that allocation lives (use Pin to keep it alive
  // across a concurrent Free). Thread-safe.
  absl::StatusOr<uint8_t*> Translate(uint64_t address, uint64_t size, uint64_t owner) const;

  // Validates [address, address + size) as Translate does and pins its allocation. Thread-safe.
  absl::StatusOr<Pin> PinRange(uint64_t address, uint64_t size, uint64_t owner);

  // Pins every range of `ranges` (all on this arena; size-0 ranges get an empty Pin) under one
  // lock, all or nothing: on error no pin is taken and the error names the failing range.
  // `pins` receives one Pin per range, appended in order. Thread-safe.
  absl::Status PinRanges(absl::Span<const BufferArg> ranges, uint64_t owner,
                         absl::InlinedVector<Pin, 4>* pins);

  // Frees every live allocation of `owner` (a session that ended), as Free does. Returns how
  // many. Thread-safe.
  size_t FreeAllOwnedBy(uint64_t owner);

  // `owner`'s charged and pending bytes on this arena. Thread-safe.
  Usage UsageOf(uint64_t owner) const;

  MemoryInfo Info() const;
  uint32_t device_index() const { return device_index_; }

 private:
  struct Block {
    Block(uint64_t offset, uint64_t size, uint64_t owner)
        : offset(offset), size(size), owner(owner) {}
    const uint64_t offset;
    const uint64_t size;   // what the arena took (ChargedSize)
    const uint64_t owner;
    // The owner's reference (until Free) plus one per Pin. The block is reclaimed by whoever
    // drops it to zero. Increments happen under mu_ on a block that is not freed.
    std::atomic<uint64_t> references{1};
    bool freed = false;  // guarded by mu_
  };

  DeviceArena(uint32_t device_index, std::unique_ptr<ArenaStorage> storage, uint64_t limit);
  // Finds the live allocation of `owner` holding [offset, offset + size). Caller holds mu_.
  absl::StatusOr<Block*> FindLiveLocked(uint64_t address, uint64_t size, uint64_t owner) const;
  // Marks `block` freed and drops the owner's reference; true if that was the last one (the
  // caller then calls Reclaim outside mu_). Caller holds mu_.
  bool MarkFreedLocked(Block& block);
  // Scrubs a block nobody references any more and returns it to the free lists. Takes mu_.
  void Reclaim(Block* block);
  void Scrub(uint64_t offset, uint64_t size);
  void ReleaseLocked(uint64_t offset, uint64_t size);  // returns a block to the free lists

  const uint32_t device_index_;
  const std::unique_ptr<ArenaStorage> storage_;
  uint8_t* const base_;  // storage_->base()
  const uint64_t limit_;

  mutable std::mutex mu_;
  std::map<uint64_t, Block> allocations_;                // by offset (live and pinned-freed)
  std::map<uint64_t, uint64_t> free_by_offset_;          // offset -> size; all bytes zero
  std::set<std::pair<uint64_t, uint64_t>> free_by_size_; // (size, offset)
  absl::flat_hash_map<uint64_t, Usage> usage_by_owner_;
  uint64_t bytes_in_use_ = 0;
  uint64_t peak_bytes_in_use_ = 0;
  uint64_t num_allocs_ = 0;
  uint64_t largest_alloc_size_ = 0;
};

// The pins of one stream command, in the order of its ranges.
using PinnedRanges = absl::InlinedVector<DeviceArena::Pin, 4>;

}  // namespace vgpu

#endif  // VGPU_BACKEND_DEVICE_ARENA_H_
