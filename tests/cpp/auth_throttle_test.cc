// Tests of the per-peer rate limit on failed authentications (server/auth_throttle.h): a burst,
// then one try per refill interval, other peers unaffected, and a bounded table.
#include "plugin/server/auth_throttle.h"

#include <string>

#include "gtest/gtest.h"

namespace vgpu {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

TEST(AuthThrottle, APeerGetsItsBurstThenIsRefusedUntilATokenRefills) {
  AuthThrottle throttle(AuthThrottle::Options{3, 1, 16});
  int64_t now = 100 * kSecond;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(throttle.Admit("uid 7", now).ok()) << i;
    throttle.RecordFailure("uid 7", now);
  }
  absl::Status refused = throttle.Admit("uid 7", now);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("retry in 1 s"), absl::string_view::npos) << refused;
  EXPECT_FALSE(throttle.Admit("uid 7", now + kSecond / 2).ok());
  EXPECT_TRUE(throttle.Admit("uid 7", now + kSecond).ok());
}

TEST(AuthThrottle, OnlyTheFailureThatThrottlesReportsIt) {
  AuthThrottle throttle(AuthThrottle::Options{2, 1, 16});
  EXPECT_FALSE(throttle.RecordFailure("10.0.0.1", 0));
  EXPECT_TRUE(throttle.RecordFailure("10.0.0.1", 0));
  EXPECT_FALSE(throttle.RecordFailure("10.0.0.1", 0));  // already throttled
}

TEST(AuthThrottle, OtherPeersAreNotAffected) {
  AuthThrottle throttle(AuthThrottle::Options{1, 1, 16});
  throttle.RecordFailure("10.0.0.1", 0);
  EXPECT_FALSE(throttle.Admit("10.0.0.1", 0).ok());
  EXPECT_TRUE(throttle.Admit("10.0.0.2", 0).ok());
  EXPECT_TRUE(throttle.Admit("uid 0", 0).ok());
}

TEST(AuthThrottle, TheTableIsBoundedAndForgetsTheMostForgivenPeerFirst) {
  AuthThrottle throttle(AuthThrottle::Options{2, 1, 4});
  for (int i = 0; i < 4; ++i) throttle.RecordFailure("peer " + std::to_string(i), 0);
  throttle.RecordFailure("peer 0", 0);  // peer 0 is throttled, the others have a token left
  for (int i = 4; i < 100; ++i) throttle.RecordFailure("peer " + std::to_string(i), 0);
  EXPECT_LE(throttle.peers(), 4u);
  EXPECT_FALSE(throttle.Admit("peer 0", 0).ok());  // the guessing peer is still remembered
}

}  // namespace
}  // namespace vgpu
