// The sparse and training kernels of every executor of the conformance suite
// (executor_conformance.h), driven as a hostile or buggy client could drive them: parameters that
// do not fit the buffers, overflowing sizes, unknown enums and out-of-range indices fail with
// InvalidArgument or follow TensorFlow's GPU semantics, and no kernel writes outside its buffers
// (each buffer is followed by canary bytes that must survive).
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "plugin/protocol/kernels/sparse.h"
#include "plugin/protocol/kernels/training.h"
#include "tests/conformance/executor_conformance.h"

namespace vgpu {
namespace {

using executor_test::GuardedBuffer;

class SparseKernelsTest : public executor_test::ExecutorConformanceTest {};
VGPU_CONFORMANCE_SUITE(SparseKernelsTest);

sparse::GatherParams GatherOf(int64_t rows, int64_t inner, int64_t indices) {
  sparse::GatherParams p;
  p.element_size = 4;
  p.index_dtype = DType::kInt32;
  p.gather_size = rows;
  p.inner = inner;
  p.indices_per_batch = indices;
  return p;
}

TEST_P(SparseKernelsTest, GatherZeroesRowsOfOutOfRangeIndices) {
  GuardedBuffer params = GuardedBuffer::Of<float>({1, 2, 3, 4, 5, 6, 7, 8});
  GuardedBuffer indices = GuardedBuffer::Of<int32_t>({3, 4, -1, 0});
  GuardedBuffer out(4 * 2 * sizeof(float));
  ASSERT_TRUE(Launch().Buffers({&params, &indices, &out}).Param(GatherOf(4, 2, 4))
                  .Run(sparse::kGather).ok());
  EXPECT_EQ(out.As<float>(), (std::vector<float>{7, 8, 0, 0, 0, 0, 1, 2}));
}

TEST_P(SparseKernelsTest, GatherRefusesBuffersSmallerThanItsParameters) {
  GuardedBuffer params(8 * sizeof(float));
  GuardedBuffer indices = GuardedBuffer::Of<int32_t>({0, 1, 2, 3});
  GuardedBuffer out(3 * 2 * sizeof(float));  // needs 4 rows
  EXPECT_EQ(Launch().Buffers({&params, &indices, &out}).Param(GatherOf(4, 2, 4))
                .Run(sparse::kGather).code(),
            absl::StatusCode::kInvalidArgument);
  GuardedBuffer small_params(7 * sizeof(float));
  GuardedBuffer big_out(8 * sizeof(float));
  EXPECT_EQ(Launch().Buffers({&small_params, &indices, &big_out}).Param(GatherOf(4, 2, 4))
                .Run(sparse::kGather).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(SparseKernelsTest, GatherRefusesOverflowingOrNegativeSizesAndBadTypes) {
  GuardedBuffer a(64), b(64), c(64);
  sparse::GatherParams huge = GatherOf(int64_t{1} << 40, int64_t{1} << 40, 1);
  EXPECT_EQ(Launch().Buffers({&a, &b, &c}).Param(huge).Run(sparse::kGather).code(),
            absl::StatusCode::kInvalidArgument);
  sparse::GatherParams negative = GatherOf(-4, 2, 1);
  EXPECT_EQ(Launch().Buffers({&a, &b, &c}).Param(negative).Run(sparse::kGather).code(),
            absl::StatusCode::kInvalidArgument);
  sparse::GatherParams bad_size = GatherOf(2, 2, 1);
  bad_size.element_size = 3;
  EXPECT_EQ(Launch().Buffers({&a, &b, &c}).Param(bad_size).Run(sparse::kGather).code(),
            absl::StatusCode::kInvalidArgument);
  sparse::GatherParams bad_index = GatherOf(2, 2, 1);
  bad_index.index_dtype = DType::kFloat32;
  EXPECT_EQ(Launch().Buffers({&a, &b, &c}).Param(bad_index).Run(sparse::kGather).code(),
            absl::StatusCode::kInvalidArgument);
  // A parameter block cut short.
  EXPECT_EQ(Launch().Buffers({&a, &b, &c}).Param(uint32_t{4}).Run(sparse::kGather).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(SparseKernelsTest, GatherNdZeroesOutOfRangeTuplesAndRefusesBadDepths) {
  GuardedBuffer params = GuardedBuffer::Of<float>({1, 2, 3, 4, 5, 6});  // [2, 3]
  GuardedBuffer indices = GuardedBuffer::Of<int64_t>({1, 2, 2, 0, 0, -1});
  GuardedBuffer out(3 * sizeof(float));
  sparse::GatherNdParams p;
  p.element_size = 4;
  p.index_dtype = DType::kInt64;
  p.num_slices = 3;
  p.slice_size = 1;
  p.index_depth = 2;
  ASSERT_TRUE(Launch().Buffers({&params, &indices, &out}).Param(p)
                  .ParamArray<int64_t>({2, 3}).Run(sparse::kGatherNd).ok());
  EXPECT_EQ(out.As<float>(), (std::vector<float>{6, 0, 0}));
  // The prefix array must have index_depth entries, and the depth is at most 7.
  EXPECT_EQ(Launch().Buffers({&params, &indices, &out}).Param(p).ParamArray<int64_t>({6})
                .Run(sparse::kGatherNd).code(),
            absl::StatusCode::kInvalidArgument);
  p.index_depth = 9;
  EXPECT_EQ(Launch().Buffers({&params, &indices, &out}).Param(p)
                .ParamArray<int64_t>({1, 1, 1, 1, 1, 1, 1, 1, 1}).Run(sparse::kGatherNd).code(),
            absl::StatusCode::kInvalidArgument);
}

sparse::ScatterParams ScatterOf(DType dtype, sparse::ScatterOp op, int64_t rows, int64_t inner,
                                int64_t indices) {
  sparse::ScatterParams p;
  p.dtype = dtype;
  p.index_dtype = DType::kInt32;
  p.op = op;
  p.rows = rows;
  p.inner = inner;
  p.num_indices = indices;
  return p;
}

TEST_P(SparseKernelsTest, ScatterSkipsOutOfRangeIndicesAndAppliesDuplicatesInOrder) {
  GuardedBuffer params = GuardedBuffer::Of<float>({10, 10, 20, 20});
  GuardedBuffer indices = GuardedBuffer::Of<int32_t>({1, 2, 1, -3});
  GuardedBuffer updates = GuardedBuffer::Of<float>({1, 2, 5, 5, 3, 4, 9, 9});
  ASSERT_TRUE(Launch().Buffers({&params, &indices, &updates})
                  .Param(ScatterOf(DType::kFloat32, sparse::ScatterOp::kSub, 2, 2, 4))
                  .Run(sparse::kScatter).ok());
  EXPECT_EQ(params.As<float>(), (std::vector<float>{10, 10, 16, 14}));
}

TEST_P(SparseKernelsTest, ScatterRefusesIntegerDivisionByZeroAndWrapsMinimumByMinusOne) {
  GuardedBuffer params =
      GuardedBuffer::Of<int32_t>({std::numeric_limits<int32_t>::min(), 7});
  GuardedBuffer indices = GuardedBuffer::Of<int32_t>({0, 1});
  GuardedBuffer zero = GuardedBuffer::Of<int32_t>({-1, 0});
  const auto divide = ScatterOf(DType::kInt32, sparse::ScatterOp::kDiv, 2, 1, 2);
  EXPECT_EQ(Launch().Buffers({&params, &indices, &zero}).Param(divide)
                .Run(sparse::kScatter).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(params.As<int32_t>()[1], 7);  // nothing applied
  GuardedBuffer minus_one = GuardedBuffer::Of<int32_t>({-1, -1});
  ASSERT_TRUE(Launch().Buffers({&params, &indices, &minus_one}).Param(divide)
                  .Run(sparse::kScatter).ok());
  EXPECT_EQ(params.As<int32_t>(),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -7}));
}

TEST_P(SparseKernelsTest, ScatterRefusesUnknownOpsAndBoolArithmetic) {
  GuardedBuffer params(4), indices(4), updates(4);
  EXPECT_EQ(Launch().Buffers({&params, &indices, &updates})
                .Param(ScatterOf(DType::kFloat32, static_cast<sparse::ScatterOp>(42), 1, 1, 1))
                .Run(sparse::kScatter).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Launch().Buffers({&params, &indices, &updates})
                .Param(ScatterOf(DType::kBool, sparse::ScatterOp::kMul, 1, 1, 1))
                .Run(sparse::kScatter).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(SparseKernelsTest, ScatterNdZeroesItsOutputAndSkipsOutOfRangeTuples) {
  GuardedBuffer output = GuardedBuffer::Of<float>({9, 9, 9, 9, 9, 9});  // [3, 2]
  GuardedBuffer indices = GuardedBuffer::Of<int32_t>({2, 0, 5, 2});
  GuardedBuffer updates = GuardedBuffer::Of<float>({1, 1, 7, 7, 2, 2, 3, 3});
  sparse::ScatterNdParams p;
  p.op = sparse::ScatterOp::kAdd;
  p.index_depth = 1;
  p.num_updates = 4;
  p.slice_size = 2;
  p.zero_output = 1;
  ASSERT_TRUE(Launch().Buffers({&output, &indices, &updates}).Param(p)
                  .ParamArray<int64_t>({3}).Run(sparse::kScatterNd).ok());
  EXPECT_EQ(output.As<float>(), (std::vector<float>{7, 7, 0, 0, 4, 4}));
  p.index_depth = 0;
  EXPECT_EQ(Launch().Buffers({&output, &indices, &updates}).Param(p).ParamArray<int64_t>({})
                .Run(sparse::kScatterNd).code(),
            absl::StatusCode::kInvalidArgument);
}

// The mean over rows of one element (inner 1) of `num_ids` ids into `num_segments` segments.
sparse::SegmentReduceParams SegmentMeanOf(DType dtype, DType index_dtype, int64_t num_ids,
                                          int64_t num_segments) {
  sparse::SegmentReduceParams p;
  p.dtype = dtype;
  p.index_dtype = index_dtype;
  p.op = sparse::SegmentOp::kMean;
  p.num_ids = num_ids;
  p.inner = 1;
  p.num_segments = num_segments;
  return p;
}

TEST_P(SparseKernelsTest, SegmentReduceDropsOutOfRangeIdsAndFillsEmptySegments) {
  GuardedBuffer data = GuardedBuffer::Of<float>({1, 2, 3, 4, 5});
  GuardedBuffer ids = GuardedBuffer::Of<int64_t>({0, 2, 0, -1, 3});
  GuardedBuffer output(3 * sizeof(float));
  sparse::SegmentReduceParams p = SegmentMeanOf(DType::kFloat32, DType::kInt64, 5, 3);
  ASSERT_TRUE(Launch().Buffers({&data, &ids, &output}).Param(p)
                  .Run(sparse::kSegmentReduce).ok());
  EXPECT_EQ(output.As<float>(), (std::vector<float>{2, 0, 2}));
  p.op = static_cast<sparse::SegmentOp>(17);
  EXPECT_EQ(Launch().Buffers({&data, &ids, &output}).Param(p)
                .Run(sparse::kSegmentReduce).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(SparseKernelsTest, SegmentMeanOfUint8WhoseRowCountWrapsToZeroDoesNotDivideByZero) {
  // 256 rows in segment 0: the count held in uint8 is 0. The segment keeps its (wrapped) sum, as
  // on the CUDA executor; an integer division by zero would stop the executor's process.
  GuardedBuffer data = GuardedBuffer::Of<uint8_t>(std::vector<uint8_t>(257, 1));
  std::vector<int32_t> segment_ids(257, 0);
  segment_ids[256] = 1;
  GuardedBuffer ids = GuardedBuffer::Of<int32_t>(segment_ids);
  GuardedBuffer output(2);
  const sparse::SegmentReduceParams p = SegmentMeanOf(DType::kUInt8, DType::kInt32, 257, 2);
  ASSERT_TRUE(Launch().Buffers({&data, &ids, &output}).Param(p)
                  .Run(sparse::kSegmentReduce).ok());
  EXPECT_EQ(output.As<uint8_t>(), (std::vector<uint8_t>{0, 1}));
}

TEST_P(SparseKernelsTest, WhereWritesNoMoreCoordinatesThanItWasGivenRoomFor) {
  GuardedBuffer input = GuardedBuffer::Of<uint8_t>({0, 1, 1, 0, 1, 1});  // bool [2, 3]
  sparse::WhereParams p;
  p.rank = 2;
  GuardedBuffer count(sizeof(int64_t));
  ASSERT_TRUE(Launch().Buffers({&input, &count}).Param(p).ParamArray<int64_t>({2, 3})
                  .Run(sparse::kCountTrue).ok());
  EXPECT_EQ(count.As<int64_t>()[0], 4);
  p.num_true = 4;
  GuardedBuffer coordinates(4 * 2 * sizeof(int64_t));
  ASSERT_TRUE(Launch().Buffers({&input, &coordinates}).Param(p).ParamArray<int64_t>({2, 3})
                  .Run(sparse::kWhere).ok());
  EXPECT_EQ(coordinates.As<int64_t>(), (std::vector<int64_t>{0, 1, 0, 2, 1, 1, 1, 2}));
  p.num_true = 2;  // fewer than the input holds: refused, nothing written past the room for 2
  GuardedBuffer small(2 * 2 * sizeof(int64_t));
  EXPECT_EQ(Launch().Buffers({&input, &small}).Param(p).ParamArray<int64_t>({2, 3})
                .Run(sparse::kWhere).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(SparseKernelsTest, DenseOptimizerRefusesOverflowingCountsAndMissingBuffers) {
  training::UpdateParams p;
  p.count = uint64_t{1} << 62;
  GuardedBuffer var(16), alpha(4), delta(16);
  EXPECT_EQ(Launch().Buffers({&var, &alpha, &delta}).Param(p)
                .Run(training::kApplyGradientDescent).code(),
            absl::StatusCode::kInvalidArgument);
  p.count = 4;
  EXPECT_EQ(Launch().Buffers({&var, &alpha}).Param(p)
                .Run(training::kApplyGradientDescent).code(),
            absl::StatusCode::kInvalidArgument);
  GuardedBuffer short_delta(12);
  EXPECT_EQ(Launch().Buffers({&var, &alpha, &short_delta}).Param(p)
                .Run(training::kApplyGradientDescent).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(SparseKernelsTest, SparseOptimizerSkipsOutOfRangeIndicesAndChecksItsBuffers) {
  GuardedBuffer var = GuardedBuffer::Of<float>({1, 1, 2, 2});
  GuardedBuffer accum = GuardedBuffer::Of<float>({0, 0, 0, 0});
  GuardedBuffer lr = GuardedBuffer::Of<float>({0.5f});
  GuardedBuffer grad = GuardedBuffer::Of<float>({1, 1, 8, 8, 2, 2});
  GuardedBuffer indices = GuardedBuffer::Of<int32_t>({1, 2, 1});
  GuardedBuffer momentum = GuardedBuffer::Of<float>({0.0f});
  training::SparseUpdateParams p;
  p.rows = 2;
  p.inner = 2;
  p.num_indices = 3;
  // KerasMomentum without momentum: accum = -lr * g; var += accum, row 1 twice, index 2 skipped.
  ASSERT_TRUE(Launch().Buffers({&var, &accum, &lr, &grad, &indices, &momentum}).Param(p)
                  .Run(training::kSparseApplyKerasMomentum).ok());
  EXPECT_EQ(var.As<float>(), (std::vector<float>{1, 1, 0.5f, 0.5f}));
  p.num_indices = 4;  // more indices than the buffers hold
  EXPECT_EQ(Launch().Buffers({&var, &accum, &lr, &grad, &indices, &momentum}).Param(p)
                .Run(training::kSparseApplyKerasMomentum).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vgpu
