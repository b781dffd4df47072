// The CPU backing executor's stream worker (see cpu_stream.h).
#include "plugin/backend/cpu/cpu_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace vgpu {
namespace {

// Commands that still run after the stream has failed: they carry no data and someone may be
// waiting for them.
bool RunsAfterError(CommandKind kind) {
  return kind == CommandKind::kNotify || kind == CommandKind::kRecordEvent ||
         kind == CommandKind::kWaitEvent || kind == CommandKind::kDestroyEvent;
}

}  // namespace

CpuStream::CpuStream(uint64_t id, uint32_t device, Executor executor)
    : id_(id), device_(device), executor_(std::move(executor)) {
  worker_ = std::thread([this] { WorkerLoop(); });
}

CpuStream::~CpuStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_one();
  worker_.join();
}

uint64_t CpuStream::Enqueue(Command command) {
  uint64_t position;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(command));
    position = ++enqueued_;
  }
  work_cv_.notify_one();
  return position;
}

uint64_t CpuStream::enqueued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return enqueued_;
}

void CpuStream::WaitUntilCompleted(uint64_t position) const {
  std::unique_lock<std::mutex> lock(mu_);
  progress_cv_.wait(lock, [&] { return completed_ >= position; });
}

bool CpuStream::IsCompleted(uint64_t position) const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ >= position;
}

absl::Status CpuStream::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

absl::Status CpuStream::TakeStatus() {
  std::lock_guard<std::mutex> lock(mu_);
  absl::Status status = std::move(status_);
  status_ = absl::OkStatus();
  return status;
}

void CpuStream::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and drained
    Command command = std::move(queue_.front());
    queue_.pop_front();
    absl::Status stream_status = status_;
    lock.unlock();

    absl::Status result;
    if (stream_status.ok() || RunsAfterError(command.kind)) {
      result = executor_(command, stream_status);
    }

    lock.lock();
    if (!result.ok() && status_.ok()) {
      status_ = absl::Status(result.code(),
                             absl::StrCat(CommandKindName(command.kind), " on stream ", id_,
                                          " failed: ", result.message()));
    }
    ++completed_;
    progress_cv_.notify_all();
  }
}

}  // namespace vgpu
