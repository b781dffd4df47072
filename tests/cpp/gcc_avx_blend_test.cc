// The force-included 256-bit blend (plugin/common/gcc_avx_blend.h): it is in effect wherever
// GCC compiles for AVX without AVX2, and Eigen's packet selects, which go through it, still pick
// each lane as the scalar `condition ? a : b` does, for NaNs, infinities and signed zeros too.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu {
namespace {

TEST(GccAvxBlendTest, IsInEffectWhereGccLowersBlendsLaneByLane) {
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX__) && !defined(__AVX2__)
#ifndef VGPU_BITWISE_AVX_BLEND
  FAIL() << "plugin/common/gcc_avx_blend.h was not force-included (CMakeLists.txt)";
#endif
#else
  GTEST_SKIP() << "this build's compiler and target keep blendv as one instruction";
#endif
}

// The values a select must keep bit for bit.
std::vector<float> Awkward() {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  return {-2.5f, 0.0f, -0.0f, 1e-40f, -1e-40f, 3.0f, inf, -inf, nan, -nan, 7.25f, -1.0f,
          0.5f,  -0.5f, 1e30f, -1e30f};
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(GccAvxBlendTest, PacketSelectPicksEachLaneAsTheScalarConditionDoes) {
  using Packet = Eigen::internal::packet_traits<float>::type;
  constexpr int kLanes = Eigen::internal::unpacket_traits<Packet>::size;
  const std::vector<float> x = Awkward();
  for (size_t start = 0; start + kLanes <= x.size(); ++start) {
    alignas(64) float then_values[kLanes], else_values[kLanes], out[kLanes];
    for (int i = 0; i < kLanes; ++i) {
      then_values[i] = x[(start + 3 * i + 1) % x.size()];
      else_values[i] = -x[(start + 5 * i + 2) % x.size()];
    }
    const Packet condition = Eigen::internal::ploadu<Packet>(&x[start]);
    const Packet mask =
        Eigen::internal::pcmp_lt(condition, Eigen::internal::pzero(condition));  // x < 0
    Eigen::internal::pstore(out, Eigen::internal::pselect(
                                     mask, Eigen::internal::pload<Packet>(then_values),
                                     Eigen::internal::pload<Packet>(else_values)));
    for (int i = 0; i < kLanes; ++i) {
      const float expected = x[start + i] < 0 ? then_values[i] : else_values[i];
      EXPECT_TRUE(SameBits(out[i], expected)) << "lane " << i << " of the packet at " << start;
    }
  }
}

TEST(GccAvxBlendTest, DoublePacketSelectPicksEachLaneAsTheScalarConditionDoes) {
  using Packet = Eigen::internal::packet_traits<double>::type;
  constexpr int kLanes = Eigen::internal::unpacket_traits<Packet>::size;
  const std::vector<float> awkward = Awkward();
  const std::vector<double> x(awkward.begin(), awkward.end());
  for (size_t start = 0; start + kLanes <= x.size(); ++start) {
    alignas(64) double then_values[kLanes], else_values[kLanes], out[kLanes];
    for (int i = 0; i < kLanes; ++i) {
      then_values[i] = x[(start + i + 4) % x.size()];
      else_values[i] = -x[(start + 7 * i + 3) % x.size()];
    }
    const Packet condition = Eigen::internal::ploadu<Packet>(&x[start]);
    const Packet mask = Eigen::internal::pcmp_le(Eigen::internal::pzero(condition), condition);
    Eigen::internal::pstore(out, Eigen::internal::pselect(
                                     mask, Eigen::internal::pload<Packet>(then_values),
                                     Eigen::internal::pload<Packet>(else_values)));
    for (int i = 0; i < kLanes; ++i) {
      const double expected = 0 <= x[start + i] ? then_values[i] : else_values[i];
      EXPECT_TRUE(SameBits(out[i], expected)) << "lane " << i << " of the packet at " << start;
    }
  }
}

// A tensor select, as the CPU executor's kernels evaluate them (the ELU of the awkward values,
// 19 of them so that the packet loop and its scalar tail both run).
TEST(GccAvxBlendTest, TensorSelectMatchesTheScalarExpression) {
  std::vector<float> input = Awkward();
  input.insert(input.end(), {-3.0f, 2.0f, -0.25f});
  std::vector<float> output(input.size());
  Eigen::TensorMap<Eigen::Tensor<const float, 1, Eigen::RowMajor, long>> x(input.data(),
                                                                           input.size());
  Eigen::TensorMap<Eigen::Tensor<float, 1, Eigen::RowMajor, long>> y(output.data(),
                                                                     output.size());
  y = (x < x.constant(0.0f)).select(x.exp() - x.constant(1.0f), x);
  for (size_t i = 0; i < input.size(); ++i) {
    const float v = input[i];
    if (std::isnan(v)) {
      EXPECT_TRUE(SameBits(output[i], v)) << i;  // NaN < 0 is false: the NaN itself
    } else if (v < 0) {
      EXPECT_NEAR(output[i], std::exp(v) - 1.0f, 1e-6f) << i;
    } else {
      EXPECT_TRUE(SameBits(output[i], v)) << i;
    }
  }
}

}  // namespace
}  // namespace vgpu
