// One virtual stream of a client session, whatever the executor: a FIFO of commands run in order
// by one worker thread, asynchronously to whoever enqueues them (the worker calls the executor's
// stream-ordered operations; an executor with queues of its own, a GPU's, is fed from it). The
// stream remembers its first error until a synchronisation reports it; meanwhile work that would
// touch memory (copies, memsets, launches) is skipped, while notifications and event markers
// still run so that nobody waiting on the stream hangs. Each queued command carries the pins of
// the device memory it uses (taken when it was queued, see DeviceArena::Pin); they are released
// as soon as it has run or been skipped, before it counts as completed (an executor whose device
// runs asynchronously takes them over to keep the memory until its device work is done).
#ifndef VGPU_BACKEND_STREAM_QUEUE_H_
#define VGPU_BACKEND_STREAM_QUEUE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "plugin/backend/device_arena.h"
#include "plugin/protocol/command.h"

namespace vgpu {

class StreamQueue {
 public:
  // One queued command with what it needs to run: the pins of its device ranges (in the order
  // the session expects) and, if it was refused when queued, the reason.
  struct Work {
    Command command;
    PinnedRanges pins;
    // Not OK: the command is not run; it fails with this error in its turn (so the error
    // surfaces at the stream's next synchronisation, in order, like an execution error).
    absl::Status rejected;
    // While a profile is taken: when it was queued (activity::NowNs(); 0 otherwise).
    int64_t queued_ns = 0;
  };

  // Runs one command on the worker thread. `stream_status` is the stream's first error so far.
  using Runner = std::function<absl::Status(Work& work, const absl::Status& stream_status)>;

  StreamQueue(uint64_t id, uint32_t device, Runner runner);
  // Drains every enqueued command, then stops the worker.
  ~StreamQueue();
  StreamQueue(const StreamQueue&) = delete;
  StreamQueue& operator=(const StreamQueue&) = delete;

  // Queues `command`; returns its position (1 for the first command ever queued). Never blocks
  // on execution. Thread-safe; commands queued from one thread run in the order queued.
  uint64_t Enqueue(Command command);
  uint64_t Enqueue(Work work);

  // As Enqueue, except that when the stream is idle (nothing queued, nothing running) `work`
  // runs at once on the calling thread, which it blocks until it has run; stream order is kept
  // (the worker starts nothing meanwhile). For small commands, where waking the worker costs
  // more than running them. Thread-safe.
  uint64_t RunInlineOrEnqueue(Work work);

  // Abandons the stream (its session is ending): commands not yet started are skipped (they
  // fail with Cancelled; notifications are not sent), and every wait on the stream's progress
  // (WaitUntilCompleted*) returns at once, so nothing waits on work a client queued. The
  // command running now, if any, runs to its end. Irreversible. Thread-safe, non-blocking.
  void Cancel();
  bool cancelled() const;

  // Position of the last queued command (0 if none).
  uint64_t enqueued() const;
  // Commands queued and not yet run (or skipped).
  uint64_t pending() const;

  // Blocks until every command up to `position` has run, or the stream is cancelled.
  void WaitUntilCompleted(uint64_t position) const;
  // As WaitUntilCompleted, for at most `timeout`; returns whether `position` was reached.
  bool WaitUntilCompletedFor(uint64_t position, std::chrono::milliseconds timeout) const;

  // How many times a completion woke the threads waiting for the stream's progress: once per
  // completion that reached a position waited for, not once per command (for tests).
  uint64_t progress_signals() const;
  // Threads blocked in WaitUntilCompleted* now (for tests).
  size_t waiters() const;

  // True while the calling thread is running one of this queue's commands (on the worker, or
  // inline): a wait for the queue's later work from there would never end. Non-blocking.
  bool RunningOnCallingThread() const;

  // True if every command up to `position` has run.
  bool IsCompleted(uint64_t position) const;

  // The first error (OK if none). Non-blocking.
  absl::Status status() const;

  // The first error, which is then cleared: a synchronisation reports an error once, and the
  // stream runs later work normally again (a kernel's error is an op failure, not a device
  // failure). Non-blocking.
  absl::Status TakeStatus();

  uint64_t id() const { return id_; }
  uint32_t device() const { return device_; }

 private:
  // A FIFO of Work in a circular buffer that grows by doubling: pushing and popping allocate
  // nothing once it is as long as the stream's usual queue. A buffer grown beyond kKeptSlots
  // is freed when it drains. Not thread-safe (StreamQueue guards it with mu_).
  class WorkRing {
   public:
    bool empty() const { return count_ == 0; }
    Work& front() { return slots_[head_]; }
    void push_back(Work&& work);
    void pop_front();

   private:
    static constexpr size_t kKeptSlots = 256;  // ~130 KiB
    std::vector<Work> slots_;  // size a power of two, or 0
    size_t head_ = 0;
    size_t count_ = 0;
  };

  void WorkerLoop();
  // Runs (or skips) one command with mu_ released meanwhile (`lock` holds it on entry and on
  // return), releases its pins, records its result and counts it completed.
  void RunLocked(std::unique_lock<std::mutex>& lock, Work& work);

  const uint64_t id_;
  const uint32_t device_;
  const Runner runner_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  mutable std::condition_variable progress_cv_;
  // The positions threads wait for in WaitUntilCompleted*, one entry per waiting thread, each
  // ahead of completed_. progress_cv_ is signalled when the first of them is reached (its
  // entries leave then) or on cancellation, not after every command: a stream waiting for
  // another's event is not woken by each of its kernels.
  mutable std::multiset<uint64_t> waits_;
  uint64_t progress_signals_ = 0;
  // Queued work, oldest first, in slots reused from command to command: a std::deque would
  // allocate a node per command on the enqueuing thread and free it on the worker, and glibc's
  // allocator makes that cross-thread pair contend for its arena lock.
  WorkRing queue_;
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  absl::Status status_;
  bool stopping_ = false;
  bool cancelled_ = false;
  bool running_ = false;  // a command is running (on the worker or inline)
  std::thread worker_;
};

}  // namespace vgpu

#endif  // VGPU_BACKEND_STREAM_QUEUE_H_
