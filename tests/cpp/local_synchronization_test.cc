// Tests of synchronisations answered by the client runtime without a round trip
// (DeviceClient::SynchronizeDevice / SynchronizeStream on a remote backend): they are answered
// locally only when every command posted on the device's streams is known to have completed
// without error; anything posted after the last OK notification, a failed stream, a host
// callback still running, or a lost backend sends them to the backend as before. The backend
// here is the CPU executor in process, behind a transport that behaves as a remote one does
// (notifications do not count as delivered inline), so the tests are deterministic; the
// end-to-end case over a real `vgpu server` is in server_test.cc.
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/backend/cpu/cpu_executor.h"
#include "plugin/client/device_client.h"
#include "plugin/client/notification_hub.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/transport/inproc_transport.h"
#include "test_sync.h"

namespace vgpu {
namespace {

using vgpu_test::Gate;

// The in-process transport, seen as a remote one: notifications "arrive on another thread",
// calls are counted, and the connection can be declared lost.
class RemoteLikeTransport final : public Transport {
 public:
  explicit RemoteLikeTransport(std::unique_ptr<InprocTransport> inner)
      : inner_(std::move(inner)) {}
  absl::Status Post(Command command) override { return inner_->Post(std::move(command)); }
  Reply Call(Command command) override {
    calls.fetch_add(1);
    return inner_->Call(std::move(command));
  }
  std::string Describe() const override { return "remote-like"; }
  bool DeliversNotificationsInline() const override { return false; }
  bool Lost() const override { return lost.load(); }

  std::atomic<int> calls{0};
  std::atomic<bool> lost{false};

 private:
  std::unique_ptr<InprocTransport> inner_;
};

class LocalSynchronizationTest : public testing::Test {
 protected:
  LocalSynchronizationTest() {
    CpuExecutor::Options options;
    options.device_count = 1;
    options.memory_limit_per_device = 16ull << 20;
    options.compute_threads = 2;
    executor_ = *CpuExecutor::Create(options);
    transport_ = std::make_unique<RemoteLikeTransport>(
        std::make_unique<InprocTransport>(executor_->OpenSession(&hub_)));
    client_ = std::make_unique<DeviceClient>(0, 0, transport_.get(), &hub_);
    absl::StatusOr<std::unique_ptr<ClientStream>> stream = client_->CreateStream();
    EXPECT_TRUE(stream.ok()) << stream.status();
    stream_ = *std::move(stream);
    absl::StatusOr<uint64_t> buffer = client_->Allocate(kBytes);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    buffer_ = buffer.value_or(0);
  }

  ~LocalSynchronizationTest() override {
    (void)client_->DestroyStream(std::move(stream_));
    client_.reset();
    transport_.reset();
  }

  // Records an event after what was posted on `stream` and waits for its notification.
  absl::Status Reach(ClientStream& stream) {
    std::shared_ptr<ClientEvent> event = client_->CreateEvent();
    absl::Status status = client_->RecordEvent(stream, event);
    if (status.ok()) status = event->Wait();
    (void)client_->DestroyEvent(*event);
    return status;
  }

  // Round trips made by synchronisations since the last call.
  int NewCalls() {
    const int now = transport_->calls.load();
    const int made = now - calls_seen_;
    calls_seen_ = now;
    return made;
  }

  static constexpr uint64_t kBytes = 4096;
  NotificationHub hub_;
  std::unique_ptr<CpuExecutor> executor_;
  std::unique_ptr<RemoteLikeTransport> transport_;
  std::unique_ptr<DeviceClient> client_;
  std::unique_ptr<ClientStream> stream_;
  uint64_t buffer_ = 0;
  int calls_seen_ = 0;
};

TEST_F(LocalSynchronizationTest, AfterAnOkNotificationOfTheLastWorkNoSynchronisationIsARoundTrip) {
  ASSERT_TRUE(client_->tracks_completion());
  std::vector<uint8_t> in(kBytes, 7), out(kBytes, 0);
  ASSERT_TRUE(client_->CopyHostToDevice(*stream_, buffer_, in.data(), kBytes).ok());
  ASSERT_TRUE(client_->CopyDeviceToHost(*stream_, out.data(), buffer_, kBytes).ok());
  ASSERT_TRUE(Reach(*stream_).ok());
  NewCalls();

  EXPECT_TRUE(client_->SynchronizeDevice().ok());
  EXPECT_TRUE(client_->SynchronizeStream(*stream_).ok());
  EXPECT_EQ(NewCalls(), 0);
  EXPECT_EQ(client_->counters().local_synchronizations(), 2u);
  EXPECT_EQ(out, in);  // the read-back is in place when the synchronisation returns
  EXPECT_EQ(stream_->settled(), stream_->posted());
}

TEST_F(LocalSynchronizationTest, WorkPostedAfterTheLastNotificationIsWaitedForByTheBackend) {
  ASSERT_TRUE(Reach(*stream_).ok());
  std::vector<uint8_t> in(kBytes, 3);
  ASSERT_TRUE(client_->CopyHostToDevice(*stream_, buffer_, in.data(), kBytes).ok());
  NewCalls();

  EXPECT_TRUE(client_->SynchronizeDevice().ok());
  EXPECT_EQ(NewCalls(), 1);
  EXPECT_LT(stream_->settled(), stream_->posted());
}

TEST_F(LocalSynchronizationTest, AnyUnsettledStreamSendsTheDeviceSynchronisationToTheBackend) {
  absl::StatusOr<std::unique_ptr<ClientStream>> other = client_->CreateStream();
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(Reach(*stream_).ok());
  ASSERT_TRUE(client_->Memset(**other, buffer_, 0, 1, kBytes).ok());
  NewCalls();

  EXPECT_TRUE(client_->SynchronizeStream(*stream_).ok());  // this one is settled
  EXPECT_EQ(NewCalls(), 0);
  EXPECT_TRUE(client_->SynchronizeDevice().ok());  // the other is not
  EXPECT_EQ(NewCalls(), 1);
  ASSERT_TRUE(client_->DestroyStream(*std::move(other)).ok());
}

TEST_F(LocalSynchronizationTest, AFailedStreamIsReportedByTheBackendOnceAndThenSettlesAgain) {
  ASSERT_TRUE(client_->dnn().Launch(*stream_, static_cast<KernelId>(999), {}, {}, {}).ok());
  // The recording is reached, with the stream's error: it settles nothing.
  EXPECT_EQ(Reach(*stream_).code(), absl::StatusCode::kInvalidArgument);
  NewCalls();

  absl::Status status = client_->SynchronizeDevice();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("unknown kernel id 999"), std::string::npos) << status;
  EXPECT_EQ(NewCalls(), 1);

  // Reported once (the backend clears it); work after it settles the stream again.
  ASSERT_TRUE(Reach(*stream_).ok());
  NewCalls();
  EXPECT_TRUE(client_->SynchronizeDevice().ok());
  EXPECT_EQ(NewCalls(), 0);
}

TEST_F(LocalSynchronizationTest, ALostBackendIsAskedEvenWhenEverythingSettled) {
  ASSERT_TRUE(Reach(*stream_).ok());
  transport_->lost = true;
  NewCalls();
  (void)client_->SynchronizeDevice();
  (void)client_->SynchronizeStream(*stream_);
  EXPECT_EQ(NewCalls(), 2);
}

TEST_F(LocalSynchronizationTest, AHostCallbackStillRunningKeepsItsStreamUnsettled) {
  Gate entered, release;
  ASSERT_TRUE(client_
                  ->HostCallback(*stream_,
                                 [&](const absl::Status&) {
                                   entered.Open();
                                   release.Wait();
                                 })
                  .ok());
  entered.Wait();  // the backend reached it: the notification was OK, the callback runs
  NewCalls();
  std::atomic<bool> synchronised{false};
  std::thread waiter([&] {
    EXPECT_TRUE(client_->SynchronizeStream(*stream_).ok());
    synchronised = true;
  });
  // It cannot be answered locally, and the round trip still waits for the callback.
  while (NewCalls() == 0) std::this_thread::yield();
  EXPECT_FALSE(synchronised.load());
  release.Open();
  waiter.join();
  EXPECT_TRUE(synchronised.load());

  // Once it has returned, nothing is pending.
  EXPECT_TRUE(client_->SynchronizeDevice().ok());
  EXPECT_EQ(NewCalls(), 0);
}

TEST(LocalSynchronization, InProcessEverySynchronisationGoesToTheExecutor) {
  CpuExecutor::Options options;
  options.device_count = 1;
  options.memory_limit_per_device = 1ull << 20;
  auto executor = *CpuExecutor::Create(options);
  NotificationHub hub;
  InprocTransport transport(executor->OpenSession(&hub));
  DeviceClient client(0, 0, &transport, &hub);
  EXPECT_FALSE(client.tracks_completion());
  auto stream = client.CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::shared_ptr<ClientEvent> event = client.CreateEvent();
  ASSERT_TRUE(client.RecordEvent(**stream, event).ok());
  ASSERT_TRUE(event->Wait().ok());
  const uint64_t before = client.counters().round_trips();
  EXPECT_TRUE(client.SynchronizeDevice().ok());
  EXPECT_EQ(client.counters().round_trips(), before + 1);
  EXPECT_EQ(client.counters().local_synchronizations(), 0u);
  ASSERT_TRUE(client.DestroyStream(*std::move(stream)).ok());
}

}  // namespace
}  // namespace vgpu
