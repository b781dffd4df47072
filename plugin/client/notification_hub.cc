// NotificationHub (see notification_hub.h).
#include "plugin/client/notification_hub.h"

#include "plugin/common/log.h"
#include "plugin/common/thread_name.h"

namespace vgpu {

NotificationHub::NotificationHub() {
  thread_ = std::thread([this] {
    NameCurrentThread("vgpu-callbacks");
    CallbackLoop();
  });
}

NotificationHub::~NotificationHub() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_one();
  thread_.join();
}

uint64_t NotificationHub::Register(Handler handler, bool on_callback_thread) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t token = next_token_++;
  pending_.emplace(token, Entry{std::move(handler), on_callback_thread});
  return token;
}

void NotificationHub::Unregister(uint64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.erase(token);
}

void NotificationHub::OnNotify(uint64_t token, const absl::Status& stream_status) {
  Entry entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(token);
    if (it == pending_.end()) {
      Log(LogLevel::kWarning, "notification for an unknown token (ignored)");
      return;
    }
    entry = std::move(it->second);
    pending_.erase(it);
  }
  if (!entry.on_callback_thread) {
    entry.handler(stream_status);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    queue_.emplace_back(std::move(entry.handler), stream_status);
  }
  queue_cv_.notify_one();
}

void NotificationHub::CallbackLoop() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  for (;;) {
    queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;
    auto [handler, status] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    handler(status);
    lock.lock();
  }
}

}  // namespace vgpu
