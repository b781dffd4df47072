// StreamExecutor C API tests of streams as TensorFlow uses them: FIFO order, host callbacks,
// events within and across streams, stream dependencies, synchronisation, timers, and the
// stream's first error (reported by get_stream_status / block_host_until_done, naming the failing
// command, skipping later work, leaving other streams alone).
//
// A stream is kept busy deterministically with a host callback that blocks on a gate: per the
// StreamExecutor contract, "host callbacks block/occupy the stream just as device functions
// (execute one at a time, block later stream operations)".
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/backend/device_address.h"
#include "se_test_support.h"

namespace vgpu_test {
namespace {

using StreamExecutorStream = StreamExecutorTest;

// Records, on the callback, its index and whether the copy queued just before it had landed.
struct OrderedCallback {
  int index;
  const uint32_t* landed_word;  // host memory the preceding memcpy_dtoh wrote
  OrderLog* order;
  std::atomic<int>* wrong_data;
  std::atomic<int>* bad_status;
};

void RecordOrder(void* arg, TF_Status* status) {
  auto* callback = static_cast<OrderedCallback*>(arg);
  if (TF_GetCode(status) != TF_OK) ++*callback->bad_status;
  if (*callback->landed_word != static_cast<uint32_t>(callback->index)) ++*callback->wrong_data;
  callback->order->Append(callback->index);
}

void CountCall(void* arg, TF_Status*) { ++*static_cast<std::atomic<int>*>(arg); }

TEST_F(StreamExecutorStream, RunsWorkInFifoOrder) {
  // Each memset32 overwrites one word; the copy after it must see that value and no later one.
  constexpr int kSteps = 200;
  SP_DeviceMemoryBase word = Allocate(4);
  ASSERT_NE(word.opaque, nullptr);
  uint32_t* seen = Host<uint32_t>(kSteps);
  SP_Stream stream = CreateStream();
  TfStatus status;
  for (int i = 0; i < kSteps; ++i) {
    se().memset32(device(), stream, &word, static_cast<uint32_t>(i), 4, status);
    ASSERT_TF_OK(status);
    se().memcpy_dtoh(device(), stream, &seen[i], &word, 4, status);
    ASSERT_TF_OK(status);
  }
  se().block_host_until_done(device(), stream, status);
  ASSERT_TF_OK(status);
  for (int i = 0; i < kSteps; ++i) EXPECT_EQ(seen[i], static_cast<uint32_t>(i)) << "step " << i;
}

TEST_F(StreamExecutorStream, HostCallbacksRunInStreamOrderAfterThePrecedingWork) {
  constexpr int kCallbacks = 50;
  SP_DeviceMemoryBase word = Allocate(4);
  ASSERT_NE(word.opaque, nullptr);
  uint32_t* landed = Host<uint32_t>(kCallbacks);
  OrderLog order;
  std::atomic<int> wrong_data{0};
  std::atomic<int> bad_status{0};
  std::vector<OrderedCallback> callbacks(kCallbacks);
  SP_Stream stream = CreateStream();
  TfStatus status;
  for (int i = 0; i < kCallbacks; ++i) {
    callbacks[i] = {i, &landed[i], &order, &wrong_data, &bad_status};
    se().memset32(device(), stream, &word, static_cast<uint32_t>(i), 4, status);
    se().memcpy_dtoh(device(), stream, &landed[i], &word, 4, status);
    ASSERT_TRUE(se().host_callback(device(), stream, RecordOrder, &callbacks[i]));
  }
  // block_host_until_done also waits for the callbacks posted before it.
  se().block_host_until_done(device(), stream, status);
  ASSERT_TF_OK(status);
  std::vector<int64_t> expected;
  for (int i = 0; i < kCallbacks; ++i) expected.push_back(i);
  EXPECT_EQ(order.values(), expected);
  EXPECT_EQ(wrong_data.load(), 0) << "a callback ran before the copy queued ahead of it";
  EXPECT_EQ(bad_status.load(), 0) << "callback_fn got a non-OK TF_Status";
}

TEST_F(StreamExecutorStream, BlockHostUntilDoneWaitsForCallbacksPostedBeforeIt) {
  SP_Stream stream = CreateStream();
  std::atomic<int> calls{0};
  constexpr int kCallbacks = 100;
  for (int i = 0; i < kCallbacks; ++i) {
    ASSERT_TRUE(se().host_callback(device(), stream, CountCall, &calls));
  }
  TfStatus status;
  se().block_host_until_done(device(), stream, status);
  ASSERT_TF_OK(status);
  EXPECT_EQ(calls.load(), kCallbacks);
}

TEST_F(StreamExecutorStream, HostCallbackBlocksLaterWorkOnItsStream) {
  constexpr uint64_t kSize = 4096;
  const std::vector<uint8_t> zeros(kSize, 0);
  SP_DeviceMemoryBase x = AllocateHolding(zeros.data(), kSize);
  ASSERT_NE(x.opaque, nullptr);
  uint8_t* data = HostBytes(kSize, 0x77);
  SP_Stream stream = CreateStream();
  SP_Event after = CreateEvent();
  TfStatus status;

  StreamHold* hold = HoldStream(stream);
  se().memcpy_htod(device(), stream, &x, data, kSize, status);
  ASSERT_TF_OK(status);
  se().record_event(device(), stream, after, status);
  ASSERT_TF_OK(status);
  hold->reached.Wait();  // the callback is running and has not returned

  // Nothing queued after the callback may run until it returns.
  EXPECT_EQ(se().get_event_status(device(), after), SE_EVENT_PENDING);
  EXPECT_EQ(Download(x, kSize), zeros) << "the copy after the callback already ran";
  // Give a wrongly running stream time to show itself (the pass path waits the full time).
  Gate event_done;
  std::thread waiter([&] {
    TfStatus wait_status;
    se().block_host_for_event(device(), after, wait_status);
    event_done.Open();
  });
  EXPECT_FALSE(event_done.WaitFor(std::chrono::milliseconds(100)))
      << "an event recorded after a running host callback completed before the callback returned";
  hold->release.Open();
  waiter.join();
  EXPECT_EQ(se().get_event_status(device(), after), SE_EVENT_COMPLETE);
  EXPECT_EQ(Download(x, kSize), std::vector<uint8_t>(kSize, 0x77));
}

TEST_F(StreamExecutorStream, EventStatusGoesFromPendingToComplete) {
  SP_Stream stream = CreateStream();
  SP_Event never_recorded = CreateEvent();
  EXPECT_EQ(se().get_event_status(device(), never_recorded), SE_EVENT_COMPLETE);

  SP_Event event = CreateEvent();
  TfStatus status;
  StreamHold* hold = HoldStream(stream);
  se().record_event(device(), stream, event, status);
  ASSERT_TF_OK(status);
  EXPECT_EQ(se().get_event_status(device(), event), SE_EVENT_PENDING);
  hold->release.Open();
  se().block_host_for_event(device(), event, status);
  EXPECT_TF_OK(status);
  EXPECT_EQ(se().get_event_status(device(), event), SE_EVENT_COMPLETE);
}

TEST_F(StreamExecutorStream, WaitForEventOrdersWorkAcrossStreams) {
  constexpr uint64_t kSize = 512 << 10;
  const HostTransfer io = PrepareTransfer(kSize, 21);
  constexpr int kChain = 8;
  std::vector<SP_DeviceMemoryBase> chain;
  for (int i = 0; i < kChain; ++i) {
    chain.push_back(Allocate(kSize));
    ASSERT_NE(chain.back().opaque, nullptr);
  }
  SP_Stream producer = CreateStream();
  SP_Stream consumer = CreateStream();
  SP_Event produced = CreateEvent();
  SP_Event consumed = CreateEvent();
  TfStatus status;

  // The producer: held, then a long chain of copies, then the event.
  StreamHold* hold = HoldStream(producer);
  se().memcpy_htod(device(), producer, &chain[0], io.source, kSize, status);
  for (int i = 1; i < kChain; ++i) {
    se().memcpy_dtod(device(), producer, &chain[i], &chain[i - 1], kSize, status);
  }
  se().record_event(device(), producer, produced, status);
  ASSERT_TF_OK(status);
  // The consumer waits for it, then reads the end of the chain.
  se().wait_for_event(device(), consumer, produced, status);
  ASSERT_TF_OK(status);
  se().memcpy_dtoh(device(), consumer, io.result, &chain[kChain - 1], kSize, status);
  se().record_event(device(), consumer, consumed, status);
  ASSERT_TF_OK(status);

  ASSERT_NO_FATAL_FAILURE(ExpectPendingUntilReleased(hold, consumed, consumer));
  EXPECT_EQ(se().get_event_status(device(), produced), SE_EVENT_COMPLETE);
  EXPECT_EQ(0, std::memcmp(io.result, io.data.data(), kSize));
}

TEST_F(StreamExecutorStream, StreamDependencyOrdersWorkAcrossStreams) {
  constexpr uint64_t kSize = 256 << 10;
  DeviceRoundTrip io = PrepareRoundTrip(kSize, 33);
  ASSERT_TRUE(io.a.opaque && io.b.opaque);
  SP_Stream first = CreateStream();
  SP_Stream second = CreateStream();
  SP_Event second_done = CreateEvent();
  TfStatus status;

  StreamHold* hold = HoldStream(first);
  se().memcpy_htod(device(), first, &io.a, io.source, kSize, status);
  se().memcpy_dtod(device(), first, &io.b, &io.a, kSize, status);
  se().create_stream_dependency(device(), second, first, status);
  ASSERT_TF_OK(status);
  se().memcpy_dtoh(device(), second, io.result, &io.b, kSize, status);
  se().record_event(device(), second, second_done, status);
  ASSERT_TF_OK(status);

  ASSERT_NO_FATAL_FAILURE(ExpectPendingUntilReleased(hold, second_done, second));
  EXPECT_EQ(0, std::memcmp(io.result, io.data.data(), kSize));
}

TEST_F(StreamExecutorStream, BlockHostUntilDoneWaitsForQueuedWork) {
  constexpr uint64_t kSize = 2 << 20;
  const HostTransfer io = PrepareTransfer(kSize, 45);
  SP_DeviceMemoryBase x = Allocate(kSize);
  ASSERT_NE(x.opaque, nullptr);
  SP_Stream stream = CreateStream();
  TfStatus status;

  StreamHold* hold = HoldStream(stream);
  se().memcpy_htod(device(), stream, &x, io.source, kSize, status);
  se().memcpy_dtoh(device(), stream, io.result, &x, kSize, status);
  ASSERT_TF_OK(status);
  std::atomic<bool> returned{false};
  bool result_complete_on_return = false;
  std::thread synchronizer([&] {
    TfStatus sync_status;
    se().block_host_until_done(device(), stream, sync_status);
    EXPECT_TF_OK(sync_status);
    result_complete_on_return = std::memcmp(io.result, io.data.data(), kSize) == 0;
    returned = true;
  });
  hold->reached.Wait();
  EXPECT_FALSE(returned.load());
  hold->release.Open();
  synchronizer.join();
  EXPECT_TRUE(result_complete_on_return);
}

TEST_F(StreamExecutorStream, BlockHostForEventWaitsForTheRecording) {
  constexpr uint64_t kSize = 1 << 20;
  uint8_t* source = HostBytes(kSize, 0x3C);
  uint8_t* result = HostBytes(kSize, 0);
  SP_DeviceMemoryBase x = Allocate(kSize);
  ASSERT_NE(x.opaque, nullptr);
  SP_Stream stream = CreateStream();
  SP_Event event = CreateEvent();
  TfStatus status;
  se().memcpy_htod(device(), stream, &x, source, kSize, status);
  se().memcpy_dtoh(device(), stream, result, &x, kSize, status);
  se().record_event(device(), stream, event, status);
  ASSERT_TF_OK(status);
  se().block_host_for_event(device(), event, status);
  ASSERT_TF_OK(status);
  EXPECT_EQ(se().get_event_status(device(), event), SE_EVENT_COMPLETE);
  EXPECT_EQ(0, std::memcmp(result, source, kSize));
}

TEST_F(StreamExecutorStream, SynchronizeAllActivityWaitsForEveryStream) {
  constexpr uint64_t kSize = 2 << 20;
  uint8_t* source = HostBytes(kSize, 0x5A);
  uint8_t* result1 = HostBytes(kSize, 0);
  uint8_t* result2 = HostBytes(kSize, 0);
  SP_DeviceMemoryBase x = Allocate(kSize);
  SP_DeviceMemoryBase y = Allocate(kSize);
  ASSERT_TRUE(x.opaque && y.opaque);
  SP_Stream s1 = CreateStream();
  SP_Stream s2 = CreateStream();
  TfStatus status;
  se().memcpy_htod(device(), s1, &x, source, kSize, status);
  se().memcpy_dtoh(device(), s1, result1, &x, kSize, status);
  se().memcpy_htod(device(), s2, &y, source, kSize, status);
  se().memcpy_dtoh(device(), s2, result2, &y, kSize, status);
  se().synchronize_all_activity(device(), status);
  ASSERT_TF_OK(status);
  EXPECT_EQ(0, std::memcmp(result1, source, kSize));
  EXPECT_EQ(0, std::memcmp(result2, source, kSize));
}

TEST_F(StreamExecutorStream, TimerMeasuresStreamOrderedWork) {
  RegisteredPlatform& r = RegisteredPlatform::Get();
  SP_TimerFns timer_fns{SP_TIMER_FNS_STRUCT_SIZE};
  TfStatus status;
  r.platform_fns.create_timer_fns(&r.platform, &timer_fns, status);
  ASSERT_TF_OK(status);
  ASSERT_NE(timer_fns.nanoseconds, nullptr);

  SP_DeviceMemoryBase x = Allocate(4 << 20);
  ASSERT_NE(x.opaque, nullptr);
  SP_Stream stream = CreateStream();
  SP_Timer timer = nullptr;
  se().create_timer(device(), &timer, status);
  ASSERT_TF_OK(status);
  se().start_timer(device(), stream, timer, status);
  se().memset(device(), stream, &x, 1, 4 << 20, status);
  se().stop_timer(device(), stream, timer, status);
  ASSERT_TF_OK(status);
  se().block_host_until_done(device(), stream, status);
  ASSERT_TF_OK(status);
  EXPECT_GT(timer_fns.nanoseconds(timer), 0u);
  se().destroy_timer(device(), timer);
}

// --- the first error ---------------------------------------------------------------------------

// A tagged address of device 0 past the end of its memory: never inside an allocation.
SP_DeviceMemoryBase Unallocated(uint64_t size) {
  SP_DeviceMemoryBase memory{SP_DEVICE_MEMORY_BASE_STRUCT_SIZE};
  memory.opaque = reinterpret_cast<void*>(vgpu::MakeDeviceAddress(0, kMemoryLimit + 4096));
  memory.size = size;
  return memory;
}

class StreamExecutorErrors : public StreamExecutorTest {
 protected:
  // Enqueues on a new stream, which it returns, a 64-byte copy from the host into Unallocated
  // memory: the stream's failure. `status` is that of the enqueueing.
  SP_Stream StreamWithAFailingCopy(TfStatus& status) {
    uint8_t* data = HostBytes(64, 9);
    SP_DeviceMemoryBase nowhere = Unallocated(64);
    SP_Stream stream = CreateStream();
    se().memcpy_htod(device(), stream, &nowhere, data, 64, status);
    return stream;
  }
};

TEST_F(StreamExecutorErrors, BadLaunchAddressFailsTheStreamAndNamesTheCommand) {
  constexpr uint64_t kCount = 256;
  constexpr uint64_t kBytes = kCount * sizeof(float);
  const std::vector<uint8_t> zeros(kBytes, 0);
  SP_DeviceMemoryBase output = Allocate(kBytes);
  SP_DeviceMemoryBase later = AllocateHolding(zeros.data(), kBytes);
  ASSERT_TRUE(output.opaque && later.opaque);
  uint8_t* ones = HostBytes(kBytes, 1);
  SP_Stream failing = CreateStream();
  SP_Stream healthy = CreateStream();
  TfStatus status;

  const vgpu::BufferArg buffers[] = {Buffer(Unallocated(kBytes)), Buffer(output)};
  ASSERT_TRUE(LaunchRelu(failing, vgpu::activation::kForward, buffers, kCount).ok());
  se().memcpy_htod(device(), failing, &later, ones, kBytes, status);  // after the failure
  EXPECT_TF_OK(status);  // posting succeeds; the work is skipped

  TfStatus peeked;
  se().get_stream_status(device(), failing, peeked);  // may run before the failure is reached
  se().block_host_until_done(device(), failing, status);
  EXPECT_EQ(status.code(), TF_INVALID_ARGUMENT) << Describe(status);
  EXPECT_NE(status.message().find("launch on stream"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("activation_forward"), std::string::npos) << status.message();
  if (peeked.code() != TF_OK) {
    EXPECT_EQ(peeked.message(), status.message());  // the first error
  }
  EXPECT_EQ(Download(later, kBytes), zeros) << "work after the failure ran";

  // Reported once: the synchronisation cleared it, and the stream runs new work again.
  TfStatus stream_status;
  se().get_stream_status(device(), failing, stream_status);
  EXPECT_TF_OK(stream_status);
  se().memcpy_htod(device(), failing, &later, ones, kBytes, status);
  se().block_host_until_done(device(), failing, status);
  EXPECT_TF_OK(status);
  EXPECT_EQ(0, std::memcmp(Download(later, kBytes).data(), ones, kBytes));

  // Other streams are unaffected.
  uint8_t* result = HostBytes(kBytes, 0);
  se().memcpy_htod(device(), healthy, &output, ones, kBytes, status);
  se().memcpy_dtoh(device(), healthy, result, &output, kBytes, status);
  se().block_host_until_done(device(), healthy, status);
  EXPECT_TF_OK(status);
  EXPECT_EQ(0, std::memcmp(result, ones, kBytes));
  se().get_stream_status(device(), healthy, status);
  EXPECT_TF_OK(status);
}

TEST_F(StreamExecutorErrors, MemcpyToUnallocatedAddressFailsTheStream) {
  TfStatus status;
  SP_Stream stream = StreamWithAFailingCopy(status);
  EXPECT_TF_OK(status);
  se().block_host_until_done(device(), stream, status);
  EXPECT_EQ(status.code(), TF_INVALID_ARGUMENT) << Describe(status);
  EXPECT_NE(status.message().find("memcpy_htod"), std::string::npos) << status.message();
  // Reported once: the next synchronisation point finds the stream healthy again.
  se().block_host_until_done(device(), stream, status);
  EXPECT_TF_OK(status);
}

TEST_F(StreamExecutorErrors, MarkersAfterAFailureStillRunSoNobodyHangs) {
  TfStatus status;
  SP_Stream stream = StreamWithAFailingCopy(status);
  SP_Event event = CreateEvent();
  std::atomic<int> calls{0};
  se().record_event(device(), stream, event, status);
  ASSERT_TRUE(se().host_callback(device(), stream, CountCall, &calls));
  TfStatus event_status;
  se().block_host_for_event(device(), event, event_status);  // returns, does not hang
  EXPECT_NE(se().get_event_status(device(), event), SE_EVENT_PENDING);
  se().block_host_until_done(device(), stream, status);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(StreamExecutorErrors, SyncMemcpyOfUnallocatedMemoryReturnsAnError) {
  std::vector<uint8_t> host(64, 0);
  SP_DeviceMemoryBase nowhere = Unallocated(64);
  TfStatus status;
  se().sync_memcpy_dtoh(device(), host.data(), &nowhere, 64, status);
  EXPECT_EQ(status.code(), TF_INVALID_ARGUMENT) << Describe(status);
  se().sync_memcpy_htod(device(), &nowhere, host.data(), 64, status);
  EXPECT_EQ(status.code(), TF_INVALID_ARGUMENT) << Describe(status);
  SP_DeviceMemoryBase real = Allocate(64);
  ASSERT_NE(real.opaque, nullptr);
  se().sync_memcpy_dtod(device(), &real, &nowhere, 64, status);
  EXPECT_EQ(status.code(), TF_INVALID_ARGUMENT) << Describe(status);
}

TEST_F(StreamExecutorErrors, CopyPastTheEndOfAnAllocationFails) {
  SP_DeviceMemoryBase small = Allocate(256);
  ASSERT_NE(small.opaque, nullptr);
  uint8_t* data = HostBytes(512, 1);
  SP_Stream stream = CreateStream();
  TfStatus status;
  se().memcpy_htod(device(), stream, &small, data, 512, status);
  se().block_host_until_done(device(), stream, status);
  EXPECT_EQ(status.code(), TF_INVALID_ARGUMENT) << Describe(status);
  EXPECT_NE(status.message().find("past the end of this client's allocation of 256 bytes"),
            std::string::npos)
      << status.message();
}

}  // namespace
}  // namespace vgpu_test
