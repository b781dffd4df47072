// TensorFlow op kernels of the data movement family on the virtual GPU: Transpose, ConcatV2,
// Pack, Unpack, Split, SplitV, Slice, StridedSlice, StridedSliceGrad, Pad, PadV2, Tile and
// BroadcastTo.
// Each kernel validates its inputs as TensorFlow's own kernel does (same conditions, messages
// in TensorFlow's words), computes the output shape from its host-memory arguments (perm, axis,
// begin/end/strides, paddings, multiples, shape), and launches one byte-moving kernel of
// protocol/kernels/data_movement.h with a parameter block (no descriptors: these are plain copy
// kernels on a GPU too). Cases TensorFlow answers by forwarding the input (identity slices,
// no-op transposes) forward it here as well, without a launch.
#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/kernels/data_movement_launch.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/kernels/strided_slice_plan.h"
#include "plugin/protocol/kernels/data_movement.h"

namespace vgpu {
namespace {

using data_movement::kMaxDataMovementRank;

absl::Status CheckRank(size_t rank) {
  if (rank > static_cast<size_t>(kMaxDataMovementRank)) {
    return absl::UnimplementedError(absl::StrCat("tensors of rank ", rank,
                                                 " are not supported on the virtual GPU (at most ",
                                                 kMaxDataMovementRank, ")"));
  }
  return absl::OkStatus();
}

// A host-memory integer input: its shape and its values (strided_slice_plan.h).
absl::StatusOr<HostInts> ReadHostInts(const OpContext& context, int index) {
  HostInts result;
  VGPU_ASSIGN_OR_RETURN(TensorPtr tensor, context.Input(index));
  result.shape = ShapeOf(tensor.get());
  VGPU_ASSIGN_OR_RETURN(result.values, context.HostIntegers(index));
  return result;
}

// Starts a parameter block with the element size of `dtype`.
ParamBlock BlockFor(TF_DataType dtype) {
  ParamBlock block;
  ParamWriter(&block).Put(static_cast<uint32_t>(TF_DataTypeSize(dtype)));
  return block;
}

// Launches a data movement kernel (parameter block only) on the op's stream.
absl::Status LaunchCopy(const OpContext& context, KernelId kernel,
                        absl::Span<const BufferArg> buffers, const ParamBlock& params) {
  return KernelLaunch(context).Buffers(buffers).Params(params).Run(kernel);
}

// Makes input `input` output `output` with `dims` (same element count), sharing its buffer as
// TensorFlow's kernels do for no-op cases (Tensor::CopyFrom + set_output).
absl::Status ForwardInput(const OpContext& context, int input, int output,
                          absl::Span<const int64_t> dims) {
  VGPU_ASSIGN_OR_RETURN(TensorPtr in, context.Input(input));
  if (dims == absl::Span<const int64_t>(ShapeOf(in.get()))) {
    return context.SetOutput(output, in.get());
  }
  return context.SetOutputView(output, in.get(), TF_TensorType(in.get()), dims);
}

// ---------------------------------------------------------------------------------------------
// Transpose

class TransposeOp : public NoAttributes<TransposeOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(HostInts perm, ReadHostInts(context, 1));
    const Dims x_dims = ShapeOf(x.get());
    const int rank = static_cast<int>(x_dims.size());
    if (perm.shape.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("perm must be rank 1, got shape ", ShapeString(perm.shape)));
    }
    if (static_cast<int>(perm.values.size()) != rank) {
      return absl::InvalidArgumentError(absl::StrCat("transpose expects a vector of size ", rank,
                                                     ". But input(1) is a vector of size ",
                                                     perm.values.size()));
    }
    std::vector<bool> seen(rank, false);
    Dims y_dims(rank);
    for (int i = 0; i < rank; ++i) {
      // As TensorFlow's kernels: a negative entry counts from the end.
      if (perm.values[i] < 0 && perm.values[i] >= -rank) perm.values[i] += rank;
      const int64_t d = perm.values[i];
      if (d < 0 || d >= rank) {
        return absl::InvalidArgumentError(absl::StrCat(d, " is out of range [0 .. ", rank, ")"));
      }
      seen[d] = true;
      y_dims[i] = x_dims[d];
    }
    for (int i = 0; i < rank; ++i) {
      if (!seen[i]) {
        return absl::InvalidArgumentError(absl::StrCat(
            i, " is missing from {", absl::StrJoin(perm.values, ","), "}."));
      }
    }
    // A permutation that only moves unit dimensions keeps the element order: forward.
    bool keeps_order = true;
    for (int i = 0, last = -1; i < rank; ++i) {
      if (x_dims[perm.values[i]] == 1) continue;
      if (perm.values[i] < last) keeps_order = false;
      last = static_cast<int>(perm.values[i]);
    }
    if (keeps_order) return ForwardInput(context, 0, 0, y_dims);
    VGPU_RETURN_IF_ERROR(CheckRank(rank));
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, y_dims));
    if (NumElements(x_dims) == 0) return absl::OkStatus();
    std::vector<int32_t> perm32(perm.values.begin(), perm.values.end());
    return LaunchTranspose(context, dtype, x_dims, perm32, BufferOf(x.get()), BufferOf(y.get()));
  }
};

// ---------------------------------------------------------------------------------------------
// ConcatV2, Pack, Unpack

// Launches kConcat (or kSplit) of `pieces` against `whole`, viewed as [outer, inner_k].
absl::Status LaunchConcatOrSplit(const OpContext& context, KernelId kernel, TF_DataType dtype,
                                 int64_t outer, const std::vector<int64_t>& inner,
                                 std::vector<BufferArg> buffers) {
  ParamBlock params = BlockFor(dtype);
  ParamWriter(&params).Put<int64_t>(outer).PutArray<int64_t>(inner);
  return LaunchCopy(context, kernel, buffers, params);
}

class ConcatV2Op : public NoAttributes<ConcatV2Op> {
 public:
  absl::Status Compute(OpContext& context) {
    const int n = context.num_inputs() - 1;
    VGPU_ASSIGN_OR_RETURN(HostInts axis_input, ReadHostInts(context, n));
    if (!axis_input.shape.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Concat dim tensor should be a scalar, but got shape ", ShapeString(axis_input.shape)));
    }
    const int64_t concat_dim = axis_input.values[0];
    VGPU_ASSIGN_OR_RETURN(std::vector<TensorPtr> values, context.InputList(n));
    const std::vector<Dims> shapes = ShapesOf(values);
    const Dims& first = shapes[0];
    const int rank = static_cast<int>(first.size());
    const int64_t axis = concat_dim < 0 ? concat_dim + rank : concat_dim;
    if (axis < 0 || axis >= rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("ConcatOp : Expected concatenating dimensions in the range [", -rank, ", ",
                       rank, "), but got ", concat_dim));
    }
    Dims y_dims = first;
    y_dims[axis] = 0;
    for (int i = 0; i < n; ++i) {
      if (static_cast<int>(shapes[i].size()) != rank) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ConcatOp : Ranks of all input tensors should match: shape[0] = ", ShapeString(first),
            " vs. shape[", i, "] = ", ShapeString(shapes[i])));
      }
      for (int d = 0; d < rank; ++d) {
        if (d != axis && shapes[i][d] != first[d]) {
          return absl::InvalidArgumentError(absl::StrCat(
              "ConcatOp : Dimension ", d, " in both shapes must be equal: shape[0] = ",
              ShapeString(first), " vs. shape[", i, "] = ", ShapeString(shapes[i])));
        }
      }
      y_dims[axis] += shapes[i][axis];
    }
    VGPU_RETURN_IF_ERROR(CheckRank(rank));
    const TF_DataType dtype = TF_TensorType(values[0].get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, y_dims));
    if (NumElements(y_dims) == 0) return absl::OkStatus();
    const int64_t outer = NumElements(absl::MakeSpan(first).subspan(0, axis));
    std::vector<int64_t> inner;
    std::vector<BufferArg> buffers;
    for (int i = 0; i < n; ++i) {
      const int64_t elements = NumElements(shapes[i]);
      if (elements == 0) continue;  // contributes nothing
      inner.push_back(elements / outer);
      buffers.push_back(BufferOf(values[i].get()));
    }
    buffers.push_back(BufferOf(y.get()));
    return LaunchConcatOrSplit(context, data_movement::kConcat, dtype, outer, inner, buffers);
  }
};

constexpr char kAxis[] = "axis";
constexpr char kNumSplit[] = "num_split";

// Pack's and Unpack's `axis` in a tensor of `rank` (negative: counted from the end);
// InvalidArgument in TensorFlow's words outside [-rank, rank).
absl::StatusOr<int64_t> ResolveAxis(int64_t axis, int64_t rank) {
  const int64_t resolved = axis < 0 ? axis + rank : axis;
  if (resolved < 0 || resolved >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis = ", axis, " not in [", -rank, ", ", rank, ")"));
  }
  return resolved;
}

// Pack(values...): attributes_ is the attribute "axis".
// Pack; with kOnHost, of int32 with the values and the output in host memory, computed on the
// host (shapes: see StridedSliceOp).
template <bool kOnHost>
class PackOp : public WithAttributes<PackOp<kOnHost>, int64_t, IntAttribute<kAxis>> {
 public:
  absl::Status Compute(OpContext& context) {
    const int n = context.num_inputs();
    VGPU_ASSIGN_OR_RETURN(std::vector<TensorPtr> values, context.InputList(n));
    const Dims shape = ShapeOf(values[0].get());
    VGPU_ASSIGN_OR_RETURN(const int64_t axis,
                          ResolveAxis(this->attributes_, static_cast<int64_t>(shape.size()) + 1));
    for (int i = 1; i < n; ++i) {
      const Dims other = ShapeOf(values[i].get());
      if (other != shape) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Shapes of all inputs must match: values[0].shape = ", ShapeString(shape),
            " != values[", i, "].shape = ", ShapeString(other)));
      }
    }
    Dims y_dims = shape;
    y_dims.insert(y_dims.begin() + axis, n);
    if (n == 1) return ForwardInput(context, 0, 0, y_dims);
    if (!kOnHost) VGPU_RETURN_IF_ERROR(CheckRank(y_dims.size()));
    const TF_DataType dtype = TF_TensorType(values[0].get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, y_dims));
    if (NumElements(y_dims) == 0) return absl::OkStatus();
    const int64_t outer = NumElements(absl::MakeSpan(shape).subspan(0, axis));
    if constexpr (kOnHost) {  // y[o][i] = values[i][o], rows of `row` elements
      const int64_t row = NumElements(shape) / outer;
      auto* out = static_cast<int32_t*>(TF_TensorData(y.get()));
      for (int64_t o = 0; o < outer; ++o) {
        for (int i = 0; i < n; ++i, out += row) {
          const auto* in = static_cast<const int32_t*>(TF_TensorData(values[i].get()));
          std::memcpy(out, in + o * row, static_cast<size_t>(row) * sizeof(int32_t));
        }
      }
      return absl::OkStatus();
    }
    const std::vector<int64_t> inner(n, NumElements(shape) / outer);
    std::vector<BufferArg> buffers;
    for (const TensorPtr& value : values) buffers.push_back(BufferOf(value.get()));
    buffers.push_back(BufferOf(y.get()));
    return LaunchConcatOrSplit(context, data_movement::kConcat, dtype, outer, inner, buffers);
  }
};

// DynamicStitch of int32, every input and the output in host memory, computed on the host (as
// TensorFlow's GPU kernel for int32): merged[indices[m][i], ...] = data[m][i, ...], later inputs
// winning. The gradient of a sum or mean over dimensions of unknown size builds its shape with it
// from a Shape placed beside it; without a kernel here both ran on the CPU, and the whole tensor
// whose shape was taken crossed from the device to the host mid-step.
class DynamicStitchOp : public NoAttributes<DynamicStitchOp> {
 public:
  absl::Status Compute(OpContext& context) {
    const int n = context.num_inputs() / 2;
    VGPU_ASSIGN_OR_RETURN(std::vector<TensorPtr> inputs, context.InputList(2 * n));
    const auto indices = absl::MakeConstSpan(inputs).subspan(0, n);
    const auto data = absl::MakeConstSpan(inputs).subspan(n, n);
    int64_t first_dim = 0;
    for (const TensorPtr& tensor : indices) {
      const auto* values = static_cast<const int32_t*>(TF_TensorData(tensor.get()));
      const int64_t count = NumElements(ShapeOf(tensor.get()));
      for (int64_t i = 0; i < count; ++i) {
        if (values[i] < 0) {
          return absl::InvalidArgumentError(absl::StrCat("indices[", i, "] is out of range"));
        }
        first_dim = std::max<int64_t>(first_dim, int64_t{values[i]} + 1);
      }
    }
    const Dims indices0 = ShapeOf(indices[0].get());
    const Dims data0 = ShapeOf(data[0].get());
    for (int m = 0; m < n; ++m) {
      const Dims index_dims = ShapeOf(indices[m].get());
      const Dims data_dims = ShapeOf(data[m].get());
      const bool starts_with = data_dims.size() >= index_dims.size() &&
                               std::equal(index_dims.begin(), index_dims.end(), data_dims.begin());
      if (!starts_with) {
        return absl::InvalidArgumentError(absl::StrCat(
            "data[", m, "].shape = ", ShapeString(data_dims), " does not start with indices[", m,
            "].shape = ", ShapeString(index_dims)));
      }
      const bool same_extra =
          data_dims.size() - index_dims.size() == data0.size() - indices0.size() &&
          std::equal(data_dims.begin() + index_dims.size(), data_dims.end(),
                     data0.begin() + indices0.size());
      if (!same_extra) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Need data[0].shape[", indices0.size(), ":] = data[", m, "].shape[",
            index_dims.size(), ":], got data[0].shape = ", ShapeString(data0), ", data[", m,
            "].shape = ", ShapeString(data_dims), ", indices[0].shape = ", ShapeString(indices0),
            ", indices[", m, "].shape = ", ShapeString(index_dims)));
      }
    }
    Dims merged_dims = {first_dim};
    merged_dims.insert(merged_dims.end(), data0.begin() + indices0.size(), data0.end());
    VGPU_ASSIGN_OR_RETURN(TensorPtr merged, context.AllocateOutput(0, TF_INT32, merged_dims));
    const int64_t row = NumElements(absl::MakeConstSpan(merged_dims).subspan(1));
    auto* out = static_cast<int32_t*>(TF_TensorData(merged.get()));
    std::fill_n(out, first_dim * row, 0);  // rows no index names (TensorFlow leaves them unset)
    for (int m = 0; m < n; ++m) {
      const auto* index = static_cast<const int32_t*>(TF_TensorData(indices[m].get()));
      const auto* rows = static_cast<const int32_t*>(TF_TensorData(data[m].get()));
      const int64_t count = NumElements(ShapeOf(indices[m].get()));
      for (int64_t i = 0; i < count; ++i) {
        std::copy_n(rows + i * row, row, out + int64_t{index[i]} * row);
      }
    }
    return absl::OkStatus();
  }
};

// Unpack's attributes.
struct UnpackAttributes {
  int64_t axis = 0;
  int64_t num = 0;
};

absl::StatusOr<UnpackAttributes> ReadUnpackAttributes(OpConstruction& construction) {
  UnpackAttributes attributes;
  VGPU_ASSIGN_OR_RETURN(attributes.axis, construction.Int("axis"));
  VGPU_ASSIGN_OR_RETURN(attributes.num, construction.Int("num"));
  return attributes;
}

// Unpack(value): `num` outputs, the slices of value along `axis`.
class UnpackOp : public WithAttributes<UnpackOp, UnpackAttributes, ReadUnpackAttributes> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    const Dims shape = ShapeOf(x.get());
    VGPU_ASSIGN_OR_RETURN(const int64_t axis,
                          ResolveAxis(attributes_.axis, static_cast<int64_t>(shape.size())));
    const int64_t num = attributes_.num;
    if (shape[axis] != num) {
      return absl::InvalidArgumentError(absl::StrCat("Input shape axis ", axis, " must equal ",
                                                     num, ", got shape ", ShapeString(shape)));
    }
    Dims y_dims = shape;
    y_dims.erase(y_dims.begin() + axis);
    if (num == 1) return ForwardInput(context, 0, 0, y_dims);
    VGPU_RETURN_IF_ERROR(CheckRank(shape.size()));
    const TF_DataType dtype = TF_TensorType(x.get());
    std::vector<TensorPtr> outputs;
    std::vector<BufferArg> buffers = {BufferOf(x.get())};
    for (int64_t i = 0; i < num; ++i) {
      VGPU_ASSIGN_OR_RETURN(TensorPtr y,
                            context.AllocateOutput(static_cast<int>(i), dtype, y_dims));
      buffers.push_back(BufferOf(y.get()));
      outputs.push_back(std::move(y));
    }
    if (NumElements(shape) == 0) return absl::OkStatus();
    const int64_t outer = NumElements(absl::MakeSpan(shape).subspan(0, axis));
    const std::vector<int64_t> inner(num, NumElements(y_dims) / outer);
    return LaunchConcatOrSplit(context, data_movement::kSplit, dtype, outer, inner, buffers);
  }
};

// Splits `x` along `axis` into pieces of `sizes` (each output `i` of `sizes[i]` along the axis);
// the sizes are validated and sum to the axis' size.
absl::Status SplitAlongAxis(const OpContext& context, const TF_Tensor* x, int64_t axis,
                            const std::vector<int64_t>& sizes) {
  const Dims shape = ShapeOf(x);
  VGPU_RETURN_IF_ERROR(CheckRank(shape.size()));
  const TF_DataType dtype = TF_TensorType(x);
  std::vector<TensorPtr> outputs;
  std::vector<BufferArg> buffers = {BufferOf(x)};
  const int64_t outer = NumElements(absl::MakeSpan(shape).subspan(0, axis));
  const int64_t inner_unit = NumElements(absl::MakeSpan(shape).subspan(axis + 1));
  std::vector<int64_t> inner;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Dims y_dims = shape;
    y_dims[axis] = sizes[i];
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(static_cast<int>(i), dtype, y_dims));
    if (NumElements(y_dims) > 0) {  // empty pieces take no part in the launch
      buffers.push_back(BufferOf(y.get()));
      inner.push_back(sizes[i] * inner_unit);
    }
    outputs.push_back(std::move(y));
  }
  if (NumElements(shape) == 0) return absl::OkStatus();
  return LaunchConcatOrSplit(context, data_movement::kSplit, dtype, outer, inner, buffers);
}

absl::Status CheckSplitAxis(int64_t axis, int64_t original, size_t rank) {
  if (axis >= 0 && axis < static_cast<int64_t>(rank)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("-input rank(-", rank,
                                                 ") <= split_dim < input rank (", rank,
                                                 "), but got ", original));
}

// Split: inputs (split_dim, value); num_split (the attribute, attributes_) equal pieces.
class SplitOp : public WithAttributes<SplitOp, int64_t, IntAttribute<kNumSplit>> {
 public:
  absl::Status Compute(OpContext& context) {
    const int64_t num_split = attributes_;
    VGPU_ASSIGN_OR_RETURN(HostInts split_dim, ReadHostInts(context, 0));
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(1));
    const Dims shape = ShapeOf(x.get());
    if (split_dim.values.empty()) {
      return absl::InvalidArgumentError("split_dim must have exactly one element.");
    }
    const int64_t original = split_dim.values[0];
    const int64_t axis = original < 0 ? original + static_cast<int64_t>(shape.size()) : original;
    VGPU_RETURN_IF_ERROR(CheckSplitAxis(axis, original, shape.size()));
    if (num_split <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Number of ways to split should be > 0, but got ", num_split));
    }
    if (shape[axis] % num_split != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Number of ways to split should evenly divide the split dimension, but got "
          "split_dim ", axis, " (size = ", shape[axis], ") and num_split ", num_split));
    }
    if (num_split == 1) return ForwardInput(context, 1, 0, shape);
    return SplitAlongAxis(context, x.get(), axis,
                          std::vector<int64_t>(num_split, shape[axis] / num_split));
  }
};

// SplitV: inputs (value, size_splits, split_dim); at most one size is -1 (the rest).
class SplitVOp : public NoAttributes<SplitVOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(HostInts size_splits, ReadHostInts(context, 1));
    VGPU_ASSIGN_OR_RETURN(HostInts split_dim, ReadHostInts(context, 2));
    const Dims shape = ShapeOf(x.get());
    if (split_dim.values.size() != 1) {
      return absl::InvalidArgumentError("split_dim_tensor must have exactly one element.");
    }
    const int64_t original = split_dim.values[0];
    const int64_t axis = original < 0 ? original + static_cast<int64_t>(shape.size()) : original;
    const int num_split = TF_NumOutputs(context.raw());
    if (size_splits.shape.size() != 1 ||
        static_cast<int>(size_splits.values.size()) != num_split) {
      return absl::InvalidArgumentError(absl::StrCat(
          "size of the split_tensor must be 1-D and have the same elements as outputs got ",
          size_splits.shape.size(), " -D and ", size_splits.values.size(), " elements"));
    }
    if (num_split <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Number of ways to split should be > 0, but got ", num_split));
    }
    VGPU_RETURN_IF_ERROR(CheckSplitAxis(axis, original, shape.size()));
    std::vector<int64_t> sizes = size_splits.values;
    const int64_t axis_size = shape[axis];
    if (num_split == 1) {
      if (sizes[0] != axis_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "If there is only one output, it must have the same size as the input. Input size: ",
            axis_size, " output size: ", sizes[0]));
      }
      return ForwardInput(context, 0, 0, shape);
    }
    int unknown = -1;
    int64_t determined = 0;
    for (int i = 0; i < num_split; ++i) {
      if (sizes[i] == -1) {
        if (unknown != -1) {
          return absl::InvalidArgumentError("There can only be one -1 in the input.");
        }
        unknown = i;
      } else {
        determined += sizes[i];
      }
    }
    if (!((unknown == -1 && determined == axis_size) ||
          (unknown >= 0 && determined <= axis_size))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Determined shape must either match input shape along split_dim exactly if fully "
          "specified, or be less than the size of the input along split_dim if not fully "
          "specified.  Got: ", determined));
    }
    if (unknown >= 0) sizes[unknown] = axis_size - determined;
    for (int i = 0; i < num_split; ++i) {
      if (sizes[i] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("Split size at index ", i, " must be >= 0. Got: ", sizes[i]));
      }
    }
    return SplitAlongAxis(context, x.get(), axis, sizes);
  }
};

// ---------------------------------------------------------------------------------------------
// Slice, StridedSlice, StridedSliceGrad

class SliceOp : public NoAttributes<SliceOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(HostInts begin, ReadHostInts(context, 1));
    VGPU_ASSIGN_OR_RETURN(HostInts size, ReadHostInts(context, 2));
    const Dims x_dims = ShapeOf(x.get());
    const int rank = static_cast<int>(x_dims.size());
    if (begin.shape.size() != 1 || size.shape.size() != 1 ||
        static_cast<int>(begin.values.size()) != rank ||
        static_cast<int>(size.values.size()) != rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Expected begin and size arguments to be 1-D tensors of size ", rank,
          ", but got shapes ", ShapeString(begin.shape), " and ", ShapeString(size.shape),
          " instead."));
    }
    Dims y_dims(rank);
    bool is_identity = true;
    for (int i = 0; i < rank; ++i) {
      const int64_t b = begin.values[i];
      int64_t s = size.values[i];
      if (s == -1) s = x_dims[i] - b;
      if (x_dims[i] == 0) {
        if (b != 0 || s != 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "Expected begin[", i, "] == 0 (got ", b, ") and size[", i, "] == 0 (got ", s,
              ") when input.dim_size(", i, ") == 0"));
        }
      } else {
        if (b < 0 || b > x_dims[i]) {
          return absl::InvalidArgumentError(absl::StrCat("Expected begin[", i, "] in [0, ",
                                                         x_dims[i], "], but got ", b));
        }
        if (s < 0 || b + s > x_dims[i]) {
          return absl::InvalidArgumentError(absl::StrCat(
              "Expected size[", i, "] in [0, ", x_dims[i] - b, "], but got ", s));
        }
      }
      y_dims[i] = s;
      is_identity &= b == 0 && s == x_dims[i];
    }
    if (is_identity) return ForwardInput(context, 0, 0, y_dims);
    VGPU_RETURN_IF_ERROR(CheckRank(rank));
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, y_dims));
    if (NumElements(y_dims) == 0) return absl::OkStatus();
    return LaunchSlice(context, data_movement::kStridedSlice, dtype, x_dims, begin.values,
                       Dims(rank, 1), y_dims, BufferOf(x.get()), BufferOf(y.get()));
  }
};

absl::StatusOr<StridedSliceMasks> ReadMasks(OpConstruction& construction) {
  StridedSliceMasks masks;
  VGPU_ASSIGN_OR_RETURN(int64_t begin, construction.Int("begin_mask"));
  VGPU_ASSIGN_OR_RETURN(int64_t end, construction.Int("end_mask"));
  VGPU_ASSIGN_OR_RETURN(int64_t ellipsis, construction.Int("ellipsis_mask"));
  VGPU_ASSIGN_OR_RETURN(int64_t new_axis, construction.Int("new_axis_mask"));
  VGPU_ASSIGN_OR_RETURN(int64_t shrink_axis, construction.Int("shrink_axis_mask"));
  masks.begin = static_cast<int32_t>(begin);
  masks.end = static_cast<int32_t>(end);
  masks.ellipsis = static_cast<int32_t>(ellipsis);
  masks.new_axis = static_cast<int32_t>(new_axis);
  masks.shrink_axis = static_cast<int32_t>(shrink_axis);
  return masks;
}

// The base of the strided-slice kernel classes K: the masks, read when the kernel is built,
// and the begin, end and strides host-memory inputs (1, 2 and 3) of each call.
template <typename K>
class StridedSliceKernel : public WithAttributes<K, StridedSliceMasks, ReadMasks> {
 protected:
  struct Bounds {
    HostInts begin, end, strides;
  };

  static absl::StatusOr<Bounds> ReadBounds(const OpContext& context) {
    Bounds bounds;
    VGPU_ASSIGN_OR_RETURN(bounds.begin, ReadHostInts(context, 1));
    VGPU_ASSIGN_OR_RETURN(bounds.end, ReadHostInts(context, 2));
    VGPU_ASSIGN_OR_RETURN(bounds.strides, ReadHostInts(context, 3));
    return bounds;
  }

  // The slice `bounds` and the masks select of a tensor of `dims`.
  absl::StatusOr<StridedSlicePlan> Plan(const Dims& dims, const Bounds& bounds) const {
    return PlanStridedSlice(dims, bounds.begin, bounds.end, bounds.strides, this->attributes_);
  }
};

// y[i] = x[begin + i * strides] for every index i of `y_dims` (row-major, the rank of `x_dims`),
// on the host.
void SliceOnHost(const int32_t* x, const Dims& x_dims, const Dims& begin, const Dims& strides,
                 const Dims& y_dims, int32_t* y) {
  const size_t rank = x_dims.size();
  const int64_t count = NumElements(y_dims);
  if (rank == 0) {
    if (count == 1) y[0] = x[0];
    return;
  }
  std::vector<int64_t> x_stride(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) x_stride[d - 1] = x_stride[d] * x_dims[d];
  std::vector<int64_t> index(rank, 0);
  int64_t offset = 0;
  for (size_t d = 0; d < rank; ++d) offset += begin[d] * x_stride[d];
  for (int64_t k = 0; k < count; ++k) {
    y[k] = x[offset];
    for (size_t d = rank; d-- > 0;) {  // the next index, last dimension fastest
      offset += strides[d] * x_stride[d];
      if (++index[d] < y_dims[d]) break;
      offset -= index[d] * strides[d] * x_stride[d];
      index[d] = 0;
    }
  }
}

// StridedSlice; with kOnHost, of int32 with every input and the output in host memory, computed
// on the host: shapes, kept there as TensorFlow's GPU kernel for int32 keeps them
// (kShapeOpTypes), so that a dynamic shape never crosses to the device and a graph that must run
// on the GPU still can.
template <bool kOnHost>
class StridedSliceOp : public StridedSliceKernel<StridedSliceOp<kOnHost>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(auto bounds, this->ReadBounds(context));
    const Dims x_dims = ShapeOf(x.get());
    VGPU_ASSIGN_OR_RETURN(StridedSlicePlan plan, this->Plan(x_dims, bounds));
    if (plan.is_identity) return ForwardInput(context, 0, 0, plan.final_dims);
    if (!kOnHost) VGPU_RETURN_IF_ERROR(CheckRank(x_dims.size()));
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, plan.final_dims));
    if (NumElements(plan.final_dims) == 0) return absl::OkStatus();
    if constexpr (kOnHost) {
      SliceOnHost(static_cast<const int32_t*>(TF_TensorData(x.get())), x_dims, plan.begin,
                  plan.strides, plan.processing_dims,
                  static_cast<int32_t*>(TF_TensorData(y.get())));
      return absl::OkStatus();
    }
    return LaunchSlice(context, data_movement::kStridedSlice, dtype, x_dims, plan.begin,
                       plan.strides, plan.processing_dims, BufferOf(x.get()), BufferOf(y.get()));
  }
};

class StridedSliceGradOp : public StridedSliceKernel<StridedSliceGradOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(HostInts shape, ReadHostInts(context, 0));
    VGPU_ASSIGN_OR_RETURN(Bounds bounds, ReadBounds(context));
    VGPU_ASSIGN_OR_RETURN(TensorPtr dy, context.Input(4));
    if (shape.shape.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape must be 1-D, got shape.shape = ", ShapeString(shape.shape)));
    }
    const Dims& dx_dims = shape.values;
    for (int64_t d : dx_dims) {
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat("Dimension ", d, " must be >= 0"));
    }
    VGPU_ASSIGN_OR_RETURN(StridedSlicePlan plan, Plan(dx_dims, bounds));
    const Dims dy_dims = ShapeOf(dy.get());
    if (dy_dims != plan.final_dims) {
      return absl::InvalidArgumentError(absl::StrCat("shape of dy was ", ShapeString(dy_dims),
                                                     " instead of ",
                                                     ShapeString(plan.final_dims)));
    }
    if (plan.is_identity) return ForwardInput(context, 4, 0, dx_dims);
    VGPU_RETURN_IF_ERROR(CheckRank(dx_dims.size()));
    const TF_DataType dtype = TF_TensorType(dy.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr dx, context.AllocateOutput(0, dtype, dx_dims));
    if (NumElements(dx_dims) == 0) return absl::OkStatus();
    return LaunchSlice(context, data_movement::kStridedSliceGrad, dtype, dx_dims, plan.begin,
                       plan.strides, plan.processing_dims, BufferOf(dy.get()), BufferOf(dx.get()));
  }
};

// TensorStridedSliceUpdate: output = input with output[slice] = value (value broadcast to the
// slice as TensorFlow's StridedSliceAssignBCast allows).
class TensorStridedSliceUpdateOp : public StridedSliceKernel<TensorStridedSliceUpdateOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr input, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(Bounds bounds, ReadBounds(context));
    VGPU_ASSIGN_OR_RETURN(TensorPtr value, context.Input(4));
    const Dims dims = ShapeOf(input.get());
    const TF_DataType dtype = TF_TensorType(input.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.ForwardOrAllocateOutput({0}, 0, dtype, dims));
    VGPU_RETURN_IF_ERROR(context.CopyUnlessForwarded(input.get(), output.get()));
    VGPU_ASSIGN_OR_RETURN(ClientStream * stream, context.Stream());
    VGPU_ASSIGN_OR_RETURN(StridedSlicePlan plan, Plan(dims, bounds));
    if (NumElements(plan.processing_dims) == 0) return absl::OkStatus();
    VGPU_ASSIGN_OR_RETURN(Dims value_dims,
                          BroadcastAssignedValue(ShapeOf(value.get()), plan.final_dims));
    TensorPtr scratch;
    if (value_dims != plan.final_dims) {
      VGPU_ASSIGN_OR_RETURN(scratch, context.AllocateTemp(dtype, plan.final_dims));
    }
    return LaunchSliceAssignment(*stream, static_cast<uint32_t>(TF_DataTypeSize(dtype)), plan,
                                 dims, value_dims, BufferOf(value.get()),
                                 scratch ? BufferOf(scratch.get()) : BufferArg{},
                                 BufferOf(output.get()));
  }
};

// ---------------------------------------------------------------------------------------------
// Pad, PadV2

class PadOp : public NoAttributes<PadOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(HostInts paddings, ReadHostInts(context, 1));
    const Dims x_dims = ShapeOf(x.get());
    const int rank = static_cast<int>(x_dims.size());
    if (rank > kMaxDataMovementRank) {
      return absl::UnimplementedError(
          absl::StrCat("inputs rank not in [0,", kMaxDataMovementRank, "]: ", rank));
    }
    if (paddings.shape.size() != 2 || paddings.shape[1] != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "paddings must be a matrix with 2 columns: ", ShapeString(paddings.shape)));
    }
    if (paddings.shape[0] != rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("The first dimension of paddings must be the rank of inputs",
                       ShapeString(paddings.shape), ", ", ShapeString(x_dims)));
    }
    const TF_DataType dtype = TF_TensorType(x.get());
    uint64_t pad_value = 0;
    if (context.num_inputs() == 3) {
      VGPU_ASSIGN_OR_RETURN(TensorPtr constant, context.Input(2));
      const Dims constant_dims = ShapeOf(constant.get());
      if (!constant_dims.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("constant_values must be a scalar. Got: ",
                                                       ShapeString(constant_dims)));
      }
      std::memcpy(&pad_value, TF_TensorData(constant.get()), TF_DataTypeSize(dtype));
    }
    Dims before(rank), after(rank), y_dims(rank);
    for (int d = 0; d < rank; ++d) {
      before[d] = paddings.values[2 * d];
      after[d] = paddings.values[2 * d + 1];
      if (before[d] < 0 || after[d] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("Paddings must be non-negative: ", before[d], " ", after[d]));
      }
      y_dims[d] = before[d] + x_dims[d] + after[d];
    }
    if (NumElements(y_dims) == NumElements(x_dims)) return ForwardInput(context, 0, 0, y_dims);
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, y_dims));
    return LaunchPad(context, dtype, x_dims, before, after, pad_value, BufferOf(x.get()),
                     BufferOf(y.get()));
  }
};

// ---------------------------------------------------------------------------------------------
// Tile, BroadcastTo

class TileOp : public NoAttributes<TileOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(HostInts multiples, ReadHostInts(context, 1));
    const Dims x_dims = ShapeOf(x.get());
    const int rank = static_cast<int>(x_dims.size());
    if (multiples.shape.size() != 1 || static_cast<int>(multiples.values.size()) != rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Expected multiples argument to be a vector of length ", rank, " but got length ",
          multiples.shape.empty() ? 0 : multiples.shape[0]));
    }
    Dims y_dims(rank);
    for (int d = 0; d < rank; ++d) {
      if (multiples.values[d] < 0) {
        return absl::InvalidArgumentError(absl::StrCat("Expected multiples[", d,
                                                       "] >= 0, but got ", multiples.values[d]));
      }
      y_dims[d] = x_dims[d] * multiples.values[d];
    }
    if (y_dims == x_dims) return ForwardInput(context, 0, 0, y_dims);
    VGPU_RETURN_IF_ERROR(CheckRank(rank));
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, y_dims));
    if (NumElements(y_dims) == 0) return absl::OkStatus();
    return LaunchTile(context, dtype, x_dims, y_dims, BufferOf(x.get()), BufferOf(y.get()));
  }
};

class BroadcastToOp : public NoAttributes<BroadcastToOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(HostInts shape, ReadHostInts(context, 1));
    if (shape.shape.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape must be a vector of {int32,int64}, got shape ", ShapeString(shape.shape)));
    }
    const Dims x_dims = ShapeOf(x.get());
    const Dims& y_dims = shape.values;
    for (int64_t d : y_dims) {
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat("Dimension ", d, " must be >= 0"));
    }
    if (x_dims == y_dims) return ForwardInput(context, 0, 0, y_dims);
    if (x_dims.size() > y_dims.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Rank of input (", x_dims.size(), ") must be no greater than rank of output shape (",
          y_dims.size(), ")."));
    }
    // x's shape aligned to the right of y's, each dimension equal or 1.
    Dims aligned(y_dims.size() - x_dims.size(), 1);
    aligned.insert(aligned.end(), x_dims.begin(), x_dims.end());
    for (size_t d = 0; d < y_dims.size(); ++d) {
      if (aligned[d] != y_dims[d] && aligned[d] != 1 && y_dims[d] != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Incompatible shapes: ", ShapeString(x_dims), " vs. ", ShapeString(y_dims)));
      }
    }
    for (size_t d = 0; d < y_dims.size(); ++d) {
      if (aligned[d] != y_dims[d] && aligned[d] != 1) {
        return absl::InvalidArgumentError(absl::StrCat("Unable to broadcast tensor of shape ",
                                                       ShapeString(x_dims),
                                                       " to tensor of shape ",
                                                       ShapeString(y_dims)));
      }
    }
    if (NumElements(x_dims) == NumElements(y_dims)) return ForwardInput(context, 0, 0, y_dims);
    VGPU_RETURN_IF_ERROR(CheckRank(y_dims.size()));
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, y_dims));
    if (NumElements(y_dims) == 0) return absl::OkStatus();
    return LaunchTile(context, dtype, aligned, y_dims, BufferOf(x.get()), BufferOf(y.get()));
  }
};

// The shape ops' element types: kDataMovementTypes without int32. A GPU keeps int32 shapes,
// their slices, stacks and concatenations in host memory (TensorFlow's GPU kernels of these ops
// take int32 there); a kernel of the virtual GPU for them in device memory made each dynamic
// shape of a training step (a Flatten's or a loss's batch size) cross to the device and back
// mid-step, the way back waiting for the device to reach it. For int32 TensorFlow's own
// host-memory kernels run on the virtual GPU (ConcatV2, Slice, Unpack), or the plugin's, which
// compute on the host (StridedSlice, Pack: TensorFlow has none for a device other than its GPU):
// the values stay on the host, on the virtual GPU.
constexpr std::initializer_list<TF_DataType> kShapeOpTypes = {
    TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE, TF_INT64, TF_BOOL, TF_UINT8};

// Registers `K` for `op_name` once per element type of `types`, and once per index type
// (int32, int64) of `index_attribute` when one is given.
template <typename K>
void RegisterForTypes(const char* op_name, const char* device_type, const char* index_attribute,
                      std::initializer_list<const char*> host_memory,
                      const char* dtype_attribute = "T",
                      std::initializer_list<TF_DataType> types = kDataMovementTypes) {
  for (TF_DataType dtype : types) {
    if (index_attribute == nullptr) {
      RegisterKernel<K>(op_name, device_type, {{dtype_attribute, dtype}}, host_memory);
      continue;
    }
    for (TF_DataType index : {TF_INT32, TF_INT64}) {
      RegisterKernel<K>(op_name, device_type, {{dtype_attribute, dtype}, {index_attribute, index}},
                        host_memory);
    }
  }
}

}  // namespace

absl::Status LaunchTranspose(const OpContext& context, TF_DataType dtype,
                             absl::Span<const int64_t> x_dims, absl::Span<const int32_t> perm,
                             BufferArg x, BufferArg y) {
  ParamBlock params = BlockFor(dtype);
  ParamWriter(&params).PutArray<int64_t>(x_dims).PutArray<int32_t>(perm);
  BufferArg buffers[] = {x, y};
  return LaunchCopy(context, data_movement::kTranspose, buffers, params);
}

absl::Status LaunchSlice(const OpContext& context, KernelId kernel, TF_DataType dtype,
                         const Dims& x_dims, Dims begin, const Dims& strides, const Dims& y_dims,
                         BufferArg from, BufferArg to) {
  if (NumElements(y_dims) == 0) {
    std::fill(begin.begin(), begin.end(), 0);  // nothing is read: any in-range begin will do
  }
  ParamBlock params = BlockFor(dtype);
  ParamWriter(&params)
      .PutArray<int64_t>(x_dims)
      .PutArray<int64_t>(begin)
      .PutArray<int64_t>(strides)
      .PutArray<int64_t>(y_dims);
  BufferArg buffers[] = {from, to};
  return LaunchCopy(context, kernel, buffers, params);
}

absl::Status LaunchPad(const OpContext& context, TF_DataType dtype, const Dims& x_dims,
                       const Dims& before, const Dims& after, uint64_t pad_value, BufferArg x,
                       BufferArg y) {
  ParamBlock params = BlockFor(dtype);
  ParamWriter(&params)
      .PutArray<int64_t>(x_dims)
      .PutArray<int64_t>(before)
      .PutArray<int64_t>(after)
      .Put<uint64_t>(pad_value);
  BufferArg buffers[] = {x, y};
  return LaunchCopy(context, data_movement::kPad, buffers, params);
}

absl::Status LaunchTile(const OpContext& context, TF_DataType dtype, const Dims& x_dims,
                        const Dims& y_dims, BufferArg x, BufferArg y) {
  ParamBlock params = BlockFor(dtype);
  ParamWriter(&params).PutArray<int64_t>(x_dims).PutArray<int64_t>(y_dims);
  BufferArg buffers[] = {x, y};
  return LaunchCopy(context, data_movement::kTile, buffers, params);
}

void RegisterReverseOps(const char* device_type);  // reverse_ops.cc
void RegisterMirrorPadOps(const char* device_type);  // mirror_pad_ops.cc
void RegisterRollAndDepthSpaceOps(const char* device_type);  // roll_depth_space_ops.cc
void RegisterSpaceBatchOps(const char* device_type);  // space_batch_ops.cc
void RegisterMatrixDiagOps(const char* device_type);  // matrix_diag_ops.cc

void RegisterDataMovementOps(const char* device_type) {
  RegisterReverseOps(device_type);
  DocumentOp("Transpose", "", "perm in host memory; a permutation that keeps the element order "
             "forwards the input without a launch");
  DocumentOp("ConcatV2", "", "axis in host memory; int32 (shapes) is TensorFlow's host kernel");
  DocumentOp("Pack", "", "int32 (shapes) in host memory, computed on the host");
  DocumentOp("Unpack", "", "int32 (shapes) is TensorFlow's host kernel");
  DocumentOp("DynamicStitch", "",
             "int32 only (shapes: the gradient of a reduction), in host memory, computed on the "
             "host; indices not named leave zeros");
  DocumentOp("Split", "", "split_dim in host memory");
  DocumentOp("SplitV", "", "size_splits and split_dim in host memory (one -1 size inferred)");
  DocumentOp("Slice", "", "begin and size in host memory; a whole-tensor slice forwards the "
             "input; int32 (shapes) is TensorFlow's host kernel");
  DocumentOp("StridedSlice", "", "begin/end/strides in host memory; all masks, negative "
             "strides; int32 (shapes) in host memory, computed on the host");
  DocumentOp("StridedSliceGrad", "", "shape/begin/end/strides in host memory");
  DocumentOp("TensorStridedSliceUpdate", "",
             "begin/end/strides in host memory; the value broadcasts to the slice");
  DocumentOp("Pad", "", "paddings in host memory; zeros");
  DocumentOp("PadV2", "", "paddings and constant_values in host memory");
  DocumentOp("Tile", "", "multiples in host memory");
  DocumentOp("BroadcastTo", "", "shape in host memory; numpy broadcasting");
  RegisterForTypes<TransposeOp>("Transpose", device_type, "Tperm", {"perm"});
  RegisterForTypes<ConcatV2Op>("ConcatV2", device_type, "Tidx", {"axis"}, "T", kShapeOpTypes);
  RegisterForTypes<PackOp<false>>("Pack", device_type, nullptr, {}, "T", kShapeOpTypes);
  RegisterKernel<PackOp<true>>("Pack", device_type, {{"T", TF_INT32}}, {"values", "output"});
  RegisterForTypes<UnpackOp>("Unpack", device_type, nullptr, {}, "T", kShapeOpTypes);
  RegisterKernel<DynamicStitchOp>("DynamicStitch", device_type, {{"T", TF_INT32}},
                                  {"indices", "data", "merged"});
  for (TF_DataType dtype : kDataMovementTypes) {
    RegisterKernel<SplitOp>("Split", device_type, {{"T", dtype}}, {"split_dim"});
  }
  RegisterForTypes<SplitVOp>("SplitV", device_type, "Tlen", {"size_splits", "split_dim"});
  RegisterForTypes<SliceOp>("Slice", device_type, "Index", {"begin", "size"}, "T",
                            kShapeOpTypes);
  RegisterForTypes<StridedSliceOp<false>>("StridedSlice", device_type, "Index",
                                          {"begin", "end", "strides"}, "T", kShapeOpTypes);
  for (TF_DataType index : {TF_INT32, TF_INT64}) {
    RegisterKernel<StridedSliceOp<true>>("StridedSlice", device_type,
                                         {{"T", TF_INT32}, {"Index", index}},
                                         {"input", "begin", "end", "strides", "output"});
  }
  RegisterForTypes<StridedSliceGradOp>("StridedSliceGrad", device_type, "Index",
                                       {"shape", "begin", "end", "strides"});
  RegisterForTypes<TensorStridedSliceUpdateOp>("TensorStridedSliceUpdate", device_type, "Index",
                                               {"begin", "end", "strides"});
  RegisterForTypes<PadOp>("Pad", device_type, "Tpaddings", {"paddings"});
  RegisterForTypes<PadOp>("PadV2", device_type, "Tpaddings", {"paddings", "constant_values"});
  RegisterForTypes<TileOp>("Tile", device_type, "Tmultiples", {"multiples"});
  RegisterForTypes<BroadcastToOp>("BroadcastTo", device_type, "Tidx", {"shape"});
  RegisterMirrorPadOps(device_type);
  RegisterRollAndDepthSpaceOps(device_type);
  RegisterSpaceBatchOps(device_type);
  RegisterMatrixDiagOps(device_type);
}

}  // namespace vgpu
