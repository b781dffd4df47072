// TensorFlow op kernels of the sparse family on the virtual GPU: gathers (GatherV2, Gather,
// GatherNd), scatters into tensors (ScatterNd, TensorScatter{Update, Add, Sub, Min, Max}),
// segment reductions (UnsortedSegment{Sum, Prod, Max, Min}, SegmentSum, SegmentMean) and Where
// (the coordinates of a tensor's non-zero elements, as IndexedSlices helpers use it). The
// resource-variable gathers and scatters need TensorFlow's C++ API and live in
// resource_sparse_ops.cc; RegisterSparseOps registers both.
//
// Each kernel validates its inputs as TensorFlow's kernel does (same conditions, order and
// messages; shape planning shared in sparse_shapes.h), allocates its output and launches one
// kernel of protocol/kernels/sparse.h with a parameter block. Index semantics are TensorFlow's
// GPU kernels': no index is checked on the host (that would cost a round trip per call), a
// gather writes zeros for an out-of-range index and a scatter or segment reduction drops it.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/kernels/resource_sparse_ops.h"
#include "plugin/kernels/sparse_shapes.h"
#include "plugin/protocol/kernels/sparse.h"

namespace vgpu {
namespace {

using sparse_shapes::Dims;

constexpr std::initializer_list<TF_DataType> kIndexTypes = {TF_INT32, TF_INT64};

// ---------------------------------------------------------------------------------------------
// GatherV2 / Gather

// out[b, o, i, :] = params[b, o, indices[b, i], :] (sparse::kGather's layout) of int32 values
// in host memory, zeros for an index outside [0, gather_size) as the device kernel writes.
template <typename Index>
void GatherOnHost(const sparse::GatherParams& p, const int32_t* params, const Index* indices,
                  int32_t* out) {
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t o = 0; o < p.outer; ++o) {
      const int32_t* slab = params + (b * p.outer + o) * p.gather_size * p.inner;
      for (int64_t i = 0; i < p.indices_per_batch; ++i, out += p.inner) {
        const int64_t index = static_cast<int64_t>(indices[b * p.indices_per_batch + i]);
        if (index < 0 || index >= p.gather_size) {
          std::fill_n(out, p.inner, 0);
        } else {
          std::copy_n(slab + index * p.inner, p.inner, out);
        }
      }
    }
  }
}

// GatherV2(params, indices, axis (host)) and the legacy Gather(params, indices) (axis 0). With
// kOnHost, of int32 params with every input and the output in host memory, computed on the host:
// a gather of a shape (the gradient of a mean over dimensions of unknown size gathers them from
// a Shape), kept on the host as the shape ops are (data_movement_ops.cc's kShapeOpTypes), so
// that neither the shape nor the gathered sizes cross to the device and back mid-step.
template <bool kOnHost>
class GatherOp {
 public:
  static absl::StatusOr<std::unique_ptr<GatherOp>> Create(OpConstruction& construction) {
    auto op = std::make_unique<GatherOp>();
    if (construction.Has("batch_dims")) {
      VGPU_ASSIGN_OR_RETURN(op->batch_dims_, construction.Int("batch_dims"));
    }
    return op;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [params, indices] = inputs;
    const auto [params_dims, indices_dims] = ShapesOf(inputs);
    const int64_t params_rank = static_cast<int64_t>(params_dims.size());
    const int64_t indices_rank = static_cast<int64_t>(indices_dims.size());
    if (params_rank < 1) {
      return absl::InvalidArgumentError("params must be at least 1 dimensional");
    }
    int64_t axis = 0;
    const bool axis_is_set = context.num_inputs() == 3;
    if (axis_is_set) {
      VGPU_ASSIGN_OR_RETURN(TensorPtr axis_tensor, context.Input(2));
      if (TF_NumDims(axis_tensor.get()) != 0) {
        return absl::InvalidArgumentError("axis must be scalar");
      }
      VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> axis_values, context.HostIntegers(2));
      axis = axis_values[0];
    }
    // axis in [-rank, rank), checked without forming axis + 1 or -axis (either overflows at the
    // ends of int64; the rank needed is named as an unsigned number).
    if (axis >= params_rank || axis < -params_rank) {
      const uint64_t min_params_dim = axis < 0 ? static_cast<uint64_t>(-(axis + 1)) + 1
                                               : static_cast<uint64_t>(axis) + 1;
      return absl::InvalidArgumentError(absl::StrCat("Shape must be at least rank ",
                                                     min_params_dim, " but is rank ",
                                                     params_rank));
    }
    if (axis < 0) axis += params_rank;
    int64_t batch_dims = batch_dims_;
    if (batch_dims != 0) {
      if (batch_dims < -indices_rank || batch_dims > indices_rank) {
        return absl::InvalidArgumentError(absl::StrCat("Expected batch_dims in the range [",
                                                       -indices_rank, ", ", indices_rank,
                                                       "], but got ", batch_dims));
      }
      if (batch_dims < 0) batch_dims += indices_rank;
      if (!axis_is_set) axis = batch_dims;
      if (batch_dims >= params_rank) {
        return absl::InvalidArgumentError(absl::StrCat("batch_dims (", batch_dims,
                                                       ") must be less than rank(params) (",
                                                       params_rank, ")."));
      }
      if (axis < batch_dims) {
        return absl::InvalidArgumentError(absl::StrCat("batch_dims (", batch_dims,
                                                       ") must be less than or equal to ",
                                                       "axis (", axis, ")."));
      }
      for (int64_t i = 0; i < batch_dims; ++i) {
        if (params_dims[i] != indices_dims[i]) {
          return absl::InvalidArgumentError(absl::StrCat(
              "params.shape[", i, "]: ", params_dims[i], " should be equal to indices.shape[",
              i, "]: ", indices_dims[i]));
        }
      }
    }
    const TF_DataType index_type = TF_TensorType(indices.get());
    VGPU_ASSIGN_OR_RETURN(DType index_dtype, sparse_shapes::IndexDTypeOf(index_type));
    const int64_t gather_size = params_dims[axis];
    if (gather_size > sparse_shapes::IndexMax(index_dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "params.shape[", axis, "] too large for ", sparse_shapes::IndexName(index_dtype),
          " indexing: ", gather_size, " > ", sparse_shapes::IndexMax(index_dtype)));
    }
    // Output: params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1:].
    Dims output_dims;
    sparse::GatherParams p;
    p.index_dtype = index_dtype;
    p.gather_size = gather_size;
    for (int64_t i = 0; i < batch_dims; ++i) {
      output_dims.push_back(params_dims[i]);
      p.batch *= params_dims[i];
    }
    for (int64_t i = batch_dims; i < axis; ++i) {
      output_dims.push_back(params_dims[i]);
      p.outer *= params_dims[i];
    }
    for (int64_t i = batch_dims; i < indices_rank; ++i) output_dims.push_back(indices_dims[i]);
    for (int64_t i = axis + 1; i < params_rank; ++i) {
      output_dims.push_back(params_dims[i]);
      p.inner *= params_dims[i];
    }
    const TF_DataType dtype = TF_TensorType(params.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.AllocateOutput(0, dtype, output_dims));
    const int64_t n = NumElements(indices_dims);
    if (NumElements(output_dims) == 0) return absl::OkStatus();
    p.element_size = static_cast<uint32_t>(TF_DataTypeSize(dtype));
    p.indices_per_batch = n / p.batch;  // p.batch > 0: the output is not empty
    if constexpr (kOnHost) {
      const auto* values = static_cast<const int32_t*>(TF_TensorData(params.get()));
      auto* result = static_cast<int32_t*>(TF_TensorData(out.get()));
      const void* index_data = TF_TensorData(indices.get());
      if (index_type == TF_INT32) {
        GatherOnHost(p, values, static_cast<const int32_t*>(index_data), result);
      } else {
        GatherOnHost(p, values, static_cast<const int64_t*>(index_data), result);
      }
      return absl::OkStatus();
    }
    return KernelLaunch(context)
        .Buffers({BufferOf(params.get()), BufferOf(indices.get()), BufferOf(out.get())})
        .Param(p)
        .Run(sparse::kGather);
  }

 private:
  int64_t batch_dims_ = 0;
};

// ---------------------------------------------------------------------------------------------
// GatherNd

class GatherNdOp {
 public:
  static absl::StatusOr<std::unique_ptr<GatherNdOp>> Create(OpConstruction& construction) {
    auto op = std::make_unique<GatherNdOp>();
    if (construction.Has("bad_indices_policy")) {
      VGPU_ASSIGN_OR_RETURN(std::string policy, construction.String("bad_indices_policy"));
      if (policy == "ERROR") {
        op->error_on_bad_indices_ = true;
      } else if (!policy.empty() && policy != "DEFAULT" && policy != "IGNORE") {
        return absl::InvalidArgumentError(
            absl::StrCat("Unknown bad indices handling attribute: ", policy));
      }
    }
    return op;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [params, indices] = inputs;
    const auto [params_dims, indices_dims] = ShapesOf(inputs);
    const TF_DataType dtype = TF_TensorType(params.get());
    VGPU_ASSIGN_OR_RETURN(DType index_dtype,
                          sparse_shapes::IndexDTypeOf(TF_TensorType(indices.get())));
    VGPU_ASSIGN_OR_RETURN(
        sparse_shapes::GatherNdPlan plan,
        sparse_shapes::PlanGatherNd(params_dims, indices_dims, index_dtype,
                                    static_cast<uint32_t>(TF_DataTypeSize(dtype))));
    if (error_on_bad_indices_ && plan.params.num_slices > 0) {
      VGPU_RETURN_IF_ERROR(CheckIndices(context, indices.get(), params_dims, indices_dims));
    }
    VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.AllocateOutput(0, dtype, plan.output_dims));
    if (!plan.launch) return absl::OkStatus();
    return KernelLaunch(context)
        .Buffers({BufferOf(params.get()), BufferOf(indices.get()), BufferOf(out.get())})
        .Param(plan.params)
        .ParamArray<int64_t>(plan.prefix_dims)
        .Run(sparse::kGatherNd);
  }

 private:
  // bad_indices_policy "ERROR": the indices are read back (a round trip) and checked as the
  // CPU kernel does; TensorFlow's GPU kernel has no such mode and leaves the op to the CPU.
  static absl::Status CheckIndices(const OpContext& context, const TF_Tensor* indices,
                                   const Dims& params_dims, const Dims& indices_dims) {
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> values, context.DeviceIntegers(indices));
    const int64_t depth = indices_dims.back();
    if (depth == 0) return absl::OkStatus();
    const int64_t tuples = static_cast<int64_t>(values.size()) / depth;
    for (int64_t n = 0; n < tuples; ++n) {
      const absl::Span<const int64_t> tuple(values.data() + n * depth, depth);
      for (int64_t d = 0; d < depth; ++d) {
        if (tuple[d] < 0 || tuple[d] >= params_dims[d]) {
          const TF_StringView name = TF_GetOpKernelName(context.raw());
          return absl::InvalidArgumentError(sparse_shapes::BadGatherNdIndexMessage(
              indices_dims, n, tuple, params_dims, absl::string_view(name.data, name.len)));
        }
      }
    }
    return absl::OkStatus();
  }

  bool error_on_bad_indices_ = false;
};

// ---------------------------------------------------------------------------------------------
// ScatterNd and TensorScatter*

// The checks ScatterNdOp (tensor_scatter false) and TensorScatterOp (true) make before
// DoScatterNd, each in its own wording.
absl::Status CheckOuterAndInnerDims(const Dims& output, const Dims& indices, const Dims& updates,
                                    bool tensor_scatter) {
  const int64_t outer_dims = static_cast<int64_t>(indices.size()) - 1;
  const int64_t updates_rank = static_cast<int64_t>(updates.size());
  const int64_t output_rank = static_cast<int64_t>(output.size());
  for (int64_t i = 0; i < outer_dims; ++i) {
    if (i >= updates_rank || indices[i] != updates[i]) {
      if (tensor_scatter) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Outer dimensions of indices and update must match. Indices shape: ",
            ShapeString(indices), ", updates shape:", ShapeString(updates)));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "Dimensions [0,", outer_dims, ") of indices[shape=", ShapeString(indices),
          "] must match dimensions [0,", outer_dims, ") of updates[shape=", ShapeString(updates),
          "]"));
    }
  }
  const int64_t ix = indices[outer_dims];
  auto inner_error = [&]() {
    return absl::InvalidArgumentError(absl::StrCat(
        "Dimensions [", ix, ",", output_rank, ") of input[shape=", ShapeString(output),
        "] must match dimensions [", outer_dims, ",", updates_rank, ") of updates[shape=",
        ShapeString(updates), "]"));
  };
  if (updates_rank - outer_dims != output_rank - ix) {
    if (tensor_scatter) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Inner dimensions of output shape must match inner dimensions of updates shape. "
          "Output: ",
          ShapeString(output), " updates: ", ShapeString(updates)));
    }
    return inner_error();
  }
  for (int64_t i = 0; i + outer_dims < updates_rank; ++i) {
    if (updates[i + outer_dims] != output[ix + i]) {
      if (tensor_scatter) {
        return absl::InvalidArgumentError(absl::StrCat(
            "The inner ", output_rank - ix, " dimensions of output.shape=", ShapeString(output),
            " must match the inner ", updates_rank - outer_dims,
            " dimensions of updates.shape=", ShapeString(updates)));
      }
      return inner_error();
    }
  }
  return absl::OkStatus();
}

// TensorFlow's check that a scatter into an empty output has nothing to scatter.
absl::Status CheckEmptyOutput(int64_t output_elements, const Dims& indices, const Dims& updates) {
  if (sparse_shapes::ValidEmptyOutputShape(output_elements, NumElements(indices),
                                           NumElements(updates))) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError("Indices and updates specified for empty output shape");
}

// The plan of a ScatterNd-family scatter of `updates` (values of `dtype`) at `indices` into a
// tensor of `shape`.
absl::StatusOr<sparse_shapes::ScatterNdPlan> PlanScatter(TF_DataType dtype,
                                                         const TF_Tensor* indices,
                                                         const Dims& shape,
                                                         const Dims& indices_dims,
                                                         const Dims& updates_dims) {
  VGPU_ASSIGN_OR_RETURN(DType data_dtype, DTypeOf(dtype));
  VGPU_ASSIGN_OR_RETURN(DType index_dtype,
                        sparse_shapes::IndexDTypeOf(TF_TensorType(indices)));
  return sparse_shapes::PlanScatterNd(shape, indices_dims, updates_dims, data_dtype,
                                      index_dtype);
}

// Launches a planned ScatterNd-family scatter into `output` (in place).
absl::Status LaunchScatterNd(const OpContext& context, const sparse_shapes::ScatterNdPlan& plan,
                             const TF_Tensor* output, const TF_Tensor* indices,
                             const TF_Tensor* updates) {
  return KernelLaunch(context)
      .Buffers({BufferOf(output), BufferOf(indices), BufferOf(updates)})
      .Param(plan.params)
      .ParamArray<int64_t>(plan.prefix_dims)
      .Run(sparse::kScatterNd);
}

// ScatterNd(indices, updates, shape (host)): zeros of `shape` with the updates added.
class ScatterNdOp : public NoAttributes<ScatterNdOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<3>());
    const auto& [indices, updates, shape_tensor] = inputs;
    const Dims indices_dims = ShapeOf(indices.get());
    const Dims updates_dims = ShapeOf(updates.get());
    VGPU_RETURN_IF_ERROR(sparse_shapes::CheckIndicesAndUpdatesRank(indices_dims, updates_dims));
    VGPU_ASSIGN_OR_RETURN(Dims shape, context.HostIntegers(2));
    int64_t elements = 1;
    for (int64_t d : shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(absl::StrCat("Dimension ", d, " must be >= 0"));
      }
      if (d > 0 && elements > std::numeric_limits<int64_t>::max() / d) {
        return absl::InvalidArgumentError(
            absl::StrCat("Shape ", ShapeString(shape), " has too many elements"));
      }
      elements *= d;
    }
    VGPU_RETURN_IF_ERROR(
        CheckEmptyOutput(TF_TensorElementCount(shape_tensor.get()), indices_dims, updates_dims));
    VGPU_RETURN_IF_ERROR(CheckOuterAndInnerDims(shape, indices_dims, updates_dims, false));
    if (TF_NumDims(shape_tensor.get()) != 1) {
      return absl::InvalidArgumentError("Shape must be a vector");
    }
    const TF_DataType dtype = TF_TensorType(updates.get());
    VGPU_ASSIGN_OR_RETURN(sparse_shapes::ScatterNdPlan plan,
                          PlanScatter(dtype, indices.get(), shape, indices_dims, updates_dims));
    VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.AllocateOutput(0, dtype, shape));
    if (!plan.launch) return absl::OkStatus();
    plan.params.op = sparse::ScatterOp::kAdd;
    plan.params.zero_output = 1;
    return LaunchScatterNd(context, plan, out.get(), indices.get(), updates.get());
  }
};

// TensorScatter{Update, Add, Sub, Min, Max}(tensor, indices, updates): a copy of `tensor` (its
// buffer when TensorFlow lets the output take it over) with the updates applied.
template <sparse::ScatterOp kOp>
class TensorScatterOp : public NoAttributes<TensorScatterOp<kOp>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<3>());
    const auto& [tensor, indices, updates] = inputs;
    const auto [shape, indices_dims, updates_dims] = ShapesOf(inputs);
    VGPU_RETURN_IF_ERROR(sparse_shapes::CheckIndicesAndUpdatesRank(indices_dims, updates_dims));
    VGPU_RETURN_IF_ERROR(CheckEmptyOutput(NumElements(shape), indices_dims, updates_dims));
    VGPU_RETURN_IF_ERROR(CheckOuterAndInnerDims(shape, indices_dims, updates_dims, true));
    const TF_DataType dtype = TF_TensorType(tensor.get());
    VGPU_ASSIGN_OR_RETURN(sparse_shapes::ScatterNdPlan plan,
                          PlanScatter(dtype, indices.get(), shape, indices_dims, updates_dims));
    VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.ForwardOrAllocateOutput({0}, 0, dtype, shape));
    VGPU_RETURN_IF_ERROR(context.CopyUnlessForwarded(tensor.get(), out.get()));
    if (!plan.launch) return absl::OkStatus();
    plan.params.op = kOp;
    return LaunchScatterNd(context, plan, out.get(), indices.get(), updates.get());
  }
};

// ---------------------------------------------------------------------------------------------
// Segment reductions

absl::Status LaunchSegmentReduce(const OpContext& context, sparse::SegmentOp op,
                                 const TF_Tensor* data, const TF_Tensor* segment_ids,
                                 const TF_Tensor* output, int64_t num_segments) {
  sparse::SegmentReduceParams p;
  VGPU_ASSIGN_OR_RETURN(p.dtype, DTypeOf(TF_TensorType(data)));
  VGPU_ASSIGN_OR_RETURN(p.index_dtype, sparse_shapes::IndexDTypeOf(TF_TensorType(segment_ids)));
  p.op = op;
  p.num_ids = TF_TensorElementCount(segment_ids);
  const Dims data_dims = ShapeOf(data);
  p.inner = NumElements(absl::Span<const int64_t>(data_dims).subspan(TF_NumDims(segment_ids)));
  p.num_segments = num_segments;
  return KernelLaunch(context)
      .Buffers({BufferOf(data), BufferOf(segment_ids), BufferOf(output)})
      .Param(p)
      .Run(sparse::kSegmentReduce);
}

// UnsortedSegment{Sum, Prod, Max, Min}(data, segment_ids, num_segments (host)).
template <sparse::SegmentOp kOp>
class UnsortedSegmentOp : public NoAttributes<UnsortedSegmentOp<kOp>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<3>());
    const auto& [data, segment_ids, num_segments_tensor] = inputs;
    const Dims data_dims = ShapeOf(data.get());
    const Dims ids_dims = ShapeOf(segment_ids.get());
    if (TF_NumDims(num_segments_tensor.get()) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_segments should be a scalar, not shape ",
                       ShapeString(ShapeOf(num_segments_tensor.get()))));
    }
    if (ids_dims.size() > data_dims.size() ||
        !std::equal(ids_dims.begin(), ids_dims.end(), data_dims.begin())) {
      return absl::InvalidArgumentError(absl::StrCat("data.shape = ", ShapeString(data_dims),
                                                     " does not start with segment_ids.shape = ",
                                                     ShapeString(ids_dims)));
    }
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> num_segments_value, context.HostIntegers(2));
    const int64_t num_segments = num_segments_value[0];
    if (num_segments < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Input num_segments == ", num_segments,
                                                     " must not be negative."));
    }
    Dims output_dims = {num_segments};
    output_dims.insert(output_dims.end(), data_dims.begin() + ids_dims.size(), data_dims.end());
    const TF_DataType dtype = TF_TensorType(data.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.AllocateOutput(0, dtype, output_dims));
    if (NumElements(output_dims) == 0) return absl::OkStatus();
    return LaunchSegmentReduce(context, kOp, data.get(), segment_ids.get(), out.get(),
                               num_segments);
  }
};

// SegmentSum / SegmentMean(data, segment_ids): segment_ids sorted, the output has
// segment_ids[-1] + 1 rows. That count lives in device memory: like TensorFlow's GPU kernel,
// the op reads it back (a round trip). As there, ids are not checked to be sorted.
template <sparse::SegmentOp kOp>
class SortedSegmentOp : public NoAttributes<SortedSegmentOp<kOp>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [data, segment_ids] = inputs;
    const auto [data_dims, ids_dims] = ShapesOf(inputs);
    if (ids_dims.size() != 1) {
      return absl::InvalidArgumentError("segment_ids should be a vector.");
    }
    if (data_dims.empty()) {
      return absl::InvalidArgumentError("Shape must be at least rank 1");
    }
    const int64_t num_ids = ids_dims[0];
    if (num_ids != data_dims[0]) {
      return absl::InvalidArgumentError(
          "segment_ids should be the same size as dimension 0 of input.");
    }
    const TF_DataType dtype = TF_TensorType(data.get());
    Dims output_dims = data_dims;
    if (num_ids == 0) {
      output_dims[0] = 0;
      VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.AllocateOutput(0, dtype, output_dims));
      return absl::OkStatus();
    }
    VGPU_ASSIGN_OR_RETURN(int64_t last_id, LastSegmentId(context, segment_ids.get()));
    if (last_id < 0) return absl::InvalidArgumentError("segment ids must be >= 0");
    if (last_id == std::numeric_limits<int64_t>::max()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Encountered overflow when multiplying ", last_id, " + 1 rows, result: -1"));
    }
    output_dims[0] = last_id + 1;
    VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.AllocateOutput(0, dtype, output_dims));
    if (NumElements(output_dims) == 0) return absl::OkStatus();
    return LaunchSegmentReduce(context, kOp, data.get(), segment_ids.get(), out.get(),
                               output_dims[0]);
  }

 private:
  static absl::StatusOr<int64_t> LastSegmentId(const OpContext& context,
                                               const TF_Tensor* segment_ids) {
    VGPU_ASSIGN_OR_RETURN(ClientStream * stream, context.Stream());
    const size_t size = TF_DataTypeSize(TF_TensorType(segment_ids));
    const BufferArg ids = BufferOf(segment_ids);
    int64_t value = 0;
    int32_t value32 = 0;
    void* host = size == sizeof(int32_t) ? static_cast<void*>(&value32) : &value;
    VGPU_RETURN_IF_ERROR(
        stream->device().CopyDeviceToHost(*stream, host, ids.address + ids.size - size, size));
    VGPU_RETURN_IF_ERROR(stream->device().SynchronizeStream(*stream));
    return size == sizeof(int32_t) ? static_cast<int64_t>(value32) : value;
  }
};

// ---------------------------------------------------------------------------------------------
// Where

// Where(input): the coordinates of the true (non-zero) elements, [num_true, rank] int64. As
// TensorFlow's GPU kernel, it counts on the device, reads the count back (a round trip) to
// size the output, then writes the coordinates.
class WhereOp : public NoAttributes<WhereOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr input, context.Input(0));
    const Dims dims = ShapeOf(input.get());
    if (dims.empty() || dims.size() > static_cast<size_t>(kMaxRank)) {
      return absl::InvalidArgumentError(
          absl::StrCat("WhereOp : Unhandled input dimensions: ", dims.size()));
    }
    sparse::WhereParams p;
    VGPU_ASSIGN_OR_RETURN(p.dtype, DTypeOf(TF_TensorType(input.get())));
    p.rank = static_cast<uint32_t>(dims.size());
    const int64_t rank = static_cast<int64_t>(dims.size());
    if (NumElements(dims) == 0) {
      VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.AllocateOutput(0, TF_INT64, {0, rank}));
      return absl::OkStatus();
    }
    VGPU_ASSIGN_OR_RETURN(TensorPtr count, context.AllocateTemp(TF_INT64, {}));
    VGPU_RETURN_IF_ERROR(KernelLaunch(context)
                             .Buffer(BufferOf(input.get()))
                             .Buffer(BufferOf(count.get()))
                             .Param(p)
                             .ParamArray<int64_t>(dims)
                             .Run(sparse::kCountTrue));
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> num_true, context.DeviceIntegers(count.get()));
    p.num_true = num_true[0];
    VGPU_ASSIGN_OR_RETURN(TensorPtr out,
                          context.AllocateOutput(0, TF_INT64, {p.num_true, rank}));
    if (p.num_true == 0 || rank == 0) return absl::OkStatus();
    return KernelLaunch(context)
        .Buffer(BufferOf(input.get()))
        .Buffer(BufferOf(out.get()))
        .Param(p)
        .ParamArray<int64_t>(dims)
        .Run(sparse::kWhere);
  }
};

// Registers `K` for every (value dtype, index dtype) pair.
template <typename K>
void RegisterIndexed(const char* op_name, const char* device_type, const char* value_attribute,
                     std::initializer_list<TF_DataType> dtypes, const char* index_attribute,
                     std::initializer_list<const char*> host_memory = {}) {
  for (TF_DataType dtype : dtypes) {
    for (TF_DataType index : kIndexTypes) {
      RegisterKernel<K>(op_name, device_type, {{value_attribute, dtype}, {index_attribute, index}},
                        host_memory);
    }
  }
}

}  // namespace

void RegisterSparseOps(const char* device_type) {
  // Value dtypes as TensorFlow's GPU registrations (float16 added where Keras mixed precision
  // needs it), less the complex types the virtual GPU does not have.
  // int32 gathers compute on the host (GatherOp<true>).
  const std::initializer_list<TF_DataType> kGatherTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                           TF_DOUBLE, TF_INT64, TF_BOOL};
  const std::initializer_list<TF_DataType> kGatherNdTypes = {
      TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE, TF_INT32, TF_INT64};
  const std::initializer_list<TF_DataType> kScatterTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                            TF_DOUBLE, TF_INT64, TF_INT32};
  const std::initializer_list<TF_DataType> kSegmentTypes = {
      TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE, TF_INT32, TF_INT64};

  RegisterIndexed<GatherOp<false>>("GatherV2", device_type, "Tparams", kGatherTypes, "Tindices",
                                   {"axis"});
  RegisterIndexed<GatherOp<true>>("GatherV2", device_type, "Tparams", {TF_INT32}, "Tindices",
                                  {"params", "indices", "axis", "output"});
  RegisterIndexed<GatherOp<false>>("Gather", device_type, "Tparams", kGatherTypes, "Tindices");
  RegisterIndexed<GatherOp<true>>("Gather", device_type, "Tparams", {TF_INT32}, "Tindices",
                                  {"params", "indices", "output"});
  RegisterIndexed<GatherNdOp>("GatherNd", device_type, "Tparams", kGatherNdTypes, "Tindices");
  // bool ScatterNd (an or) and TensorScatterUpdate are what Keras' IndexedSlices helpers use;
  // TensorFlow's GPU build leaves them (and int32, kept in host memory) to the CPU.
  RegisterIndexed<ScatterNdOp>("ScatterNd", device_type, "T", kScatterTypes, "Tindices",
                               {"shape"});
  RegisterIndexed<ScatterNdOp>("ScatterNd", device_type, "T", {TF_BOOL}, "Tindices", {"shape"});
  using Op = sparse::ScatterOp;
  RegisterIndexed<TensorScatterOp<Op::kAssign>>("TensorScatterUpdate", device_type, "T",
                                                kScatterTypes, "Tindices");
  RegisterIndexed<TensorScatterOp<Op::kAssign>>("TensorScatterUpdate", device_type, "T",
                                                {TF_BOOL}, "Tindices");
  RegisterIndexed<TensorScatterOp<Op::kAdd>>("TensorScatterAdd", device_type, "T",
                                             kScatterTypes, "Tindices");
  RegisterIndexed<TensorScatterOp<Op::kSub>>("TensorScatterSub", device_type, "T",
                                             kScatterTypes, "Tindices");
  RegisterIndexed<TensorScatterOp<Op::kMin>>("TensorScatterMin", device_type, "T",
                                             kScatterTypes, "Tindices");
  RegisterIndexed<TensorScatterOp<Op::kMax>>("TensorScatterMax", device_type, "T",
                                             kScatterTypes, "Tindices");
  using Seg = sparse::SegmentOp;
  RegisterIndexed<UnsortedSegmentOp<Seg::kSum>>("UnsortedSegmentSum", device_type, "T",
                                                kSegmentTypes, "Tindices", {"num_segments"});
  RegisterIndexed<UnsortedSegmentOp<Seg::kProd>>("UnsortedSegmentProd", device_type, "T",
                                                 kSegmentTypes, "Tindices", {"num_segments"});
  RegisterIndexed<UnsortedSegmentOp<Seg::kMax>>("UnsortedSegmentMax", device_type, "T",
                                                kSegmentTypes, "Tindices", {"num_segments"});
  RegisterIndexed<UnsortedSegmentOp<Seg::kMin>>("UnsortedSegmentMin", device_type, "T",
                                                kSegmentTypes, "Tindices", {"num_segments"});
  RegisterIndexed<SortedSegmentOp<Seg::kSum>>("SegmentSum", device_type, "T",
                                              {TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE},
                                              "Tindices");
  RegisterIndexed<SortedSegmentOp<Seg::kMean>>("SegmentMean", device_type, "T",
                                               {TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE},
                                               "Tindices");

  constexpr const char* kGatherNote =
      "An index outside [0, params.shape[axis]) gives a zero output row, no error (TensorFlow's "
      "GPU kernel). int32 params (shapes) in host memory, computed on the host.";
  DocumentOp("GatherV2", "", kGatherNote);
  DocumentOp("Gather", "", kGatherNote);
  DocumentOp("GatherNd", "",
             "An index tuple outside params gives zeros, no error (TensorFlow's GPU kernel); "
             "bad_indices_policy=\"ERROR\" reads the indices back and raises InvalidArgument as "
             "the CPU kernel does.");
  constexpr const char* kScatterNdNote =
      "Duplicate indices combine in index order (deterministic); an index tuple outside the "
      "output is ignored, no error (TensorFlow's GPU kernel).";
  for (const char* op : {"ScatterNd", "TensorScatterUpdate", "TensorScatterAdd",
                         "TensorScatterSub", "TensorScatterMin", "TensorScatterMax"}) {
    DocumentOp(op, "", kScatterNdNote);
  }
  constexpr const char* kSegmentNote =
      "Segment ids outside [0, num_segments), negative ones included, are dropped, no error "
      "(TensorFlow's GPU kernel); rows are reduced in order (deterministic).";
  for (const char* op : {"UnsortedSegmentSum", "UnsortedSegmentProd", "UnsortedSegmentMax",
                         "UnsortedSegmentMin"}) {
    DocumentOp(op, "", kSegmentNote);
  }
  constexpr const char* kSortedNote =
      "Reads the last segment id back to size the output (a round trip, as TensorFlow's GPU "
      "kernel); ids are not checked to be sorted, out-of-range ids are dropped.";
  DocumentOp("SegmentSum", "", kSortedNote);
  DocumentOp("SegmentMean", "", kSortedNote);
  for (TF_DataType dtype : {TF_BOOL, TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE, TF_INT32,
                            TF_INT64, TF_UINT8}) {
    RegisterKernel<WhereOp>("Where", device_type, {{"T", dtype}});
  }
  DocumentOp("Where", "",
             "Counts the true elements on the device and reads the count back to size the "
             "output (a round trip, as TensorFlow's GPU kernel); NaN counts as true.");

  RegisterResourceSparseOps(device_type);
}

}  // namespace vgpu
