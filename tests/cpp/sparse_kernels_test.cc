// The CPU executor's sparse and training kernels driven directly, as a hostile or buggy client
// could drive them: parameters that do not fit the buffers, overflowing sizes, unknown enums and
// out-of-range indices fail with InvalidArgument or follow TensorFlow's GPU semantics, and no
// kernel writes outside its buffers (each buffer is followed by canary bytes that must survive).
#define EIGEN_USE_THREADS

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/protocol/kernels/sparse.h"
#include "plugin/protocol/kernels/training.h"
#include "plugin/protocol/launch_params.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu {
namespace {

constexpr uint8_t kCanary = 0xAB;
constexpr size_t kCanaryBytes = 64;

// A device buffer of `bytes` bytes followed by canary bytes.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes) : bytes_(bytes), storage_(bytes + kCanaryBytes, kCanary) {}
  template <typename T>
  static GuardedBuffer Of(const std::vector<T>& values) {
    GuardedBuffer buffer(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(buffer.data(), values.data(), buffer.bytes_);
    return buffer;
  }
  uint8_t* data() { return storage_.data(); }
  size_t size() const { return bytes_; }
  template <typename T>
  std::vector<T> As() const {
    std::vector<T> values(bytes_ / sizeof(T));
    if (!values.empty()) std::memcpy(values.data(), storage_.data(), values.size() * sizeof(T));
    return values;
  }
  bool CanaryIntact() const {
    for (size_t i = bytes_; i < storage_.size(); ++i) {
      if (storage_[i] != kCanary) return false;
    }
    return true;
  }

 private:
  size_t bytes_;
  std::vector<uint8_t> storage_;
};

class SparseKernelsTest : public ::testing::Test {
 protected:
  SparseKernelsTest() : pool_(2), device_(&pool_, 2) {}

  // Runs kernel `id` on `buffers` with the parameter block `params`; checks the canaries.
  absl::Status Run(KernelId id, std::vector<GuardedBuffer*> buffers, const ParamBlock& params) {
    const KernelInfo* kernel = Kernels().Find(static_cast<uint32_t>(id));
    EXPECT_NE(kernel, nullptr);
    if (kernel == nullptr) return absl::NotFoundError("no kernel");
    std::vector<uint8_t*> pointers;
    std::vector<uint64_t> sizes;
    for (GuardedBuffer* buffer : buffers) {
      pointers.push_back(buffer->data());
      sizes.push_back(buffer->size());
    }
    KernelContext context{pointers, sizes, params, &device_};
    absl::Status status = kernel->run(context);
    for (GuardedBuffer* buffer : buffers) EXPECT_TRUE(buffer->CanaryIntact());
    return status;
  }

  template <typename P>
  static ParamBlock Block(const P& params, std::vector<int64_t> array = {}, bool with_array = false) {
    ParamBlock block;
    ParamWriter writer(&block);
    writer.Put(params);
    if (with_array) writer.PutArray<int64_t>(array);
    return block;
  }

  Eigen::ThreadPool pool_;
  Eigen::ThreadPoolDevice device_;
};

sparse::GatherParams GatherOf(int64_t rows, int64_t inner, int64_t indices) {
  sparse::GatherParams p;
  p.element_size = 4;
  p.index_dtype = DType::kInt32;
  p.gather_size = rows;
  p.inner = inner;
  p.indices_per_batch = indices;
  return p;
}

TEST_F(SparseKernelsTest, GatherZeroesRowsOfOutOfRangeIndices) {
  GuardedBuffer params = GuardedBuffer::Of<float>({1, 2, 3, 4, 5, 6, 7, 8});
  GuardedBuffer indices = GuardedBuffer::Of<int32_t>({3, 4, -1, 0});
  GuardedBuffer out(4 * 2 * sizeof(float));
  ASSERT_TRUE(Run(sparse::kGather, {&params, &indices, &out}, Block(GatherOf(4, 2, 4))).ok());
  EXPECT_EQ(out.As<float>(), (std::vector<float>{7, 8, 0, 0, 0, 0, 1, 2}));
}

TEST_F(SparseKernelsTest, GatherRefusesBuffersSmallerThanItsParameters) {
  GuardedBuffer params(8 * sizeof(float));
  GuardedBuffer indices = GuardedBuffer::Of<int32_t>({0, 1, 2, 3});
  GuardedBuffer out(3 * 2 * sizeof(float));  // needs 4 rows
  EXPECT_EQ(Run(sparse::kGather, {&params, &indices, &out}, Block(GatherOf(4, 2, 4))).code(),
            absl::StatusCode::kInvalidArgument);
  GuardedBuffer small_params(7 * sizeof(float));
  GuardedBuffer big_out(8 * sizeof(float));
  EXPECT_EQ(Run(sparse::kGather, {&small_params, &indices, &big_out}, Block(GatherOf(4, 2, 4)))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SparseKernelsTest, GatherRefusesOverflowingOrNegativeSizesAndBadTypes) {
  GuardedBuffer a(64), b(64), c(64);
  sparse::GatherParams huge = GatherOf(int64_t{1} << 40, int64_t{1} << 40, 1);
  EXPECT_EQ(Run(sparse::kGather, {&a, &b, &c}, Block(huge)).code(),
            absl::StatusCode::kInvalidArgument);
  sparse::GatherParams negative = GatherOf(-4, 2, 1);
  EXPECT_EQ(Run(sparse::kGather, {&a, &b, &c}, Block(negative)).code(),
            absl::StatusCode::kInvalidArgument);
  sparse::GatherParams bad_size = GatherOf(2, 2, 1);
  bad_size.element_size = 3;
  EXPECT_EQ(Run(sparse::kGather, {&a, &b, &c}, Block(bad_size)).code(),
            absl::StatusCode::kInvalidArgument);
  sparse::GatherParams bad_index = GatherOf(2, 2, 1);
  bad_index.index_dtype = DType::kFloat32;
  EXPECT_EQ(Run(sparse::kGather, {&a, &b, &c}, Block(bad_index)).code(),
            absl::StatusCode::kInvalidArgument);
  ParamBlock truncated;
  ParamWriter(&truncated).Put(uint32_t{4});
  EXPECT_EQ(Run(sparse::kGather, {&a, &b, &c}, truncated).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SparseKernelsTest, GatherNdZeroesOutOfRangeTuplesAndRefusesBadDepths) {
  GuardedBuffer params = GuardedBuffer::Of<float>({1, 2, 3, 4, 5, 6});  // [2, 3]
  GuardedBuffer indices = GuardedBuffer::Of<int64_t>({1, 2, 2, 0, 0, -1});
  GuardedBuffer out(3 * sizeof(float));
  sparse::GatherNdParams p;
  p.element_size = 4;
  p.index_dtype = DType::kInt64;
  p.num_slices = 3;
  p.slice_size = 1;
  p.index_depth = 2;
  ASSERT_TRUE(Run(sparse::kGatherNd, {&params, &indices, &out}, Block(p, {2, 3}, true)).ok());
  EXPECT_EQ(out.As<float>(), (std::vector<float>{6, 0, 0}));
  // The prefix array must have index_depth entries, and the depth is at most 7.
  EXPECT_EQ(Run(sparse::kGatherNd, {&params, &indices, &out}, Block(p, {6}, true)).code(),
            absl::StatusCode::kInvalidArgument);
  p.index_depth = 9;
  EXPECT_EQ(Run(sparse::kGatherNd, {&params, &indices, &out},
                Block(p, {1, 1, 1, 1, 1, 1, 1, 1, 1}, true))
                .code(),
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

TEST_F(SparseKernelsTest, ScatterSkipsOutOfRangeIndicesAndAppliesDuplicatesInOrder) {
  GuardedBuffer params = GuardedBuffer::Of<float>({10, 10, 20, 20});
  GuardedBuffer indices = GuardedBuffer::Of<int32_t>({1, 2, 1, -3});
  GuardedBuffer updates = GuardedBuffer::Of<float>({1, 2, 5, 5, 3, 4, 9, 9});
  ASSERT_TRUE(Run(sparse::kScatter, {&params, &indices, &updates},
                  Block(ScatterOf(DType::kFloat32, sparse::ScatterOp::kSub, 2, 2, 4)))
                  .ok());
  EXPECT_EQ(params.As<float>(), (std::vector<float>{10, 10, 16, 14}));
}

TEST_F(SparseKernelsTest, ScatterRefusesIntegerDivisionByZeroAndWrapsMinimumByMinusOne) {
  GuardedBuffer params =
      GuardedBuffer::Of<int32_t>({std::numeric_limits<int32_t>::min(), 7});
  GuardedBuffer indices = GuardedBuffer::Of<int32_t>({0, 1});
  GuardedBuffer zero = GuardedBuffer::Of<int32_t>({-1, 0});
  const ParamBlock divide = Block(ScatterOf(DType::kInt32, sparse::ScatterOp::kDiv, 2, 1, 2));
  EXPECT_EQ(Run(sparse::kScatter, {&params, &indices, &zero}, divide).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(params.As<int32_t>()[1], 7);  // nothing applied
  GuardedBuffer minus_one = GuardedBuffer::Of<int32_t>({-1, -1});
  ASSERT_TRUE(Run(sparse::kScatter, {&params, &indices, &minus_one}, divide).ok());
  EXPECT_EQ(params.As<int32_t>(),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -7}));
}

TEST_F(SparseKernelsTest, ScatterRefusesUnknownOpsAndBoolArithmetic) {
  GuardedBuffer params(4), indices(4), updates(4);
  EXPECT_EQ(Run(sparse::kScatter, {&params, &indices, &updates},
                Block(ScatterOf(DType::kFloat32, static_cast<sparse::ScatterOp>(42), 1, 1, 1)))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Run(sparse::kScatter, {&params, &indices, &updates},
                Block(ScatterOf(DType::kBool, sparse::ScatterOp::kMul, 1, 1, 1)))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SparseKernelsTest, ScatterNdZeroesItsOutputAndSkipsOutOfRangeTuples) {
  GuardedBuffer output = GuardedBuffer::Of<float>({9, 9, 9, 9, 9, 9});  // [3, 2]
  GuardedBuffer indices = GuardedBuffer::Of<int32_t>({2, 0, 5, 2});
  GuardedBuffer updates = GuardedBuffer::Of<float>({1, 1, 7, 7, 2, 2, 3, 3});
  sparse::ScatterNdParams p;
  p.op = sparse::ScatterOp::kAdd;
  p.index_depth = 1;
  p.num_updates = 4;
  p.slice_size = 2;
  p.zero_output = 1;
  ASSERT_TRUE(Run(sparse::kScatterNd, {&output, &indices, &updates}, Block(p, {3}, true)).ok());
  EXPECT_EQ(output.As<float>(), (std::vector<float>{7, 7, 0, 0, 4, 4}));
  p.index_depth = 0;
  EXPECT_EQ(Run(sparse::kScatterNd, {&output, &indices, &updates}, Block(p, {}, true)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SparseKernelsTest, SegmentReduceDropsOutOfRangeIdsAndFillsEmptySegments) {
  GuardedBuffer data = GuardedBuffer::Of<float>({1, 2, 3, 4, 5});
  GuardedBuffer ids = GuardedBuffer::Of<int64_t>({0, 2, 0, -1, 3});
  GuardedBuffer output(3 * sizeof(float));
  sparse::SegmentReduceParams p;
  p.index_dtype = DType::kInt64;
  p.op = sparse::SegmentOp::kMean;
  p.num_ids = 5;
  p.inner = 1;
  p.num_segments = 3;
  ASSERT_TRUE(Run(sparse::kSegmentReduce, {&data, &ids, &output}, Block(p)).ok());
  EXPECT_EQ(output.As<float>(), (std::vector<float>{2, 0, 2}));
  p.op = static_cast<sparse::SegmentOp>(17);
  EXPECT_EQ(Run(sparse::kSegmentReduce, {&data, &ids, &output}, Block(p)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SparseKernelsTest, WhereWritesNoMoreCoordinatesThanItWasGivenRoomFor) {
  GuardedBuffer input = GuardedBuffer::Of<uint8_t>({0, 1, 1, 0, 1, 1});  // bool [2, 3]
  sparse::WhereParams p;
  p.rank = 2;
  GuardedBuffer count(sizeof(int64_t));
  ASSERT_TRUE(Run(sparse::kCountTrue, {&input, &count}, Block(p, {2, 3}, true)).ok());
  EXPECT_EQ(count.As<int64_t>()[0], 4);
  p.num_true = 4;
  GuardedBuffer coordinates(4 * 2 * sizeof(int64_t));
  ASSERT_TRUE(Run(sparse::kWhere, {&input, &coordinates}, Block(p, {2, 3}, true)).ok());
  EXPECT_EQ(coordinates.As<int64_t>(), (std::vector<int64_t>{0, 1, 0, 2, 1, 1, 1, 2}));
  p.num_true = 2;  // fewer than the input holds: refused, nothing written past the room for 2
  GuardedBuffer small(2 * 2 * sizeof(int64_t));
  EXPECT_EQ(Run(sparse::kWhere, {&input, &small}, Block(p, {2, 3}, true)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SparseKernelsTest, DenseOptimizerRefusesOverflowingCountsAndMissingBuffers) {
  training::UpdateParams p;
  p.count = uint64_t{1} << 62;
  GuardedBuffer var(16), alpha(4), delta(16);
  EXPECT_EQ(Run(training::kApplyGradientDescent, {&var, &alpha, &delta}, Block(p)).code(),
            absl::StatusCode::kInvalidArgument);
  p.count = 4;
  EXPECT_EQ(Run(training::kApplyGradientDescent, {&var, &alpha}, Block(p)).code(),
            absl::StatusCode::kInvalidArgument);
  GuardedBuffer short_delta(12);
  EXPECT_EQ(Run(training::kApplyGradientDescent, {&var, &alpha, &short_delta}, Block(p)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SparseKernelsTest, SparseOptimizerSkipsOutOfRangeIndicesAndChecksItsBuffers) {
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
  ASSERT_TRUE(Run(training::kSparseApplyKerasMomentum,
                  {&var, &accum, &lr, &grad, &indices, &momentum}, Block(p))
                  .ok());
  EXPECT_EQ(var.As<float>(), (std::vector<float>{1, 1, 0.5f, 0.5f}));
  p.num_indices = 4;  // more indices than the buffers hold
  EXPECT_EQ(Run(training::kSparseApplyKerasMomentum,
                {&var, &accum, &lr, &grad, &indices, &momentum}, Block(p))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vgpu
