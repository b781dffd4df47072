// Tests of the descriptor-reuse method (docs/method.md): the per-stream descriptor queues, the
// iteration-boundary detector on synthetic address sequences, and the virtual DNN API in reuse
// and forward mode over an in-process CPU backing executor.
#include <atomic>
#include <cstring>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/backend/cpu/cpu_executor.h"
#include "plugin/client/descriptor_queues.h"
#include "plugin/client/device_client.h"
#include "plugin/client/dnn_api.h"
#include "plugin/client/iteration_detector.h"
#include "plugin/client/notification_hub.h"
#include "plugin/protocol/kernels/activation.h"
#include "plugin/transport/inproc_transport.h"
#include "test_sync.h"

namespace vgpu {
namespace {

void* P(uintptr_t n) { return reinterpret_cast<void*>(n); }
auto Always = [](void*) { return true; };

// --- DescriptorQueues --------------------------------------------------------------------

TEST(DescriptorQueues, RetainedDescriptorsQueueInDestroyOrder) {
  DescriptorQueues queues;
  EXPECT_TRUE(queues.Retain(1, DescriptorKind::kTensor, P(10)));
  EXPECT_TRUE(queues.Retain(1, DescriptorKind::kTensor, P(20)));
  EXPECT_TRUE(queues.Retain(1, DescriptorKind::kTensor, P(30)));
  EXPECT_EQ(queues.Snapshot(1, DescriptorKind::kTensor),
            (std::vector<void*>{P(10), P(20), P(30)}));
}

TEST(DescriptorQueues, RotateTakesTheHeadAndMovesItToTheTail) {
  DescriptorQueues queues;
  for (uintptr_t p : {10, 20, 30}) queues.Retain(1, DescriptorKind::kTensor, P(p));
  EXPECT_EQ(queues.Rotate(1, DescriptorKind::kTensor, Always), P(10));
  EXPECT_EQ(queues.Snapshot(1, DescriptorKind::kTensor),
            (std::vector<void*>{P(20), P(30), P(10)}));
  EXPECT_EQ(queues.Rotate(1, DescriptorKind::kTensor, Always), P(20));
  EXPECT_EQ(queues.Rotate(1, DescriptorKind::kTensor, Always), P(30));
  // A full cycle reproduces the warm-up order: each iteration reuses the same objects.
  EXPECT_EQ(queues.Rotate(1, DescriptorKind::kTensor, Always), P(10));
}

TEST(DescriptorQueues, QueuesAreSeparatePerStreamAndPerKind) {
  DescriptorQueues queues;
  queues.Retain(1, DescriptorKind::kTensor, P(10));
  queues.Retain(2, DescriptorKind::kTensor, P(20));
  queues.Retain(1, DescriptorKind::kConvolution, P(30));
  EXPECT_EQ(queues.Rotate(2, DescriptorKind::kTensor, Always), P(20));
  EXPECT_EQ(queues.Rotate(1, DescriptorKind::kConvolution, Always), P(30));
  EXPECT_EQ(queues.Rotate(1, DescriptorKind::kTensor, Always), P(10));
  EXPECT_EQ(queues.Rotate(3, DescriptorKind::kTensor, Always), nullptr);
  EXPECT_EQ(queues.Rotate(2, DescriptorKind::kFilter, Always), nullptr);
}

TEST(DescriptorQueues, RotateSkipsDescriptorsStillInUse) {
  DescriptorQueues queues;
  for (uintptr_t p : {10, 20}) queues.Retain(1, DescriptorKind::kTensor, P(p));
  EXPECT_EQ(queues.Rotate(1, DescriptorKind::kTensor, [](void* d) { return d != P(10); }),
            P(20));
  EXPECT_EQ(queues.Rotate(1, DescriptorKind::kTensor, [](void*) { return false; }), nullptr);
}

TEST(DescriptorQueues, QueuesAreBounded) {
  DescriptorQueues queues;
  for (size_t i = 0; i < DescriptorQueues::kMaxQueueLength; ++i) {
    ASSERT_TRUE(queues.Retain(1, DescriptorKind::kTensor, P(i + 1)));
  }
  EXPECT_FALSE(queues.Retain(1, DescriptorKind::kTensor, P(999999)));
  EXPECT_EQ(queues.Snapshot(1, DescriptorKind::kTensor).size(), DescriptorQueues::kMaxQueueLength);
}

TEST(DescriptorQueues, DrainReturnsOnlyThatStreamsDescriptors) {
  DescriptorQueues queues;
  queues.Retain(1, DescriptorKind::kTensor, P(10));
  queues.Retain(1, DescriptorKind::kFilter, P(11));
  queues.Retain(2, DescriptorKind::kTensor, P(20));
  std::vector<void*> drained = queues.Drain(1);
  EXPECT_EQ(std::set<void*>(drained.begin(), drained.end()), (std::set<void*>{P(10), P(11)}));
  EXPECT_EQ(queues.Lengths().size(), 1u);
  EXPECT_EQ(queues.Rotate(2, DescriptorKind::kTensor, Always), P(20));
}

TEST(DescriptorQueues, ConcurrentStreamsKeepTheirOwnQueues) {
  DescriptorQueues queues;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 500;
  vgpu_test::RunOnThreads(kThreads, [&](int t) {
    for (int i = 0; i < kPerThread; ++i) {
      queues.Retain(t, DescriptorKind::kTensor, P(t * 100000 + i + 1));
    }
    for (int i = 0; i < kPerThread * 2; ++i) {
      void* got = queues.Rotate(t, DescriptorKind::kTensor, Always);
      EXPECT_EQ(got, P(t * 100000 + (i % kPerThread) + 1));
    }
  });
}

// --- IterationDetector -------------------------------------------------------------------

// A synthetic training step: forward launches (the first layer writes `first`), a backward
// pass reading the first layer's output, then optimizer updates (forward role).
void Step(IterationDetector& detector, uint64_t first, int* counted = nullptr) {
  int n = 0;
  n += detector.Observe(LaunchRole::kForward, {0x100}, first);
  n += detector.Observe(LaunchRole::kForward, {first}, first + 0x10);
  n += detector.Observe(LaunchRole::kForward, {first + 0x10}, first + 0x20);
  n += detector.Observe(LaunchRole::kBackward, {0xC00, first + 0x10}, 0xD00);
  n += detector.Observe(LaunchRole::kBackward, {0xD00, first}, 0xE00);
  n += detector.Observe(LaunchRole::kForward, {0xE00}, 0xF00);  // optimizer
  if (counted != nullptr) *counted = n;
}

TEST(IterationDetector, BackwardReadOfTheStepsForwardOutputsCompletesAnIteration) {
  IterationDetector detector;
  EXPECT_FALSE(detector.Observe(LaunchRole::kForward, {0x100}, 0xA00));  // first layer: A
  EXPECT_FALSE(detector.Observe(LaunchRole::kForward, {0xA00}, 0xB00));
  EXPECT_FALSE(detector.warmup_complete());
  EXPECT_TRUE(detector.Observe(LaunchRole::kBackward, {0xC00, 0xA00}, 0xD00));
  EXPECT_TRUE(detector.warmup_complete());
  EXPECT_EQ(detector.recorded_address(), 0xA00u);
  EXPECT_FALSE(detector.Observe(LaunchRole::kBackward, {0xD00, 0xB00}, 0xE00));  // same step
  EXPECT_EQ(detector.iterations(), 1u);
}

TEST(IterationDetector, CountsOneIterationPerStep) {
  IterationDetector detector;
  for (int step = 0; step < 5; ++step) {
    int counted = 0;
    Step(detector, 0xA000, &counted);
    EXPECT_EQ(counted, 1) << step;
  }
  EXPECT_EQ(detector.iterations(), 5u);
}

TEST(IterationDetector, FollowsAFirstLayerOutputThatMovesBetweenSteps) {
  IterationDetector detector;
  for (int step = 0; step < 6; ++step) Step(detector, step % 2 ? 0xA000 : 0xB000);  // alternating
  Step(detector, 0x5A000);  // a last partial batch elsewhere
  EXPECT_EQ(detector.iterations(), 7u);
  EXPECT_EQ(detector.recorded_address(), 0x5A010u);  // the first recorded output read backward
}

TEST(IterationDetector, ShortForwardWorkInsideABackwardPassIsNotAStep) {
  IterationDetector detector;
  for (int step = 0; step < 4; ++step) {
    detector.Observe(LaunchRole::kForward, {0x100}, 0xA00);
    detector.Observe(LaunchRole::kForward, {0xA00}, 0xA10);
    detector.Observe(LaunchRole::kForward, {0xA10}, 0xA20);
    detector.Observe(LaunchRole::kForward, {0xA20}, 0xA30);
    detector.Observe(LaunchRole::kBackward, {0xA20}, 0xC00);        // the step's backward
    detector.Observe(LaunchRole::kForward, {0xC00}, 0xC10);         // interleaved work
    detector.Observe(LaunchRole::kBackward, {0xC10, 0xA00}, 0xC20);  // more backward
    detector.Observe(LaunchRole::kForward, {0xC20}, 0xE00);         // optimizer
  }
  EXPECT_EQ(detector.iterations(), 4u);
}

TEST(IterationDetector, DoesNotFireWithoutBackwardReadsOfForwardOutputs) {
  IterationDetector detector;
  detector.Observe(LaunchRole::kForward, {}, 0xA00);
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(detector.Observe(LaunchRole::kForward, {0xA00}, 0xA00 + i));
  }
  EXPECT_FALSE(detector.Observe(LaunchRole::kBackward, {0xB00, 0xC00}, 0xA00));  // output only
  EXPECT_FALSE(detector.Observe(LaunchRole::kForward, {}, 0xD00));
  EXPECT_EQ(detector.iterations(), 0u);
}

TEST(IterationDetector, DoesNotFireBeforeAnyForwardComputation) {
  IterationDetector detector;
  EXPECT_FALSE(detector.Observe(LaunchRole::kBackward, {0}, 0));
  EXPECT_FALSE(detector.Observe(LaunchRole::kBackward, {0xA00}, 0xB00));
  EXPECT_EQ(detector.iterations(), 0u);
}

// An inference run: forward launches of a fixed model (signatures 1..n), then the host waits.
void InferenceRun(IterationDetector& detector, int launches, uint64_t first_signature = 1) {
  for (int i = 0; i < launches; ++i) {
    detector.Observe(LaunchRole::kForward, {0x100u + i}, 0x200u + i, first_signature + i);
  }
}

TEST(IterationDetector, ThreeEqualForwardOnlyRunsBetweenHostWaitsCompleteAnInferenceWarmUp) {
  IterationDetector detector;
  InferenceRun(detector, 5);
  EXPECT_FALSE(detector.ObserveHostWait());
  EXPECT_FALSE(detector.ObserveHostWait());  // a second wait for the same work changes nothing
  InferenceRun(detector, 5);
  EXPECT_FALSE(detector.ObserveHostWait());
  EXPECT_FALSE(detector.warmup_complete());
  InferenceRun(detector, 5);
  EXPECT_TRUE(detector.ObserveHostWait());
  EXPECT_TRUE(detector.warmup_complete());
  EXPECT_TRUE(detector.inference_warmup());
  EXPECT_EQ(detector.iterations(), 0u);  // not a training step: no step record
  InferenceRun(detector, 5);
  EXPECT_FALSE(detector.ObserveHostWait());  // completes once
}

TEST(IterationDetector, RunsThatDifferInKernelsOrSettingsAreNotAnInferenceWarmUp) {
  IterationDetector detector;
  for (int run = 0; run < 6; ++run) {
    InferenceRun(detector, 4, /*first_signature=*/run % 2 ? 1 : 100);  // alternating models
    EXPECT_FALSE(detector.ObserveHostWait()) << run;
  }
  for (int run = 0; run < 6; ++run) {
    InferenceRun(detector, 3 + run);  // growing runs
    EXPECT_FALSE(detector.ObserveHostWait()) << run;
  }
  EXPECT_FALSE(detector.warmup_complete());
}

TEST(IterationDetector, AFunctionCalledThriceWithoutHostWaitsCompletesAnInferenceWarmUp) {
  IterationDetector detector;
  constexpr int kLaunches = 70;  // one call of the function: signatures 1..70
  InferenceRun(detector, kLaunches);
  InferenceRun(detector, kLaunches);
  InferenceRun(detector, kLaunches - 1);
  EXPECT_FALSE(detector.warmup_complete());
  detector.Observe(LaunchRole::kForward, {0x100}, 0x200, kLaunches);  // the third call's last
  EXPECT_TRUE(detector.warmup_complete());
  EXPECT_TRUE(detector.inference_warmup());
  EXPECT_EQ(detector.iterations(), 0u);
  EXPECT_FALSE(detector.ObserveHostWait());  // already complete
}

TEST(IterationDetector, AChainOfOneRepeatedLaunchCompletesAtThreeMinimumPeriods) {
  IterationDetector detector;
  for (int i = 0; i < 3 * 64 - 1; ++i) detector.Observe(LaunchRole::kForward, {0x100}, 0x200, 9);
  EXPECT_FALSE(detector.warmup_complete());
  detector.Observe(LaunchRole::kForward, {0x100}, 0x200, 9);
  EXPECT_TRUE(detector.inference_warmup());
}

TEST(IterationDetector, ALoopAfterOtherWorkIsFoundInALaterWindow) {
  IterationDetector detector;
  InferenceRun(detector, 10, /*first_signature=*/1000);  // the model's initialisation
  for (int i = 0; i < 3; ++i) InferenceRun(detector, 70);
  // From the host wait on, the launches start with the initialisation: no period. From the
  // 193rd launch on, inside the loop, they repeat: found after 3 x 70 launches from there.
  EXPECT_FALSE(detector.warmup_complete());
  for (int i = 0; i < 3; ++i) InferenceRun(detector, 70);
  EXPECT_TRUE(detector.inference_warmup());
  EXPECT_EQ(detector.iterations(), 0u);
}

TEST(IterationDetector, ShortPeriodsAndBackwardLaunchesAreNotPeriodicRuns) {
  {  // an initialiser of 5 launches, repeated 30 times: 150 launches, under 3 x 64...
    IterationDetector detector;
    for (int i = 0; i < 30; ++i) InferenceRun(detector, 5);
    EXPECT_FALSE(detector.warmup_complete());
  }
  {  // ...and a backward launch ends the search until the next host wait, which restarts it.
    IterationDetector detector;
    InferenceRun(detector, 70);
    detector.Observe(LaunchRole::kBackward, {0xB00}, 0xC00, 8);
    for (int i = 0; i < 6; ++i) InferenceRun(detector, 70);
    EXPECT_FALSE(detector.warmup_complete());
    detector.ObserveHostWait();
    for (int i = 0; i < 3; ++i) InferenceRun(detector, 70);
    EXPECT_TRUE(detector.inference_warmup());
  }
}

TEST(IterationDetector, TrainingStepsBetweenHostWaitsAreNeverInferenceRuns) {
  IterationDetector detector;
  for (int step = 0; step < 4; ++step) {
    // Forward and backward launches with the same signatures every step; the backward reads
    // no recorded output, so the claim's detection does not fire either.
    detector.Observe(LaunchRole::kForward, {0x100}, 0xA00, 7);
    detector.Observe(LaunchRole::kBackward, {0xB00}, 0xC00, 8);
    EXPECT_FALSE(detector.ObserveHostWait()) << step;
  }
  EXPECT_FALSE(detector.warmup_complete());
}

TEST(IterationDetector, MarkStepCompletesAnIteration) {
  IterationDetector detector;
  detector.MarkStep();
  EXPECT_TRUE(detector.warmup_complete());
  EXPECT_EQ(detector.iterations(), 1u);
}

TEST(IterationDetector, MarkStepAfterADetectedStepDoesNotCountItTwice) {
  IterationDetector detector;
  for (int step = 0; step < 3; ++step) {
    Step(detector, 0xA000);
    detector.MarkStep();
  }
  EXPECT_EQ(detector.iterations(), 3u);
}

// --- DnnApi over a CPU backing executor ----------------------------------------------------

class DnnApiTest : public testing::TestWithParam<DescriptorMode> {
 protected:
  DnnApiTest() {
    CpuExecutor::Options options;
    options.memory_limit_per_device = 16ull << 20;
    executor_ = *CpuExecutor::Create(options);
    transport_ = std::make_unique<InprocTransport>(executor_->OpenSession(&hub_));
    client_ = std::make_unique<DeviceClient>(0, 0, transport_.get(), &hub_, GetParam());
    stream_ = *client_->CreateStream();
  }
  ~DnnApiTest() override {
    client_->DestroyStream(std::move(stream_)).IgnoreError();
    client_.reset();
    transport_.reset();
  }

  // One "kernel": create+set two descriptors, launch sigmoid on `n` floats, destroy both.
  void RunSigmoid(uint64_t x, uint64_t y, int64_t n, LaunchRole role = LaunchRole::kForward) {
    ScopedLaunchRole scoped_role(role);
    DnnApi& dnn = client_->dnn();
    ActivationDescriptorSettings activation;
    activation.mode = ActivationMode::kSigmoid;
    TensorDescriptorSettings tensor;
    tensor.rank = 1;
    tensor.dims[0] = n;
    auto a = ScopedDescriptor::Make(dnn, *stream_, activation);
    auto t = ScopedDescriptor::Make(dnn, *stream_, tensor);
    ASSERT_TRUE(a.ok() && t.ok());
    Descriptor* descriptors[] = {a->get(), t->get()};
    BufferArg buffers[] = {{x, static_cast<uint64_t>(n) * 4}, {y, static_cast<uint64_t>(n) * 4}};
    ASSERT_TRUE(dnn.Launch(*stream_, activation::kForward, descriptors, buffers, {}).ok());
  }

  std::vector<float> Read(uint64_t address, size_t n) {
    std::vector<float> out(n);
    EXPECT_TRUE(client_->CopyDeviceToHost(*stream_, out.data(), address, n * 4).ok());
    EXPECT_TRUE(client_->SynchronizeStream(*stream_).ok());
    return out;
  }

  uint64_t Upload(const std::vector<float>& values) {
    uint64_t address = *client_->Allocate(values.size() * 4);
    EXPECT_TRUE(client_->CopyNow(nullptr, address, values.data(), 0, values.size() * 4).ok());
    return address;
  }

  NotificationHub hub_;
  std::unique_ptr<CpuExecutor> executor_;
  std::unique_ptr<InprocTransport> transport_;
  std::unique_ptr<DeviceClient> client_;
  std::unique_ptr<ClientStream> stream_;
};

TEST_P(DnnApiTest, WarmUpForwardsThenSteadyStateAnswersLocally) {
  const bool reuse = GetParam() == DescriptorMode::kReuse;
  uint64_t x = Upload({-1, 0, 1, 2});
  uint64_t y = *client_->Allocate(16);
  ClientCounters& counters = client_->counters();
  RunSigmoid(x, y, 4);  // warm-up
  const uint64_t warmup_forwarded = counters.descriptor_calls_forwarded();
  EXPECT_EQ(warmup_forwarded, reuse ? 4u : 6u);  // reuse: creates and sets; destroys retained
  client_->dnn().MarkStep();
  const uint64_t round_trips = counters.round_trips();
  for (int step = 0; step < 5; ++step) RunSigmoid(x, y, 4);
  if (reuse) {
    EXPECT_EQ(counters.descriptor_calls_forwarded(), warmup_forwarded);
    EXPECT_EQ(counters.round_trips(), round_trips);  // not a single round trip
    EXPECT_EQ(counters.descriptor_calls_local(), 2u + 5u * 6u);  // + the warm-up destroys
  } else {
    EXPECT_EQ(counters.descriptor_calls_forwarded(), warmup_forwarded + 5u * 6u);
    EXPECT_EQ(counters.round_trips(), round_trips + 5u * 6u);
  }
  std::vector<float> result = Read(y, 4);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(result[i], 1.0f / (1.0f + std::exp(-(i - 1.0f))));
}

TEST_P(DnnApiTest, SteadyStateReusesTheSameDescriptorObjects) {
  if (GetParam() != DescriptorMode::kReuse) GTEST_SKIP() << "reuse mode only";
  uint64_t x = Upload({1, 2});
  uint64_t y = *client_->Allocate(8);
  DnnApi& dnn = client_->dnn();
  auto first = *dnn.Create(*stream_, DescriptorKind::kTensor);
  ASSERT_TRUE(dnn.Destroy(*stream_, first).ok());
  dnn.MarkStep();
  auto again = *dnn.Create(*stream_, DescriptorKind::kTensor);
  EXPECT_EQ(again, first);  // the same object, from the head of the queue
  ASSERT_TRUE(dnn.Destroy(*stream_, again).ok());
  RunSigmoid(x, y, 2);
  EXPECT_EQ(client_->counters().queue_misses(), 1u);  // the activation queue was empty
}

TEST_P(DnnApiTest, ChangedSettingsInSteadyStateAreUpdatedLocallyAndNeverStale) {
  const bool reuse = GetParam() == DescriptorMode::kReuse;
  uint64_t x = Upload({-3, -2, -1, 0, 1, 2, 3, 4});
  uint64_t y = *client_->Allocate(32);
  RunSigmoid(x, y, 8);
  client_->dnn().MarkStep();
  const uint64_t forwarded = client_->counters().descriptor_calls_forwarded();
  ASSERT_TRUE(client_->Memset(*stream_, y, 0, 1, 32).ok());
  RunSigmoid(x, y, 3);  // a "last partial batch": another shape
  if (reuse) {
    EXPECT_EQ(client_->counters().descriptor_calls_forwarded(), forwarded);
    EXPECT_EQ(client_->counters().settings_updates(), 1u);
  }
  std::vector<float> result = Read(y, 8);
  for (int i = 0; i < 8; ++i) {
    const float expected = i < 3 ? 1.0f / (1.0f + std::exp(-(i - 3.0f))) : 0.0f;
    EXPECT_FLOAT_EQ(result[i], expected) << i;
  }
}

TEST_P(DnnApiTest, DetectorSeesIterationsThroughLaunches) {
  uint64_t x = Upload({1, 2, 3, 4});
  uint64_t h = *client_->Allocate(16);
  uint64_t g = *client_->Allocate(16);
  for (int step = 0; step < 3; ++step) {
    RunSigmoid(x, h, 4, LaunchRole::kForward);   // first layer: output h
    RunSigmoid(h, g, 4, LaunchRole::kBackward);  // backward reads h
  }
  RunSigmoid(g, x, 4, LaunchRole::kForward);  // the next step begins
  EXPECT_EQ(client_->dnn().detector().iterations(), 3u);
  EXPECT_TRUE(client_->dnn().detector().warmup_complete());
}

TEST_P(DnnApiTest, IterationObserverHearsEveryDetectedAndMarkedIterationOnce) {
  std::vector<uint64_t> heard;
  client_->dnn().SetIterationObserver([&](uint64_t iterations) { heard.push_back(iterations); });
  uint64_t x = Upload({1, 2, 3, 4});
  uint64_t h = *client_->Allocate(16);
  uint64_t g = *client_->Allocate(16);
  for (int step = 0; step < 2; ++step) {
    RunSigmoid(x, h, 4, LaunchRole::kForward);
    RunSigmoid(h, g, 4, LaunchRole::kBackward);  // detected
    client_->dnn().MarkStep();                   // the same step: not counted again
  }
  client_->dnn().MarkStep();  // a step with no launch: counted by the mark
  EXPECT_EQ(heard, (std::vector<uint64_t>{1, 2, 3}));
}

TEST_P(DnnApiTest, StreamsHaveTheirOwnQueuesAndDestroyingOneFreesItsDescriptors) {
  if (GetParam() != DescriptorMode::kReuse) GTEST_SKIP() << "reuse mode only";
  auto other = *client_->CreateStream();
  DnnApi& dnn = client_->dnn();
  Descriptor* on_main = *dnn.Create(*stream_, DescriptorKind::kTensor);
  Descriptor* on_other = *dnn.Create(*other, DescriptorKind::kTensor);
  ASSERT_TRUE(dnn.Destroy(*stream_, on_main).ok());
  ASSERT_TRUE(dnn.Destroy(*other, on_other).ok());
  dnn.MarkStep();
  EXPECT_EQ(*dnn.Create(*other, DescriptorKind::kTensor), on_other);
  EXPECT_EQ(*dnn.Create(*stream_, DescriptorKind::kTensor), on_main);
  ASSERT_TRUE(dnn.Destroy(*stream_, on_main).ok());
  const uint64_t other_id = other->id();
  ASSERT_TRUE(dnn.Destroy(*other, on_other).ok());
  ASSERT_TRUE(client_->DestroyStream(std::move(other)).ok());
  for (const auto& [stream, kind, length] : dnn.queues().Lengths()) EXPECT_NE(stream, other_id);
}

INSTANTIATE_TEST_SUITE_P(Modes, DnnApiTest,
                         testing::Values(DescriptorMode::kReuse, DescriptorMode::kForward),
                         [](const auto& info) {
                           return info.param == DescriptorMode::kReuse ? "Reuse" : "Forward";
                         });

}  // namespace
}  // namespace vgpu
