// Tests of the CPU backing executor's device memory: the tagged address format
// (backend/device_address.h) and the best-fit arena with owners (backend/device_arena.h),
// including that the host faults when it dereferences a device address.
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/backend/device_address.h"
#include "plugin/backend/device_arena.h"

namespace vgpu {
namespace {

constexpr uint64_t kLimit = 1ull << 20;  // 1 MiB
constexpr uint64_t kOwner = 1;
constexpr uint64_t kOtherOwner = 2;

std::unique_ptr<DeviceArena> MakeArena(uint32_t device = 0, uint64_t limit = kLimit) {
  absl::StatusOr<std::unique_ptr<DeviceArena>> arena = DeviceArena::Create(device, limit);
  EXPECT_TRUE(arena.ok()) << arena.status();
  return arena.ok() ? *std::move(arena) : nullptr;
}

uint64_t OffsetOf(uint64_t address) {
  uint32_t device = 0;
  uint64_t offset = 0;
  EXPECT_TRUE(DecodeDeviceAddress(address, &device, &offset));
  return offset;
}

TEST(DeviceAddress, RoundTripsDeviceAndOffset) {
  const uint64_t address = MakeDeviceAddress(3, 0x1234'5678);
  EXPECT_EQ(address & kDeviceAddressTagMask, kDeviceAddressTag);
  uint32_t device = 0;
  uint64_t offset = 0;
  ASSERT_TRUE(DecodeDeviceAddress(address, &device, &offset));
  EXPECT_EQ(device, 3u);
  EXPECT_EQ(offset, 0x1234'5678u);
}

TEST(DeviceAddress, HostPointersAreNotDeviceAddresses) {
  int on_the_stack = 0;
  uint32_t device;
  uint64_t offset;
  EXPECT_FALSE(DecodeDeviceAddress(reinterpret_cast<uint64_t>(&on_the_stack), &device, &offset));
  EXPECT_FALSE(DecodeDeviceAddress(0, &device, &offset));
  auto heap = std::make_unique<int>(0);
  EXPECT_FALSE(DecodeDeviceAddress(reinterpret_cast<uint64_t>(heap.get()), &device, &offset));
}

TEST(DeviceAddress, IsNonCanonicalOnX86_64) {
  // Bits 63..47 of a canonical x86-64 address are all equal; a device address's are not, so the
  // CPU raises a fault on any access through it.
  const uint64_t address = MakeDeviceAddress(kMaxDeviceIndex, kDeviceOffsetMask);
  const uint64_t high = address >> 47;
  EXPECT_NE(high, 0u);
  EXPECT_NE(high, (1ull << 17) - 1);
}

TEST(DeviceArena, CreateRejectsBadArguments) {
  EXPECT_EQ(DeviceArena::Create(0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DeviceArena::Create(kMaxDeviceIndex + 1, kLimit).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DeviceArena::Create(0, kDeviceOffsetMask + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DeviceArena, AddressesCarryTheTagAndTheDevice) {
  auto arena = MakeArena(/*device=*/5);
  ASSERT_NE(arena, nullptr);
  absl::StatusOr<uint64_t> address = arena->Allocate(1000, kOwner);
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(*address & kDeviceAddressTagMask, kDeviceAddressTag);
  uint32_t device;
  uint64_t offset;
  ASSERT_TRUE(DecodeDeviceAddress(*address, &device, &offset));
  EXPECT_EQ(device, 5u);
  EXPECT_EQ(arena->device_index(), 5u);
}

TEST(DeviceArena, EveryAllocationIsAlignedTo256Bytes) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  for (uint64_t size : {1, 3, 255, 256, 257, 1000, 4096, 5000}) {
    absl::StatusOr<uint64_t> address = arena->Allocate(size, kOwner);
    ASSERT_TRUE(address.ok()) << address.status();
    EXPECT_EQ(OffsetOf(*address) % DeviceArena::kAlignment, 0u) << "size " << size;
  }
  // Sizes are rounded up to the alignment: 1 + 3 + 255 -> 3 blocks, 256, 257 -> 2, 1000 -> 4,
  // 4096 -> 16, 5000 -> 20.
  EXPECT_EQ(arena->Info().bytes_in_use, (3 + 1 + 2 + 4 + 16 + 20) * DeviceArena::kAlignment);
}

TEST(DeviceArena, ZeroByteAllocationsGetDistinctAddresses) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  absl::StatusOr<uint64_t> a = arena->Allocate(0, kOwner);
  absl::StatusOr<uint64_t> b = arena->Allocate(0, kOwner);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_TRUE(arena->Free(*a, kOwner).ok());
  EXPECT_TRUE(arena->Free(*b, kOwner).ok());
}

TEST(DeviceArena, FreeingEverythingCoalescesIntoOneBlock) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  std::vector<uint64_t> addresses;
  for (int i = 0; i < 16; ++i) {
    absl::StatusOr<uint64_t> address = arena->Allocate(4096 * (i % 3 + 1), kOwner);
    ASSERT_TRUE(address.ok()) << address.status();
    addresses.push_back(*address);
  }
  EXPECT_LT(arena->Info().largest_free_block, kLimit);
  // Free in an order that exercises merging with the next block, the previous block and both.
  for (size_t i = 0; i < addresses.size(); i += 2) {
    ASSERT_TRUE(arena->Free(addresses[i], kOwner).ok());
  }
  for (size_t i = 1; i < addresses.size(); i += 2) {
    ASSERT_TRUE(arena->Free(addresses[i], kOwner).ok());
  }
  MemoryInfo info = arena->Info();
  EXPECT_EQ(info.bytes_in_use, 0u);
  EXPECT_EQ(info.largest_free_block, kLimit);
  // The whole arena is one block again: it can be allocated in one piece.
  absl::StatusOr<uint64_t> all = arena->Allocate(kLimit, kOwner);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(OffsetOf(*all), 0u);
}

TEST(DeviceArena, ReusesTheBestFittingFreeBlock) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  // [big 8KiB][spacer][small 1KiB][spacer][rest ...]
  uint64_t big = *arena->Allocate(8192, kOwner);
  ASSERT_TRUE(arena->Allocate(256, kOwner).ok());
  uint64_t small = *arena->Allocate(1024, kOwner);
  ASSERT_TRUE(arena->Allocate(256, kOwner).ok());
  ASSERT_TRUE(arena->Free(big, kOwner).ok());
  ASSERT_TRUE(arena->Free(small, kOwner).ok());
  // First fit would take the 8KiB hole at the lower offset; best fit takes the 1KiB hole.
  absl::StatusOr<uint64_t> reused = arena->Allocate(1000, kOwner);
  ASSERT_TRUE(reused.ok()) << reused.status();
  EXPECT_EQ(*reused, small);
  absl::StatusOr<uint64_t> reused_big = arena->Allocate(8000, kOwner);
  ASSERT_TRUE(reused_big.ok()) << reused_big.status();
  EXPECT_EQ(*reused_big, big);
}

TEST(DeviceArena, OutOfMemoryIsResourceExhausted) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(arena->Allocate(kLimit + 1, kOwner).status().code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(arena->Allocate(kLimit - 4096, kOwner).ok());
  absl::StatusOr<uint64_t> too_much = arena->Allocate(8192, kOwner);
  EXPECT_EQ(too_much.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(too_much.status().message().find("out of device memory"), std::string::npos)
      << too_much.status();
  // What still fits is still handed out.
  EXPECT_TRUE(arena->Allocate(4096, kOwner).ok());
  EXPECT_EQ(arena->Allocate(1, kOwner).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(DeviceArena, FragmentedMemoryCannotServeALargerRequest) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  const uint64_t quarter = kLimit / 4;
  std::vector<uint64_t> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(*arena->Allocate(quarter, kOwner));
  ASSERT_TRUE(arena->Free(blocks[0], kOwner).ok());
  ASSERT_TRUE(arena->Free(blocks[2], kOwner).ok());
  EXPECT_EQ(arena->Info().largest_free_block, quarter);
  EXPECT_EQ(arena->Allocate(quarter + 256, kOwner).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(DeviceArena, HugeRequestsAreResourceExhaustedNotWrappedAround) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  for (uint64_t size : {max, max - 100, max - 255, uint64_t{1} << 63}) {
    absl::StatusOr<uint64_t> address = arena->Allocate(size, kOwner);
    EXPECT_EQ(address.status().code(), absl::StatusCode::kResourceExhausted)
        << "size " << size << " gave " << (address.ok() ? "an allocation" : "another error");
  }
  EXPECT_EQ(arena->Info().bytes_in_use, 0u);
}

TEST(DeviceArena, AddressesAreLinearWithinAnAllocation) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  const uint64_t address = *arena->Allocate(4096, kOwner);
  absl::StatusOr<uint8_t*> base = arena->Translate(address, 4096, kOwner);
  ASSERT_TRUE(base.ok()) << base.status();
  for (uint64_t offset : {1, 100, 255, 2048, 4095}) {
    absl::StatusOr<uint8_t*> inner = arena->Translate(address + offset, 1, kOwner);
    ASSERT_TRUE(inner.ok()) << inner.status();
    EXPECT_EQ(*inner, *base + offset);
  }
  // Bytes written through one translation are read back through another.
  std::memset(*base, 0, 4096);
  (*base)[1234] = 0x5A;
  EXPECT_EQ(**arena->Translate(address + 1234, 1, kOwner), 0x5A);
}

TEST(DeviceArena, TranslateRejectsRangesOutsideAnAllocation) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  const uint64_t a = *arena->Allocate(1024, kOwner);
  const uint64_t b = *arena->Allocate(1024, kOwner);
  ASSERT_TRUE(arena->Free(b, kOwner).ok());
  // Running past the end of the allocation.
  EXPECT_EQ(arena->Translate(a, 1025, kOwner).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(arena->Translate(a + 1000, 100, kOwner).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A freed (stale) allocation and never-allocated space.
  EXPECT_EQ(arena->Translate(b, 16, kOwner).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(arena->Translate(MakeDeviceAddress(0, kLimit / 2), 16, kOwner).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A size that wraps the address space.
  EXPECT_FALSE(arena->Translate(a + 16, std::numeric_limits<uint64_t>::max() - 8, kOwner).ok());
  // Inside is fine.
  EXPECT_TRUE(arena->Translate(a, 1024, kOwner).ok());
}

TEST(DeviceArena, TranslateRejectsAnotherOwnersMemory) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  const uint64_t address = *arena->Allocate(1024, kOwner);
  absl::StatusOr<uint8_t*> stolen = arena->Translate(address, 16, kOtherOwner);
  EXPECT_EQ(stolen.status().code(), absl::StatusCode::kInvalidArgument) << stolen.status();
}

// Issue 25, class 6: an error must not tell a tenant whether an address lies in another tenant's
// allocation or in none (that would map where the others' memory is).
TEST(DeviceArena, ErrorsForAnotherOwnersMemoryEqualThoseForUnallocatedMemory) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  const uint64_t address = *arena->Allocate(4096, kOwner);
  const absl::Status foreign_range = arena->Translate(address + 64, 16, kOtherOwner).status();
  const absl::Status foreign_pin = arena->PinRange(address, 4096, kOtherOwner).status();
  const absl::Status foreign_free = arena->Free(address, kOtherOwner);
  ASSERT_TRUE(arena->Free(address, kOwner).ok());  // no pins: the block is gone at once
  const absl::Status unallocated_range = arena->Translate(address + 64, 16, kOtherOwner).status();
  const absl::Status unallocated_pin = arena->PinRange(address, 4096, kOtherOwner).status();
  const absl::Status unallocated_free = arena->Free(address, kOtherOwner);
  EXPECT_FALSE(foreign_range.ok());
  EXPECT_EQ(foreign_range, unallocated_range);
  EXPECT_EQ(foreign_pin, unallocated_pin);
  EXPECT_FALSE(foreign_free.ok());
  EXPECT_EQ(foreign_free, unallocated_free);
  EXPECT_EQ(foreign_free.code(), absl::StatusCode::kNotFound);
}

TEST(DeviceArena, ARangePastTheEndOfAnOwnAllocationSaysSo) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  const uint64_t address = *arena->Allocate(256, kOwner);
  const absl::Status status = arena->Translate(address + 128, 512, kOwner).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("past the end of this client's allocation of 256 bytes"),
            std::string::npos)
      << status;
}

TEST(DeviceArena, TranslateRejectsUntaggedAndForeignDeviceAddresses) {
  auto arena = MakeArena(/*device=*/0);
  ASSERT_NE(arena, nullptr);
  const uint64_t address = *arena->Allocate(1024, kOwner);
  const uint64_t offset = OffsetOf(address);
  // The same offset without the tag, and tagged for another device.
  EXPECT_EQ(arena->Translate(offset, 16, kOwner).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(arena->Translate(MakeDeviceAddress(1, offset), 16, kOwner).status().code(),
            absl::StatusCode::kInvalidArgument);
  int host = 0;
  EXPECT_EQ(arena->Translate(reinterpret_cast<uint64_t>(&host), 4, kOwner).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DeviceArena, FreeChecksTheAllocationAndItsOwner) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  const uint64_t address = *arena->Allocate(1024, kOwner);
  EXPECT_EQ(arena->Free(address + 256, kOwner).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(arena->Free(address, kOtherOwner).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(arena->Free(OffsetOf(address), kOwner).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(arena->Info().bytes_in_use, 1024u);  // none of those freed anything
  EXPECT_TRUE(arena->Free(address, kOwner).ok());
  EXPECT_EQ(arena->Free(address, kOwner).code(), absl::StatusCode::kNotFound);  // double free
  EXPECT_EQ(arena->Info().bytes_in_use, 0u);
}

TEST(DeviceArena, FreeAllOwnedByReleasesOnlyThatOwnersMemory) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  std::vector<uint64_t> mine;
  for (int i = 0; i < 5; ++i) mine.push_back(*arena->Allocate(2048, kOwner));
  const uint64_t theirs = *arena->Allocate(4096, kOtherOwner);
  EXPECT_EQ(arena->FreeAllOwnedBy(kOwner), 5u);
  EXPECT_EQ(arena->Info().bytes_in_use, 4096u);
  for (uint64_t address : mine) EXPECT_FALSE(arena->Translate(address, 1, kOwner).ok());
  EXPECT_TRUE(arena->Translate(theirs, 4096, kOtherOwner).ok());
  EXPECT_EQ(arena->FreeAllOwnedBy(kOwner), 0u);
  EXPECT_EQ(arena->FreeAllOwnedBy(kOtherOwner), 1u);
  EXPECT_EQ(arena->Info().largest_free_block, kLimit);
}

TEST(DeviceArena, InfoReportsUsagePeakAndCounts) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  MemoryInfo empty = arena->Info();
  EXPECT_EQ(empty.limit_bytes, kLimit);
  EXPECT_EQ(empty.bytes_in_use, 0u);
  EXPECT_EQ(empty.peak_bytes_in_use, 0u);
  EXPECT_EQ(empty.num_allocs, 0u);
  EXPECT_EQ(empty.largest_free_block, kLimit);

  const uint64_t a = *arena->Allocate(4096, kOwner);
  const uint64_t b = *arena->Allocate(65536, kOwner);
  MemoryInfo busy = arena->Info();
  EXPECT_EQ(busy.bytes_in_use, 4096u + 65536u);
  EXPECT_EQ(busy.peak_bytes_in_use, 4096u + 65536u);
  EXPECT_EQ(busy.num_allocs, 2u);
  EXPECT_EQ(busy.largest_alloc_size, 65536u);
  EXPECT_EQ(busy.largest_free_block, kLimit - 4096 - 65536);

  ASSERT_TRUE(arena->Free(b, kOwner).ok());
  ASSERT_TRUE(arena->Free(a, kOwner).ok());
  MemoryInfo after = arena->Info();
  EXPECT_EQ(after.bytes_in_use, 0u);
  EXPECT_EQ(after.peak_bytes_in_use, 4096u + 65536u);  // the peak is remembered
  EXPECT_EQ(after.num_allocs, 2u);                     // allocations ever made
  EXPECT_EQ(after.largest_free_block, kLimit);
}

TEST(DeviceArena, LargeFreedBlocksAreUsableAgain) {
  // Blocks of 4 MiB and more give their pages back to the OS when freed; the range must still be
  // usable afterwards.
  auto arena = MakeArena(0, 16ull << 20);
  ASSERT_NE(arena, nullptr);
  const uint64_t big = *arena->Allocate(8ull << 20, kOwner);
  uint8_t* host = *arena->Translate(big, 8ull << 20, kOwner);
  std::memset(host, 0xAB, 8ull << 20);
  ASSERT_TRUE(arena->Free(big, kOwner).ok());
  const uint64_t again = *arena->Allocate(8ull << 20, kOwner);
  uint8_t* host_again = *arena->Translate(again, 8ull << 20, kOwner);
  host_again[0] = 1;
  host_again[(8ull << 20) - 1] = 2;
  EXPECT_EQ(host_again[0], 1);
  EXPECT_EQ(host_again[(8ull << 20) - 1], 2);
}

TEST(DeviceArena, ChargesWhatItTakesIncludingZeroByteAllocations) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(DeviceArena::ChargedSize(0), DeviceArena::kAlignment);
  EXPECT_EQ(DeviceArena::ChargedSize(1), DeviceArena::kAlignment);
  EXPECT_EQ(DeviceArena::ChargedSize(257), 2 * DeviceArena::kAlignment);
  ASSERT_TRUE(arena->Allocate(0, kOwner).ok());
  ASSERT_TRUE(arena->Allocate(1, kOwner).ok());
  ASSERT_TRUE(arena->Allocate(257, kOwner).ok());
  ASSERT_TRUE(arena->Allocate(100, kOtherOwner).ok());
  EXPECT_EQ(arena->UsageOf(kOwner).charged, 4 * DeviceArena::kAlignment);
  EXPECT_EQ(arena->UsageOf(kOtherOwner).charged, DeviceArena::kAlignment);
  EXPECT_EQ(arena->Info().bytes_in_use, 5 * DeviceArena::kAlignment);
}

TEST(DeviceArena, AFreedBlockIsZeroedBeforeItIsReused) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  for (uint64_t size : {uint64_t{300}, uint64_t{64} << 10}) {
    const uint64_t secret = *arena->Allocate(size, kOwner);
    std::memset(*arena->Translate(secret, size, kOwner), 0xA5, size);
    ASSERT_TRUE(arena->Free(secret, kOwner).ok());
    const uint64_t reused = *arena->Allocate(size, kOtherOwner);
    ASSERT_EQ(reused, secret) << "the test needs the same block";
    const uint8_t* bytes = *arena->Translate(reused, size, kOtherOwner);
    for (uint64_t i = 0; i < DeviceArena::ChargedSize(size); ++i) {
      ASSERT_EQ(bytes[i], 0) << "stale byte " << i << " of a " << size << "-byte block";
    }
    ASSERT_TRUE(arena->Free(reused, kOtherOwner).ok());
  }
}

TEST(DeviceArena, ALargeFreedBlockIsZeroedIncludingItsUnalignedEdges) {
  auto arena = MakeArena(0, 16ull << 20);
  ASSERT_NE(arena, nullptr);
  const uint64_t pad = *arena->Allocate(768, kOwner);  // the big block starts mid-page
  const uint64_t size = (4ull << 20) + 512;
  const uint64_t secret = *arena->Allocate(size, kOwner);
  ASSERT_NE(OffsetOf(secret) % 4096, 0u);
  std::memset(*arena->Translate(secret, size, kOwner), 0x5A, size);
  ASSERT_TRUE(arena->Free(secret, kOwner).ok());
  const uint64_t reused = *arena->Allocate(size, kOtherOwner);
  ASSERT_EQ(reused, secret);
  const uint8_t* bytes = *arena->Translate(reused, size, kOtherOwner);
  for (uint64_t i = 0; i < size; ++i) ASSERT_EQ(bytes[i], 0) << "stale byte " << i;
  (void)pad;
}

TEST(DeviceArena, FreeWaitsForTheLastPinBeforeTheBlockIsReused) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  const uint64_t x = *arena->Allocate(4096, kOwner);
  absl::StatusOr<DeviceArena::Pin> pin = arena->PinRange(x + 16, 64, kOwner);
  ASSERT_TRUE(pin.ok()) << pin.status();
  ASSERT_TRUE(arena->Free(x, kOwner).ok());
  // Dead for new work at once...
  EXPECT_EQ(arena->PinRange(x, 16, kOwner).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(arena->Translate(x, 16, kOwner).ok());
  EXPECT_EQ(arena->Free(x, kOwner).code(), absl::StatusCode::kNotFound);  // no double free
  // ...but still charged and not handed to anybody while pinned.
  EXPECT_EQ(arena->UsageOf(kOwner).charged, 4096u);
  EXPECT_EQ(arena->UsageOf(kOwner).pending_free, 4096u);
  std::memset(pin->host(), 0x77, 64);  // the queued work still writes it
  const uint64_t other = *arena->Allocate(4096, kOtherOwner);
  EXPECT_NE(other, x);
  pin->Reset();  // the work has run
  EXPECT_EQ(arena->UsageOf(kOwner).charged, 0u);
  EXPECT_EQ(arena->UsageOf(kOwner).pending_free, 0u);
  const uint64_t again = *arena->Allocate(4096, kOtherOwner);
  EXPECT_EQ(again, x);
  const uint8_t* bytes = *arena->Translate(again, 4096, kOtherOwner);
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(bytes[i], 0) << i;
}

TEST(DeviceArena, PinRangesIsAllOrNothing) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  const uint64_t mine = *arena->Allocate(1024, kOwner);
  const uint64_t theirs = *arena->Allocate(1024, kOtherOwner);
  PinnedRanges pins;
  const BufferArg ranges[] = {{mine, 1024}, {0, 0}, {theirs, 16}};
  EXPECT_EQ(arena->PinRanges(ranges, kOwner, &pins).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(pins.empty());
  // No pin was left behind: freeing returns the block at once.
  ASSERT_TRUE(arena->Free(mine, kOwner).ok());
  EXPECT_EQ(arena->UsageOf(kOwner).charged, 0u);

  const uint64_t a = *arena->Allocate(1024, kOwner);
  const BufferArg good[] = {{a, 1024}, {0, 0}, {a + 512, 512}};
  ASSERT_TRUE(arena->PinRanges(good, kOwner, &pins).ok());
  ASSERT_EQ(pins.size(), 3u);
  EXPECT_EQ(pins[1].host(), nullptr);
  EXPECT_EQ(pins[2].host(), pins[0].host() + 512);
  ASSERT_TRUE(arena->Free(a, kOwner).ok());
  pins.erase(pins.begin());
  EXPECT_EQ(arena->UsageOf(kOwner).charged, 1024u);  // one pin left
  pins.clear();
  EXPECT_EQ(arena->UsageOf(kOwner).charged, 0u);
}

TEST(DeviceArena, FreeAllOwnedByDefersPinnedBlocks) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  const uint64_t a = *arena->Allocate(1024, kOwner);
  const uint64_t b = *arena->Allocate(1024, kOwner);
  absl::StatusOr<DeviceArena::Pin> pin = arena->PinRange(b, 1024, kOwner);
  ASSERT_TRUE(pin.ok());
  EXPECT_EQ(arena->FreeAllOwnedBy(kOwner), 2u);
  EXPECT_EQ(arena->UsageOf(kOwner).charged, 1024u);
  EXPECT_EQ(arena->FreeAllOwnedBy(kOwner), 0u);  // already freed: not twice
  pin->Reset();
  EXPECT_EQ(arena->Info().bytes_in_use, 0u);
  EXPECT_EQ(arena->Info().largest_free_block, kLimit);
  (void)a;
}

// Reads one byte through `address` as if it were a host pointer.
uint8_t ReadThrough(uint64_t address) {
  return *reinterpret_cast<volatile uint8_t*>(static_cast<uintptr_t>(address));
}

TEST(DeviceArenaDeathTest, HostDereferenceOfADeviceAddressFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  const uint64_t address = *arena->Allocate(4096, kOwner);
  // The memory behind it is real and readable through Translate...
  ASSERT_TRUE(arena->Translate(address, 4096, kOwner).ok());
  // ...but the address itself is not a host pointer.
  EXPECT_DEATH(ReadThrough(address), "");
  EXPECT_DEATH(ReadThrough(address + 100), "");
}

}  // namespace
}  // namespace vgpu
