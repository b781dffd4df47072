// Best-fit arena allocator over an executor's memory (host: a reserved mapping), with pins, stream-ordered frees and
// scrubbing (see device_arena.h).
#include "plugin/backend/device_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/device_address.h"

namespace vgpu {
namespace {

uint64_t RoundUp(uint64_t value, uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

std::string FormatAddress(uint64_t address) {
  return absl::StrCat("0x", absl::Hex(address, absl::kZeroPad16));
}

// A range that does not start inside a live or pending allocation of the asking owner: the one
// answer for "in another owner's allocation" and "in no allocation", so that errors do not map
// other tenants' memory.
absl::Status NotOwnedRange(uint64_t address, uint64_t size) {
  return absl::InvalidArgumentError(absl::StrCat("device range ", FormatAddress(address), " +",
                                                 size, " is not inside an allocation of this "
                                                 "client"));
}

// Host memory: a reserved anonymous mapping whose pages are committed on first touch.
class HostArenaStorage final : public ArenaStorage {
 public:
  HostArenaStorage(uint8_t* base, uint64_t size)
      : base_(base), size_(size), page_size_(static_cast<uint64_t>(::sysconf(_SC_PAGESIZE))) {}
  ~HostArenaStorage() override { ::munmap(base_, size_); }

  uint8_t* base() const override { return base_; }
  uint64_t size() const override { return size_; }

  void Zero(uint64_t offset, uint64_t size) override {
    uint8_t* const start = base_ + offset;
    if (size >= DeviceArena::kReturnToOsThreshold) {
      // Give the page-aligned interior back to the OS (it reads as zeros when touched again;
      // the range stays reserved) and zero the partial pages at either end.
      const uint64_t first = RoundUp(offset, page_size_);
      const uint64_t last = (offset + size) / page_size_ * page_size_;
      if (last > first && ::madvise(base_ + first, last - first, MADV_DONTNEED) == 0) {
        std::memset(start, 0, first - offset);
        std::memset(base_ + last, 0, offset + size - last);
        return;
      }
    }
    std::memset(start, 0, size);
  }

 private:
  uint8_t* const base_;
  const uint64_t size_;
  const uint64_t page_size_;
};

absl::Status CheckArenaGeometry(uint32_t device_index, uint64_t limit_bytes) {
  if (device_index > kMaxDeviceIndex) {
    return absl::InvalidArgumentError(absl::StrCat("device index ", device_index, " too large"));
  }
  if (limit_bytes == 0 || limit_bytes > kDeviceOffsetMask) {
    return absl::InvalidArgumentError(absl::StrCat("device memory limit ", limit_bytes,
                                                   " bytes is outside 1 byte .. 16 TiB"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ArenaStorage>> ReserveHostArenaStorage(uint32_t device_index,
                                                                       uint64_t limit_bytes) {
  if (absl::Status s = CheckArenaGeometry(device_index, limit_bytes); !s.ok()) return s;
  const uint64_t limit = RoundUp(limit_bytes, DeviceArena::kAlignment);
  void* base = ::mmap(nullptr, limit, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot reserve ", limit, " bytes of address space for device ", device_index, ": ",
        std::strerror(errno)));
  }
  return std::make_unique<HostArenaStorage>(static_cast<uint8_t*>(base), limit);
}

absl::StatusOr<std::unique_ptr<DeviceArena>> DeviceArena::Create(uint32_t device_index,
                                                                 uint64_t limit_bytes) {
  absl::StatusOr<std::unique_ptr<ArenaStorage>> storage =
      ReserveHostArenaStorage(device_index, limit_bytes);
  if (!storage.ok()) return storage.status();
  return Create(device_index, *std::move(storage));
}

absl::StatusOr<std::unique_ptr<DeviceArena>> DeviceArena::Create(
    uint32_t device_index, std::unique_ptr<ArenaStorage> storage) {
  if (storage == nullptr) return absl::InvalidArgumentError("an arena needs its storage");
  if (absl::Status s = CheckArenaGeometry(device_index, storage->size()); !s.ok()) return s;
  // Offsets are carved in kAlignment units: a tail smaller than that is never handed out.
  const uint64_t limit = storage->size() / kAlignment * kAlignment;
  if (limit == 0) return absl::InvalidArgumentError("arena storage smaller than one block");
  return std::unique_ptr<DeviceArena>(new DeviceArena(device_index, std::move(storage), limit));
}

DeviceArena::DeviceArena(uint32_t device_index, std::unique_ptr<ArenaStorage> storage,
                         uint64_t limit)
    : device_index_(device_index),
      storage_(std::move(storage)),
      base_(storage_->base()),
      limit_(limit) {
  free_by_offset_.emplace(0, limit);
  free_by_size_.emplace(limit, 0);
}

DeviceArena::~DeviceArena() = default;

DeviceArena::Pin& DeviceArena::Pin::operator=(Pin&& other) noexcept {
  if (this != &other) {
    Reset();
    arena_ = std::exchange(other.arena_, nullptr);
    block_ = std::exchange(other.block_, nullptr);
    host_ = std::exchange(other.host_, nullptr);
  }
  return *this;
}

void DeviceArena::Pin::Reset() {
  if (block_ != nullptr && block_->references.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    arena_->Reclaim(block_);  // the allocation was freed and this was its last user
  }
  arena_ = nullptr;
  block_ = nullptr;
  host_ = nullptr;
}

absl::StatusOr<uint64_t> DeviceArena::Allocate(uint64_t size, uint64_t owner) {
  if (size > limit_) {  // also keeps the rounding below from wrapping around
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of device memory on device ", device_index_, ": requested ", size,
        " bytes, more than the device's ", limit_));
  }
  const uint64_t rounded = ChargedSize(size);
  std::lock_guard<std::mutex> lock(mu_);
  auto best = free_by_size_.lower_bound({rounded, 0});
  if (best == free_by_size_.end()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of device memory on device ", device_index_, ": requested ", size, " bytes, ",
        bytes_in_use_, " of ", limit_, " bytes in use"));
  }
  const uint64_t block_size = best->first;
  const uint64_t offset = best->second;
  free_by_size_.erase(best);
  free_by_offset_.erase(offset);
  if (block_size > rounded) {
    free_by_offset_.emplace(offset + rounded, block_size - rounded);
    free_by_size_.emplace(block_size - rounded, offset + rounded);
  }
  allocations_.emplace(std::piecewise_construct, std::forward_as_tuple(offset),
                       std::forward_as_tuple(offset, rounded, owner));
  Usage& usage = usage_by_owner_[owner];
  usage.charged += rounded;
  usage.blocks += 1;
  bytes_in_use_ += rounded;
  if (bytes_in_use_ > peak_bytes_in_use_) peak_bytes_in_use_ = bytes_in_use_;
  ++num_allocs_;
  if (rounded > largest_alloc_size_) largest_alloc_size_ = rounded;
  return MakeDeviceAddress(device_index_, offset);
}

void DeviceArena::ReleaseLocked(uint64_t offset, uint64_t size) {
  uint64_t start = offset;
  uint64_t end = offset + size;
  auto next = free_by_offset_.lower_bound(offset);
  if (next != free_by_offset_.end() && next->first == end) {
    end += next->second;
    free_by_size_.erase({next->second, next->first});
    next = free_by_offset_.erase(next);
  }
  if (next != free_by_offset_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      free_by_size_.erase({prev->second, prev->first});
      free_by_offset_.erase(prev);
    }
  }
  free_by_offset_.emplace(start, end - start);
  free_by_size_.emplace(end - start, start);
}

void DeviceArena::Scrub(uint64_t offset, uint64_t size) { storage_->Zero(offset, size); }

void DeviceArena::Reclaim(Block* block) {
  // Nobody references the block any more and it is freed, so nobody can pin it again: scrub it
  // outside the lock, then hand it to the free lists.
  const uint64_t offset = block->offset;
  const uint64_t size = block->size;
  const uint64_t owner = block->owner;
  Scrub(offset, size);
  std::lock_guard<std::mutex> lock(mu_);
  allocations_.erase(offset);
  auto usage = usage_by_owner_.find(owner);
  if (usage != usage_by_owner_.end()) {
    usage->second.charged -= size;
    usage->second.pending_free -= size;
    usage->second.blocks -= 1;
    if (usage->second.charged == 0) usage_by_owner_.erase(usage);
  }
  bytes_in_use_ -= size;
  ReleaseLocked(offset, size);
}

bool DeviceArena::MarkFreedLocked(Block& block) {
  block.freed = true;
  usage_by_owner_[block.owner].pending_free += block.size;
  return block.references.fetch_sub(1, std::memory_order_acq_rel) == 1;
}

absl::Status DeviceArena::Free(uint64_t address, uint64_t owner) {
  uint32_t device;
  uint64_t offset;
  if (!DecodeDeviceAddress(address, &device, &offset) || device != device_index_) {
    return absl::InvalidArgumentError(absl::StrCat(
        FormatAddress(address), " is not an address of device ", device_index_));
  }
  Block* reclaim = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = allocations_.find(offset);
    // One answer whether the address starts another owner's allocation, lies in one, or in
    // none: the error must not map other tenants' memory (docs/security.md, Disclosure).
    if (it == allocations_.end() || it->second.owner != owner || it->second.freed) {
      return absl::NotFoundError(absl::StrCat("free of ", FormatAddress(address),
                                              ", which is not a live allocation of this client"));
    }
    if (MarkFreedLocked(it->second)) reclaim = &it->second;
  }
  if (reclaim != nullptr) Reclaim(reclaim);
  return absl::OkStatus();
}

absl::StatusOr<DeviceArena::Block*> DeviceArena::FindLiveLocked(uint64_t address, uint64_t size,
                                                                uint64_t owner) const {
  uint32_t device;
  uint64_t offset;
  if (!DecodeDeviceAddress(address, &device, &offset) || device != device_index_) {
    return absl::InvalidArgumentError(absl::StrCat(
        FormatAddress(address), " is not an address of device ", device_index_));
  }
  // Whether the range lies in another owner's allocation or in none, the answer is the same
  // (NotOwnedRange): a tenant must not learn where other tenants' allocations are. Only about
  // the owner's own allocations does the message say more.
  auto it = allocations_.upper_bound(offset);
  if (it == allocations_.begin()) return NotOwnedRange(address, size);
  --it;
  if (it->second.owner != owner) return NotOwnedRange(address, size);
  const uint64_t alloc_end = it->first + it->second.size;
  if (offset >= alloc_end) return NotOwnedRange(address, size);
  if (offset + size > alloc_end || offset + size < offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device range ", FormatAddress(address), " +", size,
        " runs past the end of this client's allocation of ", it->second.size, " bytes at ",
        FormatAddress(MakeDeviceAddress(device_index_, it->first))));
  }
  if (it->second.freed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device range ", FormatAddress(address), " +", size,
        " lies in an allocation that was freed"));
  }
  return const_cast<Block*>(&it->second);
}

absl::StatusOr<uint8_t*> DeviceArena::Translate(uint64_t address, uint64_t size,
                                                uint64_t owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Block*> block = FindLiveLocked(address, size, owner);
  if (!block.ok()) return block.status();
  return base_ + (address & kDeviceOffsetMask);
}

absl::StatusOr<DeviceArena::Pin> DeviceArena::PinRange(uint64_t address, uint64_t size,
                                                       uint64_t owner) {
  Pin pin;
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<Block*> block = FindLiveLocked(address, size, owner);
  if (!block.ok()) return block.status();
  (*block)->references.fetch_add(1, std::memory_order_relaxed);
  pin.arena_ = this;
  pin.block_ = *block;
  pin.host_ = base_ + (address & kDeviceOffsetMask);
  return pin;
}

absl::Status DeviceArena::PinRanges(absl::Span<const BufferArg> ranges, uint64_t owner,
                                    absl::InlinedVector<Pin, 4>* pins) {
  const size_t first = pins->size();
  std::lock_guard<std::mutex> lock(mu_);
  for (const BufferArg& range : ranges) {
    Pin& pin = pins->emplace_back();
    if (range.size == 0) continue;  // empty tensors may have no memory at all
    absl::StatusOr<Block*> block = FindLiveLocked(range.address, range.size, owner);
    if (!block.ok()) {
      // All or nothing. No pin taken here can be the last reference (the blocks are live), so
      // dropping them under the lock never reclaims.
      for (size_t i = first; i < pins->size(); ++i) {
        Pin& taken = (*pins)[i];
        if (taken.block_ != nullptr) {
          taken.block_->references.fetch_sub(1, std::memory_order_relaxed);
          taken.block_ = nullptr;
        }
      }
      pins->resize(first);
      return block.status();
    }
    (*block)->references.fetch_add(1, std::memory_order_relaxed);
    pin.arena_ = this;
    pin.block_ = *block;
    pin.host_ = base_ + (range.address & kDeviceOffsetMask);
  }
  return absl::OkStatus();
}

size_t DeviceArena::FreeAllOwnedBy(uint64_t owner) {
  std::vector<Block*> reclaim;
  size_t count = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [offset, block] : allocations_) {
      if (block.owner != owner || block.freed) continue;
      ++count;
      if (MarkFreedLocked(block)) reclaim.push_back(&block);
    }
  }
  for (Block* block : reclaim) Reclaim(block);
  return count;
}

DeviceArena::Usage DeviceArena::UsageOf(uint64_t owner) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = usage_by_owner_.find(owner);
  return it == usage_by_owner_.end() ? Usage{} : it->second;
}

MemoryInfo DeviceArena::Info() const {
  std::lock_guard<std::mutex> lock(mu_);
  MemoryInfo info;
  info.limit_bytes = limit_;
  info.bytes_in_use = bytes_in_use_;
  info.peak_bytes_in_use = peak_bytes_in_use_;
  info.num_allocs = num_allocs_;
  info.largest_alloc_size = largest_alloc_size_;
  info.largest_free_block = free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
  return info;
}

}  // namespace vgpu
