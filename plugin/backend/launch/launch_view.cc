// The executor-independent view of a launch (see launch_view.h).
#include "plugin/backend/launch/launch_view.h"

namespace vgpu {

void CanonicalizeBools(uint8_t* bytes, uint64_t count) {
  // Well-formed bools are the rule: test 64 bytes at a time (a byte other than 0 or 1 has a bit
  // of 0xFE set) and rewrite only a block that holds such a byte, one byte at a time.
  constexpr uint64_t kNotBoolBits = 0xFEFEFEFEFEFEFEFEull;
  constexpr uint64_t kBlock = 64;
  auto fix = [bytes](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      if (bytes[i] > 1) bytes[i] = 1;
    }
  };
  uint64_t start = 0;
  for (; start + kBlock <= count; start += kBlock) {
    uint64_t stray = 0;
    for (uint64_t offset = 0; offset < kBlock; offset += sizeof(uint64_t)) {
      uint64_t word;
      std::memcpy(&word, bytes + start + offset, sizeof(word));
      stray |= word & kNotBoolBits;
    }
    if (stray != 0) fix(start, start + kBlock);
  }
  fix(start, count);
}

absl::Status LaunchView::ExpectBuffers(size_t count) const {
  if (buffers.size() == count) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("expected ", count, " buffers, got ", buffers.size()));
}

absl::Status LaunchView::ExpectAligned(size_t index, size_t alignment) const {
  if (index >= buffers.size()) {
    return absl::InvalidArgumentError(absl::StrCat("no buffer ", index));
  }
  const uintptr_t address = reinterpret_cast<uintptr_t>(buffers[index]);
  if (alignment > 1 && (address & (alignment - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "buffer ", index, " is not aligned to its ", alignment, "-byte elements"));
  }
  return absl::OkStatus();
}

absl::Status LaunchView::ExpectElements(size_t index, uint64_t elements, size_t element_size,
                                        size_t alignment) const {
  VGPU_RETURN_IF_ERROR(ExpectAligned(index, alignment));
  if (element_size == 0 || elements > buffer_sizes[index] / element_size) {
    return absl::InvalidArgumentError(absl::StrCat("buffer ", index, " holds ",
                                                   buffer_sizes[index], " bytes, needs ",
                                                   elements, " elements of ", element_size,
                                                   " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CheckedProduct(absl::Span<const int64_t> factors, absl::string_view what,
                                       int64_t limit) {
  int64_t product = 1;
  for (int64_t factor : factors) {
    if (factor < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has a negative size (", factor, ")"));
    }
    if (factor > limit) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": size ", factor, " exceeds the limit of ", limit, " elements"));
    }
    if (factor != 0 && product > limit / factor) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has more than the limit of ", limit, " elements"));
    }
    product *= factor;
  }
  return product;
}

absl::StatusOr<int64_t> CheckedProduct(std::initializer_list<int64_t> factors,
                                       absl::string_view what, int64_t limit) {
  return CheckedProduct(absl::Span<const int64_t>(factors.begin(), factors.size()), what, limit);
}

absl::StatusOr<int64_t> CheckedElementCount(absl::string_view what, const int64_t* dims, int rank,
                                            int64_t limit) {
  if (rank < 0 || rank > kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has rank ", rank, ", outside [0, ", kMaxRank, "]"));
  }
  return CheckedProduct(absl::Span<const int64_t>(dims, static_cast<size_t>(rank)), what, limit);
}

absl::StatusOr<int64_t> CheckedSum(int64_t a, int64_t b, absl::string_view what, int64_t limit) {
  if (a < 0 || b < 0 || a > limit || b > limit - a) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", a, " + ", b, " is negative or exceeds ", limit));
  }
  return a + b;
}

absl::Status ParseLaunchDescriptors(absl::Span<const uint8_t> bytes,
                                    absl::InlinedVector<DescriptorView, 6>* out) {
  if (bytes.empty()) return absl::OkStatus();
  ParamReader reader(bytes);
  absl::StatusOr<uint8_t> count = reader.Get<uint8_t>();
  if (!count.ok()) return count.status();
  for (int i = 0; i < *count; ++i) {
    absl::StatusOr<uint8_t> kind = reader.Get<uint8_t>();
    if (!kind.ok()) return kind.status();
    absl::StatusOr<uint16_t> size = reader.Get<uint16_t>();
    if (!size.ok()) return size.status();
    if (*kind < 1 || *kind > kNumDescriptorKinds || *size > kMaxDescriptorSettingsSize) {
      return absl::InvalidArgumentError(absl::StrCat("malformed descriptor ", i, " (kind ",
                                                     static_cast<int>(*kind), ", ", *size,
                                                     " bytes)"));
    }
    absl::StatusOr<absl::Span<const uint8_t>> settings = reader.GetBytes(*size);
    if (!settings.ok()) return settings.status();
    out->push_back(DescriptorView{static_cast<DescriptorKind>(*kind), *settings});
  }
  if (reader.remaining() != 0) {
    return absl::InvalidArgumentError("trailing bytes after the descriptor section");
  }
  return absl::OkStatus();
}

}  // namespace vgpu
