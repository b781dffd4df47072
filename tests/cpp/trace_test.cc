// Tests of command traces (trace/): the file format round trip, address translation, corrupted
// and truncated files refused with the offset and record named, result comparison within a
// tolerance, and a run recorded through TracingTransport on the CPU executor replayed (equal
// results pass, a tampered result is reported as the first mismatch), and hostile traces built
// byte by byte (TraceUntrusted: nonzero reserved fields, a checksum that must cover the record
// header, lengths beyond the file, copies outside every allocation or beyond the memory limit,
// notifications that can never come) refused with the record and offset, without allocating
// what they declare.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "plugin/backend/executor_registry.h"
#include "plugin/protocol/byte_codec.h"
#include "plugin/protocol/wire_format.h"
#include "plugin/trace/trace_format.h"
#include "plugin/trace/trace_recorder.h"
#include "plugin/trace/trace_replay.h"
#include "plugin/transport/inproc_transport.h"
#include "test_commands.h"
#include "test_executors.h"
#include "test_sync.h"

namespace vgpu {
namespace trace {
namespace {

using namespace vgpu_test;  // NOLINT: the command builders of test_commands.h

std::string TempPath(const std::string& name) {
  return absl::StrCat(testing::TempDir(), "/trace_test_", ::getpid(), "_", name);
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(file), {});
}

void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Reads every record; the first error, or OK.
absl::Status ReadAll(const std::string& path, std::vector<TraceRecord>* records = nullptr) {
  absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::Open(path);
  if (!reader.ok()) return reader.status();
  TraceRecord record;
  for (;;) {
    absl::StatusOr<bool> next = (*reader)->Next(&record);
    if (!next.ok()) return next.status();
    if (!*next) return absl::OkStatus();
    if (records != nullptr) records->push_back(record);
  }
}

// Expects `status`'s message to mention each of `parts`.
void ExpectMentions(const absl::Status& status, std::initializer_list<std::string> parts) {
  for (const std::string& part : parts) {
    EXPECT_NE(status.message().find(part), std::string::npos) << part << " in: " << status;
  }
}

// Expects the replay of the trace at `path` with `options` to fail with a message that mentions
// each of `parts`; returns its error (OK, after a test failure, when the replay succeeded).
absl::Status ExpectReplayRefused(const std::string& path,
                                 std::initializer_list<std::string> parts,
                                 const ReplayOptions& options = ReplayOptions()) {
  absl::StatusOr<ReplayReport> report = ReplayTrace(path, options);
  if (report.ok()) {
    ADD_FAILURE() << "the replay of " << path << " succeeded";
    return absl::OkStatus();
  }
  ExpectMentions(report.status(), parts);
  return report.status();
}

// A small trace written record by record: header, allocate call, host-to-device post, a
// device-to-host post and its result, a step.
std::string WriteSampleTrace(const std::string& name) {
  const std::string path = TempPath(name);
  TraceHeader header;
  header.device_count = 2;
  header.memory_limit = 64ull << 20;
  header.created_unix_ns = 123456789;
  header.producer = "tensorflow-vgpu test";
  header.backends = "inproc (cpu), inproc (cpu)";
  absl::StatusOr<std::unique_ptr<TraceWriter>> writer = TraceWriter::Create(path, header);
  EXPECT_TRUE(writer.ok()) << writer.status();

  std::vector<uint8_t> body, record;
  const Command allocate = MakeCommand(CommandKind::kAllocate, 0, 4096, /*device=*/1);
  Reply reply;
  reply.value = 0x10000;
  EncodeCommandBody(allocate, HostSide::kNone, {}, &body);
  wire::EncodeReply(reply, &body);
  EncodeRecord(RecordType::kCall, 1, 10, body, &record);

  const std::vector<uint8_t> data = {1, 2, 3, 4, 5, 6, 7, 8};
  const Command copy =
      CopyIn(CommandKind::kMemcpyHtoD, 7, 0x10010, data.data(), data.size(), /*device=*/1);
  body.clear();
  EncodeCommandBody(copy, HostSide::kSource, data, &body);
  EncodeRecord(RecordType::kPost, 1, 20, body, &record);

  const Command back =
      CopyOut(CommandKind::kMemcpyDtoH, 7, 0x10010, nullptr, data.size(), /*device=*/1);
  body.clear();
  EncodeCommandBody(back, HostSide::kDestination, {}, &body);
  EncodeRecord(RecordType::kPost, 1, 30, body, &record);

  body.assign(8, 0);
  body[0] = 2;  // the result of record 2
  EncodeResult(MakeResult(data), &body);
  EncodeRecord(RecordType::kResult, 1, 40, body, &record);

  body.assign(8, 0);
  body[0] = 3;
  EncodeRecord(RecordType::kStep, 0, 50, body, &record);
  EXPECT_TRUE((*writer)->Append(record).ok());
  writer->reset();
  return path;
}

TEST(TraceFormat, RoundTripsHeaderAndEveryRecordType) {
  const std::string path = WriteSampleTrace("roundtrip");
  absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const TraceHeader& header = (*reader)->header();
  EXPECT_EQ(header.device_count, 2u);
  EXPECT_EQ(header.memory_limit, 64ull << 20);
  EXPECT_EQ(header.created_unix_ns, 123456789u);
  EXPECT_EQ(header.producer, "tensorflow-vgpu test");
  EXPECT_EQ(header.backends, "inproc (cpu), inproc (cpu)");

  std::vector<TraceRecord> records;
  ASSERT_TRUE(ReadAll(path, &records).ok());
  ASSERT_EQ(records.size(), 5u);
  EXPECT_EQ(records[0].type, RecordType::kCall);
  EXPECT_EQ(records[0].ordinal, 1);
  EXPECT_EQ(records[0].time_ns, 10u);
  EXPECT_EQ(records[0].command.kind, CommandKind::kAllocate);
  EXPECT_EQ(records[0].command.size, 4096u);
  EXPECT_EQ(records[0].reply.value, 0x10000u);
  EXPECT_EQ(records[1].type, RecordType::kPost);
  EXPECT_EQ(records[1].command.kind, CommandKind::kMemcpyHtoD);
  EXPECT_EQ(records[1].command.dst, 0x10010u);
  EXPECT_EQ(records[1].host_side, HostSide::kSource);
  ASSERT_NE(records[1].host_data, nullptr);
  EXPECT_EQ(*records[1].host_data, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(records[2].host_side, HostSide::kDestination);
  EXPECT_EQ(records[3].type, RecordType::kResult);
  EXPECT_EQ(records[3].target_record, 2u);
  EXPECT_EQ(records[3].result.form, ResultForm::kBytes);
  EXPECT_EQ(records[3].result.bytes, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(records[4].type, RecordType::kStep);
  EXPECT_EQ(records[4].iterations, 3u);
  EXPECT_EQ(records[4].index, 4u);
}

TEST(TraceFormat, HeaderMemoryLimitCanBeRewrittenWhileRecording) {
  const std::string path = TempPath("memory_limit");
  TraceHeader header;
  header.memory_limit = 1;
  auto recorder = TraceRecorder::Create(path, header);
  ASSERT_TRUE(recorder.ok());
  (*recorder)->RecordStep(0, 1);
  (*recorder)->SetMemoryLimit(5ull << 30);
  (*recorder)->RecordStep(0, 2);
  recorder->reset();
  std::vector<TraceRecord> records;
  ASSERT_TRUE(ReadAll(path, &records).ok()) << ReadAll(path);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].iterations, 2u);
  EXPECT_EQ((*TraceReader::Open(path))->header().memory_limit, 5ull << 30);
}

TEST(TraceFormat, KeepsLargeResultsAsChecksumAndSize) {
  std::vector<uint8_t> big(kMaxInlineResultBytes + 1, 7);
  TraceResult result = MakeResult(big);
  EXPECT_EQ(result.form, ResultForm::kChecksum);
  EXPECT_EQ(result.size, big.size());
  EXPECT_TRUE(result.bytes.empty());
  EXPECT_TRUE(CompareResult(result, big, 0, 0).equal);
  big[5] = 8;
  EXPECT_FALSE(CompareResult(result, big, 1, 1).equal);
}

TEST(TraceFormat, Crc32MatchesTheStandardCheckValue) {
  const std::string text = "123456789";
  EXPECT_EQ(Crc32({reinterpret_cast<const uint8_t*>(text.data()), text.size()}), 0xCBF43926u);
}

TEST(TraceReader, RefusesAFlippedBodyByteNamingTheRecordAndOffset) {
  const std::string path = WriteSampleTrace("flipped");
  std::vector<uint8_t> bytes = ReadFile(path);
  bytes[bytes.size() - 1] ^= 0x40;  // inside the body of the last record (the step)
  WriteFile(path, bytes);
  absl::Status status = ReadAll(path);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("record 4"), std::string::npos) << status;
  EXPECT_NE(status.message().find("checksum"), std::string::npos) << status;
  const size_t step_offset = bytes.size() - 8 - kRecordHeaderBytes;
  EXPECT_NE(status.message().find(absl::StrCat("offset ", step_offset)), std::string::npos)
      << status;
}

TEST(TraceReader, RefusesEveryTruncationWithAClearError) {
  const std::string path = WriteSampleTrace("truncated");
  const std::vector<uint8_t> bytes = ReadFile(path);
  std::vector<TraceRecord> records;
  ASSERT_TRUE(ReadAll(path, &records).ok());
  std::vector<uint64_t> boundaries;
  for (const TraceRecord& r : records) boundaries.push_back(r.offset);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    if (std::find(boundaries.begin(), boundaries.end(), cut) != boundaries.end()) continue;
    WriteFile(path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + cut));
    absl::Status status = ReadAll(path);
    ASSERT_FALSE(status.ok()) << "cut at " << cut;
    EXPECT_NE(status.message().find("offset"), std::string::npos) << status;
    if (cut >= boundaries.front()) {
      EXPECT_NE(status.message().find("truncated"), std::string::npos) << status;
      EXPECT_NE(status.message().find("record "), std::string::npos) << status;
    }
  }
}

TEST(TraceReader, RefusesABadMagicVersionAndOrdinal) {
  const std::string path = WriteSampleTrace("header");
  std::vector<uint8_t> bytes = ReadFile(path);
  std::vector<uint8_t> bad = bytes;
  bad[0] = 'X';
  WriteFile(path, bad);
  EXPECT_NE(ReadAll(path).message().find("bad magic"), std::string::npos);
  bad = bytes;
  bad[8] = 9;  // version
  WriteFile(path, bad);
  EXPECT_NE(ReadAll(path).message().find("version 9"), std::string::npos);
  // Command bodies of wire version 2 are those of today's: such a trace still reads; others not.
  bad = bytes;
  bad[10] = 2;
  bad[11] = 0;
  WriteFile(path, bad);
  EXPECT_TRUE(ReadAll(path).ok());
  for (uint8_t wire_version : {1, wire::kWireVersion + 1}) {
    bad[10] = wire_version;
    WriteFile(path, bad);
    EXPECT_NE(ReadAll(path).message().find("wire version"), std::string::npos) << wire_version;
  }

  std::vector<TraceRecord> records;
  WriteFile(path, bytes);
  ASSERT_TRUE(ReadAll(path, &records).ok());
  bad = bytes;
  bad[records[4].offset + 2] = 5;  // ordinal 5 of 2 devices (checked before the checksum)
  WriteFile(path, bad);
  absl::Status status = ReadAll(path);
  EXPECT_NE(status.message().find("device ordinal 5"), std::string::npos) << status;
  EXPECT_NE(status.message().find("record 4"), std::string::npos) << status;
  bad = bytes;
  bad[records[4].offset] = 77;  // record type
  WriteFile(path, bad);
  EXPECT_NE(ReadAll(path).message().find("unknown record type 77"), std::string::npos);
  EXPECT_FALSE(TraceReader::Open(TempPath("does-not-exist")).ok());
}

TEST(TraceReader, SurvivesEveryByteMutatedEvenBehindAValidChecksum) {
  const std::string path = WriteSampleTrace("mutated");
  const std::vector<uint8_t> bytes = ReadFile(path);
  std::vector<TraceRecord> records;
  ASSERT_TRUE(ReadAll(path, &records).ok());
  for (size_t at = 0; at < bytes.size(); ++at) {
    for (uint8_t value : {uint8_t{0xFF}, static_cast<uint8_t>(bytes[at] ^ 1)}) {
      std::vector<uint8_t> mutated = bytes;
      mutated[at] = value;
      // Re-seal the record the byte belongs to (its header's first 16 bytes or its body), so
      // the decoders behind the checksum see it.
      for (const TraceRecord& r : records) {
        uint32_t length = 0;
        std::memcpy(&length, mutated.data() + r.offset + 4, 4);
        const size_t body = r.offset + kRecordHeaderBytes;
        const bool in_header = at >= r.offset && at < r.offset + 16;
        if ((in_header || at >= body) && length <= mutated.size() - body &&
            at < body + length) {
          const uint32_t crc = RecordChecksum({mutated.data() + r.offset, 16},
                                              {mutated.data() + body, length});
          std::memcpy(mutated.data() + r.offset + 16, &crc, 4);
        }
      }
      WriteFile(path, mutated);
      (void)ReadAll(path);  // an error or success; never a crash or a huge allocation
    }
  }
}

TEST(TraceAddressTranslator, TranslatesAddressesInsideAnAllocationByTheirOffset) {
  AddressTranslator translator;
  translator.Map(0x1000, 0x100, 0x9000);
  translator.Map(0x2000, 0x10, 0x5000);
  EXPECT_EQ(translator.Translate(0x1000), 0x9000u);
  EXPECT_EQ(translator.Translate(0x1080), 0x9080u);
  EXPECT_EQ(translator.Translate(0x1100), 0x9100u);  // one past the end
  EXPECT_EQ(translator.Translate(0x2008), 0x5008u);
  EXPECT_FALSE(translator.Translate(0x0fff).has_value());
  EXPECT_FALSE(translator.Translate(0x1200).has_value());
  translator.Unmap(0x1000);
  EXPECT_FALSE(translator.Translate(0x1080).has_value());
  EXPECT_EQ(translator.Translate(0x2000), 0x5000u);
  translator.Map(0x1000, 0x40, 0x7000);  // a recorded address reused after its free
  EXPECT_EQ(translator.Translate(0x1010), 0x7010u);
}

std::vector<uint8_t> FloatBytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

TEST(TraceCompare, AcceptsExactAndWithinToleranceRefusesBeyond) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  TraceResult recorded = MakeResult(FloatBytes({1.0f, 100.0f, nan, -2.0f}));
  ComparisonResult exact = CompareResult(recorded, FloatBytes({1.0f, 100.0f, nan, -2.0f}),
                                         1e-5, 1e-6);
  EXPECT_TRUE(exact.equal);
  EXPECT_TRUE(exact.exact);

  ComparisonResult close = CompareResult(recorded, FloatBytes({1.0f, 100.0005f, nan, -2.0f}),
                                         1e-5, 1e-6);
  EXPECT_TRUE(close.equal);
  EXPECT_FALSE(close.exact);
  EXPECT_GT(close.max_abs_error, 0);
  EXPECT_LT(close.max_rel_error, 1e-5);

  ComparisonResult far = CompareResult(recorded, FloatBytes({1.0f, 100.1f, nan, -2.0f}),
                                       1e-5, 1e-6);
  EXPECT_FALSE(far.equal);
  EXPECT_NE(far.detail.find("element 1"), std::string::npos) << far.detail;

  EXPECT_FALSE(CompareResult(recorded, FloatBytes({1.0f, 100.0f, 0.0f, -2.0f}), 1, 1).equal);
  EXPECT_FALSE(CompareResult(recorded, FloatBytes({1.0f, 100.0f, nan}), 1, 1).equal);
  TraceResult odd = MakeResult(std::vector<uint8_t>{1, 2, 3});
  EXPECT_FALSE(CompareResult(odd, std::vector<uint8_t>{1, 2, 4}, 1, 1).equal);
  TraceResult skipped;
  skipped.form = ResultForm::kNotCaptured;
  EXPECT_TRUE(CompareResult(skipped, std::vector<uint8_t>{9}, 0, 0).equal);
}

class NullSink final : public CompletionSink {
 public:
  void OnNotify(uint64_t, const absl::Status&) override {}
};

// Records a run on the CPU executor: allocate, copy in, memset part, copy out (captured by the
// stream's next notification), synchronise, copy out synchronously, free.
std::string RecordCpuRun(const std::string& name) {
  const std::string path = TempPath(name);
  TraceHeader header;
  header.device_count = 1;
  header.memory_limit = 16ull << 20;
  absl::StatusOr<std::unique_ptr<TraceRecorder>> recorder = TraceRecorder::Create(path, header);
  EXPECT_TRUE(recorder.ok()) << recorder.status();
  NullSink hub;
  TracingSink sink(recorder->get(), &hub);
  auto executor = CreateCpuExecutor(1, 16ull << 20);
  EXPECT_TRUE(executor.ok());
  {
    InprocTransport inner((*executor)->OpenSession(&sink));
    TracingTransport transport(&inner, recorder->get(), 0);
    EXPECT_TRUE(transport.Call(MakeCommand(CommandKind::kCreateStream, 41)).status.ok());
    Reply allocated = transport.Call(MakeCommand(CommandKind::kAllocate, 0, 64));
    EXPECT_TRUE(allocated.status.ok());
    std::vector<float> in = {1, 2, 3, 4, 5, 6, 7, 8};
    EXPECT_TRUE(
        transport.Post(CopyIn(CommandKind::kMemcpyHtoD, 41, allocated.value, in.data(), 32)).ok());
    Command memset = MakeCommand(CommandKind::kMemset, 41, 8);
    memset.dst = allocated.value + 8;  // inside the allocation: translated by its offset
    memset.pattern_bytes = 1;
    EXPECT_TRUE(transport.Post(memset).ok());
    std::vector<float> out(8, -1);
    EXPECT_TRUE(
        transport.Post(CopyOut(CommandKind::kMemcpyDtoH, 41, allocated.value, out.data(), 32))
            .ok());
    EXPECT_TRUE(transport.Post(NotifyCommand(41, 5)).ok());
    EXPECT_TRUE(transport.Call(MakeCommand(CommandKind::kSynchronizeStream, 41)).status.ok());
    std::vector<float> now(2, -1);
    EXPECT_TRUE(
        transport.Call(CopyOut(CommandKind::kMemcpyNow, 0, allocated.value + 24, now.data(), 8))
            .status.ok());
    EXPECT_EQ(now[0], 7);
    recorder->get()->RecordStep(0, 1);
    EXPECT_TRUE(transport.Call(FreeCommand(allocated.value)).status.ok());
  }
  recorder->reset();
  return path;
}

TEST(TraceReplay, ReplaysARecordedCpuRunWithEqualResults) {
  const std::string path = RecordCpuRun("cpu_run");
  std::vector<TraceRecord> records;
  ASSERT_TRUE(ReadAll(path, &records).ok()) << ReadAll(path);
  int results = 0, steps = 0;
  for (const TraceRecord& r : records) {
    results += r.type == RecordType::kResult;
    steps += r.type == RecordType::kStep;
  }
  EXPECT_EQ(results, 1);
  EXPECT_EQ(steps, 1);
  absl::StatusOr<ReplayReport> report = ReplayTrace(path, ReplayOptions());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->first_mismatch.has_value());
  EXPECT_EQ(report->results_compared, 2u);  // the async and the synchronous copy
  EXPECT_EQ(report->results_exact, 2u);
  EXPECT_EQ(report->commands_replayed, 9u);
  EXPECT_EQ(report->bytes_to_device, 32u);
  EXPECT_EQ(report->bytes_from_device, 40u);
  ASSERT_EQ(report->steps.size(), 2u);  // the marked step and the commands after it
  EXPECT_TRUE(report->steps[0].complete);
  EXPECT_EQ(report->steps[0].commands, 8u);
  EXPECT_FALSE(report->steps[1].complete);
}

TEST(TraceReplay, ReportsATamperedResultAsTheFirstMismatch) {
  const std::string path = RecordCpuRun("cpu_tampered");
  std::vector<TraceRecord> records;
  ASSERT_TRUE(ReadAll(path, &records).ok());
  // Rewrite the async result with a different value (and a valid checksum).
  std::vector<uint8_t> bytes = ReadFile(path);
  for (const TraceRecord& r : records) {
    if (r.type != RecordType::kResult) continue;
    std::vector<uint8_t> body;
    for (int i = 0; i < 8; ++i) body.push_back(static_cast<uint8_t>(r.target_record >> (8 * i)));
    TraceResult result = r.result;
    float value = 1.5f;
    std::memcpy(result.bytes.data(), &value, sizeof(value));
    EncodeResult(result, &body);
    std::vector<uint8_t> record;
    EncodeRecord(RecordType::kResult, r.ordinal, r.time_ns, body, &record);
    std::copy(record.begin(), record.end(), bytes.begin() + r.offset);
  }
  WriteFile(path, bytes);
  std::ostringstream out, err;
  EXPECT_EQ(RunTraceTool({"replay", path}, out, err), 1);
  EXPECT_NE(out.str().find("MISMATCH at record"), std::string::npos) << out.str() << err.str();
  EXPECT_NE(out.str().find("memcpy_dtoh"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("stream 41"), std::string::npos) << out.str();
}

TEST(TraceTool, ReportsSuccessStatsAndBadUsage) {
  const std::string path = RecordCpuRun("cpu_tool");
  std::ostringstream out, err;
  EXPECT_EQ(RunTraceTool({"replay", path, "--executor", "cpu", "--rtol=1e-4"}, out, err), 0)
      << err.str();
  EXPECT_EQ(out.str().rfind("OK: replayed 9 commands", 0), 0u) << out.str();
  std::ostringstream stats_out, stats_err;
  EXPECT_EQ(RunTraceTool({"stats", path}, stats_out, stats_err), 0) << stats_err.str();
  EXPECT_NE(stats_out.str().find("memcpy_htod"), std::string::npos) << stats_out.str();
  EXPECT_NE(stats_out.str().find("steps:"), std::string::npos) << stats_out.str();
  std::ostringstream bad_out, bad_err;
  EXPECT_EQ(RunTraceTool({"replay", path, "--executor", "tpu"}, bad_out, bad_err), 1);
  EXPECT_NE(bad_err.str().find("unknown executor 'tpu'"), std::string::npos) << bad_err.str();
  EXPECT_NE(bad_err.str().find("cpu"), std::string::npos) << bad_err.str();
  EXPECT_EQ(RunTraceTool({"replay"}, bad_out, bad_err), 2);
  EXPECT_EQ(RunTraceTool({"bogus"}, bad_out, bad_err), 2);
  EXPECT_EQ(RunTraceTool({"replay", path, "--rtol", "x"}, bad_out, bad_err), 2);
}

// --- Untrusted traces: hostile files built byte by byte -----------------------------------------

// A trace assembled record by record with the format's encoders (then patched raw where a test
// needs bytes no encoder writes).
class HostileTrace {
 public:
  explicit HostileTrace(uint64_t memory_limit = 64ull << 20) {
    TraceHeader header;
    header.memory_limit = memory_limit;
    EncodeFileHeader(header, &bytes_);
  }
  // Appends a record; its byte offset.
  size_t Add(RecordType type, const std::vector<uint8_t>& body) {
    const size_t at = bytes_.size();
    EncodeRecord(type, 0, 0, body, &bytes_);
    return at;
  }
  size_t Post(const Command& command, HostSide side = HostSide::kNone) {
    std::vector<uint8_t> body;
    EncodeCommandBody(command, side, {}, &body);
    return Add(RecordType::kPost, body);
  }
  // A call that succeeded when recorded, answered `value`; a kMemcpyNow to the host gets a
  // result "not captured".
  size_t Call(const Command& command, uint64_t value = 0, HostSide side = HostSide::kNone) {
    std::vector<uint8_t> body;
    EncodeCommandBody(command, side, {}, &body);
    Reply reply;
    reply.value = value;
    wire::EncodeReply(reply, &body);
    if (side == HostSide::kDestination) EncodeResult(TraceResult(), &body);
    return Add(RecordType::kCall, body);
  }
  size_t Notified(uint64_t token) {
    std::vector<uint8_t> body;
    PutBytesOf(&body, token);
    return Add(RecordType::kNotified, body);
  }
  std::vector<uint8_t>& bytes() { return bytes_; }
  std::string Write(const std::string& name) const {
    const std::string path = TempPath(name);
    WriteFile(path, bytes_);
    return path;
  }

 private:
  std::vector<uint8_t> bytes_;
};

// The header of a HostileTrace: 40 fixed bytes and two empty strings.
constexpr size_t kHostileHeaderBytes = kFileHeaderFixedBytes + 8;

// Allocates 1 MiB at recorded address 0x10000 and creates stream 1.
void AddAllocationAndStream(HostileTrace& trace) {
  trace.Call(MakeCommand(CommandKind::kAllocate, 0, 1 << 20), 0x10000);
  trace.Call(MakeCommand(CommandKind::kCreateStream, 1));
}

TEST(TraceUntrusted, RefusesANonzeroReservedFieldInTheFileOrRecordHeader) {
  HostileTrace trace;
  const size_t record = trace.Notified(1);
  const std::vector<uint8_t> clean = trace.bytes();
  for (size_t at : {size_t{32}, size_t{39}, record + 1, record + 20, record + 23}) {
    trace.bytes() = clean;
    trace.bytes()[at] = 1;
    absl::Status status = ReadAll(trace.Write("reserved"));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << at;
    EXPECT_NE(status.message().find("reserved"), std::string::npos) << at << ": " << status;
    EXPECT_NE(status.message().find("byte offset"), std::string::npos) << status;
    if (at >= record) {
      EXPECT_NE(status.message().find("record 0"), std::string::npos) << status;
    }
  }
}

TEST(TraceUntrusted, ChecksumCoversTheRecordHeaderNotJustTheBody) {
  HostileTrace trace;
  const size_t record = trace.Notified(1);
  ASSERT_TRUE(ReadAll(trace.Write("header_crc")).ok());
  // Time (bytes 8..15) and body length (4..7, kept consistent by growing the file) are covered.
  for (size_t at : {record + 8, record + 15}) {
    std::vector<uint8_t> bytes = trace.bytes();
    bytes[at] ^= 0x20;
    WriteFile(TempPath("header_crc"), bytes);
    absl::Status status = ReadAll(TempPath("header_crc"));
    EXPECT_NE(status.message().find("checksum mismatch"), std::string::npos) << status;
    EXPECT_NE(status.message().find(absl::StrCat("offset ", record)), std::string::npos)
        << status;
  }
}

TEST(TraceUntrusted, RefusesFormatVersionOneAsNotSupported) {
  HostileTrace trace;
  trace.bytes()[8] = 1;
  absl::Status status = ReadAll(trace.Write("version1"));
  EXPECT_NE(status.message().find("version 1 is not supported"), std::string::npos) << status;
  EXPECT_NE(status.message().find("record the trace again"), std::string::npos) << status;
}

TEST(TraceUntrusted, RefusesLengthsBeyondTheFileBeforeAllocatingThem) {
  // A header string of 60000 bytes (under the 64 KiB cap) in a 48-byte file.
  HostileTrace trace;
  uint32_t length = 60000;
  std::memcpy(trace.bytes().data() + kFileHeaderFixedBytes, &length, 4);
  absl::Status status = ReadAll(trace.Write("long_string"));
  EXPECT_NE(status.message().find("header string of 60000 bytes is truncated"),
            std::string::npos)
      << status;
  // A record declaring a 4 GiB body.
  HostileTrace body;
  const size_t record = body.Notified(1);
  length = 0xFFFFFFFFu;
  std::memcpy(body.bytes().data() + record + 4, &length, 4);
  status = ReadAll(body.Write("huge_body"));
  EXPECT_NE(status.message().find("body of 4294967295 bytes truncated"), std::string::npos)
      << status;
  EXPECT_NE(status.message().find("record 0"), std::string::npos) << status;
}

TEST(TraceUntrusted, RefusesAHugeDeviceToHostCopyOutsideEveryAllocationWithoutAllocating) {
  for (uint64_t size : {uint64_t{1} << 62, uint64_t{3} << 29}) {
    HostileTrace trace;
    trace.Post(MakeCommand(CommandKind::kMemcpyDtoH, 1, size), HostSide::kDestination);
    const std::string path = trace.Write("huge_dtoh");
    absl::StatusOr<ReplayReport> report = ReplayTrace(path, ReplayOptions());
    ASSERT_FALSE(report.ok()) << size;
    EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument) << report.status();
    ExpectMentions(report.status(), {"record 0", absl::StrCat("byte offset ", kHostileHeaderBytes),
                                     "does not lie inside one recorded allocation"});
    std::ostringstream out, err;
    EXPECT_EQ(RunTraceTool({"stats", path}, out, err), 1);
    EXPECT_NE(err.str().find("recorded allocation"), std::string::npos) << err.str();
  }
  // The synchronous copy to the host too.
  HostileTrace now;
  now.Call(MakeCommand(CommandKind::kMemcpyNow, 0, uint64_t{1} << 62), 0, HostSide::kDestination);
  ExpectReplayRefused(now.Write("huge_now"), {"memcpy_sync", "recorded allocation"});
}

TEST(TraceUntrusted, RefusesACopyLongerThanTheAllocationItReadsFrom) {
  HostileTrace trace;
  AddAllocationAndStream(trace);
  // 16 bytes past the start: 16 bytes too long.
  trace.Post(CopyOut(CommandKind::kMemcpyDtoH, 1, 0x10000 + 16, nullptr, 1 << 20),
             HostSide::kDestination);
  ExpectReplayRefused(trace.Write("long_copy"), {"record 2", "recorded allocation"});
}

TEST(TraceUntrusted, BoundsHostMemoryOfCopiesInFlightByTheMemoryLimit) {
  HostileTrace trace;
  AddAllocationAndStream(trace);
  const Command copy = CopyOut(CommandKind::kMemcpyDtoH, 1, 0x10000, nullptr, 1 << 20);
  for (int i = 0; i < 4; ++i) trace.Post(copy, HostSide::kDestination);  // no results follow
  ReplayOptions options;
  options.memory_limit = 3ull << 20;
  const absl::Status refused =
      ExpectReplayRefused(trace.Write("in_flight"), {"record 5", "--memory_limit"}, options);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
}

TEST(TraceUntrusted, CapsTheInProcessDeviceMemoryAtTheReplayLimitNotTheRecordedOne) {
  HostileTrace trace(/*memory_limit=*/uint64_t{1} << 50);
  trace.Call(MakeCommand(CommandKind::kAllocate, 0, 256ull << 20), 0x10000);
  ReplayOptions options;
  options.memory_limit = 64ull << 20;
  ExpectReplayRefused(trace.Write("big_limit"), {"failed on replay"}, options);
  // Without --memory_limit the recorded petabyte is capped at the host's default.
  EXPECT_LE(DefaultReplayMemoryLimit(1), uint64_t{1} << 50);
  HostileTrace empty(uint64_t{1} << 50);
  EXPECT_TRUE(ReplayTrace(empty.Write("big_limit_empty"), ReplayOptions()).ok());
}

TEST(TraceUntrusted, FailsANotificationNoPostCarriedAtOnceInsteadOfWaiting) {
  HostileTrace never;
  const size_t at = never.Notified(12345);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ReplayReport> report = ReplayTrace(never.Write("never"), ReplayOptions());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument) << report.status();
  ExpectMentions(report.status(), {"record 0 (notified, token 12345",
                                   absl::StrCat("byte offset ", at), "can never come"});

  // A token posted once comes once: the second record naming it fails at once.
  HostileTrace twice;
  twice.Call(MakeCommand(CommandKind::kCreateStream, 1));
  twice.Post(NotifyCommand(1, 7));
  twice.Notified(7);
  twice.Notified(7);
  ExpectReplayRefused(twice.Write("twice"), {"record 3 (notified, token 7"});
}

TEST(TraceUntrusted, RefusesARecordedTokenInTheRangeTheReplayKeeps) {
  HostileTrace trace;
  trace.Call(MakeCommand(CommandKind::kCreateStream, 1));
  trace.Post(NotifyCommand(1, (uint64_t{1} << 62) | 2));
  ExpectReplayRefused(trace.Write("token_bits"), {"bits 62-63"});
}

TEST(TraceUntrusted, ReplaysFromMemoryAsFromAFile) {
  const std::string path = RecordCpuRun("from_memory");
  const std::vector<uint8_t> bytes = ReadFile(path);
  absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::FromBytes(
      "memory", absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<ReplayReport> report = ReplayTrace(**reader, ReplayOptions());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->commands_replayed, 9u);
  EXPECT_EQ(report->results_exact, 2u);
}

// The seeds of the trace fuzzer (tests/fuzz/trace_corpus: a mode byte, then a small real trace)
// read completely, and the stats replay over each (as the fuzz target's stats pass runs it)
// ends in a report or an error, within its limits.
TEST(TraceUntrusted, EveryFuzzSeedReadsAndReplaysAsStats) {
  std::vector<std::string> files;
  if (DIR* dir = opendir(VGPU_TRACE_FUZZ_CORPUS_DIR)) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') {
        files.push_back(std::string(VGPU_TRACE_FUZZ_CORPUS_DIR "/") + entry->d_name);
      }
    }
    closedir(dir);
  }
  ASSERT_FALSE(files.empty());
  int replayed_ok = 0;
  for (const std::string& file : files) {
    const std::vector<uint8_t> seed = ReadFile(file);
    ASSERT_GT(seed.size(), 1u) << file;
    const absl::string_view trace(reinterpret_cast<const char*>(seed.data()) + 1,
                                  seed.size() - 1);
    absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::FromBytes(file, trace);
    ASSERT_TRUE(reader.ok()) << reader.status();
    TraceRecord record;
    absl::StatusOr<bool> next;
    while ((next = (*reader)->Next(&record)).ok() && *next) {
    }
    ASSERT_TRUE(next.ok()) << file << ": " << next.status();
    ReplayOptions options;
    options.time_launches = true;
    options.stop_at_mismatch = false;
    options.memory_limit = 16ull << 20;
    options.wait_timeout_ms = 200;
    absl::StatusOr<std::unique_ptr<TraceReader>> again = TraceReader::FromBytes(file, trace);
    ASSERT_TRUE(again.ok());
    absl::StatusOr<ReplayReport> report = ReplayTrace(**again, options);
    replayed_ok += report.ok();
  }
  EXPECT_GE(replayed_ok, 2) << "the whole tiny trace replays (both modes)";
}

TEST(TraceTool, RefusesABadMemoryLimitOrWaitTimeout) {
  const std::string path = RecordCpuRun("tool_flags");
  std::ostringstream out, err;
  EXPECT_EQ(RunTraceTool({"replay", path, "--memory_limit=lots"}, out, err), 2);
  EXPECT_NE(err.str().find("--memory_limit"), std::string::npos) << err.str();
  EXPECT_EQ(RunTraceTool({"replay", path, "--wait_timeout=0"}, out, err), 2);
  EXPECT_EQ(RunTraceTool({"replay", path, "--wait_timeout=-1"}, out, err), 2);
  EXPECT_NE(err.str().find("--wait_timeout"), std::string::npos) << err.str();
  std::ostringstream ok_out, ok_err;
  EXPECT_EQ(RunTraceTool({"replay", path, "--memory_limit=64MiB", "--wait_timeout=2.5"}, ok_out,
                         ok_err),
            0)
      << ok_err.str();
}

// Counts notifications, as the client's hub would receive them.
class CountingSink final : public CompletionSink {
 public:
  void OnNotify(uint64_t, const absl::Status&) override { notified_.fetch_add(1); }
  int notified() const { return notified_.load(); }

 private:
  std::atomic<int> notified_{0};
};

TEST(TraceRecorderThreads, ManyThreadsRecordAReadableTraceThatReplaysEqual) {
  const std::string path = TempPath("threads");
  TraceHeader header;
  header.device_count = 2;
  header.memory_limit = 16ull << 20;
  auto recorder = TraceRecorder::Create(path, header);
  ASSERT_TRUE(recorder.ok());
  CountingSink hub;
  TracingSink sink(recorder->get(), &hub);
  auto executor = CreateCpuExecutor(2, 16ull << 20);
  ASSERT_TRUE(executor.ok());
  constexpr int kThreads = 4, kRounds = 20;
  {
    InprocTransport inner((*executor)->OpenSession(&sink));
    TracingTransport device0(&inner, recorder->get(), 0), device1(&inner, recorder->get(), 1);
    RunOnThreads(kThreads, [&](int t) {
      TracingTransport& transport = t % 2 == 0 ? device0 : device1;
      const uint32_t device = t % 2;
      const uint64_t stream = 1000 + t;
      ASSERT_TRUE(
          transport.Call(MakeCommand(CommandKind::kCreateStream, stream, 0, device)).status.ok());
      for (int round = 0; round < kRounds; ++round) {
        Reply allocated = transport.Call(MakeCommand(CommandKind::kAllocate, 0, 256, device));
        ASSERT_TRUE(allocated.status.ok());
        std::vector<uint8_t> in(256, static_cast<uint8_t>(t * 31 + round));
        std::vector<uint8_t> out(256, 0);
        ASSERT_TRUE(transport
                        .Post(CopyIn(CommandKind::kMemcpyHtoD, stream, allocated.value,
                                     in.data(), 256, device))
                        .ok());
        ASSERT_TRUE(transport
                        .Post(CopyOut(CommandKind::kMemcpyDtoH, stream, allocated.value,
                                      out.data(), 256, device))
                        .ok());
        ASSERT_TRUE(
            transport.Call(MakeCommand(CommandKind::kSynchronizeStream, stream, 0, device))
                .status.ok());
        EXPECT_EQ(out, in);
        ASSERT_TRUE(transport.Call(FreeCommand(allocated.value, device)).status.ok());
      }
      recorder->get()->RecordStep(static_cast<uint16_t>(device), t);
    });
  }
  recorder->reset();
  std::vector<TraceRecord> records;
  ASSERT_TRUE(ReadAll(path, &records).ok()) << ReadAll(path);
  int results = 0;
  for (const TraceRecord& r : records) results += r.type == RecordType::kResult;
  EXPECT_EQ(results, kThreads * kRounds);
  absl::StatusOr<ReplayReport> report = ReplayTrace(path, ReplayOptions());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->first_mismatch.has_value());
  EXPECT_EQ(report->results_compared, static_cast<uint64_t>(kThreads * kRounds));
  EXPECT_EQ(report->results_exact, report->results_compared);
}

}  // namespace
}  // namespace trace
}  // namespace vgpu
