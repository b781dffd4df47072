// Tests of StagingPool: returned buffers are reused by copies of a similar size, the pool keeps
// no more than its bound, and a buffer may outlive every other reference to its pool.
#include "plugin/client/staging_pool.h"

#include <cstring>
#include <memory>
#include <thread>

#include "gtest/gtest.h"

namespace vgpu {
namespace {

TEST(StagingPoolTest, AReturnedBufferIsReusedForASimilarSize) {
  std::shared_ptr<StagingPool> pool = StagingPool::Create(1 << 20);
  std::shared_ptr<uint8_t> first = pool->Take(4096);
  ASSERT_NE(first, nullptr);
  std::memset(first.get(), 1, 4096);
  uint8_t* const address = first.get();
  first.reset();
  EXPECT_EQ(pool->kept_bytes(), 4096u);

  std::shared_ptr<uint8_t> again = pool->Take(3000);  // fits, at most twice the size
  EXPECT_EQ(again.get(), address);
  EXPECT_EQ(pool->kept_bytes(), 0u);
  std::shared_ptr<uint8_t> small = pool->Take(1000);  // nothing kept: a new one
  EXPECT_NE(small.get(), address);
}

TEST(StagingPoolTest, ABufferMuchLargerThanTheRequestIsNotHandedOut) {
  std::shared_ptr<StagingPool> pool = StagingPool::Create(1 << 20);
  uint8_t* large = nullptr;
  {
    std::shared_ptr<uint8_t> buffer = pool->Take(64 * 1024);
    large = buffer.get();
  }
  std::shared_ptr<uint8_t> small = pool->Take(1024);
  EXPECT_NE(small.get(), large);
  EXPECT_EQ(pool->kept_bytes(), 64u * 1024);
}

TEST(StagingPoolTest, KeepsNoMoreThanItsBoundOldestGoingFirst) {
  std::shared_ptr<StagingPool> pool = StagingPool::Create(10000);
  std::shared_ptr<uint8_t> a = pool->Take(4000);
  std::shared_ptr<uint8_t> b = pool->Take(4000);
  std::shared_ptr<uint8_t> c = pool->Take(4000);
  std::shared_ptr<uint8_t> huge = pool->Take(20000);
  uint8_t* const b_address = b.get();
  uint8_t* const c_address = c.get();
  a.reset();
  b.reset();
  c.reset();  // a goes to make room
  EXPECT_EQ(pool->kept_bytes(), 8000u);
  huge.reset();  // larger than the bound: freed, the kept ones stay
  EXPECT_EQ(pool->kept_bytes(), 8000u);
  std::shared_ptr<uint8_t> first = pool->Take(4000);
  std::shared_ptr<uint8_t> second = pool->Take(4000);
  EXPECT_EQ(first.get(), b_address);
  EXPECT_EQ(second.get(), c_address);
}

TEST(StagingPoolTest, ABufferMayOutliveThePoolsOtherReferencesAndComeBackOnAnotherThread) {
  std::shared_ptr<uint8_t> buffer;
  std::weak_ptr<StagingPool> watched;
  {
    std::shared_ptr<StagingPool> pool = StagingPool::Create(1 << 20);
    watched = pool;
    buffer = pool->Take(128);
  }
  EXPECT_FALSE(watched.expired());  // the buffer keeps it
  std::thread([moved = std::move(buffer)]() mutable { moved.reset(); }).join();
  EXPECT_TRUE(watched.expired());
}

}  // namespace
}  // namespace vgpu
