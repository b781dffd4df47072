// libFuzzer target for untrusted command traces (trace/trace_format.h; docs/traces.md,
// "Untrusted traces"): any bytes, read as a trace from memory, must give records or an error
// naming the offset — never a crash, a read past the input, an escaping exception, or an
// allocation the input does not justify (scripts/fuzz.sh runs it under ASan+UBSan with an RSS
// and a malloc limit). The first input byte chooses how the rest is used:
//   bit 0  re-seal every record's checksum first, so that mutations reach the body decoders
//          behind the CRC instead of stopping at it;
//   bit 1  (the stats target, built with VGPU_TRACE_FUZZ_STATS) replay a trace that read
//          completely as `vgpu trace stats` does, on the in-process cpu executor with a small
//          memory limit and a short wait timeout.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"
#include "plugin/trace/trace_format.h"
#ifdef VGPU_TRACE_FUZZ_STATS
#include "plugin/trace/trace_replay.h"
#endif

namespace {

using vgpu::trace::kFileHeaderFixedBytes;
using vgpu::trace::kRecordHeaderBytes;

// Rewrites the checksum of every record of `trace` whose header is complete (over the bytes of
// its body the input holds), walking records by their declared lengths.
void ResealChecksums(std::string& trace) {
  auto* bytes = reinterpret_cast<uint8_t*>(trace.data());
  const size_t size = trace.size();
  size_t at = kFileHeaderFixedBytes;
  for (int text = 0; text < 2; ++text) {  // producer, backends
    if (size - std::min(at, size) < 4) return;
    uint32_t length = 0;
    std::memcpy(&length, bytes + at, 4);
    at += 4;
    if (length > size - at) return;
    at += length;
  }
  while (size - at >= kRecordHeaderBytes) {
    uint32_t length = 0;
    std::memcpy(&length, bytes + at + 4, 4);
    const size_t body = at + kRecordHeaderBytes;
    const size_t held = std::min<size_t>(length, size - body);
    const uint32_t checksum =
        vgpu::trace::RecordChecksum({bytes + at, 16}, {bytes + body, held});
    std::memcpy(bytes + at + 16, &checksum, 4);
    if (length > size - body) return;
    at = body + length;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::string trace(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode & 1) ResealChecksums(trace);

  auto reader = vgpu::trace::TraceReader::FromBytes("fuzz", trace);
  if (!reader.ok()) return 0;
  vgpu::trace::TraceRecord record;
  uint64_t records = 0;
  bool complete = false;
  for (;;) {
    absl::StatusOr<bool> next = (*reader)->Next(&record);
    if (!next.ok()) {
      if (next.status().message().find("byte offset") == absl::string_view::npos) {
        std::fprintf(stderr, "an error without its offset: %s\n",
                     std::string(next.status().message()).c_str());
        std::abort();
      }
      break;
    }
    if (!*next) {
      complete = true;
      break;
    }
    ++records;
    // Every record takes at least its header: the count is bounded by the input.
    if (records * kRecordHeaderBytes > trace.size()) {
      std::fprintf(stderr, "%llu records from %zu bytes\n",
                   static_cast<unsigned long long>(records), trace.size());
      std::abort();
    }
  }
#ifdef VGPU_TRACE_FUZZ_STATS
  if (complete && (mode & 2)) {
    auto again = vgpu::trace::TraceReader::FromBytes("fuzz", trace);
    if (!again.ok()) std::abort();  // it read once
    vgpu::trace::ReplayOptions options;
    options.time_launches = true;  // as `vgpu trace stats`
    options.stop_at_mismatch = false;
    options.memory_limit = 16ull << 20;
    options.wait_timeout_ms = 200;
    (void)vgpu::trace::ReplayTrace(**again, options);  // an error or a report; never a crash
  }
#else
  (void)complete;
#endif
  return 0;
}
