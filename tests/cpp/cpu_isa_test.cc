// The CPU executor's run-time instruction set choice (backend/cpu/cpu_isa.h) and the kernels
// that have vector variants: every level this machine supports gives the portable loops'
// results bit for bit (levels it lacks are skipped, and named in the test's output), and reads
// and writes nothing outside its tensors (checked against guard pages). The window-index
// pooling kernels are checked in float32, half and bfloat16 (the 16-bit portable path runs the
// float loops on float32 copies; the AVX-512 variants read the 16-bit tensors directly).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/backend/cpu/cpu_isa.h"
#include "plugin/backend/cpu/kernels/pooling_window_index_simd.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/pooling.h"
#include "tests/conformance/executor_kernel_harness.h"
#include "unsupported/Eigen/CXX11/Tensor"

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

// What the three window-index kernels write for one geometry, in element type T.
template <typename T>
struct WindowIndexResults {
  std::vector<T> y;
  std::vector<uint8_t> index;
  std::vector<T> dx, dx_through_relu, dx_from_stray_bytes;
};

// The executor's dtype of each element type the window-index kernels have vector variants of.
template <typename T>
DType DTypeOf();
template <>
DType DTypeOf<float>() { return DType::kFloat32; }
template <>
DType DTypeOf<Eigen::half>() { return DType::kFloat16; }
template <>
DType DTypeOf<Eigen::bfloat16>() { return DType::kBFloat16; }

template <typename T>
const char* DTypeName() {
  return std::is_same_v<T, float> ? "float32" : std::is_same_v<T, Eigen::half> ? "half" : "bfloat16";
}

struct WindowIndexCase {
  int32_t window;
  int64_t in, channels;
};

template <typename T>
WindowIndexResults<T> RunWindowIndexKernels(const WindowIndexCase& c) {
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
  // Fractions (v / 3.5) that the 16-bit types round, and values near each type's extremes.
  const float big = static_cast<float>(Eigen::NumTraits<T>::highest()) / 2;
  std::vector<T> x(images * c.in * c.in * c.channels);
  for (size_t i = 0; i < x.size(); ++i) {
    const int v = static_cast<int>((i * 7919) % 23) - 11;
    x[i] = T(i % 13 == 0   ? std::numeric_limits<float>::quiet_NaN()
             : i % 29 == 0 ? -inf
             : i % 31 == 0 ? inf
             : i % 37 == 0 ? (i % 2 == 0 ? big : -big)
             : v == 0      ? (i % 2 == 0 ? 0.0f : -0.0f)
                           : static_cast<float>(v) / 3.5f);
  }
  for (size_t i = 0; i < static_cast<size_t>(c.channels); ++i) {
    x[i] = T(std::numeric_limits<float>::quiet_NaN());  // the first window of channel i: all NaN
    x[c.channels + i] = T(std::numeric_limits<float>::quiet_NaN());
    x[c.in * c.channels + i] = T(std::numeric_limits<float>::quiet_NaN());
    x[(c.in + 1) * c.channels + i] = T(i % 2 == 0 ? std::numeric_limits<float>::quiet_NaN() : -inf);
  }
  std::vector<T> dy(images * out * out * c.channels);
  for (size_t i = 0; i < dy.size(); ++i) {
    dy[i] = T(i % 7 == 0 ? std::numeric_limits<float>::quiet_NaN()
              : i % 11 == 0 ? -inf
                            : static_cast<float>(static_cast<int>((i * 5) % 9) - 4) * 0.3f);
  }
  const DType dtype = DTypeOf<T>();
  WindowIndexResults<T> r;
  r.y.assign(dy.size(), T(-1));
  r.index.assign(dy.size(), 0xEE);
  EXPECT_TRUE(CpuLaunch().Describe(p).Tensor(x_shape, dtype).Tensor(y_shape, dtype).Buffer(&x)
                  .Buffer(&r.y).Buffer(&r.index).Run(pooling::kForwardWithWindowIndex).ok());
  auto backward = [&](KernelId kernel, std::vector<uint8_t>* index, std::vector<T>* dx) {
    dx->assign(x.size(), T(-7));
    EXPECT_TRUE(CpuLaunch().Describe(p).Tensor(x_shape, dtype).Tensor(y_shape, dtype)
                    .Buffer(index).Buffer(&dy).Buffer(dx).Run(kernel).ok());
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

template <typename T>
void ExpectWindowIndexVariantsMatchThePortableLoops(const std::vector<CpuIsa>& levels) {
  // Full vectors, a unit's last partial vector (13, 70 = 64 + 6, 100 = 64 + 36), windows that
  // cover the input and windows that leave its last row and column out, 2x2 and 3x3 windows.
  for (const WindowIndexCase& c : {WindowIndexCase{2, 6, 8}, WindowIndexCase{2, 7, 13},
                                   WindowIndexCase{2, 8, 16}, WindowIndexCase{2, 9, 32},
                                   WindowIndexCase{3, 7, 64}, WindowIndexCase{2, 5, 70},
                                   WindowIndexCase{3, 9, 100}}) {
    SetCpuIsaForTesting(CpuIsa::kBaseline);
    const WindowIndexResults<T> portable = RunWindowIndexKernels<T>(c);
    for (CpuIsa isa : levels) {
      SetCpuIsaForTesting(isa);
      const WindowIndexResults<T> vector = RunWindowIndexKernels<T>(c);
      SCOPED_TRACE(::testing::Message() << DTypeName<T>() << ", " << CpuIsaName(isa)
                                        << ", window " << c.window << ", in " << c.in
                                        << ", channels " << c.channels);
      EXPECT_TRUE(SameBytes(vector.y, portable.y));
      EXPECT_TRUE(SameBytes(vector.index, portable.index));
      EXPECT_TRUE(SameBytes(vector.dx, portable.dx));
      EXPECT_TRUE(SameBytes(vector.dx_through_relu, portable.dx_through_relu));
      EXPECT_TRUE(SameBytes(vector.dx_from_stray_bytes, portable.dx_from_stray_bytes));
    }
  }
}

TEST_F(CpuIsaTest, WindowIndexVariantsGiveThePortableLoopsResultsBitForBit) {
  const std::vector<CpuIsa> levels = VectorLevels();
  ExpectWindowIndexVariantsMatchThePortableLoops<float>(levels);
  ExpectWindowIndexVariantsMatchThePortableLoops<Eigen::half>(levels);
  ExpectWindowIndexVariantsMatchThePortableLoops<Eigen::bfloat16>(levels);
}

TEST_F(CpuIsaTest, SixteenBitWindowIndexVariantsExistExactlyAtAvx512) {
  using cpu_kernels::WindowIndexBackwardUnitFor;
  using cpu_kernels::WindowIndexForwardUnitFor;
  EXPECT_NE(WindowIndexForwardUnitFor<float>(CpuIsa::kAvx2), nullptr);
  EXPECT_EQ(WindowIndexForwardUnitFor<Eigen::half>(CpuIsa::kAvx2), nullptr);
  EXPECT_EQ(WindowIndexBackwardUnitFor<Eigen::bfloat16>(CpuIsa::kAvx2, true), nullptr);
  EXPECT_NE(WindowIndexForwardUnitFor<Eigen::half>(CpuIsa::kAvx512), nullptr);
  EXPECT_NE(WindowIndexBackwardUnitFor<Eigen::bfloat16>(CpuIsa::kAvx512, false), nullptr);
  EXPECT_EQ(WindowIndexForwardUnitFor<float>(CpuIsa::kBaseline), nullptr);
}

// `bytes` of memory with an inaccessible page on each side: placed against the page after it
// (at_end) or the page before it, so that an access one byte outside the buffer faults.
class GuardedPages {
 public:
  GuardedPages(size_t bytes, bool at_end) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t data_pages = (bytes + page - 1) / page + 1;
    mapped_ = (data_pages + 2) * page;
    base_ = static_cast<uint8_t*>(::mmap(nullptr, mapped_, PROT_NONE,
                                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED) {
      base_ = nullptr;
      return;
    }
    ::mprotect(base_ + page, data_pages * page, PROT_READ | PROT_WRITE);
    data_ = at_end ? base_ + page + data_pages * page - bytes : base_ + page;
  }
  ~GuardedPages() {
    if (base_ != nullptr) ::munmap(base_, mapped_);
  }
  GuardedPages(const GuardedPages&) = delete;
  GuardedPages& operator=(const GuardedPages&) = delete;
  template <typename T>
  T* As() { return reinterpret_cast<T*>(data_); }

 private:
  uint8_t* base_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t mapped_ = 0;
};

template <typename T>
void ExpectWindowIndexVariantsStayInsideTheirTensors(CpuIsa isa) {
  const auto forward = cpu_kernels::WindowIndexForwardUnitFor<T>(isa);
  const auto backward = cpu_kernels::WindowIndexBackwardUnitFor<T>(isa, true);
  if (forward == nullptr) return;  // the 16-bit types below AVX-512: the portable loops run
  ASSERT_NE(backward, nullptr);
  for (const WindowIndexCase& c : {WindowIndexCase{2, 5, 13}, WindowIndexCase{3, 7, 70},
                                   WindowIndexCase{2, 4, 8}}) {
    const int64_t images = 2, out = c.in / c.window;
    const int64_t x_count = images * c.in * c.in * c.channels;
    const int64_t y_count = images * out * out * c.channels;
    const int64_t in_dims[3] = {1, c.in, c.in}, out_dims[3] = {1, out, out};
    const int64_t stride[3] = {1, c.window, c.window};
    std::vector<int64_t> slot_offsets;
    for (int64_t h = 0; h < c.window; ++h) {
      for (int64_t w = 0; w < c.window; ++w) {
        slot_offsets.push_back((h * c.in + w) * c.channels);
      }
    }
    const cpu_kernels::TilingWindows windows{in_dims, out_dims, stride, c.channels,
                                             slot_offsets.data(),
                                             static_cast<int>(slot_offsets.size())};
    for (bool at_end : {true, false}) {
      SCOPED_TRACE(::testing::Message() << DTypeName<T>() << ", " << CpuIsaName(isa)
                                        << ", channels " << c.channels
                                        << (at_end ? ", guard after" : ", guard before"));
      GuardedPages x(x_count * sizeof(T), at_end), y(y_count * sizeof(T), at_end);
      GuardedPages index(y_count, at_end), dy(y_count * sizeof(T), at_end);
      GuardedPages dx(x_count * sizeof(T), at_end);
      ASSERT_NE(x.As<T>(), nullptr);
      for (int64_t i = 0; i < x_count; ++i) x.As<T>()[i] = T(static_cast<float>(i % 17) - 8);
      for (int64_t i = 0; i < y_count; ++i) dy.As<T>()[i] = T(static_cast<float>(i % 5));
      for (int64_t b = 0; b < images; ++b) {
        for (int64_t c0 = 0; c0 < c.channels; c0 += 64) {
          const int64_t width = std::min<int64_t>(64, c.channels - c0);
          forward(windows, x.As<T>(), y.As<T>(), index.As<uint8_t>(), b, c0, width);
          backward(windows, index.As<uint8_t>(), dy.As<T>(), dx.As<T>(), b, c0, width);
        }
      }
      // Every output element was written: the maxima are inputs, the slots in range.
      for (int64_t i = 0; i < y_count; ++i) {
        EXPECT_LT(index.As<uint8_t>()[i] & 0x7F, windows.slots) << i;
        EXPECT_GE(static_cast<float>(y.As<T>()[i]), -8.0f) << i;
      }
    }
  }
}

TEST_F(CpuIsaTest, WindowIndexVariantsTouchNothingOutsideTheirTensors) {
  // Each tensor sits against an inaccessible page, after its end and then before its start; the
  // variants run every unit the kernel would (blocks of 64 channels, the last one partial), so
  // a lane read or written past a tensor's edge, or a masked lane that touched memory, faults.
  for (CpuIsa isa : VectorLevels()) {
    ExpectWindowIndexVariantsStayInsideTheirTensors<float>(isa);
    ExpectWindowIndexVariantsStayInsideTheirTensors<Eigen::half>(isa);
    ExpectWindowIndexVariantsStayInsideTheirTensors<Eigen::bfloat16>(isa);
  }
}

}  // namespace
}  // namespace vgpu
