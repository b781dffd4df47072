// Best-fit arena allocator over a reserved mapping (see device_arena.h).
#include "plugin/backend/cpu/device_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/device_address.h"

namespace vgpu {
namespace {

constexpr uint64_t kReturnToOsThreshold = 4ull << 20;

uint64_t RoundUp(uint64_t value, uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

std::string FormatAddress(uint64_t address) {
  return absl::StrCat("0x", absl::Hex(address, absl::kZeroPad16));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceArena>> DeviceArena::Create(uint32_t device_index,
                                                                 uint64_t limit_bytes) {
  if (device_index > kMaxDeviceIndex) {
    return absl::InvalidArgumentError(absl::StrCat("device index ", device_index, " too large"));
  }
  if (limit_bytes == 0 || limit_bytes > kDeviceOffsetMask) {
    return absl::InvalidArgumentError(absl::StrCat("device memory limit ", limit_bytes,
                                                   " bytes is outside 1 byte .. 16 TiB"));
  }
  uint64_t limit = RoundUp(limit_bytes, kAlignment);
  void* base = ::mmap(nullptr, limit, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot reserve ", limit, " bytes of address space for device ", device_index, ": ",
        std::strerror(errno)));
  }
  return std::unique_ptr<DeviceArena>(
      new DeviceArena(device_index, static_cast<uint8_t*>(base), limit));
}

DeviceArena::DeviceArena(uint32_t device_index, uint8_t* base, uint64_t limit)
    : device_index_(device_index), base_(base), limit_(limit) {
  free_by_offset_.emplace(0, limit);
  free_by_size_.emplace(limit, 0);
}

DeviceArena::~DeviceArena() { ::munmap(base_, limit_); }

absl::StatusOr<uint64_t> DeviceArena::Allocate(uint64_t size, uint64_t owner) {
  if (size > limit_) {  // also keeps the rounding below from wrapping around
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of device memory on device ", device_index_, ": requested ", size,
        " bytes, more than the device's ", limit_));
  }
  uint64_t rounded = RoundUp(size == 0 ? 1 : size, kAlignment);
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
  allocations_.emplace(offset, Allocation{rounded, owner});
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
  if (size >= kReturnToOsThreshold) {
    // Give the pages of the freed range back to the OS; the range stays reserved.
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    uint64_t first = RoundUp(offset, page);
    uint64_t last = (offset + size) / page * page;
    if (last > first) ::madvise(base_ + first, last - first, MADV_DONTNEED);
  }
}

absl::Status DeviceArena::Free(uint64_t address, uint64_t owner) {
  uint32_t device;
  uint64_t offset;
  if (!DecodeDeviceAddress(address, &device, &offset) || device != device_index_) {
    return absl::InvalidArgumentError(absl::StrCat(
        FormatAddress(address), " is not an address of device ", device_index_));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.find(offset);
  if (it == allocations_.end()) {
    return absl::NotFoundError(
        absl::StrCat("free of ", FormatAddress(address), ", which is not a live allocation"));
  }
  if (it->second.owner != owner) {
    return absl::PermissionDeniedError(absl::StrCat(
        "free of ", FormatAddress(address), ", which belongs to another client"));
  }
  const uint64_t size = it->second.size;
  allocations_.erase(it);
  bytes_in_use_ -= size;
  ReleaseLocked(offset, size);
  return absl::OkStatus();
}

absl::StatusOr<uint8_t*> DeviceArena::Translate(uint64_t address, uint64_t size,
                                                uint64_t owner) const {
  uint32_t device;
  uint64_t offset;
  if (!DecodeDeviceAddress(address, &device, &offset) || device != device_index_) {
    return absl::InvalidArgumentError(absl::StrCat(
        FormatAddress(address), " is not an address of device ", device_index_));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.upper_bound(offset);
  if (it == allocations_.begin()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device range ", FormatAddress(address), " +", size, " is not inside any allocation"));
  }
  --it;
  const uint64_t alloc_start = it->first;
  const uint64_t alloc_end = alloc_start + it->second.size;
  if (offset + size > alloc_end || offset + size < offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device range ", FormatAddress(address), " +", size, " is not inside any allocation"));
  }
  if (it->second.owner != owner) {
    return absl::PermissionDeniedError(absl::StrCat(
        "device range ", FormatAddress(address), " belongs to another client"));
  }
  return base_ + offset;
}

size_t DeviceArena::FreeAllOwnedBy(uint64_t owner) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t count = 0;
  for (auto it = allocations_.begin(); it != allocations_.end();) {
    if (it->second.owner == owner) {
      const uint64_t offset = it->first;
      const uint64_t size = it->second.size;
      it = allocations_.erase(it);
      bytes_in_use_ -= size;
      ReleaseLocked(offset, size);
      ++count;
    } else {
      ++it;
    }
  }
  return count;
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
