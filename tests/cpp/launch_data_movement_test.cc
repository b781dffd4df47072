// The data movement family's launch readers (backend/launch/data_movement_launch.h) and the
// element-size rule of the kernels that move bytes (backend/launch/element_bytes.h), without an
// executor: which parameter blocks they refuse, with which message, and the plans and
// geometries they build for both executors.
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "param_only_launch.h"
#include "plugin/backend/launch/data_movement_launch.h"
#include "plugin/backend/launch/element_bytes.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/kernels/mirror_pad_params.h"
#include "plugin/protocol/kernels/data_movement.h"
#include "plugin/protocol/launch_params.h"

namespace vgpu {
namespace {

using data_movement_launch::BufferCopy;
using data_movement_launch::CheckStridedCopyBounds;
using data_movement_launch::MirrorPadFolds;
using data_movement_launch::MirrorPadFoldsOf;
using data_movement_launch::MirrorPadLaunch;
using data_movement_launch::MirrorSource;
using data_movement_launch::PadLaunch;
using data_movement_launch::ReverseSequenceGeometry;
using data_movement_launch::SimplifyStridedCopy;
using data_movement_launch::StridedCopy;

// The readers' launches, written in their parameter layouts (protocol/kernels/data_movement.h).
using Ints = absl::Span<const int64_t>;

// A launch of `buffers` buffers whose parameter block holds the element size, then the int64
// arrays `arrays` in order; the layouts that go on append the rest.
ParamOnlyLaunch ArraysLaunch(uint32_t element_size, std::initializer_list<Ints> arrays,
                             size_t buffers = 2) {
  ParamOnlyLaunch launch(buffers);
  ParamWriter params = launch.Params();
  params.Put(element_size);
  for (Ints array : arrays) params.PutArray<int64_t>(array);
  return launch;
}

// Transpose: element size, x's dims, perm.
ParamOnlyLaunch TransposeParams(uint32_t element_size, Ints dims, absl::Span<const int32_t> perm) {
  ParamOnlyLaunch launch = ArraysLaunch(element_size, {dims});
  launch.Params().PutArray<int32_t>(perm);
  return launch;
}

// StridedSlice and its gradient: element size, x's dims, begin, strides, y's dims.
ParamOnlyLaunch StridedSliceParams(uint32_t element_size, Ints x_dims, Ints begin, Ints strides,
                                   Ints y_dims) {
  return ArraysLaunch(element_size, {x_dims, begin, strides, y_dims});
}

// Pad: element size, x's dims, the pads before and after, the pad value's bits.
ParamOnlyLaunch PadParams(uint32_t element_size, Ints x_dims, Ints before, Ints after,
                          uint64_t pad_value) {
  ParamOnlyLaunch launch = ArraysLaunch(element_size, {x_dims, before, after});
  launch.Params().Put(pad_value);
  return launch;
}

// Tile: element size, x's dims, y's dims.
ParamOnlyLaunch TileParams(uint32_t element_size, Ints x_dims, Ints y_dims) {
  return ArraysLaunch(element_size, {x_dims, y_dims});
}

// Concat and Split: element size, outer, each piece's inner size.
ParamOnlyLaunch ConcatParams(size_t buffers, uint32_t element_size, int64_t outer, Ints inner) {
  ParamOnlyLaunch launch(buffers);
  launch.Params().Put(element_size).Put(outer).PutArray<int64_t>(inner);
  return launch;
}

// Reverse: element size, dims, a flag per dimension.
ParamOnlyLaunch ReverseParams(uint32_t element_size, Ints dims, absl::Span<const uint8_t> flags) {
  ParamOnlyLaunch launch = ArraysLaunch(element_size, {dims});
  launch.Params().PutArray<uint8_t>(flags);
  return launch;
}

// ReverseSequence: element size, the lengths' element size, x's dims, batch_dim, seq_dim.
ParamOnlyLaunch ReverseSequenceParams(uint32_t element_size, uint32_t length_size, Ints dims,
                                      int32_t batch_dim, int32_t seq_dim) {
  ParamOnlyLaunch launch(3);
  launch.Params()
      .Put(element_size)
      .Put(length_size)
      .PutArray<int64_t>(dims)
      .Put(batch_dim)
      .Put(seq_dim);
  return launch;
}

bool MessageHas(const absl::Status& status, const std::string& text) {
  return status.message().find(text) != std::string::npos;
}

TEST(ElementBytes, OnlySizesOneTwoFourAndEightAreElementSizes) {
  for (uint32_t size : {1u, 2u, 4u, 8u}) EXPECT_TRUE(CheckElementSize(size).ok()) << size;
  const absl::Status three = CheckElementSize(3);
  EXPECT_EQ(three.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(three.message(), "element size 3 is not 1, 2, 4 or 8");
}

TEST(ElementBytes, MisalignedAddressesMoveBytewise) {
  alignas(8) uint8_t storage[16] = {};
  size_t seen = 0;
  bool word = false;
  auto record = [&](auto element) {
    seen = sizeof(element);
    word = std::is_integral_v<decltype(element)>;
    return absl::OkStatus();
  };
  ASSERT_TRUE(DispatchElementBytes(4, {storage, storage + 8}, record).ok());
  EXPECT_EQ(seen, 4u);
  EXPECT_TRUE(word);
  ASSERT_TRUE(DispatchElementBytes(4, {storage, storage + 2}, record).ok());
  EXPECT_EQ(seen, 4u);
  EXPECT_FALSE(word);  // UnalignedElement<4>
  ASSERT_TRUE(DispatchElementBytes(1, {storage + 1}, record).ok());
  EXPECT_TRUE(word);  // a byte is always aligned
  EXPECT_FALSE(DispatchElementBytes(16, {storage}, record).ok());
}

TEST(StridedCopyPlan, BoundsRefuseAReadOrWriteOutsideTheBuffers) {
  StridedCopy copy;
  copy.rank = 1;
  copy.dims[0] = 4;
  copy.src_strides[0] = -1;
  copy.dst_strides[0] = 1;
  copy.src_offset = 3;  // reads 3, 2, 1, 0
  EXPECT_TRUE(CheckStridedCopyBounds(copy, 4, 4).ok());
  copy.src_offset = 2;  // reads -1
  EXPECT_TRUE(MessageHas(CheckStridedCopyBounds(copy, 4, 4), "reads outside"));
  copy.src_offset = 3;
  copy.dst_strides[0] = 2;  // writes 6
  EXPECT_TRUE(MessageHas(CheckStridedCopyBounds(copy, 4, 4), "writes outside"));
  copy.dims[0] = 0;  // moves nothing: anything goes
  EXPECT_TRUE(CheckStridedCopyBounds(copy, 0, 0).ok());
}

TEST(StridedCopyPlan, SimplifyDropsUnitDimensionsAndMergesContiguousOnes) {
  StridedCopy copy;
  copy.element_size = 4;
  copy.rank = 3;
  const int64_t dims[] = {2, 1, 3}, src[] = {3, 3, 1}, dst[] = {3, 7, 1};
  for (int d = 0; d < 3; ++d) {
    copy.dims[d] = dims[d];
    copy.src_strides[d] = src[d];
    copy.dst_strides[d] = dst[d];
  }
  const StridedCopy simple = SimplifyStridedCopy(copy);
  ASSERT_EQ(simple.rank, 1);
  EXPECT_EQ(simple.dims[0], 6);
  EXPECT_EQ(simple.src_strides[0], 1);
  EXPECT_EQ(simple.dst_strides[0], 1);
  EXPECT_EQ(simple.element_size, 4u);
}

TEST(StridedCopyPlan, APlanWithAZeroDimensionCountsNoElement) {
  StridedCopy copy;
  copy.rank = 3;
  copy.dims[0] = int64_t{1} << 40;
  copy.dims[1] = int64_t{1} << 40;
  copy.dims[2] = 0;
  EXPECT_EQ(copy.ElementCount(), 0);
}

TEST(TransposeLaunch, ReadsAPermutationIntoPermutedSourceStrides) {
  const ParamOnlyLaunch launch = TransposeParams(2, {2, 3, 4}, {2, 0, 1});
  absl::StatusOr<BufferCopy> copy = data_movement_launch::ReadTransposeLaunch(launch.View());
  ASSERT_TRUE(copy.ok()) << copy.status();
  ASSERT_EQ(copy->plan.rank, 3);
  EXPECT_EQ(copy->plan.dims[0], 4);
  EXPECT_EQ(copy->plan.src_strides[0], 1);
  EXPECT_EQ(copy->plan.src_strides[1], 12);
  EXPECT_EQ(copy->plan.dst_strides[0], 6);
  EXPECT_EQ(copy->src_elements, 24);
  EXPECT_EQ(copy->SrcBytes(), 48u);
  EXPECT_EQ(copy->dst_buffer, 1u);
}

TEST(TransposeLaunch, RefusesARepeatedAxisAndAWrongBufferCount) {
  const ParamOnlyLaunch launch = TransposeParams(4, {2, 3}, {1, 1});
  EXPECT_EQ(data_movement_launch::ReadTransposeLaunch(launch.View()).status().message(),
            "perm is no permutation");
  const ParamOnlyLaunch three(3);
  EXPECT_EQ(data_movement_launch::ReadTransposeLaunch(three.View()).status().message(),
            "expected 2 buffers, got 3");
}

TEST(StridedSliceLaunch, RefusesASliceThatLeavesItsDimension) {
  const ParamOnlyLaunch launch = StridedSliceParams(4, {5}, {4}, {-2}, {3});  // reads 4, 2, 0
  absl::StatusOr<BufferCopy> inside = data_movement_launch::ReadStridedSliceLaunch(launch.View());
  ASSERT_TRUE(inside.ok()) << inside.status();
  EXPECT_EQ(inside->plan.src_offset, 4);
  EXPECT_EQ(inside->plan.src_strides[0], -2);

  const ParamOnlyLaunch outside = StridedSliceParams(4, {5}, {4}, {-2}, {4});  // would read -2
  EXPECT_EQ(data_movement_launch::ReadStridedSliceLaunch(outside.View()).status().message(),
            "slice leaves dimension 0 of size 5");
}

TEST(StridedSliceLaunch, AHugeStrideOfADimensionThatSelectsOneElementIsNeverMultipliedOut) {
  // x's first dimension steps by 2^48 elements; a stride of 2^32 there would overflow int64
  // (UndefinedBehaviorSanitizer caught it in the mutated-seed fuzz test), but one element never
  // steps.
  const int64_t big = int64_t{1} << 24;
  const ParamOnlyLaunch launch =
      StridedSliceParams(4, {4, big, big}, {1, 0, 0}, {int64_t{1} << 32, 1, 1}, {1, 1, 1});
  absl::StatusOr<BufferCopy> slice = data_movement_launch::ReadStridedSliceLaunch(launch.View());
  ASSERT_TRUE(slice.ok()) << slice.status();
  EXPECT_EQ(slice->plan.src_offset, int64_t{1} << 48);
  // An empty slice reads nothing, whatever its (unchecked) begin.
  const ParamOnlyLaunch empty =
      StridedSliceParams(4, {4, big, big}, {3, big - 1, big - 1}, {1, 1, 1}, {0, 1, 1});
  EXPECT_TRUE(data_movement_launch::ReadStridedSliceLaunch(empty.View()).ok());
}

TEST(StridedSliceLaunch, TheGradientWritesWhereTheSliceReads) {
  const ParamOnlyLaunch launch = StridedSliceParams(8, {6}, {1}, {2}, {3});
  absl::StatusOr<BufferCopy> scatter = data_movement_launch::ReadSliceScatterLaunch(launch.View());
  ASSERT_TRUE(scatter.ok()) << scatter.status();
  EXPECT_EQ(scatter->src_elements, 3);
  EXPECT_EQ(scatter->dst_elements, 6);
  EXPECT_EQ(scatter->plan.dst_offset, 1);
  EXPECT_EQ(scatter->plan.dst_strides[0], 2);
  EXPECT_EQ(scatter->plan.src_strides[0], 1);
}

TEST(PadLaunch, RefusesAnOutputWhoseElementCountOverflows) {
  // Every array is bounded (the pads' products are 0), the padded dims [2^40, 2^40] are not.
  const ParamOnlyLaunch launch =
      PadParams(1, {0, 0}, {int64_t{1} << 40, 0}, {0, int64_t{1} << 40}, 0);
  const absl::Status status = data_movement_launch::ReadPadLaunch(launch.View()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(MessageHas(status, "the padded output")) << status;
}

TEST(PadLaunch, PlacesXAtThePadsOfY) {
  const ParamOnlyLaunch launch = PadParams(2, {2, 2}, {1, 0}, {0, 3}, 7);
  absl::StatusOr<PadLaunch> pad = data_movement_launch::ReadPadLaunch(launch.View());
  ASSERT_TRUE(pad.ok()) << pad.status();
  EXPECT_TRUE(pad->padded);
  EXPECT_EQ(pad->pad_value, 7u);
  EXPECT_EQ(pad->copy.dst_elements, 15);  // [3, 5]
  EXPECT_EQ(pad->copy.plan.dst_offset, 5);
  EXPECT_EQ(pad->copy.plan.dst_strides[0], 5);
}

TEST(TileLaunch, AnEmptyOutputIsNotCheckedForMultiples) {
  const ParamOnlyLaunch launch = TileParams(4, {3, 2}, {0, 5});
  absl::StatusOr<BufferCopy> empty = data_movement_launch::ReadTileLaunch(launch.View());
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->Empty());

  const ParamOnlyLaunch odd = TileParams(4, {3, 2}, {6, 5});
  EXPECT_EQ(data_movement_launch::ReadTileLaunch(odd.View()).status().message(),
            "dimension 1 of y (5) is no multiple of x's (2)");
}

TEST(ConcatLaunch, CopiesEachPieceIntoItsColumnsAndCountsItsBuffers) {
  const ParamOnlyLaunch launch = ConcatParams(3, 4, 2, {3, 5});
  absl::StatusOr<std::vector<BufferCopy>> pieces =
      data_movement_launch::ReadConcatLaunch(launch.View());
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  ASSERT_EQ(pieces->size(), 2u);
  EXPECT_EQ((*pieces)[1].src_buffer, 1u);
  EXPECT_EQ((*pieces)[1].dst_buffer, 2u);
  EXPECT_EQ((*pieces)[1].plan.dst_offset, 3);
  EXPECT_EQ((*pieces)[1].plan.dst_strides[0], 8);
  EXPECT_EQ((*pieces)[1].dst_elements, 16);

  absl::StatusOr<std::vector<BufferCopy>> split =
      data_movement_launch::ReadSplitLaunch(launch.View());
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ((*split)[0].src_buffer, 0u);
  EXPECT_EQ((*split)[0].dst_buffer, 1u);

  const ParamOnlyLaunch four = ConcatParams(4, 4, 2, {3, 5});
  EXPECT_EQ(data_movement_launch::ReadConcatLaunch(four.View()).status().message(),
            "expected 3 buffers, got 4");
}

TEST(ReverseLaunch, FlagsAreZeroOrOne) {
  const ParamOnlyLaunch launch = ReverseParams(1, {4, 2}, {1, 2});
  EXPECT_EQ(data_movement_launch::ReadReverseLaunch(launch.View()).status().message(),
            "reverse: flags must be 0 or 1");

  const ParamOnlyLaunch good = ReverseParams(1, {4, 2}, {1, 0});
  absl::StatusOr<BufferCopy> copy = data_movement_launch::ReadReverseLaunch(good.View());
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->plan.src_offset, 6);
  EXPECT_EQ(copy->plan.src_strides[0], -2);
}

ReverseSequenceGeometry SequenceGeometry(std::initializer_list<int64_t> dims, int32_t batch_dim,
                                         int32_t seq_dim) {
  const ParamOnlyLaunch launch = ReverseSequenceParams(4, 4, dims, batch_dim, seq_dim);
  absl::StatusOr<ReverseSequenceGeometry> g =
      data_movement_launch::ReadReverseSequenceLaunch(launch.View());
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : ReverseSequenceGeometry{};
}

TEST(ReverseSequenceLaunch, RefusesBadDimensionsAndLengthSizes) {
  ParamOnlyLaunch launch(3);
  ParamWriter params = launch.Params();
  params.Put<uint32_t>(4);
  params.Put<uint32_t>(2);
  EXPECT_EQ(data_movement_launch::ReadReverseSequenceLaunch(launch.View()).status().message(),
            "reverse_sequence: lengths must be int32 or int64");
  const ParamOnlyLaunch same = ReverseSequenceParams(4, 8, {2, 3}, 1, 1);
  EXPECT_EQ(data_movement_launch::ReadReverseSequenceLaunch(same.View()).status().message(),
            "reverse_sequence: bad batch_dim / seq_dim");
}

TEST(ReverseSequenceLaunch, ReversesEachSequenceUpToItsClampedLength) {
  // x [batch 2, time 3, features 2]: runs are (b, t) pairs of 2 elements.
  const ReverseSequenceGeometry g = SequenceGeometry({2, 3, 2}, 0, 1);
  EXPECT_EQ(g.inner, 2);
  EXPECT_EQ(g.Runs(), 6);
  // Lengths 2 and 7 (clamped to 3), little-endian int32 at an odd address.
  uint8_t bytes[9] = {0xee, 2, 0, 0, 0, 7, 0, 0, 0};
  const uint8_t* lengths = bytes + 1;
  EXPECT_EQ(data_movement_launch::SequenceLength(g, lengths, 1), 3);
  const int64_t expected[] = {1, 0, 2, 5, 4, 3};
  for (int64_t run = 0; run < 6; ++run) {
    EXPECT_EQ(data_movement_launch::ReverseSequenceSourceRun(g, lengths, run), expected[run])
        << run;
  }
  const uint8_t negative[4] = {0xff, 0xff, 0xff, 0xff};  // -1 reverses nothing
  EXPECT_EQ(data_movement_launch::SequenceLength(g, negative, 0), 0);
}

TEST(ReverseSequenceLaunch, AnEmptyInputHasNoRuns) {
  const int64_t huge = int64_t{1} << 50;
  const ReverseSequenceGeometry g = SequenceGeometry({0, 2, huge, huge}, 0, 1);
  EXPECT_EQ(g.count, 0);
  EXPECT_EQ(g.Runs(), 0);
}

TEST(MirrorPadLaunch, ReflectPadsMustBeSmallerThanTheDimension) {
  const ParamOnlyLaunch launch(
      2, MirrorPadParams(4, {3}, {3}, {0}, data_movement::MirrorPadMode::kReflect));
  EXPECT_EQ(data_movement_launch::ReadMirrorPadLaunch(launch.View()).status().message(),
            "mirror pad: dimension 0 of size 3 cannot be padded by 3 and 0");

  const ParamOnlyLaunch symmetric(
      2, MirrorPadParams(4, {3}, {3}, {0}, data_movement::MirrorPadMode::kSymmetric));
  absl::StatusOr<MirrorPadLaunch> pad = data_movement_launch::ReadMirrorPadLaunch(symmetric.View());
  ASSERT_TRUE(pad.ok()) << pad.status();
  EXPECT_EQ(pad->g.padded_count, 6);
  // SYMMETRIC [a b c] padded by 3 before: c b a a b c.
  const int64_t expected[] = {2, 1, 0, 0, 1, 2};
  for (int64_t p = 0; p < 6; ++p) EXPECT_EQ(MirrorSource(pad->g, 0, p), expected[p]) << p;
}

TEST(MirrorPadLaunch, ADimensionOfTheLowestSizeIsRefusedWithoutOverflow) {
  // A hostile size of INT64_MIN: the pad limit (size - 1 for REFLECT) is not computed from it
  // (UndefinedBehaviorSanitizer caught that in the mutated-seed fuzz test).
  const ParamOnlyLaunch launch(2, MirrorPadParams(4, {std::numeric_limits<int64_t>::min()}, {0},
                                                  {0}, data_movement::MirrorPadMode::kReflect));
  EXPECT_TRUE(absl::IsInvalidArgument(
      data_movement_launch::ReadMirrorPadLaunch(launch.View()).status()));
}

TEST(MirrorPadLaunch, TheGradientFoldsEveryPaddedDimensionTheLastIntoDx) {
  const ParamOnlyLaunch launch(
      2, MirrorPadParams(static_cast<uint32_t>(DType::kFloat32), {2, 3, 4}, {1, 0, 2}, {0, 0, 1},
                         data_movement::MirrorPadMode::kReflect));
  absl::StatusOr<data_movement_launch::MirrorPadGradLaunch> grad =
      data_movement_launch::ReadMirrorPadGradLaunch(launch.View());
  ASSERT_TRUE(grad.ok()) << grad.status();
  EXPECT_EQ(grad->dtype, DType::kFloat32);
  const MirrorPadFolds folds = MirrorPadFoldsOf(grad->g);
  ASSERT_EQ(folds.count, 2);
  // Dimension 0 of dy [3, 3, 7] first, into scratch [2, 3, 7]; then dimension 2 into dx.
  EXPECT_EQ(folds.folds[0].outer, 1);
  EXPECT_EQ(folds.folds[0].inner, 21);
  EXPECT_FALSE(folds.folds[0].into_dx);
  EXPECT_EQ(folds.folds[1].outer, 6);
  EXPECT_EQ(folds.folds[1].padded, 7);
  EXPECT_EQ(folds.folds[1].count, 24);
  EXPECT_TRUE(folds.folds[1].into_dx);
  // REFLECT, 2 before and 1 after x's 4 positions: padded positions 1 and 0 mirror x's 1 and 2,
  // padded position 6 mirrors x's 2; x's 0 and 3 receive no mirrored term.
  const data_movement_launch::MirrorPadFold& last = folds.folds[1];
  EXPECT_EQ(data_movement_launch::MirrorFoldHead(last, 1), 1);
  EXPECT_EQ(data_movement_launch::MirrorFoldHead(last, 2), 0);
  EXPECT_EQ(data_movement_launch::MirrorFoldTail(last, 2), 6);
  for (int64_t j : {0, 3}) {
    EXPECT_EQ(data_movement_launch::MirrorFoldHead(last, j), -1) << j;
    EXPECT_EQ(data_movement_launch::MirrorFoldTail(last, j), -1) << j;
  }
}

}  // namespace
}  // namespace vgpu
