// The byte format of a kernel launch's parameter block, and the writer/reader both sides use.
//
// A parameter block is a sequence of little-endian fields written in an order each kernel
// documents in its family header (protocol/kernels/*.h). Fields are fixed-width scalars or
// length-prefixed arrays. The reader is bounds-checked: a truncated or malformed block is an
// InvalidArgument error naming the kernel, never an out-of-bounds read.
//
//   scalar      : sizeof(T) bytes, T trivially copyable (integers, floats, enums, POD structs)
//   array<T>    : uint32 count, then count * sizeof(T) bytes
//
// Descriptor settings (protocol/descriptors.h) do not travel in the block but beside it, in
// Command::descriptors, written by the client runtime's DnnApi with this writer: uint8 count,
// then per descriptor uint8 kind, uint16 size, bytes.
#ifndef VGPU_PROTOCOL_LAUNCH_PARAMS_H_
#define VGPU_PROTOCOL_LAUNCH_PARAMS_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "plugin/protocol/byte_codec.h"

namespace vgpu {

using ParamBlock = absl::InlinedVector<uint8_t, 64>;

// Appends parameters to a byte block: a ParamBlock (ParamWriter), or another vector of bytes
// with a larger inline capacity (a launch's descriptor section). Borrows the block.
template <typename Block>
class BasicParamWriter {
 public:
  explicit BasicParamWriter(Block* block) : block_(block) {}

  template <typename T>
  BasicParamWriter& Put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "parameters must be trivially copyable");
    Append(&value, sizeof(T));
    return *this;
  }

  template <typename T>
  BasicParamWriter& PutArray(absl::Span<const T> values) {
    Put(static_cast<uint32_t>(values.size()));
    for (const T& v : values) Put(v);
    return *this;
  }

  BasicParamWriter& PutBytes(const void* data, size_t size) {
    Append(data, size);
    return *this;
  }

 private:
  // Grows the block and copies in place: a launch writes its parameters a few bytes at a time,
  // and InlinedVector's general insert costs several times a resize and a memcpy.
  void Append(const void* data, size_t size) {
    if (size == 0) return;  // `data` may be null then
    const size_t old_size = block_->size();
    block_->resize(old_size + size);
    std::memcpy(block_->data() + old_size, data, size);
  }

  Block* block_;
};
using ParamWriter = BasicParamWriter<ParamBlock>;

// A bounds-checked reader of a parameter block, on the cursor of the binary formats
// (ByteReader, byte_codec.h), whose failures it reports as InvalidArgument with the offset and
// the block's size. Borrows the block. Not thread-safe.
class ParamReader {
 public:
  explicit ParamReader(absl::Span<const uint8_t> bytes) : cursor_(bytes) {}

  template <typename T>
  absl::StatusOr<T> Get() {
    static_assert(std::is_trivially_copyable_v<T>, "parameters must be trivially copyable");
    T value;
    if (!cursor_.Get(&value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter block truncated: needs ", sizeof(T), " more bytes at offset ", offset(),
          " of ", offset() + remaining()));
    }
    return value;
  }

  // Reads an array of at most `max_count` elements.
  template <typename T>
  absl::StatusOr<std::vector<T>> GetArray(uint32_t max_count = 1u << 20) {
    absl::StatusOr<uint32_t> count = Get<uint32_t>();
    if (!count.ok()) return count.status();
    const uint64_t size = static_cast<uint64_t>(*count) * sizeof(T);
    absl::Span<const uint8_t> bytes;
    if (*count > max_count || !cursor_.GetBytes(size, &bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter array of ", *count, " elements does not fit the block"));
    }
    std::vector<T> values(*count);
    if (*count > 0) std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
  }

  absl::StatusOr<absl::Span<const uint8_t>> GetBytes(size_t size) {
    absl::Span<const uint8_t> out;
    if (!cursor_.GetBytes(size, &out)) {
      return absl::InvalidArgumentError("parameter block truncated");
    }
    return out;
  }

  size_t remaining() const { return cursor_.remaining(); }
  size_t offset() const { return cursor_.offset(); }

 private:
  ByteReader cursor_;
};

}  // namespace vgpu

#endif  // VGPU_PROTOCOL_LAUNCH_PARAMS_H_
