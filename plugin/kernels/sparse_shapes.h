// Shape validation and launch plans of the sparse family's gathers and scatters, shared by the
// C API op kernels (sparse_ops.cc) and the resource-variable op kernels written against
// TensorFlow's C++ API (resource_sparse_ops.cc). Pure functions of shapes: the checks, their
// order and their messages are TensorFlow's (gather_nd_op.h DoGatherNd, scatter_nd_op.cc
// PrepareAndValidateInputs, scatter_nd_util.cc ValidateScatterNdUpdateShape), so an op fails at
// the call with TensorFlow's InvalidArgument before anything is enqueued. Header-only (inline),
// as both op kernel files include it and it has no other home in the build.
#ifndef VGPU_KERNELS_SPARSE_SHAPES_H_
#define VGPU_KERNELS_SPARSE_SHAPES_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/kernels/kernel_support.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/protocol/kernels/sparse.h"
#include "tensorflow/c/tf_datatype.h"

namespace vgpu::sparse_shapes {

using Dims = std::vector<int64_t>;

// The protocol index dtype of int32 / int64 indices (a TF_DataType or tensorflow::DataType value:
// they share their numbers).
inline absl::StatusOr<DType> IndexDTypeOf(int tf_dtype) {
  if (tf_dtype == TF_INT32) return DType::kInt32;
  if (tf_dtype == TF_INT64) return DType::kInt64;
  return absl::InvalidArgumentError(absl::StrCat("indices must be int32 or int64, got dtype ",
                                                 tf_dtype));
}

// The largest value of an index dtype, and its name in TensorFlow's messages.
inline int64_t IndexMax(DType index_dtype) {
  return index_dtype == DType::kInt32 ? std::numeric_limits<int32_t>::max()
                                      : std::numeric_limits<int64_t>::max();
}
inline const char* IndexName(DType index_dtype) {
  return index_dtype == DType::kInt32 ? "int32" : "int64";
}

// TensorFlow's ValidEmptyOutputShape: an empty output, indices or updates only all together.
inline bool ValidEmptyOutputShape(int64_t num_inputs, int64_t num_indices, int64_t num_updates) {
  if (num_indices == 0 && num_updates == 0) return true;
  return num_inputs != 0 && num_indices != 0 && num_updates != 0;
}

// GatherNd / ResourceGatherNd: validates as DoGatherNd and returns the output shape and the
// launch parameters (the kernel's params struct and its prefix_dims array). `launch` is false
// when the output is empty (nothing to compute).
struct GatherNdPlan {
  Dims output_dims;
  sparse::GatherNdParams params;
  Dims prefix_dims;
  bool launch = false;
};

inline absl::StatusOr<GatherNdPlan> PlanGatherNd(absl::Span<const int64_t> params_dims,
                                                 absl::Span<const int64_t> indices_dims,
                                                 DType index_dtype, uint32_t element_size) {
  if (params_dims.empty()) {
    return absl::InvalidArgumentError("params must be at least a vector");
  }
  if (indices_dims.empty()) {
    return absl::InvalidArgumentError("indices must be at least a vector");
  }
  const int64_t rank = static_cast<int64_t>(params_dims.size());
  const int64_t depth = indices_dims.back();
  if (depth > rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "index innermost dimension length must be <= params rank; saw: ", depth, " vs. ", rank));
  }
  const int64_t num_slices = NumElements(indices_dims.subspan(0, indices_dims.size() - 1));
  if (num_slices > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("indices has too many elements for int indexing: ", num_slices, " > ",
                     std::numeric_limits<int32_t>::max()));
  }
  const int64_t index_max = IndexMax(index_dtype);
  if (NumElements(params_dims) > index_max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "params.NumElements() too large for ", IndexName(index_dtype),
        " indexing: ", NumElements(params_dims), " > ", index_max));
  }
  GatherNdPlan plan;
  plan.output_dims.assign(indices_dims.begin(), indices_dims.end() - 1);
  int64_t slice_size = 1;
  for (int64_t i = depth; i < rank; ++i) {
    slice_size *= params_dims[i];
    plan.output_dims.push_back(params_dims[i]);
  }
  if (slice_size > index_max) {
    return absl::InvalidArgumentError(absl::StrCat("slice size is too large for indexing: ",
                                                   slice_size, " > ", index_max));
  }
  if (num_slices > 0) {
    if (NumElements(params_dims) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Requested more than 0 entries, but params is empty.  Params shape: ",
          ShapeString(params_dims)));
    }
    if (depth > sparse::kMaxIndexDepth) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Only indices.shape[-1] values between 1 and 7 are currently supported.  "
          "Requested rank: ",
          depth));
    }
  }
  plan.params.element_size = element_size;
  plan.params.index_dtype = index_dtype;
  plan.params.num_slices = num_slices;
  plan.params.slice_size = slice_size;
  plan.params.index_depth = static_cast<uint32_t>(std::max<int64_t>(depth, 0));
  plan.prefix_dims.assign(params_dims.begin(), params_dims.begin() + depth);
  plan.launch = NumElements(plan.output_dims) > 0;
  return plan;
}

// TensorFlow's SliceDebugString: the position of flat element `flat` of a tensor of `dims`,
// "[i]" or "[i,j,...]" ("" for a scalar).
inline std::string SliceDebugString(absl::Span<const int64_t> dims, int64_t flat) {
  if (dims.empty()) return "";
  Dims coords(dims.size());
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    coords[i] = dims[i] == 0 ? 0 : flat % dims[i];
    flat = dims[i] == 0 ? 0 : flat / dims[i];
  }
  return absl::StrCat("[", absl::StrJoin(coords, ","), "]");
}

// The message of a GatherNd index tuple that does not address params (the ERROR policy; the
// CPU kernel's wording).
inline std::string BadGatherNdIndexMessage(absl::Span<const int64_t> indices_dims,
                                           int64_t tuple, absl::Span<const int64_t> coordinates,
                                           absl::Span<const int64_t> params_dims,
                                           absl::string_view node_name) {
  return absl::StrCat("indices",
                      SliceDebugString(indices_dims.subspan(0, indices_dims.size() - 1), tuple),
                      " = [", absl::StrJoin(coordinates, ", "),
                      "] does not index into param shape ", ShapeString(params_dims),
                      ", node name: ", node_name);
}

// ScatterNd-family DoScatterNd validation (PrepareAndValidateInputs, with
// ValidateScatterNdUpdateShape) of updates scattered into a tensor of `output_dims`; returns the
// launch parameters (op and zero_output left to the caller) and the prefix_dims array. An empty
// output needs no launch (`launch` false).
struct ScatterNdPlan {
  sparse::ScatterNdParams params;
  Dims prefix_dims;
  bool launch = false;
};

inline absl::Status ValidateScatterNdUpdateShape(absl::Span<const int64_t> output,
                                                 absl::Span<const int64_t> indices,
                                                 absl::Span<const int64_t> updates) {
  const int64_t index_rank = static_cast<int64_t>(indices.size());
  const int64_t slice_dim = index_rank > 1 ? indices.back() : 1;
  const int64_t batch_dim = index_rank > 1 ? index_rank - 1 : 1;
  const int64_t output_rank = static_cast<int64_t>(output.size());
  const int64_t updates_rank = static_cast<int64_t>(updates.size());
  auto prefix_error = [&]() {
    return absl::InvalidArgumentError(absl::StrCat(
        "Dimensions [0,", batch_dim, ") of indices[shape=", ShapeString(indices),
        "] must match dimensions [0,", batch_dim, ") of updates[shape=", ShapeString(updates),
        "]"));
  };
  auto suffix_error = [&]() {
    return absl::InvalidArgumentError(absl::StrCat(
        "Dimensions [", slice_dim, ",", output_rank, ") of input[shape=", ShapeString(output),
        "] must match dimensions [", slice_dim, ",", updates_rank, ") of updates[shape=",
        ShapeString(updates), "]"));
  };
  if (updates_rank < batch_dim) return prefix_error();
  if (output_rank < slice_dim + (updates_rank - batch_dim)) return suffix_error();
  if (updates_rank != batch_dim + output_rank - slice_dim) return suffix_error();
  for (int64_t d = 0; d < batch_dim; ++d) {
    if (d >= index_rank || updates[d] != indices[d]) return prefix_error();
  }
  for (int64_t d = 0; d < updates_rank - batch_dim; ++d) {
    if (updates[d + batch_dim] != output[d + slice_dim]) return suffix_error();
  }
  return absl::OkStatus();
}

// TensorFlow's ScatterNd checks that indices and updates are at least vectors.
inline absl::Status CheckIndicesAndUpdatesRank(absl::Span<const int64_t> indices,
                                               absl::Span<const int64_t> updates) {
  if (indices.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Indices shape must have rank at least one. Found:", ShapeString(indices)));
  }
  if (updates.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Updates shape must have rank at least one. Found:", ShapeString(updates)));
  }
  return absl::OkStatus();
}

inline absl::StatusOr<ScatterNdPlan> PlanScatterNd(absl::Span<const int64_t> output_dims,
                                                   absl::Span<const int64_t> indices_dims,
                                                   absl::Span<const int64_t> updates_dims,
                                                   DType dtype, DType index_dtype) {
  if (output_dims.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Output must be at least 1-D, got shape: ", ShapeString(output_dims)));
  }
  if (!ValidEmptyOutputShape(NumElements(output_dims), NumElements(indices_dims),
                             NumElements(updates_dims))) {
    return absl::InvalidArgumentError(
        absl::StrCat("Indices and updates specified for empty output.  indices shape: ",
                     ShapeString(indices_dims)));
  }
  // (TensorFlow reads dimension 0 of both without checking their rank; a scalar is refused here.)
  VGPU_RETURN_IF_ERROR(CheckIndicesAndUpdatesRank(indices_dims, updates_dims));
  if (updates_dims[0] != indices_dims[0]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Dimensions [0,1) of indices[shape=", ShapeString(indices_dims), "] = ", indices_dims[0],
        " must match dimensions [0,1) of updates[shape=", ShapeString(updates_dims), "] = ",
        updates_dims[0]));
  }
  VGPU_RETURN_IF_ERROR(ValidateScatterNdUpdateShape(output_dims, indices_dims, updates_dims));
  const int64_t index_max = IndexMax(index_dtype);
  if (NumElements(indices_dims) > index_max) {
    return absl::InvalidArgumentError(
        absl::StrCat("indices has too many elements for ", IndexName(index_dtype),
                     " indexing: ", NumElements(indices_dims), " > ", index_max));
  }
  if (output_dims[0] > index_max) {
    return absl::InvalidArgumentError(absl::StrCat("params_shape[0] too large for ",
                                                   IndexName(index_dtype), " indexing: ",
                                                   output_dims[0], " > ", index_max));
  }
  const int64_t slice_dim = indices_dims.size() > 1 ? indices_dims.back() : 1;
  int64_t slice_size = 1;
  for (int64_t i = slice_dim; i < static_cast<int64_t>(output_dims.size()); ++i) {
    slice_size *= output_dims[i];
  }
  if (slice_size > index_max) {
    return absl::InvalidArgumentError(absl::StrCat("slice size is too large for indexing: ",
                                                   slice_size, " > ", index_max));
  }
  ScatterNdPlan plan;
  plan.params.dtype = dtype;
  plan.params.index_dtype = index_dtype;
  plan.params.slice_size = slice_size;
  plan.params.num_updates = NumElements(indices_dims) / std::max<int64_t>(slice_dim, 1);
  if (NumElements(output_dims) == 0) return plan;  // nothing to scatter into
  if (slice_dim < 1 || slice_dim > sparse::kMaxIndexDepth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Only indices.shape[-1] values between 1 and 5 are currently supported.  "
        "Requested rank: ",
        slice_dim));
  }
  plan.params.index_depth = static_cast<uint32_t>(slice_dim);
  plan.prefix_dims.assign(output_dims.begin(), output_dims.begin() + slice_dim);
  plan.launch = true;
  return plan;
}

}  // namespace vgpu::sparse_shapes

#endif  // VGPU_KERNELS_SPARSE_SHAPES_H_
