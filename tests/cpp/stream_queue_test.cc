// Tests of one session stream (backend/stream_queue.h) with a scripted runner:
// FIFO order, asynchronous enqueue, completion positions, the sticky first error, draining on
// destruction, and running a command inline on the caller's thread only while the stream is idle.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/backend/stream_queue.h"
#include "test_sync.h"

namespace vgpu {
namespace {

using vgpu_test::Gate;
using vgpu_test::OrderLog;

Command MakeCommand(CommandKind kind, uint64_t tag) {
  Command command;
  command.kind = kind;
  command.object = tag;
  return command;
}

// A runner that logs each command's tag (Command::object). With `hold_first`, the command tagged
// 0 opens `running`, then waits for `release`, so that a test acts while that command runs.
struct LoggingRunner {
  explicit LoggingRunner(bool hold_first = false) : hold_first(hold_first) {}

  StreamQueue::Runner Runner() {
    return [this](StreamQueue::Work& w, const absl::Status&) {
      if (hold_first && w.command.object == 0) {
        running.Open();
        release.Wait();
      }
      log.Append(static_cast<int64_t>(w.command.object));
      return absl::OkStatus();
    };
  }

  const bool hold_first;
  Gate running;
  Gate release;
  OrderLog log;
};

TEST(StreamQueue, RunsCommandsInFifoOrder) {
  LoggingRunner runner;
  StreamQueue stream(7, 0, runner.Runner());
  constexpr int kCommands = 200;
  for (int i = 0; i < kCommands; ++i) stream.Enqueue(MakeCommand(CommandKind::kMemset, i));
  stream.WaitUntilCompleted(kCommands);
  std::vector<int64_t> expected;
  for (int i = 0; i < kCommands; ++i) expected.push_back(i);
  EXPECT_EQ(runner.log.values(), expected);
}

TEST(StreamQueue, CommandsFromSeveralThreadsKeepEachThreadsOrder) {
  LoggingRunner runner;
  StreamQueue stream(7, 0, runner.Runner());
  constexpr int kThreads = 4;
  constexpr int kPerThread = 100;
  vgpu_test::RunOnThreads(kThreads, [&](int t) {
    for (int i = 0; i < kPerThread; ++i) {
      stream.Enqueue(MakeCommand(CommandKind::kLaunch, t * 1000 + i));
    }
  });
  stream.WaitUntilCompleted(stream.enqueued());
  std::vector<int64_t> values = runner.log.values();
  ASSERT_EQ(values.size(), static_cast<size_t>(kThreads * kPerThread));
  std::vector<int64_t> next(kThreads, 0);
  for (int64_t v : values) {
    const int t = static_cast<int>(v / 1000);
    EXPECT_EQ(v % 1000, next[t]) << "thread " << t << " out of order";
    next[t] = v % 1000 + 1;
  }
}

TEST(StreamQueue, EnqueueReturnsPositionsAndNeverWaitsForExecution) {
  Gate release;
  Gate first_running;
  StreamQueue stream(7, 0, [&](StreamQueue::Work& w, const absl::Status&) {
    if (w.command.object == 0) {
      first_running.Open();
      release.Wait();  // the worker is held inside the first command
    }
    return absl::OkStatus();
  });
  EXPECT_EQ(stream.enqueued(), 0u);
  EXPECT_EQ(stream.Enqueue(MakeCommand(CommandKind::kLaunch, 0)), 1u);
  first_running.Wait();
  // The worker is busy, yet enqueueing returns at once with increasing positions.
  for (uint64_t i = 1; i <= 10; ++i) {
    EXPECT_EQ(stream.Enqueue(MakeCommand(CommandKind::kLaunch, i)), i + 1);
  }
  EXPECT_EQ(stream.enqueued(), 11u);
  EXPECT_FALSE(stream.IsCompleted(1));
  EXPECT_FALSE(stream.IsCompleted(11));
  release.Open();
  stream.WaitUntilCompleted(11);
  EXPECT_TRUE(stream.IsCompleted(1));
  EXPECT_TRUE(stream.IsCompleted(11));
  EXPECT_FALSE(stream.IsCompleted(12));
}

TEST(StreamQueue, WaitUntilCompletedWaitsOnlyForItsPosition) {
  Gate release;
  StreamQueue stream(7, 0, [&](StreamQueue::Work& w, const absl::Status&) {
    if (w.command.object == 2) release.Wait();
    return absl::OkStatus();
  });
  stream.Enqueue(MakeCommand(CommandKind::kLaunch, 1));
  stream.Enqueue(MakeCommand(CommandKind::kLaunch, 2));
  stream.WaitUntilCompleted(1);  // returns although command 2 is held
  EXPECT_TRUE(stream.IsCompleted(1));
  EXPECT_FALSE(stream.IsCompleted(2));
  release.Open();
  stream.WaitUntilCompleted(2);
  EXPECT_TRUE(stream.IsCompleted(2));
}

TEST(StreamQueue, WaitersAreWokenWhenTheirPositionIsReachedNotAfterEveryCommand) {
  LoggingRunner runner(/*hold_first=*/true);
  StreamQueue stream(7, 0, runner.Runner());
  stream.Enqueue(MakeCommand(CommandKind::kLaunch, 0));
  runner.running.Wait();
  for (int i = 1; i < 60; ++i) stream.Enqueue(MakeCommand(CommandKind::kLaunch, i));
  std::thread near([&] { stream.WaitUntilCompleted(10); });
  bool far_reached = false;
  std::thread far([&] {
    far_reached = stream.WaitUntilCompletedFor(50, std::chrono::minutes(1));
  });
  while (stream.waiters() < 2) std::this_thread::yield();
  runner.release.Open();
  near.join();
  far.join();
  EXPECT_TRUE(far_reached);
  EXPECT_EQ(stream.waiters(), 0u);
  // Positions 10 and 50: two signals, although 50 and more commands completed meanwhile.
  EXPECT_EQ(stream.progress_signals(), 2u);
  stream.WaitUntilCompleted(60);
  EXPECT_EQ(runner.log.values().size(), 60u);
}

TEST(StreamQueue, AWaitThatTimesOutLeavesNoWaiterBehind) {
  LoggingRunner runner(/*hold_first=*/true);
  StreamQueue stream(7, 0, runner.Runner());
  stream.Enqueue(MakeCommand(CommandKind::kLaunch, 0));
  runner.running.Wait();
  EXPECT_FALSE(stream.WaitUntilCompletedFor(1, std::chrono::milliseconds(1)));
  EXPECT_EQ(stream.waiters(), 0u);
  runner.release.Open();
  while (!stream.IsCompleted(1)) std::this_thread::yield();
  EXPECT_EQ(stream.progress_signals(), 0u);  // nobody waited any more when it completed
  EXPECT_TRUE(stream.WaitUntilCompletedFor(1, std::chrono::milliseconds(1)));
}

TEST(StreamQueue, RemembersTheFirstErrorAndNamesTheCommand) {
  StreamQueue stream(42, 0, [&](StreamQueue::Work& w, const absl::Status&) {
    if (w.command.object == 1) return absl::InvalidArgumentError("the first failure");
    if (w.command.object == 2) return absl::InternalError("a later failure");
    return absl::OkStatus();
  });
  stream.Enqueue(MakeCommand(CommandKind::kMemcpyHtoD, 0));
  stream.Enqueue(MakeCommand(CommandKind::kMemset, 1));
  stream.Enqueue(MakeCommand(CommandKind::kNotify, 2));  // still runs, fails, is not recorded
  stream.WaitUntilCompleted(3);
  absl::Status status = stream.status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "memset on stream 42 failed: the first failure");
}

TEST(StreamQueue, SkipsDataCommandsAfterAnErrorButStillRunsMarkers) {
  OrderLog ran;
  std::vector<absl::Status> seen_by_markers;
  StreamQueue stream(7, 0, [&](StreamQueue::Work& w, const absl::Status& stream_status) {
    ran.Append(static_cast<int64_t>(w.command.kind));
    if (w.command.kind == CommandKind::kNotify || w.command.kind == CommandKind::kRecordEvent) {
      seen_by_markers.push_back(stream_status);
    }
    if (w.command.object == 1) return absl::OutOfRangeError("boom");
    return absl::OkStatus();
  });
  stream.Enqueue(MakeCommand(CommandKind::kNotify, 0));     // runs, stream healthy
  stream.Enqueue(MakeCommand(CommandKind::kLaunch, 1));     // runs, fails
  stream.Enqueue(MakeCommand(CommandKind::kMemcpyHtoD, 2)); // skipped
  stream.Enqueue(MakeCommand(CommandKind::kMemcpyDtoH, 3)); // skipped
  stream.Enqueue(MakeCommand(CommandKind::kMemcpyDtoD, 4)); // skipped
  stream.Enqueue(MakeCommand(CommandKind::kMemset, 5));     // skipped
  stream.Enqueue(MakeCommand(CommandKind::kLaunch, 6));     // skipped
  stream.Enqueue(MakeCommand(CommandKind::kRecordEvent, 7));// runs: someone may wait on it
  stream.Enqueue(MakeCommand(CommandKind::kWaitEvent, 8));  // runs
  stream.Enqueue(MakeCommand(CommandKind::kNotify, 9));     // runs
  stream.WaitUntilCompleted(10);
  EXPECT_EQ(ran.values(), (std::vector<int64_t>{
                              static_cast<int64_t>(CommandKind::kNotify),
                              static_cast<int64_t>(CommandKind::kLaunch),
                              static_cast<int64_t>(CommandKind::kRecordEvent),
                              static_cast<int64_t>(CommandKind::kWaitEvent),
                              static_cast<int64_t>(CommandKind::kNotify)}));
  ASSERT_EQ(seen_by_markers.size(), 3u);
  EXPECT_TRUE(seen_by_markers[0].ok());
  EXPECT_EQ(seen_by_markers[1].code(), absl::StatusCode::kOutOfRange);  // the markers see the error
  EXPECT_EQ(seen_by_markers[2].code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kOutOfRange);
}

TEST(StreamQueue, StatusIsOkWhileNothingFailed) {
  StreamQueue stream(7, 3, [&](StreamQueue::Work&, const absl::Status&) { return absl::OkStatus(); });
  EXPECT_TRUE(stream.status().ok());
  stream.Enqueue(MakeCommand(CommandKind::kLaunch, 0));
  stream.WaitUntilCompleted(1);
  EXPECT_TRUE(stream.status().ok());
  EXPECT_EQ(stream.id(), 7u);
  EXPECT_EQ(stream.device(), 3u);
}

TEST(StreamQueue, DestructionDrainsQueuedCommands) {
  LoggingRunner first(/*hold_first=*/true);
  auto stream = std::make_unique<StreamQueue>(7, 0, first.Runner());
  for (int i = 0; i < 50; ++i) stream->Enqueue(MakeCommand(CommandKind::kLaunch, i));
  first.release.Open();
  stream.reset();  // must run all 50 before the worker stops
  EXPECT_EQ(first.log.values().size(), 50u);
}

TEST(StreamQueue, CancelSkipsWhatHasNotStartedAndEndsEveryWait) {
  LoggingRunner first(/*hold_first=*/true);
  auto stream = std::make_unique<StreamQueue>(7, 0, first.Runner());
  for (int i = 0; i < 50; ++i) stream->Enqueue(MakeCommand(CommandKind::kLaunch, i));
  first.running.Wait();
  std::thread waiter([&] { stream->WaitUntilCompleted(50); });  // would wait for all 50
  stream->Cancel();
  waiter.join();  // returns although 49 commands never ran
  EXPECT_TRUE(stream->cancelled());
  EXPECT_FALSE(stream->WaitUntilCompletedFor(50, std::chrono::milliseconds(0)));
  first.release.Open();
  stream.reset();  // the running command finishes; the rest are skipped
  EXPECT_EQ(first.log.values(), std::vector<int64_t>{0});
}

TEST(StreamQueue, AnIdleStreamRunsTheCommandInlineOnTheCallersThread) {
  std::thread::id ran_on;
  StreamQueue stream(7, 0, [&](StreamQueue::Work&, const absl::Status&) {
    ran_on = std::this_thread::get_id();
    return absl::OkStatus();
  });
  StreamQueue::Work work;
  work.command = MakeCommand(CommandKind::kLaunch, 0);
  EXPECT_EQ(stream.RunInlineOrEnqueue(std::move(work)), 1u);
  EXPECT_TRUE(stream.IsCompleted(1));  // it has run before RunInlineOrEnqueue returned
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(StreamQueue, ABusyStreamQueuesTheCommandBehindEarlierWork) {
  LoggingRunner first(/*hold_first=*/true);
  StreamQueue stream(7, 0, first.Runner());
  stream.Enqueue(MakeCommand(CommandKind::kLaunch, 0));
  first.running.Wait();
  StreamQueue::Work work;
  work.command = MakeCommand(CommandKind::kLaunch, 1);
  EXPECT_EQ(stream.RunInlineOrEnqueue(std::move(work)), 2u);  // returns at once: queued
  EXPECT_FALSE(stream.IsCompleted(2));
  first.release.Open();
  stream.WaitUntilCompleted(2);
  EXPECT_EQ(first.log.values(), (std::vector<int64_t>{0, 1}));
}

TEST(StreamQueue, TheWorkerWaitsForAnInlineCommandSoOrderIsKept) {
  LoggingRunner inline_command(/*hold_first=*/true);
  StreamQueue stream(7, 0, inline_command.Runner());
  std::thread caller([&] {
    StreamQueue::Work work;
    work.command = MakeCommand(CommandKind::kLaunch, 0);
    stream.RunInlineOrEnqueue(std::move(work));
  });
  inline_command.running.Wait();
  // Queued while the inline command runs: the worker must not start it before that one ends.
  for (int i = 1; i <= 5; ++i) stream.Enqueue(MakeCommand(CommandKind::kLaunch, i));
  EXPECT_FALSE(stream.IsCompleted(2));
  inline_command.release.Open();
  caller.join();
  stream.WaitUntilCompleted(6);
  EXPECT_EQ(inline_command.log.values(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(StreamQueue, AnInlineCommandsErrorIsTheStreamsErrorAndLaterDataWorkIsSkipped) {
  OrderLog ran;
  StreamQueue stream(9, 0, [&](StreamQueue::Work& w, const absl::Status&) {
    ran.Append(static_cast<int64_t>(w.command.object));
    if (w.command.object == 0) return absl::InvalidArgumentError("bad launch");
    return absl::OkStatus();
  });
  for (uint64_t tag : {0, 1}) {
    StreamQueue::Work work;
    work.command = MakeCommand(CommandKind::kLaunch, tag);
    stream.RunInlineOrEnqueue(std::move(work));
  }
  StreamQueue::Work rejected;
  rejected.command = MakeCommand(CommandKind::kLaunch, 2);
  rejected.rejected = absl::PermissionDeniedError("not yours");
  stream.RunInlineOrEnqueue(std::move(rejected));
  EXPECT_TRUE(stream.IsCompleted(3));
  EXPECT_EQ(ran.values(), (std::vector<int64_t>{0}));  // 1 skipped after the error, 2 refused
  EXPECT_EQ(stream.TakeStatus().message(), "launch on stream 9 failed: bad launch");
}

TEST(StreamQueue, KeepsFifoOrderWhileItsQueueWrapsAroundGrowsAndShrinks) {
  // The worker holds at tags 0 and 10, so that the queue's first slot has moved on when 30
  // more commands arrive: they wrap around its first slots and then make it grow. At tag 41 it
  // holds while a thousand queue up, more than the queue keeps once drained.
  Gate at_first, at_tenth, at_burst, release_first, release_tenth, release_burst;
  OrderLog log;
  StreamQueue stream(7, 0, [&](StreamQueue::Work& w, const absl::Status&) {
    if (w.command.object == 0) {
      at_first.Open();
      release_first.Wait();
    } else if (w.command.object == 10) {
      at_tenth.Open();
      release_tenth.Wait();
    } else if (w.command.object == 41) {
      at_burst.Open();
      release_burst.Wait();
    }
    log.Append(static_cast<int64_t>(w.command.object));
    return absl::OkStatus();
  });
  for (int i = 0; i <= 10; ++i) stream.Enqueue(MakeCommand(CommandKind::kMemset, i));
  at_first.Wait();
  release_first.Open();
  at_tenth.Wait();
  for (int i = 11; i <= 40; ++i) stream.Enqueue(MakeCommand(CommandKind::kMemset, i));
  release_tenth.Open();
  stream.WaitUntilCompleted(41);
  stream.Enqueue(MakeCommand(CommandKind::kMemset, 41));
  at_burst.Wait();
  for (int i = 42; i <= 1040; ++i) stream.Enqueue(MakeCommand(CommandKind::kMemset, i));
  release_burst.Open();
  stream.WaitUntilCompleted(1041);
  for (int i = 1041; i <= 1050; ++i) stream.Enqueue(MakeCommand(CommandKind::kMemset, i));
  stream.WaitUntilCompleted(1051);
  std::vector<int64_t> expected;
  for (int i = 0; i <= 1050; ++i) expected.push_back(i);
  EXPECT_EQ(log.values(), expected);
}

TEST(StreamQueue, ACommandsHostDataIsReleasedWithoutHoldingUpTheQueue) {
  // A copy's host buffer (Command::host_storage) may be large and slow to free: the worker
  // frees it with the queue unlocked, so that TensorFlow's threads keep enqueueing meanwhile.
  StreamQueue stream(7, 0, [](StreamQueue::Work&, const absl::Status&) {
    return absl::OkStatus();
  });
  Gate freeing, release_free, second_enqueued;
  Command copy = MakeCommand(CommandKind::kMemcpyHtoD, 0);
  copy.host_storage = std::shared_ptr<const void>(new int(0), [&](const void* data) {
    freeing.Open();
    release_free.Wait();
    delete static_cast<const int*>(data);
  });
  stream.Enqueue(std::move(copy));
  freeing.Wait();  // the worker is inside the buffer's deleter
  std::thread enqueuer([&] {
    stream.Enqueue(MakeCommand(CommandKind::kMemset, 1));
    second_enqueued.Open();
  });
  EXPECT_TRUE(second_enqueued.WaitFor(std::chrono::seconds(10)));
  release_free.Open();
  enqueuer.join();
  stream.WaitUntilCompleted(2);
}

TEST(StreamQueue, IdleStreamIsDestroyedPromptly) {
  auto stream = std::make_unique<StreamQueue>(
      7, 0, [](StreamQueue::Work&, const absl::Status&) { return absl::OkStatus(); });
  stream.reset();  // no work: the worker must notice the stop request and exit
  SUCCEED();
}

}  // namespace
}  // namespace vgpu
