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

using random_launch::RandomOutput;
using random_launch::ReadPhiloxLaunch;
using random_launch::ReadUniformIntLaunch;
using random_launch::UniformIntLaunch;

// Rounds a float result to T as TensorFlow's distributions do (Eigen's conversions).
template <typename T>
T FromFloat(float value) {
  return static_cast<T>(value);
}

// --- Fixed-size distributions: one Philox block -> kPerBlock elements. ---

template <typename T>
struct UniformFromBlock;

template <>
struct UniformFromBlock<float> {
  static constexpr int kPerBlock = 4;
  static void Write(const Philox4x32::Block& b, float* out, int count) {
    for (int i = 0; i < count; ++i) out[i] = UniformFloat(b.word[i]);
  }
};

template <>
struct UniformFromBlock<double> {
  static constexpr int kPerBlock = 2;
  static void Write(const Philox4x32::Block& b, double* out, int count) {
    for (int i = 0; i < count; ++i) out[i] = UniformDouble(b.word[2 * i], b.word[2 * i + 1]);
  }
};

template <>
struct UniformFromBlock<Eigen::half> {
  static constexpr int kPerBlock = 4;
  static void Write(const Philox4x32::Block& b, Eigen::half* out, int count) {
    for (int i = 0; i < count; ++i) out[i] = Eigen::half(UniformHalfValue(b.word[i]));
  }
};

template <>
struct UniformFromBlock<Eigen::bfloat16> {
  static constexpr int kPerBlock = 4;
  static void Write(const Philox4x32::Block& b, Eigen::bfloat16* out, int count) {
    for (int i = 0; i < count; ++i) out[i] = Eigen::bfloat16(UniformBFloat16Value(b.word[i]));
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

// Integers in [minval, maxval): the bits modulo the range, added with wrap-around.
template <typename T>
struct UniformIntFromBlock;

template <>
struct UniformIntFromBlock<int32_t> {
  static constexpr int kPerBlock = 4;
  int32_t minval;
  uint32_t range;
  void Write(const Philox4x32::Block& b, int32_t* out, int count) const {
    for (int i = 0; i < count; ++i) {
      out[i] = static_cast<int32_t>(static_cast<uint32_t>(minval) + b.word[i] % range);
    }
  }
};

template <>
struct UniformIntFromBlock<int64_t> {
  static constexpr int kPerBlock = 2;
  int64_t minval;
  uint64_t range;
  void Write(const Philox4x32::Block& b, int64_t* out, int count) const {
    for (int i = 0; i < count; ++i) {
      const uint64_t bits = b.word[2 * i] | (static_cast<uint64_t>(b.word[2 * i + 1]) << 32);
      out[i] = static_cast<int64_t>(static_cast<uint64_t>(minval) + bits % range);
    }
  }
};

// The raw bits as integers.
template <typename T>
struct FullIntFromBlock;

template <>
struct FullIntFromBlock<int32_t> {
  static constexpr int kPerBlock = 4;
  static void Write(const Philox4x32::Block& b, int32_t* out, int count) {
    for (int i = 0; i < count; ++i) out[i] = static_cast<int32_t>(b.word[i]);
  }
};

template <>
struct FullIntFromBlock<int64_t> {
  static constexpr int kPerBlock = 2;
  static void Write(const Philox4x32::Block& b, int64_t* out, int count) {
    for (int i = 0; i < count; ++i) {
      out[i] = static_cast<int64_t>(b.word[2 * i] |
                                    (static_cast<uint64_t>(b.word[2 * i + 1]) << 32));
    }
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
    for (Eigen::Index block = first; block < last; ++block) {
      const int64_t offset = block * Convert::kPerBlock;
      const int n = static_cast<int>(std::min<int64_t>(Convert::kPerBlock, count - offset));
      convert.Write(generator.Next(), out + offset, n);
    }
  };
  // About 10 rounds of two multiplies per block, plus the conversions.
  device.parallelFor(blocks, Eigen::TensorOpCost(0, Convert::kPerBlock * sizeof(T), 100), fill);
}

// --- The truncated normal: a variable number of words per output group. ---

// The words of one output group and the values they give: Box-Muller pairs (from two words,
// or four for float64) whose members with |value| < 2 are kept in order.
template <typename T>
struct TruncatedNormalGroup {
  static constexpr int kPerGroup = 4;
  static constexpr uint64_t kBlocksPerGroup = 256;  // 4 * 256 words reserved, 4 per block
  static void Fill(PhiloxWords& words, T* out) {
    int index = 0;
    while (true) {
      const uint32_t x0 = words.Next();
      const uint32_t x1 = words.Next();
      float values[2];
      BoxMullerFloat(x0, x1, &values[0], &values[1]);
      for (float value : values) {
        if (std::abs(value) < 2.0f) {
          out[index++] = FromFloat<T>(value);
          if (index == kPerGroup) return;
        }
      }
    }
  }
};

template <>
struct TruncatedNormalGroup<double> {
  static constexpr int kPerGroup = 2;
  static constexpr uint64_t kBlocksPerGroup = 128;  // 2 * 256 words reserved, 4 per block
  static void Fill(PhiloxWords& words, double* out) {
    int index = 0;
    while (true) {
      const uint32_t x0 = words.Next();
      const uint32_t x1 = words.Next();
      const uint32_t x2 = words.Next();
      const uint32_t x3 = words.Next();
      double values[2];
      BoxMullerDouble(x0, x1, x2, x3, &values[0], &values[1]);
      for (double value : values) {
        if (std::abs(value) < 2.0) {
          out[index++] = value;
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

// random::kUniform, kNormal and kTruncatedNormal.
template <template <typename> class Distribution>
absl::Status FloatingKernel(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const random::PhiloxParams params,
                        ReadPhiloxLaunch(context, RandomOutput::kFloating));
  return Dispatch::Floating(params.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(T * out, context.Buffer<T>(0, params.count));
    if (params.count == 0) return absl::OkStatus();
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
  return Dispatch::Int32Or64(launch.philox.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(T * out, context.Buffer<T>(0, launch.philox.count));
    if (launch.philox.count == 0) return absl::OkStatus();
    const UniformIntFromBlock<T> convert{static_cast<T>(launch.minval),
                                         static_cast<std::make_unsigned_t<T>>(launch.range)};
    FillFromBlocks<T>(*context.device, launch.philox, convert, out);
    return absl::OkStatus();
  });
}

// random::kUniformFullInt.
absl::Status UniformFullInt(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const random::PhiloxParams params,
                        ReadPhiloxLaunch(context, RandomOutput::kInt32Or64));
  return Dispatch::Int32Or64(params.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(T * out, context.Buffer<T>(0, params.count));
    if (params.count == 0) return absl::OkStatus();
    FillFromBlocks<T>(*context.device, params, FullIntFromBlock<T>(), out);
    return absl::OkStatus();
  });
}

}  // namespace
}  // namespace vgpu::cpu_kernels

namespace vgpu {

void AddRandomKernels(KernelTable& table) {
  using namespace cpu_kernels;  // NOLINT: the kernels of this file
  table.Add(random::kUniform, "random_uniform", FloatingKernel<UniformFromBlock>);
  table.Add(random::kNormal, "random_normal", FloatingKernel<NormalFromBlock>);
  table.Add(random::kTruncatedNormal, "random_truncated_normal",
            FloatingKernel<TruncatedNormalGroup>);
  table.Add(random::kUniformInt, "random_uniform_int", UniformInt);
  table.Add(random::kUniformFullInt, "random_uniform_full_int", UniformFullInt);
}

}  // namespace vgpu
