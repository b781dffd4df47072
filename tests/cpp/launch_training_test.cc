// The training family's launch layer (plugin/backend/launch/training_launch.h) on its own, as
// every executor relies on it: the kernel list and its layouts, the readers' checks and their
// order, and the registration that reads a launch, dispatches its dtype and skips empty updates
// before an executor's computation runs.
#include "plugin/backend/launch/training_launch.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "plugin/backend/launch/kernel_table.h"
#include "plugin/backend/launch/reader_dispatch.h"
#include "plugin/protocol/kernels/training.h"

namespace vgpu::training_launch {
namespace {

// A launch of host buffers: 8-byte aligned storage, any byte offset into it.
class TestLaunch {
 public:
  template <typename Params>
  explicit TestLaunch(const Params& params) : params_(sizeof(Params)) {
    std::memcpy(params_.data(), &params, sizeof(Params));
  }

  // Adds a buffer of `bytes` bytes starting `offset` bytes into its storage.
  TestLaunch& Buffer(uint64_t bytes, size_t offset = 0) {
    storage_.emplace_back((bytes + offset + 7) / 8 + 1);
    pointers_.push_back(reinterpret_cast<uint8_t*>(storage_.back().data()) + offset);
    sizes_.push_back(bytes);
    return *this;
  }

  LaunchView View() const { return LaunchView{pointers_, sizes_, params_}; }

 private:
  std::vector<uint8_t> params_;
  std::vector<std::vector<uint64_t>> storage_;
  std::vector<uint8_t*> pointers_;
  std::vector<uint64_t> sizes_;
};

const UpdateKernelSpec& SpecOf(KernelId id) {
  for (const UpdateKernelSpec& kernel : kUpdateKernels) {
    if (kernel.id == id) return kernel;
  }
  ADD_FAILURE() << "no kernel " << static_cast<uint32_t>(id);
  return kUpdateKernels[0];
}

training::UpdateParams Dense(DType dtype, uint64_t count) {
  return training::UpdateParams{dtype, /*flags=*/0, count};
}

// float32 variables.
training::SparseUpdateParams Sparse(int64_t rows, int64_t inner, int64_t num_indices,
                                    DType index_dtype = DType::kInt32) {
  return training::SparseUpdateParams{DType::kFloat32, index_dtype, /*flags=*/0, /*reserved=*/0,
                                      rows, inner, num_indices};
}

bool Mentions(const absl::Status& status, const std::string& words) {
  return status.message().find(words) != absl::string_view::npos;
}

TEST(TrainingLaunch, EveryKernelHasOneWellFormedLayout) {
  std::set<uint32_t> ids;
  std::set<std::string> names;
  for (const UpdateKernelSpec& kernel : kUpdateKernels) {
    EXPECT_TRUE(ids.insert(static_cast<uint32_t>(kernel.id)).second) << kernel.name;
    EXPECT_TRUE(names.insert(kernel.name).second) << kernel.name;
    const std::string layout = kernel.layout;
    EXPECT_EQ(layout.find_first_not_of("vgsi"), std::string::npos) << kernel.name;
    EXPECT_EQ(layout[0], 'v') << kernel.name;
    EXPECT_EQ(std::count(layout.begin(), layout.end(), 'g'), 1) << kernel.name;
    EXPECT_LE(std::count(layout.begin(), layout.end(), 'i'), 1) << kernel.name;
    EXPECT_EQ(IsSparse(kernel), layout.find('i') != std::string::npos) << kernel.name;
    if (IsSparse(kernel)) {
      EXPECT_EQ(layout[IndicesBuffer(kernel)], 'i') << kernel.name;
    }
    EXPECT_LE(layout.size(), MaxUpdateBuffers());
  }
  EXPECT_EQ(ids.size(), 29u);
  EXPECT_EQ(MaxUpdateBuffers(), 11u);  // kApplyAdamWithAmsgrad
}

TEST(TrainingLaunch, DenseReaderAcceptsAMatchingLaunch) {
  // kApplyAdagrad: [var, accum, lr, grad] of float16.
  TestLaunch launch(Dense(DType::kFloat16, 5));
  launch.Buffer(10).Buffer(10).Buffer(2).Buffer(10);
  absl::StatusOr<DenseUpdateLaunch> read =
      ReadDenseUpdateLaunch(launch.View(), SpecOf(training::kApplyAdagrad));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->count, 5);
  EXPECT_EQ(read->params.dtype, DType::kFloat16);
}

TEST(TrainingLaunch, DenseReaderChecksCountThenDtypeThenBuffers) {
  const UpdateKernelSpec& kernel = SpecOf(training::kApplyGradientDescent);  // "vsg"
  // Every check fails below; the first in the reader's order is the one reported.
  TestLaunch huge(Dense(DType::kInt32, uint64_t{1} << 57));
  huge.Buffer(4);
  absl::Status status = ReadDenseUpdateLaunch(huge.View(), kernel).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Mentions(status, "variable has too many elements")) << status;

  TestLaunch integer(Dense(DType::kInt32, 4));
  integer.Buffer(4);
  status = ReadDenseUpdateLaunch(integer.View(), kernel).status();
  EXPECT_EQ(status, ReaderDispatch::Floating(DType::kInt32, [](auto) {
              return absl::OkStatus();
            }));

  TestLaunch too_few(Dense(DType::kFloat32, 4));
  too_few.Buffer(16).Buffer(4);
  status = ReadDenseUpdateLaunch(too_few.View(), kernel).status();
  EXPECT_TRUE(Mentions(status, "expected 3 buffers, got 2")) << status;

  TestLaunch misaligned(Dense(DType::kFloat32, 4));
  misaligned.Buffer(16, /*offset=*/2).Buffer(4).Buffer(16);
  status = ReadDenseUpdateLaunch(misaligned.View(), kernel).status();
  EXPECT_TRUE(Mentions(status, "buffer 0 is not aligned")) << status;

  TestLaunch short_grad(Dense(DType::kFloat32, 4));
  short_grad.Buffer(16).Buffer(4).Buffer(15);
  status = ReadDenseUpdateLaunch(short_grad.View(), kernel).status();
  EXPECT_TRUE(Mentions(status, "buffer 2 holds 15 bytes")) << status;
}

TEST(TrainingLaunch, SparseReaderAcceptsAMatchingLaunchAndFindsTheIndices) {
  // kSparseApplyFtrl: [var, accum, linear, grad, indices, lr, l1, l2, lr_power], int64 indices.
  TestLaunch launch(Sparse(/*rows=*/4, /*inner=*/3, /*num_indices=*/2, DType::kInt64));
  launch.Buffer(48).Buffer(48).Buffer(48).Buffer(24).Buffer(16);
  for (int i = 0; i < 4; ++i) launch.Buffer(4);
  absl::StatusOr<SparseUpdateLaunch> read =
      ReadSparseUpdateLaunch(launch.View(), SpecOf(training::kSparseApplyFtrl));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->var_count, 12);
  EXPECT_EQ(read->grad_count, 6);
  EXPECT_EQ(read->indices_buffer, 4u);
}

TEST(TrainingLaunch, SparseReaderRefusesBadSizesIndexDtypesAndIndices) {
  const UpdateKernelSpec& kernel = SpecOf(training::kSparseApplyAdagrad);  // "vvsgi"
  auto read = [&](const training::SparseUpdateParams& params, uint64_t index_bytes,
                  size_t index_offset = 0) {
    TestLaunch launch(params);
    launch.Buffer(16).Buffer(16).Buffer(4).Buffer(16).Buffer(index_bytes, index_offset);
    return ReadSparseUpdateLaunch(launch.View(), kernel).status();
  };
  absl::Status status = read(Sparse(-1, 4, 1), 4);
  EXPECT_TRUE(Mentions(status, "negative sparse update size")) << status;
  // rows * inner wraps 64 bits.
  status = read(Sparse(int64_t{1} << 40, int64_t{1} << 40, 1), 4);
  EXPECT_TRUE(Mentions(status, "sparse update has too many elements")) << status;
  status = read(Sparse(1, 4, 1, DType::kUInt8), 4);
  EXPECT_TRUE(Mentions(status, "indices must be int32 or int64")) << status;
  status = read(Sparse(1, 4, 1), 4, /*index_offset=*/1);
  EXPECT_TRUE(Mentions(status, "buffer 4 is not aligned")) << status;
  status = read(Sparse(1, 4, 2), 4);
  EXPECT_TRUE(Mentions(status, "buffer 3 holds 16 bytes")) << status;  // the gradient first
  EXPECT_TRUE(read(Sparse(1, 4, 1), 4).ok());
}

TEST(TrainingLaunch, BufferCheckRefusesALetterOutsideTheLayoutAlphabet) {
  TestLaunch launch(Dense(DType::kFloat32, 1));
  launch.Buffer(4);
  absl::Status status = CheckUpdateBuffers(launch.View(), "x", 4, 1, 1, 0, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
}

// A Runner recording what UpdateKernelFunction hands the executor.
struct RecordingRunner {
  using Dispatch = ReaderDispatch;
  static inline std::vector<std::string> calls;

  template <typename Arithmetic, typename T>
  static absl::Status Dense(const LaunchView&, const UpdateKernelSpec& kernel,
                            const DenseUpdateLaunch& launch) {
    return Record(kernel, "dense", sizeof(T), launch.count, Arithmetic::kName);
  }
  template <typename Arithmetic, typename T>
  static absl::Status Sparse(const LaunchView&, const UpdateKernelSpec& kernel,
                             const SparseUpdateLaunch& launch) {
    return Record(kernel, "sparse", sizeof(T), launch.grad_count, Arithmetic::kName);
  }

  // Appends "<kernel> <form> <element bytes> <count> <arithmetic>" to `calls`.
  static absl::Status Record(const UpdateKernelSpec& kernel, const char* form,
                             size_t element_bytes, int64_t count, const char* arithmetic) {
    calls.push_back(std::string(kernel.name) + " " + form + " " +
                    std::to_string(element_bytes) + " " + std::to_string(count) + " " +
                    arithmetic);
    return absl::OkStatus();
  }
};

template <KernelId kId>
struct NamedArithmetic {
  static constexpr const char* kName = "arithmetic";
};

TEST(TrainingLaunch, RegistrationReadsDispatchesAndSkipsEmptyUpdates) {
  KernelRegistry<LaunchView> table;
  AddUpdateKernels<NamedArithmetic, RecordingRunner>(table);
  EXPECT_EQ(table.Ids().size(), kUpdateKernelCount);
  const auto* gradient_descent =
      table.Find(static_cast<uint32_t>(training::kApplyGradientDescent));
  ASSERT_NE(gradient_descent, nullptr);
  EXPECT_STREQ(gradient_descent->name, "apply_gradient_descent");
  RecordingRunner::calls.clear();

  TestLaunch dense(Dense(DType::kFloat64, 2));
  dense.Buffer(16).Buffer(8).Buffer(16);
  EXPECT_TRUE(gradient_descent->run(dense.View()).ok());
  TestLaunch empty(Dense(DType::kFloat64, 0));
  empty.Buffer(0).Buffer(8).Buffer(0);
  EXPECT_TRUE(gradient_descent->run(empty.View()).ok());
  TestLaunch refused(Dense(DType::kFloat64, 2));
  refused.Buffer(16).Buffer(8).Buffer(8);
  EXPECT_FALSE(gradient_descent->run(refused.View()).ok());

  const auto* sparse = table.Find(static_cast<uint32_t>(training::kSparseApplyAdagrad));
  ASSERT_NE(sparse, nullptr);
  TestLaunch rows(Sparse(2, 2, 1));
  rows.Buffer(16).Buffer(16).Buffer(4).Buffer(8).Buffer(4);
  EXPECT_TRUE(sparse->run(rows.View()).ok());
  TestLaunch no_rows(Sparse(2, 2, 0));
  no_rows.Buffer(16).Buffer(16).Buffer(4).Buffer(0).Buffer(0);
  EXPECT_TRUE(sparse->run(no_rows.View()).ok());

  EXPECT_EQ(RecordingRunner::calls,
            (std::vector<std::string>{"apply_gradient_descent dense 8 2 arithmetic",
                                      "sparse_apply_adagrad sparse 4 2 arithmetic"}));
}

}  // namespace
}  // namespace vgpu::training_launch
