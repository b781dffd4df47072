// CPU kernels of the random family (protocol/kernels/random.h): uniform, normal, truncated
// normal and integer random numbers from Philox4x32-10, equal bit for bit to TensorFlow's
// stateless random ops.
//
// Uniform, normal and integer outputs follow TensorFlow's fixed-size distributions: every
// Philox block yields one group of elements (4 of the 32- and 16-bit types, 2 of the 64-bit
// ones), so group g comes from block g and the output is filled in parallel, each thread
// skipping its generator to its first block. The truncated normal needs a varying number of
// words per group; TensorFlow reserves 256 blocks' worth of words (4 * 256 / 4 = 256 blocks, or
// 128 for float64) to each output group, so group g starts at block g * 256 whatever the
// threads do, and the groups are again independent.
//
// The launches are read and validated by the launch layer (launch/random_launch.h), as for the
// CUDA executor; these kernels only compute.
#define EIGEN_USE_THREADS
#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>

#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/launch/random_launch.h"
#include "plugin/common/philox.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/random.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

using random_launch::FillPhiloxOutput;
using random_launch::FillRandomOutput;
using random_launch::RandomOutput;
using random_launch::ReadKeyCounterLaunch;
using random_launch::ReadUniformIntLaunch;
using random_launch::ResolveKeyCounter;
using random_launch::UniformIntLaunch;

// Rounds a float result to T as TensorFlow's distributions do (Eigen's conversions).
template <typename T>
T FromFloat(float value) {
  return static_cast<T>(value);
}

// --- Fixed-size distributions: one Philox block -> kPerBlock elements. ---

// The distributions that make each value of T from its own bits of the block: word i (4 values
// a block) or, for a 64-bit T, words 2i and 2i + 1, low first (2 values a block).
// out[i] = Derived::Value(bits of value i).
template <typename T, typename Derived>
struct PerValueFromBlock {
  static constexpr int kPerBlock = sizeof(T) == 8 ? 2 : 4;
  using Bits = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
  void Write(const Philox4x32::Block& b, T* out, int count) const {
    const Derived& distribution = static_cast<const Derived&>(*this);
    for (int i = 0; i < count; ++i) {
      if constexpr (sizeof(T) == 8) {
        out[i] = distribution.Value(b.word[2 * i] |
                                    (static_cast<uint64_t>(b.word[2 * i + 1]) << 32));
      } else {
        out[i] = distribution.Value(b.word[i]);
      }
    }
  }
};

// Uniform values in [0, 1).
template <typename T>
struct UniformFromBlock : PerValueFromBlock<T, UniformFromBlock<T>> {
  static T Value(typename PerValueFromBlock<T, UniformFromBlock<T>>::Bits bits) {
    if constexpr (std::is_same_v<T, double>) {
      return UniformDouble(static_cast<uint32_t>(bits), static_cast<uint32_t>(bits >> 32));
    } else if constexpr (std::is_same_v<T, Eigen::half>) {
      return Eigen::half(UniformHalfValue(bits));
    } else if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
      return Eigen::bfloat16(UniformBFloat16Value(bits));
    } else {
      static_assert(std::is_same_v<T, float>);
      return UniformFloat(bits);
    }
  }
};

// Standard normals: Box-Muller in float for the 32- and 16-bit types, in double for float64.
template <typename T>
struct NormalFromBlock {
  static constexpr int kPerBlock = 4;
  static void Write(const Philox4x32::Block& b, T* out, int count) {
    float values[4];
    BoxMullerFloat(b.word[0], b.word[1], &values[0], &values[1]);
    BoxMullerFloat(b.word[2], b.word[3], &values[2], &values[3]);
    for (int i = 0; i < count; ++i) out[i] = FromFloat<T>(values[i]);
  }
};

template <>
struct NormalFromBlock<double> {
  static constexpr int kPerBlock = 2;
  static void Write(const Philox4x32::Block& b, double* out, int count) {
    double values[2];
    BoxMullerDouble(b.word[0], b.word[1], b.word[2], b.word[3], &values[0], &values[1]);
    for (int i = 0; i < count; ++i) out[i] = values[i];
  }
};

// Integers (int32 or int64) in [minval, minval + range): the bits modulo the range, added with
// wrap-around.
template <typename T>
struct UniformIntFromBlock : PerValueFromBlock<T, UniformIntFromBlock<T>> {
  using Bits = typename PerValueFromBlock<T, UniformIntFromBlock<T>>::Bits;
  UniformIntFromBlock(T minval, Bits range) : minval(minval), range(range) {}
  T Value(Bits bits) const { return static_cast<T>(static_cast<Bits>(minval) + bits % range); }
  T minval;
  Bits range;
};

// The raw bits as integers (int32 or int64).
template <typename T>
struct FullIntFromBlock : PerValueFromBlock<T, FullIntFromBlock<T>> {
  static T Value(typename PerValueFromBlock<T, FullIntFromBlock<T>>::Bits bits) {
    return static_cast<T>(bits);
  }
};

// Fills out[0, params.count) with `convert` applied to consecutive Philox blocks.
template <typename T, typename Convert>
void FillFromBlocks(const Eigen::ThreadPoolDevice& device, const random::PhiloxParams& params,
                    const Convert& convert, T* out) {
  const int64_t count = static_cast<int64_t>(params.count);
  const int64_t blocks = (count + Convert::kPerBlock - 1) / Convert::kPerBlock;
  const Philox4x32 base(params.key, params.counter);
  auto fill = [&](Eigen::Index first, Eigen::Index last) {
    Philox4x32 generator = base;
    generator.Skip(static_cast<uint64_t>(first));
    Eigen::Index block = first;
    Philox4x32::Block batch[Philox4x32::kBatch];
    for (; last - block >= Philox4x32::kBatch; block += Philox4x32::kBatch) {
      generator.NextBatch(batch);
      // The output's last block may be partial: its count is clipped.
      for (int i = 0; i < Philox4x32::kBatch; ++i) {
        const int64_t offset = (block + i) * Convert::kPerBlock;
        const int n = static_cast<int>(std::min<int64_t>(Convert::kPerBlock, count - offset));
        convert.Write(batch[i], out + offset, n);
      }
    }
    for (; block < last; ++block) {
      const int64_t offset = block * Convert::kPerBlock;
      const int n = static_cast<int>(std::min<int64_t>(Convert::kPerBlock, count - offset));
      convert.Write(generator.Next(), out + offset, n);
    }
  };
  // About 10 rounds of two multiplies per block, plus the conversions.
  device.parallelFor(blocks, Eigen::TensorOpCost(0, Convert::kPerBlock * sizeof(T), 100), fill);
}

// --- The truncated normal: a variable number of words per output group. ---

// The next Box-Muller pair from `words`: from two words in float, or four in double for
// float64.
template <typename T>
auto NextBoxMullerPair(PhiloxWords& words) {
  if constexpr (std::is_same_v<T, double>) {
    const uint32_t x0 = words.Next();
    const uint32_t x1 = words.Next();
    const uint32_t x2 = words.Next();
    const uint32_t x3 = words.Next();
    std::array<double, 2> values;
    BoxMullerDouble(x0, x1, x2, x3, &values[0], &values[1]);
    return values;
  } else {
    const uint32_t x0 = words.Next();
    const uint32_t x1 = words.Next();
    std::array<float, 2> values;
    BoxMullerFloat(x0, x1, &values[0], &values[1]);
    return values;
  }
}

// The words of one output group and the values they give: Box-Muller pairs whose members with
// |value| < 2 are kept in order.
template <typename T>
struct TruncatedNormalGroup {
  static constexpr int kPerGroup = std::is_same_v<T, double> ? 2 : 4;
  // kPerGroup * 256 words reserved, 4 per block.
  static constexpr uint64_t kBlocksPerGroup = kPerGroup * 256 / 4;
  static void Fill(PhiloxWords& words, T* out) {
    int index = 0;
    while (true) {
      for (const auto value : NextBoxMullerPair<T>(words)) {
        if (std::abs(value) < decltype(value)(2)) {
          out[index++] = static_cast<T>(value);
          if (index == kPerGroup) return;
        }
      }
    }
  }
};

template <typename T>
void FillTruncatedNormal(const Eigen::ThreadPoolDevice& device,
                         const random::PhiloxParams& params, T* out) {
  using Group = TruncatedNormalGroup<T>;
  const int64_t count = static_cast<int64_t>(params.count);
  const int64_t groups = (count + Group::kPerGroup - 1) / Group::kPerGroup;
  const Philox4x32 base(params.key, params.counter);
  auto fill = [&](Eigen::Index first, Eigen::Index last) {
    for (Eigen::Index group = first; group < last; ++group) {
      Philox4x32 generator = base;
      generator.Skip(static_cast<uint64_t>(group) * Group::kBlocksPerGroup);
      PhiloxWords words(&generator);
      const int64_t offset = group * Group::kPerGroup;
      if (count - offset >= Group::kPerGroup) {
        Group::Fill(words, out + offset);
      } else {  // the last, partial group
        T values[Group::kPerGroup];
        Group::Fill(words, values);
        std::copy(values, values + (count - offset), out + offset);
      }
    }
  };
  // About 1.2 Box-Muller pairs per accepted pair, each a block's worth of Philox rounds.
  device.parallelFor(groups, Eigen::TensorOpCost(0, Group::kPerGroup * sizeof(T), 400), fill);
}

// --- Kernels: their launches are read by the launch layer (launch/random_launch.h). ---

// The key and counter of a launch, from its buffers where it names them (host memory here).
absl::StatusOr<random::PhiloxParams> KeyCounterOf(const KernelContext& context,
                                                  const random::PhiloxParams& params) {
  return ResolveKeyCounter(params, [&](size_t index, uint64_t* out, uint64_t words) {
    absl::StatusOr<uint64_t*> buffer = context.Buffer<uint64_t>(index, words);
    if (!buffer.ok()) return buffer.status();
    std::copy(*buffer, *buffer + words, out);
    return absl::OkStatus();
  });
}

// random::kUniform, kNormal and kTruncatedNormal.
template <template <typename> class Distribution>
absl::Status FloatingRandomKernel(const KernelContext& context) {
  return FillPhiloxOutput<Dispatch, RandomOutput::kFloating>(
      context, [&](const random::PhiloxParams& launched, auto* out) -> absl::Status {
        using T = std::remove_pointer_t<decltype(out)>;
        VGPU_ASSIGN_OR_RETURN(const random::PhiloxParams params, KeyCounterOf(context, launched));
        if constexpr (std::is_same_v<Distribution<T>, TruncatedNormalGroup<T>>) {
          FillTruncatedNormal<T>(*context.device, params, out);
        } else {
          FillFromBlocks<T>(*context.device, params, Distribution<T>(), out);
        }
        return absl::OkStatus();
      });
}

// random::kUniformInt.
absl::Status UniformInt(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const UniformIntLaunch launch, ReadUniformIntLaunch(context));
  return FillRandomOutput<Dispatch, RandomOutput::kInt32Or64>(
      context, launch.philox, [&](auto* out) -> absl::Status {
        using T = std::remove_pointer_t<decltype(out)>;
        const UniformIntFromBlock<T> convert{static_cast<T>(launch.minval),
                                             static_cast<std::make_unsigned_t<T>>(launch.range)};
        VGPU_ASSIGN_OR_RETURN(const random::PhiloxParams params,
                              KeyCounterOf(context, launch.philox));
        FillFromBlocks<T>(*context.device, params, convert, out);
        return absl::OkStatus();
      });
}

// random::kUniformFullInt.
absl::Status UniformFullInt(const KernelContext& context) {
  return FillPhiloxOutput<Dispatch, RandomOutput::kInt32Or64>(
      context, [&](const random::PhiloxParams& launched, auto* out) -> absl::Status {
        using T = std::remove_pointer_t<decltype(out)>;
        VGPU_ASSIGN_OR_RETURN(const random::PhiloxParams params, KeyCounterOf(context, launched));
        FillFromBlocks<T>(*context.device, params, FullIntFromBlock<T>(), out);
        return absl::OkStatus();
      });
}

// random::kKeyCounterFromSeed.
absl::Status KeyCounterFromSeedKernel(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const DType dtype, ReadKeyCounterLaunch(context));
  uint64_t seed[2];
  if (dtype == DType::kInt32) {
    VGPU_ASSIGN_OR_RETURN(const int32_t* values, context.Buffer<int32_t>(0, 2));
    // As TensorFlow converts its seed tensor's values: int32 -> int64 -> uint64.
    for (int i = 0; i < 2; ++i) seed[i] = static_cast<uint64_t>(static_cast<int64_t>(values[i]));
  } else {
    VGPU_ASSIGN_OR_RETURN(const int64_t* values, context.Buffer<int64_t>(0, 2));
    for (int i = 0; i < 2; ++i) seed[i] = static_cast<uint64_t>(values[i]);
  }
  VGPU_ASSIGN_OR_RETURN(uint64_t* key, context.Buffer<uint64_t>(1, 1));
  VGPU_ASSIGN_OR_RETURN(uint64_t* counter, context.Buffer<uint64_t>(2, 2));
  KeyCounterFromSeed(seed[0], seed[1], key, counter);
  return absl::OkStatus();
}

}  // namespace

void AddRandomKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kRandom, FloatingRandomKernel<UniformFromBlock>,
                  FloatingRandomKernel<NormalFromBlock>,
                  FloatingRandomKernel<TruncatedNormalGroup>, UniformInt, UniformFullInt,
                  KeyCounterFromSeedKernel);
}

}  // namespace vgpu::cpu_kernels
