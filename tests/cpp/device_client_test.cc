// Tests of the client runtime's DeviceClient (client/device_client.h) over its own CPU backing
// executor and in-process transport, and of the CPU session's isolation between clients
// (backend/client_session.cc). A test sink can hold a backend stream's worker inside a
// notification, which makes "this stream is still busy" deterministic without sleeps.
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/backend/cpu/cpu_executor.h"
#include "plugin/backend/device_address.h"
#include "plugin/client/device_client.h"
#include "plugin/client/notification_hub.h"
#include "plugin/common/philox.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/protocol/kernels/random.h"
#include "plugin/transport/inproc_transport.h"
#include "test_commands.h"
#include "test_sync.h"

namespace vgpu {
namespace {

using vgpu_test::CopyIn;
using vgpu_test::CopyOut;
using vgpu_test::FreeCommand;
using vgpu_test::Gate;
using vgpu_test::MakeCommand;
using vgpu_test::NotifyCommand;
using vgpu_test::OrderLog;

constexpr uint64_t kHoldTokenBit = 1ull << 63;  // hub tokens count up from 1 and never get here

// Forwards notifications to the hub, except "hold" tokens: those keep the notifying backend
// stream's worker inside OnNotify until their gate opens (a stream busy for as long as the test
// wants).
class HoldingSink final : public CompletionSink {
 public:
  explicit HoldingSink(NotificationHub* hub) : hub_(hub) {}

  uint64_t HoldToken(Gate* reached, Gate* release) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t token = kHoldTokenBit | next_++;
    holds_[token] = {reached, release};
    return token;
  }

  void OnNotify(uint64_t token, const absl::Status& stream_status) override {
    if ((token & kHoldTokenBit) == 0) {
      hub_->OnNotify(token, stream_status);
      return;
    }
    std::pair<Gate*, Gate*> hold;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hold = holds_.at(token);
    }
    hold.first->Open();
    hold.second->Wait();
  }

 private:
  NotificationHub* const hub_;
  std::mutex mu_;
  std::map<uint64_t, std::pair<Gate*, Gate*>> holds_;
  uint64_t next_ = 1;
};

class DeviceClientTest : public testing::Test {
 protected:
  DeviceClientTest() {
    CpuExecutor::Options options;
    options.device_count = 2;
    options.memory_limit_per_device = 16ull << 20;
    options.compute_threads = 2;
    executor_ = *CpuExecutor::Create(options);
    transport_ = std::make_unique<InprocTransport>(executor_->OpenSession(&sink_));
    // Hold() posts past the client, which therefore cannot know that a held stream is busy:
    // events would complete early (early_event_test.cc tests that).
    setenv("VGPU_LOCAL_EVENTS", "0", 1);
    client_ = std::make_unique<DeviceClient>(0, 0, transport_.get(), &hub_);
    unsetenv("VGPU_LOCAL_EVENTS");
  }

  ~DeviceClientTest() override {
    for (auto& gate : gates_) gate->Open();  // never leave a backend stream held
    client_.reset();
    transport_.reset();  // the session drains its streams and frees its memory
  }

  // Holds `stream`'s backend worker from the point it reaches this command until the returned
  // gate opens. `reached` (if given) opens when the worker arrives there.
  Gate* Hold(ClientStream& stream, Gate** reached = nullptr) {
    gates_.push_back(std::make_unique<Gate>());
    Gate* arrived = gates_.back().get();
    gates_.push_back(std::make_unique<Gate>());
    Gate* release = gates_.back().get();
    const uint64_t token = sink_.HoldToken(arrived, release);
    EXPECT_TRUE(transport_->Post(NotifyCommand(stream.id(), token)).ok());
    if (reached != nullptr) *reached = arrived;
    return release;
  }

  std::unique_ptr<ClientStream> NewStream() {
    absl::StatusOr<std::unique_ptr<ClientStream>> stream = client_->CreateStream();
    EXPECT_TRUE(stream.ok()) << stream.status();
    return stream.ok() ? *std::move(stream) : nullptr;
  }

  uint64_t NewBuffer(uint64_t size) {
    absl::StatusOr<uint64_t> address = client_->Allocate(size);
    EXPECT_TRUE(address.ok()) << address.status();
    return address.value_or(0);
  }

  NotificationHub hub_;
  HoldingSink sink_{&hub_};
  std::unique_ptr<CpuExecutor> executor_;
  std::unique_ptr<InprocTransport> transport_;
  std::unique_ptr<DeviceClient> client_;
  std::deque<std::unique_ptr<Gate>> gates_;
};

std::vector<uint8_t> Pattern(size_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 7);
  return bytes;
}

TEST_F(DeviceClientTest, EventIsPendingUntilItsStreamReachesIt) {
  auto stream = NewStream();
  ASSERT_NE(stream, nullptr);
  std::shared_ptr<ClientEvent> never_recorded = client_->CreateEvent();
  EXPECT_EQ(never_recorded->Query(), ClientEvent::State::kComplete);

  std::shared_ptr<ClientEvent> event = client_->CreateEvent();
  Gate* release = Hold(*stream);
  ASSERT_TRUE(client_->RecordEvent(*stream, event).ok());
  EXPECT_EQ(event->Query(), ClientEvent::State::kPending);
  release->Open();
  EXPECT_TRUE(event->Wait().ok());
  EXPECT_EQ(event->Query(), ClientEvent::State::kComplete);
  EXPECT_TRUE(client_->DestroyEvent(*event).ok());
  EXPECT_TRUE(client_->DestroyStream(std::move(stream)).ok());
}

TEST_F(DeviceClientTest, ReRecordedEventIsPendingAgain) {
  auto stream = NewStream();
  ASSERT_NE(stream, nullptr);
  std::shared_ptr<ClientEvent> event = client_->CreateEvent();
  ASSERT_TRUE(client_->RecordEvent(*stream, event).ok());
  ASSERT_TRUE(event->Wait().ok());
  Gate* release = Hold(*stream);
  ASSERT_TRUE(client_->RecordEvent(*stream, event).ok());
  EXPECT_EQ(event->Query(), ClientEvent::State::kPending);  // waits for the latest recording
  release->Open();
  EXPECT_TRUE(event->Wait().ok());
  EXPECT_EQ(event->Query(), ClientEvent::State::kComplete);
}

TEST_F(DeviceClientTest, WaitForEventHoldsBackTheWaitingStream) {
  auto producer = NewStream();
  auto consumer = NewStream();
  ASSERT_TRUE(producer && consumer);
  constexpr uint64_t kSize = 64 << 10;
  const std::vector<uint8_t> data = Pattern(kSize, 3);
  std::vector<uint8_t> out(kSize, 0);
  const uint64_t x = NewBuffer(kSize);
  const uint64_t y = NewBuffer(kSize);

  Gate* reached;
  Gate* release = Hold(*producer, &reached);
  ASSERT_TRUE(client_->CopyHostToDevice(*producer, x, data.data(), kSize).ok());
  ASSERT_TRUE(client_->CopyDeviceToDevice(*producer, y, x, kSize).ok());
  std::shared_ptr<ClientEvent> produced = client_->CreateEvent();
  ASSERT_TRUE(client_->RecordEvent(*producer, produced).ok());
  ASSERT_TRUE(client_->WaitForEvent(*consumer, *produced).ok());
  ASSERT_TRUE(client_->CopyDeviceToHost(*consumer, out.data(), y, kSize).ok());
  std::shared_ptr<ClientEvent> consumed = client_->CreateEvent();
  ASSERT_TRUE(client_->RecordEvent(*consumer, consumed).ok());

  reached->Wait();  // the producer is held before its copies
  EXPECT_EQ(consumed->Query(), ClientEvent::State::kPending);
  release->Open();
  EXPECT_TRUE(consumed->Wait().ok());
  EXPECT_EQ(out, data);
  EXPECT_TRUE(client_->DestroyStream(std::move(producer)).ok());
  EXPECT_TRUE(client_->DestroyStream(std::move(consumer)).ok());
}

TEST_F(DeviceClientTest, StreamDependencyHoldsBackTheDependentStream) {
  auto first = NewStream();
  auto second = NewStream();
  ASSERT_TRUE(first && second);
  constexpr uint64_t kSize = 4096;
  const std::vector<uint8_t> data = Pattern(kSize, 11);
  std::vector<uint8_t> out(kSize, 0);
  const uint64_t x = NewBuffer(kSize);

  Gate* release = Hold(*first);
  ASSERT_TRUE(client_->CopyHostToDevice(*first, x, data.data(), kSize).ok());
  ASSERT_TRUE(client_->CreateStreamDependency(*second, *first).ok());
  ASSERT_TRUE(client_->CopyDeviceToHost(*second, out.data(), x, kSize).ok());
  std::shared_ptr<ClientEvent> done = client_->CreateEvent();
  ASSERT_TRUE(client_->RecordEvent(*second, done).ok());
  EXPECT_EQ(done->Query(), ClientEvent::State::kPending);
  release->Open();
  EXPECT_TRUE(client_->SynchronizeStream(*second).ok());
  EXPECT_EQ(done->Query(), ClientEvent::State::kComplete);
  EXPECT_EQ(out, data);
}

TEST_F(DeviceClientTest, SynchronizeStreamWaitsForHeldWork) {
  auto stream = NewStream();
  ASSERT_NE(stream, nullptr);
  constexpr uint64_t kSize = 256 << 10;
  const std::vector<uint8_t> data = Pattern(kSize, 5);
  std::vector<uint8_t> out(kSize, 0);
  const uint64_t x = NewBuffer(kSize);

  Gate* reached;
  Gate* release = Hold(*stream, &reached);
  ASSERT_TRUE(client_->CopyHostToDevice(*stream, x, data.data(), kSize).ok());
  ASSERT_TRUE(client_->CopyDeviceToHost(*stream, out.data(), x, kSize).ok());
  std::atomic<bool> returned{false};
  bool data_there_on_return = false;
  std::thread synchronizer([&] {
    EXPECT_TRUE(client_->SynchronizeStream(*stream).ok());
    data_there_on_return = out == data;
    returned = true;
  });
  reached->Wait();
  EXPECT_FALSE(returned.load());  // the stream is held: nothing can have completed
  release->Open();
  synchronizer.join();
  EXPECT_TRUE(data_there_on_return);
}

TEST_F(DeviceClientTest, HostCallbacksRunInStreamOrderAndSynchronizeWaitsForThem) {
  auto stream = NewStream();
  ASSERT_NE(stream, nullptr);
  OrderLog log;
  std::atomic<bool> on_caller_thread{false};
  const std::thread::id caller = std::this_thread::get_id();
  constexpr int kCallbacks = 50;
  for (int i = 0; i < kCallbacks; ++i) {
    ASSERT_TRUE(client_
                    ->HostCallback(*stream,
                                   [&, i](const absl::Status& status) {
                                     EXPECT_TRUE(status.ok()) << status;
                                     if (std::this_thread::get_id() == caller) {
                                       on_caller_thread = true;
                                     }
                                     log.Append(i);
                                   })
                    .ok());
  }
  ASSERT_TRUE(client_->SynchronizeStream(*stream).ok());
  std::vector<int64_t> expected;
  for (int i = 0; i < kCallbacks; ++i) expected.push_back(i);
  EXPECT_EQ(log.values(), expected);  // all of them, already, in order
  EXPECT_FALSE(on_caller_thread);     // asynchronous: run by the stream, not by the poster
}

TEST_F(DeviceClientTest, HostCallbackThatSynchronizesItsOwnStreamGetsAnErrorNotAHang) {
  auto stream = NewStream();
  ASSERT_NE(stream, nullptr);
  absl::Status inner = absl::OkStatus();
  ASSERT_TRUE(client_
                  ->HostCallback(*stream,
                                 [&](const absl::Status&) {
                                   inner = client_->SynchronizeStream(*stream);
                                 })
                  .ok());
  ASSERT_TRUE(client_->SynchronizeStream(*stream).ok());
  EXPECT_EQ(inner.code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(DeviceClientTest, TimerMeasuresTheStreamOrderedInterval) {
  auto stream = NewStream();
  ASSERT_NE(stream, nullptr);
  auto timer = std::make_shared<ClientTimer>();
  EXPECT_EQ(timer->ElapsedNanoseconds(), 0u);
  const uint64_t x = NewBuffer(1 << 20);
  ASSERT_TRUE(client_->StartTimer(*stream, timer).ok());
  ASSERT_TRUE(client_->Memset(*stream, x, 0x5A, 1, 1 << 20).ok());
  ASSERT_TRUE(client_->StopTimer(*stream, timer).ok());
  ASSERT_TRUE(client_->SynchronizeStream(*stream).ok());
  EXPECT_GT(timer->ElapsedNanoseconds(), 0u);
}

TEST_F(DeviceClientTest, CountsCommandsRoundTripsAndBytes) {
  auto stream = NewStream();
  ASSERT_NE(stream, nullptr);
  const uint64_t x = NewBuffer(4096);
  std::vector<uint8_t> host(4096, 1);
  ClientCounters& counters = client_->counters();
  EXPECT_EQ(counters.commands(CommandKind::kCreateStream), 1u);
  EXPECT_EQ(counters.commands(CommandKind::kAllocate), 1u);
  EXPECT_EQ(counters.round_trips(), 2u);
  EXPECT_EQ(counters.bytes_in_use(), 4096);

  counters.Reset();
  EXPECT_EQ(counters.round_trips(), 0u);
  EXPECT_EQ(counters.bytes_in_use(), 4096);  // memory still held stays counted

  ASSERT_TRUE(client_->CopyHostToDevice(*stream, x, host.data(), 4096).ok());
  ASSERT_TRUE(client_->CopyDeviceToHost(*stream, host.data(), x, 1000).ok());
  ASSERT_TRUE(client_->Memset(*stream, x, 0, 1, 4096).ok());
  std::shared_ptr<ClientEvent> event = client_->CreateEvent();
  ASSERT_TRUE(client_->RecordEvent(*stream, event).ok());
  event->Query();
  EXPECT_EQ(counters.round_trips(), 0u);  // posted work and local event queries cost none
  EXPECT_EQ(counters.commands(CommandKind::kMemcpyHtoD), 1u);
  EXPECT_EQ(counters.commands(CommandKind::kMemcpyDtoH), 1u);
  EXPECT_EQ(counters.commands(CommandKind::kMemset), 1u);
  EXPECT_EQ(counters.commands(CommandKind::kRecordEvent), 1u);
  EXPECT_EQ(counters.bytes_to_device(), 4096u);
  EXPECT_EQ(counters.bytes_from_device(), 1000u);

  ASSERT_TRUE(client_->SynchronizeStream(*stream).ok());
  EXPECT_EQ(counters.round_trips(), 1u);
  EXPECT_EQ(counters.commands(CommandKind::kSynchronizeStream), 1u);

  ASSERT_TRUE(client_->Free(x, 4096).ok());
  EXPECT_EQ(counters.round_trips(), 2u);
  EXPECT_EQ(counters.bytes_in_use(), 0);

  const std::string json = counters.ToJson();
  EXPECT_NE(json.find("\"memcpy_htod\": 1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"round_trips\": 2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"bytes_to_device\": 4096"), std::string::npos) << json;
  EXPECT_NE(json.find("\"frees\": 1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"peak_bytes_in_use\": 4096"), std::string::npos) << json;
}

// --- the CPU session, below the client --------------------------------------------------------

TEST_F(DeviceClientTest, AnotherSessionCannotUseOrFreeThisSessionsMemory) {
  const uint64_t mine = NewBuffer(4096);
  std::unique_ptr<ExecutorSession> other = executor_->OpenSession(nullptr);
  constexpr uint64_t kOtherStream = 1ull << 40;
  Command create = MakeCommand(CommandKind::kCreateStream, kOtherStream);
  ASSERT_TRUE(other->Handle(create).status.ok());

  std::vector<uint8_t> host(16, 0xEE);
  // Posted; fails when executed.
  ASSERT_TRUE(other
                  ->Handle(CopyIn(CommandKind::kMemcpyHtoD, kOtherStream, mine, host.data(),
                                  host.size()))
                  .status.ok());
  Reply sync = other->Handle(MakeCommand(CommandKind::kSynchronizeStream, kOtherStream));
  EXPECT_EQ(sync.status.code(), absl::StatusCode::kInvalidArgument) << sync.status;

  EXPECT_EQ(other->Handle(CopyOut(CommandKind::kMemcpyNow, 0, mine, host.data(), host.size()))
                .status.code(),
            absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(other->Handle(FreeCommand(mine)).status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(executor_->arena(0).Info().bytes_in_use, 4096u);
}

TEST_F(DeviceClientTest, ClosingASessionReleasesItsMemory) {
  const uint64_t before = executor_->arena(1).Info().bytes_in_use;
  {
    std::unique_ptr<ExecutorSession> other = executor_->OpenSession(nullptr);
    for (int i = 0; i < 3; ++i) {
      Command allocate;
      allocate.kind = CommandKind::kAllocate;
      allocate.device = 1;
      allocate.size = 1 << 20;
      ASSERT_TRUE(other->Handle(allocate).status.ok());
    }
    EXPECT_EQ(executor_->arena(1).Info().bytes_in_use, before + (3u << 20));
  }
  EXPECT_EQ(executor_->arena(1).Info().bytes_in_use, before);
}

TEST_F(DeviceClientTest, SessionRejectsUnknownStreamsDevicesAndKinds) {
  std::unique_ptr<ExecutorSession> session = executor_->OpenSession(nullptr);
  Reply unknown_stream = session->Handle(MakeCommand(CommandKind::kMemset, 12345));
  EXPECT_EQ(unknown_stream.status.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown_stream.status.message().find("memset"), std::string::npos);
  EXPECT_EQ(session->Handle(MakeCommand(CommandKind::kSynchronizeStream, 12345)).status.code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(session->Handle(MakeCommand(CommandKind::kDestroyStream, 12345)).status.code(),
            absl::StatusCode::kNotFound);

  Command allocate;
  allocate.kind = CommandKind::kAllocate;
  allocate.device = 2;  // the executor has devices 0 and 1
  allocate.size = 256;
  EXPECT_EQ(session->Handle(allocate).status.code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(session->Handle(MakeCommand(CommandKind::kCreateStream, 0)).status.code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(session->Handle(MakeCommand(CommandKind::kCreateStream, 5)).status.ok());
  EXPECT_EQ(session->Handle(MakeCommand(CommandKind::kCreateStream, 5)).status.code(),
            absl::StatusCode::kAlreadyExists);

  Command bogus;
  bogus.kind = CommandKind::kNumKinds;
  EXPECT_EQ(session->Handle(bogus).status.code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(DeviceClientTest, LaunchOfAnUnknownKernelFailsTheStream) {
  auto stream = NewStream();
  ASSERT_NE(stream, nullptr);
  ASSERT_TRUE(client_->dnn().Launch(*stream, static_cast<KernelId>(999), {}, {}, {}).ok());
  absl::Status status = client_->SynchronizeStream(*stream);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("unknown kernel id 999"), std::string::npos) << status;
}

TEST_F(DeviceClientTest, LaunchWithTheWrongArgumentsFailsTheStream) {
  auto stream = NewStream();
  ASSERT_NE(stream, nullptr);
  const uint64_t x = NewBuffer(1024);
  // The random family's uniform kernel takes one buffer and a Philox parameter block.
  const BufferArg two[] = {{x, 1024}, {x, 1024}};
  random::PhiloxParams params;
  params.count = 16;
  const uint8_t* raw = reinterpret_cast<const uint8_t*>(&params);
  ASSERT_TRUE(client_->dnn()
                  .Launch(*stream, random::kUniform, {}, two,
                          absl::Span<const uint8_t>(raw, sizeof(params)))
                  .ok());
  absl::Status status = client_->SynchronizeStream(*stream);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("random_uniform"), std::string::npos) << status;
  EXPECT_NE(status.message().find("1 buffers"), std::string::npos) << status;
}

// --- Random kernels whose key and counter live in device memory ------------------------------

template <typename P>
absl::Span<const uint8_t> BytesOf(const P& params) {
  return absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(&params), sizeof(params));
}

TEST_F(DeviceClientTest, RandomKernelsDeriveAndReadKeyAndCounterOnTheDeviceInStreamOrder) {
  auto stream = NewStream();
  ASSERT_NE(stream, nullptr);
  constexpr uint64_t kCount = 1000;
  const uint64_t seed = NewBuffer(16), key = NewBuffer(8), counter = NewBuffer(16);
  const uint64_t from_buffers = NewBuffer(kCount * 4), from_params = NewBuffer(kCount * 4);
  struct Case {
    random::SeedParams params;
    std::vector<uint8_t> bytes;
    uint64_t seed0, seed1;  // as TensorFlow reads the seed tensor: int32 -> int64 -> uint64
  };
  const int64_t seed64[2] = {42, -7};
  const int32_t seed32[2] = {-1, 5};
  std::vector<Case> cases(2);
  cases[0].params.dtype = DType::kInt64;
  cases[0].bytes.assign(reinterpret_cast<const uint8_t*>(seed64),
                        reinterpret_cast<const uint8_t*>(seed64) + 16);
  cases[0].seed0 = 42;
  cases[0].seed1 = static_cast<uint64_t>(int64_t{-7});
  cases[1].params.dtype = DType::kInt32;
  cases[1].bytes.assign(reinterpret_cast<const uint8_t*>(seed32),
                        reinterpret_cast<const uint8_t*>(seed32) + 8);
  cases[1].seed0 = static_cast<uint64_t>(int64_t{-1});
  cases[1].seed1 = 5;
  for (const Case& c : cases) {
    ASSERT_TRUE(client_->CopyHostToDevice(*stream, seed, c.bytes.data(), c.bytes.size()).ok());
    const BufferArg derive[] = {{seed, c.bytes.size()}, {key, 8}, {counter, 16}};
    ASSERT_TRUE(client_->dnn()
                    .Launch(*stream, random::kKeyCounterFromSeed, {}, derive, BytesOf(c.params))
                    .ok());
    random::PhiloxParams in_buffers;
    in_buffers.count = kCount;
    in_buffers.flags = random::kKeyCounterInBuffers;
    const BufferArg drawn[] = {{from_buffers, kCount * 4}, {key, 8}, {counter, 16}};
    ASSERT_TRUE(
        client_->dnn().Launch(*stream, random::kUniform, {}, drawn, BytesOf(in_buffers)).ok());

    random::PhiloxParams in_params;
    in_params.count = kCount;
    KeyCounterFromSeed(c.seed0, c.seed1, &in_params.key, in_params.counter);
    const BufferArg reference[] = {{from_params, kCount * 4}};
    ASSERT_TRUE(
        client_->dnn().Launch(*stream, random::kUniform, {}, reference, BytesOf(in_params)).ok());

    uint64_t key_read = 0, counter_read[2] = {0, 0};
    std::vector<float> a(kCount), b(kCount);
    ASSERT_TRUE(client_->CopyDeviceToHost(*stream, &key_read, key, 8).ok());
    ASSERT_TRUE(client_->CopyDeviceToHost(*stream, counter_read, counter, 16).ok());
    ASSERT_TRUE(client_->CopyDeviceToHost(*stream, a.data(), from_buffers, kCount * 4).ok());
    ASSERT_TRUE(client_->CopyDeviceToHost(*stream, b.data(), from_params, kCount * 4).ok());
    ASSERT_TRUE(client_->SynchronizeStream(*stream).ok());
    EXPECT_EQ(key_read, in_params.key);
    EXPECT_EQ(counter_read[0], in_params.counter[0]);
    EXPECT_EQ(counter_read[1], in_params.counter[1]);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), kCount * 4), 0);
    EXPECT_NE(a[0], a[1]);
  }
}

TEST_F(DeviceClientTest, RandomLaunchesWithABadKeyCounterLayoutFailTheStream) {
  auto stream = NewStream();
  ASSERT_NE(stream, nullptr);
  const uint64_t y = NewBuffer(64), small = NewBuffer(4), words = NewBuffer(16);
  random::PhiloxParams flagged;
  flagged.count = 16;
  flagged.flags = random::kKeyCounterInBuffers;
  random::PhiloxParams unknown = flagged;
  unknown.flags = 2;
  random::SeedParams float_seed;
  float_seed.dtype = DType::kFloat32;
  const BufferArg only_y[] = {{y, 64}};
  const BufferArg short_key[] = {{y, 64}, {small, 4}, {words, 16}};
  const BufferArg short_counter[] = {{y, 64}, {words, 8}, {small, 4}};
  const BufferArg three[] = {{y, 64}, {words, 8}, {words, 16}};
  const BufferArg seed_key_counter[] = {{words, 16}, {words, 8}, {words, 16}};
  struct Bad {
    KernelId kernel;
    absl::Span<const BufferArg> buffers;
    absl::Span<const uint8_t> params;
    const char* message;
  };
  const Bad cases[] = {
      {random::kUniform, three, BytesOf(unknown), "unknown flags 2"},
      {random::kUniform, only_y, BytesOf(flagged), "3 buffers"},
      {random::kUniform, short_key, BytesOf(flagged), "buffer 1 holds 4 bytes"},
      {random::kUniform, short_counter, BytesOf(flagged), "buffer 2 holds 4 bytes"},
      {random::kKeyCounterFromSeed, seed_key_counter, BytesOf(float_seed), "int32 or int64"},
  };
  for (const Bad& bad : cases) {
    ASSERT_TRUE(client_->dnn().Launch(*stream, bad.kernel, {}, bad.buffers, bad.params).ok());
    absl::Status status = client_->SynchronizeStream(*stream);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad.message;
    EXPECT_NE(status.message().find(bad.message), std::string::npos) << status;
  }
}

TEST(CpuExecutor, CreateRejectsABadDeviceCount) {
  CpuExecutor::Options options;
  options.memory_limit_per_device = 1 << 20;
  options.device_count = 0;
  EXPECT_EQ(CpuExecutor::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.device_count = 257;
  EXPECT_EQ(CpuExecutor::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.device_count = 2;
  absl::StatusOr<std::unique_ptr<CpuExecutor>> executor = CpuExecutor::Create(options);
  ASSERT_TRUE(executor.ok()) << executor.status();
  EXPECT_EQ((*executor)->device_count(), 2);
  EXPECT_EQ((*executor)->ArenaForAddress(MakeDeviceAddress(1, 0)), &(*executor)->arena(1));
  EXPECT_EQ((*executor)->ArenaForAddress(MakeDeviceAddress(2, 0)), nullptr);
  EXPECT_EQ((*executor)->ArenaForAddress(0x1000), nullptr);
}

// Two devices on two backends (two executors, as two servers would be), each its backend's
// device 0: their addresses must not alias, and copies between them are staged by the client.
class TwoBackendsTest : public testing::Test {
 protected:
  TwoBackendsTest() {
    CpuExecutor::Options options;
    options.memory_limit_per_device = 16ull << 20;
    options.compute_threads = 1;
    for (int i = 0; i < 2; ++i) {
      executors_[i] = *CpuExecutor::Create(options);
      transports_[i] = std::make_unique<InprocTransport>(executors_[i]->OpenSession(&hub_));
      clients_[i] = std::make_unique<DeviceClient>(i, 0, transports_[i].get(), &hub_);
    }
    for (auto& client : clients_) client->SetPeers({clients_[0].get(), clients_[1].get()});
  }
  ~TwoBackendsTest() override {
    for (auto& client : clients_) client.reset();
    for (auto& transport : transports_) transport.reset();
  }
  std::vector<float> Read(DeviceClient& client, uint64_t address, size_t count) {
    std::vector<float> values(count, -1.0f);
    EXPECT_TRUE(client.CopyNow(values.data(), 0, nullptr, address, count * sizeof(float)).ok());
    return values;
  }

  NotificationHub hub_;
  std::unique_ptr<CpuExecutor> executors_[2];
  std::unique_ptr<InprocTransport> transports_[2];
  std::unique_ptr<DeviceClient> clients_[2];
};

TEST_F(TwoBackendsTest, AddressesOfDevicesOnDifferentBackendsNeverAlias) {
  const uint64_t first = *clients_[0]->Allocate(4096);
  const uint64_t second = *clients_[1]->Allocate(4096);
  EXPECT_NE(first, second);  // both backends handed out offset 0 of their device 0
  uint32_t device;
  uint64_t offset;
  ASSERT_TRUE(DecodeDeviceAddress(second, &device, &offset));
  EXPECT_EQ(device, 1u);  // the ordinal, not the backend's device index
  EXPECT_TRUE(clients_[1]->Free(second, 4096).ok());
  EXPECT_TRUE(clients_[0]->Free(first, 4096).ok());
}

TEST_F(TwoBackendsTest, AStreamCopyToAnotherBackendArrivesBeforeTheCallReturns) {
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i);
  const uint64_t bytes = values.size() * sizeof(float);
  const uint64_t source = *clients_[0]->Allocate(bytes);
  const uint64_t destination = *clients_[1]->Allocate(bytes);
  std::unique_ptr<ClientStream> stream = *clients_[0]->CreateStream();
  ASSERT_TRUE(clients_[0]->CopyHostToDevice(*stream, source, values.data(), bytes).ok());
  ASSERT_TRUE(clients_[0]->CopyDeviceToDevice(*stream, destination, source, bytes).ok());
  EXPECT_EQ(Read(*clients_[1], destination, values.size()), values);  // no sync needed
  EXPECT_TRUE(clients_[0]->SynchronizeStream(*stream).ok());
  EXPECT_TRUE(clients_[0]->DestroyStream(std::move(stream)).ok());
}

TEST_F(TwoBackendsTest, ASynchronousCopyCrossesBackendsInEitherDirection) {
  const std::vector<float> values = {1.0f, -2.0f, 3.5f, 4.25f};
  const uint64_t bytes = values.size() * sizeof(float);
  const uint64_t on_first = *clients_[0]->Allocate(bytes);
  const uint64_t on_second = *clients_[1]->Allocate(bytes);
  ASSERT_TRUE(clients_[0]->CopyNow(nullptr, on_first, values.data(), 0, bytes).ok());
  // Asked of either device: the addresses say where the bytes are.
  ASSERT_TRUE(clients_[1]->CopyNow(nullptr, on_second, nullptr, on_first, bytes).ok());
  EXPECT_EQ(Read(*clients_[1], on_second, values.size()), values);
  ASSERT_TRUE(clients_[0]->CopyNow(nullptr, on_first + 4, nullptr, on_second, 4).ok());
  EXPECT_EQ(Read(*clients_[0], on_first, 2), (std::vector<float>{1.0f, 1.0f}));
}

TEST_F(TwoBackendsTest, WorkNamingMemoryOfAnotherBackendIsRefusedNamingBothDevices) {
  const uint64_t theirs = *clients_[1]->Allocate(64);
  std::unique_ptr<ClientStream> stream = *clients_[0]->CreateStream();
  const float value = 1.0f;
  absl::Status status = clients_[0]->CopyHostToDevice(*stream, theirs, &value, sizeof(value));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("GPU:1"), std::string::npos) << status;
  EXPECT_NE(std::string(status.message()).find("another backend"), std::string::npos) << status;
  EXPECT_EQ(clients_[0]->Free(theirs, 64).code(), absl::StatusCode::kInvalidArgument);
  // Nothing reached the other backend: its memory is intact and still its own.
  EXPECT_EQ(Read(*clients_[1], theirs, 1), std::vector<float>{0.0f});
  EXPECT_TRUE(clients_[1]->Free(theirs, 64).ok());
  EXPECT_TRUE(clients_[0]->DestroyStream(std::move(stream)).ok());
}

TEST_F(TwoBackendsTest, ACopyAfterAFailedStreamReportsTheStreamsErrorAndWritesNothing) {
  const uint64_t destination = *clients_[1]->Allocate(64);
  std::unique_ptr<ClientStream> stream = *clients_[0]->CreateStream();
  ASSERT_TRUE(clients_[0]->dnn().Launch(*stream, static_cast<KernelId>(999), {}, {}, {}).ok());
  const uint64_t source = *clients_[0]->Allocate(64);
  absl::Status status = clients_[0]->CopyDeviceToDevice(*stream, destination, source, 64);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(std::string(status.message()).find("999"), std::string::npos) << status;
  EXPECT_EQ(Read(*clients_[1], destination, 1), std::vector<float>{0.0f});
  EXPECT_TRUE(clients_[0]->DestroyStream(std::move(stream)).ok());
}

}  // namespace
}  // namespace vgpu
