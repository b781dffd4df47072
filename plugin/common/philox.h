// The Philox4x32-10 counter-based generator (Salmon et al., "Parallel Random Numbers: As Easy
// as 1, 2, 3", SC'11) with TensorFlow's conventions, and TensorFlow's conversions from random
// bits to numbers (random_distributions.h), so that the random kernels reproduce TensorFlow's
// stateless random ops bit for bit:
//   - state: a 128-bit counter as four uint32 words (word 0 least significant) and a 64-bit key
//     as two uint32 words; TensorFlow's uint64 key tensor holds key words (lo, hi), its uint64
//     counter tensor [c0, c1] holds counter words (c0 lo, c0 hi, c1 lo, c1 hi);
//   - each call of Next() yields four uint32 and then advances the counter by one.
// Pure arithmetic, header-only: the executors' random kernels use it, among them the one that
// derives a key and counter from a seed (random::kKeyCounterFromSeed, behind
// StatelessRandomGetKeyCounter).
#ifndef VGPU_COMMON_PHILOX_H_
#define VGPU_COMMON_PHILOX_H_

#include <cmath>
#include <cstdint>
#include <cstring>

namespace vgpu {

class Philox4x32 {
 public:
  struct Block {
    uint32_t word[4];
  };

  // The generator of raw counter and key words.
  Philox4x32(const uint32_t counter[4], const uint32_t key[2]) {
    std::memcpy(counter_, counter, sizeof(counter_));
    std::memcpy(key_, key, sizeof(key_));
  }

  // The generator TensorFlow builds from its key tensor and counter tensor (random_ops_util.h).
  Philox4x32(uint64_t key, const uint64_t counter[2]) {
    key_[0] = static_cast<uint32_t>(key);
    key_[1] = static_cast<uint32_t>(key >> 32);
    counter_[0] = static_cast<uint32_t>(counter[0]);
    counter_[1] = static_cast<uint32_t>(counter[0] >> 32);
    counter_[2] = static_cast<uint32_t>(counter[1]);
    counter_[3] = static_cast<uint32_t>(counter[1] >> 32);
  }

  // Advances the 128-bit counter by `blocks`, as if Next() had been called that many times.
  void Skip(uint64_t blocks) {
    const uint32_t lo = static_cast<uint32_t>(blocks);
    uint32_t hi = static_cast<uint32_t>(blocks >> 32);
    counter_[0] += lo;
    if (counter_[0] < lo) ++hi;  // carry out of word 0
    counter_[1] += hi;
    if (counter_[1] < hi && ++counter_[2] == 0) ++counter_[3];
  }

  // Ten rounds of Philox on the current counter; then the counter moves on by one.
  Block Next() {
    uint32_t c[4] = {counter_[0], counter_[1], counter_[2], counter_[3]};
    uint32_t k0 = key_[0], k1 = key_[1];
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        k0 += kWeylA;
        k1 += kWeylB;
      }
      Round(c[0], c[1], c[2], c[3], k0, k1);
    }
    Skip(1);
    return Block{{c[0], c[1], c[2], c[3]}};
  }

  // The next kBatch blocks, as kBatch calls of Next() would return them, into out[0, kBatch).
  // The blocks are independent, so their rounds are computed side by side, lane by lane: the
  // processor overlaps them (and the compiler may vectorise them) instead of waiting on one
  // block's chain of multiplies. About 1.8x Next()'s speed (x86-64, -O2).
  static constexpr int kBatch = 16;
  void NextBatch(Block* out) {
    uint32_t c0[kBatch], c1[kBatch], c2[kBatch], c3[kBatch];
    for (int i = 0; i < kBatch; ++i) {  // counter + i, carried through the four words
      const uint32_t word0 = counter_[0] + static_cast<uint32_t>(i);
      const uint32_t carry0 = word0 < counter_[0];
      const uint32_t word1 = counter_[1] + carry0;
      const uint32_t carry1 = carry0 & static_cast<uint32_t>(word1 == 0);
      const uint32_t word2 = counter_[2] + carry1;
      const uint32_t carry2 = carry1 & static_cast<uint32_t>(word2 == 0);
      c0[i] = word0;
      c1[i] = word1;
      c2[i] = word2;
      c3[i] = counter_[3] + carry2;
    }
    uint32_t k0 = key_[0], k1 = key_[1];
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        k0 += kWeylA;
        k1 += kWeylB;
      }
      for (int i = 0; i < kBatch; ++i) Round(c0[i], c1[i], c2[i], c3[i], k0, k1);
    }
    for (int i = 0; i < kBatch; ++i) out[i] = Block{{c0[i], c1[i], c2[i], c3[i]}};
    Skip(kBatch);
  }

 private:
  static constexpr uint32_t kMultiplierA = 0xD2511F53;
  static constexpr uint32_t kMultiplierB = 0xCD9E8D57;
  static constexpr uint32_t kWeylA = 0x9E3779B9;  // golden ratio
  static constexpr uint32_t kWeylB = 0xBB67AE85;  // sqrt(3) - 1

  // One Philox round on the counter words (c0..c3) under the round's key words.
  static void Round(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t k0,
                    uint32_t k1) {
    const uint64_t product0 = static_cast<uint64_t>(kMultiplierA) * c0;
    const uint64_t product1 = static_cast<uint64_t>(kMultiplierB) * c2;
    c0 = static_cast<uint32_t>(product1 >> 32) ^ c1 ^ k0;
    c1 = static_cast<uint32_t>(product1);
    c2 = static_cast<uint32_t>(product0 >> 32) ^ c3 ^ k1;
    c3 = static_cast<uint32_t>(product0);
  }
  uint32_t counter_[4];
  uint32_t key_[2];
};

// One 32-bit word at a time from a Philox4x32 (TensorFlow's SingleSampleAdapter): a block is
// generated when the previous one is used up.
class PhiloxWords {
 public:
  explicit PhiloxWords(Philox4x32* generator) : generator_(generator) {}
  uint32_t Next() {
    if (used_ == 4) {
      block_ = generator_->Next();
      used_ = 0;
    }
    return block_.word[used_++];
  }

 private:
  Philox4x32* generator_;
  Philox4x32::Block block_{};
  int used_ = 4;
};

// Uniform [0, 1) float from 23 random mantissa bits: 1.m - 1.
inline float UniformFloat(uint32_t bits) {
  const uint32_t one_point_m = (127u << 23) | (bits & 0x7fffffu);
  float value;
  std::memcpy(&value, &one_point_m, sizeof(value));
  return value - 1.0f;
}

// Uniform [0, 1) double from 52 random mantissa bits: 20 from `high`, 32 from `low`.
inline double UniformDouble(uint32_t high, uint32_t low) {
  const uint64_t mantissa = (static_cast<uint64_t>(high & 0xfffffu) << 32) | low;
  const uint64_t one_point_m = (uint64_t{1023} << 52) | mantissa;
  double value;
  std::memcpy(&value, &one_point_m, sizeof(value));
  return value - 1.0;
}

// The random mantissa of TensorFlow's half and bfloat16 uniforms, as the exact value in [0, 1):
// TensorFlow forms 1.m in the 16-bit format from the low 10 (half) or 7 (bfloat16) bits and
// subtracts 1, which is exact, so the result is m / 2^10 or m / 2^7.
inline float UniformHalfValue(uint32_t bits) {
  return static_cast<float>(bits & 0x3ffu) * (1.0f / 1024.0f);
}
inline float UniformBFloat16Value(uint32_t bits) {
  return static_cast<float>(bits & 0x7fu) * (1.0f / 128.0f);
}

// Two standard normal floats from two words (TensorFlow's BoxMullerFloat, operation for
// operation: the angle is formed in double from M_PI and rounded to float; sincosf, logf and
// sqrtf as TensorFlow's Linux build calls them).
inline void BoxMullerFloat(uint32_t x0, uint32_t x1, float* f0, float* f1) {
  constexpr double kPi = 3.14159265358979323846;  // M_PI
  const float epsilon = 1.0e-7f;
  float u1 = UniformFloat(x0);
  if (u1 < epsilon) u1 = epsilon;
  const float v1 = 2.0f * kPi * UniformFloat(x1);
  const float u2 = std::sqrt(-2.0f * std::log(u1));
  ::sincosf(v1, f0, f1);
  *f0 *= u2;
  *f1 *= u2;
}

// Two standard normal doubles from four words (TensorFlow's BoxMullerDouble).
inline void BoxMullerDouble(uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3, double* d0,
                            double* d1) {
  constexpr double kPi = 3.14159265358979323846;  // M_PI
  const double epsilon = 1.0e-7;
  double u1 = UniformDouble(x0, x1);
  if (u1 < epsilon) u1 = epsilon;
  const double v1 = 2 * kPi * UniformDouble(x2, x3);
  const double u2 = std::sqrt(-2.0 * std::log(u1));
  ::sincos(v1, d0, d1);
  *d0 *= u2;
  *d1 *= u2;
}

// TensorFlow's StatelessRandomGetKeyCounter for Philox: the seed pair scrambled by one Philox
// block under a fixed key into the key and counter tensors' values.
inline void KeyCounterFromSeed(uint64_t seed0, uint64_t seed1, uint64_t* key,
                               uint64_t counter[2]) {
  const uint32_t seed_counter[4] = {static_cast<uint32_t>(seed0),
                                    static_cast<uint32_t>(seed0 >> 32),
                                    static_cast<uint32_t>(seed1),
                                    static_cast<uint32_t>(seed1 >> 32)};
  const uint32_t scramble_key[2] = {0x3ec8f720, 0x02461e29};
  const Philox4x32::Block mix = Philox4x32(seed_counter, scramble_key).Next();
  *key = mix.word[0] | (static_cast<uint64_t>(mix.word[1]) << 32);
  counter[0] = 0;
  counter[1] = mix.word[2] | (static_cast<uint64_t>(mix.word[3]) << 32);
}

}  // namespace vgpu

#endif  // VGPU_COMMON_PHILOX_H_
