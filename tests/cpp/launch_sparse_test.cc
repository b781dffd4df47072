// The sparse family's launch readers, index helpers and element rules
// (backend/launch/sparse_launch.h), without an executor: which parameter blocks they refuse,
// with which message, and what both executors' loops compute with them.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "param_only_launch.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/backend/launch/sparse_launch.h"
#include "plugin/protocol/kernels/sparse.h"
#include "plugin/protocol/launch_params.h"

namespace vgpu {
namespace {

using sparse::ScatterOp;
using sparse::SegmentOp;

TEST(SparseLaunch, GatherRefusesAnElementSizeAndAddressesRowsByBatch) {
  sparse::GatherParams p;
  p.element_size = 3;
  EXPECT_EQ(ParamOnlyLaunch::Read(sparse_launch::ReadGatherLaunch, 3, p).status().message(),
            "element size 3 is not 1, 2, 4 or 8");

  p.element_size = 2;
  p.batch = 2;
  p.outer = 3;
  p.gather_size = 5;
  p.inner = 4;
  p.indices_per_batch = 6;
  absl::StatusOr<sparse_launch::GatherLaunch> gather =
      ParamOnlyLaunch::Read(sparse_launch::ReadGatherLaunch, 3, p);
  ASSERT_TRUE(gather.ok()) << gather.status();
  EXPECT_EQ(gather->params_count, 2 * 3 * 5 * 4);
  EXPECT_EQ(gather->indices_count, 12);
  EXPECT_EQ(gather->out_count, 2 * 3 * 6 * 4);
  const sparse_launch::GatherGeometry& g = gather->g;
  // Output row 25: batch 1, outer 1, index position 1 of batch 1.
  EXPECT_EQ(sparse_launch::GatherIndexPosition(g, 25), 7);
  EXPECT_EQ(sparse_launch::GatherSourceRow(g, 25, 4), (1 * 3 + 1) * 5 + 4);
  EXPECT_EQ(sparse_launch::GatherSourceRow(g, 25, 5), -1);
  EXPECT_EQ(sparse_launch::GatherSourceRow(g, 25, -1), -1);
}

TEST(SparseLaunch, CountsThatOverflowAreRefused) {
  sparse::GatherParams p;
  p.batch = int64_t{1} << 40;
  p.outer = int64_t{1} << 40;
  p.gather_size = 1;
  const absl::Status status = ParamOnlyLaunch::Read(sparse_launch::ReadGatherLaunch, 3, p).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("params"), std::string::npos) << status;
}

TEST(SparseLaunch, IndexTuplesAddressRowMajorSlicesOrNothing) {
  ParamBlock block;
  ParamWriter(&block).PutArray<int64_t>(std::vector<int64_t>{4, 3, 2});
  ParamReader reader(block);
  absl::StatusOr<std::vector<int64_t>> dims = sparse_launch::ReadPrefixDims(reader, 3);
  ASSERT_TRUE(dims.ok()) << dims.status();
  absl::StatusOr<sparse_launch::PrefixLayout> layout = sparse_launch::PrefixLayoutOf(*dims);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->count, 24);
  const int64_t inside[] = {3, 1, 1}, outside[] = {1, 3, 0}, negative[] = {0, 0, -1};
  EXPECT_EQ(sparse_launch::SliceOffset(*layout, inside), 3 * 6 + 1 * 2 + 1);
  EXPECT_EQ(sparse_launch::SliceOffset(*layout, outside), -1);
  EXPECT_EQ(sparse_launch::SliceOffset(*layout, negative), -1);

  ParamReader again(block);
  EXPECT_EQ(sparse_launch::ReadPrefixDims(again, 2).status().message(),
            "prefix_dims has 3 entries, expected 2");
  ParamReader deep(block);
  EXPECT_EQ(sparse_launch::ReadPrefixDims(deep, 8).status().message(),
            "index depth 8 exceeds 7");
}

TEST(SparseLaunch, ScatterOpsAreCheckedAgainstTheDtype) {
  sparse::ScatterParams p;
  p.dtype = DType::kBool;
  p.op = ScatterOp::kSub;
  EXPECT_EQ(ParamOnlyLaunch::Read(sparse_launch::ReadScatterLaunch, 3, p).status().message(),
            "bool scatters can only assign, add, min or max");
  EXPECT_EQ(sparse_launch::CheckScatterOp(static_cast<ScatterOp>(9), DType::kFloat32).message(),
            "unknown scatter op 9");

  sparse::ScatterNdParams nd;
  nd.index_depth = 0;
  EXPECT_EQ(ParamOnlyLaunch::Read(sparse_launch::ReadScatterNdLaunch, 3, nd).status().message(),
            "index depth must be at least 1");
}

TEST(SparseLaunch, ScalarScatterUpdatesHoldOneElement) {
  sparse::ScatterParams p;
  p.rows = 4;
  p.inner = 3;
  p.num_indices = 5;
  p.scalar_update = 1;
  absl::StatusOr<sparse_launch::ScatterLaunch> scatter =
      ParamOnlyLaunch::Read(sparse_launch::ReadScatterLaunch, 3, p);
  ASSERT_TRUE(scatter.ok()) << scatter.status();
  EXPECT_TRUE(scatter->scalar);
  EXPECT_EQ(scatter->target_count, 12);
  EXPECT_EQ(scatter->updates_count, 1);
  EXPECT_EQ(sparse_launch::ScatterRowDestination(2, p.rows, p.inner), 6);
  EXPECT_EQ(sparse_launch::ScatterRowDestination(4, p.rows, p.inner), -1);
}

TEST(SparseLaunch, IntegerScatterUpdatesWrapAndDivisionByMinusOneNegates) {
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(sparse_launch::ScatterUpdate<int32_t>(ScatterOp::kAdd, kMax, 1), kMin);
  EXPECT_EQ(sparse_launch::ScatterUpdate<int32_t>(ScatterOp::kDiv, kMin, -1), kMin);
  EXPECT_EQ(sparse_launch::ScatterUpdate<int32_t>(ScatterOp::kDiv, 7, -1), -7);
  EXPECT_EQ(sparse_launch::ScatterUpdate<int64_t>(ScatterOp::kMin, 3, -2), -2);
  EXPECT_EQ(sparse_launch::ScatterUpdate<float>(ScatterOp::kMul, 1.5f, 2.0f), 3.0f);
  EXPECT_EQ(sparse_launch::ScatterUpdate<double>(ScatterOp::kAssign, 1.0, 4.0), 4.0);
  EXPECT_EQ(sparse_launch::ScatterDivisionByZero().message(),
            "integer division by zero in a scatter update");
}

TEST(SparseLaunch, SegmentReductionsFollowTensorFlowsFunctors) {
  sparse::SegmentReduceParams p;
  p.op = static_cast<SegmentOp>(5);
  EXPECT_EQ(ParamOnlyLaunch::Read(sparse_launch::ReadSegmentReduceLaunch, 3, p).status().message(),
            "unknown segment op 5");
  EXPECT_EQ(sparse_launch::SegmentReduceStep<int32_t>(SegmentOp::kProd, 3, 4), 12);
  EXPECT_EQ(sparse_launch::SegmentReduceStep<float>(SegmentOp::kMax, 2.0f, 1.0f), 2.0f);
  EXPECT_EQ(sparse_launch::SegmentReduceStep<float>(SegmentOp::kMean, 2.0f, 1.0f), 3.0f);
  EXPECT_EQ(sparse_launch::SegmentMean<float>(3.0f, 2.0f), 1.5f);
  EXPECT_EQ(sparse_launch::SegmentMean<uint8_t>(7, 0), 7);  // a count of 256 rows held in uint8
  EXPECT_EQ(sparse_launch::SegmentOf(3, 3), -1);
  EXPECT_EQ(sparse_launch::SegmentOf(2, 3), 2);
}

TEST(SparseLaunch, WhereSizesItsCoordinatesAndWritesThemRowMajor) {
  sparse::WhereParams p;
  p.rank = 3;
  p.num_true = 2;
  ParamOnlyLaunch launch(2);
  ParamWriter params = launch.Params();
  params.Put(p);
  params.PutArray<int64_t>(std::vector<int64_t>{2, 3, 4});
  absl::StatusOr<sparse_launch::WhereLaunch> where = sparse_launch::ReadWhereLaunch(launch.View());
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_EQ(where->g.total, 24);
  EXPECT_EQ(where->coordinate_count, 6);
  int64_t coordinates[3] = {};
  sparse_launch::WriteCoordinates(where->g, 23, coordinates);
  EXPECT_EQ(coordinates[0], 1);
  EXPECT_EQ(coordinates[1], 2);
  EXPECT_EQ(coordinates[2], 3);

  p.rank = 9;
  EXPECT_EQ(ParamOnlyLaunch::Read(sparse_launch::ReadCountTrueLaunch, 2, p).status().message(),
            "rank 9 exceeds 8");
}

}  // namespace
}  // namespace vgpu
