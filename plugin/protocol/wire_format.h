// The byte format of the remote protocol between the client runtime and a `vgpu server`: the one
// place it is specified. Both directions carry frames over a byte stream (Unix or TCP socket).
// Every integer is little-endian. Strings are uint32 length + bytes (no terminator).
//
// Frame (a 24-byte header, then `payload_length` payload bytes):
//   offset  size  field
//        0     4  magic           0x56 0x47 0x50 0x55 ("VGPU"; uint32 0x55504756)
//        4     2  version         kWireVersion (7); a frame of another version is rejected
//        6     2  message type    MessageType below
//        8     8  sequence        client-chosen for Command and ShmAttach (> 0, unique per
//                                 connection: the server only echoes it, so a duplicate only
//                                 confuses its sender); a Reply/Data repeats the sequence of the
//                                 command it answers; 0 in every other message (CommandBatch
//                                 included). A tenant's frame that breaks this closes its
//                                 connection.
//       16     4  payload length  <= kMaxPayloadBytes (64 MiB); a larger value is rejected
//                                 before anything is allocated
//       20     4  reserved        0
//
// Handshake: the client's first frame is Hello; the server answers Welcome or Refused (then
// closes). Nothing else is accepted before Welcome.
//   Hello   (1): uint16 protocol version, uint8 role (0 tenant, 1 stats observer), string token,
//                string tenant (optional: absent or empty means the server's default tenant)
//   Welcome (2): uint32 device count, uint64 memory limit per device, uint64 client quota
//                (0: no quota beyond the device limit), uint64 launch template budget (bytes
//                of TemplateChargeBytes the connection's templates may hold; 0: none)
//   Refused (3): string reason
//
// Tenant traffic:
//   Command (4), client -> server: the fixed part (72 bytes)
//        0  uint16 kind (CommandKind)      2  uint8 pattern_bytes      3  uint8 flags
//        4  uint32 device                  8  uint64 stream           16  uint64 object
//       24  uint64 token                  32  uint64 dst              40  uint64 src
//       48  uint64 size                   56  uint32 pattern          60  uint32 buffer count
//       64  uint32 params length          68  uint32 descriptors length
//     then buffer count * (uint64 address, uint64 size), the params bytes, the descriptor
//     bytes, and, if flags & kHasHostData, exactly `size` bytes of host data (the source of a
//     kMemcpyHtoD / host-to-device kMemcpyNow). flags & kWantsHostData: the command's
//     destination is host memory (kMemcpyDtoH, device-to-host kMemcpyNow); the server answers
//     with the bytes. Asynchronous commands (IsAsynchronous) get no Reply, except below.
//     flags & kShmData (only on a copy with host memory, never with kHasHostData): the host
//     side of the copy is `size` bytes at a uint64 offset into the connection's shared region
//     (ShmAttach), which follows the descriptor bytes instead of inline host data; with
//     kWantsHostData the region is the destination, else the source. The server answers such
//     a copy, asynchronous or not, once it ran (or was skipped or refused): an asynchronous one
//     with a Data frame of its sequence carrying only the ok byte, a kMemcpyNow with a Reply
//     without data. Until then the client must not reuse the range; the server reads the
//     range's bytes (or writes them) only while it executes the copy, never as metadata.
//   Reply (5), server -> client, answers a call: int32 status code (absl::StatusCode), string
//     message, uint64 value, MemoryInfo (6 x uint64: limit, in use, peak, allocs, largest
//     alloc, largest free block), then, for a device-to-host kMemcpyNow that succeeded,
//     exactly `size` bytes of data.
//   Data (6), server -> client: the bytes of an asynchronous kMemcpyDtoH, sent when its stream
//     reached it (in stream order, before the stream's later Notify messages): uint8 ok, then
//     if ok `size` bytes; !ok: the stream had failed and the copy was skipped.
//   Notify (7), server -> client: uint64 token, int32 stream status code, string message.
//   ShmAttach (10), client -> server, Unix sockets only, at most once per connection: uint64
//     region size; the frame's bytes carry one file descriptor (SCM_RIGHTS): a memfd of exactly
//     that size sealed with F_SEAL_SHRINK. The server answers with a Reply of the frame's
//     sequence: OK (kShmData copies may follow) or why not (no descriptor, not a sealed memfd,
//     wrong size, over the limit, not a Unix socket, already attached, disabled); a refused
//     attach leaves the connection as it was (copies keep going through the socket).
//
//   CommandBatch (11), client -> server: several asynchronous commands in one frame (the
//     client's posted commands, gathered for a few microseconds or until a synchronising one,
//     so that one frame and one write carry them). The frame's sequence is 0; its payload is
//     one or more entries, each
//       varint zigzag(sequence - the previous entry's sequence; 0 before the first), varint
//       length << 3 | form, then `length` bytes
//     (varints are LEB128: PutVarint in byte_codec.h). Every entry's sequence is > 0, as a
//     Command frame's. The entry's form (BatchEntryForm) says what its bytes are:
//       0 command:   a Command payload without host data (neither kHasHostData nor kShmData);
//       1 define:    varint template id (< kMaxTemplates), then a kLaunch Command payload: the
//                    launch runs, and its device, stream, kernel, buffers, params and
//                    descriptors become the connection's launch template `id` (replacing an
//                    earlier template of that id);
//       2 templated: varint template id, varint binding count, then per binding varint
//                    (buffer index << 1 | size changed), varint zigzag(new address - the
//                    template's last address of that buffer, modulo 2^64), and varint size
//                    when the size changed: template `id`'s launch runs with these buffers
//                    changed, and the template keeps them for its next launch;
//       3 release:   varint template id: the template is forgotten and its charge given back
//                    (the client makes room for a definition; nothing runs);
//       4 compact:   an asynchronous command without buffers, params, descriptors or host
//                    data (an event, a notification, a memset, a copy between devices or to
//                    the host) in a few bytes: varint kind, varint field mask, then a varint
//                    for each field whose bit is set, in this order: bit 0 device, 1 stream,
//                    2 object, 3 token, 4 dst, 5 src, 6 size, 7 pattern, 8 pattern_bytes (an
//                    absent field is 0); bit 9 is the command's kWantsHostData flag (no value).
//                    It means exactly the Command payload with those fields.
//     executed in order as if each had come in its own Command frame. An entry that is not an
//     asynchronous command, carries host data, overruns the payload, has an unknown form or
//     mask bit, a varint that does not fit its field, defines a template that is not a launch,
//     whose id is out of range or that does not fit the connection's template budget
//     (Welcome), or releases a template that is not defined, ends the connection like a
//     malformed Command frame. A templated launch naming a template this connection has not
//     defined, or a buffer index its template does not have, fails like a launch the executor
//     refused: the connection's next synchronisation reports it, and the connection goes on.
//     Launch templates (the descriptor method applied to launches): after warm-up a training
//     step repeats the same launches with the same parameters and descriptor settings, so the
//     client sends each such launch once in full (define) and then as its template's id plus
//     the buffers that changed (usually none: 4 bytes with the entry's header). Templates live
//     as long as the connection, one table per connection: a tenant can only name its own.
//     Each costs TemplateChargeBytes of the budget the Welcome announces (charged to the
//     tenant's --max_staging_bytes while the connection lives); the client keeps within it (it
//     releases its least recently used templates, or redefines their ids), so the server never
//     has to drop one.
//
// Profiling (a TensorFlow profile taken by the client, plugin/common/activity.h):
//   ProfileControl (12), client -> server, sequence > 0: uint8 action. 1 (start): from now on
//     the connection's copies, memsets and launches are timed as its streams run them (records
//     kept from an earlier start are discarded); 2 (collect): timing stops and the records
//     kept since the start are sent. Answered by a ProfileRecords frame of its sequence.
//   ProfileRecords (13), server -> client: int64 the server's clock (ns since the Unix epoch)
//     when it answered, uint64 records dropped (past kMaxProfileRecords per connection),
//     uint32 name count, the names (strings: the kernels' names), uint32 record count, then per
//     record: uint64 sequence (of the command that ran), int64 start ns, int64 end ns (server
//     clock), uint32 name (0: none, i: the i-th name). Empty of records after a start.
//
// Observers:
//   StatsRequest (8), client -> server: empty.   StatsReply (9): uint32 length, then a JSON
//     document of that many bytes (not limited to kMaxStringBytes; the frame's limit holds).
#ifndef VGPU_PROTOCOL_WIRE_FORMAT_H_
#define VGPU_PROTOCOL_WIRE_FORMAT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "plugin/protocol/byte_codec.h"
#include "plugin/protocol/command.h"

namespace vgpu {
namespace wire {

inline constexpr uint32_t kMagic = 0x55504756;  // "VGPU" on the wire
// Version history: 1 first release; 2 the descriptor settings of protocol/descriptors.h grew
// (N-d filter, convolution and pooling windows with groups and NaN propagation, activation
// coefficient, rnn and dropout kinds), and the legacy kernel ids 1-3 were removed; 3 the
// shared-memory data path (ShmAttach, command flag kShmData); 4 CommandBatch frames; 5
// ProfileControl / ProfileRecords frames; 6 launch templates (CommandBatch entry forms, the
// Welcome's template budget); 7 a templated launch's bindings are changes from the template's
// last buffers (address delta, size only when it changed). Both ends speak one version: a peer
// of another version is refused with both versions named.
inline constexpr uint16_t kWireVersion = 7;
// Command bodies (EncodeCommand, without kShmData) are the same since this version, so a
// command trace recorded at any version from here to kWireVersion still decodes.
inline constexpr uint16_t kOldestSameCommandVersion = 2;
inline constexpr size_t kHeaderBytes = 24;
inline constexpr uint32_t kMaxPayloadBytes = 64u << 20;
inline constexpr size_t kCommandFixedBytes = 72;
// Host data of one copy command; larger copies are split by the transport.
inline constexpr uint64_t kMaxCopyChunkBytes = 32ull << 20;
inline constexpr uint32_t kMaxBuffers = 4096;
inline constexpr uint32_t kMaxParamsBytes = 1u << 20;
inline constexpr uint32_t kMaxDescriptorBytes = 1u << 20;
inline constexpr uint32_t kMaxStringBytes = 1u << 16;

inline constexpr uint8_t kHasHostData = 0x1;
inline constexpr uint8_t kWantsHostData = 0x2;
inline constexpr uint8_t kShmData = 0x4;
// Payload of a ShmAttach frame.
inline constexpr uint32_t kShmAttachBytes = 8;
// Records a connection keeps between a profile's start and its collection (28 bytes each on
// the wire, 14 MiB at most).
inline constexpr uint32_t kMaxProfileRecords = 1u << 19;
// Bytes of one ProfileRecords record on the wire.
inline constexpr size_t kProfileRecordBytes = 28;

enum class MessageType : uint16_t {
  kHello = 1,
  kWelcome = 2,
  kRefused = 3,
  kCommand = 4,
  kReply = 5,
  kData = 6,
  kNotify = 7,
  kStatsRequest = 8,
  kStatsReply = 9,
  kShmAttach = 10,
  kCommandBatch = 11,
  kProfileControl = 12,
  kProfileRecords = 13,
};

// CommandBatch entry forms (see CommandBatch above).
enum class BatchEntryForm : uint8_t {
  kCommand = 0,
  kDefineTemplate = 1,
  kTemplatedLaunch = 2,
  kReleaseTemplate = 3,
  kCompactCommand = 4,
};
inline constexpr int kBatchEntryFormBits = 3;
// Launch templates one connection may hold (ids 0 .. kMaxTemplates - 1).
inline constexpr uint32_t kMaxTemplates = 16384;
// Buffers of a launch that may become a template (a binding's index is a uint16).
inline constexpr uint32_t kMaxTemplateBuffers = 1024;
// What one template costs of the budget beyond its buffers, params and descriptors (the
// receiver's slot for it; TemplateChargeBytes).
inline constexpr uint64_t kTemplateOverheadBytes = 512;

enum class Role : uint8_t { kTenant = 0, kObserver = 1 };

struct FrameHeader {
  MessageType type = MessageType::kHello;
  uint64_t sequence = 0;
  uint32_t payload_length = 0;
};

// Writes the 24-byte header into `out` (kHeaderBytes long).
void EncodeHeader(const FrameHeader& header, uint8_t* out);
// Validates magic, version, type and length. Never reads beyond kHeaderBytes.
absl::StatusOr<FrameHeader> DecodeHeader(absl::Span<const uint8_t> bytes);

struct Hello {
  uint16_t protocol_version = kWireVersion;
  Role role = Role::kTenant;
  std::string token;
  std::string tenant;  // empty: the server's default tenant
};
struct Welcome {
  uint32_t device_count = 0;
  uint64_t memory_limit = 0;
  uint64_t client_quota = 0;
  uint64_t template_bytes = 0;  // the connection's launch template budget (0: no templates)
};
struct NotifyMessage {
  uint64_t token = 0;
  absl::Status status;
};

// Payload encoders (append to `out`) and bounds-checked decoders. Decoders never read past the
// span and return InvalidArgument on anything malformed (trailing bytes included).
void EncodeHello(const Hello& hello, std::vector<uint8_t>* out);
absl::StatusOr<Hello> DecodeHello(absl::Span<const uint8_t> payload);
void EncodeWelcome(const Welcome& welcome, std::vector<uint8_t>* out);
absl::StatusOr<Welcome> DecodeWelcome(absl::Span<const uint8_t> payload);
void EncodeString(absl::string_view text, std::vector<uint8_t>* out);
absl::StatusOr<std::string> DecodeString(absl::Span<const uint8_t> payload);
// A StatsReply's document: a string as above, but of up to kMaxPayloadBytes - 4 bytes (a
// server's statistics outgrow kMaxStringBytes with a few hundred clients or tenants).
void EncodeDocument(absl::string_view text, std::vector<uint8_t>* out);
absl::StatusOr<std::string> DecodeDocument(absl::Span<const uint8_t> payload);
void EncodeNotify(const NotifyMessage& notify, std::vector<uint8_t>* out);
absl::StatusOr<NotifyMessage> DecodeNotify(absl::Span<const uint8_t> payload);

// A command's payload without its host data: the fixed part, buffers, params, descriptors.
// The caller sends `command.size` bytes of host data after it when HasHostData(command).
void EncodeCommand(const Command& command, std::vector<uint8_t>* out);
// The same command with its host side in the shared region at `shm_offset` (flag kShmData,
// the offset after the descriptors): complete, nothing follows. Only for a copy with host
// memory (HasHostData or WantsHostData).
void EncodeShmCommand(const Command& command, uint64_t shm_offset, std::vector<uint8_t>* out);
// Host-data flags of a command as the client sends it.
bool HasHostData(const Command& command);
bool WantsHostData(const Command& command);
// Payload length of a command (EncodeCommand's bytes plus host data).
uint64_t CommandPayloadLength(const Command& command);

// A decoded command. Its host data (if any) stays in `storage` (the frame's payload); the
// command's host_src points into it, so `storage` must outlive every use of the command.
struct DecodedCommand {
  Command command;
  bool wants_host_data = false;
  // kShmData: the host side is command.size bytes at shm_offset in the connection's region
  // (not validated here: the decoder does not know the region); host_src/host_dst are null.
  bool in_shm = false;
  uint64_t shm_offset = 0;
};
// Decodes a command payload. `storage` holds the bytes; host_src is set to point into it.
absl::StatusOr<DecodedCommand> DecodeCommand(std::shared_ptr<const std::vector<uint8_t>> storage);

// One buffer of a templated launch that differs from its template's last launch, as a change
// from that last buffer: its address moved by `address_delta` (modulo 2^64), and its size is
// `size` when `size_changed` (else it kept its size). From one step to the next a buffer mostly
// moves a little and keeps its size, so a binding costs a few bytes rather than a full address.
struct TemplateBinding {
  uint16_t index = 0;
  uint64_t address_delta = 0;
  bool size_changed = false;
  uint64_t size = 0;
};
// The binding of buffer `index` that turns `last` into `now`.
TemplateBinding BindingBetween(uint16_t index, const BufferArg& last, const BufferArg& now);
// `last` with `binding` applied (the receiver's side of BindingBetween).
BufferArg ApplyBinding(const BufferArg& last, const TemplateBinding& binding);

// A CommandBatch payload being built, entry by entry (the forms of CommandBatch above). Not
// thread-safe.
class BatchWriter {
 public:
  explicit BatchWriter(std::vector<uint8_t>* out) : out_(out) {}

  // Form kCommand: EncodeCommand's bytes. The command must be asynchronous and carry no host
  // data (HasHostData false).
  void AddCommand(uint64_t sequence, const Command& command);
  // Form kCompactCommand when IsCompactable(command), else kCommand.
  void AddCommandOrCompact(uint64_t sequence, const Command& command);
  // Form kDefineTemplate: `launch` (a kLaunch) runs and becomes template `id`.
  void AddDefinition(uint64_t sequence, uint32_t id, const Command& launch);
  // Form kTemplatedLaunch: template `id`'s launch with `bindings` changed.
  void AddTemplatedLaunch(uint64_t sequence, uint32_t id,
                          absl::Span<const TemplateBinding> bindings);
  // Form kReleaseTemplate: template `id` is forgotten.
  void AddRelease(uint64_t sequence, uint32_t id);
  // Starts over (a new payload in *out, whose bytes the caller took): sequences are deltas
  // from the batch's previous entry.
  void Reset() { previous_sequence_ = 0; }

 private:
  // Writes the entry header for a body that EncodeBody appends.
  template <typename EncodeBody>
  void Entry(uint64_t sequence, BatchEntryForm form, EncodeBody&& encode_body);

  std::vector<uint8_t>* out_;
  std::vector<uint8_t> body_;  // the entry being written (reused)
  uint64_t previous_sequence_ = 0;
};

// True for a command the compact form can carry: asynchronous, no buffers, params,
// descriptors or host data to send.
bool IsCompactable(const Command& command);

// One entry of a CommandBatch payload, split but not decoded.
struct BatchEntry {
  BatchEntryForm form = BatchEntryForm::kCommand;
  uint64_t sequence = 0;
  uint32_t template_id = 0;            // kDefineTemplate, kTemplatedLaunch, kReleaseTemplate
  absl::Span<const uint8_t> command;   // kCommand, kDefineTemplate: the command payload
  absl::Span<const uint8_t> bindings;  // kTemplatedLaunch: the bindings' varints
  uint32_t binding_count = 0;          // kTemplatedLaunch
  absl::Span<const uint8_t> compact;   // kCompactCommand: its body
};
// Checks the entries of a CommandBatch payload, without storing them: InvalidArgument for
// anything the CommandBatch description above refuses at this level (a payload that is empty
// or overrun, a sequence that is not > 0, an unknown form or mask bit, a varint that overruns
// or does not fit, a template id out of range, a command shorter than a command's fixed part,
// an entry with bytes left over). Commands are not decoded here (DecodeCommand does that, and
// the receiver checks what a batch may carry).
absl::Status CheckBatch(absl::Span<const uint8_t> payload);
// Walks the entries of a payload CheckBatch accepted, in order; the entries are views into it.
// Borrows the payload. Not thread-safe.
class BatchCursor {
 public:
  explicit BatchCursor(absl::Span<const uint8_t> payload) : reader_(payload) {}
  // The next entry; false after the last.
  bool Next(BatchEntry* entry);

 private:
  ByteReader reader_;
  uint64_t previous_sequence_ = 0;
};
// CheckBatch, then every entry (for tests and tools; a receiver walks with BatchCursor, whose
// memory does not grow with the entry count).
absl::StatusOr<std::vector<BatchEntry>> SplitBatch(absl::Span<const uint8_t> payload);
// The bindings of a kTemplatedLaunch entry (CheckBatch checked them).
absl::InlinedVector<TemplateBinding, 4> DecodeBindings(const BatchEntry& entry);
// The Command payload (EncodeCommand's bytes) a kCompactCommand entry stands for (CheckBatch
// checked its varints; DecodeCommand then checks the command as any other).
std::vector<uint8_t> ExpandCompactCommand(const BatchEntry& entry);
// What a template costs of the connection's budget (Welcome::template_bytes): its buffers,
// params and descriptors plus a fixed overhead. Both ends count with this.
uint64_t TemplateChargeBytes(const Command& launch);

// Reply without trailing data; the caller appends the data of a device-to-host kMemcpyNow.
void EncodeReply(const Reply& reply, std::vector<uint8_t>* out);
// The length EncodeReply writes for `reply` (without encoding it).
uint64_t ReplyPayloadLength(const Reply& reply);
// Decodes the fixed part of a Reply; `consumed` gets its length (data follows).
absl::StatusOr<Reply> DecodeReply(absl::Span<const uint8_t> payload, size_t* consumed);

// ShmAttach payload: the region's size.
void EncodeShmAttach(uint64_t region_bytes, std::vector<uint8_t>* out);
absl::StatusOr<uint64_t> DecodeShmAttach(absl::Span<const uint8_t> payload);

// ProfileControl payload.
enum class ProfileAction : uint8_t { kStart = 1, kCollect = 2 };
void EncodeProfileControl(ProfileAction action, std::vector<uint8_t>* out);
absl::StatusOr<ProfileAction> DecodeProfileControl(absl::Span<const uint8_t> payload);

// ProfileRecords payload.
struct ExecutedCommand {
  uint64_t sequence = 0;
  int64_t start_ns = 0;  // the server's clock
  int64_t end_ns = 0;
  uint32_t name = 0;     // 0: none; i: names[i - 1]
};
struct ProfileRecords {
  int64_t server_now_ns = 0;
  uint64_t dropped = 0;
  std::vector<std::string> names;
  std::vector<ExecutedCommand> records;
};
void EncodeProfileRecords(const ProfileRecords& records, std::vector<uint8_t>* out);
// InvalidArgument also for a name index past the names or more than kMaxProfileRecords records.
absl::StatusOr<ProfileRecords> DecodeProfileRecords(absl::Span<const uint8_t> payload);

// Status <-> wire (code + message); unknown codes decode as kUnknown.
absl::Status StatusFromWire(int32_t code, std::string message);

}  // namespace wire
}  // namespace vgpu

#endif  // VGPU_PROTOCOL_WIRE_FORMAT_H_
