// Tests of the Philox generator's batched form (common/philox.h): NextBatch returns the blocks
// that as many calls of Next() return, through every carry of the 128-bit counter, and leaves
// the generator where they would.
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/common/philox.h"

namespace vgpu {
namespace {

std::vector<uint32_t> Words(const Philox4x32::Block& block) {
  return {block.word[0], block.word[1], block.word[2], block.word[3]};
}

class PhiloxBatch : public ::testing::TestWithParam<std::vector<uint32_t>> {};

TEST_P(PhiloxBatch, EqualsAsManyCallsOfNextAndLeavesTheCounterWhereTheyWould) {
  const std::vector<uint32_t>& counter = GetParam();
  const uint32_t key[2] = {0x01234567u, 0x89abcdefu};
  Philox4x32 one_by_one(counter.data(), key);
  Philox4x32 batched(counter.data(), key);
  for (int batch = 0; batch < 3; ++batch) {
    Philox4x32::Block blocks[Philox4x32::kBatch];
    batched.NextBatch(blocks);
    for (int i = 0; i < Philox4x32::kBatch; ++i) {
      EXPECT_EQ(Words(blocks[i]), Words(one_by_one.Next())) << "batch " << batch << " block " << i;
    }
  }
  EXPECT_EQ(Words(batched.Next()), Words(one_by_one.Next()));
}

INSTANTIATE_TEST_SUITE_P(
    Counters, PhiloxBatch,
    ::testing::Values(std::vector<uint32_t>{0, 0, 0, 0},
                      std::vector<uint32_t>{0xfffffff8u, 0, 0, 0},            // word 0 -> 1
                      std::vector<uint32_t>{0xfffffffau, 0xffffffffu, 3, 0},  // words 0-1 -> 2
                      std::vector<uint32_t>{0xfffffff1u, 0xffffffffu, 0xffffffffu, 5},  // -> 3
                      std::vector<uint32_t>{0xfffffffeu, 0xffffffffu, 0xffffffffu,
                                            0xffffffffu}));  // the whole counter wraps

}  // namespace
}  // namespace vgpu
