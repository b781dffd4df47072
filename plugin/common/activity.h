// The activity log: while a profile is being taken, what ran where and when — the op kernels
// TensorFlow ran on the virtual device (host side), and the kernels, copies and memsets the
// executor ran for them (executor side), each with its start and end and the TensorFlow op that
// issued it. The pluggable profiler turns it into TensorFlow's trace format; `vgpu bench
// --profile` into a per-op account.
//
// Off unless a profile is being taken: then Enabled() is one relaxed atomic load and nothing is
// recorded or paid. The log is process-wide (the in-process executor writes to the same log as
// the client); bounded (records past the capacity are counted as dropped, not kept).
//
// Through a `vgpu server` the executor's records are kept by the server and collected through a
// Source (the socket transport) when the profile is collected.
//
// Thread-safe throughout.
#ifndef VGPU_COMMON_ACTIVITY_H_
#define VGPU_COMMON_ACTIVITY_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace vgpu::activity {

enum class Kind : uint8_t {
  kOp,            // an op kernel's Compute on the host (name: the op type)
  kKernel,        // an executor kernel (name: the kernel's name)
  kCopyToDevice,  // host to device
  kCopyToHost,    // device to host
  kCopyOnDevice,  // device to device
  kMemset,
  kCall,          // a call the client waited for: one round trip (name: the command's kind)
  kEventWait,     // an executor stream blocked on an event of another stream, for as long as
                  // it was blocked (name: "wait for stream <id>"); only waits that blocked
};

// Names (op types, kernel names) are interned: a record carries a small id.
using NameId = uint32_t;
inline constexpr NameId kNoName = 0;

struct Record {
  Kind kind = Kind::kOp;
  uint32_t device = 0;
  uint64_t stream = 0;    // the executor stream (0 for host-side records)
  NameId name = kNoName;  // what ran
  NameId op = kNoName;       // the op type of the TensorFlow op that issued it (kNoName: unknown)
  NameId op_name = kNoName;  // that op's node name
  int64_t start_ns = 0;   // NowNs() clock
  int64_t end_ns = 0;
  uint64_t bytes = 0;     // copies and memsets: their size; kernels: their parameter block's
  // Executor records (kernels, copies, memsets) of an in-process executor: when the command was
  // queued on its stream (NowNs() clock; 0: not known). From there to start_ns the command
  // waited for the stream's earlier work or for the stream's worker to wake.
  int64_t queued_ns = 0;
  // kOp records: what the op did on the client while it ran (descriptor calls of the virtual DNN
  // API answered locally and forwarded to the executor, calls that waited for a reply).
  uint32_t descriptor_calls_local = 0;
  uint32_t descriptor_calls_forwarded = 0;
  uint32_t round_trips = 0;
};

// The records a profile keeps by default (about 200 MiB at most).
inline constexpr size_t kDefaultCapacity = size_t{1} << 22;

// The clock of every record: nanoseconds since the Unix epoch (the clock TensorFlow's profiler
// stamps its own events with, so the two line up).
int64_t NowNs();

// Whether a profile is being taken. Lock-free; call it before doing any work for a record.
bool Enabled();

// Starts a profile keeping at most `capacity` records: clears the log and the dropped count,
// then enables recording.
void Start(size_t capacity = kDefaultCapacity);
// Stops recording; what was recorded stays until Take() or the next Start().
void Stop();

// Moves the recorded records out (in the order they were recorded); `dropped` (if given)
// receives how many did not fit.
std::vector<Record> Take(uint64_t* dropped = nullptr);

// Appends a record (nothing when not Enabled()).
void Add(const Record& record);

// The id of `name`, interned for the process's lifetime (kNoName for an empty name).
NameId Intern(absl::string_view name);
// The name of an id (empty for kNoName or an unknown id).
std::string NameOf(NameId id);

// The op type and node name the calling thread is computing (kNoName outside an op kernel).
NameId CurrentOp();
NameId CurrentOpName();

// Counts, for the op the calling thread is computing (its kOp record), a descriptor call and a
// round trip. Nothing when not Enabled().
void CountDescriptorCall(bool forwarded);
void CountRoundTrip();

// Records kept elsewhere: an executor in a server process. A Source is told when a profile
// starts and asked for its records when the profile is collected; it appends them with this
// process's clock. Implementations are thread-safe; their calls may block (a round trip).
class Source {
 public:
  virtual ~Source() = default;
  virtual void OnProfileStart() = 0;
  // Appends the records kept since OnProfileStart; adds the ones it could not keep to `dropped`.
  virtual void Collect(std::vector<Record>* records, uint64_t* dropped) = 0;
};
// Registers a source until it is unregistered (its destructor must do so: Unregister waits for
// any call on it to return). Start() calls OnProfileStart on each registered source.
void RegisterSource(Source* source);
void UnregisterSource(Source* source);
// Stops the profile (Stop()), then takes the log's records and every source's (the in-process
// ones first). What the profiler calls when TensorFlow collects a profile.
std::vector<Record> Collect(uint64_t* dropped = nullptr);

// While a profile is being taken, marks the calling thread as computing op type `op` (node
// `op_name`) for its lifetime and records the span as a kOp record of `device`. Nests (the outer
// op is restored). Started with no profile taken it does nothing (two relaxed loads in all).
class ScopedOp {
 public:
  ScopedOp(NameId op, NameId op_name, uint32_t device);
  ~ScopedOp();
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;

 private:
  uint32_t device_;
  // Set only when a profile is being taken: the enclosing op, the op, its start (0: not
  // tagged), and the thread's counts
  // (CountDescriptorCall, CountRoundTrip) then.
  NameId outer_ = kNoName, outer_name_ = kNoName;
  NameId op_ = kNoName, op_name_ = kNoName;
  int64_t start_ns_ = 0;
  uint64_t descriptor_calls_local_ = 0, descriptor_calls_forwarded_ = 0, round_trips_ = 0;
};

}  // namespace vgpu::activity

#endif  // VGPU_COMMON_ACTIVITY_H_
