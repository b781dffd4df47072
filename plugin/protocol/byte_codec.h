// Little-endian byte encoding shared by the project's binary formats (the wire format of
// protocol/wire_format.h and the trace format of trace/trace_format.h): appending a value's bytes,
// and a bounds-checked cursor that never reads past its span.
#ifndef VGPU_PROTOCOL_BYTE_CODEC_H_
#define VGPU_PROTOCOL_BYTE_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/types/span.h"

namespace vgpu {

// Appends the bytes of `value` (the host is little-endian, as the formats are).
template <typename T>
void PutBytesOf(std::vector<uint8_t>* out, T value) {
  static_assert(std::is_trivially_copyable_v<T>);
  const auto* bytes = reinterpret_cast<const uint8_t*>(&value);
  out->insert(out->end(), bytes, bytes + sizeof(T));
}

// Appends `value` as a LEB128 varint: seven bits a byte, least significant first, the high bit
// set on every byte but the last (1 byte below 128, at most 10).
inline void PutVarint(std::vector<uint8_t>* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<uint8_t>(value | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<uint8_t>(value));
}

// A bounds-checked cursor over a byte span; every getter returns false, and reads nothing,
// when fewer bytes remain than asked for. Borrows the span. Not thread-safe.
class ByteReader {
 public:
  explicit ByteReader(absl::Span<const uint8_t> bytes) : bytes_(bytes) {}

  template <typename T>
  bool Get(T* value) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T)) return false;
    std::memcpy(value, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return true;
  }
  bool GetBytes(uint64_t size, absl::Span<const uint8_t>* out) {
    if (remaining() < size) return false;
    *out = bytes_.subspan(offset_, size);
    offset_ += size;
    return true;
  }
  // A LEB128 varint (PutVarint); false, reading nothing, for a truncated one or one that does
  // not fit 64 bits.
  bool GetVarint(uint64_t* value) {
    uint64_t result = 0;
    for (size_t i = 0; i < 10 && offset_ + i < bytes_.size(); ++i) {
      const uint8_t byte = bytes_[offset_ + i];
      if (i == 9 && byte > 1) return false;  // past 64 bits
      result |= static_cast<uint64_t>(byte & 0x7F) << (7 * i);
      if ((byte & 0x80) == 0) {
        offset_ += i + 1;
        *value = result;
        return true;
      }
    }
    return false;
  }
  // A uint32 length, then that many bytes (at most `max_length`).
  bool GetString(uint32_t max_length, std::string* out) {
    uint32_t length = 0;
    absl::Span<const uint8_t> bytes;
    if (!Get(&length) || length > max_length || !GetBytes(length, &bytes)) return false;
    out->assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return true;
  }
  // Skips at most the remaining bytes.
  void Skip(size_t size) { offset_ += size < remaining() ? size : remaining(); }
  absl::Span<const uint8_t> Rest() const { return bytes_.subspan(offset_); }
  size_t remaining() const { return bytes_.size() - offset_; }
  size_t offset() const { return offset_; }

 private:
  absl::Span<const uint8_t> bytes_;
  size_t offset_ = 0;
};

}  // namespace vgpu

#endif  // VGPU_PROTOCOL_BYTE_CODEC_H_
