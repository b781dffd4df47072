// Tests of the client runtime's NotificationHub (client/notification_hub.h): inline handlers run
// on the notifying thread, callback-thread handlers run in order on the hub's own thread without
// stalling the notifier, each token fires once, and Unregister drops a token.
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/client/notification_hub.h"
#include "test_sync.h"

namespace vgpu {
namespace {

using vgpu_test::Gate;
using vgpu_test::OrderLog;

TEST(NotificationHub, InlineHandlerRunsOnTheNotifyingThreadWithTheStatus) {
  NotificationHub hub;
  std::thread::id ran_on;
  absl::Status seen;
  bool on_callback_thread = true;
  const uint64_t token = hub.Register(
      [&](const absl::Status& status) {
        ran_on = std::this_thread::get_id();
        seen = status;
        on_callback_thread = hub.OnCallbackThread();
      },
      /*on_callback_thread=*/false);
  hub.OnNotify(token, absl::DataLossError("stream broke"));
  // Inline: it has run by the time OnNotify returns, on this thread.
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(seen.code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(on_callback_thread);
  EXPECT_FALSE(hub.OnCallbackThread());
}

TEST(NotificationHub, CallbackThreadHandlersRunInNotificationOrder) {
  NotificationHub hub;
  OrderLog log;
  Gate all_done;
  std::atomic<bool> every_one_on_callback_thread{true};
  constexpr int kHandlers = 100;
  std::vector<uint64_t> tokens;
  for (int i = 0; i < kHandlers; ++i) {
    tokens.push_back(hub.Register(
        [&, i](const absl::Status&) {
          if (!hub.OnCallbackThread()) every_one_on_callback_thread = false;
          log.Append(i);
          if (i == kHandlers - 1) all_done.Open();
        },
        /*on_callback_thread=*/true));
  }
  // Notify in an order different from registration: the notification order is what counts.
  std::vector<int> order;
  for (int i = 0; i < kHandlers; i += 2) order.push_back(i);
  for (int i = 1; i < kHandlers; i += 2) order.push_back(i);
  std::vector<int64_t> expected;
  for (int i : order) {
    hub.OnNotify(tokens[i], absl::OkStatus());
    expected.push_back(i);
  }
  all_done.Wait();  // handler 99 is notified last, so it runs last
  EXPECT_EQ(log.values(), expected);
  EXPECT_TRUE(every_one_on_callback_thread);
}

TEST(NotificationHub, BlockingCallbackDoesNotStallTheNotifier) {
  NotificationHub hub;
  Gate release;
  Gate first_running;
  Gate second_ran;
  const uint64_t blocking = hub.Register(
      [&](const absl::Status&) {
        first_running.Open();
        release.Wait();
      },
      /*on_callback_thread=*/true);
  const uint64_t queued = hub.Register([&](const absl::Status&) { second_ran.Open(); },
                                       /*on_callback_thread=*/true);
  bool inline_ran = false;
  const uint64_t inline_token =
      hub.Register([&](const absl::Status&) { inline_ran = true; }, /*on_callback_thread=*/false);

  hub.OnNotify(blocking, absl::OkStatus());
  first_running.Wait();
  // The callback thread is held; notifying (from a backend stream, say) still returns at once and
  // inline handlers still run.
  hub.OnNotify(queued, absl::OkStatus());
  hub.OnNotify(inline_token, absl::OkStatus());
  EXPECT_TRUE(inline_ran);
  EXPECT_FALSE(second_ran.is_open());  // queued behind the held callback
  release.Open();
  second_ran.Wait();
}

TEST(NotificationHub, EachTokenFiresOnce) {
  NotificationHub hub;
  int calls = 0;
  const uint64_t token = hub.Register([&](const absl::Status&) { ++calls; }, false);
  hub.OnNotify(token, absl::OkStatus());
  hub.OnNotify(token, absl::OkStatus());  // unknown by now: ignored
  EXPECT_EQ(calls, 1);
}

TEST(NotificationHub, TokensAreDistinct) {
  NotificationHub hub;
  const uint64_t a = hub.Register([](const absl::Status&) {}, false);
  const uint64_t b = hub.Register([](const absl::Status&) {}, true);
  const uint64_t c = hub.Register([](const absl::Status&) {}, false);
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  EXPECT_NE(a, c);
  EXPECT_NE(a, 0u);
}

TEST(NotificationHub, UnregisterDropsAToken) {
  NotificationHub hub;
  int inline_calls = 0;
  std::atomic<int> thread_calls{0};
  const uint64_t inline_token = hub.Register([&](const absl::Status&) { ++inline_calls; }, false);
  const uint64_t thread_token = hub.Register([&](const absl::Status&) { ++thread_calls; }, true);
  hub.Unregister(inline_token);
  hub.Unregister(thread_token);
  hub.OnNotify(inline_token, absl::OkStatus());
  hub.OnNotify(thread_token, absl::OkStatus());
  // A marker queued after them: once it ran, a wrongly queued handler would have run too.
  Gate marker_ran;
  hub.OnNotify(hub.Register([&](const absl::Status&) { marker_ran.Open(); }, true),
               absl::OkStatus());
  marker_ran.Wait();
  EXPECT_EQ(inline_calls, 0);
  EXPECT_EQ(thread_calls.load(), 0);
}

TEST(NotificationHub, DestructionRunsCallbacksAlreadyNotified) {
  std::atomic<int> calls{0};
  constexpr int kCallbacks = 64;
  {
    NotificationHub hub;
    for (int i = 0; i < kCallbacks; ++i) {
      hub.OnNotify(hub.Register([&](const absl::Status&) { ++calls; }, true), absl::OkStatus());
    }
  }  // whatever had not run yet runs before the hub is gone
  EXPECT_EQ(calls.load(), kCallbacks);
}

}  // namespace
}  // namespace vgpu
