// The interface every backing executor (the "physical GPU") implements, and the options all of
// them understand. An executor owns the devices' memory and compute resources and offers typed
// operations: memory (an arena per device, backend/device_arena.h), stream-ordered copies,
// memsets and kernel launches, stream and forward-mode descriptor objects, and its statistics.
// It does not decode or validate commands: the executor-independent session layer
// (backend/client_session.h) does that once for every executor, keeps each client's streams,
// events and limits, and calls these operations with validated, pinned memory. Executors are
// created by name through the registry (backend/executor_registry.h); docs/architecture.md,
// "Adding an executor", says how to add one.
#ifndef VGPU_BACKEND_BACKING_EXECUTOR_H_
#define VGPU_BACKEND_BACKING_EXECUTOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "plugin/backend/device_arena.h"
#include "plugin/backend/executor_session.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/backend/shared_quota.h"
#include "plugin/protocol/command.h"

namespace vgpu {

// What one session (client) may hold at once. Exceeding a limit is a ResourceExhausted error for
// that client only.
// Stream worker threads that sessions may have together: each stream is a thread, and the
// host's threads are shared by every tenant. A server has one for all its clients
// (--max_streams) and one per peer under it (half of that), so that no peer takes them all.
// Thread-safe.
class StreamThreadBudget {
 public:
  // `what` names the limit in refusals. Every take from this budget also takes from `parent`.
  StreamThreadBudget(int limit, std::string what,
                     std::shared_ptr<StreamThreadBudget> parent = nullptr)
      : limit_(limit), what_(std::move(what)), parent_(std::move(parent)) {}
  // Takes one thread here and from every parent; when one is full, takes nothing and returns
  // that budget (nullptr on success).
  const StreamThreadBudget* TryTake() {
    int taken = taken_.load(std::memory_order_relaxed);
    do {
      if (taken >= limit_) return this;
    } while (!taken_.compare_exchange_weak(taken, taken + 1, std::memory_order_relaxed));
    if (parent_ != nullptr) {
      if (const StreamThreadBudget* full = parent_->TryTake(); full != nullptr) {
        taken_.fetch_sub(1, std::memory_order_relaxed);
        return full;
      }
    }
    return nullptr;
  }
  // Gives back one thread TryTake took.
  void Give() {
    taken_.fetch_sub(1, std::memory_order_relaxed);
    if (parent_ != nullptr) parent_->Give();
  }
  int limit() const { return limit_; }
  const std::string& what() const { return what_; }

 private:
  const int limit_;
  const std::string what_;
  const std::shared_ptr<StreamThreadBudget> parent_;
  std::atomic<int> taken_{0};
};

struct SessionLimits {
  static constexpr int kDefaultMaxStreams = 256;
  static constexpr int kDefaultMaxEvents = 1 << 16;
  static constexpr int kDefaultMaxDescriptors = 1 << 16;
  static constexpr std::chrono::milliseconds kDefaultPendingFreeWait{10'000};

  int max_streams = kDefaultMaxStreams;          // each is a worker thread (StreamQueue)
  // Shared with other sessions: their streams together (null: only max_streams each).
  std::shared_ptr<StreamThreadBudget> stream_threads;
  int max_events = kDefaultMaxEvents;            // recorded, not yet destroyed events
  int max_descriptors = kDefaultMaxDescriptors;  // forward-mode descriptor objects
  // Allocations held at once (live, or freed and still used by queued work), over all devices:
  // each costs host bookkeeping that the device quota does not count.
  int max_allocations = kDefaultMaxAllocations;
  static constexpr int kDefaultMaxAllocations = 1 << 16;
  // An allocation that fails for lack of memory while the client has frees waiting for its own
  // queued work waits at most this long for that work, then retries once.
  std::chrono::milliseconds pending_free_wait = kDefaultPendingFreeWait;
  // A launch whose buffers total at most this many bytes (and, with inline_copies, a copy or
  // memset of at most this many bytes) runs on the thread that submits it when its stream is
  // idle, instead of waking the stream's worker (StreamQueue::RunInlineOrEnqueue): for small
  // work the hand-off costs more than the work. 0: everything goes to the worker. The executor
  // decides whether its launches may run on another thread at all.
  uint64_t inline_launch_bytes = kDefaultInlineLaunchBytes;
  static constexpr uint64_t kDefaultInlineLaunchBytes = 64 * 1024;
  // With inline_copies, a copy or memset of at most this many bytes runs inline when its
  // stream is idle. Larger than the launches' bound: a memcpy moves about 10 GB/s, so 1 MiB
  // holds the submitting thread about as long as a worker's wake-up takes, and the input batch
  // of a step (a 64x28x28 float32 batch is 196 KiB) then no longer waits for one, nor the
  // compute stream for the copy stream's worker (cnn, per-op account: 0.37-0.44 -> 0.24-0.27 ms
  // a step blocked on the copy).
  uint64_t inline_copy_bytes = kDefaultInlineCopyBytes;
  static constexpr uint64_t kDefaultInlineCopyBytes = 1 << 20;
  // Whether copies, memsets and event recordings run inline too (only while
  // inline_launch_bytes is not 0). Set for the in-process executor, where
  // the submitting thread is TensorFlow's (a loss read back no longer waits for a worker to
  // wake); left off on a server, where it is the connection's reader (an A/B of mlp over a Unix
  // socket: 5.6 ms per step without, 6.7 ms with; remote steps vary much on two cores).
  bool inline_copies = false;
  // Whether all of a session's streams on one device share one queue and worker thread
  // (ClientSession::HandleCreateStream): every command of the device then runs in the order it
  // was submitted, an event wait between two of its streams is already satisfied by that order,
  // and a small copy between kernels runs inline instead of waiting for a copy stream's worker,
  // for which the compute stream then waited (two thread hand-offs per copy). Copies no longer
  // overlap kernels, which on a CPU executor compete for the same cores anyway. Set in process
  // (VGPU_STREAM_QUEUES, default "device"); a server keeps one queue per stream.
  bool one_queue_per_device = false;
};

// Options every executor takes; an executor ignores what does not apply to it.
struct ExecutorOptions {
  int device_count = 1;
  uint64_t memory_limit_per_device = 1ull << 30;
  int compute_threads = 0;  // host threads for compute where the executor uses them; 0: one per core
  SessionLimits session_limits;
  // Sessions belong to tenants that do not trust each other (a `vgpu server`): share compute
  // fairly among them even where that costs a little per task.
  bool shared_by_tenants = false;
};

// Counters over the executor's life, all sessions together. Monotonic; read with stats().
struct ExecutorStats {
  uint64_t launches = 0;           // kernel launches run (successfully or not)
  uint64_t copies = 0;             // copies run (host<->device, device<->device)
  uint64_t bytes_copied = 0;       // bytes those copies moved
  uint64_t memsets = 0;
  uint64_t descriptors_created = 0;  // forward-mode descriptor objects created
  // Executor-side reuse (the mirror of the descriptor method): objects such as compiled
  // primitives or plans made for a distinct set of launch settings, and launches that reused one.
  uint64_t primitives_created = 0;
  uint64_t primitives_reused = 0;
};

// The executor's own state of one virtual stream (a GPU stream and its staging buffers). Owned by
// the session's stream; destroyed after the stream has drained.
class ExecutorStream {
 public:
  virtual ~ExecutorStream() = default;
};

// The executor's own object for one forward-mode descriptor (a driver descriptor on a GPU). The
// session keeps the settings last set; executors may subclass to hold more.
class ExecutorDescriptor {
 public:
  explicit ExecutorDescriptor(uint8_t kind) : kind_(kind) {}
  virtual ~ExecutorDescriptor() = default;
  uint8_t kind() const { return kind_; }
  const std::vector<uint8_t>& settings() const { return settings_; }
  void set_settings(absl::Span<const uint8_t> settings) {
    settings_.assign(settings.begin(), settings.end());
  }

 private:
  const uint8_t kind_;
  std::vector<uint8_t> settings_;
};

// One validated copy: both ends resolved. Exactly one of the addresses on each end is set:
// device ends are addresses in the executor's address space (pinned by the session), host ends
// are the client's host memory (in-process) or a server's receive/reply buffer.
struct CopyRequest {
  CommandKind kind = CommandKind::kMemcpyHtoD;  // kMemcpyHtoD, kMemcpyDtoH, kMemcpyDtoD, kMemcpyNow
  uint32_t device = 0;
  const uint8_t* source = nullptr;
  uint8_t* destination = nullptr;
  bool source_on_device = false;
  bool destination_on_device = false;
  uint64_t size = 0;  // > 0
};

// One validated memset of device memory.
struct MemsetRequest {
  uint32_t device = 0;
  uint8_t* destination = nullptr;  // in the executor's address space, pinned
  uint64_t size = 0;               // > 0
  uint32_t pattern = 0;
  uint8_t pattern_bytes = 1;       // 1 or 4 (size is then a multiple of 4)
};

// One kernel launch: the kernel id (protocol/kernel_ids.h) and the launch as every executor
// sees it (launch/launch_view.h): its buffers resolved to the executor's address space (null
// for empty ones), its raw parameters and the settings of its descriptors (the session layer
// has parsed the descriptor section, forward-mode references already replaced by the settings
// they name). Parameters and settings are the tenant's bytes: the launch readers of
// backend/launch/ validate them before a kernel computes.
struct LaunchRequest {
  uint32_t device = 0;
  uint32_t kernel_id = 0;
  LaunchView launch;
};

class BackingExecutor {
 public:
  virtual ~BackingExecutor() = default;

  // --- Identity and devices -------------------------------------------------------------------
  // The name it is registered under ("cpu").
  virtual absl::string_view name() const = 0;
  virtual int device_count() const = 0;
  // What sessions of this executor may hold (ExecutorOptions::session_limits, validated).
  virtual SessionLimits session_limits() const = 0;
  // The name of kernel `kernel_id`, empty if the executor has no such kernel. The session asks
  // on every launch (is the id known?), so it must not allocate; the view lives as long as the
  // executor.
  virtual absl::string_view KernelName(uint32_t kernel_id) const = 0;
  virtual ExecutorStats stats() const = 0;

  // --- Memory -----------------------------------------------------------------------------------
  // The arena of `device` (< device_count()): allocation, ownership, pins and accounting over
  // the executor's memory. Thread-safe.
  virtual DeviceArena& arena(uint32_t device) = 0;
  // The arena that the device address `address` belongs to, or null if it names no device of
  // this executor. Thread-safe.
  virtual DeviceArena* ArenaForAddress(uint64_t address) = 0;
  // Device memory accounting of `device` (< device_count()), over all sessions. Thread-safe.
  MemoryInfo DeviceMemoryInfo(uint32_t device);

  // --- Streams ----------------------------------------------------------------------------------
  // The executor's state for a new virtual stream on `device` (< device_count()); may be null if
  // it needs none. ResourceExhausted if the device refuses one.
  virtual absl::StatusOr<std::unique_ptr<ExecutorStream>> CreateStream(uint32_t device) = 0;
  // Stream-ordered operations. Called on the virtual stream's worker thread, in stream order,
  // with memory the session validated and pinned; `tenant` is the session's id (for fair
  // scheduling); `stream` is what CreateStream returned, or null for a copy that is not
  // stream-ordered (kMemcpyNow, on the caller's thread). An executor whose device runs
  // asynchronously may return before the device has finished, provided it moves `pins` out and
  // keeps them until then, and finishes everything queued before SynchronizeStream returns.
  virtual absl::Status Copy(ExecutorStream* stream, uint64_t tenant, const CopyRequest& request,
                            PinnedRanges& pins) = 0;
  virtual absl::Status Memset(ExecutorStream* stream, uint64_t tenant,
                              const MemsetRequest& request, PinnedRanges& pins) = 0;
  virtual absl::Status Launch(ExecutorStream* stream, uint64_t tenant,
                              const LaunchRequest& request, PinnedRanges& pins) = 0;
  // Waits until the device has finished what the operations above queued on `stream`, and
  // returns the first device error. Called on the stream's worker thread before an event or
  // notification is signalled. Default: nothing to wait for (operations complete on return).
  virtual absl::Status SynchronizeStream(ExecutorStream* stream);

  // --- Forward-mode descriptors -----------------------------------------------------------------
  // A descriptor object of `kind` (1..kNumDescriptorKinds, checked by the session); the default
  // keeps only its settings, as the CPU executor needs. Thread-safe.
  virtual absl::StatusOr<std::unique_ptr<ExecutorDescriptor>> CreateDescriptor(uint8_t kind);
  // Applies `settings` (validated size) to `descriptor`. Default: stores them.
  virtual absl::Status SetDescriptor(ExecutorDescriptor& descriptor,
                                     absl::Span<const uint8_t> settings);

  // --- Sessions ---------------------------------------------------------------------------------
  // Opens a session for one client (the executor-independent ClientSession over this executor);
  // `sink` (may be null) receives its notifications and must outlive the session. `quota_bytes`
  // > 0 caps the device memory the session may hold at once (summed over devices); allocations
  // beyond it fail with ResourceExhausted. `shared_quota` (may be null) is a budget the session
  // shares with others (a tenant's connections), checked as well. Every session must be
  // destroyed before the executor. Thread-safe.
  // `stream_threads`, if not null, replaces session_limits().stream_threads for this session.
  std::unique_ptr<ExecutorSession> OpenSession(
      CompletionSink* sink, uint64_t quota_bytes = 0,
      std::shared_ptr<SharedQuota> shared_quota = nullptr,
      std::shared_ptr<StreamThreadBudget> stream_threads = nullptr);

 protected:
  // For executors' stats(): counts descriptors created by the default CreateDescriptor.
  std::atomic<uint64_t> descriptors_created_{0};

 private:
  std::atomic<uint64_t> next_session_id_{1};
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_BACKING_EXECUTOR_H_
