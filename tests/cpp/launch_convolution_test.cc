// Tests of the launch layer's readers of the convolution, matmul, bias and rearrange launches
// (backend/launch/convolution_launch.h, matmul_launch.h, bias_launch.h, rearrange_launch.h) and
// of the executors' shared plan cache (plan_cache.h), without an executor: a good launch becomes
// the geometry its descriptors describe, each hostile launch is InvalidArgument, and extents at
// the int64 limits are bounded by checked arithmetic, never multiplied past it.
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "plugin/backend/launch/bias_launch.h"
#include "plugin/backend/launch/convolution_launch.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/backend/launch/matmul_launch.h"
#include "plugin/backend/launch/operand_limits.h"
#include "plugin/backend/launch/plan_cache.h"
#include "plugin/backend/launch/rearrange_launch.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu {
namespace {

using convolution_launch::ConvolutionGeometry;
using convolution_launch::kCols;
using convolution_launch::kPlanes;
using convolution_launch::kRows;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// A launch as the session layer hands it to a kernel: descriptors, a parameter block and
// `buffers` buffers (the readers only count them; the kernels check their sizes).
class TestLaunch {
 public:
  template <typename Settings>
  TestLaunch& Describe(const Settings& settings) {
    kinds_.push_back(DescriptorTraits<Settings>::kKind);
    settings_.emplace_back(sizeof(Settings));
    std::memcpy(settings_.back().data(), &settings, sizeof(Settings));
    return *this;
  }
  template <typename Params>
  TestLaunch& Param(const Params& params) {
    params_.resize(sizeof(Params));
    std::memcpy(params_.data(), &params, sizeof(Params));
    return *this;
  }
  TestLaunch& Buffers(size_t count) {
    buffers_.assign(count, nullptr);
    sizes_.assign(count, 0);
    return *this;
  }
  // Valid while this TestLaunch lives and is not changed.
  LaunchView View() {
    views_.clear();
    for (size_t i = 0; i < kinds_.size(); ++i) {
      views_.push_back(DescriptorView{kinds_[i], absl::Span<const uint8_t>(settings_[i])});
    }
    return LaunchView{buffers_, sizes_, params_, views_};
  }

 private:
  std::vector<DescriptorKind> kinds_;
  std::vector<std::vector<uint8_t>> settings_;
  std::vector<DescriptorView> views_;
  std::vector<uint8_t> params_;
  std::vector<uint8_t*> buffers_;
  std::vector<uint64_t> sizes_;
};

TensorDescriptorSettings Tensor(std::initializer_list<int64_t> dims,
                                DType dtype = DType::kFloat32) {
  TensorDescriptorSettings settings;
  settings.dtype = dtype;
  settings.rank = static_cast<int32_t>(dims.size());
  int i = 0;
  for (int64_t d : dims) settings.dims[i++] = d;
  return settings;
}

FilterDescriptorSettings Filter(std::initializer_list<int64_t> dims) {
  FilterDescriptorSettings settings;
  settings.rank = static_cast<int32_t>(dims.size());
  int i = 0;
  for (int64_t d : dims) settings.dims[i++] = d;
  return settings;
}

ConvolutionDescriptorSettings Convolution(int spatial_dims = 2) {
  ConvolutionDescriptorSettings settings;
  settings.spatial_dims = spatial_dims;
  return settings;
}

ActivationDescriptorSettings Activation(ActivationMode mode) {
  ActivationDescriptorSettings settings;
  settings.mode = mode;
  return settings;
}

// --- Convolution -------------------------------------------------------------------------------

absl::StatusOr<ConvolutionGeometry> ReadConvolution(const TensorDescriptorSettings& x,
                                                    const FilterDescriptorSettings& filter,
                                                    const ConvolutionDescriptorSettings& conv,
                                                    const TensorDescriptorSettings& y,
                                                    size_t buffers = 3) {
  TestLaunch launch;
  launch.Describe(x).Describe(filter).Describe(conv).Describe(y).Buffers(buffers);
  return convolution_launch::ReadConvolutionLaunch(launch.View());
}

template <typename T>
absl::StatusCode CodeOf(const absl::StatusOr<T>& result) {
  return result.status().code();
}

TEST(ConvolutionLaunch, A2DLaunchIsA3DGeometryWithOnePlane) {
  ConvolutionDescriptorSettings conv = Convolution();
  conv.pad_top = 1;
  conv.pad_bottom = 2;
  conv.pad_left = 0;
  conv.pad_right = 1;
  conv.stride_h = 2;
  conv.dilation_w = 2;
  // in 7x9, filter 3x2: rows (7 + 3 - 3) / 2 + 1 = 4, cols (9 + 1 - 3) / 1 + 1 = 8.
  absl::StatusOr<ConvolutionGeometry> g = ReadConvolution(
      Tensor({2, 7, 9, 4}), Filter({3, 2, 4, 6}), conv, Tensor({2, 4, 8, 6}));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->spatial_dims, 2);
  EXPECT_TRUE(g->ChannelsLast());
  EXPECT_EQ(g->batch, 2);
  EXPECT_EQ(g->in_depth, 4);
  EXPECT_EQ(g->out_depth, 6);
  EXPECT_EQ(g->in[kPlanes], 1);
  EXPECT_EQ(g->in[kRows], 7);
  EXPECT_EQ(g->in[kCols], 9);
  EXPECT_EQ(g->out[kRows], 4);
  EXPECT_EQ(g->out[kCols], 8);
  EXPECT_EQ(g->filter[kPlanes], 1);
  EXPECT_EQ(g->filter[kRows], 3);
  EXPECT_EQ(g->filter[kCols], 2);
  EXPECT_EQ(g->pad_before[kRows], 1);
  EXPECT_EQ(g->pad_after[kRows], 2);
  EXPECT_EQ(g->pad_after[kCols], 1);
  EXPECT_EQ(g->stride[kRows], 2);
  EXPECT_EQ(g->dilation[kCols], 2);
  EXPECT_FALSE(g->SymmetricPadding());
  EXPECT_EQ(g->input_elements, 2 * 7 * 9 * 4);
  EXPECT_EQ(g->output_elements, 2 * 4 * 8 * 6);
  EXPECT_EQ(g->filter_elements, 3 * 2 * 4 * 6);
}

TEST(ConvolutionLaunch, GroupedChannelsFirst3DAndDepthwiseLaunchesAreRead) {
  ConvolutionDescriptorSettings conv = Convolution(3);
  conv.data_format = DataFormat::kNCHW;
  conv.group_count = 2;
  absl::StatusOr<ConvolutionGeometry> g = ReadConvolution(
      Tensor({1, 4, 3, 5, 6}), Filter({2, 2, 3, 2, 6}), conv, Tensor({1, 6, 2, 4, 4}));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(g->ChannelsLast());
  EXPECT_EQ(g->groups, 2);
  EXPECT_EQ(g->in[kPlanes], 3);
  EXPECT_EQ(g->out[kPlanes], 2);
  EXPECT_EQ(g->FilterTaps(), 2 * 2 * 3);

  ConvolutionDescriptorSettings depthwise = Convolution();
  depthwise.depthwise = 1;
  g = ReadConvolution(Tensor({1, 5, 5, 3}), Filter({3, 3, 3, 2}), depthwise,
                      Tensor({1, 3, 3, 6}));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->depthwise);
  EXPECT_EQ(g->filter_out, 2);
}

TEST(ConvolutionLaunch, FusedLaunchReadsItsBiasAndActivation) {
  TestLaunch launch;
  launch.Describe(Tensor({1, 4, 4, 2}))
      .Describe(Filter({3, 3, 2, 5}))
      .Describe(Convolution())
      .Describe(Tensor({1, 2, 2, 5}))
      .Describe(Tensor({5}))
      .Describe(Activation(ActivationMode::kRelu6))
      .Buffers(4);
  absl::StatusOr<convolution_launch::ConvolutionBiasActivationLaunch> read =
      convolution_launch::ReadConvolutionBiasActivationLaunch(launch.View());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->geometry.out_depth, 5);
  EXPECT_EQ(read->activation, ActivationMode::kRelu6);

  TestLaunch identity;
  identity.Describe(Tensor({1, 4, 4, 2}))
      .Describe(Filter({3, 3, 2, 5}))
      .Describe(Convolution())
      .Describe(Tensor({1, 2, 2, 5}))
      .Describe(Tensor({5}))
      .Buffers(4);
  read = convolution_launch::ReadConvolutionBiasActivationLaunch(identity.View());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_FALSE(read->activation.has_value());
}

TEST(ConvolutionLaunch, HostileLaunchesAreInvalidArguments) {
  const auto x = Tensor({2, 4, 5, 4});
  const auto filter = Filter({2, 3, 4, 6});
  const auto y = Tensor({2, 3, 3, 6});
  const auto conv = Convolution();
  ASSERT_TRUE(ReadConvolution(x, filter, conv, y).ok());
  auto expect_refused = [&](const TensorDescriptorSettings& x_settings,
                            const FilterDescriptorSettings& filter_settings,
                            const ConvolutionDescriptorSettings& conv_settings,
                            const TensorDescriptorSettings& y_settings, const char* what) {
    EXPECT_EQ(CodeOf(ReadConvolution(x_settings, filter_settings, conv_settings, y_settings)),
              absl::StatusCode::kInvalidArgument)
        << what;
  };
  EXPECT_EQ(CodeOf(ReadConvolution(x, filter, conv, y, /*buffers=*/2)),
            absl::StatusCode::kInvalidArgument);
  {
    TestLaunch wrong_kind;
    wrong_kind.Describe(x).Describe(x).Describe(conv).Describe(y).Buffers(3);
    EXPECT_EQ(CodeOf(convolution_launch::ReadConvolutionLaunch(wrong_kind.View())),
              absl::StatusCode::kInvalidArgument);
    TestLaunch missing;
    missing.Describe(x).Describe(filter).Describe(conv).Buffers(3);
    EXPECT_EQ(CodeOf(convolution_launch::ReadConvolutionLaunch(missing.View())),
              absl::StatusCode::kInvalidArgument);
  }
  ConvolutionDescriptorSettings c = conv;
  c.spatial_dims = 4;
  expect_refused(x, filter, c, y, "4 spatial dimensions");
  expect_refused(x, Filter({2, 3, 4, 6, 1}), conv, y, "a rank-5 filter");
  expect_refused(Tensor({2, 4, 5, 4}, DType::kFloat64), filter, conv, y, "dtypes differ");
  c = conv;
  c.data_format = static_cast<DataFormat>(7);
  expect_refused(x, filter, c, y, "an unknown data format");
  c = conv;
  c.depthwise = 1;
  c.group_count = 2;
  expect_refused(x, filter, c, y, "a grouped depthwise convolution");
  expect_refused(Tensor({2, -4, 5, 4}), filter, conv, y, "a negative extent");
  expect_refused(Tensor({2, 4, 5, int64_t{1} << 47}), filter, conv, y, "beyond 2^48 elements");
  expect_refused(Tensor({1, kInt32Max + int64_t{1}, 1, 1}), Filter({1, 1, 1, 1}), conv,
                 Tensor({1, kInt32Max + int64_t{1}, 1, 1}), "a spatial extent beyond int32");
  expect_refused(x, filter, conv, Tensor({3, 3, 3, 6}), "batches differ");
  c = conv;
  c.stride_h = 0;
  expect_refused(x, filter, c, y, "a zero stride");
  c = conv;
  c.dilation_w = -1;
  expect_refused(x, filter, c, y, "a negative dilation");
  c = conv;
  c.pad_left = -1;
  expect_refused(x, filter, c, y, "a negative padding");
  c = conv;
  c.group_count = 0;
  expect_refused(x, filter, c, y, "no groups");
  c = conv;
  c.group_count = 3;
  expect_refused(x, filter, c, y, "groups that do not make the input depth");
  expect_refused(x, Filter({2, 3, 2, 6}), Convolution(), y, "a filter depth * groups mismatch");
  c = conv;
  c.group_count = 2;
  expect_refused(x, Filter({2, 3, 2, 5}), c, Tensor({2, 3, 3, 5}),
                 "an output depth not divisible by the groups");
  expect_refused(x, filter, conv, Tensor({2, 3, 4, 6}), "an output the window does not give");
  c = conv;
  c.stride_d = 2;
  expect_refused(x, filter, c, y, "a 2-D convolution with a depth window");
  // Depths whose product passes int64: filter_in_depth * groups.
  c = conv;
  c.group_count = kInt32Max;
  expect_refused(Tensor({0, 1, 1, 1}), Filter({1, 1, int64_t{1} << 40, 0}), c,
                 Tensor({0, 1, 1, 0}), "filter depth times groups beyond int64");
}

TEST(ConvolutionLaunch, FusedLaunchRefusesAMismatchedBiasOrAnUnknownActivation) {
  auto read = [](const TensorDescriptorSettings& bias,
                 std::optional<ActivationMode> activation) {
    TestLaunch launch;
    launch.Describe(Tensor({1, 4, 4, 2}))
        .Describe(Filter({3, 3, 2, 5}))
        .Describe(Convolution())
        .Describe(Tensor({1, 2, 2, 5}))
        .Describe(bias)
        .Buffers(4);
    if (activation.has_value()) launch.Describe(Activation(*activation));
    return convolution_launch::ReadConvolutionBiasActivationLaunch(launch.View()).status();
  };
  EXPECT_TRUE(read(Tensor({5}), ActivationMode::kTanh).ok());
  EXPECT_EQ(read(Tensor({4}), std::nullopt).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(read(Tensor({5}, DType::kFloat16), std::nullopt).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(read(Tensor({1, 5}), std::nullopt).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(read(Tensor({5}), ActivationMode::kElu).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConvolutionLaunch, EmptyTensorsWithExtentsAtTheLimitsKeepCheckedCounts) {
  // A batch of 0 makes every count 0 while the spatial extents multiply to 2^93: the geometry
  // carries the checked counts, which the kernels use instead of the products.
  ConvolutionDescriptorSettings conv = Convolution(3);
  absl::StatusOr<ConvolutionGeometry> g = ReadConvolution(
      Tensor({0, kInt32Max, kInt32Max, kInt32Max, 1}), Filter({1, 1, 1, 1, 1}), conv,
      Tensor({0, kInt32Max, kInt32Max, kInt32Max, 1}));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->input_elements, 0);
  EXPECT_EQ(g->output_elements, 0);
  EXPECT_EQ(g->filter_elements, 1);
  // Extents at int64's maximum are refused before any product is formed.
  EXPECT_EQ(CodeOf(ReadConvolution(Tensor({kInt64Max, 1, 1, 1}), Filter({1, 1, 1, 1}),
                                   Convolution(), Tensor({kInt64Max, 1, 1, 1}))),
            absl::StatusCode::kInvalidArgument);
  ConvolutionDescriptorSettings dilated = Convolution();
  dilated.dilation_h = std::numeric_limits<int32_t>::max();
  dilated.stride_h = std::numeric_limits<int32_t>::max();
  // (filter - 1) * dilation stays far from overflow: filter and dilation are int32 at most.
  EXPECT_EQ(CodeOf(ReadConvolution(Tensor({1, 2, 2, 1}), Filter({kInt32Max, 1, 1, 1}), dilated,
                                   Tensor({1, 1, 2, 1}))),
            absl::StatusCode::kInvalidArgument);
}

// --- Matmul ------------------------------------------------------------------------------------

MatmulDescriptorSettings Matmul(bool transpose_a = false, bool transpose_b = false,
                                DType dtype = DType::kFloat32) {
  MatmulDescriptorSettings settings;
  settings.transpose_a = transpose_a;
  settings.transpose_b = transpose_b;
  settings.dtype = dtype;
  return settings;
}

absl::StatusOr<matmul_launch::MatmulGeometry> ReadMatmul(const MatmulDescriptorSettings& matmul,
                                                         const TensorDescriptorSettings& a,
                                                         const TensorDescriptorSettings& b,
                                                         const TensorDescriptorSettings& c,
                                                         size_t buffers = 3) {
  TestLaunch launch;
  launch.Describe(matmul).Describe(a).Describe(b).Describe(c).Buffers(buffers);
  return matmul_launch::ReadMatmulLaunch(launch.View());
}

TEST(MatmulLaunch, BroadcastBatchesAreRightAlignedAndIndexed) {
  absl::StatusOr<matmul_launch::MatmulGeometry> g =
      ReadMatmul(Matmul(), Tensor({2, 1, 3, 4}), Tensor({5, 4, 6}), Tensor({2, 5, 3, 6}));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->m, 3);
  EXPECT_EQ(g->k, 4);
  EXPECT_EQ(g->n, 6);
  EXPECT_EQ(g->batch_rank, 2);
  EXPECT_EQ(g->a_batch[0], 2);
  EXPECT_EQ(g->a_batch[1], 1);
  EXPECT_EQ(g->b_batch[0], 1);
  EXPECT_EQ(g->b_batch[1], 5);
  EXPECT_EQ(g->a_matrices, 2);
  EXPECT_EQ(g->b_matrices, 5);
  EXPECT_EQ(g->batches, 10);
  EXPECT_EQ(g->a_elements, 2 * 3 * 4);
  EXPECT_EQ(g->b_elements, 5 * 4 * 6);
  EXPECT_EQ(g->c_elements, 10 * 3 * 6);
  EXPECT_FALSE(g->UniformBatches());
  // c matrix 7 is batch position (1, 2): a matrix 1, b matrix 2.
  EXPECT_EQ(g->OperandsOf(7).a, 1);
  EXPECT_EQ(g->OperandsOf(7).b, 2);

  g = ReadMatmul(Matmul(true, true), Tensor({4, 3}), Tensor({6, 4}), Tensor({3, 6}));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->m, 3);
  EXPECT_EQ(g->k, 4);
  EXPECT_EQ(g->n, 6);
  EXPECT_TRUE(g->UniformBatches());
}

TEST(MatmulLaunch, HostileLaunchesAreInvalidArguments) {
  const auto a = Tensor({2, 3, 4});
  const auto b = Tensor({2, 4, 5});
  const auto c = Tensor({2, 3, 5});
  ASSERT_TRUE(ReadMatmul(Matmul(), a, b, c).ok());
  auto expect_refused = [&](absl::StatusOr<matmul_launch::MatmulGeometry> result,
                            const char* what) {
    EXPECT_EQ(CodeOf(result), absl::StatusCode::kInvalidArgument) << what;
  };
  expect_refused(ReadMatmul(Matmul(), a, b, c, /*buffers=*/4), "four buffers");
  expect_refused(ReadMatmul(Matmul(), Tensor({4}), b, c), "a rank-1 operand");
  expect_refused(ReadMatmul(Matmul(false, false, DType::kFloat64), a, b, c), "dtypes differ");
  TensorDescriptorSettings too_deep = Tensor({1, 1, 1, 1, 1, 1, 1, 3});
  too_deep.rank = kMaxRank + 1;
  expect_refused(ReadMatmul(Matmul(), too_deep, b, c), "a rank beyond kMaxRank");
  expect_refused(ReadMatmul(Matmul(), a, Tensor({2, 5, 5}), c), "inner dimensions differ");
  expect_refused(ReadMatmul(Matmul(), a, b, Tensor({2, 3, 6})), "a wrong result shape");
  expect_refused(ReadMatmul(Matmul(), a, Tensor({3, 4, 5}), Tensor({3, 3, 5})),
                 "batches that do not broadcast");
  expect_refused(ReadMatmul(Matmul(), a, b, Tensor({4, 3, 5})), "a wrong result batch");
  expect_refused(ReadMatmul(Matmul(), Tensor({int64_t{1} << 30, int64_t{1} << 30}),
                            Tensor({int64_t{1} << 30, 1}), Tensor({int64_t{1} << 30, 1})),
                 "an operand beyond 2^48 elements");
  expect_refused(ReadMatmul(Matmul(), Tensor({kInt64Max, 1}), Tensor({1, 1}),
                            Tensor({kInt64Max, 1})),
                 "an extent at int64's maximum");
}

TEST(MatmulLaunch, EmptyOperandsWithExtentsAtTheLimitsKeepCheckedCounts) {
  // a is [2^40, 1, k = 0, m = 2^48] transposed: a_matrices * m alone would be 2^88, but every
  // count is 0 and the geometry carries the checked counts.
  const int64_t big_batch = int64_t{1} << 40, big_m = int64_t{1} << 48;
  absl::StatusOr<matmul_launch::MatmulGeometry> g =
      ReadMatmul(Matmul(/*transpose_a=*/true), Tensor({big_batch, 1, 0, big_m}),
                 Tensor({1, 0, 0, 3}), Tensor({big_batch, 0, big_m, 3}));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->a_elements, 0);
  EXPECT_EQ(g->b_elements, 0);
  EXPECT_EQ(g->c_elements, 0);
  EXPECT_EQ(g->batches, 0);
}

TEST(MatmulLaunch, FusedLaunchChecksTheBiasAgainstTheColumns) {
  auto read_fused = [](const TensorDescriptorSettings& bias,
                       std::optional<ActivationMode> activation) {
    TestLaunch launch;
    launch.Describe(Matmul())
        .Describe(Tensor({3, 4}))
        .Describe(Tensor({4, 5}))
        .Describe(Tensor({3, 5}))
        .Describe(bias)
        .Buffers(4);
    if (activation.has_value()) launch.Describe(Activation(*activation));
    return matmul_launch::ReadMatmulBiasActivationLaunch(launch.View());
  };
  absl::StatusOr<matmul_launch::MatmulBiasActivationLaunch> read =
      read_fused(Tensor({5}), ActivationMode::kSigmoid);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->activation, ActivationMode::kSigmoid);
  EXPECT_EQ(CodeOf(read_fused(Tensor({3}), std::nullopt)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(read_fused(Tensor({5}), ActivationMode::kLeakyRelu)),
            absl::StatusCode::kInvalidArgument);
}

// --- Bias --------------------------------------------------------------------------------------

absl::StatusOr<bias_launch::BiasGeometry> ReadBiasAdd(const TensorDescriptorSettings& value,
                                                      const TensorDescriptorSettings& bias,
                                                      int32_t data_format) {
  convolution::BiasParams params;
  params.data_format = data_format;
  TestLaunch launch;
  launch.Describe(value).Describe(bias).Param(params).Buffers(3);
  return bias_launch::ReadBiasAddLaunch(launch.View());
}

constexpr int32_t kNhwc = static_cast<int32_t>(DataFormat::kNHWC);
constexpr int32_t kNchw = static_cast<int32_t>(DataFormat::kNCHW);

TEST(BiasLaunch, TheValueIsViewedAroundItsChannelDimension) {
  absl::StatusOr<bias_launch::BiasGeometry> g =
      ReadBiasAdd(Tensor({2, 3, 4, 5}), Tensor({3}), kNchw);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->outer, 2);
  EXPECT_EQ(g->channels, 3);
  EXPECT_EQ(g->inner, 20);
  g = ReadBiasAdd(Tensor({2, 3, 4, 5}), Tensor({5}), kNhwc);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->outer, 24);
  EXPECT_EQ(g->channels, 5);
  EXPECT_EQ(g->inner, 1);

  convolution::BiasParams params;
  TestLaunch gradient;
  gradient.Describe(Tensor({6, 2})).Describe(Tensor({2})).Param(params).Buffers(2);
  g = bias_launch::ReadBiasAddGradLaunch(gradient.View());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->Elements(), 12);
}

TEST(BiasLaunch, HostileLaunchesAreInvalidArguments) {
  EXPECT_EQ(CodeOf(ReadBiasAdd(Tensor({4}), Tensor({4}), kNhwc)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(ReadBiasAdd(Tensor({2, 4}), Tensor({4}, DType::kFloat64), kNhwc)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(ReadBiasAdd(Tensor({2, 4}), Tensor({4}), 7)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(ReadBiasAdd(Tensor({2, 4}), Tensor({2}), kNhwc)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(ReadBiasAdd(Tensor({2, 4}), Tensor({1, 4}), kNhwc)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(ReadBiasAdd(Tensor({kInt64Max, 4}), Tensor({4}), kNhwc)),
            absl::StatusCode::kInvalidArgument);
  TestLaunch no_params;
  no_params.Describe(Tensor({2, 4})).Describe(Tensor({4})).Buffers(3);
  EXPECT_EQ(CodeOf(bias_launch::ReadBiasAddLaunch(no_params.View())),
            absl::StatusCode::kInvalidArgument);
  convolution::BiasParams params;
  TestLaunch three_buffers;
  three_buffers.Describe(Tensor({2, 4})).Describe(Tensor({4})).Param(params).Buffers(3);
  EXPECT_EQ(CodeOf(bias_launch::ReadBiasAddGradLaunch(three_buffers.View())),
            absl::StatusCode::kInvalidArgument);
}

TEST(BiasLaunch, AnEmptyValueWithExtentsAtTheLimitsIsZeroByChannelsByZero) {
  // The spatial extents of an empty NCHW value multiply to 2^80.
  const int64_t big = int64_t{1} << 40;
  absl::StatusOr<bias_launch::BiasGeometry> g =
      ReadBiasAdd(Tensor({0, 5, big, big}), Tensor({5}), kNchw);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->outer, 0);
  EXPECT_EQ(g->channels, 5);
  EXPECT_EQ(g->inner, 0);
  EXPECT_EQ(g->Elements(), 0);
}

// --- Rearrange ---------------------------------------------------------------------------------

convolution::RearrangeParams Rearrange(std::initializer_list<int64_t> x_strides) {
  convolution::RearrangeParams params;
  int k = 0;
  for (int64_t stride : x_strides) params.x_strides[k++] = stride;
  return params;
}

absl::StatusOr<rearrange_launch::Rearrangement> ReadRearrange(
    const TensorDescriptorSettings& x, const TensorDescriptorSettings& y,
    const convolution::RearrangeParams& params) {
  TestLaunch launch;
  launch.Describe(x).Describe(y).Param(params).Buffers(2);
  return rearrange_launch::ReadRearrangeLaunch(launch.View());
}

TEST(RearrangeLaunch, ATransposeWithASummedDimensionIsRead) {
  // y[j, i] = sum over s of x[i, s, j], x [2, 3, 4].
  convolution::RearrangeParams params = Rearrange({1, 12});
  params.summed_rank = 1;
  params.summed_sizes[0] = 3;
  params.summed_strides[0] = 4;
  absl::StatusOr<rearrange_launch::Rearrangement> r =
      ReadRearrange(Tensor({2, 3, 4}), Tensor({4, 2}), params);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rank, 2);
  EXPECT_EQ(r->x_elements, 24);
  EXPECT_EQ(r->y_elements, 8);
  EXPECT_EQ(r->summed_count, 3);
  EXPECT_EQ(r->x_strides[1], 12);
  EXPECT_EQ(r->dtype, DType::kFloat32);
}

TEST(RearrangeLaunch, HostileLaunchesAreInvalidArguments) {
  const auto x = Tensor({2, 3});
  const auto y = Tensor({3, 2});
  ASSERT_TRUE(ReadRearrange(x, y, Rearrange({1, 3})).ok());
  auto expect_refused = [](absl::StatusOr<rearrange_launch::Rearrangement> result,
                           const char* what) {
    EXPECT_EQ(CodeOf(result), absl::StatusCode::kInvalidArgument) << what;
  };
  expect_refused(ReadRearrange(x, Tensor({3, 2}, DType::kFloat64), Rearrange({1, 3})),
                 "dtypes differ");
  expect_refused(ReadRearrange(x, y, Rearrange({1, 4})), "a read beyond x");
  expect_refused(ReadRearrange(x, y, Rearrange({-1, 3})), "a negative stride");
  convolution::RearrangeParams tie = Rearrange({1, 3});
  tie.ties[0] = 1;
  expect_refused(ReadRearrange(x, y, tie), "a tie to a later dimension");
  convolution::RearrangeParams beyond = Rearrange({1, 3, 1});
  expect_refused(ReadRearrange(x, y, beyond), "a stride beyond y's rank");
  convolution::RearrangeParams summed = Rearrange({0, 0});
  summed.summed_rank = 2;
  summed.summed_sizes[0] = 4;
  summed.summed_sizes[1] = 4;
  expect_refused(ReadRearrange(x, y, summed), "more summed terms than x's elements");
  summed.summed_rank = kMaxRank + 1;
  expect_refused(ReadRearrange(x, y, summed), "a summed rank beyond kMaxRank");
  // A stride at int64's maximum: (size - 1) * stride overflows and is refused, not wrapped.
  expect_refused(ReadRearrange(x, y, Rearrange({kInt64Max, 1})), "a stride at int64's limit");
  TestLaunch three_buffers;
  three_buffers.Describe(x).Describe(y).Param(Rearrange({1, 3})).Buffers(3);
  expect_refused(rearrange_launch::ReadRearrangeLaunch(three_buffers.View()), "three buffers");
}

// --- The plan cache ----------------------------------------------------------------------------

PlanKey KeyOf(int id) {
  PlanKey key;
  key.AddValue(id);
  return key;
}

TEST(PlanCache, KeepsTheMostRecentlyUsedPlansWithinItsBoundAndCountsThem) {
  PlanCache<int> cache(2);
  int made = 0;
  auto get = [&](int id) -> std::shared_ptr<int> {
    absl::StatusOr<std::shared_ptr<int>> plan =
        cache.FindOrCreate(KeyOf(id), [&]() -> absl::StatusOr<std::shared_ptr<int>> {
          ++made;
          return std::make_shared<int>(id);
        });
    return plan.ok() ? *plan : nullptr;
  };
  EXPECT_EQ(*get(1), 1);
  EXPECT_EQ(*get(2), 2);
  EXPECT_EQ(*get(1), 1);  // found: 1 is now the most recent
  EXPECT_EQ(*get(3), 3);  // evicts 2
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(*get(2), 2);  // made again
  EXPECT_EQ(made, 4);
  EXPECT_EQ(cache.created(), 4u);
  EXPECT_EQ(cache.reused(), 1u);
  cache.ResetCounts();
  EXPECT_EQ(cache.created(), 0u);
  cache.Clear();
  EXPECT_EQ(cache.size(), 0u);
}

TEST(PlanCache, AFailedMakeCachesNothingAndANullPlanIsRemembered) {
  PlanCache<int> cache(4);
  int attempts = 0;
  auto failing = [&]() -> absl::StatusOr<std::shared_ptr<int>> {
    ++attempts;
    return absl::UnimplementedError("no plan");
  };
  EXPECT_EQ(cache.FindOrCreate(KeyOf(1), failing).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(cache.FindOrCreate(KeyOf(1), failing).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(attempts, 2);
  auto not_served = [&]() -> absl::StatusOr<std::shared_ptr<int>> {
    ++attempts;
    return std::shared_ptr<int>();
  };
  EXPECT_EQ(*cache.FindOrCreate(KeyOf(2), not_served), nullptr);
  EXPECT_EQ(*cache.FindOrCreate(KeyOf(2), not_served), nullptr);
  EXPECT_EQ(attempts, 3);
  EXPECT_EQ(cache.created(), 0u);
  EXPECT_EQ(cache.reused(), 0u);
}

TEST(PlanCache, LaunchKeysDifferByKernelDescriptorsAndParameters) {
  TestLaunch first, second;
  first.Describe(Tensor({2, 3})).Param(int32_t{1});
  second.Describe(Tensor({2, 3})).Param(int32_t{2});
  EXPECT_EQ(PlanKey::ForLaunch(7, first.View()).bytes(),
            PlanKey::ForLaunch(7, first.View()).bytes());
  EXPECT_NE(PlanKey::ForLaunch(7, first.View()).bytes(),
            PlanKey::ForLaunch(8, first.View()).bytes());
  EXPECT_NE(PlanKey::ForLaunch(7, first.View()).bytes(),
            PlanKey::ForLaunch(7, second.View()).bytes());
  TestLaunch other_shape;
  other_shape.Describe(Tensor({3, 2})).Param(int32_t{1});
  EXPECT_NE(PlanKey::ForLaunch(7, first.View()).bytes(),
            PlanKey::ForLaunch(7, other_shape.View()).bytes());
}

}  // namespace
}  // namespace vgpu
