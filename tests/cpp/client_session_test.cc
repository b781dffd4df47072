// Tests of one client's session (backend/client_session.h) on the CPU backing executor as a
// hostile tenant drives it: a free is ordered after the queued work that uses the memory,
// memory changes tenant only scrubbed, the quota charges what the arena takes, streams,
// events and descriptors are capped per session, and small copies run at once on an idle stream.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "plugin/backend/client_session.h"
#include "plugin/backend/cpu/cpu_executor.h"
#include "plugin/backend/shared_quota.h"
#include "plugin/common/activity.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/convolution.h"
#include "plugin/protocol/kernels/elementwise.h"
#include "plugin/protocol/kernels/random.h"
#include "test_commands.h"
#include "test_sync.h"

namespace vgpu {
namespace {

using vgpu_test::CopyIn;
using vgpu_test::CopyOut;
using vgpu_test::EventCommand;
using vgpu_test::FreeCommand;
using vgpu_test::Gate;
using vgpu_test::MakeCommand;
using vgpu_test::NotifyCommand;

// Notifications land here; a notification with token kBlockingToken holds its stream's worker
// until `release` opens, which stalls that stream deterministically.
class GatedSink : public CompletionSink {
 public:
  static constexpr uint64_t kBlockingToken = 999;
  void OnNotify(uint64_t token, const absl::Status&) override {
    if (token == kBlockingToken) {
      reached.Open();
      release.Wait();
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    notified.push_back(token);
  }
  bool Notified(uint64_t token) {
    std::lock_guard<std::mutex> lock(mu);
    return std::find(notified.begin(), notified.end(), token) != notified.end();
  }
  Gate reached;
  Gate release;
  std::mutex mu;
  std::vector<uint64_t> notified;  // tokens, in the order they arrived
};

class ClientSessionTest : public ::testing::Test {
 protected:
  void Open(CpuExecutor::Options options = {}, uint64_t quota = 0) {
    options.memory_limit_per_device = 1ull << 20;
    options.compute_threads = 1;
    absl::StatusOr<std::unique_ptr<CpuExecutor>> executor = CpuExecutor::Create(options);
    ASSERT_TRUE(executor.ok()) << executor.status();
    executor_ = *std::move(executor);
    attacker_ = executor_->OpenSession(&sink_, quota);
    victim_ = executor_->OpenSession(nullptr, quota);
  }
  void TearDown() override {
    sink_.release.Open();
    attacker_.reset();
    victim_.reset();
    executor_.reset();
  }

  static uint64_t Allocate(ExecutorSession& session, uint64_t size) {
    Reply reply = session.Handle(MakeCommand(CommandKind::kAllocate, 0, size));
    EXPECT_TRUE(reply.status.ok()) << reply.status;
    return reply.value;
  }
  static absl::Status CreateStream(ExecutorSession& session, uint64_t id) {
    return session.Handle(MakeCommand(CommandKind::kCreateStream, id)).status;
  }
  static absl::Status Synchronize(ExecutorSession& session, uint64_t stream) {
    return session.Handle(MakeCommand(CommandKind::kSynchronizeStream, stream)).status;
  }
  // Queues a host-to-device copy of a copy of `bytes`, which the command keeps alive until the
  // stream has run it (as a decoded remote command keeps its frame): callers may pass
  // temporaries although the stream is stalled.
  static void Write(ExecutorSession& session, uint64_t stream, uint64_t address,
                    const std::vector<uint8_t>& bytes) {
    auto kept = std::make_shared<const std::vector<uint8_t>>(bytes);
    Command command =
        CopyIn(CommandKind::kMemcpyHtoD, stream, address, kept->data(), kept->size());
    command.host_storage = kept;
    ASSERT_TRUE(session.Handle(std::move(command)).status.ok());
  }
  static std::vector<uint8_t> ReadNow(ExecutorSession& session, uint64_t address, uint64_t size) {
    std::vector<uint8_t> bytes(size, 0xEE);
    Reply reply =
        session.Handle(CopyOut(CommandKind::kMemcpyNow, 0, address, bytes.data(), size));
    EXPECT_TRUE(reply.status.ok()) << reply.status;
    return bytes;
  }
  static absl::Status Free(ExecutorSession& session, uint64_t address) {
    return session.Handle(FreeCommand(address)).status;
  }
  // Opens the sessions with a quota of 8192 bytes and `pending_free_wait`, and fills the
  // attacker's quota with one allocation that it frees while a write on its stalled stream 1
  // still uses it: the free pends until sink_.release opens.
  void OpenWithAPendingFree(std::chrono::milliseconds pending_free_wait) {
    CpuExecutor::Options options;
    options.session_limits.pending_free_wait = pending_free_wait;
    Open(options, /*quota=*/8192);
    const uint64_t x = Allocate(*attacker_, 8192);
    ASSERT_TRUE(CreateStream(*attacker_, 1).ok());
    Stall(1);
    Write(*attacker_, 1, x, std::vector<uint8_t>(8192, 1));
    ASSERT_TRUE(Free(*attacker_, x).ok());
  }
  // Stalls `stream` of the attacker until sink_.release opens.
  void Stall(uint64_t stream) {
    ASSERT_TRUE(
        attacker_->Handle(NotifyCommand(stream, GatedSink::kBlockingToken)).status.ok());
    sink_.reached.Wait();
  }

  GatedSink sink_;
  std::unique_ptr<CpuExecutor> executor_;
  std::unique_ptr<ExecutorSession> attacker_;
  std::unique_ptr<ExecutorSession> victim_;
};

TEST_F(ClientSessionTest, AFreeIsOrderedAfterTheQueuedWorkThatUsesTheMemory) {
  Open();
  constexpr uint64_t kSize = 4096;
  const uint64_t x = Allocate(*attacker_, kSize);
  ASSERT_TRUE(CreateStream(*attacker_, 1).ok());
  Stall(1);
  const std::vector<uint8_t> attack(kSize, 0xAA);
  Write(*attacker_, 1, x, attack);  // queued behind the stall: still to write X
  ASSERT_TRUE(Free(*attacker_, x).ok());
  EXPECT_EQ(attacker_->BytesInUse(), kSize);  // charged until the write has run

  // The victim allocates right after the free: it must not get X while the write is queued.
  const uint64_t v = Allocate(*victim_, kSize);
  EXPECT_NE(v, x);
  ASSERT_TRUE(CreateStream(*victim_, 1).ok());
  const std::vector<uint8_t> mine(kSize, 0x11);
  Write(*victim_, 1, v, mine);
  ASSERT_TRUE(Synchronize(*victim_, 1).ok());

  sink_.release.Open();  // the attacker's write runs now
  ASSERT_TRUE(Synchronize(*attacker_, 1).ok());
  EXPECT_EQ(ReadNow(*victim_, v, kSize), mine);
  EXPECT_EQ(attacker_->BytesInUse(), 0u);

  // Reclaimed and scrubbed: the next allocation of that size gets X, all zeros.
  const uint64_t again = Allocate(*victim_, kSize);
  EXPECT_EQ(again, x);
  EXPECT_EQ(ReadNow(*victim_, again, kSize), std::vector<uint8_t>(kSize, 0));
}

TEST_F(ClientSessionTest, WorkNamingFreedMemoryFailsTheStreamWithoutTouchingIt) {
  Open();
  const uint64_t x = Allocate(*attacker_, 4096);
  ASSERT_TRUE(CreateStream(*attacker_, 1).ok());
  ASSERT_TRUE(Free(*attacker_, x).ok());
  const uint64_t v = Allocate(*victim_, 4096);
  ASSERT_EQ(v, x) << "the test needs the victim to hold the freed block";
  const std::vector<uint8_t> attack(4096, 0xAA);
  Write(*attacker_, 1, x, attack);
  absl::Status status = Synchronize(*attacker_, 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(ReadNow(*victim_, v, 4096), std::vector<uint8_t>(4096, 0));
}

TEST_F(ClientSessionTest, ABadLaunchBufferFailsTheStreamInOrderNamingTheKernel) {
  Open();
  ASSERT_TRUE(CreateStream(*attacker_, 1).ok());
  Command launch = MakeCommand(CommandKind::kLaunch);
  launch.stream = 1;
  launch.object = 100;  // activation forward
  launch.buffers.push_back({0x1234, 16});
  ASSERT_TRUE(attacker_->Handle(std::move(launch)).status.ok());  // queued: fails in its turn
  absl::Status status = Synchronize(*attacker_, 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("not a device address"), std::string::npos) << status;
  EXPECT_TRUE(Synchronize(*attacker_, 1).ok());  // reported once
}

TEST_F(ClientSessionTest, AnAllocationWaitsForItsOwnPendingFreesThenSucceeds) {
  ASSERT_NO_FATAL_FAILURE(OpenWithAPendingFree(std::chrono::milliseconds(30'000)));
  Reply reply;
  std::thread allocator([&] {
    Command command = MakeCommand(CommandKind::kAllocate, 0, 8192);
    reply = attacker_->Handle(std::move(command));
  });
  sink_.release.Open();
  allocator.join();
  EXPECT_TRUE(reply.status.ok()) << reply.status;
}

TEST_F(ClientSessionTest, WithoutWaitingAPendingFreeStaysChargedToTheQuota) {
  ASSERT_NO_FATAL_FAILURE(OpenWithAPendingFree(std::chrono::milliseconds(0)));
  Command command = MakeCommand(CommandKind::kAllocate, 0, 8192);
  Reply reply = attacker_->Handle(std::move(command));
  EXPECT_EQ(reply.status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(reply.status.message().find("freed but still used by queued work"), std::string::npos)
      << reply.status;
}

TEST_F(ClientSessionTest, TheQuotaChargesZeroByteAndRoundedAllocations) {
  Open({}, /*quota=*/4096);
  for (int i = 0; i < 16; ++i) Allocate(*attacker_, i % 2 == 0 ? 0 : 1);  // 16 x 256 bytes
  EXPECT_EQ(attacker_->BytesInUse(), 4096u);
  Command command = MakeCommand(CommandKind::kAllocate, 0, 0);
  Reply reply = attacker_->Handle(std::move(command));
  EXPECT_EQ(reply.status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(reply.status.message().find("--client_quota"), std::string::npos) << reply.status;
  // Odd sizes: 4096 - 1 rounds to 4096, which a fresh quota of 4096 holds exactly once.
  Allocate(*victim_, 4095);
  Command odd = MakeCommand(CommandKind::kAllocate, 0, 1);
  EXPECT_EQ(victim_->Handle(std::move(odd)).status.code(), absl::StatusCode::kResourceExhausted);
  Command info = MakeCommand(CommandKind::kMemoryInfo);
  EXPECT_EQ(victim_->Handle(std::move(info)).memory.bytes_in_use, 4096u);
}

TEST_F(ClientSessionTest, AWaitOnAnEventOfADestroyedStreamIgnoresANewStreamWithItsId) {
  Open();
  ASSERT_TRUE(CreateStream(*attacker_, 1).ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(attacker_->Handle(NotifyCommand(1, 1)).status.ok());
  }
  // Position 6 on stream 1.
  ASSERT_TRUE(
      attacker_->Handle(EventCommand(CommandKind::kRecordEvent, 1, 77)).status.ok());
  ASSERT_TRUE(attacker_->Handle(MakeCommand(CommandKind::kDestroyStream, 1)).status.ok());
  ASSERT_TRUE(CreateStream(*attacker_, 1).ok());  // the id again: a stream with nothing queued
  ASSERT_TRUE(CreateStream(*attacker_, 2).ok());
  ASSERT_TRUE(attacker_->Handle(EventCommand(CommandKind::kWaitEvent, 2, 77)).status.ok());
  // The old stream's work has run: the wait is over, whatever the new stream 1 holds.
  EXPECT_TRUE(Synchronize(*attacker_, 2).ok());
}

TEST_F(ClientSessionTest, CancelEndsWaitsOnQueuedWorkAndTheTeardownSkipsIt) {
  Open();
  ASSERT_TRUE(CreateStream(*attacker_, 1).ok());
  ASSERT_TRUE(CreateStream(*attacker_, 2).ok());
  const uint64_t address = Allocate(*attacker_, 4096);
  Stall(1);
  for (int i = 0; i < 100; ++i) Write(*attacker_, 1, address, std::vector<uint8_t>(4096, 1));
  ASSERT_TRUE(attacker_->Handle(EventCommand(CommandKind::kRecordEvent, 1, 5)).status.ok());
  ASSERT_TRUE(attacker_->Handle(EventCommand(CommandKind::kWaitEvent, 2, 5)).status.ok());
  // A synchronisation in flight on the stream that waits, as a server's helper thread has.
  absl::Status synchronized;
  std::thread helper([&] { synchronized = Synchronize(*attacker_, 2); });
  attacker_->Cancel();
  helper.join();  // over although stream 1 is still stalled
  sink_.release.Open();  // the running notification ends; the 100 copies never run
  attacker_.reset();
  EXPECT_EQ(executor_->arena(0).Info().bytes_in_use, 0u);  // the attacker's memory is back
}

TEST_F(ClientSessionTest, SmallCopiesRunAtOnceOnAnIdleStreamAndQueueBehindABusyOne) {
  CpuExecutor::Options options;
  options.session_limits.inline_copies = true;  // as in process
  Open(options);
  const uint64_t x = Allocate(*attacker_, 4096);
  ASSERT_TRUE(CreateStream(*attacker_, 1).ok());
  // Idle stream: the copies have run when Handle returns, with no synchronisation.
  std::vector<uint8_t> read(16, 0);
  Write(*attacker_, 1, x, std::vector<uint8_t>(16, 7));
  ASSERT_TRUE(
      attacker_->Handle(CopyOut(CommandKind::kMemcpyDtoH, 1, x, read.data(), 16)).status.ok());
  EXPECT_EQ(read, std::vector<uint8_t>(16, 7));
  // Busy stream: they wait for the work queued before them, in order.
  Stall(1);
  Write(*attacker_, 1, x, std::vector<uint8_t>(16, 9));
  ASSERT_TRUE(
      attacker_->Handle(CopyOut(CommandKind::kMemcpyDtoH, 1, x, read.data(), 16)).status.ok());
  EXPECT_EQ(read, std::vector<uint8_t>(16, 7));  // not yet: the stream is held
  sink_.release.Open();
  ASSERT_TRUE(Synchronize(*attacker_, 1).ok());
  EXPECT_EQ(read, std::vector<uint8_t>(16, 9));
}

TEST_F(ClientSessionTest, InProcessAnIdleStreamRecordsAtOnceAndAReachedWaitQueuesNothing) {
  CpuExecutor::Options options;
  options.session_limits.inline_copies = true;  // as in process
  Open(options);
  const uint64_t x = Allocate(*attacker_, 4096);
  ASSERT_TRUE(CreateStream(*attacker_, 1).ok());
  ASSERT_TRUE(CreateStream(*attacker_, 2).ok());
  Write(*attacker_, 1, x, std::vector<uint8_t>(16, 7));
  auto record = [&](uint64_t stream, uint64_t event) {
    Command command = EventCommand(CommandKind::kRecordEvent, stream, event);
    command.token = event;
    return attacker_->Handle(std::move(command)).status;
  };
  // Idle stream 1: the recording is notified before Handle returns.
  ASSERT_TRUE(record(1, 42).ok());
  EXPECT_TRUE(sink_.Notified(42));
  // Stream 2 waits for it: reached, so nothing is queued and the copy after it runs at once.
  std::vector<uint8_t> read(16, 0);
  ASSERT_TRUE(attacker_->Handle(EventCommand(CommandKind::kWaitEvent, 2, 42)).status.ok());
  ASSERT_TRUE(
      attacker_->Handle(CopyOut(CommandKind::kMemcpyDtoH, 2, x, read.data(), 16)).status.ok());
  EXPECT_EQ(read, std::vector<uint8_t>(16, 7));
  // Busy stream 1: the recording waits its turn, and so does what stream 2 orders after it.
  Stall(1);
  Write(*attacker_, 1, x, std::vector<uint8_t>(16, 9));
  ASSERT_TRUE(record(1, 43).ok());
  EXPECT_FALSE(sink_.Notified(43));
  ASSERT_TRUE(attacker_->Handle(EventCommand(CommandKind::kWaitEvent, 2, 43)).status.ok());
  ASSERT_TRUE(
      attacker_->Handle(CopyOut(CommandKind::kMemcpyDtoH, 2, x, read.data(), 16)).status.ok());
  EXPECT_EQ(read, std::vector<uint8_t>(16, 7));  // not yet: stream 1 is held
  sink_.release.Open();
  ASSERT_TRUE(Synchronize(*attacker_, 2).ok());
  EXPECT_TRUE(sink_.Notified(43));
  EXPECT_EQ(read, std::vector<uint8_t>(16, 9));
}

TEST_F(ClientSessionTest, WithOneQueuePerDeviceStreamsRunInSubmissionOrderWithoutWaits) {
  CpuExecutor::Options options;
  options.session_limits.inline_copies = true;  // as in process
  options.session_limits.one_queue_per_device = true;
  Open(options);
  const uint64_t x = Allocate(*attacker_, 4096);
  ASSERT_TRUE(CreateStream(*attacker_, 1).ok());
  ASSERT_TRUE(CreateStream(*attacker_, 2).ok());
  ASSERT_TRUE(CreateStream(*attacker_, 3).ok());
  EXPECT_EQ(attacker_->Stats().streams, 3u);  // three streams, counted against max_streams
  // Stream 2's copy queues behind stream 1's held work: one queue, in submission order, and
  // without a wait (a stream of its own would have read x at once).
  Stall(1);
  Write(*attacker_, 1, x, std::vector<uint8_t>(16, 5));
  std::vector<uint8_t> read(16, 0);
  ASSERT_TRUE(
      attacker_->Handle(CopyOut(CommandKind::kMemcpyDtoH, 2, x, read.data(), 16)).status.ok());
  // The held notification, the write and the read, counted once although three ids name the
  // queue.
  EXPECT_EQ(attacker_->Stats().queued, 3u);
  // A wait on a recording of another of the device's streams is satisfied by that order: it
  // queues nothing.
  Command record = EventCommand(CommandKind::kRecordEvent, 1, 77);
  record.token = 77;
  ASSERT_TRUE(attacker_->Handle(std::move(record)).status.ok());
  ASSERT_TRUE(attacker_->Handle(EventCommand(CommandKind::kWaitEvent, 3, 77)).status.ok());
  EXPECT_EQ(attacker_->Stats().queued, 4u);  // the recording; the wait queued nothing
  EXPECT_EQ(read, std::vector<uint8_t>(16, 0));  // not yet: the queue is held
  sink_.release.Open();
  ASSERT_TRUE(Synchronize(*attacker_, 3).ok());
  EXPECT_EQ(read, std::vector<uint8_t>(16, 5));
  EXPECT_TRUE(sink_.Notified(77));
  // Destroying one stream leaves the queue to the others.
  ASSERT_TRUE(attacker_->Handle(MakeCommand(CommandKind::kDestroyStream, 1)).status.ok());
  Write(*attacker_, 2, x, std::vector<uint8_t>(16, 6));
  ASSERT_TRUE(Synchronize(*attacker_, 2).ok());
  EXPECT_EQ(ReadNow(*attacker_, x, 16), std::vector<uint8_t>(16, 6));
}

TEST_F(ClientSessionTest, WithOneQueuePerDeviceACallbackWaitingForItsDeviceGetsAnError) {
  CpuExecutor::Options options;
  options.session_limits.one_queue_per_device = true;
  Open(options);
  ASSERT_TRUE(CreateStream(*attacker_, 1).ok());
  ASSERT_TRUE(CreateStream(*attacker_, 2).ok());
  // A notification (an in-process host callback) on stream 1 synchronises stream 2, which
  // shares its queue: an error instead of a wait for ever.
  struct SynchronizingSink : CompletionSink {
    ExecutorSession* session = nullptr;
    absl::Status stream_sync, device_sync, destroy;
    Gate done;
    void OnNotify(uint64_t, const absl::Status&) override {
      stream_sync = session->Handle(MakeCommand(CommandKind::kSynchronizeStream, 2)).status;
      device_sync = session->Handle(MakeCommand(CommandKind::kSynchronizeDevice, 0)).status;
      destroy = session->Handle(MakeCommand(CommandKind::kDestroyStream, 2)).status;
      done.Open();
    }
  } sink;
  std::unique_ptr<ExecutorSession> session = executor_->OpenSession(&sink);
  sink.session = session.get();
  ASSERT_TRUE(CreateStream(*session, 1).ok());
  ASSERT_TRUE(CreateStream(*session, 2).ok());
  ASSERT_TRUE(session->Handle(NotifyCommand(1, 5)).status.ok());
  sink.done.Wait();
  EXPECT_EQ(sink.stream_sync.code(), absl::StatusCode::kFailedPrecondition) << sink.stream_sync;
  EXPECT_EQ(sink.device_sync.code(), absl::StatusCode::kFailedPrecondition) << sink.device_sync;
  EXPECT_EQ(sink.destroy.code(), absl::StatusCode::kFailedPrecondition) << sink.destroy;
  EXPECT_TRUE(Synchronize(*session, 2).ok());  // from outside, as usual
  session.reset();
}

TEST_F(ClientSessionTest, WithOneQueuePerDeviceEachDeviceKeepsItsOwnQueue) {
  CpuExecutor::Options options;
  options.device_count = 2;
  options.session_limits.one_queue_per_device = true;
  Open(options);
  ASSERT_TRUE(CreateStream(*attacker_, 1).ok());
  ASSERT_TRUE(attacker_->Handle(MakeCommand(CommandKind::kCreateStream, 2, 0, /*device=*/1))
                  .status.ok());
  // Device 0's queue is held; device 1's stream still runs its work.
  Stall(1);
  Reply allocated = attacker_->Handle(MakeCommand(CommandKind::kAllocate, 0, 4096, 1));
  ASSERT_TRUE(allocated.status.ok()) << allocated.status;
  auto bytes = std::make_shared<const std::vector<uint8_t>>(16, 3);
  Command write =
      CopyIn(CommandKind::kMemcpyHtoD, 2, allocated.value, bytes->data(), bytes->size());
  write.device = 1;
  write.host_storage = bytes;
  ASSERT_TRUE(attacker_->Handle(std::move(write)).status.ok());
  EXPECT_TRUE(Synchronize(*attacker_, 2).ok());  // returns although device 0 is held
}

TEST_F(ClientSessionTest, AWaitCoversAnEarlierRecordingOnAnotherStreamNotYetReached) {
  // The client completes a recording early and orders other streams after it by a wait naming
  // the event; TensorFlow may record the event again, on an idle stream, before that wait
  // arrives. The wait must still cover the first recording.
  CpuExecutor::Options options;
  options.session_limits.inline_copies = true;  // as in process
  Open(options);
  const uint64_t x = Allocate(*attacker_, 4096);
  for (uint64_t stream : {1, 2, 3}) ASSERT_TRUE(CreateStream(*attacker_, stream).ok());
  Write(*attacker_, 1, x, std::vector<uint8_t>(16, 7));
  ASSERT_TRUE(Synchronize(*attacker_, 1).ok());
  Stall(1);
  Write(*attacker_, 1, x, std::vector<uint8_t>(16, 9));
  ASSERT_TRUE(attacker_->Handle(EventCommand(CommandKind::kRecordEvent, 1, 44)).status.ok());
  ASSERT_TRUE(attacker_->Handle(EventCommand(CommandKind::kRecordEvent, 3, 44)).status.ok());
  ASSERT_TRUE(Synchronize(*attacker_, 3).ok());  // the second recording is reached
  ASSERT_TRUE(attacker_->Handle(EventCommand(CommandKind::kWaitEvent, 2, 44)).status.ok());
  std::vector<uint8_t> read(16, 0);
  ASSERT_TRUE(
      attacker_->Handle(CopyOut(CommandKind::kMemcpyDtoH, 2, x, read.data(), 16)).status.ok());
  EXPECT_EQ(read, std::vector<uint8_t>(16, 0));  // not yet: stream 1 is held
  sink_.release.Open();
  ASSERT_TRUE(Synchronize(*attacker_, 2).ok());
  EXPECT_EQ(read, std::vector<uint8_t>(16, 9));
}

TEST_F(ClientSessionTest, AWaitCoversTheHeldRecordingWhicheverStreamRecordedLast) {
  CpuExecutor::Options options;
  options.session_limits.inline_copies = true;
  Open(options);
  const uint64_t x = Allocate(*attacker_, 4096);
  for (uint64_t stream : {1, 2, 3}) ASSERT_TRUE(CreateStream(*attacker_, stream).ok());
  // Recorded on idle stream 3 (reached at once), then on held stream 1, then on stream 3
  // again (reached): stream 1's recording is the one a wait must cover.
  ASSERT_TRUE(attacker_->Handle(EventCommand(CommandKind::kRecordEvent, 3, 45)).status.ok());
  Stall(1);
  Write(*attacker_, 1, x, std::vector<uint8_t>(16, 9));
  ASSERT_TRUE(attacker_->Handle(EventCommand(CommandKind::kRecordEvent, 1, 45)).status.ok());
  ASSERT_TRUE(attacker_->Handle(EventCommand(CommandKind::kRecordEvent, 3, 45)).status.ok());
  ASSERT_TRUE(Synchronize(*attacker_, 3).ok());
  ASSERT_TRUE(attacker_->Handle(EventCommand(CommandKind::kWaitEvent, 2, 45)).status.ok());
  std::vector<uint8_t> read(16, 0);
  ASSERT_TRUE(
      attacker_->Handle(CopyOut(CommandKind::kMemcpyDtoH, 2, x, read.data(), 16)).status.ok());
  EXPECT_EQ(read, std::vector<uint8_t>(16, 0));  // not yet: stream 1 is held
  sink_.release.Open();
  ASSERT_TRUE(Synchronize(*attacker_, 2).ok());
  EXPECT_EQ(read, std::vector<uint8_t>(16, 9));
  // Every recording reached: a wait queues nothing, and a small read after it runs at once.
  ASSERT_TRUE(Synchronize(*attacker_, 1).ok());
  ASSERT_TRUE(attacker_->Handle(EventCommand(CommandKind::kWaitEvent, 2, 45)).status.ok());
  Write(*attacker_, 1, x, std::vector<uint8_t>(16, 4));
  ASSERT_TRUE(
      attacker_->Handle(CopyOut(CommandKind::kMemcpyDtoH, 2, x, read.data(), 16)).status.ok());
  EXPECT_EQ(read, std::vector<uint8_t>(16, 4));
}

TEST_F(ClientSessionTest, AProfileRecordsTheWaitsThatBlockAndWhenEachCommandWasQueued) {
  Open();
  const uint64_t x = Allocate(*attacker_, 4096);
  ASSERT_TRUE(CreateStream(*attacker_, 1).ok());
  ASSERT_TRUE(CreateStream(*attacker_, 2).ok());
  activity::Start();
  auto recorded = [](Command command) {
    command.activity.recorded = true;  // as the client tags every command while profiling
    return command;
  };
  Stall(1);
  auto post = [&](Command command) { return attacker_->Handle(recorded(std::move(command))); };
  ASSERT_TRUE(post(EventCommand(CommandKind::kRecordEvent, 1, 50)).status.ok());
  ASSERT_TRUE(post(EventCommand(CommandKind::kWaitEvent, 2, 50)).status.ok());
  const std::vector<uint8_t> bytes(64, 3);
  ASSERT_TRUE(
      post(CopyIn(CommandKind::kMemcpyHtoD, 2, x, bytes.data(), bytes.size())).status.ok());
  // Stream 2's worker has begun the wait (its record's start is taken before it blocks).
  auto* session = static_cast<ClientSession*>(attacker_.get());
  while (session->WaitersOn(1) == 0) std::this_thread::yield();
  const int64_t released_ns = activity::NowNs();
  sink_.release.Open();
  ASSERT_TRUE(Synchronize(*attacker_, 2).ok());
  // Reached now: a second wait blocks nothing and is no record.
  ASSERT_TRUE(post(EventCommand(CommandKind::kWaitEvent, 2, 50)).status.ok());
  ASSERT_TRUE(Synchronize(*attacker_, 2).ok());
  activity::Stop();

  std::vector<activity::Record> waits, copies;
  for (const activity::Record& record : activity::Take()) {
    if (record.kind == activity::Kind::kEventWait) waits.push_back(record);
    if (record.kind == activity::Kind::kCopyToDevice) copies.push_back(record);
  }
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].stream, 2u);
  EXPECT_EQ(activity::NameOf(waits[0].name), "wait for stream 1");
  EXPECT_LT(waits[0].start_ns, released_ns);  // blocked until stream 1 was let go
  EXPECT_GE(waits[0].end_ns, released_ns);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_GT(copies[0].queued_ns, 0);
  EXPECT_LT(copies[0].queued_ns, released_ns);  // queued behind the wait ...
  EXPECT_GE(copies[0].start_ns, released_ns);   // ... and run after it
}

TEST(ClientSessionInlinePolicy, ACostlyKernelCountsItsBytesSeveralTimes) {
  SessionLimits limits;
  limits.inline_launch_bytes = 64 << 10;
  auto launch = [](KernelId kernel, uint64_t output_bytes) {
    Command command = MakeCommand(CommandKind::kLaunch, 1);
    command.object = static_cast<uint64_t>(kernel);
    command.buffers = {{0x1000, 16}, {0x2000, output_bytes}};
    return command;
  };
  // An element-wise launch of 32 KiB runs inline; a random generator of the same size does
  // not, and one of 2 KiB does (the bound divided by ByteWorkWeight, 16).
  EXPECT_TRUE(ClientSession::RunsInline(launch(elementwise::kBinary, 32 << 10), limits));
  EXPECT_FALSE(ClientSession::RunsInline(launch(random::kUniform, 32 << 10), limits));
  EXPECT_TRUE(ClientSession::RunsInline(launch(random::kUniform, 2 << 10), limits));
  EXPECT_FALSE(ClientSession::RunsInline(launch(random::kNormal, 8 << 10), limits));
  EXPECT_FALSE(ClientSession::RunsInline(launch(elementwise::kBinary, 64 << 10), limits));
  // A matrix product or convolution, however small, runs on the stream's worker (oneDNN's
  // OpenMP team is per calling thread).
  EXPECT_FALSE(ClientSession::RunsInline(launch(convolution::kMatmul, 16), limits));
  EXPECT_FALSE(ClientSession::RunsInline(launch(convolution::kMatmulBiasActivation, 16), limits));
  EXPECT_FALSE(ClientSession::RunsInline(launch(convolution::kForward, 16), limits));
  EXPECT_FALSE(ClientSession::RunsInline(launch(convolution::kBackwardFilter, 16), limits));
  EXPECT_TRUE(ClientSession::RunsInline(launch(convolution::kBiasAdd, 16), limits));
  // Copies and event recordings only with inline_copies (in process); waits and host
  // notifications never.
  Command copy = MakeCommand(CommandKind::kMemcpyDtoH, 1);
  copy.size = 1024;
  const Command record = MakeCommand(CommandKind::kRecordEvent, 1);
  EXPECT_FALSE(ClientSession::RunsInline(copy, limits));
  EXPECT_FALSE(ClientSession::RunsInline(record, limits));
  limits.inline_copies = true;
  EXPECT_TRUE(ClientSession::RunsInline(copy, limits));
  EXPECT_TRUE(ClientSession::RunsInline(record, limits));
  // Copies have their own, larger bound (a step's input batch runs inline).
  Command batch = MakeCommand(CommandKind::kMemcpyHtoD, 1);
  batch.size = 196 << 10;
  EXPECT_TRUE(ClientSession::RunsInline(batch, limits));
  batch.size = limits.inline_copy_bytes;
  EXPECT_TRUE(ClientSession::RunsInline(batch, limits));
  batch.size = limits.inline_copy_bytes + 1;
  EXPECT_FALSE(ClientSession::RunsInline(batch, limits));
  EXPECT_FALSE(ClientSession::RunsInline(MakeCommand(CommandKind::kWaitEvent, 1), limits));
  EXPECT_FALSE(ClientSession::RunsInline(MakeCommand(CommandKind::kNotify, 1), limits));
  // Off (VGPU_INLINE_LAUNCH_BYTES=0, and the CUDA executor, whose streams' CUDA state only
  // their workers touch): nothing runs inline, not even a recording.
  limits.inline_launch_bytes = 0;
  EXPECT_FALSE(ClientSession::RunsInline(launch(elementwise::kBinary, 16), limits));
  EXPECT_FALSE(ClientSession::RunsInline(copy, limits));
  batch.size = 196 << 10;
  EXPECT_FALSE(ClientSession::RunsInline(batch, limits));
  EXPECT_FALSE(ClientSession::RunsInline(record, limits));
}

TEST(CpuExecutorSerialLaunches, UnderFourMiBALaunchRunsAloneOnTwoThreadsOrFewer) {
  EXPECT_EQ(CpuExecutor::SerialLaunchBytes(1), uint64_t{4} << 20);
  EXPECT_EQ(CpuExecutor::SerialLaunchBytes(2), uint64_t{4} << 20);
  EXPECT_EQ(CpuExecutor::SerialLaunchBytes(3), 0u);
  EXPECT_EQ(CpuExecutor::SerialLaunchBytes(16), 0u);
  // 3 MiB of element-wise work runs serially, of random numbers (16x the work per byte) or a
  // matrix product (sized by its multiply-adds) does not; nothing does without a bound.
  const uint64_t sizes[] = {uint64_t{1} << 20, uint64_t{2} << 20};
  auto request = [&](KernelId kernel) {
    LaunchRequest launch;
    launch.kernel_id = static_cast<uint32_t>(kernel);
    launch.launch.buffer_sizes = absl::MakeConstSpan(sizes);
    return launch;
  };
  const uint64_t bound = CpuExecutor::SerialLaunchBytes(2);
  EXPECT_TRUE(CpuExecutor::RunsSerially(request(elementwise::kBinary), bound));
  EXPECT_FALSE(CpuExecutor::RunsSerially(request(random::kUniform), bound));
  EXPECT_FALSE(CpuExecutor::RunsSerially(request(convolution::kMatmul), bound));
  EXPECT_FALSE(CpuExecutor::RunsSerially(request(elementwise::kBinary), bound / 2));
  EXPECT_FALSE(CpuExecutor::RunsSerially(request(elementwise::kBinary), 0));
}

TEST_F(ClientSessionTest, AllocationsPerSessionAreCapped) {
  CpuExecutor::Options options;
  options.session_limits.max_allocations = 3;
  Open(options);
  for (int i = 0; i < 3; ++i) Allocate(*attacker_, 0);
  Command command = MakeCommand(CommandKind::kAllocate);
  Reply reply = attacker_->Handle(std::move(command));
  EXPECT_EQ(reply.status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(reply.status.message().find("max_allocations"), absl::string_view::npos);
  EXPECT_NE(Allocate(*victim_, 0), 0u);  // per session: the victim is not affected
}

TEST_F(ClientSessionTest, StreamsPerSessionAreCapped) {
  CpuExecutor::Options options;
  options.session_limits.max_streams = 4;
  Open(options);
  for (uint64_t id = 1; id <= 4; ++id) ASSERT_TRUE(CreateStream(*attacker_, id).ok());
  absl::Status refused = CreateStream(*attacker_, 5);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("--max_streams_per_client=4"), std::string::npos) << refused;
  EXPECT_TRUE(CreateStream(*victim_, 1).ok());  // another session has its own budget
  ASSERT_TRUE(attacker_->Handle(MakeCommand(CommandKind::kDestroyStream, 2)).status.ok());
  EXPECT_TRUE(CreateStream(*attacker_, 5).ok());
}

TEST_F(ClientSessionTest, RecordedEventsPerSessionAreCapped) {
  CpuExecutor::Options options;
  options.session_limits.max_events = 3;
  Open(options);
  ASSERT_TRUE(CreateStream(*attacker_, 1).ok());
  auto record = [&](uint64_t event) {
    Command command = EventCommand(CommandKind::kRecordEvent, 1, event);
    command.token = event;
    return attacker_->Handle(std::move(command)).status;
  };
  for (uint64_t event = 1; event <= 3; ++event) ASSERT_TRUE(record(event).ok());
  EXPECT_TRUE(record(2).ok());  // re-recording an event takes no new entry
  EXPECT_EQ(record(4).code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(attacker_->Handle(EventCommand(CommandKind::kDestroyEvent, 0, 1)).status.ok());
  EXPECT_TRUE(record(4).ok());
}

TEST_F(ClientSessionTest, ForwardModeDescriptorsPerSessionAreCapped) {
  CpuExecutor::Options options;
  options.session_limits.max_descriptors = 2;
  Open(options);
  auto create = [&](uint64_t id) {
    Command command = MakeCommand(CommandKind::kDescriptorCreate);
    command.object = id;
    command.params.push_back(1);  // a tensor descriptor
    return attacker_->Handle(std::move(command)).status;
  };
  ASSERT_TRUE(create(1).ok());
  ASSERT_TRUE(create(2).ok());
  EXPECT_EQ(create(3).code(), absl::StatusCode::kResourceExhausted);
  Command destroy = MakeCommand(CommandKind::kDescriptorDestroy);
  destroy.object = 1;
  ASSERT_TRUE(attacker_->Handle(std::move(destroy)).status.ok());
  EXPECT_TRUE(create(3).ok());
}

TEST_F(ClientSessionTest, ASessionThatEndsWithPendingWorkReleasesEverything) {
  Open();
  const uint64_t x = Allocate(*attacker_, 65536);
  ASSERT_TRUE(CreateStream(*attacker_, 1).ok());
  Stall(1);
  Write(*attacker_, 1, x, std::vector<uint8_t>(65536, 0xAB));
  ASSERT_TRUE(Free(*attacker_, x).ok());
  sink_.release.Open();
  attacker_.reset();  // drains the stream, then frees what is left
  EXPECT_EQ(executor_->arena(0).Info().bytes_in_use, 0u);
  const uint64_t reused = Allocate(*victim_, 65536);
  EXPECT_EQ(reused, x);
  EXPECT_EQ(ReadNow(*victim_, reused, 65536), std::vector<uint8_t>(65536, 0));
}

TEST(SharedQuotaTest, ATenantsConnectionsTogetherStayWithinItsQuota) {
  CpuExecutor::Options options;
  options.memory_limit_per_device = 8ull << 20;
  options.compute_threads = 1;
  std::unique_ptr<CpuExecutor> executor = *CpuExecutor::Create(options);
  auto tenant = std::make_shared<SharedQuota>("team-a", 1ull << 20);
  std::unique_ptr<ExecutorSession> first = executor->OpenSession(nullptr, 0, tenant);
  std::unique_ptr<ExecutorSession> second = executor->OpenSession(nullptr, 0, tenant);
  std::unique_ptr<ExecutorSession> other_tenant = executor->OpenSession(nullptr);
  auto allocate = [](ExecutorSession& session, uint64_t size) {
    Command command = MakeCommand(CommandKind::kAllocate, 0, size);
    return session.Handle(std::move(command));
  };
  Reply a = allocate(*first, 600 << 10);
  ASSERT_TRUE(a.status.ok()) << a.status;
  Reply b = allocate(*second, 600 << 10);  // 1.2 MiB together: over the tenant's 1 MiB
  EXPECT_EQ(b.status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(b.status.message()).find("tenant 'team-a'"), std::string::npos)
      << b.status;
  EXPECT_TRUE(allocate(*other_tenant, 4 << 20).status.ok());  // another tenant: unaffected
  // What the tenant may still use is what its memory info says.
  Reply info = second->Handle(MakeCommand(CommandKind::kMemoryInfo));
  EXPECT_EQ(info.memory.limit_bytes, 1ull << 20);
  EXPECT_LE(info.memory.largest_free_block, (1ull << 20) - (600 << 10));
  first.reset();  // its connection ends: its memory returns to the tenant's budget
  EXPECT_TRUE(allocate(*second, 600 << 10).status.ok());
  EXPECT_EQ(tenant->Members().size(), 1u);
}

}  // namespace
}  // namespace vgpu
