// Encoders, the writer and the bounds-checked reader of the trace format (see trace_format.h).
#include "plugin/trace/trace_format.h"

#include <array>
#include <cstring>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "plugin/protocol/byte_codec.h"
#include "plugin/protocol/wire_format.h"

namespace vgpu {
namespace trace {
namespace {

void PutString(std::vector<uint8_t>* out, absl::string_view text) {
  if (text.size() > kMaxTraceStringBytes) text = text.substr(0, kMaxTraceStringBytes);
  PutBytesOf(out, static_cast<uint32_t>(text.size()));
  out->insert(out->end(), text.begin(), text.end());
}

// A bounds-checked cursor over a record body.
using Cursor = ByteReader;

std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}

absl::Status DecodeResult(Cursor& cursor, TraceResult* result) {
  uint8_t form = 0;
  if (!cursor.Get(&form) || !cursor.Get(&result->size)) return absl::InvalidArgumentError(
      "result cut short");
  if (form > static_cast<uint8_t>(ResultForm::kNotCaptured)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown result form ", form));
  }
  result->form = static_cast<ResultForm>(form);
  if (result->form == ResultForm::kBytes) {
    absl::Span<const uint8_t> bytes;
    if (!cursor.GetBytes(result->size, &bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("result of ", result->size, " bytes cut short"));
    }
    result->bytes.assign(bytes.begin(), bytes.end());
  } else if (result->form == ResultForm::kChecksum) {
    if (!cursor.Get(&result->checksum)) {
      return absl::InvalidArgumentError("result checksum cut short");
    }
  }
  return absl::OkStatus();
}

absl::Status DecodeCommandPart(Cursor& cursor, TraceRecord* record) {
  uint32_t length = 0;
  absl::Span<const uint8_t> bytes;
  if (!cursor.Get(&length) || !cursor.GetBytes(length, &bytes)) {
    return absl::InvalidArgumentError("command cut short");
  }
  auto storage = std::make_shared<const std::vector<uint8_t>>(bytes.begin(), bytes.end());
  absl::StatusOr<wire::DecodedCommand> decoded = wire::DecodeCommand(storage);
  if (!decoded.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("command rejected by the wire decoder: ", decoded.status().message()));
  }
  if (decoded->wants_host_data || decoded->command.host_src != nullptr) {
    return absl::InvalidArgumentError("command carries host flags (must be 0 in a trace)");
  }
  record->command = std::move(decoded->command);
  uint8_t side = 0;
  if (!cursor.Get(&side)) return absl::InvalidArgumentError("host side cut short");
  if (side > static_cast<uint8_t>(HostSide::kDestination)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown host side ", side));
  }
  record->host_side = static_cast<HostSide>(side);
  const CommandKind kind = record->command.kind;
  const bool copy_to_device = kind == CommandKind::kMemcpyHtoD || kind == CommandKind::kMemcpyNow;
  const bool copy_to_host = kind == CommandKind::kMemcpyDtoH || kind == CommandKind::kMemcpyNow;
  if ((record->host_side == HostSide::kSource && !copy_to_device) ||
      (record->host_side == HostSide::kDestination && !copy_to_host)) {
    return absl::InvalidArgumentError(
        absl::StrCat(CommandKindName(kind), " cannot have host side ", side));
  }
  if (record->host_side == HostSide::kSource) {
    if (!cursor.GetBytes(record->command.size, &bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("host data of ", record->command.size, " bytes cut short"));
    }
    record->host_data = std::make_shared<std::vector<uint8_t>>(bytes.begin(), bytes.end());
  }
  return absl::OkStatus();
}

}  // namespace

const char* RecordTypeName(RecordType type) {
  switch (type) {
    case RecordType::kPost: return "post";
    case RecordType::kCall: return "call";
    case RecordType::kResult: return "result";
    case RecordType::kStep: return "step";
    case RecordType::kNotified: return "notified";
  }
  return "unknown";
}

uint32_t Crc32(absl::Span<const uint8_t> bytes, uint32_t crc) {
  static const std::array<uint32_t, 256> table = MakeCrcTable();
  crc = ~crc;
  for (uint8_t byte : bytes) crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t RecordChecksum(absl::Span<const uint8_t> header_first_16,
                        absl::Span<const uint8_t> body) {
  return Crc32(body, Crc32(header_first_16));
}

uint64_t Fnv1a64(absl::Span<const uint8_t> bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (uint8_t byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

void EncodeFileHeader(const TraceHeader& header, std::vector<uint8_t>* out) {
  out->insert(out->end(), kTraceMagic, kTraceMagic + sizeof(kTraceMagic));
  PutBytesOf(out, kTraceVersion);
  PutBytesOf(out, wire::kWireVersion);
  PutBytesOf(out, header.device_count);
  PutBytesOf(out, header.memory_limit);
  PutBytesOf(out, header.created_unix_ns);
  PutBytesOf(out, uint64_t{0});
  PutString(out, header.producer);
  PutString(out, header.backends);
}

void EncodeRecord(RecordType type, uint16_t ordinal, uint64_t time_ns,
                  absl::Span<const uint8_t> body, std::vector<uint8_t>* out) {
  out->reserve(out->size() + kRecordHeaderBytes + body.size());
  const size_t start = out->size();
  PutBytesOf(out, static_cast<uint8_t>(type));
  PutBytesOf(out, uint8_t{0});
  PutBytesOf(out, ordinal);
  PutBytesOf(out, static_cast<uint32_t>(body.size()));
  PutBytesOf(out, time_ns);
  const uint32_t checksum =
      RecordChecksum(absl::MakeConstSpan(out->data() + start, 16), body);
  PutBytesOf(out, checksum);
  PutBytesOf(out, uint32_t{0});
  out->insert(out->end(), body.begin(), body.end());
}

void EncodeCommandBody(const Command& command, HostSide host_side,
                       absl::Span<const uint8_t> host_data, std::vector<uint8_t>* out) {
  Command bare = command;  // host pointers cleared: flags 0, no host data in the wire bytes
  bare.host_src = nullptr;
  bare.host_dst = nullptr;
  bare.host_storage.reset();
  std::vector<uint8_t> encoded;
  wire::EncodeCommand(bare, &encoded);
  PutBytesOf(out, static_cast<uint32_t>(encoded.size()));
  out->insert(out->end(), encoded.begin(), encoded.end());
  PutBytesOf(out, static_cast<uint8_t>(host_side));
  if (host_side == HostSide::kSource) out->insert(out->end(), host_data.begin(), host_data.end());
}

void EncodeResult(const TraceResult& result, std::vector<uint8_t>* out) {
  PutBytesOf(out, static_cast<uint8_t>(result.form));
  PutBytesOf(out, result.size);
  if (result.form == ResultForm::kBytes) {
    out->insert(out->end(), result.bytes.begin(), result.bytes.end());
  } else if (result.form == ResultForm::kChecksum) {
    PutBytesOf(out, result.checksum);
  }
}

TraceResult MakeResult(absl::Span<const uint8_t> bytes) {
  TraceResult result;
  result.size = bytes.size();
  if (bytes.size() <= kMaxInlineResultBytes) {
    result.form = ResultForm::kBytes;
    result.bytes.assign(bytes.begin(), bytes.end());
  } else {
    result.form = ResultForm::kChecksum;
    result.checksum = Fnv1a64(bytes);
  }
  return result;
}

absl::StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Create(const std::string& path,
                                                                 const TraceHeader& header) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create the trace file '", path, "': ", std::strerror(errno)));
  }
  std::unique_ptr<TraceWriter> writer(new TraceWriter(path, file));
  std::vector<uint8_t> bytes;
  EncodeFileHeader(header, &bytes);
  absl::Status written = writer->Append(bytes);
  if (written.ok()) written = writer->Flush();
  if (!written.ok()) return written;
  return writer;
}

TraceWriter::~TraceWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status TraceWriter::Append(absl::Span<const uint8_t> record) {
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    return absl::DataLossError(
        absl::StrCat("writing the trace file '", path_, "' failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status TraceWriter::Flush() {
  if (std::fflush(file_) != 0) {
    return absl::DataLossError(
        absl::StrCat("flushing the trace file '", path_, "' failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status TraceWriter::RewriteMemoryLimit(uint64_t memory_limit) {
  constexpr long kMemoryLimitOffset = 16;
  if (std::fflush(file_) != 0 || std::fseek(file_, kMemoryLimitOffset, SEEK_SET) != 0 ||
      std::fwrite(&memory_limit, sizeof(memory_limit), 1, file_) != 1 ||
      std::fseek(file_, 0, SEEK_END) != 0) {
    return absl::DataLossError(absl::StrCat("rewriting the header of the trace file '", path_,
                                            "' failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TraceReader>> TraceReader::Open(const std::string& path) {
  auto file = std::make_unique<std::ifstream>(path, std::ios::binary | std::ios::ate);
  if (!*file) {
    return absl::NotFoundError(absl::StrCat("cannot open the trace file '", path, "'"));
  }
  const std::streamoff size = file->tellg();
  file->seekg(0);
  std::unique_ptr<TraceReader> reader(
      new TraceReader(path, std::move(file), size < 0 ? 0 : static_cast<uint64_t>(size)));
  absl::Status header = reader->ReadHeader();
  if (!header.ok()) return header;
  return reader;
}

absl::StatusOr<std::unique_ptr<TraceReader>> TraceReader::FromBytes(const std::string& name,
                                                                    absl::string_view bytes) {
  auto stream = std::make_unique<std::istringstream>(std::string(bytes), std::ios::binary);
  std::unique_ptr<TraceReader> reader(new TraceReader(name, std::move(stream), bytes.size()));
  absl::Status header = reader->ReadHeader();
  if (!header.ok()) return header;
  return reader;
}

absl::Status TraceReader::Malformed(uint64_t offset, absl::string_view what) const {
  return absl::InvalidArgumentError(
      absl::StrCat("trace '", path_, "' is corrupt at byte offset ", offset, ": ", what));
}

absl::Status TraceReader::Read(void* out, uint64_t size, const char* what) {
  if (file_size_ - offset_ < size) {
    return Malformed(offset_, absl::StrCat(what, " is truncated (needs ", size, " bytes, ",
                                           file_size_ - offset_, " left)"));
  }
  if (size > 0 && !file_->read(static_cast<char*>(out), static_cast<std::streamsize>(size))) {
    return Malformed(offset_, absl::StrCat(what, ": read failed"));
  }
  offset_ += size;
  return absl::OkStatus();
}

absl::Status TraceReader::ReadHeader() {
  uint8_t fixed[kFileHeaderFixedBytes];
  if (file_size_ < sizeof(kTraceMagic)) {
    return Malformed(0, "not a vgpu trace (shorter than its magic)");
  }
  absl::Status read = Read(fixed, sizeof(kTraceMagic), "file header");
  if (!read.ok()) return read;
  if (std::memcmp(fixed, kTraceMagic, sizeof(kTraceMagic)) != 0) {
    return Malformed(0, "not a vgpu trace (bad magic; expected \"VGPUTRAC\")");
  }
  read =
      Read(fixed + sizeof(kTraceMagic), kFileHeaderFixedBytes - sizeof(kTraceMagic),
           "file header");
  if (!read.ok()) return read;
  uint16_t version = 0, wire_version = 0;
  uint64_t reserved = 0;
  std::memcpy(&version, fixed + 8, 2);
  std::memcpy(&wire_version, fixed + 10, 2);
  std::memcpy(&header_.device_count, fixed + 12, 4);
  std::memcpy(&header_.memory_limit, fixed + 16, 8);
  std::memcpy(&header_.created_unix_ns, fixed + 24, 8);
  std::memcpy(&reserved, fixed + 32, 8);
  if (version != kTraceVersion) {
    return Malformed(8, absl::StrCat("trace format version ", version,
                                     " is not supported: this build reads version ",
                                     kTraceVersion,
                                     version < kTraceVersion ? " (record the trace again)" : ""));
  }
  if (wire_version < wire::kOldestSameCommandVersion || wire_version > wire::kWireVersion) {
    return Malformed(10, absl::StrCat("commands of wire version ", wire_version,
                                      ", this build reads ", wire::kOldestSameCommandVersion,
                                      "..", wire::kWireVersion));
  }
  if (header_.device_count == 0 || header_.device_count > kMaxTraceDevices) {
    return Malformed(12, absl::StrCat("device count ", header_.device_count, " (1..",
                                      kMaxTraceDevices, ")"));
  }
  if (reserved != 0) {
    return Malformed(32, absl::StrCat("reserved header field is ", reserved, " (must be 0)"));
  }
  for (std::string* text : {&header_.producer, &header_.backends}) {
    uint32_t length = 0;
    const uint64_t at = offset_;
    read = Read(&length, sizeof(length), "file header string");
    if (!read.ok()) return read;
    if (length > kMaxTraceStringBytes) {
      return Malformed(at, absl::StrCat("header string of ", length, " bytes (at most ",
                                        kMaxTraceStringBytes, ")"));
    }
    if (file_size_ - offset_ < length) {  // nothing allocated for bytes the file lacks
      return Malformed(at, absl::StrCat("header string of ", length, " bytes is truncated (",
                                        file_size_ - offset_, " left)"));
    }
    text->resize(length);
    read = Read(text->data(), length, "file header string");
    if (!read.ok()) return read;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> TraceReader::Next(TraceRecord* record) {
  if (offset_ == file_size_) return false;
  const uint64_t at = offset_;
  const uint64_t index = next_index_;
  uint8_t header[kRecordHeaderBytes];
  if (file_size_ - offset_ < kRecordHeaderBytes) {
    return Malformed(at, absl::StrCat("record ", index, ": record header truncated (",
                                      file_size_ - offset_, " of ", kRecordHeaderBytes,
                                      " bytes)"));
  }
  absl::Status read = Read(header, kRecordHeaderBytes, "record header");
  if (!read.ok()) return read;
  uint8_t type = header[0];
  uint16_t ordinal = 0;
  uint32_t length = 0, checksum = 0, reserved = 0;
  std::memcpy(&ordinal, header + 2, 2);
  std::memcpy(&length, header + 4, 4);
  std::memcpy(&checksum, header + 16, 4);
  std::memcpy(&reserved, header + 20, 4);
  if (header[1] != 0 || reserved != 0) {
    return Malformed(at, absl::StrCat("record ", index, ": reserved record header field ",
                                      header[1] != 0 ? "at byte 1" : "at byte 20",
                                      " is not 0"));
  }
  if (type < static_cast<uint8_t>(RecordType::kPost) ||
      type > static_cast<uint8_t>(RecordType::kNotified)) {
    return Malformed(at, absl::StrCat("record ", index, ": unknown record type ", type));
  }
  if (ordinal >= header_.device_count) {
    return Malformed(at, absl::StrCat("record ", index, ": device ordinal ", ordinal,
                                      " but the trace has ", header_.device_count, " device(s)"));
  }
  if (file_size_ - offset_ < length) {
    return Malformed(at, absl::StrCat("record ", index, " (", RecordTypeName(
                                          static_cast<RecordType>(type)),
                                      "): body of ", length, " bytes truncated (",
                                      file_size_ - offset_, " left)"));
  }
  std::vector<uint8_t> body(length);
  read = Read(body.data(), length, "record body");
  if (!read.ok()) return read;
  if (RecordChecksum(absl::MakeConstSpan(header, 16), body) != checksum) {
    return Malformed(at, absl::StrCat("record ", index, " (",
                                      RecordTypeName(static_cast<RecordType>(type)),
                                      "): record checksum mismatch (header or body corrupt)"));
  }
  *record = TraceRecord();
  std::memcpy(&record->time_ns, header + 8, 8);
  record->type = static_cast<RecordType>(type);
  record->ordinal = ordinal;
  record->index = index;
  record->offset = at;
  absl::Status decoded = DecodeRecordBody(body, record);
  if (!decoded.ok()) {
    return Malformed(at, absl::StrCat("record ", index, " (", RecordTypeName(record->type),
                                      "): ", decoded.message()));
  }
  ++next_index_;
  return true;
}

absl::Status DecodeRecordBody(absl::Span<const uint8_t> body, TraceRecord* record) {
  Cursor cursor(body);
  switch (record->type) {
    case RecordType::kPost: {
      absl::Status status = DecodeCommandPart(cursor, record);
      if (!status.ok()) return status;
      if (!IsAsynchronous(record->command.kind)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a post record holds ", CommandKindName(record->command.kind), ", a call"));
      }
      break;
    }
    case RecordType::kCall: {
      absl::Status status = DecodeCommandPart(cursor, record);
      if (!status.ok()) return status;
      if (IsAsynchronous(record->command.kind)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a call record holds ", CommandKindName(record->command.kind),
            ", an asynchronous command"));
      }
      size_t consumed = 0;
      absl::StatusOr<Reply> reply = wire::DecodeReply(cursor.Rest(), &consumed);
      if (!reply.ok()) return absl::InvalidArgumentError("reply cut short or malformed");
      record->reply = *std::move(reply);
      cursor.Skip(consumed);
      if (record->host_side == HostSide::kDestination && record->reply.status.ok()) {
        status = DecodeResult(cursor, &record->result);
        if (!status.ok()) return status;
      }
      break;
    }
    case RecordType::kResult: {
      if (!cursor.Get(&record->target_record)) {
        return absl::InvalidArgumentError("result target cut short");
      }
      if (record->target_record >= record->index) {
        return absl::InvalidArgumentError(absl::StrCat(
            "result names record ", record->target_record, ", which does not precede it"));
      }
      absl::Status status = DecodeResult(cursor, &record->result);
      if (!status.ok()) return status;
      break;
    }
    case RecordType::kStep:
      if (!cursor.Get(&record->iterations)) {
        return absl::InvalidArgumentError("step cut short");
      }
      break;
    case RecordType::kNotified:
      if (!cursor.Get(&record->token)) {
        return absl::InvalidArgumentError("notified token cut short");
      }
      break;
  }
  if (cursor.remaining() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(cursor.remaining(), " trailing bytes after the body"));
  }
  return absl::OkStatus();
}

}  // namespace trace
}  // namespace vgpu
