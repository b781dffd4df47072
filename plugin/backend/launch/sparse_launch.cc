// The sparse family's launch readers (see sparse_launch.h).
#include "plugin/backend/launch/sparse_launch.h"

#include "absl/strings/str_cat.h"
#include "plugin/backend/launch/element_bytes.h"
#include "plugin/common/status_macros.h"

namespace vgpu::sparse_launch {
namespace {

using sparse::ScatterOp;
using sparse::SegmentOp;

// Reads WhereParams and its dims array (both kCountTrue and kWhere carry them): the input's
// geometry into *g, its dtype into *dtype.
absl::StatusOr<sparse::WhereParams> ReadWhereInput(const LaunchView& launch, WhereGeometry* g,
                                                   DType* dtype) {
  ParamReader reader = launch.Params();
  VGPU_ASSIGN_OR_RETURN(sparse::WhereParams params,
                        launch.ReadParams<sparse::WhereParams>(2, &reader));
  if (params.rank > static_cast<uint32_t>(kMaxRank)) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", params.rank, " exceeds ", kMaxRank));
  }
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> dims, reader.GetArray<int64_t>(kMaxRank));
  if (dims.size() != params.rank) {
    return absl::InvalidArgumentError("dims do not match the rank");
  }
  g->rank = static_cast<int32_t>(params.rank);
  g->total = 1;
  for (int d = 0; d < g->rank; ++d) {
    g->dims[d] = dims[d];
    VGPU_ASSIGN_OR_RETURN(g->total, CheckedProduct({g->total, dims[d]}, "input"));
  }
  *dtype = params.dtype;
  return params;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> ReadPrefixDims(ParamReader& reader, uint32_t depth) {
  if (depth > static_cast<uint32_t>(sparse::kMaxIndexDepth)) {
    return absl::InvalidArgumentError(absl::StrCat("index depth ", depth, " exceeds ",
                                                   sparse::kMaxIndexDepth));
  }
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                        reader.GetArray<int64_t>(sparse::kMaxIndexDepth));
  if (dims.size() != depth) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefix_dims has ", dims.size(), " entries, expected ", depth));
  }
  return dims;
}

absl::StatusOr<PrefixLayout> PrefixLayoutOf(const std::vector<int64_t>& dims) {
  if (dims.size() > static_cast<size_t>(sparse::kMaxIndexDepth)) {
    return absl::InvalidArgumentError(absl::StrCat("index depth ", dims.size(), " exceeds ",
                                                   sparse::kMaxIndexDepth));
  }
  PrefixLayout layout;
  layout.depth = static_cast<int32_t>(dims.size());
  for (int64_t d : dims) {
    VGPU_ASSIGN_OR_RETURN(layout.count, CheckedProduct({layout.count, d}, "prefix"));
  }
  for (int i = 0; i < layout.depth; ++i) layout.dims[i] = dims[i];
  if (layout.depth > 0) layout.strides[layout.depth - 1] = 1;
  for (int i = layout.depth - 2; i >= 0; --i) {
    layout.strides[i] = layout.strides[i + 1] * dims[i + 1];
  }
  return layout;
}

absl::StatusOr<GatherLaunch> ReadGatherLaunch(const LaunchView& launch) {
  VGPU_ASSIGN_OR_RETURN(sparse::GatherParams p, launch.ReadParams<sparse::GatherParams>(3));
  VGPU_RETURN_IF_ERROR(CheckElementSize(p.element_size));
  GatherLaunch read;
  read.element_size = p.element_size;
  read.index_dtype = p.index_dtype;
  GatherGeometry& g = read.g;
  VGPU_ASSIGN_OR_RETURN(read.params_count,
                        CheckedProduct({p.batch, p.outer, p.gather_size, p.inner}, "params"));
  VGPU_ASSIGN_OR_RETURN(read.indices_count,
                        CheckedProduct({p.batch, p.indices_per_batch}, "indices"));
  VGPU_ASSIGN_OR_RETURN(g.rows, CheckedProduct({p.batch, p.outer, p.indices_per_batch}, "output"));
  VGPU_ASSIGN_OR_RETURN(read.out_count, CheckedProduct({g.rows, p.inner}, "output"));
  g.count = read.out_count;
  g.batch = p.batch;
  g.outer = p.outer;
  g.gather_size = p.gather_size;
  g.inner = p.inner;
  g.indices_per_batch = p.indices_per_batch;
  g.rows_per_batch = p.outer * p.indices_per_batch;
  return read;
}

absl::StatusOr<GatherNdLaunch> ReadGatherNdLaunch(const LaunchView& launch) {
  ParamReader reader = launch.Params();
  VGPU_ASSIGN_OR_RETURN(sparse::GatherNdParams p,
                        launch.ReadParams<sparse::GatherNdParams>(3, &reader));
  VGPU_RETURN_IF_ERROR(CheckElementSize(p.element_size));
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> prefix, ReadPrefixDims(reader, p.index_depth));
  GatherNdLaunch read;
  VGPU_ASSIGN_OR_RETURN(read.layout, PrefixLayoutOf(prefix));
  VGPU_ASSIGN_OR_RETURN(read.params_count,
                        CheckedProduct({read.layout.count, p.slice_size}, "params"));
  VGPU_ASSIGN_OR_RETURN(read.indices_count,
                        CheckedProduct({p.num_slices, p.index_depth}, "indices"));
  VGPU_ASSIGN_OR_RETURN(read.out_count, CheckedProduct({p.num_slices, p.slice_size}, "output"));
  read.element_size = p.element_size;
  read.index_dtype = p.index_dtype;
  read.num_slices = p.num_slices;
  read.slice_size = p.slice_size;
  return read;
}

absl::Status CheckScatterOp(ScatterOp op, DType dtype) {
  if (static_cast<uint32_t>(op) > static_cast<uint32_t>(ScatterOp::kMax)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown scatter op ", static_cast<uint32_t>(op)));
  }
  if (dtype == DType::kBool && op != ScatterOp::kAssign && op != ScatterOp::kAdd &&
      op != ScatterOp::kMin && op != ScatterOp::kMax) {
    return absl::InvalidArgumentError("bool scatters can only assign, add, min or max");
  }
  return absl::OkStatus();
}

absl::Status ScatterDivisionByZero() {
  return absl::InvalidArgumentError("integer division by zero in a scatter update");
}

absl::StatusOr<ScatterLaunch> ReadScatterLaunch(const LaunchView& launch) {
  ScatterLaunch read;
  VGPU_ASSIGN_OR_RETURN(read.p, launch.ReadParams<sparse::ScatterParams>(3));
  const sparse::ScatterParams& p = read.p;
  VGPU_RETURN_IF_ERROR(CheckScatterOp(p.op, p.dtype));
  VGPU_ASSIGN_OR_RETURN(read.target_count, CheckedProduct({p.rows, p.inner}, "params"));
  VGPU_ASSIGN_OR_RETURN(read.indices_count, CheckedProduct({p.num_indices}, "indices"));
  read.scalar = p.scalar_update != 0;
  VGPU_ASSIGN_OR_RETURN(read.updates_count,
                        read.scalar ? CheckedProduct({1}, "updates")
                                    : CheckedProduct({p.num_indices, p.inner}, "updates"));
  return read;
}

absl::StatusOr<ScatterNdLaunch> ReadScatterNdLaunch(const LaunchView& launch) {
  ParamReader reader = launch.Params();
  ScatterNdLaunch read;
  VGPU_ASSIGN_OR_RETURN(read.p, launch.ReadParams<sparse::ScatterNdParams>(3, &reader));
  const sparse::ScatterNdParams& p = read.p;
  VGPU_RETURN_IF_ERROR(CheckScatterOp(p.op, p.dtype));
  if (p.index_depth < 1) return absl::InvalidArgumentError("index depth must be at least 1");
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> prefix, ReadPrefixDims(reader, p.index_depth));
  VGPU_ASSIGN_OR_RETURN(read.layout, PrefixLayoutOf(prefix));
  VGPU_ASSIGN_OR_RETURN(read.target_count,
                        CheckedProduct({read.layout.count, p.slice_size}, "output"));
  VGPU_ASSIGN_OR_RETURN(read.indices_count,
                        CheckedProduct({p.num_updates, p.index_depth}, "indices"));
  VGPU_ASSIGN_OR_RETURN(read.updates_count,
                        CheckedProduct({p.num_updates, p.slice_size}, "updates"));
  return read;
}

absl::StatusOr<SegmentReduceLaunch> ReadSegmentReduceLaunch(const LaunchView& launch) {
  SegmentReduceLaunch read;
  VGPU_ASSIGN_OR_RETURN(read.p, launch.ReadParams<sparse::SegmentReduceParams>(3));
  const sparse::SegmentReduceParams& p = read.p;
  if (static_cast<uint32_t>(p.op) > static_cast<uint32_t>(SegmentOp::kMean)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown segment op ", static_cast<uint32_t>(p.op)));
  }
  VGPU_ASSIGN_OR_RETURN(read.data_count, CheckedProduct({p.num_ids, p.inner}, "data"));
  VGPU_ASSIGN_OR_RETURN(read.output_count, CheckedProduct({p.num_segments, p.inner}, "output"));
  return read;
}

absl::StatusOr<CountTrueLaunch> ReadCountTrueLaunch(const LaunchView& launch) {
  CountTrueLaunch read;
  VGPU_RETURN_IF_ERROR(ReadWhereInput(launch, &read.g, &read.dtype).status());
  return read;
}

absl::StatusOr<WhereLaunch> ReadWhereLaunch(const LaunchView& launch) {
  WhereLaunch read;
  VGPU_ASSIGN_OR_RETURN(sparse::WhereParams p, ReadWhereInput(launch, &read.g, &read.dtype));
  read.g.num_true = p.num_true;
  VGPU_ASSIGN_OR_RETURN(read.coordinate_count,
                        CheckedProduct({p.num_true, static_cast<int64_t>(p.rank)}, "coordinates"));
  return read;
}

absl::Status CheckTrueElements(const WhereGeometry& g, int64_t found) {
  if (found > g.num_true) {
    return absl::InvalidArgumentError("the input holds more true elements than num_true");
  }
  if (found < g.num_true) {
    return absl::InvalidArgumentError("the input holds fewer true elements than num_true");
  }
  return absl::OkStatus();
}

}  // namespace vgpu::sparse_launch
