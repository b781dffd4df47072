// CPU kernels of the random family (protocol/kernels/random.h): uniform random numbers from
// Philox4x32-10, equal bit for bit to TensorFlow's StatelessRandomUniformV2. Output element i
// comes from Philox block i / g (g = 4 for 32- and 16-bit types: one number per 32-bit word;
// g = 2 for float64: one number per pair of words), so blocks are independent and the output is
// filled in parallel, each thread skipping its generator to its first block.
#define EIGEN_USE_THREADS
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/philox.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/random.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

// The numbers of one Philox block for element type T, written to out[0, count).
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

template <typename T>
void FillUniform(const Eigen::ThreadPoolDevice& device, const random::PhiloxParams& params,
                 T* out) {
  using Convert = UniformFromBlock<T>;
  const int64_t count = static_cast<int64_t>(params.count);
  const int64_t blocks = (count + Convert::kPerBlock - 1) / Convert::kPerBlock;
  const Philox4x32 base(params.key, params.counter);
  auto fill = [&](Eigen::Index first, Eigen::Index last) {
    Philox4x32 generator = base;
    generator.Skip(static_cast<uint64_t>(first));
    for (Eigen::Index block = first; block < last; ++block) {
      const int64_t offset = block * Convert::kPerBlock;
      const int n = static_cast<int>(std::min<int64_t>(Convert::kPerBlock, count - offset));
      Convert::Write(generator.Next(), out + offset, n);
    }
  };
  // About 10 rounds of two multiplies per block, plus the conversions.
  device.parallelFor(blocks,
                     Eigen::TensorOpCost(0, Convert::kPerBlock * sizeof(T), 60), fill);
}

// random::kUniform.
absl::Status Uniform(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(1));
  VGPU_ASSIGN_OR_RETURN(random::PhiloxParams params,
                        context.Params().Get<random::PhiloxParams>());
  if (params.count > (uint64_t{1} << 56)) {
    return absl::InvalidArgumentError(absl::StrCat("too many random numbers: ", params.count));
  }
  return DispatchFloating(params.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(T * out, context.Buffer<T>(0, params.count));
    if (params.count == 0) return absl::OkStatus();
    FillUniform<T>(*context.device, params, out);
    return absl::OkStatus();
  });
}

}  // namespace
}  // namespace vgpu::cpu_kernels

namespace vgpu {

void AddRandomKernels(KernelTable& table) {
  table.Add(random::kUniform, "random_uniform", cpu_kernels::Uniform);
}

}  // namespace vgpu
