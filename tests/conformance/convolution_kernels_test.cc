// Tests of the convolution-family kernels of every executor of the conformance suite
// (executor_conformance.h), called as a session calls them: 3-D and grouped convolutions and the
// rearrange kernel compute what their launch layouts (protocol/kernels/convolution.h) say, and
// launches a hostile client could send (inconsistent descriptors, reads beyond a buffer) are
// InvalidArgument, never a crash or an out-of-bounds access.
#include <vector>

#include "gtest/gtest.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/convolution.h"
#include "tests/conformance/executor_conformance.h"

namespace vgpu {
namespace {

using executor_test::FilterSettings;
using executor_test::TensorSettings;

class ConvolutionKernels : public executor_test::ExecutorConformanceTest {
 protected:
  absl::Status RunRearrange(std::vector<float>* x, std::vector<int64_t> x_dims,
                            std::vector<float>* y, std::vector<int64_t> y_dims,
                            const convolution::RearrangeParams& params) {
    return Launch().Tensor(x_dims).Tensor(y_dims).Buffer(x).Buffer(y).Param(params)
        .Run(convolution::kRearrange);
  }
};
VGPU_CONFORMANCE_SUITE(ConvolutionKernels);

std::vector<float> Iota(size_t n, float scale) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = scale * static_cast<float>((i * 7) % 11) - 1.0f;
  return values;
}

// A direct 3-D convolution (NDHWC, DHWIO filter, VALID, strides 1, groups g).
std::vector<float> NaiveConvolution3D(const std::vector<float>& x, const std::vector<float>& w,
                                      int n, int d, int h, int wd, int c, int kd, int kh, int kw,
                                      int out_c, int groups) {
  const int od = d - kd + 1, oh = h - kh + 1, ow = wd - kw + 1;
  const int group_c = c / groups, group_out = out_c / groups;
  std::vector<float> y(static_cast<size_t>(n) * od * oh * ow * out_c, 0.0f);
  for (int b = 0; b < n; ++b)
    for (int p = 0; p < od; ++p)
      for (int r = 0; r < oh; ++r)
        for (int q = 0; q < ow; ++q)
          for (int o = 0; o < out_c; ++o) {
            const int g = o / group_out;
            float sum = 0;
            for (int i = 0; i < kd; ++i)
              for (int j = 0; j < kh; ++j)
                for (int k = 0; k < kw; ++k)
                  for (int ci = 0; ci < group_c; ++ci) {
                    const float xv =
                        x[((((b * d + p + i) * h + r + j) * wd + q + k) * c) + g * group_c + ci];
                    const float wv = w[(((i * kh + j) * kw + k) * group_c + ci) * out_c + o];
                    sum += xv * wv;
                  }
            y[(((b * od + p) * oh + r) * ow + q) * out_c + o] = sum;
          }
  return y;
}

ConvolutionDescriptorSettings Convolution3D(int32_t groups) {
  ConvolutionDescriptorSettings settings;
  settings.spatial_dims = 3;
  settings.group_count = groups;
  return settings;
}

TEST_P(ConvolutionKernels, Grouped3DConvolutionMatchesADirectSum) {
  const int groups = 2;
  std::vector<float> x = Iota(2 * 3 * 4 * 5 * 4, 0.25f);
  std::vector<float> w = Iota(2 * 2 * 3 * 2 * 6, 0.125f);
  std::vector<float> y(2 * 2 * 3 * 3 * 6, 99.0f);
  ASSERT_TRUE(Launch()
                  .Tensor({2, 3, 4, 5, 4})
                  .Describe(FilterSettings({2, 2, 3, 2, 6}))
                  .Describe(Convolution3D(groups))
                  .Tensor({2, 2, 3, 3, 6})
                  .Buffer(&x)
                  .Buffer(&w)
                  .Buffer(&y)
                  .Run(convolution::kForward)
                  .ok());
  const std::vector<float> expected = NaiveConvolution3D(x, w, 2, 3, 4, 5, 4, 2, 2, 3, 6, groups);
  ASSERT_EQ(y.size(), expected.size());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected[i], 1e-4) << i;
}

TEST_P(ConvolutionKernels, InconsistentConvolutionLaunchesAreInvalidArguments) {
  std::vector<float> x(2 * 3 * 4 * 5 * 4), w(2 * 2 * 3 * 2 * 6), y(2 * 2 * 3 * 3 * 6);
  auto run = [&](TensorDescriptorSettings x_settings, FilterDescriptorSettings filter,
                 ConvolutionDescriptorSettings conv, TensorDescriptorSettings y_settings) {
    return Launch()
        .Describe(x_settings)
        .Describe(filter)
        .Describe(conv)
        .Describe(y_settings)
        .Buffer(&x)
        .Buffer(&w)
        .Buffer(&y)
        .Run(convolution::kForward);
  };
  const auto x5 = TensorSettings({2, 3, 4, 5, 4});
  const auto y5 = TensorSettings({2, 2, 3, 3, 6});
  const auto w5 = FilterSettings({2, 2, 3, 2, 6});
  EXPECT_TRUE(run(x5, w5, Convolution3D(2), y5).ok());
  // Groups that do not make the input depth, or do not divide the output depth.
  EXPECT_EQ(run(x5, w5, Convolution3D(3), y5).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run(TensorSettings({2, 3, 4, 5, 6}), w5, Convolution3D(3), y5).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run(x5, w5, Convolution3D(0), y5).code(), absl::StatusCode::kInvalidArgument);
  // A rank-4 filter for a 3-D convolution, a 2-D convolution with a depth window.
  EXPECT_EQ(run(x5, FilterSettings({2, 3, 2, 6}), Convolution3D(2), y5).code(),
            absl::StatusCode::kInvalidArgument);
  ConvolutionDescriptorSettings two_d;
  two_d.stride_d = 2;
  EXPECT_EQ(
      run(TensorSettings({2, 4, 5, 4}), FilterSettings({2, 3, 4, 6}), two_d,
          TensorSettings({2, 3, 3, 6}))
          .code(),
      absl::StatusCode::kInvalidArgument);
  // An output size the window does not give; an input larger than its buffer.
  EXPECT_EQ(run(x5, w5, Convolution3D(2), TensorSettings({2, 2, 3, 4, 6})).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      run(TensorSettings({2, 3, 4, 9, 4}), w5, Convolution3D(2), TensorSettings({2, 2, 3, 7, 6}))
          .code(),
      absl::StatusCode::kInvalidArgument);
  // Depth counts whose products overflow.
  EXPECT_EQ(
      run(TensorSettings({1, 1, 1, 1, int64_t{1} << 40}),
          FilterSettings({1, 1, 1, int64_t{1} << 44, 0}), Convolution3D(1 << 20),
          TensorSettings({1, 1, 1, 1, 0}))
          .code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_P(ConvolutionKernels, PatchesBeyondTheScratchBudgetAreRefused) {
  // Small buffers whose convolution would need a 1 GiB im2col row: refused, not allocated.
  // (float64: float32 convolutions go to oneDNN first where the build has it, which needs no
  // patches.)
  std::vector<double> x(40960), w(32768), y(8193);
  FilterDescriptorSettings filter = FilterSettings({1, 1, 32768, 1, 1});
  filter.dtype = DType::kFloat64;
  EXPECT_EQ(Launch()
                .Tensor({1, 1, 1, 40960, 1}, DType::kFloat64)
                .Describe(filter)
                .Describe(Convolution3D(1))
                .Tensor({1, 1, 1, 8193, 1}, DType::kFloat64)
                .Buffer(&x)
                .Buffer(&w)
                .Buffer(&y)
                .Run(convolution::kForward)
                .code(),
            absl::StatusCode::kResourceExhausted);
}

convolution::RearrangeParams Rearrangement(std::vector<int64_t> strides,
                                           std::vector<int32_t> ties = {},
                                           std::vector<int64_t> summed_sizes = {},
                                           std::vector<int64_t> summed_strides = {}) {
  convolution::RearrangeParams params;
  for (size_t k = 0; k < strides.size(); ++k) params.x_strides[k] = strides[k];
  for (size_t k = 0; k < ties.size(); ++k) params.ties[k] = ties[k];
  params.summed_rank = static_cast<int32_t>(summed_sizes.size());
  for (size_t m = 0; m < summed_sizes.size(); ++m) {
    params.summed_sizes[m] = summed_sizes[m];
    params.summed_strides[m] = summed_strides[m];
  }
  return params;
}

TEST_P(ConvolutionKernels, RearrangeTransposesTakesDiagonalsSumsAndWritesDiagonals) {
  std::vector<float> x = {0, 1, 2, 3, 4, 5, 6, 7, 8};  // [3, 3]
  std::vector<float> y(9);
  ASSERT_TRUE(RunRearrange(&x, {3, 3}, &y, {3, 3}, Rearrangement({1, 3})).ok());  // ij->ji
  EXPECT_EQ(y, (std::vector<float>{0, 3, 6, 1, 4, 7, 2, 5, 8}));
  std::vector<float> diagonal(3);
  ASSERT_TRUE(RunRearrange(&x, {3, 3}, &diagonal, {3}, Rearrangement({4})).ok());  // ii->i
  EXPECT_EQ(diagonal, (std::vector<float>{0, 4, 8}));
  std::vector<float> row_sums(3);
  ASSERT_TRUE(
      RunRearrange(&x, {3, 3}, &row_sums, {3}, Rearrangement({3}, {}, {3}, {1})).ok());  // ij->i
  EXPECT_EQ(row_sums, (std::vector<float>{3, 12, 21}));
  std::vector<float> inflated(9, 99.0f);
  ASSERT_TRUE(
      RunRearrange(&diagonal, {3}, &inflated, {3, 3}, Rearrangement({1, 0}, {-1, 0})).ok());
  EXPECT_EQ(inflated, (std::vector<float>{0, 0, 0, 0, 4, 0, 0, 0, 8}));  // i->ii
}

TEST_P(ConvolutionKernels, HostileRearrangementsAreInvalidArguments) {
  std::vector<float> x(9), y(9);
  auto code = [&](const convolution::RearrangeParams& params, std::vector<int64_t> y_dims) {
    return RunRearrange(&x, {3, 3}, &y, std::move(y_dims), params).code();
  };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code(Rearrangement({1, 4}), {3, 3}), kInvalid);           // reads past x
  EXPECT_EQ(code(Rearrangement({3, -1}), {3, 3}), kInvalid);          // a negative stride
  EXPECT_EQ(code(Rearrangement({3, 1}, {-1, 1}), {3, 3}), kInvalid);  // a tie to itself
  EXPECT_EQ(code(Rearrangement({3}, {}, {4}, {1}), {3}), kInvalid);   // a sum past x
  EXPECT_EQ(code(Rearrangement({3, 1, 1}), {3, 3}), kInvalid);        // a stride beyond y
  convolution::RearrangeParams too_many = Rearrangement({3});
  too_many.summed_rank = 9;
  EXPECT_EQ(code(too_many, {3}), kInvalid);
  convolution::RearrangeParams huge = Rearrangement({int64_t{1} << 62, 1});
  EXPECT_EQ(code(huge, {3, 3}), kInvalid);  // overflowing offsets
  std::vector<float> short_y(2);
  EXPECT_EQ(RunRearrange(&x, {3, 3}, &short_y, {3}, Rearrangement({4})).code(), kInvalid);
}

}  // namespace
}  // namespace vgpu
