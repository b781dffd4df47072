// Routes the backing executor's notifications (a stream reached a kNotify or kRecordEvent
// command) to what the client registered for them: event completion, timers, host callbacks.
// Handlers run inline on the notifying thread (in-process: the stream's worker, so a host
// callback occupies its stream as on a real GPU), or on the hub's own callback thread, in the
// order notified (remote transports: notifications arrive on the connection's reader thread,
// which must never block on a callback).
#ifndef VGPU_CLIENT_NOTIFICATION_HUB_H_
#define VGPU_CLIENT_NOTIFICATION_HUB_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "plugin/backend/executor_session.h"

namespace vgpu {

class NotificationHub final : public CompletionSink {
 public:
  using Handler = std::function<void(const absl::Status& stream_status)>;

  NotificationHub();
  // Runs the callbacks already notified, then stops the callback thread.
  ~NotificationHub() override;

  // Registers `handler` for a fresh token. `on_callback_thread`: run it on the hub's callback
  // thread (host callbacks); otherwise run it inline on the notifying thread (it must be quick
  // and must not block). Each token fires once. Thread-safe.
  uint64_t Register(Handler handler, bool on_callback_thread);

  // Drops a token that will never be notified (its command could not be sent).
  void Unregister(uint64_t token);

  void OnNotify(uint64_t token, const absl::Status& stream_status) override;

  // True when called from the hub's callback thread.
  bool OnCallbackThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  struct Entry {
    Handler handler;
    bool on_callback_thread;
  };
  void CallbackLoop();

  std::mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_token_ ABSL_GUARDED_BY(mu_) = 1;

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<std::pair<Handler, absl::Status>> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::thread thread_;
};

}  // namespace vgpu

#endif  // VGPU_CLIENT_NOTIFICATION_HUB_H_
