// Tests of the CPU executor's oneDNN kernels and their primitive cache
// (backend/cpu/kernels/onednn_primitives.h): a repeated launch reuses its primitive and counts
// it, distinct settings build new ones, results match direct sums (forward, both gradients,
// batched and transposed products), the LRU bound holds, and launches with bad shapes are
// InvalidArgument before oneDNN sees them (nothing built, nothing crashed). Skipped where the
// build has no oneDNN (VGPU_ONEDNN=OFF).
#include <array>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <memory>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/backend/cpu/kernels/onednn_primitives.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/convolution.h"
#include "tests/conformance/executor_kernel_harness.h"

namespace vgpu {
namespace {

#if defined(__linux__) && (defined(__x86_64__) || defined(__i386__))
// CpuHasBfloat16Math reads CPUID itself; the kernel's view of the same CPU is /proc/cpuinfo's
// flags (avx512_bf16, amx_bf16).
TEST(CpuHasBfloat16Math, AgreesWithTheKernelsCpuFlags) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  if (!cpuinfo) GTEST_SKIP() << "no /proc/cpuinfo";
  std::string line;
  bool has_flags = false, bf16 = false;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    has_flags = true;
    std::istringstream words(line);
    std::string word;
    while (words >> word) bf16 = bf16 || word == "avx512_bf16" || word == "amx_bf16";
    break;  // the first processor's flags
  }
  if (!has_flags) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  EXPECT_EQ(CpuHasBfloat16Math(), bf16);
}
#endif

using executor_test::ExecutorLaunch;
using executor_test::FilterSettings;
using executor_test::TensorSettings;

// A launch through the CPU executor (the registry's "cpu"), as a session runs it.
ExecutorLaunch CpuLaunch() { return ExecutorLaunch(executor_test::TestExecutor::Named("cpu")); }

std::vector<float> Pattern(size_t n, float scale) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = scale * static_cast<float>((i * 7) % 13) - 1.0f;
  return values;
}

// A 2-D NHWC geometry: [n, h, w, c] input, [kh, kw, c, o] filter, stride s, padding p on every
// side.
struct Geometry {
  int n, h, w, c, kh, kw, o, stride, pad;
  int oh() const { return (h + 2 * pad - kh) / stride + 1; }
  int ow() const { return (w + 2 * pad - kw) / stride + 1; }
  size_t x_size() const { return static_cast<size_t>(n) * h * w * c; }
  size_t w_size() const { return static_cast<size_t>(kh) * kw * c * o; }
  size_t y_size() const { return static_cast<size_t>(n) * oh() * ow() * o; }
  ConvolutionDescriptorSettings Settings() const {
    ConvolutionDescriptorSettings s;
    s.stride_h = s.stride_w = stride;
    s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = pad;
    return s;
  }
  // Calls f(x index, filter index, y index) for every product term of the convolution.
  template <typename F>
  void ForEachTerm(F&& f) const {
    for (int b = 0; b < n; ++b)
      for (int r = 0; r < oh(); ++r)
        for (int q = 0; q < ow(); ++q)
          for (int i = 0; i < kh; ++i)
            for (int j = 0; j < kw; ++j) {
              const int xr = r * stride + i - pad, xq = q * stride + j - pad;
              if (xr < 0 || xr >= h || xq < 0 || xq >= w) continue;
              for (int ci = 0; ci < c; ++ci)
                for (int co = 0; co < o; ++co) {
                  f(((static_cast<size_t>(b) * h + xr) * w + xq) * c + ci,
                    ((static_cast<size_t>(i) * kw + j) * c + ci) * o + co,
                    ((static_cast<size_t>(b) * oh() + r) * ow() + q) * o + co);
                }
            }
  }
};

// Runs convolution kernel `id` of `g` through the CPU executor with buffers (first, second, out);
// `y_dims`, when given, describes y in place of g's output shape.
absl::Status RunConvolution(KernelId id, const Geometry& g, std::vector<float>* first,
                            std::vector<float>* second, std::vector<float>* out,
                            std::optional<std::vector<int64_t>> y_dims = std::nullopt) {
  return CpuLaunch()
      .Tensor({g.n, g.h, g.w, g.c})
      .Describe(FilterSettings({g.kh, g.kw, g.c, g.o}))
      .Describe(g.Settings())
      .Tensor(y_dims.value_or(std::vector<int64_t>{g.n, g.oh(), g.ow(), g.o}))
      .Buffer(first)
      .Buffer(second)
      .Buffer(out)
      .Run(id);
}

class OnednnPrimitives : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ExecutorUsesOnednn()) GTEST_SKIP() << "built without oneDNN (VGPU_ONEDNN=OFF)";
#if VGPU_HAVE_ONEDNN
    onednn::Cache().Clear();
#endif
    ResetExecutorPrimitiveCounters();
  }
};

TEST_F(OnednnPrimitives, RepeatedConvolutionReusesItsPrimitiveAndMatchesADirectSum) {
  const Geometry g{2, 7, 6, 5, 3, 3, 4, 2, 1};
  std::vector<float> x = Pattern(g.x_size(), 0.25f), w = Pattern(g.w_size(), 0.125f);
  std::vector<float> expected(g.y_size(), 0.0f);
  g.ForEachTerm([&](size_t xi, size_t wi, size_t yi) { expected[yi] += x[xi] * w[wi]; });
  for (int run = 0; run < 3; ++run) {
    std::vector<float> y(g.y_size(), 99.0f);
    ASSERT_TRUE(RunConvolution(convolution::kForward, g, &x, &w, &y).ok());
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], expected[i], 1e-4) << i;
  }
  EXPECT_EQ(ExecutorPrimitiveCounters().created, 1u);
  EXPECT_EQ(ExecutorPrimitiveCounters().reused, 2u);
}

TEST_F(OnednnPrimitives, ConvolutionGradientsMatchDirectSums) {
  const Geometry g{2, 6, 5, 3, 3, 2, 4, 1, 1};
  std::vector<float> x = Pattern(g.x_size(), 0.25f), w = Pattern(g.w_size(), 0.125f);
  std::vector<float> dy = Pattern(g.y_size(), 0.5f);
  std::vector<float> dx_expected(g.x_size(), 0.0f), dw_expected(g.w_size(), 0.0f);
  g.ForEachTerm([&](size_t xi, size_t wi, size_t yi) {
    dx_expected[xi] += dy[yi] * w[wi];
    dw_expected[wi] += dy[yi] * x[xi];
  });
  std::vector<float> dx(g.x_size(), 99.0f), dw(g.w_size(), 99.0f);
  ASSERT_TRUE(RunConvolution(convolution::kBackwardInput, g, &w, &dy, &dx).ok());
  ASSERT_TRUE(RunConvolution(convolution::kBackwardFilter, g, &x, &dy, &dw).ok());
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx[i], dx_expected[i], 1e-4) << i;
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(dw[i], dw_expected[i], 1e-3) << i;
  EXPECT_EQ(ExecutorPrimitiveCounters().created, 2u);  // one per pass
}

TEST_F(OnednnPrimitives, DistinctSettingsCreateNewPrimitives) {
  const Geometry a{1, 8, 8, 4, 3, 3, 4, 1, 1};
  Geometry b = a;
  b.stride = 2;
  Geometry c = a;
  c.n = 3;
  for (const Geometry& g : {a, b, c, a, b}) {
    std::vector<float> x = Pattern(g.x_size(), 0.25f), w = Pattern(g.w_size(), 0.5f);
    std::vector<float> y(g.y_size());
    ASSERT_TRUE(RunConvolution(convolution::kForward, g, &x, &w, &y).ok());
  }
  EXPECT_EQ(ExecutorPrimitiveCounters().created, 3u);
  EXPECT_EQ(ExecutorPrimitiveCounters().reused, 2u);
}

TEST_F(OnednnPrimitives, BadShapesAreRefusedBeforeAPrimitiveIsBuilt) {
  const Geometry g{1, 8, 8, 4, 3, 3, 4, 1, 1};
  std::vector<float> x = Pattern(g.x_size(), 0.25f), w = Pattern(g.w_size(), 0.5f);
  std::vector<float> y(g.y_size());
  // An output size the window does not give.
  EXPECT_EQ(RunConvolution(convolution::kForward, g, &x, &w, &y,
                           std::vector<int64_t>{1, 9, 8, 4})
                .code(),
            absl::StatusCode::kInvalidArgument);
  // An input larger than its buffer.
  std::vector<float> short_x(g.x_size() - 1);
  EXPECT_EQ(RunConvolution(convolution::kForward, g, &short_x, &w, &y).code(),
            absl::StatusCode::kInvalidArgument);
  // A gradient output smaller than the input it describes.
  std::vector<float> short_dx(g.x_size() / 2), dy(g.y_size());
  EXPECT_EQ(RunConvolution(convolution::kBackwardInput, g, &w, &dy, &short_dx).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExecutorPrimitiveCounters().created, 0u);
}

MatmulDescriptorSettings Matmul(bool transpose_a, bool transpose_b) {
  MatmulDescriptorSettings s;
  s.transpose_a = transpose_a;
  s.transpose_b = transpose_b;
  return s;
}

// Runs kMatmul through the CPU executor: c (c_dims) = a (a_dims) times b (b_dims), each
// transposed as `matmul` says.
absl::Status RunMatmul(const MatmulDescriptorSettings& matmul, const std::vector<int64_t>& a_dims,
                       const std::vector<int64_t>& b_dims, const std::vector<int64_t>& c_dims,
                       std::vector<float>* a, std::vector<float>* b, std::vector<float>* c) {
  return CpuLaunch()
      .Describe(matmul)
      .Tensor(a_dims)
      .Tensor(b_dims)
      .Tensor(c_dims)
      .Buffer(a)
      .Buffer(b)
      .Buffer(c)
      .Run(convolution::kMatmul);
}

TEST_F(OnednnPrimitives, BatchedTransposedBroadcastMatmulMatchesADirectSum) {
  // a: [2, 1, k=3, m=4] transposed; b: [3, n=5, k=3] transposed; c: [2, 3, 4, 5].
  const int m = 4, n = 5, k = 3;
  std::vector<float> a = Pattern(2 * k * m, 0.25f), b = Pattern(3 * n * k, 0.5f);
  std::vector<float> expected(2 * 3 * m * n, 0.0f);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int r = 0; r < m; ++r)
        for (int q = 0; q < n; ++q)
          for (int t = 0; t < k; ++t)
            expected[((i * 3 + j) * m + r) * n + q] +=
                a[(i * k + t) * m + r] * b[(j * n + q) * k + t];
  for (int run = 0; run < 2; ++run) {
    std::vector<float> c(expected.size(), 99.0f);
    ASSERT_TRUE(
        RunMatmul(Matmul(true, true), {2, 1, k, m}, {3, n, k}, {2, 3, m, n}, &a, &b, &c).ok());
    for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], expected[i], 1e-4) << i;
  }
  EXPECT_EQ(ExecutorPrimitiveCounters().created, 1u);
  EXPECT_EQ(ExecutorPrimitiveCounters().reused, 1u);
}

TEST_F(OnednnPrimitives, FusedMatmulAddsTheBiasAndActivates) {
  const int m = 3, n = 4, k = 5;
  std::vector<float> a = Pattern(m * k, 0.25f), b = Pattern(k * n, 0.5f), bias = Pattern(n, 1.0f);
  std::vector<float> c(m * n, 99.0f);
  ActivationDescriptorSettings relu;
  relu.mode = ActivationMode::kRelu;
  ASSERT_TRUE(CpuLaunch()
                  .Describe(Matmul(false, false))
                  .Tensor({m, k})
                  .Tensor({k, n})
                  .Tensor({m, n})
                  .Tensor({n})
                  .Describe(relu)
                  .Buffer(&a)
                  .Buffer(&b)
                  .Buffer(&bias)
                  .Buffer(&c)
                  .Run(convolution::kMatmulBiasActivation)
                  .ok());
  for (int r = 0; r < m; ++r)
    for (int q = 0; q < n; ++q) {
      float sum = bias[q];
      for (int t = 0; t < k; ++t) sum += a[r * k + t] * b[t * n + q];
      EXPECT_NEAR(c[r * n + q], sum > 0 ? sum : 0, 1e-4);
    }
  EXPECT_EQ(ExecutorPrimitiveCounters().created, 1u);
}

TEST(OnednnThreads, ASmallPrimitiveRunsOnOneThread) {
  // The 64x128x10 products of cnn and mlp: one thread. mlp's 64x784x256 one: one thread of two,
  // all of four; cnn's second convolution (143 M multiply-adds): both threads.
  EXPECT_EQ(OnednnThreadsFor(2, 64.0 * 128 * 10), 1);
  EXPECT_EQ(OnednnThreadsFor(2, 64.0 * 784 * 256), 1);
  EXPECT_EQ(OnednnThreadsFor(4, 64.0 * 784 * 256), 4);
  EXPECT_EQ(OnednnThreadsFor(2, 143e6), 2);
  EXPECT_EQ(OnednnThreadsFor(16, kParallelOnednnMultiplyAdds), 16);
  EXPECT_EQ(OnednnThreadsFor(16, kParallelOnednnMultiplyAdds - 1), 1);
  EXPECT_EQ(OnednnThreadsFor(2, kParallelOnednnMultiplyAddsOnTwoThreads), 2);
  EXPECT_EQ(OnednnThreadsFor(0, 1e12), 1);
}

TEST_F(OnednnPrimitives, SmallAndLargeMatmulsBothMatchADirectSum) {
  // 8x16x8 runs on one thread, 320x256x256 (21 M multiply-adds) on the executor's threads.
  for (const auto& [m, k, n] : {std::array<int, 3>{8, 16, 8}, std::array<int, 3>{320, 256, 256}}) {
    std::vector<float> a = Pattern(m * k, 0.25f), b = Pattern(k * n, 0.5f), c(m * n, 99.0f);
    ASSERT_TRUE(RunMatmul(Matmul(false, false), {m, k}, {k, n}, {m, n}, &a, &b, &c).ok());
    for (int r = 0; r < m; ++r)
      for (int q = 0; q < n; ++q) {
        double sum = 0;
        for (int t = 0; t < k; ++t) sum += double{a[r * k + t]} * b[t * n + q];
        ASSERT_NEAR(c[r * n + q], sum, 1e-3 * (1 + std::abs(sum))) << m << " " << r << " " << q;
      }
  }
  EXPECT_EQ(ExecutorPrimitiveCounters().created, 2u);
}

TEST_F(OnednnPrimitives, MatmulWithAShortBufferIsInvalidArgument) {
  std::vector<float> a(3 * 5 - 1), b(5 * 4), c(3 * 4);
  EXPECT_EQ(RunMatmul(Matmul(false, false), {3, 5}, {5, 4}, {3, 4}, &a, &b, &c).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExecutorPrimitiveCounters().created, 0u);
}

#if VGPU_HAVE_ONEDNN
TEST_F(OnednnPrimitives, CacheKeepsTheMostRecentlyUsedEntriesWithinItsBound) {
  onednn::PrimitiveCache cache(2);
  int built = 0;
  auto get = [&](int id) {
    onednn::PrimitiveKey key(99);
    key.Add(id);
    return cache.FindOrCreate<int>(key, [&] {
      ++built;
      return std::make_shared<int>(id);
    });
  };
  EXPECT_EQ(*get(1), 1);
  EXPECT_EQ(*get(2), 2);
  EXPECT_EQ(*get(1), 1);  // reused: 1 is now the most recent
  EXPECT_EQ(*get(3), 3);  // evicts 2
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(built, 3);
  EXPECT_EQ(*get(1), 1);
  EXPECT_EQ(built, 3);
  EXPECT_EQ(*get(2), 2);  // rebuilt
  EXPECT_EQ(built, 4);
  // "Not served" (null) is remembered and not counted.
  const uint64_t created = ExecutorPrimitiveCounters().created;
  onednn::PrimitiveKey unserved(98);
  EXPECT_EQ(cache.FindOrCreate<int>(unserved, [] { return std::shared_ptr<int>(); }), nullptr);
  EXPECT_EQ(cache.FindOrCreate<int>(unserved, [&] {
    ++built;
    return std::make_shared<int>(0);
  }),
            nullptr);
  EXPECT_EQ(built, 4);
  EXPECT_EQ(ExecutorPrimitiveCounters().created, created);
}
#endif

}  // namespace
}  // namespace vgpu
