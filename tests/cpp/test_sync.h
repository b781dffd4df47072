// Synchronisation helpers for the tests: a one-shot Gate (a latch of count one) that threads can
// wait on, a small thread-safe log of what ran in which order, and RunOnThreads for a body run
// on several threads at once. Tests synchronise with these, never with sleeps.
#ifndef VGPU_TESTS_CPP_TEST_SYNC_H_
#define VGPU_TESTS_CPP_TEST_SYNC_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace vgpu_test {

// Closed until Open(); Wait() blocks while it is closed. Thread-safe; opening twice is harmless.
class Gate {
 public:
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }
  // Waits at most `timeout`; true if the gate opened. Used only to detect a behaviour that must
  // NOT happen (a test passes by waiting the full time), never to order work.
  bool WaitFor(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return open_; });
  }
  bool is_open() {
    std::lock_guard<std::mutex> lock(mu_);
    return open_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// An append-only sequence of integers, written from any thread.
class OrderLog {
 public:
  void Append(int64_t value) {
    std::lock_guard<std::mutex> lock(mu_);
    values_.push_back(value);
  }
  std::vector<int64_t> values() {
    std::lock_guard<std::mutex> lock(mu_);
    return values_;
  }

 private:
  std::mutex mu_;
  std::vector<int64_t> values_;
};

// Runs `body(t)` on `threads` threads at once, t = 0 .. threads - 1, and returns when every one
// has returned.
template <typename Body>
void RunOnThreads(int threads, Body body) {
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) running.emplace_back([&body, t] { body(t); });
  for (std::thread& thread : running) thread.join();
}

}  // namespace vgpu_test

#endif  // VGPU_TESTS_CPP_TEST_SYNC_H_
