// A session's stream worker (see stream_queue.h).
#include "plugin/backend/stream_queue.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "plugin/common/thread_name.h"

namespace vgpu {
namespace {

// Commands that still run after the stream has failed: they carry no data and someone may be
// waiting for them.
bool RunsAfterError(CommandKind kind) {
  return kind == CommandKind::kNotify || kind == CommandKind::kRecordEvent ||
         kind == CommandKind::kWaitEvent || kind == CommandKind::kDestroyEvent;
}

}  // namespace

StreamQueue::StreamQueue(uint64_t id, uint32_t device, Runner runner)
    : id_(id), device_(device), runner_(std::move(runner)) {
  worker_ = std::thread([this] {
    NameCurrentThread("vgpu-stream");
    WorkerLoop();
  });
}

StreamQueue::~StreamQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_one();
  worker_.join();
}

uint64_t StreamQueue::Enqueue(Command command) {
  Work work;
  work.command = std::move(command);
  return Enqueue(std::move(work));
}

uint64_t StreamQueue::Enqueue(Work work) {
  uint64_t position;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
    position = ++enqueued_;
  }
  work_cv_.notify_one();
  return position;
}

uint64_t StreamQueue::enqueued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return enqueued_;
}

uint64_t StreamQueue::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return enqueued_ - completed_;
}

void StreamQueue::WaitUntilCompleted(uint64_t position) const {
  std::unique_lock<std::mutex> lock(mu_);
  if (completed_ >= position || cancelled_) return;
  const auto entry = waits_.insert(position);
  progress_cv_.wait(lock, [&] { return completed_ >= position || cancelled_; });
  if (completed_ < position) waits_.erase(entry);  // reached: RunLocked erased it
}

bool StreamQueue::WaitUntilCompletedFor(uint64_t position,
                                      std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  if (completed_ < position && !cancelled_) {
    const auto entry = waits_.insert(position);
    progress_cv_.wait_for(lock, timeout, [&] { return completed_ >= position || cancelled_; });
    if (completed_ < position) waits_.erase(entry);
  }
  return completed_ >= position;
}

size_t StreamQueue::waiters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waits_.size();
}

uint64_t StreamQueue::progress_signals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return progress_signals_;
}

void StreamQueue::Cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  progress_cv_.notify_all();
  work_cv_.notify_one();
}

bool StreamQueue::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

bool StreamQueue::IsCompleted(uint64_t position) const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ >= position;
}

absl::Status StreamQueue::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

absl::Status StreamQueue::TakeStatus() {
  std::lock_guard<std::mutex> lock(mu_);
  absl::Status status = std::move(status_);
  status_ = absl::OkStatus();
  return status;
}

uint64_t StreamQueue::RunInlineOrEnqueue(Work work) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!queue_.empty() || running_ || stopping_) {
    lock.unlock();
    return Enqueue(std::move(work));
  }
  const uint64_t position = ++enqueued_;
  RunLocked(lock, work);
  // Work queued by other threads meanwhile, or a stop, waits for the worker.
  const bool wake_worker = !queue_.empty() || stopping_;
  lock.unlock();
  if (wake_worker) work_cv_.notify_one();
  return position;
}

namespace {
// The queue whose command the calling thread is running (its worker, or a thread running one
// inline), if any.
thread_local const StreamQueue* running_on_this_thread = nullptr;
}  // namespace

bool StreamQueue::RunningOnCallingThread() const { return running_on_this_thread == this; }

void StreamQueue::RunLocked(std::unique_lock<std::mutex>& lock, Work& work) {
  running_ = true;
  const absl::Status stream_status = status_;
  const CommandKind kind = work.command.kind;
  const bool cancelled = cancelled_;
  lock.unlock();

  absl::Status result;
  if (cancelled) {
    result = absl::CancelledError("the session ended");
  } else if (!work.rejected.ok()) {
    result = std::move(work.rejected);
  } else if (stream_status.ok() || RunsAfterError(kind)) {
    const StreamQueue* const outer = running_on_this_thread;
    running_on_this_thread = this;
    result = runner_(work, stream_status);
    running_on_this_thread = outer;
  }
  work.pins.clear();  // the memory it used may be reclaimed now (a free waiting for it)
  work.command = Command();  // its host data and parameters are freed outside the lock

  lock.lock();
  if (!result.ok() && status_.ok()) {
    status_ = absl::Status(result.code(), absl::StrCat(CommandKindName(kind), " on stream ", id_,
                                                       " failed: ", result.message()));
  }
  running_ = false;
  ++completed_;
  // Wake the waiters only when one of them is reached; its entry leaves waits_ now, so that
  // every entry stays ahead of completed_. They are woken with mu_ released, or each would wake
  // only to block on it.
  if (!waits_.empty() && *waits_.begin() <= completed_) {
    waits_.erase(waits_.begin(), waits_.upper_bound(completed_));
    ++progress_signals_;
    lock.unlock();
    progress_cv_.notify_all();
    lock.lock();
  }
}

void StreamQueue::WorkRing::push_back(Work&& work) {
  if (count_ == slots_.size()) {
    std::vector<Work> grown(slots_.empty() ? 16 : 2 * slots_.size());
    for (size_t i = 0; i < count_; ++i) {
      grown[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    }
    slots_ = std::move(grown);
    head_ = 0;
  }
  slots_[(head_ + count_) & (slots_.size() - 1)] = std::move(work);
  ++count_;
}

void StreamQueue::WorkRing::pop_front() {
  head_ = (head_ + 1) & (slots_.size() - 1);
  --count_;
  // Drained after a burst (a tenant that queued thousands of commands): give the slots back.
  if (count_ == 0 && slots_.size() > kKeptSlots) {
    slots_ = std::vector<Work>();
    head_ = 0;
  }
}

void StreamQueue::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // An inline command may be running: wait for it, so that the stream keeps its order.
    work_cv_.wait(lock, [&] { return !running_ && (stopping_ || !queue_.empty()); });
    if (queue_.empty()) return;  // stopping, and drained
    Work work = std::move(queue_.front());
    queue_.pop_front();
    RunLocked(lock, work);
  }
}

}  // namespace vgpu
