// TensorFlow op kernels of the data movement family that are compositions of its byte-moving
// kernels (protocol/kernels/data_movement.h), so that neither executor needs a kernel of its
// own for them:
//   Roll          = kTile (twice along each rolled dimension) into a scratch buffer, then
//                   kStridedSlice of x's shape out of it, starting n - shift into each rolled
//                   dimension: y[i] = x[(i - shift) mod n];
//   DepthToSpace  = one kTranspose of rank 6: x viewed as its blocks, the block dimensions
//   SpaceToDepth    moved next to the spatial dimensions they come from (or go to).
// Keras models use them in the middle of a model (shifted windows, sub-pixel upsampling), where
// a kernel missing on the device costs a copy to the host and back every step. Inputs are
// checked as TensorFlow's kernels check them (roll_op.cc, depthtospace_op.cc,
// spacetodepth_op.cc: same conditions, same words).
#include <algorithm>
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

// ---------------------------------------------------------------------------------------------
// Roll

// At most this many dimensions are rolled per Tile + slice pass: the pass's scratch buffer holds
// 2^k copies of the input for k dimensions, so rolling more dimensions at once would trade
// memory (up to 256 copies at rank 8) for launches.
constexpr int kRolledDimensionsPerPass = 2;

class RollOp : public NoAttributes<RollOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<3>());
    const auto& [input, shift, axis] = inputs;
    const Dims dims = ShapeOf(input.get());
    const Dims shift_shape = ShapeOf(shift.get());
    const Dims axis_shape = ShapeOf(axis.get());
    const int rank = static_cast<int>(dims.size());
    if (rank < 1) return absl::InvalidArgumentError("input must be 1-D or higher");
    if (shift_shape.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shift must be a scalar or a 1-D vector. Found: ", ShapeString(shift_shape)));
    }
    if (axis_shape.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "axis must be a scalar or a 1-D vector. Found: ", ShapeString(axis_shape)));
    }
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> shifts, context.HostIntegers(1));
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> axes, context.HostIntegers(2));
    if (shifts.size() != axes.size()) {
      return absl::InvalidArgumentError("shift and axis must have the same size");
    }
    // The shift of each dimension in [0, n): shifts of a dimension named twice add up (each
    // taken modulo n first, so that no sum can overflow).
    Dims net_shift(rank, 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t d = axes[i] < 0 ? axes[i] + rank : axes[i];
      if (d < 0 || d >= rank) {
        return absl::InvalidArgumentError(absl::StrCat("axis ", d, " is out of range"));
      }
      const int64_t n = dims[d];
      if (n == 0) continue;  // an empty tensor: nothing moves
      const int64_t s = ((shifts[i] % n) + n) % n;
      net_shift[d] = (net_shift[d] + s) % n;
    }
    std::vector<int> rolled;
    for (int d = 0; d < rank; ++d) {
      if (net_shift[d] != 0) rolled.push_back(d);
    }
    if (rolled.empty() || NumElements(dims) == 0) return context.SetOutput(0, input.get());
    if (rank > kMaxDataMovementRank) {
      return absl::UnimplementedError(absl::StrCat("tensors of rank ", rank,
                                                   " are not supported on the virtual GPU (at "
                                                   "most ", kMaxDataMovementRank, ")"));
    }
    const TF_DataType dtype = TF_TensorType(input.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.AllocateOutput(0, dtype, dims));
    // Each pass rolls up to kRolledDimensionsPerPass dimensions of `from` into `to`: the last
    // pass into the output, the ones before it into scratch buffers.
    std::vector<TensorPtr> scratch;  // held until the launches are queued
    BufferArg from = BufferOf(input.get());
    for (size_t first = 0; first < rolled.size(); first += kRolledDimensionsPerPass) {
      const size_t last = std::min(rolled.size(), first + kRolledDimensionsPerPass);
      Dims tiled_dims = dims;
      Dims begin(rank, 0);
      for (size_t k = first; k < last; ++k) {
        const int d = rolled[k];
        tiled_dims[d] = 2 * dims[d];
        begin[d] = dims[d] - net_shift[d];
      }
      VGPU_ASSIGN_OR_RETURN(TensorPtr tiled, context.AllocateTemp(dtype, tiled_dims));
      const BufferArg tiled_buffer = BufferOf(tiled.get());
      scratch.push_back(std::move(tiled));
      VGPU_RETURN_IF_ERROR(LaunchTile(context, dtype, dims, tiled_dims, from, tiled_buffer));
      BufferArg to = BufferOf(output.get());
      if (last < rolled.size()) {
        VGPU_ASSIGN_OR_RETURN(TensorPtr partial, context.AllocateTemp(dtype, dims));
        to = BufferOf(partial.get());
        scratch.push_back(std::move(partial));
      }
      VGPU_RETURN_IF_ERROR(LaunchSlice(context, data_movement::kStridedSlice, dtype, tiled_dims,
                                       begin, Dims(rank, 1), dims, tiled_buffer, to));
      from = to;
    }
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------------------------
// DepthToSpace, SpaceToDepth

enum class BlockLayout { kNHWC, kNCHW };

struct BlockAttributes {
  int64_t block_size = 2;
  BlockLayout layout = BlockLayout::kNHWC;
};

absl::StatusOr<BlockAttributes> ReadBlockAttributes(OpConstruction& construction) {
  BlockAttributes attributes;
  VGPU_ASSIGN_OR_RETURN(attributes.block_size, construction.Int("block_size"));
  if (attributes.block_size < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("Block size should be > 1, but was: ", attributes.block_size));
  }
  VGPU_ASSIGN_OR_RETURN(std::string format, construction.String("data_format"));
  if (format == "NHWC") {
    attributes.layout = BlockLayout::kNHWC;
  } else if (format == "NCHW") {
    attributes.layout = BlockLayout::kNCHW;
  } else if (format == "NCHW_VECT_C") {
    return absl::InvalidArgumentError("NCHW_VECT_C requires the int8 data type (qint8)");
  } else {
    return absl::InvalidArgumentError(absl::StrCat("Invalid data format: ", format));
  }
  return attributes;
}

// The input as [N, H, W, C] in its layout's terms (NCHW read as N, C, H, W).
struct Image {
  int64_t n, h, w, c;
};

absl::StatusOr<Image> ReadImage(const Dims& dims, BlockLayout layout,
                                absl::string_view rank_message) {
  if (dims.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(rank_message, dims.size()));
  }
  if (layout == BlockLayout::kNHWC) return Image{dims[0], dims[1], dims[2], dims[3]};
  return Image{dims[0], dims[2], dims[3], dims[1]};
}

Dims ImageDims(const Image& image, BlockLayout layout) {
  if (layout == BlockLayout::kNHWC) return {image.n, image.h, image.w, image.c};
  return {image.n, image.c, image.h, image.w};
}

// DepthToSpace (kToSpace) and SpaceToDepth: the same view of the blocks, transposed one way or
// the other.
template <bool kToSpace>
class BlockRearrangeOp
    : public WithAttributes<BlockRearrangeOp<kToSpace>, BlockAttributes, ReadBlockAttributes> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr input, context.Input(0));
    const int64_t b = this->attributes_.block_size;
    const BlockLayout layout = this->attributes_.layout;
    VGPU_ASSIGN_OR_RETURN(
        Image in, ReadImage(ShapeOf(input.get()), layout,
                            kToSpace ? "Input rank should be: 4 instead of: "
                                     : "Input rank should be 4 instead of "));
    Image out;
    if constexpr (kToSpace) {
      if (in.c % (b * b) != 0) {
        return absl::InvalidArgumentError(absl::StrCat("Input depth dimension ", in.c,
                                                       " should be divisible by: ", b * b));
      }
      out = Image{in.n, in.h * b, in.w * b, in.c / (b * b)};
    } else {
      if (in.h % b != 0 || in.w % b != 0) {
        return absl::InvalidArgumentError(absl::StrCat("Image width ", in.w, " and height ",
                                                       in.h, " should be divisible by "
                                                       "block_size: ", b));
      }
      out = Image{in.n, in.h / b, in.w / b, in.c * b * b};
    }
    const TF_DataType dtype = TF_TensorType(input.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr output,
                          context.AllocateOutput(0, dtype, ImageDims(out, layout)));
    if (out.n * out.h * out.w * out.c == 0) return absl::OkStatus();
    // The image in space (H, W) and in depth (C = (i * b + j) * C' + c for block row i and block
    // column j), and the blocks' view of the one in space.
    const Image& space = kToSpace ? out : in;
    const Image& depth = kToSpace ? in : out;
    const int64_t h = depth.h, w = depth.w, c = space.c;
    Dims view;
    std::vector<int32_t> perm;
    if (layout == BlockLayout::kNHWC) {
      // depth [N, H, W, i, j, C'] <-> space [N, H, i, W, j, C']: swapping dimensions 2 and 3.
      view = kToSpace ? Dims{in.n, h, w, b, b, c} : Dims{in.n, h, b, w, b, c};
      perm = {0, 1, 3, 2, 4, 5};
    } else if (kToSpace) {
      view = {in.n, b, b, c, h, w};  // depth [N, i, j, C', H, W] -> space [N, C', H, i, W, j]
      perm = {0, 3, 4, 1, 5, 2};
    } else {
      view = {in.n, c, h, b, w, b};  // space [N, C', H, i, W, j] -> depth [N, i, j, C', H, W]
      perm = {0, 3, 5, 1, 2, 4};
    }
    return LaunchTranspose(context, dtype, view, perm, BufferOf(input.get()),
                           BufferOf(output.get()));
  }
};

using DepthToSpaceOp = BlockRearrangeOp<true>;
using SpaceToDepthOp = BlockRearrangeOp<false>;

}  // namespace

// Called by RegisterDataMovementOps (the family's registration).
void RegisterRollAndDepthSpaceOps(const char* device_type) {
  DocumentOp("Roll", "",
             "Two launches per pass: a Tile into scratch memory and a slice out of it. A pass "
             "rolls at most 2 dimensions, so its scratch holds at most 4 copies of the input. "
             "Shifts by whole turns forward the input.");
  DocumentOp("DepthToSpace", "NHWC, NCHW", "One rank-6 transpose of the blocks.");
  DocumentOp("SpaceToDepth", "NHWC, NCHW", "One rank-6 transpose of the blocks.");
  for (TF_DataType dtype : kDataMovementTypes) {
    for (TF_DataType shift_type : {TF_INT32, TF_INT64}) {
      for (TF_DataType axis_type : {TF_INT32, TF_INT64}) {
        RegisterKernel<RollOp>("Roll", device_type,
                               {{"T", dtype}, {"Tshift", shift_type}, {"Taxis", axis_type}},
                               {"shift", "axis"});
      }
    }
    RegisterKernel<DepthToSpaceOp>("DepthToSpace", device_type, {{"T", dtype}});
    RegisterKernel<SpaceToDepthOp>("SpaceToDepth", device_type, {{"T", dtype}});
  }
}

}  // namespace vgpu
