// Elements moved without being read: the kernels that only copy (data movement, gathers) name an
// element size of 1, 2, 4 or 8 bytes instead of a dtype. This header holds that size rule and
// the one element-type dispatch of those kernels, for every executor: an element is the unsigned
// integer of its size (a word access) where every address involved is aligned to that size, and
// UnalignedElement<N> (N bytes, byte-aligned) where a tenant placed a tensor at an address that
// is not — a word access through a misaligned pointer is undefined behaviour on a CPU and refused
// by a GPU. Host code, header-only; UnalignedElement is plain data that device code may copy.
#ifndef VGPU_BACKEND_LAUNCH_ELEMENT_BYTES_H_
#define VGPU_BACKEND_LAUNCH_ELEMENT_BYTES_H_

#include <cstdint>
#include <initializer_list>

#include "absl/status/status.h"
#include "plugin/backend/launch/reader_dispatch.h"

namespace vgpu {

// The dispatch of kernels that move elements without reading them: every dtype held as the
// unsigned integer of its size, which is what the launch readers' storage types already are
// (ReaderElementTypes, reader_dispatch.h).
using ElementBitsDispatch = ReaderDispatch;

// An element of N bytes with byte alignment.
template <int N>
struct UnalignedElement {
  uint8_t bytes[N];
};

// OK when `element_size` is 1, 2, 4 or 8; InvalidArgument otherwise ("element size S is not 1,
// 2, 4 or 8": DTypeDispatch::ElementSize's rule and message).
inline absl::Status CheckElementSize(uint32_t element_size) {
  return ElementBitsDispatch::ElementSize(element_size,
                                          [](auto) { return absl::OkStatus(); });
}

// Calls fn(E{}) with the element type for `element_size` bytes at `addresses`: uint8_t,
// uint16_t, uint32_t or uint64_t when every address is a multiple of the size,
// UnalignedElement<size> otherwise. InvalidArgument (as CheckElementSize) for another size.
template <typename Fn>
absl::Status DispatchElementBytes(uint32_t element_size,
                                  std::initializer_list<const void*> addresses, Fn&& fn) {
  uintptr_t bits = 0;
  for (const void* address : addresses) bits |= reinterpret_cast<uintptr_t>(address);
  return ElementBitsDispatch::ElementSize(element_size, [&](auto word) -> absl::Status {
    using Word = decltype(word);
    if constexpr (sizeof(Word) == 1) {
      return fn(Word{});
    } else {
      if ((bits & (sizeof(Word) - 1)) == 0) return fn(Word{});
      return fn(UnalignedElement<sizeof(Word)>{});
    }
  });
}

}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_ELEMENT_BYTES_H_
