// Replaying and profiling a command trace (trace/trace_format.h) without TensorFlow: `vgpu trace
// replay` runs a recorded run again on a backing executor created by name (in-process) or on a
// running `vgpu server`, mapping recorded device addresses onto the replay's allocations, and
// compares every device-to-host result with the recorded one; `vgpu trace stats` replays with a
// synchronisation after every command and reports time per kernel and per step. Depends only on
// Abseil, the protocol, the backends and the transports (it links into a server binary too).
#ifndef VGPU_TRACE_TRACE_REPLAY_H_
#define VGPU_TRACE_TRACE_REPLAY_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugin/protocol/command.h"
#include "plugin/trace/trace_format.h"

namespace vgpu {
namespace trace {

// Maps the device addresses of a recorded run onto a replay's: each recorded allocation
// [address, address + size) onto the replay's allocation of it; an address inside a recorded
// allocation translates by its offset. Not thread-safe.
class AddressTranslator {
 public:
  void Map(uint64_t recorded, uint64_t size, uint64_t replayed);
  // Forgets the recorded allocation starting at `recorded` (a kFree); no-op if none.
  void Unmap(uint64_t recorded);
  // The replay's address for `recorded`, or nullopt when it lies in no recorded allocation.
  std::optional<uint64_t> Translate(uint64_t recorded) const;
  // The replay's address for the range [recorded, recorded + size), or nullopt unless the whole
  // range lies in one recorded allocation (so `size` is at most that allocation's size).
  std::optional<uint64_t> TranslateRange(uint64_t recorded, uint64_t size) const;
  size_t size() const { return allocations_.size(); }

 private:
  struct Allocation {
    uint64_t size;
    uint64_t replayed;
  };
  std::map<uint64_t, Allocation> allocations_;  // by recorded start address
};

// How a replayed device-to-host result compares with the recorded one.
struct ComparisonResult {
  bool equal = false;        // within tolerance (or exact)
  bool exact = false;        // byte-identical
  double max_abs_error = 0;  // as float32, when not exact
  double max_rel_error = 0;
  std::string detail;        // what differs, when !equal
};

// Exact first; otherwise, when the size is a multiple of 4, element-wise as float32:
// |replayed - recorded| <= atol + rtol * |recorded|, NaN equal to NaN. A checksum-only recording
// compares by size and checksum. A result recorded as not captured compares equal.
ComparisonResult CompareResult(const TraceResult& recorded, absl::Span<const uint8_t> replayed,
                               double rtol, double atol);

// How long the replay waits, by default, for a notification (a recorded one, or its own behind a
// device-to-host copy) before that record fails with DeadlineExceeded.
inline constexpr int kDefaultReplayWaitTimeoutMs = 10'000;

struct ReplayOptions {
  std::string executor = "cpu";  // in-process executor, by registered name
  std::string server;            // "unix:///path" or "tcp://host:port": replay there instead
  std::string token;             // for a server that requires one
  double rtol = 1e-5;
  double atol = 1e-6;
  // Profiling: synchronise after every asynchronous command and time each launch.
  bool time_launches = false;
  // Stop at the first result that differs (false: count them all).
  bool stop_at_mismatch = true;
  // Longest wait for a stream to reach a notification or a copy (a trace is untrusted: a
  // notification that never comes fails its record after this long, not never).
  int wait_timeout_ms = kDefaultReplayWaitTimeoutMs;
  // Device memory per device of an in-process replay, and the most host memory the replay holds
  // for device-to-host copies in flight (in-process or on a server). 0: the recorded memory
  // limit, at most DefaultReplayMemoryLimit(); a trace cannot raise it.
  uint64_t memory_limit = 0;
};

// The default cap on a replay's device memory per device: half the host's physical memory,
// shared by `device_count` devices (as the plugin's default VGPU_MEMORY_LIMIT).
uint64_t DefaultReplayMemoryLimit(uint32_t device_count);

struct Mismatch {
  uint64_t record_index = 0;
  CommandKind kind = CommandKind::kNumKinds;
  uint16_t ordinal = 0;
  uint64_t stream = 0;
  std::string detail;
  // The last launch on the same stream before it (what most likely produced the bytes).
  std::optional<uint64_t> last_launch_record;
  uint32_t last_launch_kernel = 0;
};

struct KernelStats {
  uint32_t kernel_id = 0;
  std::string name;      // "" when no executor of this build knows the id
  uint64_t launches = 0;
  uint64_t total_ns = 0;  // replay time, only with time_launches
  uint64_t buffer_bytes = 0;
};

struct StepStats {
  uint16_t ordinal = 0;
  uint64_t iterations = 0;  // the device's count at the end of the step
  bool complete = true;     // false: the commands after the last step boundary
  uint64_t commands = 0;
  uint64_t calls = 0;       // round trips
  uint64_t recorded_ns = 0;
  uint64_t replay_ns = 0;
};

struct ReplayReport {
  TraceHeader header;
  std::string executor_description;  // "cpu (in-process)" or the server's address
  uint64_t records = 0;
  uint64_t commands_replayed = 0;
  uint64_t results_compared = 0;
  uint64_t results_exact = 0;
  uint64_t mismatches = 0;
  double max_abs_error = 0;
  double max_rel_error = 0;
  std::optional<Mismatch> first_mismatch;
  std::array<uint64_t, static_cast<size_t>(CommandKind::kNumKinds)> commands_by_kind{};
  uint64_t bytes_to_device = 0;
  uint64_t bytes_from_device = 0;
  std::vector<KernelStats> kernels;  // by kernel id
  std::vector<StepStats> steps;      // in trace order
  uint64_t replay_ns = 0;
};

// Replays the trace at `path`. An error (unreadable or corrupt trace, unknown executor,
// unreachable server, a command that failed on replay though it succeeded when recorded, a
// device-to-host copy outside every recorded allocation or beyond the memory limit, a
// notification no earlier record posted, a wait past options.wait_timeout_ms) is returned as a
// status naming the record; result differences are in the report. Blocking; runs the executor
// on the calling thread's behalf; thread-compatible.
absl::StatusOr<ReplayReport> ReplayTrace(const std::string& path, const ReplayOptions& options);
// The same over a reader already open (a trace in memory: the fuzz target).
absl::StatusOr<ReplayReport> ReplayTrace(TraceReader& reader, const ReplayOptions& options);

// `vgpu trace replay FILE [--executor NAME] [--server ADDRESS] [--token T] [--rtol X]
// [--atol Y] [--memory_limit BYTES] [--wait_timeout SECONDS]` and `vgpu trace stats FILE
// [same flags]`: the command line of both, writing to `out` (results) and `err` (errors).
// Returns the exit code: 0 success, 1 mismatch or error, 2 bad usage. Never throws.
int RunTraceTool(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// The tables `vgpu trace stats` prints.
void PrintStats(const ReplayReport& report, std::ostream& out);

}  // namespace trace
}  // namespace vgpu

#endif  // VGPU_TRACE_TRACE_REPLAY_H_
