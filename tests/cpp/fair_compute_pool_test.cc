// Tests of the tenant-fair compute pool (backend/cpu/fair_compute_pool.h): round-robin across
// tenants, tenants inherited by nested tasks, an extra worker slot for a tenant starving behind
// another's long task (and none for a tenant alone, nor any task on an extra worker), nested
// tasks waited for by their parent, idle tenants forgotten, thread ids, draining, and Eigen on
// top.
#define EIGEN_USE_THREADS
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/backend/cpu/fair_compute_pool.h"
#include "test_sync.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu {
namespace {

using vgpu_test::Gate;
using vgpu_test::OrderLog;

constexpr uint64_t kTenantA = 11;
constexpr uint64_t kTenantB = 22;
// A generous bound for work that must happen (the point is that it is not starved for ever).
constexpr std::chrono::milliseconds kMustHappen{20000};

FairComputePool::Options OneThread(int extra = 0,
                                   std::chrono::milliseconds slice = kDefaultStarvationSlice) {
  return FairComputePool::Options{1, extra, slice};
}

void ScheduleAs(FairComputePool& pool, uint64_t tenant, std::function<void()> fn) {
  ComputeTenantScope scope(tenant);
  pool.Schedule(std::move(fn));
}

TEST(FairComputePool, TakesTasksRoundRobinAcrossTenants) {
  FairComputePool pool(OneThread());
  Gate release, started;
  ScheduleAs(pool, kTenantA, [&] {
    started.Open();
    release.Wait();
  });
  started.Wait();  // the only worker is busy: everything below queues
  OrderLog log;
  Gate all_done;
  std::atomic<int> remaining{6};
  auto task = [&](int tag) {
    return [&, tag] {
      log.Append(tag);
      if (--remaining == 0) all_done.Open();
    };
  };
  for (int i = 1; i <= 3; ++i) ScheduleAs(pool, kTenantA, task(100 + i));
  for (int i = 1; i <= 3; ++i) ScheduleAs(pool, kTenantB, task(200 + i));
  release.Open();
  ASSERT_TRUE(all_done.WaitFor(kMustHappen));
  EXPECT_EQ(log.values(), (std::vector<int64_t>{101, 201, 102, 202, 103, 203}));
}

TEST(FairComputePool, TasksScheduledByATaskStayWithItsTenant) {
  FairComputePool pool(FairComputePool::Options{2, 0, kDefaultStarvationSlice});
  Gate done;
  std::atomic<uint64_t> outer_tenant{0}, nested_tenant{0};
  ScheduleAs(pool, kTenantB, [&] {
    outer_tenant = ComputeTenantScope::Current();
    pool.Schedule([&] {
      nested_tenant = ComputeTenantScope::Current();
      done.Open();
    });
  });
  ASSERT_TRUE(done.WaitFor(kMustHappen));
  EXPECT_EQ(outer_tenant.load(), kTenantB);
  EXPECT_EQ(nested_tenant.load(), kTenantB);
  EXPECT_EQ(ComputeTenantScope::Current(), kUnattributedTenant);  // the scope was restored
}

TEST(FairComputePool, StarvingTenantRunsWhileAnotherTenantsLongTaskHoldsEveryWorker) {
  FairComputePool pool(OneThread(/*extra=*/1, std::chrono::milliseconds(5)));
  Gate release_long, long_started, bystander_ran;
  ScheduleAs(pool, kTenantA, [&] {
    long_started.Open();
    release_long.Wait();  // a kernel block that runs "for ever"
  });
  long_started.Wait();
  ScheduleAs(pool, kTenantB, [&] { bystander_ran.Open(); });
  EXPECT_TRUE(bystander_ran.WaitFor(kMustHappen));
  EXPECT_EQ(pool.stats().extra_slots_opened, 1u);
  release_long.Open();
}

TEST(FairComputePool, ATenantAloneNeverGetsExtraWorkers) {
  FairComputePool pool(OneThread(/*extra=*/1, std::chrono::milliseconds(1)));
  Gate release_long, long_started, second_ran;
  ScheduleAs(pool, kTenantA, [&] {
    long_started.Open();
    release_long.Wait();
  });
  long_started.Wait();
  ScheduleAs(pool, kTenantA, [&] { second_ran.Open(); });
  // Must NOT happen: the tenant's own task waits behind its own work (50 slices).
  EXPECT_FALSE(second_ran.WaitFor(std::chrono::milliseconds(50)));
  EXPECT_EQ(pool.stats().extra_slots_opened, 0u);
  release_long.Open();
  EXPECT_TRUE(second_ran.WaitFor(kMustHappen));
}

TEST(FairComputePool, ExtraWorkersTakeNoTasksWhileNobodyStarves) {
  // Two base slots and two extra workers: with one tenant, every task runs on a base worker
  // (ids 0 and 1); the extra threads wait for a slot of their own and never compete.
  FairComputePool pool(FairComputePool::Options{2, 2, std::chrono::milliseconds(1)});
  constexpr int kTasks = 2000;
  std::atomic<int> ran{0}, on_extra_worker{0};
  Gate done;
  for (int i = 0; i < kTasks; ++i) {
    ScheduleAs(pool, kTenantA, [&] {
      if (pool.CurrentThreadId() >= 2) ++on_extra_worker;
      if (++ran == kTasks) done.Open();
    });
  }
  ASSERT_TRUE(done.WaitFor(kMustHappen));
  EXPECT_EQ(on_extra_worker.load(), 0);
  EXPECT_EQ(pool.stats().extra_slots_opened, 0u);
}

TEST(FairComputePool, ATaskWaitingForItsOwnNestedTaskAlwaysCompletes) {
  // A task schedules one more and blocks until it ran (as Eigen's nested parallel regions do).
  // An idle worker polling the queue takes such a lone task without a wake-up; the blocked
  // worker must never be the only one left to run it. Repeated so that the nested task lands
  // both while a worker polls and while every idle worker sleeps.
  FairComputePool pool(FairComputePool::Options{2, 0, kDefaultStarvationSlice});
  for (int round = 0; round < 500; ++round) {
    Gate outer_done;
    ScheduleAs(pool, kTenantA, [&] {
      Gate inner_ran;
      pool.Schedule([&] { inner_ran.Open(); });
      inner_ran.Wait();
      outer_done.Open();
    });
    ASSERT_TRUE(outer_done.WaitFor(kMustHappen)) << "round " << round;
    if (round % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

TEST(FairComputePool, ExtraSlotsAreCapped) {
  FairComputePool pool(OneThread(/*extra=*/1, std::chrono::milliseconds(1)));
  Gate release, a_started, b_started, c_ran;
  ScheduleAs(pool, kTenantA, [&] {
    a_started.Open();
    release.Wait();
  });
  a_started.Wait();
  ScheduleAs(pool, kTenantB, [&] {
    b_started.Open();
    release.Wait();
  });
  ASSERT_TRUE(b_started.WaitFor(kMustHappen));  // the one extra slot
  ScheduleAs(pool, 33, [&] { c_ran.Open(); });
  EXPECT_FALSE(c_ran.WaitFor(std::chrono::milliseconds(50)));  // no third thread
  release.Open();
  EXPECT_TRUE(c_ran.WaitFor(kMustHappen));
}

TEST(FairComputePool, ManyShortLivedTenantsAreForgottenWithoutLosingTheNewOne) {
  // Past 64 known tenants the idle ones are forgotten; the tenant being added is idle too until
  // its task is queued, and must survive that sweep (it once did not: a null queue).
  FairComputePool pool(FairComputePool::Options{2, 0, kDefaultStarvationSlice});
  std::atomic<int> tasks_ran{0};
  for (uint64_t tenant = 1; tenant <= 300; ++tenant) {
    Gate ran;
    ScheduleAs(pool, tenant, [&] {
      ++tasks_ran;
      ran.Open();
    });
    ASSERT_TRUE(ran.WaitFor(kMustHappen)) << "tenant " << tenant;
  }
  EXPECT_EQ(tasks_ran.load(), 300);
}

TEST(FairComputePool, ThreadIdsAreInRangeOnWorkersOnly) {
  FairComputePool pool(FairComputePool::Options{2, 1, kDefaultStarvationSlice});
  EXPECT_EQ(pool.NumThreads(), 3);
  EXPECT_EQ(pool.CurrentThreadId(), -1);
  Gate done;
  std::atomic<int> id{-2};
  pool.Schedule([&] {
    id = pool.CurrentThreadId();
    done.Open();
  });
  ASSERT_TRUE(done.WaitFor(kMustHappen));
  EXPECT_GE(id.load(), 0);
  EXPECT_LT(id.load(), 3);
}

TEST(FairComputePool, DestructionRunsEveryQueuedTask) {
  std::atomic<int> ran{0};
  {
    FairComputePool pool(OneThread());
    for (int i = 0; i < 100; ++i) ScheduleAs(pool, i % 3, [&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 100);
}

TEST(FairComputePool, DrivesEigenParallelForAndTensorExpressions) {
  FairComputePool pool(FairComputePool::Options{3, 1, kDefaultStarvationSlice});
  Eigen::ThreadPoolDevice device(&pool, 3);
  constexpr Eigen::Index kCount = 1 << 20;
  std::vector<int> hits(kCount, 0);
  ComputeTenantScope scope(kTenantA);
  device.parallelFor(kCount, Eigen::TensorOpCost(4, 4, 100), [&](Eigen::Index a, Eigen::Index b) {
    for (Eigen::Index i = a; i < b; ++i) ++hits[i];
  });
  for (Eigen::Index i = 0; i < kCount; ++i) ASSERT_EQ(hits[i], 1) << i;
  Eigen::Tensor<float, 2> a(256, 256), b(256, 256), c(256, 256);
  a.setConstant(1.0f);
  b.setConstant(2.0f);
  const Eigen::array<Eigen::IndexPair<int>, 1> pair{Eigen::IndexPair<int>(1, 0)};
  c.device(device) = a.contract(b, pair);
  EXPECT_FLOAT_EQ(c(17, 42), 512.0f);
  EXPECT_GT(pool.stats().tasks_run, 0u);
}

}  // namespace
}  // namespace vgpu
