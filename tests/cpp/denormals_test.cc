// Tests of denormal flushing (common/denormals.h): the scoped mode flushes inside and restores
// the thread's own mode after, and the per-thread mode flushes for good.
#include <cstdint>
#include <cstring>
#include <thread>

#include "gtest/gtest.h"
#include "plugin/common/denormals.h"

namespace vgpu {
namespace {

// 1e-40f times 3 through memory, so that the compiler cannot fold it: 3e-40 unless flushed.
float TimesThree(volatile float value) { return value * 3.0f; }

#if VGPU_HAVE_MXCSR
TEST(Denormals, AScopeFlushesInsideAndRestoresTheThreadsModeAfter) {
  std::thread([] {  // a fresh thread, whatever mode the test runner's thread has
    _mm_setcsr(_mm_getcsr() & ~kFlushDenormalBits);
    EXPECT_GT(TimesThree(1e-40f), 0.0f);
    {
      ScopedFlushDenormals flush;
      EXPECT_EQ(TimesThree(1e-40f), 0.0f);
    }
    EXPECT_GT(TimesThree(1e-40f), 0.0f);
  }).join();
}

TEST(Denormals, AScopeLeavesAThreadThatFlushesAlreadyFlushing) {
  std::thread([] {
    FlushDenormalsOnThisThread();
    { ScopedFlushDenormals flush; }
    EXPECT_EQ(TimesThree(1e-40f), 0.0f);
    EXPECT_EQ(_mm_getcsr() & kFlushDenormalBits, kFlushDenormalBits);
  }).join();
}
#endif

}  // namespace
}  // namespace vgpu
