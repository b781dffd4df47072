// The launch a kernel of one executor receives: the executor-independent LaunchView
// (launch_view.h) plus the executor's device (the CPU executor's Eigen thread pool, the CUDA
// executor's stream and library handles) and typed access to the buffers.
#ifndef VGPU_BACKEND_LAUNCH_LAUNCH_CONTEXT_H_
#define VGPU_BACKEND_LAUNCH_LAUNCH_CONTEXT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "absl/status/statusor.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/common/status_macros.h"

namespace vgpu {

// What LaunchContext needs to know of an executor's device type. An executor whose buffers are
// not host-addressable (a GPU) specialises it with kHostAddressable = false; its kernels then
// read bool tensors as bytes and treat any nonzero byte as true themselves.
template <typename Device>
struct LaunchDeviceTraits {
  static constexpr bool kHostAddressable = true;
};

// One launch as a kernel of an executor with device type `Device` sees it. Borrows everything;
// lives for the kernel's call.
template <typename Device>
struct LaunchContext : LaunchView {
  LaunchContext(const LaunchView& view, const Device* launch_device)
      : LaunchView(view), device(launch_device) {}

  const Device* device;  // never null

  // Buffer `index` as an array of at least `elements` values of T, aligned for T. For T = bool
  // on host-addressable memory the first `elements` bytes are made canonical first
  // (CanonicalizeBools).
  template <typename T>
  absl::StatusOr<T*> Buffer(size_t index, uint64_t elements) const {
    VGPU_RETURN_IF_ERROR(ExpectElements(index, elements, sizeof(T), alignof(T)));
    if constexpr (std::is_same_v<std::remove_const_t<T>, bool> &&
                  LaunchDeviceTraits<Device>::kHostAddressable) {
      CanonicalizeBools(buffers[index], elements);
    }
    return reinterpret_cast<T*>(buffers[index]);
  }
};

// A launch's buffers as arrays of T that all hold one element count: kInputs inputs, then the
// output (an activation's [x, y] or [a, b, out], a softmax's [x, y]).
template <typename T, size_t kInputs>
struct ElementwiseBuffers {
  std::array<const T*, kInputs> in;
  T* out;
};

// Buffers 0 .. kInputs - 1 (const T) and buffer kInputs (T), each checked in that order by
// context.Buffer to hold at least `elements` values of T; the first error otherwise.
template <typename T, size_t kInputs, typename Context>
absl::StatusOr<ElementwiseBuffers<T, kInputs>> TakeElementwiseBuffers(const Context& context,
                                                                       uint64_t elements) {
  ElementwiseBuffers<T, kInputs> buffers;
  for (size_t i = 0; i < kInputs; ++i) {
    VGPU_ASSIGN_OR_RETURN(buffers.in[i], context.template Buffer<const T>(i, elements));
  }
  VGPU_ASSIGN_OR_RETURN(buffers.out, context.template Buffer<T>(kInputs, elements));
  return buffers;
}

}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_LAUNCH_CONTEXT_H_
