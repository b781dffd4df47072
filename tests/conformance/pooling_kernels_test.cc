// The pooling family's kernels, run on every executor of the conformance suite as a session runs
// them (executor_conformance.h): results on hand-computed cases (2-D and 3-D, both layouts, NaN
// propagation, argmax), and hostile launches (bad descriptor fields, sizes that overflow, short
// buffers, argmax values outside the input) rejected with InvalidArgument, never a crash or an
// out-of-bounds write.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/pooling.h"
#include "tests/conformance/executor_conformance.h"

namespace vgpu {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kLowest = std::numeric_limits<float>::lowest();

class PoolingKernelsTest : public executor_test::ExecutorConformanceTest {};
VGPU_CONFORMANCE_SUITE(PoolingKernelsTest);

PoolingDescriptorSettings Window2d(PoolingMode mode, int32_t window, int32_t stride,
                                   DataFormat format = DataFormat::kNHWC) {
  PoolingDescriptorSettings p;
  p.mode = mode;
  p.data_format = format;
  p.spatial_dims = 2;
  p.window[0] = p.window[1] = window;
  p.stride[0] = p.stride[1] = stride;
  return p;
}

TEST_P(PoolingKernelsTest, PoolsTwoDimensionalWindowsAndRoutesGradientsToTheFirstMaximum) {
  // One 3x3 image, 2x2 windows, stride 1: outputs over rows {0,1} x cols {0,1} etc.
  std::vector<float> x = {1, 5, 2,
                          5, 3, 4,
                          0, 6, 6};
  std::vector<float> y(4), dy = {1, 2, 3, 4}, dx(9, -1);
  auto max = Window2d(PoolingMode::kMax, 2, 1);
  ASSERT_TRUE(Launch().Describe(max).Tensor({1, 3, 3, 1}).Tensor({1, 2, 2, 1})
                  .Buffer(&x).Buffer(&y).Run(pooling::kForward).ok());
  EXPECT_EQ(y, (std::vector<float>{5, 5, 6, 6}));
  ASSERT_TRUE(Launch().Describe(max).Tensor({1, 3, 3, 1}).Tensor({1, 2, 2, 1})
                  .Buffer(&x).Buffer(&dy).Buffer(&dx).Run(pooling::kBackward).ok());
  // Ties go to the first maximum in row-major window order.
  EXPECT_EQ(dx, (std::vector<float>{0, 1 + 2, 0, 0, 0, 0, 0, 3 + 4, 0}));

  auto average = Window2d(PoolingMode::kAverage, 2, 1);
  ASSERT_TRUE(Launch().Describe(average).Tensor({1, 3, 3, 1}).Tensor({1, 2, 2, 1})
                  .Buffer(&x).Buffer(&y).Run(pooling::kForward).ok());
  EXPECT_EQ(y, (std::vector<float>{3.5f, 3.5f, 3.5f, 4.75f}));
}

TEST_P(PoolingKernelsTest, PoolsThreeDimensionalChannelsFirstTensors) {
  // NCDHW [1, 2, 2, 2, 2], one 2x2x2 window per channel.
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>((i * 7) % 16);
  PoolingDescriptorSettings p;
  p.spatial_dims = 3;
  p.data_format = DataFormat::kNCHW;
  p.window[0] = p.window[1] = p.window[2] = 2;
  p.stride[0] = p.stride[1] = p.stride[2] = 2;
  std::vector<float> y(2);
  ASSERT_TRUE(Launch().Describe(p).Tensor({1, 2, 2, 2, 2}).Tensor({1, 2, 1, 1, 1})
                  .Buffer(&x).Buffer(&y).Run(pooling::kForward).ok());
  EXPECT_EQ(y, (std::vector<float>{14, 15}));
  p.mode = PoolingMode::kAverage;
  ASSERT_TRUE(Launch().Describe(p).Tensor({1, 2, 2, 2, 2}).Tensor({1, 2, 1, 1, 1})
                  .Buffer(&x).Buffer(&y).Run(pooling::kForward).ok());
  EXPECT_EQ(y, (std::vector<float>{6.5f, 8.5f}));
}

TEST_P(PoolingKernelsTest, NanPropagationDecidesWhatAWindowWithNansGives) {
  // Three 1x2 windows: [NaN, 1], [2, NaN], [NaN, NaN].
  std::vector<float> x = {kNan, 1, 2, kNan, kNan, kNan};
  std::vector<float> y(3), dy = {10, 20, 30};
  auto p = Window2d(PoolingMode::kMax, 1, 1);
  p.window[1] = p.stride[1] = 2;
  for (NanPropagation nan : {NanPropagation::kNotPropagate, NanPropagation::kPropagate}) {
    p.nan_propagation = nan;
    const bool propagate = nan == NanPropagation::kPropagate;
    ASSERT_TRUE(Launch().Describe(p).Tensor({1, 1, 6, 1}).Tensor({1, 1, 3, 1})
                    .Buffer(&x).Buffer(&y).Run(pooling::kForward).ok());
    if (propagate) {
      EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]) && std::isnan(y[2]));
    } else {
      EXPECT_EQ(y, (std::vector<float>{1, 2, kLowest}));
    }
    std::vector<float> dx(6, -1);
    ASSERT_TRUE(Launch().Describe(p).Tensor({1, 1, 6, 1}).Tensor({1, 1, 3, 1})
                    .Buffer(&x).Buffer(&dy).Buffer(&dx).Run(pooling::kBackward).ok());
    EXPECT_EQ(dx, propagate ? (std::vector<float>{10, 0, 0, 20, 30, 0})
                            : (std::vector<float>{0, 10, 20, 0, 0, 0}));
  }
}

TEST_P(PoolingKernelsTest, ArgmaxIndicesFollowTensorflowsCpuRule) {
  std::vector<float> x = {3, 3, 1, kNan, 2, 4, 4, 0};  // NHWC [2, 1, 4, 1], 1x2 windows
  std::vector<float> y(4);
  std::vector<int64_t> argmax(4);
  auto p = Window2d(PoolingMode::kMax, 1, 1);
  p.window[1] = p.stride[1] = 2;
  ASSERT_TRUE(Launch().Describe(p).Tensor({2, 1, 4, 1}).Tensor({2, 1, 2, 1})
                  .Tensor({2, 1, 2, 1}, DType::kInt64).Buffer(&x).Buffer(&y).Buffer(&argmax)
                  .Param(1).Run(pooling::kForwardWithArgmax).ok());
  EXPECT_EQ(argmax, (std::vector<int64_t>{0, 2, 5, 6}));  // the first of tied maxima wins
  EXPECT_EQ(y[0], 3);
  EXPECT_EQ(y[1], 1);  // a NaN after the first element is skipped
  std::vector<int32_t> argmax32(4);
  ASSERT_TRUE(Launch().Describe(p).Tensor({2, 1, 4, 1}).Tensor({2, 1, 2, 1})
                  .Tensor({2, 1, 2, 1}, DType::kInt32).Buffer(&x).Buffer(&y).Buffer(&argmax32)
                  .Param(0).Run(pooling::kForwardWithArgmax).ok());
  EXPECT_EQ(argmax32, (std::vector<int32_t>{0, 2, 1, 2}));  // without the batch offset
}

TEST_P(PoolingKernelsTest, RejectsHostilePoolingDescriptors) {
  std::vector<float> x(16), y(4);
  auto run = [&](const PoolingDescriptorSettings& p, std::vector<int64_t> x_dims = {1, 4, 4, 1},
                 std::vector<int64_t> y_dims = {1, 2, 2, 1}) {
    return Launch().Describe(p).Tensor(x_dims).Tensor(y_dims).Buffer(&x).Buffer(&y)
        .Run(pooling::kForward);
  };
  const PoolingDescriptorSettings good = Window2d(PoolingMode::kMax, 2, 2);
  ASSERT_TRUE(run(good).ok());
  std::vector<PoolingDescriptorSettings> hostile;
  auto mutate = [&](auto change) {
    PoolingDescriptorSettings p = good;
    change(p);
    hostile.push_back(p);
  };
  mutate([](auto& p) { p.spatial_dims = 0; });
  mutate([](auto& p) { p.spatial_dims = 4; });
  mutate([](auto& p) { p.spatial_dims = -7; });
  mutate([](auto& p) { p.mode = static_cast<PoolingMode>(9); });
  mutate([](auto& p) { p.data_format = static_cast<DataFormat>(5); });
  mutate([](auto& p) { p.nan_propagation = static_cast<NanPropagation>(2); });
  mutate([](auto& p) { p.window[0] = 0; });
  mutate([](auto& p) { p.window[1] = -2; });
  mutate([](auto& p) { p.stride[0] = 0; });
  mutate([](auto& p) { p.stride[1] = std::numeric_limits<int32_t>::min(); });
  mutate([](auto& p) { p.pad_before[0] = -1; });
  mutate([](auto& p) { p.pad_after[1] = 2; });  // padding as large as the window
  mutate([](auto& p) { p.window[2] = 3; });     // past the spatial dimensions
  mutate([](auto& p) { p.stride[0] = 1; });     // output size no longer matches
  for (const PoolingDescriptorSettings& p : hostile) {
    EXPECT_EQ(run(p).code(), absl::StatusCode::kInvalidArgument);
  }
  constexpr int64_t kHuge = int64_t{1} << 62;
  EXPECT_EQ(run(good, {1, 4, 4}, {1, 2, 2}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run(good, {2, 4, 4, 1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run(good, {1, -4, 4, 1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run(good, {kHuge, 4, 4, kHuge}, {kHuge, 2, 2, kHuge}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run(good, {1 << 30, 4, 4, 1 << 30}, {1 << 30, 2, 2, 1 << 30}).code(),
            absl::StatusCode::kInvalidArgument);  // element count overflows int64
  EXPECT_EQ(run(good, {1 << 20, 4, 4, 1 << 20}, {1 << 20, 2, 2, 1 << 20}).code(),
            absl::StatusCode::kInvalidArgument);  // fits int64, not the buffers
  EXPECT_EQ(run(good, {1, kHuge, 4, 1}, {1, kHuge / 2, 2, 1}).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> short_x(15);
  EXPECT_EQ(Launch().Describe(good).Tensor({1, 4, 4, 1}).Tensor({1, 2, 2, 1})
                .Buffer(&short_x).Buffer(&y).Run(pooling::kForward).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Launch().Describe(good).Tensor({1, 4, 4, 1}).Tensor({1, 2, 2, 1}, DType::kInt32)
                .Buffer(&x).Buffer(&y).Run(pooling::kForward).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Launch().Tensor({1, 4, 4, 1}).Tensor({1, 2, 2, 1}).Tensor({1, 4, 4, 1})
                .Buffer(&x).Buffer(&y).Run(pooling::kForward).code(),
            absl::StatusCode::kInvalidArgument);  // no pooling descriptor first
}

// Whether two floats are the same value, telling -0 from 0 and taking every NaN as equal.
bool SameFloat(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

TEST_P(PoolingKernelsTest, GradientThroughReluIsTheGradientTimesWhetherTheInputIsPositive) {
  // One 2x4 image, 2x2 windows with stride 2 (tiling): window 0 has a positive maximum, window
  // 1 only zeros and negatives (its maximum 0 is not positive). TensorFlow's ReluGrad multiplies:
  // a negative gradient times 0 is -0, a NaN gradient stays NaN.
  std::vector<float> x = {1, 3, 0, -1,
                          2, -4, -2, 0};
  auto tiles = Window2d(PoolingMode::kMax, 2, 2);
  for (float g : {5.0f, -5.0f, kNan}) {
    std::vector<float> dy = {7, g}, dx(8, -1);
    ASSERT_TRUE(Launch().Describe(tiles).Tensor({1, 2, 4, 1}).Tensor({1, 1, 2, 1})
                    .Buffer(&x).Buffer(&dy).Buffer(&dx).Run(pooling::kBackwardThroughRelu).ok());
    const std::vector<float> expected = {0, 7, g * 0.0f, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < dx.size(); ++i) {
      EXPECT_TRUE(SameFloat(dx[i], expected[i])) << "g " << g << " element " << i << ": " << dx[i];
    }
  }
}

TEST_P(PoolingKernelsTest, GradientThroughReluMatchesTheGradientMaskedAfterwards) {
  // Overlapping windows (3x3, stride 2, one row and column of padding after) and tiling ones
  // (2x2, stride 2), both layouts, inputs and gradients with zeros, negatives and NaNs: the
  // fused kernel gives kBackward's dx times (x > 0), bit for bit.
  struct Case {
    int32_t window, stride, pad_after;
    DataFormat format;
  };
  for (const Case& c : {Case{3, 2, 1, DataFormat::kNHWC}, Case{2, 2, 0, DataFormat::kNHWC},
                        Case{3, 2, 1, DataFormat::kNCHW}, Case{2, 2, 0, DataFormat::kNCHW}}) {
    auto p = Window2d(PoolingMode::kMax, c.window, c.stride, c.format);
    p.pad_after[0] = p.pad_after[1] = c.pad_after;
    const int64_t in = 6, out = (in + c.pad_after - c.window) / c.stride + 1, channels = 3;
    const bool nhwc = c.format == DataFormat::kNHWC;
    const std::vector<int64_t> x_shape = nhwc ? std::vector<int64_t>{2, in, in, channels}
                                              : std::vector<int64_t>{2, channels, in, in};
    const std::vector<int64_t> y_shape = nhwc ? std::vector<int64_t>{2, out, out, channels}
                                              : std::vector<int64_t>{2, channels, out, out};
    std::vector<float> x(2 * in * in * channels), dy(2 * out * out * channels);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = i % 11 == 0 ? kNan : static_cast<float>(static_cast<int>((i * 7) % 13) - 8);
    }
    for (size_t i = 0; i < dy.size(); ++i) {
      dy[i] = i % 7 == 0 ? kNan : static_cast<float>(static_cast<int>((i * 5) % 9) - 4);
    }
    std::vector<float> plain(x.size(), -1), fused(x.size(), -1);
    ASSERT_TRUE(Launch().Describe(p).Tensor(x_shape).Tensor(y_shape)
                    .Buffer(&x).Buffer(&dy).Buffer(&plain).Run(pooling::kBackward).ok());
    ASSERT_TRUE(Launch().Describe(p).Tensor(x_shape).Tensor(y_shape)
                    .Buffer(&x).Buffer(&dy).Buffer(&fused).Run(pooling::kBackwardThroughRelu)
                    .ok());
    int masked = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float expected = plain[i] * (x[i] > 0 ? 1.0f : 0.0f);
      masked += x[i] > 0 ? 0 : 1;
      EXPECT_TRUE(SameFloat(fused[i], expected))
          << "window " << c.window << " element " << i << ": " << fused[i] << " for " << expected;
    }
    EXPECT_GT(masked, 0);
  }
}

TEST_P(PoolingKernelsTest, GradientThroughReluRefusesAveragePoolingAndMissingBuffers) {
  std::vector<float> x(16, 1), dy(4, 1), dx(16, -1);
  EXPECT_EQ(Launch().Describe(Window2d(PoolingMode::kAverage, 2, 2)).Tensor({1, 4, 4, 1})
                .Tensor({1, 2, 2, 1}).Buffer(&x).Buffer(&dy).Buffer(&dx)
                .Run(pooling::kBackwardThroughRelu).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Launch().Describe(Window2d(PoolingMode::kMax, 2, 2)).Tensor({1, 4, 4, 1})
                .Tensor({1, 2, 2, 1}).Buffer(&dy).Buffer(&dx)
                .Run(pooling::kBackwardThroughRelu).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dx, std::vector<float>(16, -1));  // refused before writing
}

TEST_P(PoolingKernelsTest, WindowIndexNamesTheSlotTheGradientTakesAndWhetherTheMaximumIsPositive) {
  // One 2x8 image, 2x2 windows with stride 2: a positive maximum at slot 1; a maximum 0 first at
  // slot 0 (and again at slot 3); only NaNs (no slot, y = lowest()); only -inf (slot 0, the
  // first element equal to the maximum -inf, y = lowest()).
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {1, 3, 0, -1, kNan, kNan, -inf, -inf,
                          2, -4, -2, 0, kNan, kNan, -inf, -inf};
  std::vector<float> y(4, -1);
  std::vector<uint8_t> index(4, 0xEE);
  auto tiles = Window2d(PoolingMode::kMax, 2, 2);
  ASSERT_TRUE(Launch().Describe(tiles).Tensor({1, 2, 8, 1}).Tensor({1, 1, 4, 1})
                  .Buffer(&x).Buffer(&y).Buffer(&index).Run(pooling::kForwardWithWindowIndex)
                  .ok());
  EXPECT_EQ(y, (std::vector<float>{3, 0, kLowest, kLowest}));
  EXPECT_EQ(index, (std::vector<uint8_t>{0x80 | 1, 0, pooling::kNoWindowSlot, 0}));
  for (float g : {5.0f, -5.0f}) {
    std::vector<float> dy = {7, g, 9, g}, dx(16, -1), masked(16, -1);
    ASSERT_TRUE(Launch().Describe(tiles).Tensor({1, 2, 8, 1}).Tensor({1, 1, 4, 1})
                    .Buffer(&index).Buffer(&dy).Buffer(&dx)
                    .Run(pooling::kBackwardFromWindowIndex).ok());
    EXPECT_EQ(dx, (std::vector<float>{0, 7, g, 0, 0, 0, g, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
    ASSERT_TRUE(Launch().Describe(tiles).Tensor({1, 2, 8, 1}).Tensor({1, 1, 4, 1})
                    .Buffer(&index).Buffer(&dy).Buffer(&masked)
                    .Run(pooling::kBackwardFromWindowIndexThroughRelu).ok());
    for (size_t i = 0; i < masked.size(); ++i) {
      const float expected = i == 1 ? 7.0f : (i == 2 || i == 6) ? g * 0.0f : 0.0f;
      EXPECT_TRUE(SameFloat(masked[i], expected)) << "g " << g << " element " << i;
    }
  }
}

TEST_P(PoolingKernelsTest, WindowIndexKernelsGiveWhatTheKernelsThatReadTheInputGive) {
  // Tiling windows that cover the input or leave its last row and column out, both layouts,
  // more channels than one CPU block (64), inputs with NaNs, infinities, ties, zeros and
  // negatives, gradients with NaNs: y, dx and the dx through a ReLU equal kForward's, kBackward's
  // and kBackwardThroughRelu's, bit for bit.
  struct Case {
    int32_t window;
    int64_t in, channels;
    DataFormat format;
  };
  for (const Case& c : {Case{2, 6, 3, DataFormat::kNHWC}, Case{2, 7, 70, DataFormat::kNHWC},
                        Case{3, 7, 2, DataFormat::kNHWC}, Case{2, 5, 3, DataFormat::kNCHW}}) {
    auto p = Window2d(PoolingMode::kMax, c.window, c.window, c.format);
    const int64_t out = c.in / c.window, images = 2;
    const bool nhwc = c.format == DataFormat::kNHWC;
    const std::vector<int64_t> x_shape = nhwc ? std::vector<int64_t>{images, c.in, c.in, c.channels}
                                              : std::vector<int64_t>{images, c.channels, c.in, c.in};
    const std::vector<int64_t> y_shape = nhwc ? std::vector<int64_t>{images, out, out, c.channels}
                                              : std::vector<int64_t>{images, c.channels, out, out};
    std::vector<float> x(images * c.in * c.in * c.channels), dy(images * out * out * c.channels);
    for (size_t i = 0; i < x.size(); ++i) {
      const int v = static_cast<int>((i * 7) % 13) - 8;
      x[i] = i % 11 == 0 ? kNan : i % 17 == 0 ? -std::numeric_limits<float>::infinity()
                                              : static_cast<float>(v / 2);
    }
    for (size_t i = 0; i < dy.size(); ++i) {
      dy[i] = i % 7 == 0 ? kNan : static_cast<float>(static_cast<int>((i * 5) % 9) - 4);
    }
    // Runs `kernel` on buffers a, b, c (x's and y's shapes as above).
    auto run = [&](KernelId kernel, auto* a, auto* b, auto* c) {
      return Launch().Describe(p).Tensor(x_shape).Tensor(y_shape).Buffer(a).Buffer(b).Buffer(c)
          .Run(kernel);
    };
    std::vector<float> y(dy.size(), -1), y_indexed(dy.size(), -1);
    std::vector<uint8_t> index(dy.size(), 0xEE);
    ASSERT_TRUE(Launch().Describe(p).Tensor(x_shape).Tensor(y_shape).Buffer(&x).Buffer(&y)
                    .Run(pooling::kForward).ok());
    ASSERT_TRUE(run(pooling::kForwardWithWindowIndex, &x, &y_indexed, &index).ok());
    for (size_t i = 0; i < y.size(); ++i) {
      EXPECT_TRUE(SameFloat(y_indexed[i], y[i])) << "window " << c.window << " y " << i;
    }
    for (const auto& [reads_x, from_index] :
         {std::pair{pooling::kBackward, pooling::kBackwardFromWindowIndex},
          std::pair{pooling::kBackwardThroughRelu,
                    pooling::kBackwardFromWindowIndexThroughRelu}}) {
      std::vector<float> expected(x.size(), -1), dx(x.size(), -1);
      ASSERT_TRUE(run(reads_x, &x, &dy, &expected).ok());
      ASSERT_TRUE(run(from_index, &index, &dy, &dx).ok());
      for (size_t i = 0; i < x.size(); ++i) {
        EXPECT_TRUE(SameFloat(dx[i], expected[i]))
            << "window " << c.window << " in " << c.in << " kernel " << static_cast<uint32_t>(from_index)
            << " element " << i << ": " << dx[i] << " for " << expected[i];
      }
    }
  }
}

TEST_P(PoolingKernelsTest, WindowIndexKernelsRefuseWindowsThatDoNotTileAndRouteNoStrayByte) {
  std::vector<float> x(16, 1), y(4, -1), dy(4, 1), dx(16, -1);
  std::vector<uint8_t> index(4, 0);
  auto forward = [&](const PoolingDescriptorSettings& p, std::vector<int64_t> y_shape) {
    return Launch().Describe(p).Tensor({1, 4, 4, 1}).Tensor(y_shape).Buffer(&x).Buffer(&y)
        .Buffer(&index).Run(pooling::kForwardWithWindowIndex).code();
  };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(forward(Window2d(PoolingMode::kMax, 3, 2), {1, 1, 1, 1}), kInvalid);  // overlapping
  EXPECT_EQ(forward(Window2d(PoolingMode::kMax, 2, 3), {1, 1, 1, 1}), kInvalid);  // gaps
  EXPECT_EQ(forward(Window2d(PoolingMode::kAverage, 2, 2), {1, 2, 2, 1}), kInvalid);
  auto propagating = Window2d(PoolingMode::kMax, 2, 2);
  propagating.nan_propagation = NanPropagation::kPropagate;
  EXPECT_EQ(forward(propagating, {1, 2, 2, 1}), kInvalid);
  auto padded = Window2d(PoolingMode::kMax, 2, 2);
  padded.pad_after[0] = padded.pad_after[1] = 1;
  EXPECT_EQ(forward(padded, {1, 2, 2, 1}), kInvalid);  // "same": the last windows are cut
  padded.pad_after[0] = padded.pad_after[1] = 0;
  padded.pad_before[0] = padded.pad_before[1] = 1;
  EXPECT_EQ(forward(padded, {1, 2, 2, 1}), kInvalid);
  std::vector<float> big(16 * 16), big_y(1);
  std::vector<uint8_t> big_index(1);
  EXPECT_EQ(Launch().Describe(Window2d(PoolingMode::kMax, 12, 12)).Tensor({1, 12, 12, 1})
                .Tensor({1, 1, 1, 1}).Buffer(&big).Buffer(&big_y).Buffer(&big_index)
                .Run(pooling::kForwardWithWindowIndex).code(),
            kInvalid);  // 144 elements: more than a byte's 127 slots
  EXPECT_EQ(Launch().Describe(Window2d(PoolingMode::kMax, 2, 2)).Tensor({1, 4, 4, 1})
                .Tensor({1, 2, 2, 1}).Buffer(&dy).Buffer(&dx)
                .Run(pooling::kBackwardFromWindowIndex).code(),
            kInvalid);  // no window_index buffer
  EXPECT_EQ(dx, std::vector<float>(16, -1));  // refused before writing
  EXPECT_EQ(y, std::vector<float>(4, -1));
  // Bytes a client wrote itself: a slot past the window's 4 routes nothing, whatever its flag.
  index = {4, 0x7E, 0xFF, 0x80 | 3};
  ASSERT_TRUE(Launch().Describe(Window2d(PoolingMode::kMax, 2, 2)).Tensor({1, 4, 4, 1})
                  .Tensor({1, 2, 2, 1}).Buffer(&index).Buffer(&dy).Buffer(&dx)
                  .Run(pooling::kBackwardFromWindowIndexThroughRelu).ok());
  EXPECT_EQ(dx[15], 1.0f);  // window (1, 1), slot 3: row 3, column 3
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(dx[i], 0.0f) << i;
}

TEST_P(PoolingKernelsTest, ArgmaxGradientsRefuseIndicesOutsideTheInput) {
  auto p = Window2d(PoolingMode::kMax, 1, 1);
  std::vector<float> dy = {1, 2, 3, 4}, dx(4, -1);
  auto backward = [&](std::vector<int64_t> argmax, int32_t include_batch) {
    return Launch().Describe(p).Tensor({1, 2, 2, 1}).Tensor({1, 2, 2, 1})
        .Tensor({1, 2, 2, 1}, DType::kInt64).Buffer(&dy).Buffer(&argmax).Buffer(&dx)
        .Param(include_batch).Run(pooling::kBackwardWithArgmax);
  };
  for (std::vector<int64_t> argmax :
       {std::vector<int64_t>{0, 1, 2, 4}, {-1, 0, 0, 0}, {0, 0, 0, INT64_MIN}, {INT64_MAX, 0, 0, 0}}) {
    EXPECT_EQ(backward(argmax, 1).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(dx, (std::vector<float>{-1, -1, -1, -1}));  // refused before writing
  }
  EXPECT_EQ(backward({3, 3, 0, 3}, 2).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(backward({3, 3, 0, 3}, 1).ok());
  EXPECT_EQ(dx, (std::vector<float>{3, 0, 0, 1 + 2 + 4}));

  std::vector<float> ddx = {5, 6, 7, 8}, ddy(4, -1);
  std::vector<int64_t> argmax = {3, -2, 4, INT64_MIN};
  ASSERT_TRUE(Launch().Describe(p).Tensor({1, 2, 2, 1}).Tensor({1, 2, 2, 1})
                  .Tensor({1, 2, 2, 1}, DType::kInt64).Buffer(&ddx).Buffer(&argmax)
                  .Buffer(&ddy).Param(0).Run(pooling::kGradGradWithArgmax).ok());
  EXPECT_EQ(ddy, (std::vector<float>{8, 0, 0, 0}));
  // A missing parameter block, an int32 argmax for a gradient, a channels-first layout.
  EXPECT_EQ(Launch().Describe(p).Tensor({1, 2, 2, 1}).Tensor({1, 2, 2, 1})
                .Tensor({1, 2, 2, 1}, DType::kInt64).Buffer(&ddx).Buffer(&argmax).Buffer(&ddy)
                .Run(pooling::kGradGradWithArgmax).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<int32_t> argmax32(4);
  EXPECT_EQ(Launch().Describe(p).Tensor({1, 2, 2, 1}).Tensor({1, 2, 2, 1})
                .Tensor({1, 2, 2, 1}, DType::kInt32).Buffer(&dy).Buffer(&argmax32).Buffer(&dx)
                .Param(0).Run(pooling::kBackwardWithArgmax).code(),
            absl::StatusCode::kInvalidArgument);
  auto nchw = Window2d(PoolingMode::kMax, 1, 1, DataFormat::kNCHW);
  EXPECT_EQ(Launch().Describe(nchw).Tensor({1, 1, 2, 2}).Tensor({1, 1, 2, 2})
                .Tensor({1, 1, 2, 2}, DType::kInt64).Buffer(&ddx).Buffer(&argmax).Buffer(&ddy)
                .Param(0).Run(pooling::kGradGradWithArgmax).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vgpu
