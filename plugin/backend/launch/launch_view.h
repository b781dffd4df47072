// One launch as every executor sees it, before any executor-specific work: LaunchView (the
// buffers in the executor's address space with their sizes, the parameter block, the settings
// of the descriptors the launch carried), the checked arithmetic every launch reader sizes a
// problem with, and the parser of a launch's descriptor section (run once, by the session
// layer). Host code only, no executor type: the launch readers of backend/launch/ take a
// LaunchView, and each executor's kernel context extends it (launch_context.h).
#ifndef VGPU_BACKEND_LAUNCH_LAUNCH_VIEW_H_
#define VGPU_BACKEND_LAUNCH_LAUNCH_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/protocol/launch_params.h"

namespace vgpu {

struct DescriptorView {
  DescriptorKind kind;
  absl::Span<const uint8_t> settings;
};

// --- Checked arithmetic for launch geometry -------------------------------------------------
// A launch's extents, counts and ranks come from a tenant that may be hostile: every product a
// kernel uses to size a loop or index memory goes through these helpers (overflow-checked,
// negative factors rejected) before the kernel touches a buffer, and every count is then checked
// against the buffer the kernel received (LaunchView::ExpectElements, LaunchContext::Buffer).
// Pure functions, thread-safe.

// No tensor of a launch may hold more elements than this: byte counts of any dtype and the index
// arithmetic of the kernels stay far from 64-bit overflow.
inline constexpr int64_t kMaxLaunchElements = int64_t{1} << 56;

// The product of `factors`, or InvalidArgument naming `what` when a factor is negative or the
// product (or any factor) exceeds `limit`.
absl::StatusOr<int64_t> CheckedProduct(std::initializer_list<int64_t> factors,
                                       absl::string_view what,
                                       int64_t limit = kMaxLaunchElements);
absl::StatusOr<int64_t> CheckedProduct(absl::Span<const int64_t> factors, absl::string_view what,
                                       int64_t limit = kMaxLaunchElements);

// The element count of a tensor of dims[0..rank) named `what`: InvalidArgument when the rank is
// outside [0, kMaxRank], or as CheckedProduct.
absl::StatusOr<int64_t> CheckedElementCount(absl::string_view what, const int64_t* dims, int rank,
                                            int64_t limit = kMaxLaunchElements);

// a + b for non-negative a, b, or InvalidArgument naming `what` when the sum exceeds `limit`.
absl::StatusOr<int64_t> CheckedSum(int64_t a, int64_t b, absl::string_view what,
                                   int64_t limit = kMaxLaunchElements);

// A tenant can write any byte into a bool tensor, and reading a byte other than 0 or 1 as a C++
// bool is undefined behaviour (a compiler may use the value as an index). So before a kernel
// sees a bool buffer, every nonzero byte of its first `count` bytes that is not 1 becomes 1, in
// place: a tensor of well-formed bools is only read, never written. Not thread-safe against a
// concurrent writer of the same bytes (only a tenant writing garbage races with itself).
void CanonicalizeBools(uint8_t* bytes, uint64_t count);

// One launch: borrows everything (the session's pins, the command's bytes) for the launch's
// duration. Thread-compatible: read-only once built.
struct LaunchView {
  absl::Span<uint8_t* const> buffers;     // in the executor's address space, in the launch's order
  absl::Span<const uint64_t> buffer_sizes;
  absl::Span<const uint8_t> params;
  absl::Span<const DescriptorView> descriptors = {};

  // Fails unless the launch named exactly `count` buffers.
  absl::Status ExpectBuffers(size_t count) const;

  // Fails unless buffer `index` exists and its address is a multiple of `alignment` (a power of
  // two). A tenant may name any byte of its memory, and a value read through a misaligned
  // pointer is undefined behaviour; a GPU refuses a misaligned access as well.
  absl::Status ExpectAligned(size_t index, size_t alignment) const;

  // Fails unless buffer `index` exists, is aligned to `alignment` and holds at least
  // `elements` elements of `element_size` bytes (compared by division: a hostile count cannot
  // overflow). What Buffer<T>() checks, for readers that know only an element size.
  absl::Status ExpectElements(size_t index, uint64_t elements, size_t element_size,
                              size_t alignment) const;

  // The settings of descriptor `index`, which must be of Settings' kind.
  template <typename Settings>
  absl::StatusOr<Settings> Descriptor(size_t index) const {
    if (index >= descriptors.size()) {
      return absl::InvalidArgumentError(absl::StrCat("launch carries no descriptor ", index));
    }
    const DescriptorView& view = descriptors[index];
    if (view.kind != DescriptorTraits<Settings>::kKind || view.settings.size() != sizeof(Settings)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "descriptor ", index, " is a ", DescriptorKindName(view.kind), " descriptor of ",
          view.settings.size(), " bytes, expected ",
          DescriptorKindName(DescriptorTraits<Settings>::kKind)));
    }
    Settings settings;
    std::memcpy(&settings, view.settings.data(), sizeof(Settings));
    return settings;
  }

  // Descriptors 0, 1, 2, ... read into *settings... in that order, each as Descriptor<>() reads
  // it: the first failure is returned (the settings after it are left as they were). The common
  // opening of a reader whose descriptors come first:
  //   TensorDescriptorSettings x, y;
  //   VGPU_RETURN_IF_ERROR(launch.ReadDescriptors(&x, &y));
  template <typename... Settings>
  absl::Status ReadDescriptors(Settings*... settings) const {
    size_t index = 0;
    absl::Status status;
    auto read_next = [&](auto* out) {
      if (!status.ok()) return;
      absl::StatusOr<std::remove_pointer_t<decltype(out)>> read =
          Descriptor<std::remove_pointer_t<decltype(out)>>(index++);
      if (read.ok()) {
        *out = *read;
      } else {
        status = read.status();
      }
    };
    (read_next(settings), ...);
    return status;
  }

  ParamReader Params() const { return ParamReader(params); }

  // Fails unless the launch named exactly `buffer_count` buffers (ExpectBuffers); then the P
  // that begins the parameter block (ParamReader::Get). `rest`, when not null, is set to read
  // what the kernel's block holds after it (arrays, further fields).
  template <typename P>
  absl::StatusOr<P> ReadParams(size_t buffer_count, ParamReader* rest = nullptr) const {
    VGPU_RETURN_IF_ERROR(ExpectBuffers(buffer_count));
    ParamReader reader = Params();
    absl::StatusOr<P> leading = reader.Get<P>();
    if (rest != nullptr) *rest = reader;
    return leading;
  }
};

// Splits a launch's descriptor section (uint8 count, then per descriptor uint8 kind, uint16
// size, settings bytes; see Command::descriptors) into views of `bytes`, appended to *out.
// InvalidArgument when it is malformed. The views borrow `bytes`.
absl::Status ParseLaunchDescriptors(absl::Span<const uint8_t> bytes,
                                    absl::InlinedVector<DescriptorView, 6>* out);

}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_LAUNCH_VIEW_H_
