// The type of the kernel ids a kLaunch command names, and the element types kernels take. The
// ids themselves and each kernel's launch layout are in the families' headers
// (protocol/kernels/<family>.h). Both sides of the boundary agree on these numbers; a remote
// backend rejects ids it does not know.
#ifndef VGPU_PROTOCOL_KERNEL_IDS_H_
#define VGPU_PROTOCOL_KERNEL_IDS_H_

#include <cstdint>

namespace vgpu {

// A kernel's id: each family owns a range of ids and documents each kernel's descriptors,
// buffers and parameter block in its header (protocol/kernels/<family>.h).
enum class KernelId : uint32_t {};

// Element types a kernel can name. Values are part of the wire format.
enum class DType : uint32_t {
  kFloat32 = 1,
  kFloat64 = 2,
  kFloat16 = 3,
  kBFloat16 = 4,
  kInt32 = 5,
  kInt64 = 6,
  kUInt8 = 7,
  kBool = 8,
};

// Size in bytes of one element of `dtype`, or 0 for an unknown value.
inline uint64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: case DType::kInt32: return 4;
    case DType::kFloat64: case DType::kInt64: return 8;
    case DType::kFloat16: case DType::kBFloat16: return 2;
    case DType::kUInt8: case DType::kBool: return 1;
  }
  return 0;
}

}  // namespace vgpu

#endif  // VGPU_PROTOCOL_KERNEL_IDS_H_
