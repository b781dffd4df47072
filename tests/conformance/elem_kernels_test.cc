// The activation, element-wise, random, reduction and mirror-pad kernels of every executor of
// the conformance suite (executor_conformance.h), driven as a hostile or buggy client could
// drive them: descriptors and parameters that do not fit the buffers, overflowing sizes, unknown
// modes and out-of-range values fail with InvalidArgument (or follow TensorFlow's semantics),
// and no kernel writes outside its buffers (each buffer is followed by canary bytes that must
// survive).
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "plugin/kernels/mirror_pad_params.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/activation.h"
#include "plugin/protocol/kernels/data_movement.h"
#include "plugin/protocol/kernels/elementwise.h"
#include "plugin/protocol/kernels/random.h"
#include "plugin/protocol/kernels/reduction.h"
#include "plugin/protocol/launch_params.h"
#include "tests/conformance/executor_conformance.h"

namespace vgpu {
namespace {

using executor_test::GuardedBuffer;
using executor_test::TensorSettings;

class ElemKernelsTest : public executor_test::ExecutorConformanceTest {};
VGPU_CONFORMANCE_SUITE(ElemKernelsTest);

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

ActivationDescriptorSettings Activation(ActivationMode mode, double coef = 0) {
  ActivationDescriptorSettings settings;
  settings.mode = mode;
  settings.coef = coef;
  return settings;
}

TEST_P(ElemKernelsTest, LeakyReluUsesTheDescriptorCoefficient) {
  GuardedBuffer x = GuardedBuffer::Of<float>({-2, -1, 0, 3});
  GuardedBuffer y(4 * sizeof(float));
  ASSERT_TRUE(Launch().Describe(Activation(ActivationMode::kLeakyRelu, 0.25)).Tensor({4})
                  .Buffers({&x, &y}).Run(activation::kForward).ok());
  EXPECT_EQ(y.As<float>(), (std::vector<float>{-0.5f, -0.25f, 0, 3}));
}

TEST_P(ElemKernelsTest, ActivationsRefuseBadModesDtypesAndSmallBuffers) {
  GuardedBuffer x(4 * sizeof(float)), y(4 * sizeof(float)), small(3 * sizeof(float));
  EXPECT_EQ(Launch().Describe(Activation(static_cast<ActivationMode>(77))).Tensor({4})
                .Buffers({&x, &y}).Run(activation::kForward).code(),
            kInvalid);
  ActivationDescriptorSettings half = Activation(ActivationMode::kElu);
  half.dtype = DType::kFloat16;
  EXPECT_EQ(Launch().Describe(half).Tensor({4}).Buffers({&x, &y})
                .Run(activation::kForward).code(),
            kInvalid);
  EXPECT_EQ(Launch().Describe(Activation(ActivationMode::kSelu)).Tensor({4})
                .Buffers({&x, &small}).Run(activation::kForward).code(),
            kInvalid);
  EXPECT_EQ(Launch().Describe(Activation(ActivationMode::kSoftplus)).Tensor({4})
                .Buffers({&x, &small, &y}).Run(activation::kBackward).code(),
            kInvalid);
  TensorDescriptorSettings huge = TensorSettings({int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_EQ(Launch().Describe(Activation(ActivationMode::kSoftsign)).Describe(huge)
                .Buffers({&x, &y}).Run(activation::kForward).code(),
            kInvalid);
  TensorDescriptorSettings bad_rank = TensorSettings({4});
  bad_rank.rank = 1000;
  EXPECT_EQ(Launch().Describe(Activation(ActivationMode::kRelu)).Describe(bad_rank)
                .Buffers({&x, &y}).Run(activation::kForward).code(),
            kInvalid);
}

TEST_P(ElemKernelsTest, PredicatesWriteBoolsOfTheInputCount) {
  GuardedBuffer x = GuardedBuffer::Of<float>({1.0f, NAN, INFINITY, -INFINITY, 0.0f});
  GuardedBuffer y(5);
  OpTensorDescriptorSettings op;
  op.op = ElementwiseOp::kIsFinite;
  ASSERT_TRUE(Launch().Describe(op).Tensor({5}).Buffers({&x, &y})
                  .Run(elementwise::kUnary).ok());
  EXPECT_EQ(y.As<uint8_t>(), (std::vector<uint8_t>{1, 0, 0, 0, 1}));
  GuardedBuffer short_y(4);
  EXPECT_EQ(Launch().Describe(op).Tensor({5}).Buffers({&x, &short_y})
                .Run(elementwise::kUnary).code(),
            kInvalid);
  op.dtype = DType::kInt64;  // predicates take floating dtypes only
  EXPECT_EQ(Launch().Describe(op).Tensor({5}, DType::kInt64).Buffers({&x, &y})
                .Run(elementwise::kUnary).code(),
            kInvalid);
}

TEST_P(ElemKernelsTest, BoolBytesOtherThanZeroAndOneReadAsTrue) {
  // A tenant may write any byte into a bool tensor; kernels read nonzero as true (the bytes are
  // made canonical first), never as an out-of-range C++ bool.
  GuardedBuffer x = GuardedBuffer::Of<uint8_t>({0, 1, 2, 255});
  GuardedBuffer y(4);
  OpTensorDescriptorSettings logical_not;
  logical_not.op = ElementwiseOp::kLogicalNot;
  logical_not.dtype = DType::kBool;
  ASSERT_TRUE(Launch().Describe(logical_not).Tensor({4}, DType::kBool).Buffers({&x, &y})
                  .Run(elementwise::kUnary).ok());
  EXPECT_EQ(y.As<uint8_t>(), (std::vector<uint8_t>{1, 0, 0, 0}));

  GuardedBuffer garbage = GuardedBuffer::Of<uint8_t>({0, 7, 128, 1});
  GuardedBuffer as_float(4 * sizeof(float));
  ASSERT_TRUE(Launch().Tensor({4}, DType::kBool).Tensor({4}, DType::kFloat32)
                  .Param<uint8_t>(0).Buffers({&garbage, &as_float})
                  .Run(elementwise::kCast).ok());
  EXPECT_EQ(as_float.As<float>(), (std::vector<float>{0, 1, 1, 1}));
}

TEST_P(ElemKernelsTest, RangeRefusesBadShapesAndSmallBuffers) {
  GuardedBuffer out(5 * sizeof(int64_t));
  ASSERT_TRUE(Launch().Tensor({5}, DType::kInt64).Buffers({&out}).Param(uint64_t{3})
                  .Param(uint64_t{2}).Run(elementwise::kRange).ok());
  EXPECT_EQ(out.As<int64_t>(), (std::vector<int64_t>{3, 5, 7, 9, 11}));
  EXPECT_EQ(Launch().Tensor({6}, DType::kInt64).Buffers({&out}).Param(uint64_t{3})
                .Param(uint64_t{2}).Run(elementwise::kRange).code(),
            kInvalid);
  EXPECT_EQ(Launch().Tensor({5, 1}, DType::kInt64).Buffers({&out}).Param(uint64_t{3})
                .Param(uint64_t{2}).Run(elementwise::kRange).code(),
            kInvalid);
  EXPECT_EQ(Launch().Tensor({5}, DType::kBool).Buffers({&out}).Param(uint64_t{3})
                .Param(uint64_t{2}).Run(elementwise::kRange).code(),
            kInvalid);
  EXPECT_EQ(Launch().Tensor({5}, DType::kInt64).Buffers({&out}).Param(uint64_t{3})
                .Run(elementwise::kRange).code(),
            kInvalid);
}

random::PhiloxParams Philox(DType dtype, uint64_t count) {
  random::PhiloxParams params;
  params.dtype = dtype;
  params.count = count;
  params.key = 0x0123456789ABCDEFull;
  params.counter[0] = 7;
  params.counter[1] = 9;
  return params;
}

TEST_P(ElemKernelsTest, RandomKernelsRefuseHugeCountsSmallBuffersAndWrongDtypes) {
  GuardedBuffer out(16 * sizeof(float));
  for (KernelId id : {random::kUniform, random::kNormal, random::kTruncatedNormal}) {
    EXPECT_TRUE(Launch().Buffers({&out}).Param(Philox(DType::kFloat32, 16)).Run(id).ok());
    EXPECT_EQ(Launch().Buffers({&out}).Param(Philox(DType::kFloat32, 17)).Run(id).code(),
              kInvalid);
    EXPECT_EQ(Launch().Buffers({&out}).Param(Philox(DType::kFloat32, uint64_t{1} << 60))
                  .Run(id).code(),
              kInvalid);
    EXPECT_EQ(Launch().Buffers({&out}).Param(Philox(DType::kInt32, 4)).Run(id).code(),
              kInvalid);
  }
  EXPECT_EQ(Launch().Buffers({&out}).Param(Philox(DType::kFloat32, 4))
                .Run(random::kUniformFullInt).code(),
            kInvalid);
  random::UniformIntParams ints;
  ints.philox = Philox(DType::kInt32, 16);
  ints.minval = 5;
  ints.maxval = 5;  // an empty range would divide by zero
  EXPECT_EQ(Launch().Buffers({&out}).Param(ints).Run(random::kUniformInt).code(), kInvalid);
  ints.maxval = int64_t{1} << 40;  // beyond int32
  EXPECT_EQ(Launch().Buffers({&out}).Param(ints).Run(random::kUniformInt).code(), kInvalid);
  ints.minval = -3;
  ints.maxval = 4;
  ASSERT_TRUE(Launch().Buffers({&out}).Param(ints).Run(random::kUniformInt).ok());
  for (int32_t v : out.As<int32_t>()) EXPECT_TRUE(v >= -3 && v < 4) << v;
}

TEST_P(ElemKernelsTest, TruncatedNormalsStayWithinTwoAndGroupsAreIndependent) {
  GuardedBuffer all(1001 * sizeof(double)), tail(1 * sizeof(double));
  ASSERT_TRUE(Launch().Buffers({&all}).Param(Philox(DType::kFloat64, 1001))
                  .Run(random::kTruncatedNormal).ok());
  for (double v : all.As<double>()) EXPECT_LT(std::abs(v), 2.0);
  // Group 500 (the last one, elements 1000..) starts at block 500 * 128, whatever came before.
  random::PhiloxParams shifted = Philox(DType::kFloat64, 1);
  shifted.counter[0] += 500 * 128;  // no carry: the counter starts at 7
  ASSERT_TRUE(Launch().Buffers({&tail}).Param(shifted).Run(random::kTruncatedNormal).ok());
  EXPECT_EQ(tail.As<double>()[0], all.As<double>()[1000]);
}

TEST_P(ElemKernelsTest, MirrorPadMirrorsAndItsGradientFolds) {
  using data_movement::MirrorPadMode;
  GuardedBuffer x = GuardedBuffer::Of<float>({1, 2, 3});
  GuardedBuffer y(7 * sizeof(float));
  ASSERT_TRUE(Launch().Buffers({&x, &y})
                  .Params(MirrorPadParams(4, {3}, {2}, {2}, MirrorPadMode::kReflect))
                  .Run(data_movement::kMirrorPad).ok());
  EXPECT_EQ(y.As<float>(), (std::vector<float>{3, 2, 1, 2, 3, 2, 1}));
  ASSERT_TRUE(Launch().Buffers({&x, &y})
                  .Params(MirrorPadParams(4, {3}, {3}, {1}, MirrorPadMode::kSymmetric))
                  .Run(data_movement::kMirrorPad).ok());
  EXPECT_EQ(y.As<float>(), (std::vector<float>{3, 2, 1, 1, 2, 3, 3}));
  GuardedBuffer dy = GuardedBuffer::Of<float>({1, 10, 100, 1000, 10000, 100000, 1000000});
  GuardedBuffer dx(3 * sizeof(float));
  ASSERT_TRUE(Launch().Buffers({&dy, &dx})
                  .Params(MirrorPadParams(static_cast<uint32_t>(DType::kFloat32), {3}, {2}, {2},
                                       MirrorPadMode::kReflect))
                  .Run(data_movement::kMirrorPadGrad).ok());
  EXPECT_EQ(dx.As<float>(), (std::vector<float>{100 + 1000000, 10 + 1000 + 100000, 10000 + 1}));
}

TEST_P(ElemKernelsTest, MirrorPadRefusesPadsBeyondTheModeAndMalformedBlocks) {
  using data_movement::MirrorPadMode;
  GuardedBuffer x(3 * sizeof(float)), y(64 * sizeof(float));
  // The status code of a MirrorPad (or `kernel`) launch from `in` to `out` with `params`.
  auto pad = [&](GuardedBuffer& in, GuardedBuffer& out, const ParamBlock& params,
                 KernelId kernel = data_movement::kMirrorPad) {
    return Launch().Buffers({&in, &out}).Params(params).Run(kernel).code();
  };
  EXPECT_EQ(pad(x, y, MirrorPadParams(4, {3}, {3}, {0}, MirrorPadMode::kReflect)), kInvalid);
  EXPECT_EQ(pad(x, y, MirrorPadParams(4, {3}, {0}, {4}, MirrorPadMode::kSymmetric)), kInvalid);
  EXPECT_EQ(pad(x, y, MirrorPadParams(4, {3}, {-1}, {0}, MirrorPadMode::kSymmetric)), kInvalid);
  EXPECT_EQ(pad(x, y, MirrorPadParams(4, {-3}, {0}, {0}, MirrorPadMode::kSymmetric)), kInvalid);
  EXPECT_EQ(pad(x, y, MirrorPadParams(4, {3}, {1}, {1}, static_cast<MirrorPadMode>(9))), kInvalid);
  EXPECT_EQ(pad(x, y, MirrorPadParams(3, {3}, {1}, {1}, MirrorPadMode::kReflect)), kInvalid);
  EXPECT_EQ(pad(x, y, MirrorPadParams(4, {3, 1}, {1}, {1}, MirrorPadMode::kReflect)), kInvalid);
  GuardedBuffer small_y(4 * sizeof(float));
  EXPECT_EQ(pad(x, small_y, MirrorPadParams(4, {3}, {1}, {1}, MirrorPadMode::kReflect)), kInvalid);
  const int64_t big = int64_t{1} << 30;
  EXPECT_EQ(
      pad(x, y, MirrorPadParams(4, {big, big, big}, {1, 1, 1}, {1, 1, 1}, MirrorPadMode::kReflect)),
      kInvalid);
  EXPECT_EQ(pad(y, x,
                MirrorPadParams(static_cast<uint32_t>(DType::kBool), {3}, {1}, {1},
                             MirrorPadMode::kReflect),
                data_movement::kMirrorPadGrad),
            kInvalid);
}

TEST_P(ElemKernelsTest, ScanTopKAndInTopKRefuseMalformedLaunches) {
  GuardedBuffer x = GuardedBuffer::Of<float>({3, 1, 2, 5, 4, 0});
  GuardedBuffer y(6 * sizeof(float));
  ReduceDescriptorSettings sum;
  sum.op = ReduceOp::kSum;
  ASSERT_TRUE(Launch().Describe(sum).Tensor({1, 6, 1}).Buffers({&x, &y})
                  .Param(reduction::ScanParams{}).Run(reduction::kScan).ok());
  EXPECT_EQ(y.As<float>(), (std::vector<float>{3, 4, 6, 11, 15, 15}));
  ReduceDescriptorSettings max;
  max.op = ReduceOp::kMax;
  EXPECT_EQ(Launch().Describe(max).Tensor({1, 6, 1}).Buffers({&x, &y})
                .Param(reduction::ScanParams{}).Run(reduction::kScan).code(),
            kInvalid);
  EXPECT_EQ(Launch().Describe(sum).Tensor({1, 7, 1}).Buffers({&x, &y})
                .Param(reduction::ScanParams{}).Run(reduction::kScan).code(),
            kInvalid);

  GuardedBuffer values(2 * 2 * sizeof(float)), indices(2 * 2 * sizeof(int32_t));
  ASSERT_TRUE(Launch().Tensor({2, 3}).Tensor({2, 2}, DType::kInt32)
                  .Buffers({&x, &values, &indices}).Run(reduction::kTopK).ok());
  EXPECT_EQ(values.As<float>(), (std::vector<float>{3, 2, 5, 4}));
  EXPECT_EQ(indices.As<int32_t>(), (std::vector<int32_t>{0, 2, 0, 1}));
  EXPECT_EQ(Launch().Tensor({2, 3}).Tensor({2, 4}, DType::kInt32)  // k > cols
                .Buffers({&x, &values, &indices}).Run(reduction::kTopK).code(),
            kInvalid);
  EXPECT_EQ(Launch().Tensor({2, 3}).Tensor({2, 2})  // float indices
                .Buffers({&x, &values, &indices}).Run(reduction::kTopK).code(),
            kInvalid);

  GuardedBuffer targets = GuardedBuffer::Of<int32_t>({0, 7});  // 7 is out of range
  GuardedBuffer in_top(2);
  ASSERT_TRUE(Launch().Tensor({2, 3}).Tensor({2}, DType::kInt32)
                  .Buffers({&x, &targets, &in_top}).Param(int64_t{1}).Run(reduction::kInTopK).ok());
  EXPECT_EQ(in_top.As<uint8_t>(), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(Launch().Tensor({2, 3}).Tensor({3}, DType::kInt32)
                .Buffers({&x, &targets, &in_top}).Param(int64_t{1}).Run(reduction::kInTopK).code(),
            kInvalid);
}

TEST_P(ElemKernelsTest, ReductionsRefuseOverflowingLayouts) {
  GuardedBuffer x(64), y(64);
  ReduceDescriptorSettings sum;
  const int64_t big = int64_t{1} << 40;
  // An empty input whose kept dimensions multiply past 64 bits.
  EXPECT_EQ(Launch().Describe(sum).Tensor({0, big, 1, big}).Tensor({big, big})
                .Buffers({&x, &y}).Param(reduction::ReduceLayoutParams{1})
                .Run(reduction::kReduce).code(),
            kInvalid);
  EXPECT_EQ(Launch().Tensor({big, big}).Buffers({&x, &y}).Param(reduction::SoftmaxParams{})
                .Run(reduction::kSoftmax).code(),
            kInvalid);
}

}  // namespace
}  // namespace vgpu
