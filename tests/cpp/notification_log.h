// A CompletionSink for the tests that talk to a `vgpu server` over sockets: it records the stream
// status each notification reports, by token, and lets a test wait for one (bounded).
#ifndef VGPU_TESTS_CPP_NOTIFICATION_LOG_H_
#define VGPU_TESTS_CPP_NOTIFICATION_LOG_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/executor_session.h"

namespace vgpu_test {

// Notifications of one client, by token. Thread-safe.
class NotificationLog : public vgpu::CompletionSink {
 public:
  void OnNotify(uint64_t token, const absl::Status& status) override {
    std::lock_guard<std::mutex> lock(mu_);
    statuses_[token] = status;
    cv_.notify_all();
  }
  // The status the notification of `token` reported (then forgotten), or DeadlineExceeded if it
  // did not come within `bound`.
  absl::Status WaitFor(uint64_t token,
                       std::chrono::steady_clock::duration bound = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, bound, [&] { return statuses_.contains(token); })) {
      return absl::DeadlineExceededError(absl::StrCat("notification ", token, " never came"));
    }
    absl::Status status = statuses_[token];
    statuses_.erase(token);
    return status;
  }
  // Drops the notification of `token` if it came.
  void Forget(uint64_t token) {
    std::lock_guard<std::mutex> lock(mu_);
    statuses_.erase(token);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  absl::flat_hash_map<uint64_t, absl::Status> statuses_;
};

}  // namespace vgpu_test

#endif  // VGPU_TESTS_CPP_NOTIFICATION_LOG_H_
