// The shared-memory staging region (plugin/transport/shm_region.h): what the server accepts as
// a tenant's region and what it refuses, range checks that cannot overflow, and the client's
// range allocator.
#include "plugin/transport/shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <thread>

#include "gtest/gtest.h"

namespace vgpu {
namespace {

constexpr uint64_t kMiB = 1 << 20;

ScopedFd Memfd(uint64_t size, int seals) {
  ScopedFd fd(::memfd_create("shm-region-test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(::ftruncate(fd.get(), static_cast<off_t>(size)), 0);
  if (seals != 0) {
    EXPECT_EQ(::fcntl(fd.get(), F_ADD_SEALS, seals), 0);
  }
  return fd;
}

TEST(ShmRegion, AClientRegionIsSeenByTheServersMappingOfTheSameMemfd) {
  auto client = ShmRegion::Create(4 * kMiB);
  ASSERT_TRUE(client.ok()) << client.status();
  std::memset((*client)->data(), 0x5A, 4 * kMiB);
  auto server = ShmRegion::Attach(ScopedFd(::dup((*client)->fd())), 4 * kMiB, 16 * kMiB);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->size(), 4 * kMiB);
  EXPECT_EQ((*server)->data()[4 * kMiB - 1], 0x5A);
  (*server)->data()[0] = 0x11;
  EXPECT_EQ((*client)->data()[0], 0x11);
}

TEST(ShmRegion, AClientRegionCannotBeShrunk) {
  auto client = ShmRegion::Create(kMiB);
  ASSERT_TRUE(client.ok());
  EXPECT_NE(::ftruncate((*client)->fd(), 4096), 0);
}

TEST(ShmRegion, DiscardingFreesThePagesButKeepsTheMappingUsable) {
  auto region = ShmRegion::Create(kMiB);
  ASSERT_TRUE(region.ok());
  std::memset((*region)->data(), 0x77, kMiB);
  (*region)->Discard();
  EXPECT_EQ((*region)->data()[12345], 0);
  (*region)->data()[12345] = 1;  // still mapped: a late copy is harmless
  EXPECT_EQ((*region)->data()[12345], 1);
}

TEST(ShmRegion, AnUnsealedMemfdIsRefused) {
  auto region = ShmRegion::Attach(Memfd(kMiB, 0), kMiB, 16 * kMiB);
  ASSERT_FALSE(region.ok());
  EXPECT_NE(region.status().message().find("F_SEAL_SHRINK"), std::string::npos)
      << region.status();
}

// A tenant that shrinks its memfd and only then seals it, while the server attaches: whatever
// the interleaving, an attached region never reaches past the file's end (a touch would be
// SIGBUS, killing the server and every tenant). The seals are read before the size, so once
// the seal is seen the size read next is final.
TEST(ShmRegion, ShrinkingThenSealingDuringTheAttachNeverLeavesAMappingPastTheEnd) {
  constexpr uint64_t kDeclared = 256 << 10;
  constexpr int kRounds = 3000;
  int attached = 0, refused = 0;
  for (int round = 0; round < kRounds; ++round) {
    ScopedFd fd(::memfd_create("shm-race", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(::ftruncate(fd.get(), kDeclared), 0);
    std::atomic<bool> go{false};
    std::thread tenant([&] {
      while (!go.load(std::memory_order_acquire)) {
      }
      // A delay swept over the attach's few microseconds, so that some round shrinks and
      // seals between any two of its system calls.
      for (volatile int spin = 0; spin < (round % 300) * 8; spin = spin + 1) {
      }
      (void)::ftruncate(fd.get(), 4096);
      (void)::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
    });
    go.store(true, std::memory_order_release);
    auto region = ShmRegion::Attach(ScopedFd(::dup(fd.get())), kDeclared, 16 * kMiB);
    tenant.join();
    if (!region.ok()) {
      ++refused;
      continue;
    }
    ++attached;
    struct stat status {};
    ASSERT_EQ(::fstat(fd.get(), &status), 0);
    ASSERT_GE(static_cast<uint64_t>(status.st_size), kDeclared);
    volatile uint8_t sum = 0;
    for (uint64_t at = 0; at < kDeclared; at += 4096) sum = sum + (*region)->data()[at];
  }
  EXPECT_EQ(attached + refused, kRounds);
  EXPECT_GT(refused, 0);  // the shrunk-then-sealed file is refused
}

TEST(ShmRegion, AMemfdOfAnotherSizeThanDeclaredIsRefused) {
  auto region = ShmRegion::Attach(Memfd(kMiB, F_SEAL_SHRINK), 2 * kMiB, 16 * kMiB);
  ASSERT_FALSE(region.ok());
  EXPECT_NE(region.status().message().find("declared"), std::string::npos) << region.status();
}

TEST(ShmRegion, ARegionOverTheLimitIsResourceExhausted) {
  auto region = ShmRegion::Attach(Memfd(8 * kMiB, F_SEAL_SHRINK), 8 * kMiB, 4 * kMiB);
  ASSERT_FALSE(region.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(region.status())) << region.status();
}

TEST(ShmRegion, DescriptorsThatAreNotMemfdsAreRefused) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  ScopedFd write_end(pipe_fds[1]);
  EXPECT_FALSE(ShmRegion::Attach(ScopedFd(pipe_fds[0]), kMiB, 16 * kMiB).ok());
  EXPECT_FALSE(ShmRegion::Attach(ScopedFd(::open("/dev/zero", O_RDWR)), kMiB, 16 * kMiB).ok());
  EXPECT_FALSE(ShmRegion::Attach(ScopedFd(), kMiB, 16 * kMiB).ok());
  EXPECT_FALSE(ShmRegion::Attach(Memfd(kMiB, F_SEAL_SHRINK), 0, 16 * kMiB).ok());
}

TEST(ShmRegion, AWriteSealedMemfdCannotBeMappedAndIsRefused) {
  auto region = ShmRegion::Attach(Memfd(kMiB, F_SEAL_SHRINK | F_SEAL_WRITE), kMiB, 16 * kMiB);
  EXPECT_FALSE(region.ok());
}

TEST(ShmRegion, RangeChecksCannotOverflow) {
  auto region = ShmRegion::Create(kMiB);
  ASSERT_TRUE(region.ok());
  const ShmRegion& r = **region;
  EXPECT_TRUE(r.Contains(0, kMiB));
  EXPECT_TRUE(r.Contains(kMiB, 0));
  EXPECT_TRUE(r.Contains(kMiB - 1, 1));
  EXPECT_FALSE(r.Contains(kMiB - 1, 2));
  EXPECT_FALSE(r.Contains(kMiB + 1, 0));
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  EXPECT_FALSE(r.Contains(max, 2));
  EXPECT_FALSE(r.Contains(16, max - 8));
  EXPECT_FALSE(r.Contains(0, max));
}

TEST(ShmSpace, RangesAreLentOnceAndCoalesceWhenReturned) {
  ShmSpace space(100);
  auto a = space.Allocate(40, std::chrono::milliseconds(0));
  auto b = space.Allocate(40, std::chrono::milliseconds(0));
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_NE(*a, *b);
  EXPECT_FALSE(space.Allocate(40, std::chrono::milliseconds(0)).has_value());
  space.Release(*a, 40);
  space.Release(*b, 40);
  EXPECT_EQ(space.free_bytes(), 100u);
  auto whole = space.Allocate(100, std::chrono::milliseconds(0));
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(*whole, 0u);
}

TEST(ShmSpace, AFullSpaceWaitsBoundedlyThenGivesUp) {
  ShmSpace space(64);
  auto all = space.Allocate(64, std::chrono::milliseconds(0));
  ASSERT_TRUE(all.has_value());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(space.Allocate(8, std::chrono::milliseconds(30)).has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(25));
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    space.Release(*all, 64);
  });
  EXPECT_TRUE(space.Allocate(8, std::chrono::seconds(10)).has_value());
  releaser.join();
  space.Close();
  EXPECT_FALSE(space.Allocate(8, std::chrono::seconds(10)).has_value());
}

}  // namespace
}  // namespace vgpu
