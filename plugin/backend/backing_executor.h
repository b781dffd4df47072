// The interface every backing executor (the "physical GPU") implements, and the options all of
// them understand. An executor owns the devices' memory and compute resources and opens one
// ExecutorSession per client (the in-process plugin, or each connection of a `vgpu server`);
// everything a client does goes through its session (backend/executor_session.h). Executors are
// created by name through the registry (backend/executor_registry.h); docs/architecture.md,
// "Adding an executor", says how to add one.
#ifndef VGPU_BACKEND_BACKING_EXECUTOR_H_
#define VGPU_BACKEND_BACKING_EXECUTOR_H_

#include <chrono>
#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"
#include "plugin/backend/executor_session.h"
#include "plugin/protocol/command.h"

namespace vgpu {

// What one session (client) may hold at once. Exceeding a limit is a ResourceExhausted error for
// that client only.
struct SessionLimits {
  static constexpr int kDefaultMaxStreams = 256;
  static constexpr int kDefaultMaxEvents = 1 << 16;
  static constexpr int kDefaultMaxDescriptors = 1 << 16;
  static constexpr std::chrono::milliseconds kDefaultPendingFreeWait{10'000};

  int max_streams = kDefaultMaxStreams;          // on the CPU executor each is a worker thread
  int max_events = kDefaultMaxEvents;            // recorded, not yet destroyed events
  int max_descriptors = kDefaultMaxDescriptors;  // forward-mode descriptor objects
  // An allocation that fails for lack of memory while the client has frees waiting for its own
  // queued work waits at most this long for that work, then retries once.
  std::chrono::milliseconds pending_free_wait = kDefaultPendingFreeWait;
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

class BackingExecutor {
 public:
  virtual ~BackingExecutor() = default;

  // The name it is registered under ("cpu").
  virtual absl::string_view name() const = 0;
  virtual int device_count() const = 0;
  // Device memory accounting of `device` (< device_count()), over all sessions. Thread-safe.
  virtual MemoryInfo DeviceMemoryInfo(uint32_t device) const = 0;

  // Opens a session for one client; `sink` (may be null) receives its notifications and must
  // outlive the session. `quota_bytes` > 0 caps the device memory the session may hold at once
  // (summed over devices); allocations beyond it fail with ResourceExhausted. Every session must
  // be destroyed before the executor. Thread-safe.
  virtual std::unique_ptr<ExecutorSession> OpenSession(CompletionSink* sink,
                                                       uint64_t quota_bytes = 0) = 0;
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_BACKING_EXECUTOR_H_
