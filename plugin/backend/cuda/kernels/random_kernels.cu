// CUDA kernels of the random family (protocol/kernels/random.h): uniform, normal, truncated
// normal, uniform integer and full-range integer numbers from Philox4x32-10, bit for bit the
// CPU executor's (cpu/kernels/random_kernels.cc, plugin/common/philox.h), which are
// TensorFlow's stateless random ops'.
//
// Same streams: the key/counter layout of philox.h, Philox block b giving output group b (4
// elements of the 32- and 16-bit types, 2 of the 64-bit ones), one thread per block; the
// truncated normal's group g drawing words from block g * 256 (g * 128 for float64) on, one
// thread per group running the CPU's rejection loop.
//
// Same conversions: the uniforms are exact bit manipulations. Box-Muller in float is the hard
// part: the CPU computes logf, sqrtf and sincosf with the host's glibc, whose logf/sinf/cosf
// are not correctly rounded (errors up to ~0.8 ULP), and CUDA's logf/sinf/cosf differ from them
// (up to 1-2 ULP), so computing them on the device — in float or in double then rounded — would
// not be bit-exact. But each float Box-Muller input is a function of only 23 bits of one word:
//   radius(x0) = sqrtf(-2 * logf(max(UniformFloat(x0), 1e-7)))     (23 bits of x0)
//   (sin, cos)(x1) = sincosf((float)(2 * M_PI * UniformFloat(x1)))  (23 bits of x1)
// and the outputs are sin * radius, cos * radius (one correctly rounded float multiply, the same
// on both sides). So the executor computes both functions once per process on the host, with
// the very libm the CPU executor calls, for all 2^23 inputs, and keeps them as device tables
// (32 MiB radius + 64 MiB sin/cos per device, built on the first normal or truncated normal
// launch: ~0.3 s of host time and a synchronous upload, then kept for the process's life). The
// float, half and bfloat16 normals are then exact by construction; the table build checks a
// sample against philox.h's BoxMullerFloat and fails the launch (Internal) if any differs.
//
// float64 normals (BoxMullerDouble) take 52-bit inputs: no table. They use CUDA's double log,
// sqrt (correctly rounded) and sincos (log within 1 ULP, sincos 2 ULP; glibc's are within
// ~0.5-1 ULP), so a small fraction of float64 normal / truncated normal elements may differ from
// the CPU executor in the last bit or two. Documented limitation.
//
// What the GPU run must confirm: uniform (all four dtypes), uniform int / full int (int32,
// int64) and float/half/bfloat16 normal and truncated normal bit-exact against the CPU executor
// for several keys/counters (including a counter near 2^64 so the Skip carry is exercised) and
// counts not a multiple of 4; float64 normal within a relative 1e-15 (and count how many differ
// bitwise); the first normal launch's latency (table build) is acceptable.
//
// The launch layer (launch/random_launch.h) reads and validates every launch, as for the CPU
// executor; these kernels only compute.
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <type_traits>
#include <vector>

#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/element_helpers.cuh"
#include "plugin/backend/launch/random_launch.h"
#include "plugin/common/philox.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/random.h"

namespace vgpu::cuda {
namespace {

using namespace random_launch;  // NOLINT: the family's launches, readers and output fills

// --- Philox4x32-10 on the device (philox.h's arithmetic) --------------------------------------

struct DevicePhilox {
  uint32_t counter[4];
  uint32_t key[2];

  __device__ void Skip(uint64_t blocks) {
    const uint32_t lo = static_cast<uint32_t>(blocks);
    uint32_t hi = static_cast<uint32_t>(blocks >> 32);
    counter[0] += lo;
    if (counter[0] < lo) ++hi;
    counter[1] += hi;
    if (counter[1] < hi && ++counter[2] == 0) ++counter[3];
  }

  __device__ uint4 Next() {
    uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
    uint32_t k0 = key[0], k1 = key[1];
#pragma unroll
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
      }
      const uint32_t hi0 = __umulhi(0xD2511F53u, c0);
      const uint32_t lo0 = 0xD2511F53u * c0;
      const uint32_t hi1 = __umulhi(0xCD9E8D57u, c2);
      const uint32_t lo1 = 0xCD9E8D57u * c2;
      const uint32_t n0 = hi1 ^ c1 ^ k0;
      const uint32_t n2 = hi0 ^ c3 ^ k1;
      c0 = n0;
      c1 = lo1;
      c2 = n2;
      c3 = lo0;
    }
    Skip(1);
    return make_uint4(c0, c1, c2, c3);
  }
};

DevicePhilox MakePhilox(const random::PhiloxParams& params) {
  DevicePhilox philox;
  philox.key[0] = static_cast<uint32_t>(params.key);
  philox.key[1] = static_cast<uint32_t>(params.key >> 32);
  philox.counter[0] = static_cast<uint32_t>(params.counter[0]);
  philox.counter[1] = static_cast<uint32_t>(params.counter[0] >> 32);
  philox.counter[2] = static_cast<uint32_t>(params.counter[1]);
  philox.counter[3] = static_cast<uint32_t>(params.counter[1] >> 32);
  return philox;
}

__device__ inline uint32_t Word(const uint4& b, int i) {
  return i == 0 ? b.x : (i == 1 ? b.y : (i == 2 ? b.z : b.w));
}

// One 32-bit word at a time (PhiloxWords).
struct DeviceWords {
  DevicePhilox* generator;
  uint4 block;
  int used = 4;
  __device__ uint32_t Next() {
    if (used == 4) {
      block = generator->Next();
      used = 0;
    }
    return Word(block, used++);
  }
};

// --- Conversions (philox.h) -----------------------------------------------------------------

__device__ inline float DeviceUniformFloat(uint32_t bits) {
  return __uint_as_float((127u << 23) | (bits & 0x7fffffu)) - 1.0f;
}

__device__ inline double DeviceUniformDouble(uint32_t high, uint32_t low) {
  const uint64_t mantissa = (static_cast<uint64_t>(high & 0xfffffu) << 32) | low;
  return __longlong_as_double(static_cast<long long>((uint64_t{1023} << 52) | mantissa)) - 1.0;
}

// The float Box-Muller tables (see the top of the file).
struct NormalTables {
  const float* radius = nullptr;   // [2^23]
  const float2* sincos = nullptr;  // [2^23]: (sin, cos)
};

constexpr uint32_t kMantissaValues = 1u << 23;

__device__ inline void DeviceBoxMullerFloat(const NormalTables& t, uint32_t x0, uint32_t x1,
                                            float* f0, float* f1) {
  const float radius = t.radius[x0 & 0x7fffffu];
  const float2 sc = t.sincos[x1 & 0x7fffffu];
  *f0 = __fmul_rn(sc.x, radius);
  *f1 = __fmul_rn(sc.y, radius);
}

// philox.h's BoxMullerDouble with CUDA's double functions (see the top of the file).
__device__ inline void DeviceBoxMullerDouble(uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3,
                                             double* d0, double* d1) {
  const double kPi = 3.14159265358979323846;
  const double epsilon = 1.0e-7;
  double u1 = DeviceUniformDouble(x0, x1);
  if (u1 < epsilon) u1 = epsilon;
  const double v1 = __dmul_rn(2 * kPi, DeviceUniformDouble(x2, x3));
  const double u2 = __dsqrt_rn(__dmul_rn(-2.0, log(u1)));
  double s, c;
  sincos(v1, &s, &c);
  *d0 = __dmul_rn(s, u2);
  *d1 = __dmul_rn(c, u2);
}

template <typename T>
__device__ inline T FromFloat(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return T(v);  // Half / BFloat16: round to nearest even, as Eigen's conversions
  }
}

// --- Fixed-size distributions: one block -> kPerBlock elements -------------------------------

template <typename T>
struct UniformDistribution {
  static constexpr int kPerBlock = std::is_same_v<T, double> ? 2 : 4;
  __device__ void Write(const uint4& b, T* out, int count) const {
    for (int i = 0; i < count; ++i) {
      if constexpr (std::is_same_v<T, double>) {
        out[i] = DeviceUniformDouble(Word(b, 2 * i), Word(b, 2 * i + 1));
      } else if constexpr (std::is_same_v<T, float>) {
        out[i] = DeviceUniformFloat(Word(b, i));
      } else if constexpr (std::is_same_v<T, elements::Half>) {
        // UniformHalfValue: m / 2^10, exact.
        out[i] = T(static_cast<float>(Word(b, i) & 0x3ffu) * (1.0f / 1024.0f));
      } else {
        out[i] = T(static_cast<float>(Word(b, i) & 0x7fu) * (1.0f / 128.0f));
      }
    }
  }
};

template <typename T>
struct NormalDistribution {
  static constexpr int kPerBlock = std::is_same_v<T, double> ? 2 : 4;
  NormalTables tables;
  __device__ void Write(const uint4& b, T* out, int count) const {
    if constexpr (std::is_same_v<T, double>) {
      double values[2];
      DeviceBoxMullerDouble(b.x, b.y, b.z, b.w, &values[0], &values[1]);
      for (int i = 0; i < count; ++i) out[i] = values[i];
    } else {
      float values[4];
      DeviceBoxMullerFloat(tables, b.x, b.y, &values[0], &values[1]);
      DeviceBoxMullerFloat(tables, b.z, b.w, &values[2], &values[3]);
      for (int i = 0; i < count; ++i) out[i] = FromFloat<T>(values[i]);
    }
  }
};

template <typename T>
struct UniformIntDistribution {
  static constexpr int kPerBlock = sizeof(T) == 8 ? 2 : 4;
  using Unsigned = std::make_unsigned_t<T>;
  T minval;
  Unsigned range;
  __device__ void Write(const uint4& b, T* out, int count) const {
    for (int i = 0; i < count; ++i) {
      if constexpr (sizeof(T) == 8) {
        const uint64_t bits =
            Word(b, 2 * i) | (static_cast<uint64_t>(Word(b, 2 * i + 1)) << 32);
        out[i] = static_cast<T>(static_cast<uint64_t>(minval) + bits % range);
      } else {
        out[i] = static_cast<T>(static_cast<uint32_t>(minval) + Word(b, i) % range);
      }
    }
  }
};

template <typename T>
struct FullIntDistribution {
  static constexpr int kPerBlock = sizeof(T) == 8 ? 2 : 4;
  __device__ void Write(const uint4& b, T* out, int count) const {
    for (int i = 0; i < count; ++i) {
      if constexpr (sizeof(T) == 8) {
        out[i] = static_cast<T>(Word(b, 2 * i) | (static_cast<uint64_t>(Word(b, 2 * i + 1)) << 32));
      } else {
        out[i] = static_cast<T>(Word(b, i));
      }
    }
  }
};

// out[0, count) from consecutive blocks: thread for block b skips the generator to b.
template <typename T, typename Distribution>
__global__ void FillFromBlocksKernel(DevicePhilox base, Distribution distribution, int64_t count,
                                     int64_t blocks, T* __restrict__ out) {
  for (int64_t block = elements::GridThreadIndex(); block < blocks;
       block += elements::GridStride()) {
    DevicePhilox generator = base;
    generator.Skip(static_cast<uint64_t>(block));
    const uint4 bits = generator.Next();
    const int64_t offset = block * Distribution::kPerBlock;
    const int64_t left = count - offset;
    const int n = left < Distribution::kPerBlock ? static_cast<int>(left) : Distribution::kPerBlock;
    distribution.Write(bits, out + offset, n);
  }
}

// The truncated normal: group g starts at block g * kBlocksPerGroup and keeps |value| < 2.
template <typename T>
__global__ void TruncatedNormalKernel(DevicePhilox base, NormalTables tables, int64_t count,
                                      int64_t groups, T* __restrict__ out) {
  constexpr bool kDouble = std::is_same_v<T, double>;
  constexpr int kPerGroup = kDouble ? 2 : 4;
  constexpr uint64_t kBlocksPerGroup = kDouble ? 128 : 256;
  for (int64_t group = elements::GridThreadIndex(); group < groups;
       group += elements::GridStride()) {
    DevicePhilox generator = base;
    generator.Skip(static_cast<uint64_t>(group) * kBlocksPerGroup);
    DeviceWords words{&generator};
    T values[kPerGroup];
    int index = 0;
    while (index < kPerGroup) {
      if constexpr (kDouble) {
        const uint32_t x0 = words.Next(), x1 = words.Next(), x2 = words.Next(),
                       x3 = words.Next();
        double pair[2];
        DeviceBoxMullerDouble(x0, x1, x2, x3, &pair[0], &pair[1]);
        for (int k = 0; k < 2 && index < kPerGroup; ++k) {
          if (fabs(pair[k]) < 2.0) values[index++] = pair[k];
        }
      } else {
        const uint32_t x0 = words.Next(), x1 = words.Next();
        float pair[2];
        DeviceBoxMullerFloat(tables, x0, x1, &pair[0], &pair[1]);
        for (int k = 0; k < 2 && index < kPerGroup; ++k) {
          if (fabsf(pair[k]) < 2.0f) values[index++] = FromFloat<T>(pair[k]);
        }
      }
    }
    const int64_t offset = group * kPerGroup;
    const int64_t left = count - offset;
    const int n = left < kPerGroup ? static_cast<int>(left) : kPerGroup;
    for (int i = 0; i < n; ++i) out[offset + i] = values[i];
  }
}

// --- The Box-Muller tables ------------------------------------------------------------------

// Device tables per CUDA device ordinal, built once, kept for the process's life.
// Thread-safe; blocks the calling thread (and waits for `stream`) the first time per device.
absl::StatusOr<NormalTables> TablesFor(const CudaLaunchDevice& device) {
  static std::mutex mutex;
  static std::map<int, NormalTables>* tables = new std::map<int, NormalTables>();
  std::lock_guard<std::mutex> lock(mutex);
  auto found = tables->find(device.ordinal);
  if (found != tables->end()) return found->second;

  // The CPU executor's expressions (philox.h BoxMullerFloat), operation for operation.
  std::vector<float> radius(kMantissaValues);
  std::vector<float2> sincos(kMantissaValues);
  constexpr double kPi = 3.14159265358979323846;  // M_PI
  const float epsilon = 1.0e-7f;
  for (uint32_t bits = 0; bits < kMantissaValues; ++bits) {
    float u1 = UniformFloat(bits);
    if (u1 < epsilon) u1 = epsilon;
    radius[bits] = std::sqrt(-2.0f * std::log(u1));
    const float v1 = 2.0f * kPi * UniformFloat(bits);
    float s, c;
    ::sincosf(v1, &s, &c);
    sincos[bits] = make_float2(s, c);
  }
  // The decomposition must reproduce BoxMullerFloat exactly; check a spread of word pairs.
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint32_t x0 = i * 2654435761u, x1 = (i ^ 0x5bd1e995u) * 40503u + i;
    float f0, f1;
    BoxMullerFloat(x0, x1, &f0, &f1);
    const float g0 = sincos[x1 & 0x7fffffu].x * radius[x0 & 0x7fffffu];
    const float g1 = sincos[x1 & 0x7fffffu].y * radius[x0 & 0x7fffffu];
    if (std::memcmp(&f0, &g0, sizeof(float)) != 0 || std::memcmp(&f1, &g1, sizeof(float)) != 0) {
      return absl::InternalError(
          "random normal: the Box-Muller tables do not reproduce the CPU's BoxMullerFloat");
    }
  }
  NormalTables result;
  float* radius_device = nullptr;
  float2* sincos_device = nullptr;
  auto upload = [&]() -> absl::Status {
    VGPU_RETURN_IF_ERROR(elements::CudaError(
        cudaMalloc(&radius_device, kMantissaValues * sizeof(float)), "cudaMalloc (normal tables)"));
    VGPU_RETURN_IF_ERROR(elements::CudaError(
        cudaMalloc(&sincos_device, kMantissaValues * sizeof(float2)),
        "cudaMalloc (normal tables)"));
    VGPU_RETURN_IF_ERROR(elements::CudaError(
        cudaMemcpyAsync(radius_device, radius.data(), kMantissaValues * sizeof(float),
                        cudaMemcpyHostToDevice, device.stream),
        "cudaMemcpyAsync (normal tables)"));
    VGPU_RETURN_IF_ERROR(elements::CudaError(
        cudaMemcpyAsync(sincos_device, sincos.data(), kMantissaValues * sizeof(float2),
                        cudaMemcpyHostToDevice, device.stream),
        "cudaMemcpyAsync (normal tables)"));
    // The host vectors die at return and other streams share the tables: wait for the copy.
    return elements::CudaError(cudaStreamSynchronize(device.stream), "normal tables upload");
  };
  if (absl::Status status = upload(); !status.ok()) {
    if (radius_device != nullptr) cudaFree(radius_device);
    if (sincos_device != nullptr) cudaFree(sincos_device);
    return status;
  }
  result.radius = radius_device;
  result.sincos = sincos_device;
  (*tables)[device.ordinal] = result;
  return result;
}

// --- Kernels --------------------------------------------------------------------------------

// Copies `words` uint64 of buffer `index` to the host, in the stream's order (it is synchronised).
absl::Status ReadWords(const CudaKernelContext& context, size_t index, uint64_t* out,
                       uint64_t words) {
  VGPU_ASSIGN_OR_RETURN(uint64_t * buffer, context.Buffer<uint64_t>(index, words));
  const cudaStream_t stream = context.device->stream;
  VGPU_RETURN_IF_ERROR(elements::CudaError(
      cudaMemcpyAsync(out, buffer, words * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream),
      "random key/counter read"));
  return elements::CudaError(cudaStreamSynchronize(stream), "random key/counter read");
}

// The key and counter of a launch, read back from device memory where it names them (24 bytes;
// the kernels take them by value).
absl::StatusOr<random::PhiloxParams> KeyCounterOf(const CudaKernelContext& context,
                                                  const random::PhiloxParams& params) {
  return random_launch::ResolveKeyCounter(
      params, [&](size_t index, uint64_t* out, uint64_t words) {
        return ReadWords(context, index, out, words);
      });
}

template <typename T, typename Distribution>
absl::Status EnqueueFill(const CudaKernelContext& context, const char* name,
                         const random::PhiloxParams& params, const Distribution& distribution,
                         T* out) {
  const int64_t count = static_cast<int64_t>(params.count);
  const int64_t blocks = (count + Distribution::kPerBlock - 1) / Distribution::kPerBlock;
  return elements::Launch(name, *context.device, blocks, FillFromBlocksKernel<T, Distribution>,
                          MakePhilox(params), distribution, count, blocks, out);
}

enum class FloatingKind { kUniform, kNormal, kTruncatedNormal };

// random::kUniform, kNormal and kTruncatedNormal.
template <FloatingKind kKind>
absl::Status FloatingRandomKernel(const CudaKernelContext& context) {
  constexpr const char* kName = kKind == FloatingKind::kUniform  ? "random_uniform"
                                : kKind == FloatingKind::kNormal ? "random_normal"
                                                                 : "random_truncated_normal";
  return FillPhiloxOutput<elements::Dispatch, RandomOutput::kFloating>(
      context, [&](const random::PhiloxParams& launched, auto* out) -> absl::Status {
        using T = std::remove_pointer_t<decltype(out)>;
        VGPU_ASSIGN_OR_RETURN(const random::PhiloxParams params, KeyCounterOf(context, launched));
        if constexpr (kKind == FloatingKind::kUniform) {
          return EnqueueFill<T>(context, kName, params, UniformDistribution<T>(), out);
        } else {
          NormalTables tables;  // unused by float64
          if constexpr (!std::is_same_v<T, double>) {
            VGPU_ASSIGN_OR_RETURN(tables, TablesFor(*context.device));
          }
          if constexpr (kKind == FloatingKind::kNormal) {
            return EnqueueFill<T>(context, kName, params, NormalDistribution<T>{tables}, out);
          } else {
            constexpr int kPerGroup = std::is_same_v<T, double> ? 2 : 4;
            const int64_t count = static_cast<int64_t>(params.count);
            const int64_t groups = (count + kPerGroup - 1) / kPerGroup;
            return elements::Launch(kName, *context.device, groups, TruncatedNormalKernel<T>,
                                    MakePhilox(params), tables, count, groups, out);
          }
        }
      });
}

// random::kUniformInt.
absl::Status UniformInt(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const UniformIntLaunch launch, ReadUniformIntLaunch(context));
  return FillRandomOutput<elements::Dispatch, RandomOutput::kInt32Or64>(
      context, launch.philox, [&](auto* out) -> absl::Status {
        using T = std::remove_pointer_t<decltype(out)>;
        const UniformIntDistribution<T> distribution{
            static_cast<T>(launch.minval), static_cast<std::make_unsigned_t<T>>(launch.range)};
        VGPU_ASSIGN_OR_RETURN(const random::PhiloxParams params,
                              KeyCounterOf(context, launch.philox));
        return EnqueueFill<T>(context, "random_uniform_int", params, distribution, out);
      });
}

// random::kUniformFullInt.
absl::Status UniformFullInt(const CudaKernelContext& context) {
  return FillPhiloxOutput<elements::Dispatch, RandomOutput::kInt32Or64>(
      context, [&](const random::PhiloxParams& launched, auto* out) -> absl::Status {
        using T = std::remove_pointer_t<decltype(out)>;
        VGPU_ASSIGN_OR_RETURN(const random::PhiloxParams params, KeyCounterOf(context, launched));
        return EnqueueFill<T>(context, "random_uniform_full_int", params, FullIntDistribution<T>(),
                              out);
      });
}

// random::kKeyCounterFromSeed: two words on the host (the seed read back, the key and counter
// written), the stream synchronised for each copy.
absl::Status KeyCounterFromSeedKernel(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const DType dtype, random_launch::ReadKeyCounterLaunch(context));
  const cudaStream_t stream = context.device->stream;
  uint64_t seed[2];
  if (dtype == DType::kInt32) {
    VGPU_ASSIGN_OR_RETURN(int32_t * values, context.Buffer<int32_t>(0, 2));
    int32_t host[2];
    VGPU_RETURN_IF_ERROR(elements::CudaError(
        cudaMemcpyAsync(host, values, sizeof(host), cudaMemcpyDeviceToHost, stream), "seed read"));
    VGPU_RETURN_IF_ERROR(elements::CudaError(cudaStreamSynchronize(stream), "seed read"));
    // As TensorFlow converts its seed tensor's values: int32 -> int64 -> uint64.
    for (int i = 0; i < 2; ++i) seed[i] = static_cast<uint64_t>(static_cast<int64_t>(host[i]));
  } else {
    VGPU_RETURN_IF_ERROR(ReadWords(context, 0, seed, 2));
  }
  uint64_t key = 0;
  uint64_t counter[2] = {0, 0};
  KeyCounterFromSeed(seed[0], seed[1], &key, counter);
  VGPU_ASSIGN_OR_RETURN(uint64_t * key_out, context.Buffer<uint64_t>(1, 1));
  VGPU_ASSIGN_OR_RETURN(uint64_t * counter_out, context.Buffer<uint64_t>(2, 2));
  VGPU_RETURN_IF_ERROR(elements::CudaError(
      cudaMemcpyAsync(key_out, &key, sizeof(key), cudaMemcpyHostToDevice, stream), "key write"));
  VGPU_RETURN_IF_ERROR(elements::CudaError(
      cudaMemcpyAsync(counter_out, counter, sizeof(counter), cudaMemcpyHostToDevice, stream),
      "counter write"));
  // The host words die at return.
  return elements::CudaError(cudaStreamSynchronize(stream), "key/counter write");
}

}  // namespace

void AddCudaRandomKernels(CudaKernelTable& table) {
  table.AddFamily(kernel_families::kRandom, FloatingRandomKernel<FloatingKind::kUniform>,
                  FloatingRandomKernel<FloatingKind::kNormal>,
                  FloatingRandomKernel<FloatingKind::kTruncatedNormal>, UniformInt, UniformFullInt,
                  KeyCounterFromSeedKernel);
}

}  // namespace vgpu::cuda
