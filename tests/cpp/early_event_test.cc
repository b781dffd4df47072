// Tests of early event completion (DeviceClient::RecordEvent): an event recorded after
// host-to-device copies whose bytes were already taken (by a remote transport, or in process by
// the client) is complete at once, and the device's later work on other streams is fenced
// behind the copies instead — a wait for the recording precedes it, and CopyNow, Free and
// DestroyEvent wait for the backend's report. Anything else before the recording (a read-back, a memset, a kernel) keeps
// the event pending until the backend reaches it. The backend is the CPU executor in process,
// behind a transport that behaves as a remote one and can hold posted commands back, so that
// "not yet executed" is deterministic.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/backend/cpu/cpu_executor.h"
#include "plugin/client/device_client.h"
#include "plugin/client/notification_hub.h"
#include "plugin/transport/inproc_transport.h"
#include "test_sync.h"

namespace vgpu {
namespace {

using vgpu_test::Gate;

// The in-process transport seen as a socket one: notifications "arrive on another thread", a
// host-to-device copy's bytes are taken when it is posted, and posted commands can be held back
// (they reach the executor, in order, on Release). Logs what was posted on which stream.
class HoldingTransport final : public Transport {
 public:
  explicit HoldingTransport(std::unique_ptr<InprocTransport> inner) : inner_(std::move(inner)) {}

  absl::Status Post(Command command) override {
    if (command.kind == CommandKind::kRecordEvent && pause_recordings.load()) {
      recording_paused.Open();
      resume_recordings.Wait();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (command.kind == CommandKind::kMemcpyHtoD) {
      const auto* bytes = static_cast<const uint8_t*>(command.host_src);
      taken_.emplace_back(bytes, bytes + command.size);
      command.host_src = taken_.back().data();
    }
    posted_.emplace_back(command.stream, command.kind);
    if (holding_) {
      held_.push_back(std::move(command));
      return absl::OkStatus();
    }
    return inner_->Post(std::move(command));
  }
  Reply Call(Command command) override {
    calls.fetch_add(1);
    return inner_->Call(std::move(command));
  }
  std::string Describe() const override { return "holding"; }
  bool DeliversNotificationsInline() const override { return false; }
  bool CapturesHostDataWhenPosted() const override { return true; }

  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    holding_ = true;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    holding_ = false;
    for (Command& command : held_) {
      absl::Status status = inner_->Post(std::move(command));
      EXPECT_TRUE(status.ok()) << status;
    }
    held_.clear();
  }
  std::atomic<int> calls{0};
  // While set, the post of an event recording opens `recording_paused` and then waits for
  // `resume_recordings` (another thread posts meanwhile).
  std::atomic<bool> pause_recordings{false};
  Gate recording_paused;
  Gate resume_recordings;

  // The kinds posted on `stream` so far, in order.

  std::vector<CommandKind> PostedOn(uint64_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<CommandKind> kinds;
    for (const auto& [s, kind] : posted_) {
      if (s == stream) kinds.push_back(kind);
    }
    return kinds;
  }
  // Every post so far, as (stream, kind), in the order posted.
  std::vector<std::pair<uint64_t, CommandKind>> Posted() {
    std::lock_guard<std::mutex> lock(mu_);
    return posted_;
  }

 private:
  std::unique_ptr<InprocTransport> inner_;
  std::mutex mu_;
  bool holding_ = false;
  std::deque<Command> held_;
  std::deque<std::vector<uint8_t>> taken_;
  std::vector<std::pair<uint64_t, CommandKind>> posted_;
};

class EarlyEventTest : public testing::Test {
 protected:
  EarlyEventTest() {
    CpuExecutor::Options options;
    options.device_count = 1;
    options.memory_limit_per_device = 16ull << 20;
    options.compute_threads = 2;
    executor_ = *CpuExecutor::Create(options);
    transport_ = std::make_unique<HoldingTransport>(
        std::make_unique<InprocTransport>(executor_->OpenSession(&hub_)));
    client_ = std::make_unique<DeviceClient>(0, 0, transport_.get(), &hub_);
    copies_ = NewStream();
    compute_ = NewStream();
    input_ = NewBuffer();
    output_ = NewBuffer();
  }

  ~EarlyEventTest() override {
    transport_->Release();
    (void)client_->DestroyStream(std::move(copies_));
    (void)client_->DestroyStream(std::move(compute_));
    client_.reset();
    transport_.reset();
  }

  std::unique_ptr<ClientStream> NewStream() {
    absl::StatusOr<std::unique_ptr<ClientStream>> stream = client_->CreateStream();
    EXPECT_TRUE(stream.ok()) << stream.status();
    return stream.ok() ? *std::move(stream) : nullptr;
  }
  uint64_t NewBuffer() {
    absl::StatusOr<uint64_t> buffer = client_->Allocate(kBytes);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    return buffer.value_or(0);
  }
  // What the device holds at `address` (a synchronous read, outside the streams).
  std::vector<uint8_t> Read(uint64_t address) {
    std::vector<uint8_t> bytes(kBytes, 0);
    absl::Status status = client_->CopyNow(bytes.data(), 0, nullptr, address, kBytes);
    EXPECT_TRUE(status.ok()) << status;
    return bytes;
  }

  static constexpr uint64_t kBytes = 4096;
  NotificationHub hub_;
  std::unique_ptr<CpuExecutor> executor_;
  std::unique_ptr<HoldingTransport> transport_;
  std::unique_ptr<DeviceClient> client_;
  std::unique_ptr<ClientStream> copies_;
  std::unique_ptr<ClientStream> compute_;
  uint64_t input_ = 0;
  uint64_t output_ = 0;
};

TEST_F(EarlyEventTest, AnEventAfterAnInputCopyIsCompleteBeforeTheBackendRunsTheCopy) {
  ASSERT_TRUE(client_->completes_events_early());
  transport_->Hold();
  std::vector<uint8_t> source(kBytes, 9);
  ASSERT_TRUE(client_->CopyHostToDevice(*copies_, input_, source.data(), kBytes).ok());
  std::shared_ptr<ClientEvent> copied = client_->CreateEvent();
  ASSERT_TRUE(client_->RecordEvent(*copies_, copied).ok());

  EXPECT_EQ(copied->Query(), ClientEvent::State::kComplete);
  EXPECT_TRUE(copied->Wait().ok());
  EXPECT_EQ(client_->counters().early_events(), 1u);
  std::fill(source.begin(), source.end(), 0);  // the source may be reused at once

  transport_->Release();
  EXPECT_EQ(Read(input_), std::vector<uint8_t>(kBytes, 9));
  ASSERT_TRUE(client_->DestroyEvent(*copied).ok());
}

TEST_F(EarlyEventTest, WorkOnAnotherStreamWaitsForTheCopyTheEventStoodFor) {
  transport_->Hold();
  std::vector<uint8_t> source(kBytes, 5);
  ASSERT_TRUE(client_->CopyHostToDevice(*copies_, input_, source.data(), kBytes).ok());
  std::shared_ptr<ClientEvent> copied = client_->CreateEvent();
  ASSERT_TRUE(client_->RecordEvent(*copies_, copied).ok());
  ASSERT_EQ(copied->Query(), ClientEvent::State::kComplete);

  // What TensorFlow does next: the op that reads the input, on the compute stream.
  ASSERT_TRUE(client_->CopyDeviceToDevice(*compute_, output_, input_, kBytes).ok());
  ASSERT_TRUE(client_->Memset(*compute_, output_, 0, 1, 0).ok());
  const std::vector<CommandKind> compute = transport_->PostedOn(compute_->id());
  ASSERT_EQ(compute.size(), 3u);
  EXPECT_EQ(compute[0], CommandKind::kWaitEvent);  // once, before the first command
  EXPECT_EQ(compute[1], CommandKind::kMemcpyDtoD);
  EXPECT_EQ(compute[2], CommandKind::kMemset);
  // The copy stream itself runs in order: no wait there.
  EXPECT_EQ(transport_->PostedOn(copies_->id()),
            (std::vector<CommandKind>{CommandKind::kMemcpyHtoD, CommandKind::kRecordEvent}));

  transport_->Release();
  ASSERT_TRUE(client_->SynchronizeDevice().ok());
  EXPECT_EQ(Read(output_), std::vector<uint8_t>(kBytes, 5));
  ASSERT_TRUE(client_->DestroyEvent(*copied).ok());
}

TEST_F(EarlyEventTest, WorkPostedWhileTheRecordingIsBeingPostedIsNotCountedAsOrderedAfterIt) {
  // Another thread posts on the compute stream while the early recording is on its way: a
  // wait posted then could reach the backend before the recording and wait for nothing. The
  // fence counts only once the recording is posted, so the op that reads the copy (posted after
  // the event completed) is preceded by a wait posted after the recording.
  transport_->Hold();
  std::vector<uint8_t> source(kBytes, 6);
  ASSERT_TRUE(client_->CopyHostToDevice(*copies_, input_, source.data(), kBytes).ok());
  std::shared_ptr<ClientEvent> copied = client_->CreateEvent();
  transport_->pause_recordings = true;
  std::thread recorder([&] { EXPECT_TRUE(client_->RecordEvent(*copies_, copied).ok()); });
  transport_->recording_paused.Wait();
  ASSERT_TRUE(client_->Memset(*compute_, output_, 0, 1, kBytes).ok());  // unrelated work
  transport_->resume_recordings.Open();
  recorder.join();
  ASSERT_EQ(copied->Query(), ClientEvent::State::kComplete);
  ASSERT_TRUE(client_->CopyDeviceToDevice(*compute_, output_, input_, kBytes).ok());

  const std::vector<std::pair<uint64_t, CommandKind>> posted = transport_->Posted();
  const auto recording = std::find(posted.begin(), posted.end(),
                                   std::make_pair(copies_->id(), CommandKind::kRecordEvent));
  const auto wait = std::find(recording, posted.end(),
                              std::make_pair(compute_->id(), CommandKind::kWaitEvent));
  const auto read = std::find(posted.begin(), posted.end(),
                              std::make_pair(compute_->id(), CommandKind::kMemcpyDtoD));
  ASSERT_NE(recording, posted.end());
  EXPECT_NE(wait, posted.end());
  EXPECT_LT(wait, read);

  transport_->Release();
  ASSERT_TRUE(client_->SynchronizeDevice().ok());
  EXPECT_EQ(Read(output_), std::vector<uint8_t>(kBytes, 6));
  ASSERT_TRUE(client_->DestroyEvent(*copied).ok());
}

TEST_F(EarlyEventTest, OnceTheBackendReportedTheRecordingNoWaitIsAdded) {
  std::vector<uint8_t> source(kBytes, 4);
  ASSERT_TRUE(client_->CopyHostToDevice(*copies_, input_, source.data(), kBytes).ok());
  std::shared_ptr<ClientEvent> copied = client_->CreateEvent();
  ASSERT_TRUE(client_->RecordEvent(*copies_, copied).ok());
  ASSERT_TRUE(client_->SynchronizeStream(*copies_).ok());  // the report has arrived by then
  ASSERT_EQ(copies_->settled(), copies_->posted());

  ASSERT_TRUE(client_->CopyDeviceToDevice(*compute_, output_, input_, kBytes).ok());
  EXPECT_EQ(transport_->PostedOn(compute_->id()),
            (std::vector<CommandKind>{CommandKind::kMemcpyDtoD}));
  ASSERT_TRUE(client_->SynchronizeDevice().ok());
  EXPECT_EQ(Read(output_), std::vector<uint8_t>(kBytes, 4));
  ASSERT_TRUE(client_->DestroyEvent(*copied).ok());
}

TEST_F(EarlyEventTest, AnEventAfterWorkTheHostCanObserveWaitsForTheBackend) {
  std::vector<uint8_t> back(kBytes, 0);
  // A read-back, a memset and a kernel-like device copy: each keeps the next event pending.
  for (int which = 0; which < 3; ++which) {
    transport_->Hold();
    if (which == 0) {
      ASSERT_TRUE(client_->CopyDeviceToHost(*copies_, back.data(), input_, kBytes).ok());
    } else if (which == 1) {
      ASSERT_TRUE(client_->Memset(*copies_, input_, 0, 1, kBytes).ok());
    } else {
      ASSERT_TRUE(client_->CopyDeviceToDevice(*copies_, output_, input_, kBytes).ok());
    }
    std::shared_ptr<ClientEvent> event = client_->CreateEvent();
    ASSERT_TRUE(client_->RecordEvent(*copies_, event).ok());
    EXPECT_EQ(event->Query(), ClientEvent::State::kPending) << which;
    transport_->Release();
    EXPECT_TRUE(event->Wait().ok());
    EXPECT_EQ(event->Query(), ClientEvent::State::kComplete);
    ASSERT_TRUE(client_->DestroyEvent(*event).ok());
  }
  EXPECT_EQ(client_->counters().early_events(), 0u);
}

TEST_F(EarlyEventTest, AReadOutsideTheStreamsWaitsForTheBackendsReport) {
  transport_->Hold();
  std::vector<uint8_t> source(kBytes, 6);
  ASSERT_TRUE(client_->CopyHostToDevice(*copies_, input_, source.data(), kBytes).ok());
  std::shared_ptr<ClientEvent> copied = client_->CreateEvent();
  ASSERT_TRUE(client_->RecordEvent(*copies_, copied).ok());
  ASSERT_EQ(copied->Query(), ClientEvent::State::kComplete);

  // CopyNow is a call (never held): without the fence it would read the old bytes at once.
  Gate read;
  std::vector<uint8_t> seen;
  std::thread reader([&] {
    seen = Read(input_);
    read.Open();
  });
  EXPECT_FALSE(read.WaitFor(std::chrono::milliseconds(50)));
  transport_->Release();
  reader.join();
  EXPECT_EQ(seen, std::vector<uint8_t>(kBytes, 6));
  ASSERT_TRUE(client_->DestroyEvent(*copied).ok());
}

TEST_F(EarlyEventTest, DestroyingTheEventWaitsUntilItsFenceIsNoLongerNeeded) {
  transport_->Hold();
  std::vector<uint8_t> source(kBytes, 2);
  ASSERT_TRUE(client_->CopyHostToDevice(*copies_, input_, source.data(), kBytes).ok());
  std::shared_ptr<ClientEvent> copied = client_->CreateEvent();
  ASSERT_TRUE(client_->RecordEvent(*copies_, copied).ok());
  ASSERT_TRUE(client_->CopyDeviceToDevice(*compute_, output_, input_, kBytes).ok());

  // The compute stream's wait names the event: the backend must still know it then.
  Gate destroyed;
  std::thread destroyer([&] {
    EXPECT_TRUE(client_->DestroyEvent(*copied).ok());
    destroyed.Open();
  });
  EXPECT_FALSE(destroyed.WaitFor(std::chrono::milliseconds(50)));
  transport_->Release();
  destroyer.join();
  ASSERT_TRUE(client_->SynchronizeDevice().ok());
  EXPECT_EQ(Read(output_), std::vector<uint8_t>(kBytes, 2));
}

TEST_F(EarlyEventTest, ASynchronisationWaitsForTheReportsOnTheirWayInsteadOfAskingTheBackend) {
  transport_->Hold();
  std::vector<uint8_t> source(kBytes, 8);
  ASSERT_TRUE(client_->CopyHostToDevice(*copies_, input_, source.data(), kBytes).ok());
  std::shared_ptr<ClientEvent> copied = client_->CreateEvent();
  ASSERT_TRUE(client_->RecordEvent(*copies_, copied).ok());
  ASSERT_LT(copies_->settled(), copies_->posted());

  const int calls_before = transport_->calls.load();
  Gate synchronized;
  std::thread synchronizer([&] {
    EXPECT_TRUE(client_->SynchronizeDevice().ok());
    EXPECT_TRUE(client_->SynchronizeStream(*copies_).ok());
    synchronized.Open();
  });
  EXPECT_FALSE(synchronized.WaitFor(std::chrono::milliseconds(50)));  // the copy is held back
  transport_->Release();
  synchronizer.join();
  EXPECT_EQ(transport_->calls.load(), calls_before);  // no round trip
  EXPECT_EQ(client_->counters().local_synchronizations(), 2u);
  EXPECT_EQ(Read(input_), std::vector<uint8_t>(kBytes, 8));
  ASSERT_TRUE(client_->DestroyEvent(*copied).ok());
}

TEST_F(EarlyEventTest, AFailedCopyIsReportedByTheNextSynchronisation) {
  std::vector<uint8_t> source(kBytes, 1);
  const uint64_t past_the_end = input_ + (64ull << 20);
  ASSERT_TRUE(client_->CopyHostToDevice(*copies_, past_the_end, source.data(), kBytes).ok());
  std::shared_ptr<ClientEvent> copied = client_->CreateEvent();
  ASSERT_TRUE(client_->RecordEvent(*copies_, copied).ok());
  EXPECT_EQ(copied->Query(), ClientEvent::State::kComplete);

  const absl::Status status = client_->SynchronizeDevice();
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("memcpy_htod"), std::string::npos) << status;
  ASSERT_TRUE(client_->DestroyEvent(*copied).ok());
}

// In process the stream reads a copy's source when it reaches the copy, so the client takes the
// bytes itself when it posts the copy; the rest is as through a server.
TEST(EarlyEventInProcessTest, TheCopyTakesTheBytesAndTheEventCompletesAtOnce) {
  CpuExecutor::Options options;
  options.device_count = 1;
  options.memory_limit_per_device = 16ull << 20;
  options.compute_threads = 2;
  NotificationHub hub;
  std::unique_ptr<CpuExecutor> executor = *CpuExecutor::Create(options);
  InprocTransport transport(executor->OpenSession(&hub));
  DeviceClient client(0, 0, &transport, &hub);
  ASSERT_TRUE(client.completes_events_early());
  std::unique_ptr<ClientStream> held = *client.CreateStream();
  std::unique_ptr<ClientStream> copies = *client.CreateStream();
  std::unique_ptr<ClientStream> compute = *client.CreateStream();
  constexpr uint64_t kBytes = 1 << 20;  // past what runs inline
  const uint64_t input = *client.Allocate(kBytes);
  const uint64_t output = *client.Allocate(kBytes);

  // The copy stream waits behind a host callback of another stream, as TensorFlow's waits for
  // the compute stream's earlier work.
  Gate release;
  ASSERT_TRUE(client.HostCallback(*held, [&](const absl::Status&) { release.Wait(); }).ok());
  ASSERT_TRUE(client.CreateStreamDependency(*copies, *held).ok());
  std::vector<uint8_t> source(kBytes, 3);
  ASSERT_TRUE(client.CopyHostToDevice(*copies, input, source.data(), kBytes).ok());
  std::shared_ptr<ClientEvent> copied = client.CreateEvent();
  ASSERT_TRUE(client.RecordEvent(*copies, copied).ok());
  EXPECT_EQ(copied->Query(), ClientEvent::State::kComplete);
  EXPECT_EQ(client.counters().early_events(), 1u);
  std::fill(source.begin(), source.end(), 0);  // reused at once: the copy took the bytes
  ASSERT_TRUE(client.CopyDeviceToDevice(*compute, output, input, kBytes).ok());  // fenced

  release.Open();
  ASSERT_TRUE(client.SynchronizeDevice().ok());
  std::vector<uint8_t> seen(kBytes, 0);
  ASSERT_TRUE(client.CopyNow(seen.data(), 0, nullptr, output, kBytes).ok());
  EXPECT_EQ(seen, std::vector<uint8_t>(kBytes, 3));
  ASSERT_TRUE(client.DestroyEvent(*copied).ok());
  for (auto* stream : {&held, &copies, &compute}) {
    ASSERT_TRUE(client.DestroyStream(std::move(*stream)).ok());
  }
}

TEST(EarlyEventSwitchTest, OnWhereBytesAreTakenOffWhenTheEnvironmentSaysSo) {
  CpuExecutor::Options options;
  options.device_count = 1;
  options.memory_limit_per_device = 1ull << 20;
  NotificationHub hub;
  std::unique_ptr<CpuExecutor> executor = *CpuExecutor::Create(options);
  InprocTransport inproc(executor->OpenSession(&hub));
  EXPECT_TRUE(DeviceClient(0, 0, &inproc, &hub).completes_events_early());

  HoldingTransport remote(std::make_unique<InprocTransport>(executor->OpenSession(&hub)));
  EXPECT_TRUE(DeviceClient(0, 0, &remote, &hub).completes_events_early());
  ASSERT_EQ(setenv("VGPU_LOCAL_EVENTS", "0", 1), 0);
  EXPECT_FALSE(DeviceClient(0, 0, &remote, &hub).completes_events_early());
  EXPECT_FALSE(DeviceClient(0, 0, &inproc, &hub).completes_events_early());
  ASSERT_EQ(unsetenv("VGPU_LOCAL_EVENTS"), 0);

  // Two devices of one backend: the other's streams could read this one's memory unfenced.
  DeviceClient first(0, 0, &remote, &hub);
  DeviceClient second(1, 0, &remote, &hub);
  first.SetPeers({&first, &second});
  EXPECT_FALSE(first.completes_events_early());
}

}  // namespace
}  // namespace vgpu
