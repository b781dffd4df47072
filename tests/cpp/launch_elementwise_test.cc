// The launch layer's readers of the element-wise, activation, reduction, softmax and scan/top-k
// families (plugin/backend/launch/), driven with hand-built launches and no executor: the
// broadcast layout, the op/dtype sets both executors serve, the order in which a reader reports
// a launch's faults (the CPU executor's), the geometry it hands the kernels, and the integer
// arithmetic and conversions both executors compute with.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "plugin/backend/launch/activation_launch.h"
#include "plugin/backend/launch/broadcast_layout.h"
#include "plugin/backend/launch/dtype_dispatch.h"
#include "plugin/backend/launch/dtype_sets.h"
#include "plugin/backend/launch/element_conversions.h"
#include "plugin/backend/launch/elementwise_launch.h"
#include "plugin/backend/launch/integer_arithmetic.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/backend/launch/reader_dispatch.h"
#include "plugin/backend/launch/reduction_launch.h"
#include "plugin/backend/launch/scan_topk_launch.h"
#include "plugin/backend/launch/softmax_launch.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/protocol/kernels/activation.h"
#include "plugin/protocol/kernels/reduction.h"

namespace vgpu {
namespace {

// A launch built by hand: descriptors, 8-byte aligned buffers of the given sizes, parameters.
// View() borrows everything; keep the builder alive while the view is used.
class HandLaunch {
 public:
  template <typename Settings>
  HandLaunch& Describe(const Settings& settings) {
    kinds_.push_back(DescriptorTraits<Settings>::kKind);
    const auto* bytes = reinterpret_cast<const uint8_t*>(&settings);
    settings_.emplace_back(bytes, bytes + sizeof(Settings));
    return *this;
  }
  HandLaunch& Tensor(std::vector<int64_t> dims, DType dtype = DType::kFloat32) {
    TensorDescriptorSettings tensor;
    tensor.dtype = dtype;
    tensor.rank = static_cast<int32_t>(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) tensor.dims[i] = dims[i];
    return Describe(tensor);
  }
  HandLaunch& Buffer(uint64_t bytes) {
    storage_.emplace_back((bytes + 7) / 8 + 1);
    sizes_.push_back(bytes);
    return *this;
  }
  template <typename T>
  HandLaunch& Param(const T& value) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(&value);
    params_.insert(params_.end(), bytes, bytes + sizeof(T));
    return *this;
  }

  LaunchView View() {
    pointers_.clear();
    for (auto& block : storage_) pointers_.push_back(reinterpret_cast<uint8_t*>(block.data()));
    descriptors_.clear();
    for (size_t i = 0; i < kinds_.size(); ++i) {
      descriptors_.push_back(DescriptorView{kinds_[i], settings_[i]});
    }
    return LaunchView{pointers_, sizes_, params_, descriptors_};
  }

 private:
  std::vector<DescriptorKind> kinds_;
  std::vector<std::vector<uint8_t>> settings_;
  std::vector<std::vector<uint64_t>> storage_;
  std::vector<uint64_t> sizes_;
  std::vector<uint8_t> params_;
  std::vector<uint8_t*> pointers_;
  std::vector<DescriptorView> descriptors_;
};

TensorDescriptorSettings TensorOf(std::vector<int64_t> dims, DType dtype = DType::kFloat32) {
  TensorDescriptorSettings tensor;
  tensor.dtype = dtype;
  tensor.rank = static_cast<int32_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) tensor.dims[i] = dims[i];
  return tensor;
}

OpTensorDescriptorSettings Op(ElementwiseOp op, DType dtype = DType::kFloat32) {
  OpTensorDescriptorSettings settings;
  settings.op = op;
  settings.dtype = dtype;
  return settings;
}

std::string MessageOf(const absl::Status& status) { return std::string(status.message()); }

// What ReadBinaryLaunch says of `launch`: its error message, empty when it accepts it.
std::string BinaryLaunchMessage(HandLaunch& launch) {
  return MessageOf(elementwise_launch::ReadBinaryLaunch(launch.View()).status());
}

// Whether `status` failed with a message containing `part`.
::testing::AssertionResult FailsWith(const absl::Status& status, const std::string& part) {
  if (!status.ok() && MessageOf(status).find(part) != std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "status " << status << " does not contain " << part;
}

// --- Broadcast layout -----------------------------------------------------------------------

TEST(BroadcastLayoutTest, MergesNeighbouringDimensionsEveryInputTreatsAlike) {
  absl::StatusOr<BroadcastLayout<2>> layout =
      MakeBroadcastLayout<2>(TensorOf({2, 3, 4}), {TensorOf({2, 3, 4}), TensorOf({4})});
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->rank, 2);
  EXPECT_EQ(layout->dims[0], 6);
  EXPECT_EQ(layout->dims[1], 4);
  EXPECT_EQ(layout->strides[0][0], 4);
  EXPECT_EQ(layout->strides[0][1], 1);
  EXPECT_EQ(layout->strides[1][0], 0);  // b repeats along the merged outer dimension
  EXPECT_EQ(layout->strides[1][1], 1);
  EXPECT_EQ(layout->output_count, 24);
  EXPECT_EQ(layout->input_counts[0], 24);
  EXPECT_EQ(layout->input_counts[1], 4);
  int64_t offsets[2];
  layout->Offsets(13, offsets);  // row 3, column 1
  EXPECT_EQ(offsets[0], 13);
  EXPECT_EQ(offsets[1], 1);
}

TEST(BroadcastLayoutTest, AScalarOutputIsOneElementOfStrideOne) {
  absl::StatusOr<BroadcastLayout<3>> layout =
      MakeBroadcastLayout<3>(TensorOf({}), {TensorOf({}), TensorOf({}), TensorOf({})});
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->rank, 1);
  EXPECT_EQ(layout->dims[0], 1);
  EXPECT_EQ(layout->output_count, 1);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(layout->strides[k][0], 1);
}

TEST(BroadcastLayoutTest, RefusesShapesThatDoNotBroadcastOrOverflow) {
  absl::StatusOr<BroadcastLayout<2>> mismatch =
      MakeBroadcastLayout<2>(TensorOf({4}), {TensorOf({3}), TensorOf({4})});
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(FailsWith(mismatch.status(), "does not broadcast"));
  absl::StatusOr<BroadcastLayout<2>> higher_rank =
      MakeBroadcastLayout<2>(TensorOf({4}), {TensorOf({1, 4}), TensorOf({4})});
  EXPECT_TRUE(FailsWith(higher_rank.status(), "has rank 2, the output 1"));
  const int64_t big = int64_t{1} << 40;
  absl::StatusOr<BroadcastLayout<2>> huge =
      MakeBroadcastLayout<2>(TensorOf({big, big}), {TensorOf({big, big}), TensorOf({1})});
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
}

// --- Element-wise readers -------------------------------------------------------------------

TEST(ElementwiseLaunchTest, BinaryArithmeticServesTheFloatingOnlyOpsForFloatingDtypesOnly) {
  HandLaunch int_div_no_nan;
  int_div_no_nan.Describe(Op(ElementwiseOp::kDivNoNan, DType::kInt32))
      .Tensor({4}, DType::kInt32).Tensor({4}, DType::kInt32).Tensor({4}, DType::kInt32)
      .Buffer(16).Buffer(16).Buffer(16);
  EXPECT_EQ(BinaryLaunchMessage(int_div_no_nan),
            "element-wise op 5 is not a binary arithmetic op for dtype 5");

  HandLaunch uint8_add;
  uint8_add.Describe(Op(ElementwiseOp::kAdd, DType::kUInt8)).Tensor({2, 4}, DType::kUInt8)
      .Tensor({4}, DType::kUInt8).Tensor({2, 4}, DType::kUInt8).Buffer(8).Buffer(4).Buffer(8);
  absl::StatusOr<elementwise_launch::BinaryLaunch> read =
      elementwise_launch::ReadBinaryLaunch(uint8_add.View());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kind, elementwise_launch::BinaryKind::kArithmetic);
  EXPECT_EQ(read->layout.input_counts[1], 4);
}

TEST(ElementwiseLaunchTest, ComparisonsWriteBoolAndLogicalOpsTakeBool) {
  HandLaunch float_out;
  float_out.Describe(Op(ElementwiseOp::kLess)).Tensor({4}).Tensor({4}).Tensor({4})
      .Buffer(16).Buffer(16).Buffer(16);
  EXPECT_EQ(BinaryLaunchMessage(float_out), "the output descriptor has the wrong dtype for the op");

  HandLaunch less;
  less.Describe(Op(ElementwiseOp::kLess)).Tensor({4}).Tensor({4}).Tensor({4}, DType::kBool)
      .Buffer(16).Buffer(16).Buffer(4);
  absl::StatusOr<elementwise_launch::BinaryLaunch> read =
      elementwise_launch::ReadBinaryLaunch(less.View());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kind, elementwise_launch::BinaryKind::kComparison);

  HandLaunch float_and;
  float_and.Describe(Op(ElementwiseOp::kLogicalAnd)).Tensor({4}).Tensor({4})
      .Tensor({4}, DType::kBool).Buffer(16).Buffer(16).Buffer(4);
  EXPECT_EQ(BinaryLaunchMessage(float_and), "logical ops take bool operands");
}

TEST(ElementwiseLaunchTest, BinaryBuffersAreCheckedAfterTheOpAndDtype) {
  // A bool output buffer of 3 bytes for 4 elements, and an op refused for the dtype: the op
  // is reported (the CPU executor's order).
  HandLaunch both_wrong;
  both_wrong.Describe(Op(ElementwiseOp::kAtan2, DType::kInt64)).Tensor({4}, DType::kInt64)
      .Tensor({4}, DType::kInt64).Tensor({4}, DType::kInt64).Buffer(32).Buffer(32).Buffer(3);
  EXPECT_TRUE(
      FailsWith(elementwise_launch::ReadBinaryLaunch(both_wrong.View()).status(),
                "is not a binary arithmetic op"));
  HandLaunch short_output;
  short_output.Describe(Op(ElementwiseOp::kEqual)).Tensor({4}).Tensor({4})
      .Tensor({4}, DType::kBool).Buffer(16).Buffer(16).Buffer(3);
  EXPECT_EQ(BinaryLaunchMessage(short_output),
            "buffer 2 holds 3 bytes, needs 4 elements of 1 bytes");
}

TEST(ElementwiseLaunchTest, UnaryOpsFollowTheDtypeSets) {
  struct Case {
    ElementwiseOp op;
    DType dtype;
    bool served;
  };
  for (const Case& c : {Case{ElementwiseOp::kSqrt, DType::kFloat16, true},
                        Case{ElementwiseOp::kSqrt, DType::kInt32, false},
                        Case{ElementwiseOp::kAbs, DType::kInt64, true},
                        Case{ElementwiseOp::kNeg, DType::kUInt8, false},
                        Case{ElementwiseOp::kAtanh, DType::kFloat64, true},
                        Case{ElementwiseOp::kRound, DType::kInt32, true}}) {
    HandLaunch launch;
    launch.Describe(Op(c.op, c.dtype)).Tensor({2}, c.dtype).Buffer(16).Buffer(16);
    absl::StatusOr<elementwise_launch::UnaryLaunch> read =
        elementwise_launch::ReadUnaryLaunch(launch.View());
    EXPECT_EQ(read.ok(), c.served) << static_cast<int>(c.op) << " " << static_cast<int>(c.dtype);
    if (!c.served) {
      EXPECT_TRUE(FailsWith(read.status(), "is not a unary op for this dtype"));
    }
  }
  HandLaunch int_is_nan;
  int_is_nan.Describe(Op(ElementwiseOp::kIsNan, DType::kInt64)).Tensor({2}, DType::kInt64)
      .Buffer(16).Buffer(2);
  EXPECT_EQ(MessageOf(elementwise_launch::ReadUnaryLaunch(int_is_nan.View()).status()),
            "dtype 6 is not a floating-point type");
  HandLaunch float_not;
  float_not.Describe(Op(ElementwiseOp::kLogicalNot)).Tensor({2}).Buffer(8).Buffer(8);
  EXPECT_EQ(MessageOf(elementwise_launch::ReadUnaryLaunch(float_not.View()).status()),
            "LogicalNot takes bool");
}

TEST(ElementwiseLaunchTest, AddNGroupsInputsAsTensorFlowDoes) {
  for (const auto& [inputs, first_group] :
       std::vector<std::pair<size_t, size_t>>{{2, 2}, {8, 8}, {9, 9}, {10, 2}, {16, 8}, {17, 9}}) {
    HandLaunch launch;
    launch.Tensor({3});
    for (size_t i = 0; i <= inputs; ++i) launch.Buffer(12);
    absl::StatusOr<elementwise_launch::AddNLaunch> read =
        elementwise_launch::ReadAddNLaunch(launch.View());
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(read->inputs, inputs);
    EXPECT_EQ(read->first_group, first_group) << inputs << " inputs";
    EXPECT_EQ((read->inputs - read->first_group) % 8, 0u);
  }
  HandLaunch one_input;
  one_input.Tensor({3}).Buffer(12).Buffer(12);
  EXPECT_EQ(MessageOf(elementwise_launch::ReadAddNLaunch(one_input.View()).status()),
            "add-n needs at least 2 inputs and an output, got 2 buffers");
}

TEST(ElementwiseLaunchTest, RangeRefusesUint8BeforeOtherDtypesAndThenSmallBuffers) {
  HandLaunch uint8_range;
  uint8_range.Tensor({4}, DType::kUInt8).Buffer(4).Param(uint64_t{0}).Param(uint64_t{1});
  EXPECT_EQ(MessageOf(elementwise_launch::ReadRangeLaunch(uint8_range.View()).status()),
            "range takes floating, int32 or int64 dtypes");
  HandLaunch bool_range;
  bool_range.Tensor({4}, DType::kBool).Buffer(4).Param(uint64_t{0}).Param(uint64_t{1});
  EXPECT_EQ(MessageOf(elementwise_launch::ReadRangeLaunch(bool_range.View()).status()),
            "dtype 8 is not a floating-point type");
  HandLaunch small;
  small.Tensor({4}, DType::kInt64).Buffer(24).Param(uint64_t{0}).Param(uint64_t{1});
  EXPECT_EQ(elementwise_launch::ReadRangeLaunch(small.View()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ElementwiseLaunchTest, CastNeedsEqualCountsAndATruncateFlag) {
  HandLaunch unequal;
  unequal.Tensor({4}).Tensor({5}, DType::kFloat16).Buffer(16).Buffer(10).Param(uint8_t{0});
  EXPECT_EQ(MessageOf(elementwise_launch::ReadCastLaunch(unequal.View()).status()),
            "cast source and destination differ in element count");
  HandLaunch truncating;
  truncating.Tensor({4}).Tensor({4}, DType::kBFloat16).Buffer(16).Buffer(8).Param(uint8_t{3});
  absl::StatusOr<elementwise_launch::CastLaunch> read =
      elementwise_launch::ReadCastLaunch(truncating.View());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->truncate);
  EXPECT_EQ(read->destination, DType::kBFloat16);
}

// --- Activation -----------------------------------------------------------------------------

TEST(ActivationLaunchTest, AnUnknownModeIsRefusedOnlyWhenThereIsSomethingToCompute) {
  ActivationDescriptorSettings unknown;
  unknown.mode = static_cast<ActivationMode>(77);
  HandLaunch empty;
  empty.Describe(unknown).Tensor({0}).Buffer(0).Buffer(0);
  EXPECT_TRUE(activation_launch::ReadActivationForward(empty.View()).ok());
  HandLaunch four;
  four.Describe(unknown).Tensor({4}).Buffer(16).Buffer(16);
  EXPECT_EQ(MessageOf(activation_launch::ReadActivationForward(four.View()).status()),
            "unknown activation mode 77");
  HandLaunch small;  // the buffers are checked first
  small.Describe(unknown).Tensor({4}).Buffer(16).Buffer(16).Buffer(12);
  EXPECT_TRUE(
      FailsWith(activation_launch::ReadActivationBackward(small.View()).status(),
                "buffer 2 holds 12 bytes"));
}

TEST(ActivationLaunchTest, ReluInt8NeedsAMultipleOfFour) {
  HandLaunch six;
  six.Buffer(8).Buffer(8).Param(activation::ReluInt8Params{6});
  EXPECT_TRUE(
      FailsWith(activation_launch::ReadReluInt8Launch(six.View()).status(),
                "multiple of 4"));
  HandLaunch eight;
  eight.Buffer(8).Buffer(8).Param(activation::ReluInt8Params{8});
  absl::StatusOr<int64_t> count = activation_launch::ReadReluInt8Launch(eight.View());
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 8);
}

// --- Reduction ------------------------------------------------------------------------------

ReduceDescriptorSettings Reduce(ReduceOp op, DType dtype = DType::kFloat32) {
  ReduceDescriptorSettings settings;
  settings.op = op;
  settings.dtype = dtype;
  return settings;
}

// ReadReduceLaunch of a reduction of `op` from a tensor of `in` dims to one of `out` dims, both
// of `dtype` and with buffers of their sizes, with layout parameter `layout`.
absl::StatusOr<reduction_launch::ReduceLaunch> ReadReduce(ReduceOp op, std::vector<int64_t> in,
                                                          std::vector<int64_t> out,
                                                          uint32_t layout,
                                                          DType dtype = DType::kFloat32) {
  const auto bytes = [dtype](const std::vector<int64_t>& dims) {
    uint64_t count = 1;
    for (int64_t d : dims) count *= static_cast<uint64_t>(d);
    return count * DTypeSize(dtype);
  };
  HandLaunch launch;
  launch.Describe(Reduce(op, dtype)).Tensor(in, dtype).Tensor(out, dtype).Buffer(bytes(in))
      .Buffer(bytes(out)).Param(reduction::ReduceLayoutParams{layout});
  return reduction_launch::ReadReduceLaunch(launch.View());
}

TEST(ReductionLaunchTest, TheGeometryHasTheKeptAndReducedIndexSpaces) {
  // [2, 3, 4] with runs kept, reduced, kept
  absl::StatusOr<reduction_launch::ReduceLaunch> read =
      ReadReduce(ReduceOp::kSum, {2, 3, 4}, {2, 4}, 0);
  ASSERT_TRUE(read.ok()) << read.status();
  const reduction_launch::ReduceGeometry& g = read->geometry;
  EXPECT_EQ(read->work, reduction_launch::ReduceWork::kReduce);
  EXPECT_EQ(g.kept_rank, 2);
  EXPECT_EQ(g.reduced_rank, 1);
  EXPECT_EQ(g.per_output, 3);
  EXPECT_TRUE(g.last_run_kept);
  EXPECT_FALSE(g.copies);
  EXPECT_EQ(g.KeptOffset(5), 13);  // output [1, 1]
  EXPECT_EQ(g.ReducedOffset(2), 8);
}

TEST(ReductionLaunchTest, TheWorkFollowsTheLayoutAndTheOpIsCheckedOnlyWhenReducing) {
  // rank 1 kept: a copy, even for an op numeric dtypes do not reduce with
  absl::StatusOr<reduction_launch::ReduceLaunch> copied =
      ReadReduce(ReduceOp::kAll, {5}, {5}, 0);
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(copied->work, reduction_launch::ReduceWork::kCopy);

  absl::StatusOr<reduction_launch::ReduceLaunch> identity =
      ReadReduce(ReduceOp::kMax, {0, 5}, {5}, 1);
  ASSERT_TRUE(identity.ok()) << identity.status();
  EXPECT_EQ(identity->work, reduction_launch::ReduceWork::kFillIdentity);

  EXPECT_EQ(MessageOf(ReadReduce(ReduceOp::kAny, {4, 5}, {5}, 1).status()),
            "reduce op 6 does not apply to this dtype");
  EXPECT_EQ(MessageOf(ReadReduce(ReduceOp::kSum, {4}, {}, 1, DType::kBool).status()),
            "bool tensors reduce only with all/any");
  EXPECT_EQ(MessageOf(ReadReduce(ReduceOp::kSum, {4}, {}, 1, DType::kInt32).status()),
            "dtype 5 is not a floating-point type");
}

TEST(ReductionLaunchTest, ArgReduceChecksTheIndexDtypeAfterTheInputBuffer) {
  HandLaunch short_x_float_indices;
  short_x_float_indices.Describe(Reduce(ReduceOp::kMax)).Tensor({2, 3, 1}).Tensor({2, 1})
      .Buffer(8).Buffer(8);
  EXPECT_TRUE(
      FailsWith(reduction_launch::ReadArgReduceLaunch(short_x_float_indices.View()).status(),
                "buffer 0 holds 8 bytes"));
  HandLaunch good_x;
  good_x.Describe(Reduce(ReduceOp::kMax)).Tensor({2, 3, 1}).Tensor({2, 1}).Buffer(24).Buffer(8);
  EXPECT_EQ(MessageOf(reduction_launch::ReadArgReduceLaunch(good_x.View()).status()),
            "arg-reduce output must be int32 or int64");
}

// --- Softmax, scan and top-k ----------------------------------------------------------------

TEST(SoftmaxLaunchTest, CrossEntropyOperandsBroadcastAlongDimensionsOfOne) {
  HandLaunch launch;
  launch.Tensor({1, 5}).Tensor({3, 5}).Tensor({3, 5}).Buffer(20).Buffer(60).Buffer(12)
      .Buffer(60);
  absl::StatusOr<softmax_launch::CrossEntropyLaunch> read =
      softmax_launch::ReadCrossEntropyLaunch(launch.View());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->logits_layout.row_stride, 0);
  EXPECT_EQ(read->logits_layout.col_stride, 1);
  EXPECT_EQ(read->labels_layout.row_stride, 5);
  EXPECT_EQ(read->logits_count, 5);
  HandLaunch bad;
  bad.Tensor({2, 5}).Tensor({3, 5}).Tensor({3, 5}).Buffer(40).Buffer(60).Buffer(12).Buffer(60);
  EXPECT_TRUE(
      FailsWith(softmax_launch::ReadCrossEntropyLaunch(bad.View()).status(),
                "broadcastable to the backprop shape"));
}

TEST(SoftmaxLaunchTest, SparseLabelsAreADeviceBufferOfInt32OrInt64) {
  HandLaunch launch;
  launch.Tensor({2, 3}).Tensor({2}, DType::kInt32).Buffer(24).Buffer(8).Buffer(8).Buffer(24);
  absl::StatusOr<softmax_launch::SparseCrossEntropyLaunch> read =
      softmax_launch::ReadSparseCrossEntropyLaunch(launch.View());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->labels_on_device);
  EXPECT_EQ(read->label_dtype, DType::kInt32);
  EXPECT_EQ(read->batch, 2);
  EXPECT_EQ(read->classes, 3);
  HandLaunch int64_labels;
  int64_labels.Tensor({2, 3}).Tensor({2}, DType::kInt64).Buffer(24).Buffer(16).Buffer(8)
      .Buffer(24);
  ASSERT_TRUE(softmax_launch::ReadSparseCrossEntropyLaunch(int64_labels.View()).ok());
  // int64 labels in a buffer sized for int32 ones, float labels, and a labels tensor that does
  // not have one value per row are refused.
  HandLaunch short_labels;
  short_labels.Tensor({2, 3}).Tensor({2}, DType::kInt64).Buffer(24).Buffer(8).Buffer(8)
      .Buffer(24);
  EXPECT_FALSE(softmax_launch::ReadSparseCrossEntropyLaunch(short_labels.View()).ok());
  HandLaunch float_labels;
  float_labels.Tensor({2, 3}).Tensor({2}).Buffer(24).Buffer(8).Buffer(8).Buffer(24);
  EXPECT_EQ(MessageOf(softmax_launch::ReadSparseCrossEntropyLaunch(float_labels.View()).status()),
            "sparse cross-entropy labels must be int32 or int64");
  HandLaunch three_labels;
  three_labels.Tensor({2, 3}).Tensor({3}, DType::kInt32).Buffer(24).Buffer(12).Buffer(8)
      .Buffer(24);
  EXPECT_EQ(MessageOf(softmax_launch::ReadSparseCrossEntropyLaunch(three_labels.View()).status()),
            "sparse cross-entropy takes labels [2] for logits [2, 3]");
}

TEST(SoftmaxLaunchTest, HostSparseLabelsTravelInTheParametersOnePerRow) {
  HandLaunch launch;
  launch.Tensor({2, 3}).Buffer(24).Buffer(8).Buffer(24).Param(uint32_t{2}).Param(int64_t{0})
      .Param(int64_t{7});
  absl::StatusOr<softmax_launch::SparseCrossEntropyLaunch> read =
      softmax_launch::ReadSparseCrossEntropyHostLabelsLaunch(launch.View());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_FALSE(read->labels_on_device);
  EXPECT_EQ(read->labels, (std::vector<int64_t>{0, 7}));  // 7: a NaN row, not an error
  HandLaunch one_label;
  one_label.Tensor({2, 3}).Buffer(24).Buffer(8).Buffer(24).Param(uint32_t{1}).Param(int64_t{0});
  EXPECT_EQ(MessageOf(
                softmax_launch::ReadSparseCrossEntropyHostLabelsLaunch(one_label.View()).status()),
            "expected 2 labels, the launch carries 1");
}

TEST(ScanTopKLaunchTest, ScansAndTopKTakeTheSignedDtypes) {
  HandLaunch uint8_scan;
  uint8_scan.Describe(Reduce(ReduceOp::kSum, DType::kUInt8)).Tensor({1, 4, 1}, DType::kUInt8)
      .Buffer(4).Buffer(4).Param(reduction::ScanParams{});
  EXPECT_EQ(MessageOf(scan_topk_launch::ReadScanLaunch(uint8_scan.View()).status()),
            "scans take floating, int32 or int64 dtypes");
  HandLaunch int32_scan;
  int32_scan.Describe(Reduce(ReduceOp::kProd, DType::kInt32)).Tensor({2, 4, 3}, DType::kInt32)
      .Buffer(96).Buffer(96).Param(reduction::ScanParams{1, 0});
  absl::StatusOr<scan_topk_launch::ScanLaunch> scan =
      scan_topk_launch::ReadScanLaunch(int32_scan.View());
  ASSERT_TRUE(scan.ok()) << scan.status();
  EXPECT_TRUE(scan->product);
  EXPECT_TRUE(scan->exclusive);
  EXPECT_FALSE(scan->reverse);
  EXPECT_EQ(scan->inner, 3);

  HandLaunch k_too_large;
  k_too_large.Tensor({2, 3}).Tensor({2, 4}, DType::kInt32).Buffer(24).Buffer(32).Buffer(32);
  EXPECT_EQ(MessageOf(scan_topk_launch::ReadTopKLaunch(k_too_large.View()).status()),
            "top-k needs k <= cols");
  HandLaunch bool_top_k;
  bool_top_k.Tensor({2, 3}, DType::kBool).Tensor({2, 1}, DType::kInt32).Buffer(6).Buffer(2)
      .Buffer(8);
  EXPECT_EQ(MessageOf(scan_topk_launch::ReadTopKLaunch(bool_top_k.View()).status()),
            "top-k takes floating, int32 or int64 values");
}

TEST(ScanTopKLaunchTest, InTopKChecksTheTargetsDtypeAfterPredictionsAndOutput) {
  HandLaunch float_targets;
  float_targets.Tensor({2, 3}).Tensor({2}).Buffer(24).Buffer(8).Buffer(1).Param(int64_t{1});
  EXPECT_TRUE(
      FailsWith(scan_topk_launch::ReadInTopKLaunch(float_targets.View()).status(),
                "buffer 2 holds 1 bytes"));
  HandLaunch good_output;
  good_output.Tensor({2, 3}).Tensor({2}).Buffer(24).Buffer(8).Buffer(2).Param(int64_t{1});
  EXPECT_EQ(MessageOf(scan_topk_launch::ReadInTopKLaunch(good_output.View()).status()),
            "in-top-k targets must be int32 or int64");
}

// --- Dtype sets, integer arithmetic, conversions ----------------------------------------------

TEST(DtypeSetsTest, RefuseWithTheFloatingDispatchMessage) {
  const absl::Status floating = ReaderDispatch::Floating(DType::kUInt8, AcceptDType());
  EXPECT_EQ(DispatchReducible<ReaderDispatch>(DType::kUInt8, AcceptDType()), floating);
  EXPECT_EQ(DispatchSigned<ReaderDispatch>(DType::kUInt8, AcceptDType()), floating);
  EXPECT_TRUE(DispatchReducible<ReaderDispatch>(DType::kInt64, AcceptDType()).ok());
  EXPECT_FALSE(DispatchReducible<ReaderDispatch>(DType::kInt32, AcceptDType()).ok());
  EXPECT_TRUE(DispatchSigned<ReaderDispatch>(DType::kInt32, AcceptDType()).ok());
  EXPECT_TRUE(DispatchSigned<ReaderDispatch>(DType::kBFloat16, AcceptDType()).ok());
}

TEST(IntegerArithmeticTest, DivisionFloorsWrapsAndReportsAZeroDivisor) {
  bool zero = false;
  EXPECT_EQ(IntegerDivide<int32_t>(-7, 2, &zero), -3);
  EXPECT_EQ(IntegerFloorDivide<int32_t>(-7, 2, &zero), -4);
  EXPECT_EQ(IntegerFloorModulo<int32_t>(-7, 2, &zero), 1);
  EXPECT_EQ(IntegerFloorModulo<int32_t>(7, -2, &zero), -1);
  const int64_t lowest = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(IntegerDivide<int64_t>(lowest, -1, &zero), lowest);
  EXPECT_EQ(IntegerFloorModulo<int64_t>(lowest, -1, &zero), 0);
  EXPECT_EQ(IntegerFloorDivide<uint8_t>(250, 7, &zero), 35);
  EXPECT_FALSE(zero);
  EXPECT_EQ(IntegerFloorDivide<int32_t>(5, 0, &zero), 0);
  EXPECT_TRUE(zero);
}

TEST(IntegerArithmeticTest, PowersSquareRepeatedlyAndNegativeExponentsGiveTheGpuValues) {
  EXPECT_EQ(IntegerPower<int32_t>(3, 4), 81);
  EXPECT_EQ(IntegerPower<uint8_t>(2, 9), 0);  // wraps
  EXPECT_EQ(IntegerPower<int64_t>(-1, -3), -1);
  EXPECT_EQ(IntegerPower<int64_t>(-1, -4), 1);
  EXPECT_EQ(IntegerPower<int32_t>(1, -5), 1);
  EXPECT_EQ(IntegerPower<int32_t>(2, -1), 0);
  EXPECT_EQ(WrapNegate<int32_t>(std::numeric_limits<int32_t>::min()),
            std::numeric_limits<int32_t>::min());
}

TEST(ElementConversionsTest, OutOfRangeValuesGiveTheCpuCastsBits) {
  EXPECT_EQ(FloatingToInteger<int32_t>(std::nan("")), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(FloatingToInteger<int32_t>(-3.9), -3);
  EXPECT_EQ(FloatingToInteger<int64_t>(1e300), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(FloatingToInteger<uint8_t>(300.0), 255);
  EXPECT_EQ(FloatingToInteger<uint8_t>(-5.0), 0);
  EXPECT_EQ(SaturatingInteger<int32_t>(1e12), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(SaturatingInteger<uint8_t>(-1.0), 0);
  EXPECT_EQ(SaturatingInteger<int64_t>(std::nan("")), 0);
}

}  // namespace
}  // namespace vgpu
