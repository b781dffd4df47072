// The remote protocol's codec: every command survives a round trip; the decoders reject
// truncated, garbage and oversized frames with errors and never read out of bounds (a bounded
// mutation fuzz loop; run under ASan for the strongest check).
#include "plugin/protocol/wire_format.h"

#include "plugin/protocol/byte_codec.h"
#include "plugin/protocol/descriptors.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "gtest/gtest.h"

namespace vgpu::wire {
namespace {

// Whether a command of `kind` may carry parameter bytes on the wire.
bool CarriesParams(CommandKind kind) {
  return kind == CommandKind::kLaunch || kind == CommandKind::kDescriptorCreate ||
         kind == CommandKind::kDescriptorSet;
}

Command FullCommand(CommandKind kind, const std::vector<uint8_t>& host) {
  Command c;
  c.kind = kind;
  c.device = 3;
  c.stream = 0x1122334455667788ull;
  c.object = 42;
  c.token = 7;
  c.dst = 0xA000000000001000ull;
  c.src = 0xB000000000002000ull;
  c.size = host.size();
  c.pattern = 0xDEADBEEF;
  c.pattern_bytes = 4;
  if (kind == CommandKind::kLaunch) {
    c.buffers = {{0x1000, 16}, {0x2000, 32}};
    c.descriptors = {1, 2, 3, 0, 9, 9, 9};
  }
  if (CarriesParams(kind)) c.params = {1, 2, 3, 4, 5};
  if (kind == CommandKind::kMemcpyHtoD || kind == CommandKind::kMemcpyNow) c.host_src = host.data();
  return c;
}

std::shared_ptr<std::vector<uint8_t>> EncodeWithData(const Command& c) {
  auto out = std::make_shared<std::vector<uint8_t>>();
  EncodeCommand(c, out.get());
  if (HasHostData(c)) {
    const auto* bytes = static_cast<const uint8_t*>(c.host_src);
    out->insert(out->end(), bytes, bytes + c.size);
  }
  return out;
}

TEST(WireFormat, EveryCommandKindSurvivesARoundTrip) {
  const std::vector<uint8_t> host = {10, 20, 30, 40, 50, 60};
  for (int k = 0; k < static_cast<int>(CommandKind::kNumKinds); ++k) {
    const Command c = FullCommand(static_cast<CommandKind>(k), host);
    auto frame = EncodeWithData(c);
    ASSERT_EQ(frame->size(), CommandPayloadLength(c)) << CommandKindName(c.kind);
    absl::StatusOr<DecodedCommand> d = DecodeCommand(frame);
    ASSERT_TRUE(d.ok()) << CommandKindName(c.kind) << ": " << d.status();
    const Command& r = d->command;
    EXPECT_EQ(r.kind, c.kind);
    EXPECT_EQ(r.device, c.device);
    EXPECT_EQ(r.stream, c.stream);
    EXPECT_EQ(r.object, c.object);
    EXPECT_EQ(r.token, c.token);
    EXPECT_EQ(r.dst, c.dst);
    EXPECT_EQ(r.src, c.src);
    EXPECT_EQ(r.size, c.size);
    EXPECT_EQ(r.pattern, c.pattern);
    EXPECT_EQ(r.pattern_bytes, c.pattern_bytes);
    ASSERT_EQ(r.buffers.size(), c.buffers.size());
    if (c.kind == CommandKind::kLaunch) {
      EXPECT_EQ(r.buffers[1].address, 0x2000u);
      EXPECT_EQ(r.buffers[1].size, 32u);
    }
    EXPECT_EQ(r.params, c.params);
    EXPECT_EQ(r.descriptors, c.descriptors);
    if (HasHostData(c)) {
      ASSERT_NE(r.host_src, nullptr);
      EXPECT_EQ(std::memcmp(r.host_src, host.data(), host.size()), 0);
    } else {
      EXPECT_EQ(r.host_src, nullptr);
    }
  }
}

TEST(WireFormat, OnlyALaunchCarriesBuffersAndDescriptorsAndOnlyItAndDescriptorCallsParameters) {
  // Anything else would make a server hold bytes no handler reads (a synchronisation with a
  // megabyte of parameters, waiting uncharged behind a stalled stream).
  const std::vector<uint8_t> host = {1, 2, 3, 4};
  for (int k = 0; k < static_cast<int>(CommandKind::kNumKinds); ++k) {
    const auto kind = static_cast<CommandKind>(k);
    Command with_params = FullCommand(kind, host);
    with_params.params = {7};
    EXPECT_EQ(DecodeCommand(EncodeWithData(with_params)).ok(), CarriesParams(kind))
        << CommandKindName(kind);
    Command with_buffer = FullCommand(kind, host);
    with_buffer.buffers = {{0x1000, 16}};
    EXPECT_EQ(DecodeCommand(EncodeWithData(with_buffer)).ok(), kind == CommandKind::kLaunch)
        << CommandKindName(kind);
    Command with_descriptors = FullCommand(kind, host);
    with_descriptors.descriptors = {1, 2, 3, 0, 9, 9, 9};
    absl::StatusOr<DecodedCommand> decoded = DecodeCommand(EncodeWithData(with_descriptors));
    EXPECT_EQ(decoded.ok(), kind == CommandKind::kLaunch) << CommandKindName(kind);
    if (!decoded.ok()) {
      EXPECT_NE(decoded.status().message().find("only a launch carries them"), std::string::npos)
          << decoded.status();
    }
  }
}

TEST(WireFormat, DeviceToHostCopiesAskForTheirData) {
  std::vector<uint8_t> sink(8);
  Command c;
  c.kind = CommandKind::kMemcpyDtoH;
  c.src = 0x1000;
  c.size = sink.size();
  c.host_dst = sink.data();
  auto frame = EncodeWithData(c);
  absl::StatusOr<DecodedCommand> d = DecodeCommand(frame);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->wants_host_data);
  EXPECT_EQ(d->command.host_dst, nullptr);  // the server provides its own buffer
}

TEST(WireFormat, HeaderRoundTripAndRejections) {
  uint8_t bytes[kHeaderBytes];
  EncodeHeader({MessageType::kNotify, 99, 1234}, bytes);
  absl::StatusOr<FrameHeader> h = DecodeHeader(bytes);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->type, MessageType::kNotify);
  EXPECT_EQ(h->sequence, 99u);
  EXPECT_EQ(h->payload_length, 1234u);

  EXPECT_FALSE(DecodeHeader(absl::MakeConstSpan(bytes, kHeaderBytes - 1)).ok());
  uint8_t bad[kHeaderBytes];
  std::memcpy(bad, bytes, kHeaderBytes);
  bad[0] ^= 0xFF;
  EXPECT_EQ(DecodeHeader(bad).status().code(), absl::StatusCode::kInvalidArgument);
  std::memcpy(bad, bytes, kHeaderBytes);
  bad[4] = 9;  // version
  EXPECT_EQ(DecodeHeader(bad).status().code(), absl::StatusCode::kFailedPrecondition);
  std::memcpy(bad, bytes, kHeaderBytes);
  bad[6] = 77;  // type
  EXPECT_FALSE(DecodeHeader(bad).ok());
  EncodeHeader({MessageType::kCommand, 1, kMaxPayloadBytes + 1}, bad);
  absl::Status oversized = DecodeHeader(bad).status();
  EXPECT_NE(oversized.message().find("exceeds the limit"), std::string::npos) << oversized;
}

TEST(WireFormat, HandshakeMessagesRoundTrip) {
  std::vector<uint8_t> bytes;
  EncodeHello({kWireVersion, Role::kObserver, "secret"}, &bytes);
  absl::StatusOr<Hello> hello = DecodeHello(bytes);
  ASSERT_TRUE(hello.ok());
  EXPECT_EQ(hello->token, "secret");
  EXPECT_EQ(hello->role, Role::kObserver);
  bytes.push_back(0);
  EXPECT_FALSE(DecodeHello(bytes).ok());  // trailing byte

  bytes.clear();
  EncodeWelcome({2, 1ull << 30, 1ull << 20}, &bytes);
  absl::StatusOr<Welcome> welcome = DecodeWelcome(bytes);
  ASSERT_TRUE(welcome.ok());
  EXPECT_EQ(welcome->device_count, 2u);
  EXPECT_EQ(welcome->memory_limit, 1ull << 30);
  EXPECT_EQ(welcome->client_quota, 1ull << 20);

  bytes.clear();
  EncodeNotify({5, absl::AbortedError("boom")}, &bytes);
  absl::StatusOr<NotifyMessage> notify = DecodeNotify(bytes);
  ASSERT_TRUE(notify.ok());
  EXPECT_EQ(notify->token, 5u);
  EXPECT_EQ(notify->status, absl::AbortedError("boom"));
}

TEST(WireFormat, AStatsDocumentMayOutgrowAString) {
  const std::string document(3 * kMaxStringBytes + 5, 'x');
  std::vector<uint8_t> payload;
  EncodeDocument(document, &payload);
  absl::StatusOr<std::string> decoded = DecodeDocument(payload);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, document);
  payload.pop_back();  // a length that overruns the payload
  EXPECT_FALSE(DecodeDocument(payload).ok());
}

TEST(WireFormat, ReplyRoundTrip) {
  Reply reply;
  reply.status = absl::ResourceExhaustedError("quota");
  reply.value = 77;
  reply.memory.limit_bytes = 1;
  reply.memory.largest_free_block = 6;
  std::vector<uint8_t> bytes;
  EncodeReply(reply, &bytes);
  EXPECT_EQ(ReplyPayloadLength(reply), bytes.size());  // counted without encoding
  size_t consumed = 0;
  absl::StatusOr<Reply> r = DecodeReply(bytes, &consumed);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(consumed, bytes.size());
  EXPECT_EQ(r->status, reply.status);
  EXPECT_EQ(r->value, 77u);
  EXPECT_EQ(r->memory.limit_bytes, 1u);
  EXPECT_EQ(r->memory.largest_free_block, 6u);
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(DecodeReply(absl::MakeConstSpan(bytes.data(), n), nullptr).ok()) << n;
  }
}

TEST(WireFormat, EveryTruncationOfACommandIsAnError) {
  const std::vector<uint8_t> host(100, 7);
  // A copy's host data, and a launch's buffers, parameters and descriptors.
  for (CommandKind kind : {CommandKind::kMemcpyHtoD, CommandKind::kLaunch}) {
    auto full = EncodeWithData(FullCommand(kind, host));
    for (size_t n = 0; n < full->size(); ++n) {
      auto cut = std::make_shared<std::vector<uint8_t>>(full->begin(), full->begin() + n);
      EXPECT_FALSE(DecodeCommand(cut).ok()) << CommandKindName(kind) << " cut at " << n;
    }
  }
}

TEST(WireFormat, OversizedCountsAreRejectedBeforeAllocating) {
  auto frame = EncodeWithData(FullCommand(CommandKind::kLaunch, {}));
  auto patch = [&](size_t offset, uint32_t value) {
    auto copy = std::make_shared<std::vector<uint8_t>>(*frame);
    std::memcpy(copy->data() + offset, &value, sizeof(value));
    return DecodeCommand(copy).status();
  };
  EXPECT_FALSE(patch(60, 0xFFFFFFFF).ok());  // buffer count
  EXPECT_FALSE(patch(64, 0xFFFFFFFF).ok());  // params length
  EXPECT_FALSE(patch(68, 0x7FFFFFFF).ok());  // descriptors length
  EXPECT_FALSE(patch(0, 0xFFFF).ok());       // kind
}

TEST(WireFormat, HostDataOnlyOnCopies) {
  std::vector<uint8_t> host(4, 1);
  Command c = FullCommand(CommandKind::kMemcpyHtoD, host);
  auto frame = EncodeWithData(c);
  (*frame)[0] = static_cast<uint8_t>(CommandKind::kLaunch);  // a launch claiming host data
  EXPECT_FALSE(DecodeCommand(frame).ok());
}

TEST(WireFormat, SharedMemoryCopiesCarryAnOffsetInsteadOfTheirBytes) {
  std::vector<uint8_t> host(1 << 16, 7);
  Command in = FullCommand(CommandKind::kMemcpyHtoD, host);
  in.buffers.clear();
  in.params.clear();
  in.descriptors.clear();
  auto frame = std::make_shared<std::vector<uint8_t>>();
  EncodeShmCommand(in, 0x1234, frame.get());
  EXPECT_EQ(frame->size(), kCommandFixedBytes + 8);  // no host bytes in the frame
  absl::StatusOr<DecodedCommand> d = DecodeCommand(frame);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->in_shm);
  EXPECT_FALSE(d->wants_host_data);
  EXPECT_EQ(d->shm_offset, 0x1234u);
  EXPECT_EQ(d->command.size, host.size());
  EXPECT_EQ(d->command.host_src, nullptr);  // the server points it into its mapping

  std::vector<uint8_t> sink(1 << 16);
  Command read;
  read.kind = CommandKind::kMemcpyDtoH;
  read.src = 0x1000;
  read.size = sink.size();
  read.host_dst = sink.data();
  auto back = std::make_shared<std::vector<uint8_t>>();
  EncodeShmCommand(read, 64, back.get());
  d = DecodeCommand(back);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->in_shm && d->wants_host_data);
  EXPECT_EQ(d->shm_offset, 64u);
  // Every truncation (the offset included) is an error.
  for (size_t n = 0; n < back->size(); ++n) {
    auto truncated = std::make_shared<std::vector<uint8_t>>(back->begin(), back->begin() + n);
    EXPECT_FALSE(DecodeCommand(truncated).ok()) << n;
  }
}

TEST(WireFormat, SharedMemoryFlagsAreOnlyAcceptedWhereTheyMakeSense) {
  std::vector<uint8_t> host(16, 1);
  Command c = FullCommand(CommandKind::kMemcpyHtoD, host);
  c.buffers.clear();
  c.params.clear();
  c.descriptors.clear();
  auto encode = [&](CommandKind kind, uint8_t flags) {
    auto frame = std::make_shared<std::vector<uint8_t>>();
    EncodeShmCommand(c, 0, frame.get());
    (*frame)[0] = static_cast<uint8_t>(kind);
    (*frame)[3] = flags;
    return frame;
  };
  EXPECT_TRUE(DecodeCommand(encode(CommandKind::kMemcpyHtoD, kShmData)).ok());
  EXPECT_FALSE(DecodeCommand(encode(CommandKind::kLaunch, kShmData)).ok());
  EXPECT_FALSE(DecodeCommand(encode(CommandKind::kMemcpyHtoD, kShmData | kWantsHostData)).ok());
  EXPECT_FALSE(DecodeCommand(encode(CommandKind::kMemcpyDtoH, kShmData)).ok());
  EXPECT_FALSE(DecodeCommand(encode(CommandKind::kMemcpyHtoD, kShmData | kHasHostData)).ok());
  EXPECT_FALSE(DecodeCommand(encode(CommandKind::kMemcpyHtoD, 0x8)).ok());
}

TEST(WireFormat, ShmAttachRoundTrip) {
  std::vector<uint8_t> payload;
  EncodeShmAttach(64u << 20, &payload);
  ASSERT_EQ(payload.size(), kShmAttachBytes);
  absl::StatusOr<uint64_t> bytes = DecodeShmAttach(payload);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, 64u << 20);
  payload.push_back(0);
  EXPECT_FALSE(DecodeShmAttach(payload).ok());
  EXPECT_FALSE(DecodeShmAttach(absl::Span<const uint8_t>(payload.data(), 7)).ok());
}

TEST(WireFormat, ProfileControlAndRecordsRoundTrip) {
  std::vector<uint8_t> control;
  EncodeProfileControl(ProfileAction::kCollect, &control);
  ASSERT_EQ(control.size(), 1u);
  EXPECT_EQ(*DecodeProfileControl(control), ProfileAction::kCollect);
  for (std::vector<uint8_t> bad : {std::vector<uint8_t>{}, std::vector<uint8_t>{0},
                                   std::vector<uint8_t>{3}, std::vector<uint8_t>{1, 1}}) {
    EXPECT_FALSE(DecodeProfileControl(bad).ok());
  }

  ProfileRecords records;
  records.server_now_ns = 1'700'000'000'000'000'000;
  records.dropped = 3;
  records.names = {"matmul", "relu"};
  records.records = {{7, 100, 200, 1}, {8, 210, 300, 0}, {9, 310, 320, 2}};
  std::vector<uint8_t> payload;
  EncodeProfileRecords(records, &payload);
  EXPECT_EQ(payload.size(), 8 + 8 + 4 + (4 + 6) + (4 + 4) + 4 + 3 * kProfileRecordBytes);
  absl::StatusOr<ProfileRecords> decoded = DecodeProfileRecords(payload);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->server_now_ns, records.server_now_ns);
  EXPECT_EQ(decoded->dropped, 3u);
  EXPECT_EQ(decoded->names, records.names);
  ASSERT_EQ(decoded->records.size(), 3u);
  EXPECT_EQ(decoded->records[2].sequence, 9u);
  EXPECT_EQ(decoded->records[2].start_ns, 310);
  EXPECT_EQ(decoded->records[2].end_ns, 320);
  EXPECT_EQ(decoded->records[2].name, 2u);

  // Trailing bytes, a truncated record, a name index past the names: all malformed.
  std::vector<uint8_t> longer = payload;
  longer.push_back(0);
  EXPECT_FALSE(DecodeProfileRecords(longer).ok());
  EXPECT_FALSE(
      DecodeProfileRecords(absl::MakeConstSpan(payload.data(), payload.size() - 1)).ok());
  ProfileRecords bad_name = records;
  bad_name.records[0].name = 3;
  payload.clear();
  EncodeProfileRecords(bad_name, &payload);
  EXPECT_FALSE(DecodeProfileRecords(payload).ok());
}

TEST(WireFormat, AProfileRecordCountPastTheLimitIsRejectedBeforeAllocating) {
  std::vector<uint8_t> payload;
  ProfileRecords empty;
  EncodeProfileRecords(empty, &payload);
  const uint32_t count = kMaxProfileRecords + 1;
  std::memcpy(payload.data() + payload.size() - 4, &count, sizeof(count));
  EXPECT_FALSE(DecodeProfileRecords(payload).ok());
  const uint32_t names = 0xFFFFFFFF;  // more names than bytes
  std::memcpy(payload.data() + 16, &names, sizeof(names));
  EXPECT_FALSE(DecodeProfileRecords(payload).ok());
}

// A bounded mutation fuzz loop over every decoder: random garbage and bit flips / truncations /
// extensions of valid frames. Success is: no crash, no sanitizer report, only errors or values.
TEST(WireFormat, FuzzedFramesNeverCrashTheDecoders) {
  std::mt19937_64 rng(12345);
  std::vector<std::vector<uint8_t>> seeds;
  const std::vector<uint8_t> host(33, 3);
  for (int k = 0; k < static_cast<int>(CommandKind::kNumKinds); ++k) {
    seeds.push_back(*EncodeWithData(FullCommand(static_cast<CommandKind>(k), host)));
  }
  std::vector<uint8_t> bytes;
  EncodeReply(Reply{}, &bytes);
  seeds.push_back(bytes);
  {  // a batch with every entry form
    std::vector<uint8_t> batch;
    BatchWriter writer(&batch);
    Command launch = FullCommand(CommandKind::kLaunch, host);
    Command record = FullCommand(CommandKind::kRecordEvent, host);
    record.buffers.clear();
    record.params.clear();
    record.descriptors.clear();
    writer.AddCommand(9, launch);
    writer.AddDefinition(10, 4, launch);
    writer.AddTemplatedLaunch(11, 4, std::vector<TemplateBinding>{{1, 0x40, true, 8}});
    writer.AddRelease(12, 4);
    writer.AddCommandOrCompact(13, record);
    seeds.push_back(batch);
  }
  int decoded_ok = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> input;
    if (i % 4 == 0) {
      input.resize(rng() % 300);
      for (auto& b : input) b = static_cast<uint8_t>(rng());
    } else {
      input = seeds[rng() % seeds.size()];
      int edits = 1 + rng() % 4;
      for (int e = 0; e < edits && !input.empty(); ++e) {
        switch (rng() % 4) {
          case 0: input[rng() % input.size()] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
          case 1: input[rng() % input.size()] = static_cast<uint8_t>(rng()); break;
          case 2: input.resize(rng() % input.size()); break;
          case 3: input.push_back(static_cast<uint8_t>(rng())); break;
        }
      }
    }
    auto storage = std::make_shared<std::vector<uint8_t>>(input);
    absl::StatusOr<DecodedCommand> c = DecodeCommand(storage);
    if (c.ok()) {
      ++decoded_ok;
      if (c->command.host_src != nullptr) {  // host data lies inside the frame
        const auto* p = static_cast<const uint8_t*>(c->command.host_src);
        ASSERT_GE(p, storage->data());
        ASSERT_LE(p + c->command.size, storage->data() + storage->size());
      }
    }
    (void)DecodeReply(input, nullptr);
    (void)DecodeHello(input);
    (void)DecodeWelcome(input);
    (void)DecodeNotify(input);
    (void)DecodeString(input);
    (void)DecodeProfileControl(input);
    (void)DecodeProfileRecords(input);
    if (CheckBatch(input).ok()) {  // a batch that checks walks and expands without a fault
      BatchCursor cursor(input);
      for (BatchEntry entry; cursor.Next(&entry);) {
        if (entry.form == BatchEntryForm::kCompactCommand) (void)ExpandCompactCommand(entry);
        if (entry.form == BatchEntryForm::kTemplatedLaunch) (void)DecodeBindings(entry);
      }
    }
    if (input.size() >= kHeaderBytes) (void)DecodeHeader(input);
  }
  EXPECT_GT(decoded_ok, 0);  // the mutations also produce valid commands sometimes
}

TEST(ResolvedDescriptorBytes, AReferenceCountsAsTheLargestSettingsAndInlineSettingsAsThemselves) {
  EXPECT_EQ(ResolvedDescriptorBytes({}), 0u);
  // Two entries: tensor settings of 5 bytes inline, then a reference (kind | 0x80, 8-byte id).
  std::vector<uint8_t> section = {2, 1, 5, 0, 9, 9, 9, 9, 9, 1 | kDescriptorReference, 8, 0};
  section.resize(section.size() + 8, 7);
  EXPECT_EQ(ResolvedDescriptorBytes(section), 1u + (3 + 5) + (3 + kMaxDescriptorSettingsSize));
  // 255 references: 2806 bytes on the wire, what the executor keeps once it resolves them.
  std::vector<uint8_t> references = {255};
  for (int i = 0; i < 255; ++i) {
    references.insert(references.end(), {1 | kDescriptorReference, 8, 0, 0, 0, 0, 0, 0, 0, 0, 7});
  }
  EXPECT_EQ(ResolvedDescriptorBytes(references), 1u + 255 * (3 + kMaxDescriptorSettingsSize));
  EXPECT_GT(ResolvedDescriptorBytes(references), 6 * references.size());
}

TEST(ResolvedDescriptorBytes, AMalformedSectionCountsItsOwnSize) {
  const std::vector<uint8_t> truncated_header = {2, 1, 5, 0, 9, 9, 9, 9, 9, 1};
  EXPECT_EQ(ResolvedDescriptorBytes(truncated_header), truncated_header.size());
  const std::vector<uint8_t> truncated_settings = {1, 1, 200, 0, 9, 9};
  EXPECT_EQ(ResolvedDescriptorBytes(truncated_settings), truncated_settings.size());
}

TEST(CommandBatch, EntriesRoundTripInOrder) {
  Command launch;
  launch.kind = CommandKind::kLaunch;
  launch.stream = 3;
  launch.object = 200;
  launch.params = {1, 2, 3};
  Command memset;
  memset.kind = CommandKind::kMemset;
  memset.dst = 0x1000;
  memset.size = 64;
  std::vector<uint8_t> payload;
  BatchWriter writer(&payload);
  writer.AddCommand(7, launch);
  writer.AddCommand(8, memset);
  writer.AddCommand(5, memset);  // sequences need not grow (two posting threads)
  absl::StatusOr<std::vector<BatchEntry>> entries = SplitBatch(payload);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].sequence, 7u);
  EXPECT_EQ((*entries)[1].sequence, 8u);
  EXPECT_EQ((*entries)[2].sequence, 5u);
  auto decoded = DecodeCommand(std::make_shared<std::vector<uint8_t>>(
      (*entries)[0].command.begin(), (*entries)[0].command.end()));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->command.kind, CommandKind::kLaunch);
  EXPECT_EQ(decoded->command.params, launch.params);
  decoded = DecodeCommand(std::make_shared<std::vector<uint8_t>>(
      (*entries)[1].command.begin(), (*entries)[1].command.end()));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->command.dst, 0x1000u);
}

// Every asynchronous command without buffers or parameters survives the compact form: the
// expanded payload is byte for byte what EncodeCommand writes.
TEST(CommandBatch, CompactCommandsStandForTheirFullPayload) {
  std::vector<Command> commands;
  Command record;
  record.kind = CommandKind::kRecordEvent;
  record.stream = 2;
  record.object = 77;
  record.token = 0x123456789ull;
  commands.push_back(record);
  Command memset;
  memset.kind = CommandKind::kMemset;
  memset.device = 1;
  memset.dst = 0xA000000000001000ull;
  memset.size = 4096;
  memset.pattern = 0xFFFFFFFFu;
  memset.pattern_bytes = 4;
  commands.push_back(memset);
  std::vector<uint8_t> host(16);
  Command read;  // a device-to-host copy whose bytes come back later
  read.kind = CommandKind::kMemcpyDtoH;
  read.src = 0xB000000000000040ull;
  read.size = host.size();
  read.host_dst = host.data();
  commands.push_back(read);
  Command destroy;
  destroy.kind = CommandKind::kDestroyEvent;  // every field 0 but the kind
  commands.push_back(destroy);
  std::vector<uint8_t> payload;
  BatchWriter writer(&payload);
  uint64_t sequence = 100;
  for (const Command& command : commands) {
    ASSERT_TRUE(IsCompactable(command));
    writer.AddCommandOrCompact(sequence++, command);
  }
  absl::StatusOr<std::vector<BatchEntry>> entries = SplitBatch(payload);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    EXPECT_EQ((*entries)[i].form, BatchEntryForm::kCompactCommand);
    EXPECT_EQ((*entries)[i].sequence, 100 + i);
    std::vector<uint8_t> expected;
    EncodeCommand(commands[i], &expected);
    EXPECT_EQ(ExpandCompactCommand((*entries)[i]), expected) << "command " << i;
  }
  // A record event is a few bytes instead of a fixed part of 72.
  std::vector<uint8_t> one;
  BatchWriter(&one).AddCommandOrCompact(1, record);
  EXPECT_LE(one.size(), 16u);
  // A launch, or a copy carrying host data, is not compactable.
  Command launch;
  launch.kind = CommandKind::kLaunch;
  launch.params = {1};
  EXPECT_FALSE(IsCompactable(launch));
  Command write;
  write.kind = CommandKind::kMemcpyHtoD;
  write.size = host.size();
  write.host_src = host.data();
  EXPECT_FALSE(IsCompactable(write));
}

// Appends a hand-made entry: varint sequence delta, varint length << 3 | form, body.
void HandMadeEntry(uint64_t delta, uint64_t form, const std::vector<uint8_t>& body,
                   std::vector<uint8_t>* out) {
  PutVarint(out, delta);
  PutVarint(out, body.size() << kBatchEntryFormBits | form);
  out->insert(out->end(), body.begin(), body.end());
}

TEST(CommandBatch, MalformedBatchesAreRejected) {
  Command memset;
  memset.kind = CommandKind::kMemset;
  std::vector<uint8_t> good;
  BatchWriter(&good).AddCommand(1, memset);
  ASSERT_TRUE(CheckBatch(good).ok());
  EXPECT_FALSE(SplitBatch({}).ok());                                          // empty
  EXPECT_FALSE(SplitBatch(absl::MakeSpan(good).subspan(0, 1)).ok());          // short header
  EXPECT_FALSE(SplitBatch(absl::MakeSpan(good).subspan(0, good.size() - 1)).ok());  // overrun
  std::vector<uint8_t> command_body;
  EncodeCommand(memset, &command_body);
  std::vector<uint8_t> zero;  // sequence 0 (delta 0 from the start)
  HandMadeEntry(0, 0, command_body, &zero);
  EXPECT_FALSE(SplitBatch(zero).ok());
  std::vector<uint8_t> huge;  // a length past the payload, as a ten-byte varint
  PutVarint(&huge, 2);
  PutVarint(&huge, ~uint64_t{0});
  EXPECT_FALSE(SplitBatch(huge).ok());
  std::vector<uint8_t> overlong(11, 0x80);  // a varint past 64 bits
  EXPECT_FALSE(SplitBatch(overlong).ok());
  std::vector<uint8_t> short_command;  // too short to hold a command's fixed part
  HandMadeEntry(2, 0, std::vector<uint8_t>(10), &short_command);
  EXPECT_FALSE(SplitBatch(short_command).ok());
  std::vector<uint8_t> unknown_form;
  HandMadeEntry(2, 7, {1}, &unknown_form);
  EXPECT_FALSE(SplitBatch(unknown_form).ok());
  std::vector<uint8_t> compact_unknown_bit;  // kind memset, mask bit 10
  HandMadeEntry(2, 4, {static_cast<uint8_t>(CommandKind::kMemset), 0x80, 0x08},
                &compact_unknown_bit);
  EXPECT_FALSE(SplitBatch(compact_unknown_bit).ok());
  std::vector<uint8_t> compact_unknown_kind;
  HandMadeEntry(2, 4, {static_cast<uint8_t>(CommandKind::kNumKinds), 0}, &compact_unknown_kind);
  EXPECT_FALSE(SplitBatch(compact_unknown_kind).ok());
  std::vector<uint8_t> compact_too_wide;  // pattern_bytes (bit 8) of 300: wider than a byte
  HandMadeEntry(2, 4, {static_cast<uint8_t>(CommandKind::kMemset), 0x80, 0x02, 0xAC, 0x02},
                &compact_too_wide);
  EXPECT_FALSE(SplitBatch(compact_too_wide).ok());
  std::vector<uint8_t> compact_trailing;
  HandMadeEntry(2, 4, {static_cast<uint8_t>(CommandKind::kMemset), 0, 9}, &compact_trailing);
  EXPECT_FALSE(SplitBatch(compact_trailing).ok());
}

}  // namespace
}  // namespace vgpu::wire
