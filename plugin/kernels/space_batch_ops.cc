// TensorFlow op kernels that move spatial blocks into the batch and back, as compositions of the
// data movement family's byte-moving kernels (protocol/kernels/data_movement.h), so that neither
// executor needs a kernel of its own for them:
//   SpaceToBatchND = kPad of the blocked dimensions into a scratch buffer (only when a padding
//                    is not zero), then one kTranspose of the padded tensor viewed as blocks,
//                    the block offsets moved in front of the batch;
//   BatchToSpaceND = one kTranspose the other way, the block offsets moved back beside the
//                    dimensions they came from (into a scratch buffer when a crop is not zero),
//                    then kStridedSlice of the cropped box.
// SpaceToBatch and BatchToSpace (a block_size attribute, 4-D input) are the same with the block
// [block_size, block_size]. TensorFlow rewrites a dilated convolution into SpaceToBatchND, the
// convolution and BatchToSpaceND (a dilated Conv1D in Keras: a WaveNet or TCN layer), so
// without these kernels every such layer copied its input to the host and back in both passes
// of every step. Inputs are checked as TensorFlow's kernels check them (spacetobatch_op.cc,
// batchtospace_op.cc: same conditions, same words).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/kernels/data_movement_launch.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/protocol/kernels/data_movement.h"

namespace vgpu {
namespace {

using Dims = std::vector<int64_t>;
using data_movement::kMaxDataMovementRank;

// TensorFlow's bound on the blocked dimensions left after folding (kMaxSpaceToBatchBlockDims).
constexpr int kMaxBlockedDimensions = 4;

// Which way the op moves the blocks.
enum class Direction { kSpaceToBatch, kBatchToSpace };

constexpr const char* PadsName(Direction direction) {
  return direction == Direction::kSpaceToBatch ? "paddings" : "crops";
}

// The op's arguments, reduced as TensorFlow reduces them: block dimensions of size 1 without
// padding (or crop) at the front fold into the batch, those at the back into the depth. What is
// left is the tensor of the space side as [batch, space..., depth] and its `blocked` dimensions.
struct BlockedView {
  int64_t batch = 1;     // the space side's batch with the leading folded dimensions
  struct Dimension {
    int64_t size = 0;    // on the space side: unpadded (SpaceToBatch) or cropped (BatchToSpace)
    int64_t block = 1;
    int64_t before = 0;  // padding or crop before and after
    int64_t after = 0;
  };
  std::vector<Dimension> blocked;
  int64_t depth = 1;     // the trailing folded dimensions and the rest of the tensor
  int64_t block_product = 1;
  Dims output_dims;      // the op's output, in TensorFlow's (unfolded) terms
};

// Reads block_shape and paddings (or crops) as TensorFlow checks them and folds what it can.
// `x_dims` is the op's input.
absl::StatusOr<BlockedView> ReadBlockedView(Direction direction, const Dims& x_dims,
                                            const Dims& block_shape_dims, const Dims& block_shape,
                                            const Dims& pads_dims, const Dims& pads) {
  const char* pads_name = PadsName(direction);
  if (block_shape_dims.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_shape rank should be 1 instead of ", block_shape_dims.size()));
  }
  const int block_dims = static_cast<int>(block_shape_dims[0]);
  const int rank = static_cast<int>(x_dims.size());
  if (rank < 1 + block_dims) {
    return absl::InvalidArgumentError(absl::StrCat("input rank should be >= ", 1 + block_dims,
                                                   " instead of ", rank));
  }
  if (pads_dims.size() != 2 || pads_dims[0] != block_dims || pads_dims[1] != 2) {
    return absl::InvalidArgumentError(absl::StrCat(pads_name, " should have shape [", block_dims,
                                                   ", 2] instead of ", ShapeString(pads_dims)));
  }
  auto foldable = [&](int d) {
    return pads[2 * d] == 0 && pads[2 * d + 1] == 0 && block_shape[d] == 1;
  };
  int prefix = 0;
  while (prefix < block_dims && foldable(prefix)) ++prefix;
  int suffix = 0;
  while (suffix < block_dims - prefix && foldable(block_dims - 1 - suffix)) ++suffix;

  BlockedView view;
  bool overflow = false;
  for (int d = 0; d < block_dims; ++d) {
    if (direction == Direction::kSpaceToBatch && block_shape[d] < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "All values in block_shape must be positive, got value, ", block_shape[d],
          " at index ", d, "."));
    }
    overflow = overflow ||
               __builtin_mul_overflow(view.block_product, block_shape[d], &view.block_product);
  }
  if (overflow) view.block_product = -1;
  if (view.block_product <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Product of block sizes must be positive, got ", view.block_product));
  }
  const int64_t x_batch = x_dims[0];
  int64_t output_batch = 0;
  if (direction == Direction::kSpaceToBatch) {
    if (__builtin_mul_overflow(x_batch, view.block_product, &output_batch)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Negative output dimension size caused by overflow when multiplying ", x_batch,
          " and ", view.block_product));
    }
    view.batch = x_batch;
  } else {
    if (x_batch % view.block_product != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Input batch dimension (", x_batch, ") is not divisible by product of block sizes (",
          view.block_product, ")"));
    }
    output_batch = x_batch / view.block_product;
    view.batch = output_batch;
  }
  const int internal = block_dims - prefix - suffix;
  if (internal > kMaxBlockedDimensions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Maximum number of non-combined block dimensions is ", internal,
        " but must not exceed ", kMaxBlockedDimensions));
  }
  view.output_dims.push_back(output_batch);
  for (int d = 0; d < prefix; ++d) {
    view.batch *= x_dims[d + 1];
    view.output_dims.push_back(x_dims[d + 1]);
  }
  for (int d = prefix; d < block_dims - suffix; ++d) {
    BlockedView::Dimension dimension;
    dimension.block = block_shape[d];
    dimension.before = pads[2 * d];
    dimension.after = pads[2 * d + 1];
    const int64_t x_size = x_dims[d + 1];
    int64_t output_size = 0;
    if (direction == Direction::kSpaceToBatch) {
      if (dimension.before < 0 || dimension.after < 0) {
        return absl::InvalidArgumentError("Paddings must be non-negative");
      }
      const int64_t padded = x_size + dimension.before + dimension.after;
      if (padded % dimension.block != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("padded_shape[", d, "]=", padded, " is not divisible by block_shape[",
                         d, "]=", dimension.block));
      }
      dimension.size = x_size;
      output_size = padded / dimension.block;
    } else {
      if (dimension.before < 0 || dimension.after < 0) {
        return absl::InvalidArgumentError("Crops must be non-negative");
      }
      const int64_t cropped = x_size * dimension.block - dimension.before - dimension.after;
      if (cropped < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("cropped_shape[", d, "]=", cropped, " must be non-negative"));
      }
      dimension.size = cropped;
      output_size = cropped;
    }
    view.blocked.push_back(dimension);
    view.output_dims.push_back(output_size);
  }
  for (int d = block_dims - suffix + 1; d < rank; ++d) {
    view.depth *= x_dims[d];
    view.output_dims.push_back(x_dims[d]);
  }
  return view;
}

// The blocks' side of the move: [block offsets (blocks > 1 only), batch, outer positions...,
// depth], and the space side as [batch, (outer position, block offset)..., depth], both of the
// same elements (the space side padded, or uncropped). `to_batch` is the permutation from the
// space side's view to the blocks' side; `to_space` its inverse.
struct BlockTranspose {
  Dims space_view, batch_view;
  std::vector<int32_t> to_batch, to_space;
};

BlockTranspose PlanBlockTranspose(const BlockedView& view) {
  BlockTranspose plan;
  std::vector<int32_t> offsets, outer;
  plan.space_view.push_back(view.batch);
  for (const BlockedView::Dimension& dimension : view.blocked) {
    const int64_t whole = dimension.size + dimension.before + dimension.after;
    outer.push_back(static_cast<int32_t>(plan.space_view.size()));
    plan.space_view.push_back(whole / dimension.block);
    if (dimension.block > 1) {
      offsets.push_back(static_cast<int32_t>(plan.space_view.size()));
      plan.space_view.push_back(dimension.block);
    }
  }
  plan.space_view.push_back(view.depth);
  plan.to_batch = offsets;
  plan.to_batch.push_back(0);
  plan.to_batch.insert(plan.to_batch.end(), outer.begin(), outer.end());
  plan.to_batch.push_back(static_cast<int32_t>(plan.space_view.size() - 1));
  plan.to_space.resize(plan.to_batch.size());
  for (size_t i = 0; i < plan.to_batch.size(); ++i) {
    plan.to_space[plan.to_batch[i]] = static_cast<int32_t>(i);
    plan.batch_view.push_back(plan.space_view[plan.to_batch[i]]);
  }
  return plan;
}

// The space side as [batch, whole blocked dimensions (padded or uncropped)..., depth], and the
// box of it that the op keeps (SpaceToBatch's input, BatchToSpace's output).
struct SpaceBox {
  Dims whole, begin, end_padding, box;
};

SpaceBox SpaceBoxOf(const BlockedView& view) {
  SpaceBox space;
  space.whole = {view.batch};
  space.begin = {0};
  space.end_padding = {0};
  space.box = {view.batch};
  for (const BlockedView::Dimension& dimension : view.blocked) {
    space.whole.push_back(dimension.size + dimension.before + dimension.after);
    space.begin.push_back(dimension.before);
    space.end_padding.push_back(dimension.after);
    space.box.push_back(dimension.size);
  }
  for (Dims* dims : {&space.whole, &space.box}) dims->push_back(view.depth);
  space.begin.push_back(0);
  space.end_padding.push_back(0);
  return space;
}

bool HasPadding(const BlockedView& view) {
  for (const BlockedView::Dimension& dimension : view.blocked) {
    if (dimension.before != 0 || dimension.after != 0) return true;
  }
  return false;
}

absl::Status Move(OpContext& context, Direction direction, const Dims& block_shape_dims,
                  const Dims& block_shape, const Dims& pads_dims, const Dims& pads) {
  VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
  const Dims x_dims = ShapeOf(x.get());
  VGPU_ASSIGN_OR_RETURN(BlockedView view, ReadBlockedView(direction, x_dims, block_shape_dims,
                                                          block_shape, pads_dims, pads));
  if (view.blocked.empty()) return context.SetOutput(0, x.get());
  const TF_DataType dtype = TF_TensorType(x.get());
  VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, view.output_dims));
  if (NumElements(view.output_dims) == 0) return absl::OkStatus();
  const BlockTranspose plan = PlanBlockTranspose(view);
  if (plan.space_view.size() > static_cast<size_t>(kMaxDataMovementRank)) {
    return absl::UnimplementedError(absl::StrCat(
        view.blocked.size(), " blocked dimensions need a transpose of rank ",
        plan.space_view.size(), ", more than the virtual GPU's ", kMaxDataMovementRank));
  }
  const SpaceBox space = SpaceBoxOf(view);
  // With a padding (or crop), the whole space side is a scratch buffer beside x (or y).
  const bool padded = HasPadding(view);
  TensorPtr scratch;
  if (padded) {
    VGPU_ASSIGN_OR_RETURN(scratch, context.AllocateTemp(dtype, space.whole));
  }
  if (direction == Direction::kSpaceToBatch) {
    BufferArg whole = BufferOf(x.get());
    if (padded) {
      whole = BufferOf(scratch.get());
      VGPU_RETURN_IF_ERROR(LaunchPad(context, dtype, space.box, space.begin, space.end_padding,
                                     /*pad_value=*/0, BufferOf(x.get()), whole));
    }
    return LaunchTranspose(context, dtype, plan.space_view, plan.to_batch, whole,
                           BufferOf(y.get()));
  }
  const BufferArg whole = padded ? BufferOf(scratch.get()) : BufferOf(y.get());
  VGPU_RETURN_IF_ERROR(LaunchTranspose(context, dtype, plan.batch_view, plan.to_space,
                                       BufferOf(x.get()), whole));
  if (!padded) return absl::OkStatus();
  return LaunchSlice(context, data_movement::kStridedSlice, dtype, space.whole, space.begin,
                     Dims(space.whole.size(), 1), space.box, whole, BufferOf(y.get()));
}

// SpaceToBatchND and BatchToSpaceND: block_shape and paddings (crops) are host-memory inputs.
template <Direction kDirection>
class SpaceBatchNDOp : public NoAttributes<SpaceBatchNDOp<kDirection>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr block_shape, context.Input(1));
    VGPU_ASSIGN_OR_RETURN(TensorPtr pads, context.Input(2));
    VGPU_ASSIGN_OR_RETURN(Dims block_values, context.HostIntegers(1));
    VGPU_ASSIGN_OR_RETURN(Dims pad_values, context.HostIntegers(2));
    return Move(context, kDirection, ShapeOf(block_shape.get()), block_values,
                ShapeOf(pads.get()), pad_values);
  }
};

absl::StatusOr<int64_t> ReadBlockSize(OpConstruction& construction) {
  VGPU_ASSIGN_OR_RETURN(int64_t block_size, construction.Int("block_size"));
  if (block_size <= 1) {
    return absl::InvalidArgumentError(absl::StrCat("Block size should be > 1: ", block_size));
  }
  return block_size;
}

// SpaceToBatch and BatchToSpace: 4-D input, the block [block_size, block_size].
template <Direction kDirection>
class SpaceBatchOp
    : public WithAttributes<SpaceBatchOp<kDirection>, int64_t, ReadBlockSize> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(TensorPtr pads, context.Input(1));
    const size_t rank = ShapeOf(x.get()).size();
    if (rank != 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("Input rank should be: 4instead of: ", rank));  // TensorFlow's words
    }
    VGPU_ASSIGN_OR_RETURN(Dims pad_values, context.HostIntegers(1));
    const int64_t block = this->attributes_;
    return Move(context, kDirection, {2}, {block, block}, ShapeOf(pads.get()), pad_values);
  }
};

}  // namespace

// Called by RegisterDataMovementOps (the family's registration).
void RegisterSpaceBatchOps(const char* device_type) {
  DocumentOp("SpaceToBatchND", "",
             "A pad into scratch memory (only when a padding is not zero), then one transpose "
             "of the blocks; up to 4 blocked dimensions after folding, as TensorFlow (3 when "
             "every one has a block above 1: the transpose's rank is at most 8).");
  DocumentOp("BatchToSpaceND", "",
             "One transpose of the blocks, then a slice of the cropped box (only when a crop "
             "is not zero); blocked dimensions as SpaceToBatchND.");
  DocumentOp("SpaceToBatch", "", "SpaceToBatchND with the block [block_size, block_size].");
  DocumentOp("BatchToSpace", "", "BatchToSpaceND with the block [block_size, block_size].");
  for (TF_DataType dtype : kDataMovementTypes) {
    for (TF_DataType block_type : {TF_INT32, TF_INT64}) {
      for (TF_DataType pads_type : {TF_INT32, TF_INT64}) {
        RegisterKernel<SpaceBatchNDOp<Direction::kSpaceToBatch>>(
            "SpaceToBatchND", device_type,
            {{"T", dtype}, {"Tblock_shape", block_type}, {"Tpaddings", pads_type}},
            {"block_shape", "paddings"});
        RegisterKernel<SpaceBatchNDOp<Direction::kBatchToSpace>>(
            "BatchToSpaceND", device_type,
            {{"T", dtype}, {"Tblock_shape", block_type}, {"Tcrops", pads_type}},
            {"block_shape", "crops"});
      }
    }
    for (TF_DataType index_type : {TF_INT32, TF_INT64}) {
      RegisterKernel<SpaceBatchOp<Direction::kSpaceToBatch>>(
          "SpaceToBatch", device_type, {{"T", dtype}, {"Tpaddings", index_type}}, {"paddings"});
      RegisterKernel<SpaceBatchOp<Direction::kBatchToSpace>>(
          "BatchToSpace", device_type, {{"T", dtype}, {"Tidx", index_type}}, {"crops"});
    }
  }
}

}  // namespace vgpu
