// Tests of the CPU executor's 16-bit <-> float32 array conversions
// (backend/cpu/kernels/float_staging.h): each equals Eigen's conversion of every element, the
// one TensorFlow's CPU kernels use, whatever path (F16C or portable loop) this CPU takes.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/backend/cpu/kernels/float_staging.h"

namespace vgpu::cpu_kernels {
namespace {

uint32_t BitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float FromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// Floats worth converting: ties to even in both 16-bit types, the types' largest values and
// the next ones up, infinities, NaNs of both signs and with payloads, denormals, zeros, and a
// deterministic spread of random bit patterns.
std::vector<float> EdgeAndRandomFloats() {
  std::vector<float> values;
  for (uint32_t bits : {0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu, 0x7f7f8000u,
                        0x477fe000u, 0x477ff000u, 0x477fefffu, 0x38800000u, 0x33800000u,
                        0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u,
                        0xff812345u, 0x00000001u, 0x80400000u, 0x00000000u, 0x80000000u}) {
    values.push_back(FromBits(bits));
  }
  std::mt19937 random(7);
  for (int i = 0; i < 100000; ++i) values.push_back(FromBits(static_cast<uint32_t>(random())));
  return values;
}

TEST(FloatStaging, BFloat16WidensEveryValueAsEigenDoes) {
  std::vector<Eigen::bfloat16> all(1 << 16);
  for (uint32_t b = 0; b < all.size(); ++b) all[b] = Eigen::numext::bit_cast<Eigen::bfloat16>(
                                              static_cast<uint16_t>(b));
  std::vector<float> widened(all.size());
  BFloat16ToFloat(all.data(), widened.data(), static_cast<int64_t>(all.size()));
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(BitsOf(widened[i]), BitsOf(static_cast<float>(all[i]))) << "bfloat16 bits " << i;
  }
}

TEST(FloatStaging, FloatNarrowsToBFloat16AsEigenRoundsIt) {
  const std::vector<float> values = EdgeAndRandomFloats();
  std::vector<Eigen::bfloat16> narrowed(values.size());
  FloatToBFloat16(values.data(), narrowed.data(), static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t expected = Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(values[i]));
    ASSERT_EQ(Eigen::numext::bit_cast<uint16_t>(narrowed[i]), expected)
        << "float bits " << std::hex << BitsOf(values[i]);
  }
}

TEST(FloatStaging, HalfWidensEveryValueAsEigenDoes) {
  std::vector<Eigen::half> all(1 << 16);
  for (uint32_t b = 0; b < all.size(); ++b) all[b] = Eigen::numext::bit_cast<Eigen::half>(
                                              static_cast<uint16_t>(b));
  std::vector<float> widened(all.size());
  HalfToFloat(all.data(), widened.data(), static_cast<int64_t>(all.size()));
  for (size_t i = 0; i < all.size(); ++i) {
    const float expected = static_cast<float>(all[i]);
    if (std::isnan(expected)) {  // F16C and Eigen may keep different NaN payloads
      ASSERT_TRUE(std::isnan(widened[i])) << "half bits " << i;
      continue;
    }
    ASSERT_EQ(BitsOf(widened[i]), BitsOf(expected)) << "half bits " << i;
  }
}

TEST(FloatStaging, FloatNarrowsToHalfAsEigenRoundsIt) {
  const std::vector<float> values = EdgeAndRandomFloats();
  std::vector<Eigen::half> narrowed(values.size());
  // An odd count, so that the vector loop leaves a tail to the scalar one.
  FloatToHalf(values.data(), narrowed.data(), static_cast<int64_t>(values.size()) - 3);
  for (size_t i = 0; i + 3 < values.size(); ++i) {
    const Eigen::half expected(values[i]);
    if (Eigen::numext::isnan(expected)) {
      ASSERT_TRUE(Eigen::numext::isnan(narrowed[i])) << std::hex << BitsOf(values[i]);
      continue;
    }
    ASSERT_EQ(Eigen::numext::bit_cast<uint16_t>(narrowed[i]),
              Eigen::numext::bit_cast<uint16_t>(expected))
        << "float bits " << std::hex << BitsOf(values[i]);
  }
}

}  // namespace
}  // namespace vgpu::cpu_kernels
