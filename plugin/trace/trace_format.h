// The byte format of a command trace (VGPU_TRACE): the one place it is specified. A trace holds
// every command that crossed the boundary between the client runtime and a backing executor
// during one run, for every device, with the host data of host-to-device copies, the replies of
// calls and the bytes of device-to-host results, so that `vgpu trace replay` can run it again and
// compare. Every integer is little-endian. Strings are uint32 length + bytes (<= 64 KiB, no
// terminator). Command bodies reuse the wire encoder of protocol/wire_format.h.
//
// File header (40 bytes, then two strings):
//   offset  size  field
//        0     8  magic            "VGPUTRAC" (0x56 0x47 0x50 0x55 0x54 0x52 0x41 0x43)
//        8     2  version          kTraceVersion (2); another version is rejected ("version 1
//                                  is not supported": version 1's checksum left the record
//                                  header out)
//       10     2  wire version     wire::kWireVersion of the command bodies (5 in this build); a reader takes
//                                  wire::kOldestSameCommandVersion (2) .. kWireVersion
//       12     4  device count     1..kMaxTraceDevices (16): ordinals 0..count-1
//       16     8  memory limit     device memory per device of the recorded run, bytes
//       24     8  created          wall-clock time the recording started, ns since the Unix epoch
//       32     8  reserved         0 (a reader refuses anything else)
//       40        string producer  e.g. "tensorflow-vgpu 0.9.0"
//                 string backends  the run's backends, e.g. "inproc (cpu), inproc (cpu)"
//
// Then records, until the end of the file (a file ends only at a record boundary). Each record
// is a 24-byte record header and `body length` body bytes:
//        0     1  type             RecordType below
//        1     1  reserved         0 (a reader refuses anything else)
//        2     2  device ordinal   < device count (TensorFlow's device number)
//        4     4  body length      bytes of the body that follows
//        8     8  time             steady-clock ns since the recording started
//       16     4  record checksum  CRC-32 (IEEE 802.3 polynomial, as zlib's crc32) of the
//                                  record header's bytes 0..15 followed by the body, so no
//                                  field but the reserved one below escapes it (version 1
//                                  covered the body only)
//       20     4  reserved         0 (a reader refuses anything else)
// Records are numbered from 0 in file order ("record index").
//
// Record bodies:
//   kPost (1): an asynchronous command (IsAsynchronous), in the order the executor received it
//     from that device:
//       uint32 command length C; C bytes of wire::EncodeCommand of the command with its host
//       pointers cleared (so its flags byte is 0 and it carries no host data); uint8 host side
//       (HostSide: 0 none, 1 host source: `size` bytes of host data follow, 2 host
//       destination: the result comes later, in a kResult record); the host data if any.
//   kCall (2): a call and its answer, recorded when the reply arrived: the kPost body, then the
//     Reply (wire::EncodeReply: int32 code, string message, uint64 value, 6 x uint64
//     MemoryInfo), then, for a device-to-host kMemcpyNow (host side 2), a Result.
//   kResult (3): the bytes an asynchronous kMemcpyDtoH wrote to host memory, captured once its
//     stream had reached it (a later notification of that stream, or a synchronisation call
//     that returned): uint64 record index of the kMemcpyDtoH's kPost record, then a Result.
//   kStep (4): a training-step boundary of this device (detected by the client runtime's
//     iteration detector, or marked with vgpu.mark_step()): uint64 iterations counted so far.
//   kNotified (5): the notification of a kNotify / kRecordEvent token reached the client (the
//     stream got there): uint64 token. Work the client posted after it may depend on it through
//     the host (TensorFlow waits for an event, then launches on another stream), so a replay
//     waits for the same notification before it goes on.
//
// Result:
//        0     1  form             ResultForm: 0 bytes (`size` bytes follow), 1 checksum only
//                                  (results over kMaxInlineResultBytes: uint64 FNV-1a-64 of the
//                                  bytes follows), 2 not captured (the stream had failed: the
//                                  copy may have been skipped; nothing follows)
//        1     8  size             bytes of the result
//
// A reader rejects, naming the byte offset and the record index, anything that does not follow
// this format: a bad magic or version, a nonzero reserved field, a record header or body cut
// short, a record checksum that does not match, an unknown record type, an ordinal out of range,
// a body with trailing bytes or a command the wire decoder refuses. A trace is untrusted input
// (docs/traces.md, "Untrusted traces"): every length and count in it is checked against the
// bytes that remain before anything is allocated for it.
#ifndef VGPU_TRACE_TRACE_FORMAT_H_
#define VGPU_TRACE_TRACE_FORMAT_H_

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <istream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "plugin/protocol/command.h"

namespace vgpu {
namespace trace {

inline constexpr char kTraceMagic[8] = {'V', 'G', 'P', 'U', 'T', 'R', 'A', 'C'};
inline constexpr uint16_t kTraceVersion = 2;
inline constexpr size_t kFileHeaderFixedBytes = 40;
inline constexpr size_t kRecordHeaderBytes = 24;
inline constexpr uint32_t kMaxTraceDevices = 16;
inline constexpr uint32_t kMaxTraceStringBytes = 1u << 16;
// Device-to-host results up to this size keep their bytes; larger ones a checksum.
inline constexpr uint64_t kMaxInlineResultBytes = 1ull << 20;

enum class RecordType : uint8_t { kPost = 1, kCall = 2, kResult = 3, kStep = 4, kNotified = 5 };
enum class HostSide : uint8_t { kNone = 0, kSource = 1, kDestination = 2 };
enum class ResultForm : uint8_t { kBytes = 0, kChecksum = 1, kNotCaptured = 2 };

const char* RecordTypeName(RecordType type);

struct TraceHeader {
  uint32_t device_count = 1;
  uint64_t memory_limit = 0;
  uint64_t created_unix_ns = 0;
  std::string producer;
  std::string backends;
};

// A device-to-host result as recorded.
struct TraceResult {
  ResultForm form = ResultForm::kNotCaptured;
  uint64_t size = 0;
  std::vector<uint8_t> bytes;  // kBytes
  uint64_t checksum = 0;       // kChecksum
};

// One decoded record. Which fields mean something depends on `type` (see the file comment).
struct TraceRecord {
  RecordType type = RecordType::kPost;
  uint16_t ordinal = 0;
  uint64_t time_ns = 0;
  uint64_t index = 0;   // record index in the file
  uint64_t offset = 0;  // byte offset of the record header in the file
  // kPost, kCall: the command, host pointers cleared; its host data (kSource) in host_data.
  Command command;
  HostSide host_side = HostSide::kNone;
  std::shared_ptr<std::vector<uint8_t>> host_data;
  Reply reply;          // kCall
  TraceResult result;   // kCall of a device-to-host kMemcpyNow, kResult
  uint64_t target_record = 0;  // kResult: index of the kMemcpyDtoH's kPost record
  uint64_t iterations = 0;     // kStep
  uint64_t token = 0;          // kNotified
};

// CRC-32 (IEEE 802.3, reflected, as zlib's crc32) of `bytes`, continuing from `crc` (0 to start).
uint32_t Crc32(absl::Span<const uint8_t> bytes, uint32_t crc = 0);
// The checksum a record header carries: CRC-32 of the header's first 16 bytes (type, reserved,
// ordinal, length, time), continued over the body.
uint32_t RecordChecksum(absl::Span<const uint8_t> header_first_16, absl::Span<const uint8_t> body);
// FNV-1a 64-bit hash of `bytes` (the checksum of large results).
uint64_t Fnv1a64(absl::Span<const uint8_t> bytes);

// --- Encoding (appends to `out`). Pure functions, thread-safe. ----------------------------------
void EncodeFileHeader(const TraceHeader& header, std::vector<uint8_t>* out);
// A whole record: header (with the body's checksum) and body.
void EncodeRecord(RecordType type, uint16_t ordinal, uint64_t time_ns,
                  absl::Span<const uint8_t> body, std::vector<uint8_t>* out);
// kPost / the first part of a kCall body. `host_data` is the host source (kSource) or empty.
void EncodeCommandBody(const Command& command, HostSide host_side,
                       absl::Span<const uint8_t> host_data, std::vector<uint8_t>* out);
void EncodeResult(const TraceResult& result, std::vector<uint8_t>* out);
// A result from the bytes a copy produced: kBytes up to kMaxInlineResultBytes, else kChecksum.
TraceResult MakeResult(absl::Span<const uint8_t> bytes);

// --- Writing ------------------------------------------------------------------------------------
// Appends a trace to a file. Not thread-safe (the recorder serialises). Each record is written
// with one fwrite, so a process that exits flushes only whole records.
class TraceWriter {
 public:
  // Creates (truncates) `path` and writes the header. Error naming the path if it cannot.
  static absl::StatusOr<std::unique_ptr<TraceWriter>> Create(const std::string& path,
                                                             const TraceHeader& header);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Writes one encoded record (EncodeRecord). Error if the write failed.
  absl::Status Append(absl::Span<const uint8_t> record);
  absl::Status Flush();
  // Rewrites the header's memory limit (known only once the transports are open: a server
  // grants its own). Later records still append at the end.
  absl::Status RewriteMemoryLimit(uint64_t memory_limit);
  const std::string& path() const { return path_; }

 private:
  TraceWriter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  std::string path_;
  std::FILE* file_;
};

// --- Reading ------------------------------------------------------------------------------------
// Reads a trace record by record, bounds-checked: never allocates more than the bytes that
// remain in the file (a record body at most its declared length, and only once that many bytes
// are known to follow) and returns InvalidArgument naming the offset (and record index) for
// anything malformed. Not thread-safe.
class TraceReader {
 public:
  // Opens `path` and reads its header. NotFound if it cannot be opened, InvalidArgument if the
  // header is malformed.
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const std::string& path);
  // Reads a trace held in memory (the fuzz target; tests), named `name` in errors. Copies
  // `bytes`.
  static absl::StatusOr<std::unique_ptr<TraceReader>> FromBytes(const std::string& name,
                                                                absl::string_view bytes);

  const TraceHeader& header() const { return header_; }
  // The next record into *record: true, or false at the end of the file (a record boundary).
  absl::StatusOr<bool> Next(TraceRecord* record);
  uint64_t file_size() const { return file_size_; }

 private:
  TraceReader(std::string path, std::unique_ptr<std::istream> file, uint64_t size)
      : path_(std::move(path)), file_(std::move(file)), file_size_(size) {}
  absl::Status ReadHeader();
  absl::Status Read(void* out, uint64_t size, const char* what);
  absl::Status Malformed(uint64_t offset, absl::string_view what) const;

  std::string path_;
  std::unique_ptr<std::istream> file_;
  uint64_t file_size_ = 0;
  uint64_t offset_ = 0;
  uint64_t next_index_ = 0;
  TraceHeader header_;
};

// Decodes a record's body (the part after the record header); `record` has type, ordinal,
// index and offset set. InvalidArgument describing what is wrong (the caller adds where).
absl::Status DecodeRecordBody(absl::Span<const uint8_t> body, TraceRecord* record);

}  // namespace trace
}  // namespace vgpu

#endif  // VGPU_TRACE_TRACE_FORMAT_H_
