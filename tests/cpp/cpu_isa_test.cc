// The CPU executor's run-time instruction set choice (backend/cpu/cpu_isa.h) and the kernels
// that have vector variants: every level this machine supports gives the portable loops'
// results bit for bit (levels it lacks are skipped, and named in the test's output).
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/backend/cpu/cpu_isa.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/pooling.h"
#include "tests/conformance/executor_kernel_harness.h"

namespace vgpu {
namespace {

using executor_test::ExecutorLaunch;

ExecutorLaunch CpuLaunch() { return ExecutorLaunch(executor_test::TestExecutor::Named("cpu")); }

// Restores the detected level when a test ends.
class CpuIsaTest : public ::testing::Test {
 protected:
  void TearDown() override { SetCpuIsaForTesting(std::nullopt); }
  // The levels above the baseline this machine supports (what HostCpuIsa() detected).
  static std::vector<CpuIsa> VectorLevels() {
    SetCpuIsaForTesting(std::nullopt);
    const CpuIsa detected = HostCpuIsa();
    std::vector<CpuIsa> levels;
    for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
      if (isa <= detected) {
        levels.push_back(isa);
      } else {
        std::printf("  (%s is not available here: not tested)\n",
                    std::string(CpuIsaName(isa)).c_str());
      }
    }
    return levels;
  }
};

TEST_F(CpuIsaTest, AnOverrideIsReturnedUntilCleared) {
  const CpuIsa detected = HostCpuIsa();
  SetCpuIsaForTesting(CpuIsa::kBaseline);
  EXPECT_EQ(HostCpuIsa(), CpuIsa::kBaseline);
  SetCpuIsaForTesting(std::nullopt);
  EXPECT_EQ(HostCpuIsa(), detected);
  EXPECT_EQ(CpuIsaName(CpuIsa::kAvx512), "avx512");
  EXPECT_EQ(CpuIsaName(CpuIsa::kAvx2), "avx2");
  EXPECT_EQ(CpuIsaName(CpuIsa::kBaseline), "baseline");
}

// What the three window-index kernels write for one geometry.
struct WindowIndexResults {
  std::vector<float> y;
  std::vector<uint8_t> index;
  std::vector<float> dx, dx_through_relu, dx_from_stray_bytes;
};

struct WindowIndexCase {
  int32_t window;
  int64_t in, channels;
};

WindowIndexResults RunWindowIndexKernels(const WindowIndexCase& c) {
  PoolingDescriptorSettings p;
  p.mode = PoolingMode::kMax;
  p.data_format = DataFormat::kNHWC;
  p.spatial_dims = 2;
  p.window[0] = p.window[1] = c.window;
  p.stride[0] = p.stride[1] = c.window;
  const int64_t images = 3, out = c.in / c.window;
  const std::vector<int64_t> x_shape = {images, c.in, c.in, c.channels};
  const std::vector<int64_t> y_shape = {images, out, out, c.channels};
  const float inf = std::numeric_limits<float>::infinity();
  // Ties, signed zeros, NaNs, infinities and windows with no number at all.
  std::vector<float> x(images * c.in * c.in * c.channels);
  for (size_t i = 0; i < x.size(); ++i) {
    const int v = static_cast<int>((i * 7919) % 23) - 11;
    x[i] = i % 13 == 0   ? std::numeric_limits<float>::quiet_NaN()
           : i % 29 == 0 ? -inf
           : i % 31 == 0 ? inf
           : v == 0      ? (i % 2 == 0 ? 0.0f : -0.0f)
                         : static_cast<float>(v / 3);
  }
  for (size_t i = 0; i < static_cast<size_t>(c.channels); ++i) {
    x[i] = std::numeric_limits<float>::quiet_NaN();  // the first window of channel i: all NaN
    x[c.channels + i] = std::numeric_limits<float>::quiet_NaN();
    x[c.in * c.channels + i] = std::numeric_limits<float>::quiet_NaN();
    x[(c.in + 1) * c.channels + i] = i % 2 == 0 ? std::numeric_limits<float>::quiet_NaN() : -inf;
  }
  std::vector<float> dy(images * out * out * c.channels);
  for (size_t i = 0; i < dy.size(); ++i) {
    dy[i] = i % 7 == 0 ? std::numeric_limits<float>::quiet_NaN()
            : i % 11 == 0 ? -inf
                          : static_cast<float>(static_cast<int>((i * 5) % 9) - 4) * 0.5f;
  }
  WindowIndexResults r;
  r.y.assign(dy.size(), -1);
  r.index.assign(dy.size(), 0xEE);
  EXPECT_TRUE(CpuLaunch().Describe(p).Tensor(x_shape).Tensor(y_shape).Buffer(&x).Buffer(&r.y)
                  .Buffer(&r.index).Run(pooling::kForwardWithWindowIndex).ok());
  auto backward = [&](KernelId kernel, std::vector<uint8_t>* index, std::vector<float>* dx) {
    dx->assign(x.size(), -7);
    EXPECT_TRUE(CpuLaunch().Describe(p).Tensor(x_shape).Tensor(y_shape).Buffer(index)
                    .Buffer(&dy).Buffer(dx).Run(kernel).ok());
  };
  backward(pooling::kBackwardFromWindowIndex, &r.index, &r.dx);
  backward(pooling::kBackwardFromWindowIndexThroughRelu, &r.index, &r.dx_through_relu);
  // A tenant may write any byte into the index: slots past the window route nothing.
  std::vector<uint8_t> stray(r.index.size());
  for (size_t i = 0; i < stray.size(); ++i) stray[i] = static_cast<uint8_t>(i * 37 + 11);
  backward(pooling::kBackwardFromWindowIndexThroughRelu, &stray, &r.dx_from_stray_bytes);
  return r;
}

template <typename T>
bool SameBytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

TEST_F(CpuIsaTest, WindowIndexVariantsGiveThePortableLoopsResultsBitForBit) {
  const std::vector<CpuIsa> levels = VectorLevels();
  // Full vectors, a unit's last partial vector (13, 70 = 64 + 6, 100 = 64 + 36), windows that
  // cover the input and windows that leave its last row and column out, 2x2 and 3x3 windows.
  for (const WindowIndexCase& c : {WindowIndexCase{2, 6, 8}, WindowIndexCase{2, 7, 13},
                                   WindowIndexCase{2, 8, 16}, WindowIndexCase{2, 9, 32},
                                   WindowIndexCase{3, 7, 64}, WindowIndexCase{2, 5, 70},
                                   WindowIndexCase{3, 9, 100}}) {
    SetCpuIsaForTesting(CpuIsa::kBaseline);
    const WindowIndexResults portable = RunWindowIndexKernels(c);
    for (CpuIsa isa : levels) {
      SetCpuIsaForTesting(isa);
      const WindowIndexResults vector = RunWindowIndexKernels(c);
      SCOPED_TRACE(::testing::Message() << CpuIsaName(isa) << ", window " << c.window << ", in "
                                        << c.in << ", channels " << c.channels);
      EXPECT_TRUE(SameBytes(vector.y, portable.y));
      EXPECT_TRUE(SameBytes(vector.index, portable.index));
      EXPECT_TRUE(SameBytes(vector.dx, portable.dx));
      EXPECT_TRUE(SameBytes(vector.dx_through_relu, portable.dx_through_relu));
      EXPECT_TRUE(SameBytes(vector.dx_from_stray_bytes, portable.dx_from_stray_bytes));
    }
  }
}

}  // namespace
}  // namespace vgpu
