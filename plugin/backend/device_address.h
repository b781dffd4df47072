// The device address format every backing executor hands out (its arenas decode it). Addresses handed to TensorFlow are
// offsets into a device's arena, tagged so that they fault if the host dereferences them: the
// top byte 0x7D makes them non-canonical on x86-64 (4- and 5-level paging) and bits 53-55 put
// them beyond any user address on AArch64 even with top-byte-ignore. Addresses are linear within
// an allocation, as TensorFlow's BFC allocator requires.
//
//   63      56 55  52 51        44 43                                   0
//   +---------+------+------------+--------------------------------------+
//   |  0x7D   | 0xE  |   device   |        offset in the arena (16 TiB)   |
//   +---------+------+------------+--------------------------------------+
#ifndef VGPU_BACKEND_DEVICE_ADDRESS_H_
#define VGPU_BACKEND_DEVICE_ADDRESS_H_

#include <cstdint>

namespace vgpu {

inline constexpr uint64_t kDeviceAddressTag = 0x7DE0'0000'0000'0000ull;
inline constexpr uint64_t kDeviceAddressTagMask = 0xFFF0'0000'0000'0000ull;
inline constexpr int kDeviceIndexShift = 44;
inline constexpr uint64_t kDeviceOffsetMask = (1ull << kDeviceIndexShift) - 1;
inline constexpr uint32_t kMaxDeviceIndex = 0xFF;

inline uint64_t MakeDeviceAddress(uint32_t device, uint64_t offset) {
  return kDeviceAddressTag | (static_cast<uint64_t>(device) << kDeviceIndexShift) |
         (offset & kDeviceOffsetMask);
}

// Returns false if `address` does not carry the device tag.
inline bool DecodeDeviceAddress(uint64_t address, uint32_t* device, uint64_t* offset) {
  if ((address & kDeviceAddressTagMask) != kDeviceAddressTag) return false;
  *device = static_cast<uint32_t>((address >> kDeviceIndexShift) & kMaxDeviceIndex);
  *offset = address & kDeviceOffsetMask;
  return true;
}

}  // namespace vgpu

#endif  // VGPU_BACKEND_DEVICE_ADDRESS_H_
