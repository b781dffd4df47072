// The remote protocol's encoders and bounds-checked decoders (see wire_format.h).
#include "plugin/protocol/wire_format.h"

#include <array>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "plugin/protocol/byte_codec.h"

namespace vgpu {
namespace wire {
namespace {

// A bounds-checked cursor over a payload; its strings are at most kMaxStringBytes long.
class Reader : public ByteReader {
 public:
  using ByteReader::ByteReader;
  bool GetString(std::string* out) { return ByteReader::GetString(kMaxStringBytes, out); }
};

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed ", what, " frame"));
}

bool IsKnownType(uint16_t type) { return type >= 1 && type <= 13; }

}  // namespace

void EncodeHeader(const FrameHeader& header, uint8_t* out) {
  std::vector<uint8_t> bytes;
  bytes.reserve(kHeaderBytes);
  PutBytesOf(&bytes, kMagic);
  PutBytesOf(&bytes, kWireVersion);
  PutBytesOf(&bytes, static_cast<uint16_t>(header.type));
  PutBytesOf(&bytes, header.sequence);
  PutBytesOf(&bytes, header.payload_length);
  PutBytesOf(&bytes, uint32_t{0});
  std::memcpy(out, bytes.data(), kHeaderBytes);
}

absl::StatusOr<FrameHeader> DecodeHeader(absl::Span<const uint8_t> bytes) {
  if (bytes.size() < kHeaderBytes) return absl::InvalidArgumentError("truncated frame header");
  Reader reader(bytes.subspan(0, kHeaderBytes));
  uint32_t magic = 0, length = 0, reserved = 0;
  uint16_t version = 0, type = 0;
  uint64_t sequence = 0;
  reader.Get(&magic);
  reader.Get(&version);
  reader.Get(&type);
  reader.Get(&sequence);
  reader.Get(&length);
  reader.Get(&reserved);
  if (magic != kMagic) return absl::InvalidArgumentError("bad frame magic (not a vgpu peer?)");
  if (version != kWireVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "peer speaks vgpu wire version ", version, ", this side version ", kWireVersion));
  }
  if (!IsKnownType(type)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown message type ", type));
  }
  if (length > kMaxPayloadBytes) {
    return absl::InvalidArgumentError(absl::StrCat("frame payload of ", length,
                                                   " bytes exceeds the limit of ",
                                                   kMaxPayloadBytes));
  }
  FrameHeader header;
  header.type = static_cast<MessageType>(type);
  header.sequence = sequence;
  header.payload_length = length;
  return header;
}

void EncodeString(absl::string_view text, std::vector<uint8_t>* out) {
  if (text.size() > kMaxStringBytes) text = text.substr(0, kMaxStringBytes);
  PutBytesOf(out, static_cast<uint32_t>(text.size()));
  out->insert(out->end(), text.begin(), text.end());
}

absl::StatusOr<std::string> DecodeString(absl::Span<const uint8_t> payload) {
  Reader reader(payload);
  std::string text;
  if (!reader.GetString(&text) || reader.remaining() != 0) return Malformed("string");
  return text;
}

void EncodeDocument(absl::string_view text, std::vector<uint8_t>* out) {
  constexpr size_t kMaxDocumentBytes = kMaxPayloadBytes - sizeof(uint32_t);
  if (text.size() > kMaxDocumentBytes) text = text.substr(0, kMaxDocumentBytes);
  PutBytesOf(out, static_cast<uint32_t>(text.size()));
  out->insert(out->end(), text.begin(), text.end());
}

absl::StatusOr<std::string> DecodeDocument(absl::Span<const uint8_t> payload) {
  Reader reader(payload);
  std::string text;
  if (!reader.ByteReader::GetString(kMaxPayloadBytes, &text) || reader.remaining() != 0) {
    return Malformed("document");
  }
  return text;
}

void EncodeHello(const Hello& hello, std::vector<uint8_t>* out) {
  PutBytesOf(out, hello.protocol_version);
  PutBytesOf(out, static_cast<uint8_t>(hello.role));
  EncodeString(hello.token, out);
  EncodeString(hello.tenant, out);
}

absl::StatusOr<Hello> DecodeHello(absl::Span<const uint8_t> payload) {
  Reader reader(payload);
  Hello hello;
  uint8_t role = 0;
  if (!reader.Get(&hello.protocol_version) || !reader.Get(&role) ||
      !reader.GetString(&hello.token) || role > 1) {
    return Malformed("hello");
  }
  if (reader.remaining() != 0 && !reader.GetString(&hello.tenant)) return Malformed("hello");
  if (reader.remaining() != 0) return Malformed("hello");
  hello.role = static_cast<Role>(role);
  return hello;
}

void EncodeWelcome(const Welcome& welcome, std::vector<uint8_t>* out) {
  PutBytesOf(out, welcome.device_count);
  PutBytesOf(out, welcome.memory_limit);
  PutBytesOf(out, welcome.client_quota);
  PutBytesOf(out, welcome.template_bytes);
}

absl::StatusOr<Welcome> DecodeWelcome(absl::Span<const uint8_t> payload) {
  Reader reader(payload);
  Welcome welcome;
  if (!reader.Get(&welcome.device_count) || !reader.Get(&welcome.memory_limit) ||
      !reader.Get(&welcome.client_quota) || !reader.Get(&welcome.template_bytes) ||
      reader.remaining() != 0) {
    return Malformed("welcome");
  }
  return welcome;
}

void EncodeNotify(const NotifyMessage& notify, std::vector<uint8_t>* out) {
  PutBytesOf(out, notify.token);
  PutBytesOf(out, static_cast<int32_t>(notify.status.code()));
  EncodeString(notify.status.message(), out);
}

absl::StatusOr<NotifyMessage> DecodeNotify(absl::Span<const uint8_t> payload) {
  Reader reader(payload);
  NotifyMessage notify;
  int32_t code = 0;
  std::string message;
  if (!reader.Get(&notify.token) || !reader.Get(&code) || !reader.GetString(&message) ||
      reader.remaining() != 0) {
    return Malformed("notify");
  }
  notify.status = StatusFromWire(code, std::move(message));
  return notify;
}

bool HasHostData(const Command& command) {
  return command.host_src != nullptr &&
         (command.kind == CommandKind::kMemcpyHtoD || command.kind == CommandKind::kMemcpyNow);
}

bool WantsHostData(const Command& command) {
  return command.host_dst != nullptr &&
         (command.kind == CommandKind::kMemcpyDtoH || command.kind == CommandKind::kMemcpyNow);
}

uint64_t CommandPayloadLength(const Command& command) {
  return kCommandFixedBytes + command.buffers.size() * 16 + command.params.size() +
         command.descriptors.size() + (HasHostData(command) ? command.size : 0);
}

namespace {

void EncodeCommandWithFlags(const Command& command, uint8_t flags, std::vector<uint8_t>* out) {
  PutBytesOf(out, static_cast<uint16_t>(command.kind));
  PutBytesOf(out, command.pattern_bytes);
  PutBytesOf(out, flags);
  PutBytesOf(out, command.device);
  PutBytesOf(out, command.stream);
  PutBytesOf(out, command.object);
  PutBytesOf(out, command.token);
  PutBytesOf(out, command.dst);
  PutBytesOf(out, command.src);
  PutBytesOf(out, command.size);
  PutBytesOf(out, command.pattern);
  PutBytesOf(out, static_cast<uint32_t>(command.buffers.size()));
  PutBytesOf(out, static_cast<uint32_t>(command.params.size()));
  PutBytesOf(out, static_cast<uint32_t>(command.descriptors.size()));
  for (const BufferArg& buffer : command.buffers) {
    PutBytesOf(out, buffer.address);
    PutBytesOf(out, buffer.size);
  }
  out->insert(out->end(), command.params.begin(), command.params.end());
  out->insert(out->end(), command.descriptors.begin(), command.descriptors.end());
}

}  // namespace

void EncodeCommand(const Command& command, std::vector<uint8_t>* out) {
  uint8_t flags = 0;
  if (HasHostData(command)) flags |= kHasHostData;
  if (WantsHostData(command)) flags |= kWantsHostData;
  EncodeCommandWithFlags(command, flags, out);
}

namespace {

uint64_t ZigZag(int64_t value) {
  return (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
}
int64_t UnZigZag(uint64_t value) {
  return static_cast<int64_t>(value >> 1) ^ -static_cast<int64_t>(value & 1);
}

// The fields of a compact command, in mask-bit order (bit 9 is the kWantsHostData flag).
constexpr int kCompactFields = 9;
constexpr uint64_t kCompactWantsHostData = 1u << kCompactFields;
constexpr uint64_t kCompactMaskBits = (kCompactWantsHostData << 1) - 1;

// The fields of `command` as a compact entry lists them.
std::array<uint64_t, kCompactFields> CompactFieldsOf(const Command& command) {
  return {command.device, command.stream, command.object, command.token, command.dst,
          command.src,    command.size,   command.pattern, command.pattern_bytes};
}

// The widest value each compact field may hold (its width in the command's fixed part).
constexpr std::array<uint64_t, kCompactFields> kCompactFieldLimits = {
    UINT32_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX,
    UINT64_MAX, UINT64_MAX, UINT32_MAX, UINT8_MAX};

}  // namespace

template <typename EncodeBody>
void BatchWriter::Entry(uint64_t sequence, BatchEntryForm form, EncodeBody&& encode_body) {
  body_.clear();
  encode_body(&body_);
  PutVarint(out_, ZigZag(static_cast<int64_t>(sequence - previous_sequence_)));
  PutVarint(out_, static_cast<uint64_t>(body_.size()) << kBatchEntryFormBits |
                      static_cast<uint64_t>(form));
  out_->insert(out_->end(), body_.begin(), body_.end());
  previous_sequence_ = sequence;
}

void BatchWriter::AddCommand(uint64_t sequence, const Command& command) {
  Entry(sequence, BatchEntryForm::kCommand,
        [&](std::vector<uint8_t>* body) { EncodeCommand(command, body); });
}

bool IsCompactable(const Command& command) {
  return IsAsynchronous(command.kind) && command.buffers.empty() && command.params.empty() &&
         command.descriptors.empty() && !HasHostData(command);
}

void BatchWriter::AddCommandOrCompact(uint64_t sequence, const Command& command) {
  if (!IsCompactable(command)) return AddCommand(sequence, command);
  Entry(sequence, BatchEntryForm::kCompactCommand, [&](std::vector<uint8_t>* body) {
    const std::array<uint64_t, kCompactFields> fields = CompactFieldsOf(command);
    uint64_t mask = WantsHostData(command) ? kCompactWantsHostData : 0;
    for (int i = 0; i < kCompactFields; ++i) {
      if (fields[i] != 0) mask |= uint64_t{1} << i;
    }
    PutVarint(body, static_cast<uint64_t>(command.kind));
    PutVarint(body, mask);
    for (int i = 0; i < kCompactFields; ++i) {
      if (fields[i] != 0) PutVarint(body, fields[i]);
    }
  });
}

void BatchWriter::AddDefinition(uint64_t sequence, uint32_t id, const Command& launch) {
  Entry(sequence, BatchEntryForm::kDefineTemplate, [&](std::vector<uint8_t>* body) {
    PutVarint(body, id);
    EncodeCommand(launch, body);
  });
}

void BatchWriter::AddTemplatedLaunch(uint64_t sequence, uint32_t id,
                                     absl::Span<const TemplateBinding> bindings) {
  Entry(sequence, BatchEntryForm::kTemplatedLaunch, [&](std::vector<uint8_t>* body) {
    PutVarint(body, id);
    PutVarint(body, bindings.size());
    for (const TemplateBinding& binding : bindings) {
      PutVarint(body, static_cast<uint64_t>(binding.index) << 1 | (binding.size_changed ? 1 : 0));
      PutVarint(body, ZigZag(static_cast<int64_t>(binding.address_delta)));
      if (binding.size_changed) PutVarint(body, binding.size);
    }
  });
}

void BatchWriter::AddRelease(uint64_t sequence, uint32_t id) {
  Entry(sequence, BatchEntryForm::kReleaseTemplate,
        [&](std::vector<uint8_t>* body) { PutVarint(body, id); });
}

uint64_t TemplateChargeBytes(const Command& launch) {
  return kTemplateOverheadBytes + launch.buffers.size() * sizeof(BufferArg) +
         launch.params.size() + launch.descriptors.size();
}

namespace {

// A varint template id; false when it is truncated or out of range.
bool GetTemplateId(ByteReader& reader, uint32_t* id) {
  uint64_t value = 0;
  if (!reader.GetVarint(&value) || value >= kMaxTemplates) return false;
  *id = static_cast<uint32_t>(value);
  return true;
}

// Reads the entry at the reader's position, `previous_sequence` the batch's previous entry's
// (see CheckBatch for what is refused).
absl::Status ReadBatchEntry(ByteReader& reader, uint64_t previous_sequence, BatchEntry* entry) {
  *entry = BatchEntry();
  uint64_t delta = 0, word = 0;
  absl::Span<const uint8_t> body;
  if (!reader.GetVarint(&delta) || !reader.GetVarint(&word) ||
      !reader.GetBytes(word >> kBatchEntryFormBits, &body)) {
    return Malformed("command batch");
  }
  entry->sequence = previous_sequence + static_cast<uint64_t>(UnZigZag(delta));
  const uint64_t form = word & ((1u << kBatchEntryFormBits) - 1);
  ByteReader fields(body);
  bool well_formed = entry->sequence != 0;
  switch (form) {
    case static_cast<uint64_t>(BatchEntryForm::kCommand):
      entry->command = body;
      well_formed = well_formed && body.size() >= kCommandFixedBytes;
      break;
    case static_cast<uint64_t>(BatchEntryForm::kDefineTemplate):
      well_formed = well_formed && GetTemplateId(fields, &entry->template_id) &&
                    fields.remaining() >= kCommandFixedBytes;
      entry->command = fields.Rest();
      break;
    case static_cast<uint64_t>(BatchEntryForm::kTemplatedLaunch): {
      uint64_t count = 0;
      well_formed = well_formed && GetTemplateId(fields, &entry->template_id) &&
                    fields.GetVarint(&count) && count <= kMaxTemplateBuffers;
      entry->bindings = fields.Rest();
      entry->binding_count = static_cast<uint32_t>(count);
      for (uint64_t i = 0; well_formed && i < count; ++i) {
        uint64_t index_and_flag = 0, address_delta = 0, size = 0;
        well_formed = fields.GetVarint(&index_and_flag) &&
                      (index_and_flag >> 1) < kMaxTemplateBuffers &&
                      fields.GetVarint(&address_delta) &&
                      ((index_and_flag & 1) == 0 || fields.GetVarint(&size));
      }
      well_formed = well_formed && fields.remaining() == 0;
      break;
    }
    case static_cast<uint64_t>(BatchEntryForm::kReleaseTemplate):
      well_formed = well_formed && GetTemplateId(fields, &entry->template_id) &&
                    fields.remaining() == 0;
      break;
    case static_cast<uint64_t>(BatchEntryForm::kCompactCommand): {
      entry->compact = body;
      uint64_t kind = 0, mask = 0;
      well_formed = well_formed && fields.GetVarint(&kind) &&
                    kind < static_cast<uint64_t>(CommandKind::kNumKinds) &&
                    fields.GetVarint(&mask) && (mask & ~kCompactMaskBits) == 0;
      for (int i = 0; well_formed && i < kCompactFields; ++i) {
        uint64_t value = 0;
        if (mask & (uint64_t{1} << i)) {
          well_formed = fields.GetVarint(&value) && value <= kCompactFieldLimits[i];
        }
      }
      well_formed = well_formed && fields.remaining() == 0;
      break;
    }
    default:
      well_formed = false;
  }
  if (!well_formed) return Malformed("command batch");
  entry->form = static_cast<BatchEntryForm>(form);
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckBatch(absl::Span<const uint8_t> payload) {
  if (payload.empty()) return Malformed("command batch");
  ByteReader reader(payload);
  BatchEntry entry;
  while (reader.remaining() > 0) {
    if (absl::Status read = ReadBatchEntry(reader, entry.sequence, &entry); !read.ok()) {
      return read;
    }
  }
  return absl::OkStatus();
}

bool BatchCursor::Next(BatchEntry* entry) {
  if (reader_.remaining() == 0 || !ReadBatchEntry(reader_, previous_sequence_, entry).ok()) {
    return false;
  }
  previous_sequence_ = entry->sequence;
  return true;
}

absl::StatusOr<std::vector<BatchEntry>> SplitBatch(absl::Span<const uint8_t> payload) {
  if (absl::Status checked = CheckBatch(payload); !checked.ok()) return checked;
  std::vector<BatchEntry> entries;
  BatchCursor cursor(payload);
  for (BatchEntry entry; cursor.Next(&entry);) entries.push_back(entry);
  return entries;
}

absl::InlinedVector<TemplateBinding, 4> DecodeBindings(const BatchEntry& entry) {
  absl::InlinedVector<TemplateBinding, 4> decoded(entry.binding_count);
  ByteReader reader(entry.bindings);
  for (TemplateBinding& binding : decoded) {
    uint64_t index_and_flag = 0, zigzag_delta = 0;
    reader.GetVarint(&index_and_flag);
    binding.index = static_cast<uint16_t>(index_and_flag >> 1);
    binding.size_changed = (index_and_flag & 1) != 0;
    reader.GetVarint(&zigzag_delta);
    binding.address_delta = static_cast<uint64_t>(UnZigZag(zigzag_delta));
    if (binding.size_changed) reader.GetVarint(&binding.size);
  }
  return decoded;
}

TemplateBinding BindingBetween(uint16_t index, const BufferArg& last, const BufferArg& now) {
  TemplateBinding binding;
  binding.index = index;
  binding.address_delta = now.address - last.address;  // modulo 2^64
  binding.size_changed = now.size != last.size;
  binding.size = binding.size_changed ? now.size : 0;
  return binding;
}

BufferArg ApplyBinding(const BufferArg& last, const TemplateBinding& binding) {
  BufferArg now = last;
  now.address = last.address + binding.address_delta;  // modulo 2^64
  if (binding.size_changed) now.size = binding.size;
  return now;
}

std::vector<uint8_t> ExpandCompactCommand(const BatchEntry& entry) {
  ByteReader reader(entry.compact);
  uint64_t kind = 0, mask = 0;
  reader.GetVarint(&kind);
  reader.GetVarint(&mask);
  std::array<uint64_t, kCompactFields> fields{};
  for (int i = 0; i < kCompactFields; ++i) {
    if (mask & (uint64_t{1} << i)) reader.GetVarint(&fields[i]);
  }
  Command command;
  command.kind = static_cast<CommandKind>(kind);
  command.device = static_cast<uint32_t>(fields[0]);
  command.stream = fields[1];
  command.object = fields[2];
  command.token = fields[3];
  command.dst = fields[4];
  command.src = fields[5];
  command.size = fields[6];
  command.pattern = static_cast<uint32_t>(fields[7]);
  command.pattern_bytes = static_cast<uint8_t>(fields[8]);
  std::vector<uint8_t> payload;
  payload.reserve(kCommandFixedBytes);
  EncodeCommandWithFlags(command, (mask & kCompactWantsHostData) ? kWantsHostData : 0, &payload);
  return payload;
}

void EncodeShmCommand(const Command& command, uint64_t shm_offset, std::vector<uint8_t>* out) {
  const uint8_t flags = kShmData | (WantsHostData(command) ? kWantsHostData : 0);
  EncodeCommandWithFlags(command, flags, out);
  PutBytesOf(out, shm_offset);
}

void EncodeShmAttach(uint64_t region_bytes, std::vector<uint8_t>* out) {
  PutBytesOf(out, region_bytes);
}

absl::StatusOr<uint64_t> DecodeShmAttach(absl::Span<const uint8_t> payload) {
  Reader reader(payload);
  uint64_t bytes = 0;
  if (!reader.Get(&bytes) || reader.remaining() != 0) return Malformed("shm attach");
  return bytes;
}

void EncodeProfileControl(ProfileAction action, std::vector<uint8_t>* out) {
  PutBytesOf(out, static_cast<uint8_t>(action));
}

absl::StatusOr<ProfileAction> DecodeProfileControl(absl::Span<const uint8_t> payload) {
  Reader reader(payload);
  uint8_t action = 0;
  if (!reader.Get(&action) || reader.remaining() != 0 ||
      (action != static_cast<uint8_t>(ProfileAction::kStart) &&
       action != static_cast<uint8_t>(ProfileAction::kCollect))) {
    return Malformed("profile control");
  }
  return static_cast<ProfileAction>(action);
}

void EncodeProfileRecords(const ProfileRecords& records, std::vector<uint8_t>* out) {
  PutBytesOf(out, records.server_now_ns);
  PutBytesOf(out, records.dropped);
  PutBytesOf(out, static_cast<uint32_t>(records.names.size()));
  for (const std::string& name : records.names) EncodeString(name, out);
  PutBytesOf(out, static_cast<uint32_t>(records.records.size()));
  for (const ExecutedCommand& record : records.records) {
    PutBytesOf(out, record.sequence);
    PutBytesOf(out, record.start_ns);
    PutBytesOf(out, record.end_ns);
    PutBytesOf(out, record.name);
  }
}

absl::StatusOr<ProfileRecords> DecodeProfileRecords(absl::Span<const uint8_t> payload) {
  Reader reader(payload);
  ProfileRecords records;
  uint32_t names = 0, count = 0;
  if (!reader.Get(&records.server_now_ns) || !reader.Get(&records.dropped) ||
      !reader.Get(&names) || names > reader.remaining() / sizeof(uint32_t)) {
    return Malformed("profile records");
  }
  records.names.resize(names);
  for (std::string& name : records.names) {
    if (!reader.GetString(&name)) return Malformed("profile records");
  }
  if (!reader.Get(&count) || count > kMaxProfileRecords ||
      reader.remaining() != uint64_t{count} * kProfileRecordBytes) {
    return Malformed("profile records");
  }
  records.records.resize(count);
  for (ExecutedCommand& record : records.records) {
    reader.Get(&record.sequence);
    reader.Get(&record.start_ns);
    reader.Get(&record.end_ns);
    reader.Get(&record.name);
    if (record.name > names) return Malformed("profile records");
  }
  return records;
}

absl::StatusOr<DecodedCommand> DecodeCommand(
    std::shared_ptr<const std::vector<uint8_t>> storage) {
  if (storage == nullptr) return Malformed("command");
  Reader reader(*storage);
  DecodedCommand decoded;
  Command& c = decoded.command;
  uint16_t kind = 0;
  uint8_t flags = 0;
  uint32_t buffers = 0, params = 0, descriptors = 0;
  if (!reader.Get(&kind) || !reader.Get(&c.pattern_bytes) || !reader.Get(&flags) ||
      !reader.Get(&c.device) || !reader.Get(&c.stream) || !reader.Get(&c.object) ||
      !reader.Get(&c.token) || !reader.Get(&c.dst) || !reader.Get(&c.src) ||
      !reader.Get(&c.size) || !reader.Get(&c.pattern) || !reader.Get(&buffers) ||
      !reader.Get(&params) || !reader.Get(&descriptors)) {
    return absl::InvalidArgumentError("truncated command frame");
  }
  if (kind >= static_cast<uint16_t>(CommandKind::kNumKinds)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown command kind ", kind));
  }
  c.kind = static_cast<CommandKind>(kind);
  if ((flags & ~(kHasHostData | kWantsHostData | kShmData)) != 0) {
    return absl::InvalidArgumentError("unknown command flags");
  }
  if (buffers > kMaxBuffers || params > kMaxParamsBytes || descriptors > kMaxDescriptorBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(CommandKindName(c.kind), ": too many buffers or parameter bytes"));
  }
  // Only a launch names buffers and descriptors, and only a launch and a descriptor's creation
  // and settings carry parameter bytes: nothing else may make the server hold them.
  const bool launch = c.kind == CommandKind::kLaunch;
  const bool takes_params = launch || c.kind == CommandKind::kDescriptorCreate ||
                            c.kind == CommandKind::kDescriptorSet;
  if ((!launch && (buffers > 0 || descriptors > 0)) || (!takes_params && params > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        CommandKindName(c.kind), " carries ", buffers, " buffers, ", params,
        " parameter bytes and ", descriptors, " descriptor bytes (only a launch carries them)"));
  }
  if (static_cast<uint64_t>(buffers) * 16 > reader.remaining()) {
    return absl::InvalidArgumentError("truncated command frame (buffers)");
  }
  c.buffers.reserve(buffers);
  for (uint32_t i = 0; i < buffers; ++i) {
    BufferArg buffer;
    reader.Get(&buffer.address);
    reader.Get(&buffer.size);
    c.buffers.push_back(buffer);
  }
  absl::Span<const uint8_t> bytes;
  if (!reader.GetBytes(params, &bytes)) {
    return absl::InvalidArgumentError("truncated command frame (params)");
  }
  c.params.assign(bytes.begin(), bytes.end());
  if (!reader.GetBytes(descriptors, &bytes)) {
    return absl::InvalidArgumentError("truncated command frame (descriptors)");
  }
  c.descriptors.assign(bytes.begin(), bytes.end());
  const bool host_capable =
      c.kind == CommandKind::kMemcpyHtoD || c.kind == CommandKind::kMemcpyDtoH ||
      c.kind == CommandKind::kMemcpyNow;
  if ((flags & (kHasHostData | kWantsHostData | kShmData)) != 0 && !host_capable) {
    return absl::InvalidArgumentError(
        absl::StrCat(CommandKindName(c.kind), " cannot carry host data"));
  }
  if ((flags & kHasHostData) && (flags & kWantsHostData)) {
    return absl::InvalidArgumentError("a copy cannot have host memory on both ends");
  }
  if ((flags & kShmData) && (flags & kHasHostData)) {
    return absl::InvalidArgumentError(
        "a copy cannot have its host data inline and in shared memory");
  }
  if ((flags & kShmData) &&
      ((c.kind == CommandKind::kMemcpyHtoD && (flags & kWantsHostData)) ||
       (c.kind == CommandKind::kMemcpyDtoH && !(flags & kWantsHostData)))) {
    return absl::InvalidArgumentError(absl::StrCat(
        CommandKindName(c.kind), " names shared memory on the wrong side of the copy"));
  }
  if (host_capable && (flags & (kHasHostData | kWantsHostData | kShmData)) != 0 &&
      c.size > kMaxCopyChunkBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        CommandKindName(c.kind), " of ", c.size, " bytes exceeds the chunk limit"));
  }
  if (flags & kHasHostData) {
    if (!reader.GetBytes(c.size, &bytes)) {
      return absl::InvalidArgumentError("truncated command frame (host data)");
    }
    c.host_src = bytes.data();
  }
  if (flags & kShmData) {
    if (!reader.Get(&decoded.shm_offset)) {
      return absl::InvalidArgumentError("truncated command frame (shared memory offset)");
    }
    decoded.in_shm = true;
  }
  if (reader.remaining() != 0) {
    return absl::InvalidArgumentError("trailing bytes after a command");
  }
  decoded.wants_host_data = (flags & kWantsHostData) != 0;
  return decoded;
}

void EncodeReply(const Reply& reply, std::vector<uint8_t>* out) {
  PutBytesOf(out, static_cast<int32_t>(reply.status.code()));
  EncodeString(reply.status.message(), out);
  PutBytesOf(out, reply.value);
  const MemoryInfo& m = reply.memory;
  for (uint64_t v : {m.limit_bytes, m.bytes_in_use, m.peak_bytes_in_use, m.num_allocs,
                     m.largest_alloc_size, m.largest_free_block}) {
    PutBytesOf(out, v);
  }
}

uint64_t ReplyPayloadLength(const Reply& reply) {
  // int32 code, string message, uint64 value, six uint64 of MemoryInfo.
  return sizeof(int32_t) + sizeof(uint32_t) + reply.status.message().size() + sizeof(uint64_t) +
         6 * sizeof(uint64_t);
}

absl::StatusOr<Reply> DecodeReply(absl::Span<const uint8_t> payload, size_t* consumed) {
  Reader reader(payload);
  Reply reply;
  int32_t code = 0;
  std::string message;
  MemoryInfo& m = reply.memory;
  if (!reader.Get(&code) || !reader.GetString(&message) || !reader.Get(&reply.value) ||
      !reader.Get(&m.limit_bytes) || !reader.Get(&m.bytes_in_use) ||
      !reader.Get(&m.peak_bytes_in_use) || !reader.Get(&m.num_allocs) ||
      !reader.Get(&m.largest_alloc_size) || !reader.Get(&m.largest_free_block)) {
    return Malformed("reply");
  }
  reply.status = StatusFromWire(code, std::move(message));
  if (consumed != nullptr) *consumed = reader.offset();
  return reply;
}

absl::Status StatusFromWire(int32_t code, std::string message) {
  if (code == 0) return absl::OkStatus();
  if (code < 0 || code > 16) code = static_cast<int32_t>(absl::StatusCode::kUnknown);
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

}  // namespace wire
}  // namespace vgpu
