// Hostile launches against every kernel of the CPU backing executor: the shared checked
// arithmetic, the kernel dispatch's exception safety net, hand-written overflowing launches for
// the families a tenant crashed the server with (finding 3 of issue 10), and a bounded,
// deterministic mutation loop over every kernel's seed launch (tests/fuzz/corpus, the seeds of
// the libFuzzer target scripts/fuzz.sh runs). A kernel may refuse a launch; it must never crash,
// write past a buffer or let an exception escape.
#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/protocol/kernels/activation.h"
#include "plugin/protocol/kernels/convolution.h"
#include "plugin/protocol/kernels/data_movement.h"
#include "plugin/protocol/kernels/elementwise.h"
#include "plugin/protocol/kernels/pooling.h"
#include "plugin/protocol/kernels/training.h"
#include "tests/conformance/executor_kernel_harness.h"
#include "tests/fuzz/kernel_launch_fuzz.h"

namespace vgpu {
namespace {

using executor_test::ExecutorLaunch;
using executor_test::Filled;
using executor_test::GuardedBuffer;

// A launch through the CPU executor (the registry's "cpu"), as a session runs it.
ExecutorLaunch CpuLaunch() { return ExecutorLaunch(executor_test::TestExecutor::Named("cpu")); }

constexpr int64_t kHuge = int64_t{1} << 62;

TEST(CheckedArithmetic, ProductRefusesOverflowNegativesAndSizesPastTheLimit) {
  EXPECT_EQ(CheckedProduct({2, 3, 4}, "t").value(), 24);
  EXPECT_EQ(CheckedProduct({0, kHuge - 1}, "t").status().code(),
            absl::StatusCode::kInvalidArgument);  // a zero does not hide a huge extent
  EXPECT_EQ(CheckedProduct({int64_t{1} << 32, int64_t{1} << 32}, "t").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckedProduct({-1, -1}, "t").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckedProduct({1 << 20, 1 << 20}, "t", int64_t{1} << 30).status().code(),
            absl::StatusCode::kInvalidArgument);
  const int64_t dims[] = {4, 5};
  EXPECT_EQ(CheckedElementCount("t", dims, 2).value(), 20);
  EXPECT_FALSE(CheckedElementCount("t", dims, -1).ok());
  EXPECT_FALSE(CheckedElementCount("t", dims, kMaxRank + 1).ok());
  EXPECT_EQ(CheckedSum(3, 4, "t").value(), 7);
  EXPECT_FALSE(CheckedSum(kMaxLaunchElements, 1, "t").ok());
  EXPECT_FALSE(CheckedSum(-1, 1, "t").ok());
}

TEST(CanonicalBools, EveryNonzeroByteBecomesOneInBlocksAndInTheTail) {
  // 64-byte blocks are tested a word at a time: stray bytes at a block's first and last byte,
  // in the middle of a word, in a block of its own and in the tail after the last block.
  std::vector<uint8_t> bytes(200);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>((i * 7) % 3 == 0);
  for (size_t stray : {0, 63, 64, 77, 130, 199}) bytes[stray] = static_cast<uint8_t>(2 + stray);
  std::vector<uint8_t> expected = bytes;
  for (uint8_t& b : expected) b = b != 0 ? 1 : 0;
  CanonicalizeBools(bytes.data(), bytes.size());
  EXPECT_EQ(bytes, expected);
  std::vector<uint8_t> short_run = {0, 1, 255, 1, 128};
  CanonicalizeBools(short_run.data(), short_run.size());
  EXPECT_EQ(short_run, (std::vector<uint8_t>{0, 1, 1, 1, 1}));
  CanonicalizeBools(nullptr, 0);
}

TEST(CheckedArithmetic, BufferRefusesAnElementCountWhoseByteCountWraps) {
  std::vector<uint8_t> bytes(16);
  uint8_t* pointers[] = {bytes.data()};
  uint64_t sizes[] = {16};
  KernelContext context(LaunchView{pointers, sizes, {}}, &fuzz::FuzzDevice());
  EXPECT_TRUE(context.Buffer<float>(0, 4).ok());
  // 2^62 floats are 2^64 bytes, which wraps to 0 in 64 bits.
  EXPECT_EQ(context.Buffer<float>(0, uint64_t{1} << 62).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(context.Buffer<double>(0, 3).ok());
}

TEST(CheckedArithmetic, TypedBuffersAtMisalignedAddressesAreRefused) {
  alignas(16) uint8_t bytes[64] = {};
  uint8_t* pointers[] = {bytes + 1, bytes + 2};
  uint64_t sizes[] = {32, 32};
  KernelContext context(LaunchView{pointers, sizes, {}}, &fuzz::FuzzDevice());
  EXPECT_TRUE(context.Buffer<uint8_t>(0, 32).ok());
  absl::Status misaligned = context.Buffer<float>(0, 4).status();
  EXPECT_EQ(misaligned.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(misaligned.message().find("aligned"), std::string::npos) << misaligned;
  EXPECT_TRUE(context.Buffer<uint16_t>(1, 4).ok());
  EXPECT_FALSE(context.Buffer<float>(1, 4).ok());
}

// Found by the libFuzzer run: a float16 optimizer update whose variable sat at an odd address
// was read through a misaligned Eigen::half pointer (undefined behaviour).
TEST(CheckedArithmetic, OptimizerUpdatesRefuseAMisalignedVariable) {
  alignas(16) uint8_t var[64] = {}, alpha[16] = {}, delta[64] = {};
  training::UpdateParams params;
  params.dtype = DType::kFloat16;
  params.count = 8;
  std::vector<uint8_t> block(sizeof(params));
  std::memcpy(block.data(), &params, sizeof(params));
  const KernelInfo* kernel = Kernels().Find(static_cast<uint32_t>(training::kApplyGradientDescent));
  ASSERT_NE(kernel, nullptr);
  for (int offset : {0, 1}) {
    uint8_t* pointers[] = {var + offset, alpha, delta};
    uint64_t sizes[] = {32, 2, 32};
    KernelContext context(LaunchView{pointers, sizes, block}, &fuzz::FuzzDevice());
    absl::Status status = RunKernel(*kernel, context);
    if (offset == 0) {
      EXPECT_TRUE(status.ok()) << status;
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    }
  }
}

// Found by the libFuzzer run: a set-tensor value of NaN (or out of range) converted to an
// integer dtype was undefined behaviour; it saturates, NaN becomes 0.
TEST(CheckedArithmetic, SetTensorSaturatesValuesOutsideAnIntegerDtype) {
  const std::pair<double, uint8_t> cases[] = {
      {std::numeric_limits<double>::quiet_NaN(), 0}, {1e300, 255}, {-7.0, 0}, {42.0, 42}};
  for (const auto& [value, expected] : cases) {
    GuardedBuffer out(4);
    ASSERT_TRUE(CpuLaunch().Tensor({4}, DType::kUInt8).Buffer(&out).Param(value)
                    .Run(elementwise::kSetTensor).ok());
    EXPECT_EQ(out.As<uint8_t>(), std::vector<uint8_t>(4, expected)) << value;
  }
}

// Found by the libFuzzer run: a transposition of 4-byte elements placed at odd addresses was
// copied through misaligned uint32 pointers; it is copied bytewise, with the same result.
TEST(CheckedArithmetic, TransposeOfMisalignedElementsMovesTheRightBytes) {
  alignas(16) uint8_t x_storage[32] = {}, y_storage[32] = {};
  uint8_t* x = x_storage + 1;
  uint8_t* y = y_storage + 3;
  const uint32_t values[6] = {1, 2, 3, 4, 5, 6};  // 2 x 3
  std::memcpy(x, values, sizeof(values));
  ParamBlock block;
  ParamWriter(&block).Put(uint32_t{4});
  ParamWriter(&block).PutArray<int64_t>(std::vector<int64_t>{2, 3});
  ParamWriter(&block).PutArray<int32_t>(std::vector<int32_t>{1, 0});
  const KernelInfo* kernel = Kernels().Find(static_cast<uint32_t>(data_movement::kTranspose));
  ASSERT_NE(kernel, nullptr);
  uint8_t* pointers[] = {x, y};
  uint64_t sizes[] = {24, 24};
  KernelContext context(LaunchView{pointers, sizes, block}, &fuzz::FuzzDevice());
  ASSERT_TRUE(RunKernel(*kernel, context).ok());
  uint32_t transposed[6];
  std::memcpy(transposed, y, sizeof(transposed));
  EXPECT_EQ(std::vector<uint32_t>(transposed, transposed + 6),
            (std::vector<uint32_t>{1, 4, 2, 5, 3, 6}));
}

// Found by the libFuzzer run: each of Pad's x_dims, pad_before and pad_after was within the
// limits, but the padded output's dims multiplied past 64 bits. The copy's bounds check refused
// the launch afterwards, but only after an undefined signed overflow (UBSan); now the product is
// checked first. The result is the same InvalidArgument; under UBSan the old path fails.
TEST(CheckedArithmetic, PadRefusesAnOutputWhoseElementCountOverflows) {
  GuardedBuffer x(16), y(64);
  const int64_t big = int64_t{1} << 40;
  EXPECT_EQ(CpuLaunch().Buffers({&x, &y}).Param(uint32_t{4})
                .ParamArray<int64_t>({0, 1, 1}).ParamArray<int64_t>({big, big, 0})
                .ParamArray<int64_t>({0, 0, big}).Param(uint64_t{0})
                .Run(data_movement::kPad).code(),
            absl::StatusCode::kInvalidArgument);
}

// Found by the libFuzzer run: Pad's fill of 4-byte elements at an odd address stored words
// through a misaligned pointer; it fills bytewise, with the same result.
TEST(CheckedArithmetic, PadOfMisalignedElementsFillsAndCopiesTheRightBytes) {
  alignas(16) uint8_t x_storage[16] = {}, y_storage[32] = {};
  uint8_t* x = x_storage + 2;
  uint8_t* y = y_storage + 1;
  const uint32_t values[2] = {7, 8};
  std::memcpy(x, values, sizeof(values));
  ParamBlock block;
  ParamWriter(&block).Put(uint32_t{4});
  ParamWriter(&block).PutArray<int64_t>(std::vector<int64_t>{2});
  ParamWriter(&block).PutArray<int64_t>(std::vector<int64_t>{1});
  ParamWriter(&block).PutArray<int64_t>(std::vector<int64_t>{2});
  ParamWriter(&block).Put(uint64_t{0xAABBCCDD});
  const KernelInfo* kernel = Kernels().Find(static_cast<uint32_t>(data_movement::kPad));
  ASSERT_NE(kernel, nullptr);
  uint8_t* pointers[] = {x, y};
  uint64_t sizes[] = {8, 20};
  KernelContext context(LaunchView{pointers, sizes, block}, &fuzz::FuzzDevice());
  absl::Status status = RunKernel(*kernel, context);
  ASSERT_TRUE(status.ok()) << status;
  uint32_t padded[5];
  std::memcpy(padded, y, sizeof(padded));
  EXPECT_EQ(std::vector<uint32_t>(padded, padded + 5),
            (std::vector<uint32_t>{0xAABBCCDD, 7, 8, 0xAABBCCDD, 0xAABBCCDD}));
}

absl::Status ThrowsBadAlloc(const KernelContext&) { throw std::bad_alloc(); }
absl::Status ThrowsLogicError(const KernelContext&) { throw std::logic_error("boom"); }

TEST(KernelDispatch, TurnsAnEscapingExceptionIntoTheLaunchsError) {
  KernelContext context(LaunchView{{}, {}, {}}, &fuzz::FuzzDevice());
  absl::Status oom = RunKernel(KernelInfo{"thrower", ThrowsBadAlloc}, context);
  EXPECT_EQ(oom.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(oom.message().find("thrower"), std::string::npos);
  absl::Status other = RunKernel(KernelInfo{"thrower", ThrowsLogicError}, context);
  EXPECT_EQ(other.code(), absl::StatusCode::kInternal);
  EXPECT_NE(other.message().find("boom"), std::string::npos);
}

// --- hand-written hostile launches, one per family the attack crashed -----------------------

ActivationDescriptorSettings Relu() {
  ActivationDescriptorSettings activation;
  activation.mode = ActivationMode::kRelu;
  activation.dtype = DType::kFloat32;
  return activation;
}

TEST(HostileLaunch, ReluWithDimensionsWhoseProductWrapsIsRefused) {
  auto x = Filled<float>(16), y = Filled<float>(16);
  // 2^32 * 2^32 wraps to 0 in 64 bits; 2^31 * 2^31 * 4 bytes wraps too.
  for (const std::vector<int64_t>& dims :
       {std::vector<int64_t>{int64_t{1} << 32, int64_t{1} << 32},
        std::vector<int64_t>{int64_t{1} << 31, int64_t{1} << 31}, std::vector<int64_t>{kHuge},
        std::vector<int64_t>{-4, -4}, std::vector<int64_t>{0, kHuge}}) {
    ExecutorLaunch launch = CpuLaunch();
    absl::Status status =
        launch.Describe(Relu()).Tensor(dims).Buffers({&x, &y}).Run(activation::kForward);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  }
}

TEST(HostileLaunch, ReluWithAnElementCountPastItsBuffersIsRefused) {
  auto x = Filled<float>(16), y = Filled<float>(4);
  ExecutorLaunch launch = CpuLaunch();
  EXPECT_EQ(launch.Describe(Relu()).Tensor({16}).Buffers({&x, &y}).Run(activation::kForward).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HostileLaunch, BroadcastBinaryWithWrappingDimensionsIsRefused) {
  auto a = Filled<float>(16), b = Filled<float>(16), out = Filled<float>(16);
  OpTensorDescriptorSettings op;
  op.op = ElementwiseOp::kAdd;
  op.dtype = DType::kFloat32;
  ExecutorLaunch launch = CpuLaunch();
  absl::Status status = launch.Describe(op)
                            .Tensor({int64_t{1} << 32, 1})
                            .Tensor({1, int64_t{1} << 32})
                            .Tensor({int64_t{1} << 32, int64_t{1} << 32})
                            .Buffers({&a, &b, &out})
                            .Run(elementwise::kBinary);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

// Found by the mutation loop: zero summed strides let 8 bytes of x be summed 2^40 times per
// output element, holding the compute pool for hours.
TEST(HostileLaunch, RearrangeSummingMoreTermsThanXHoldsIsRefused) {
  auto x = Filled<float>(2), y = Filled<float>(1);
  convolution::RearrangeParams params;
  params.summed_rank = 1;
  params.summed_sizes[0] = int64_t{1} << 40;
  params.summed_strides[0] = 0;
  ExecutorLaunch launch = CpuLaunch();
  absl::Status status = launch.Tensor({2}).Tensor({1}).Buffers({&x, &y}).Param(params).Run(
      convolution::kRearrange);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("more than x"), std::string::npos) << status;
}

// --- the bounded mutation loop over every kernel's seed ---------------------------------------

std::vector<std::string> SeedFiles() {
  std::vector<std::string> files;
  if (DIR* dir = opendir(VGPU_FUZZ_CORPUS_DIR)) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') files.push_back(std::string(VGPU_FUZZ_CORPUS_DIR "/") + entry->d_name);
    }
    closedir(dir);
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(file), {});
}

// Values a hostile tenant writes into an extent, count or index field.
constexpr int64_t kInteresting[] = {0, 1, -1, 2, 7, 255, 65536, int64_t{1} << 31,
                                    (int64_t{1} << 32) + 1, int64_t{1} << 56,
                                    int64_t{1} << 62, std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min()};

// One deterministic mutation of `launch`: an interesting value or random bytes written into the
// descriptor section or the parameter block, or a buffer resized.
void Mutate(std::mt19937_64& rng, fuzz::FuzzedLaunch* launch) {
  const int kind = static_cast<int>(rng() % 6);
  std::vector<uint8_t>& bytes = (kind % 2 == 0 || launch->params.empty()) && !launch->descriptors.empty()
                                    ? launch->descriptors
                                    : launch->params;
  if (kind == 5 && !launch->buffer_sizes.empty()) {
    uint32_t& size = launch->buffer_sizes[rng() % launch->buffer_sizes.size()];
    size = static_cast<uint32_t>(rng() % 3 == 0 ? 0 : rng() % (size + 64));
    return;
  }
  if (bytes.empty()) return;
  if (kind < 4) {  // an interesting integer, 8, 4 or 1 bytes wide, at any offset
    const int64_t value = kInteresting[rng() % (sizeof(kInteresting) / sizeof(kInteresting[0]))];
    const size_t width = kind < 2 ? 8 : (kind == 2 ? 4 : 1);
    const size_t offset = rng() % bytes.size();
    for (size_t i = 0; i < width && offset + i < bytes.size(); ++i) {
      bytes[offset + i] = static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * i));
    }
    return;
  }
  bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
}

void ExpectSurvives(const fuzz::FuzzedLaunch& launch, const std::string& what) {
  const fuzz::FuzzOutcome outcome = fuzz::RunFuzzedLaunch(launch, fuzz::FuzzDevice());
  EXPECT_TRUE(outcome.canaries_intact) << outcome.kernel_name << " wrote outside a buffer (" << what << ")";
  EXPECT_NE(outcome.status.code(), absl::StatusCode::kInternal)
      << outcome.kernel_name << " (" << what << "): " << outcome.status;
}

TEST(HostileLaunchFuzz, EveryKernelHasASeedThatRunsCleanly) {
  std::map<uint32_t, int> seeds_per_kernel;
  for (const std::string& path : SeedFiles()) {
    const fuzz::FuzzedLaunch launch = fuzz::DecodeFuzzedLaunch(ReadFile(path));
    ++seeds_per_kernel[launch.kernel_id];
    const fuzz::FuzzOutcome outcome = fuzz::RunFuzzedLaunch(launch, fuzz::FuzzDevice());
    EXPECT_TRUE(outcome.canaries_intact) << path;
  }
  for (uint32_t id : Kernels().Ids()) {
    EXPECT_GT(seeds_per_kernel[id], 0) << "no fuzz seed for kernel " << Kernels().Find(id)->name
                                       << " (regenerate tests/fuzz/corpus: scripts/fuzz.sh --seeds)";
  }
}

TEST(HostileLaunchFuzz, MutatedSeedsOfEveryKernelNeverCrashOrOverrun) {
  // CI runs a fixed, short loop; VGPU_FUZZ_MUTATIONS / VGPU_FUZZ_SEED lengthen or vary it locally.
  const char* mutations = std::getenv("VGPU_FUZZ_MUTATIONS");
  const char* seed_value = std::getenv("VGPU_FUZZ_SEED");
  const int kMutationsPerSeed = mutations != nullptr ? std::atoi(mutations) : 2000;
  std::mt19937_64 rng(seed_value != nullptr ? std::strtoull(seed_value, nullptr, 10) : 20240610);
  for (const std::string& path : SeedFiles()) {
    const fuzz::FuzzedLaunch seed = fuzz::DecodeFuzzedLaunch(ReadFile(path));
    for (int i = 0; i < kMutationsPerSeed; ++i) {
      fuzz::FuzzedLaunch launch = seed;
      const int rounds = 1 + static_cast<int>(rng() % 3);
      for (int r = 0; r < rounds; ++r) Mutate(rng, &launch);
      const auto start = std::chrono::steady_clock::now();
      ExpectSurvives(launch, path + " mutation " + std::to_string(i));
      // Locally (VGPU_FUZZ_SLOW_FILE), a launch that ran over a second is written out: a kernel
      // whose work a few KiB of buffers do not bound. Not an assertion: CI machines are slow.
      if (const char* slow_file = std::getenv("VGPU_FUZZ_SLOW_FILE");
          slow_file != nullptr && std::chrono::steady_clock::now() - start > std::chrono::seconds(1)) {
        std::fprintf(stderr, "slow launch: %s mutation %d\n", path.c_str(), i);
        const std::vector<uint8_t> bytes = fuzz::EncodeFuzzedLaunch(launch);
        std::ofstream(slow_file, std::ios::binary)
            .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      }
      if (::testing::Test::HasFailure()) return;  // one clear failure, not thousands
    }
  }
}

}  // namespace
}  // namespace vgpu
