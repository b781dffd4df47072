// The data movement family's launch readers and strided copy plans (see data_movement_launch.h).
#include "plugin/backend/launch/data_movement_launch.h"

#include <algorithm>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/launch/element_bytes.h"
#include "plugin/common/status_macros.h"

namespace vgpu::data_movement_launch {
namespace {

using data_movement::MirrorPadMode;

// Dimension sizes as a parameter block carries them (at most kMaxCopyRank of them).
using DimVector = absl::InlinedVector<int64_t, kMaxCopyRank>;

absl::StatusOr<uint32_t> ReadElementSize(ParamReader& reader) {
  VGPU_ASSIGN_OR_RETURN(uint32_t size, reader.Get<uint32_t>());
  VGPU_RETURN_IF_ERROR(CheckElementSize(size));
  return size;
}

// Reads an array<int64> of exactly `rank` entries (rank < 0: any rank up to the maximum); with
// `non_negative`, entries that are sizes of a bounded tensor.
absl::StatusOr<DimVector> ReadDims(ParamReader& reader, const char* what, int rank = -1,
                                   bool non_negative = true) {
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> values,
                        reader.GetArray<int64_t>(kMaxDataMovementRank));
  if (rank >= 0 && static_cast<int>(values.size()) != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", values.size(), " entries, expected ", rank));
  }
  if (non_negative) {
    __int128 product = 1;
    for (int64_t v : values) {
      if (v < 0) return absl::InvalidArgumentError(absl::StrCat(what, " has a negative entry"));
      product *= v;
      if (product > kMaxLaunchElements || v > kMaxLaunchElements) {
        return absl::InvalidArgumentError(absl::StrCat(what, " describes too many elements"));
      }
    }
  }
  return DimVector(values.begin(), values.end());
}

// Reads the x_dims of the reversals: at most kMaxDataMovementRank non-negative dimensions of a
// bounded tensor (their own wording).
absl::StatusOr<DimVector> ReadReversedShape(ParamReader& reader) {
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> values,
                        reader.GetArray<int64_t>(kMaxDataMovementRank));
  __int128 product = 1;
  for (int64_t v : values) {
    if (v < 0 || v > kMaxLaunchElements) {
      return absl::InvalidArgumentError("x_dims has a negative or too large dimension");
    }
    product *= v;
    if (product > kMaxLaunchElements) {
      return absl::InvalidArgumentError("x_dims has too many elements");
    }
  }
  return DimVector(values.begin(), values.end());
}

int64_t ElementCountOf(const DimVector& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Row-major strides (in elements) of a dense tensor of `dims`. The products wrap (unsigned) only
// for a tensor with no element, whose dimensions are bounded one by one but not their product,
// and whose strides are never used to address memory.
DimVector RowMajorStrides(const DimVector& dims) {
  DimVector strides(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) {
    strides[d] = static_cast<int64_t>(static_cast<uint64_t>(strides[d + 1]) *
                                      static_cast<uint64_t>(dims[d + 1]));
  }
  return strides;
}

// Appends a dimension of `size` with the given strides to `copy` (rank < kMaxCopyRank).
void AppendDim(StridedCopy& copy, int64_t size, int64_t src_stride, int64_t dst_stride) {
  copy.dims[copy.rank] = size;
  copy.src_strides[copy.rank] = src_stride;
  copy.dst_strides[copy.rank] = dst_stride;
  ++copy.rank;
}

// Sets the destination strides of `copy` to those of a dense row-major tensor of its dims.
void SetDenseDestination(StridedCopy& copy) {
  int64_t stride = 1;
  for (int d = copy.rank - 1; d >= 0; --d) {
    copy.dst_strides[d] = stride;
    stride *= copy.dims[d];
  }
}

// `plan` between two buffers, checked against their element counts.
absl::StatusOr<BufferCopy> CheckedBufferCopy(const StridedCopy& plan, size_t src_buffer,
                                             int64_t src_elements, size_t dst_buffer,
                                             int64_t dst_elements) {
  VGPU_RETURN_IF_ERROR(CheckStridedCopyBounds(plan, src_elements, dst_elements));
  BufferCopy copy;
  copy.plan = plan;
  copy.src_buffer = src_buffer;
  copy.src_elements = src_elements;
  copy.dst_buffer = dst_buffer;
  copy.dst_elements = dst_elements;
  return copy;
}

// The parameters of the slicing kernels: x_dims, begin, strides (non-zero, bounded) and y_dims.
struct SliceSpec {
  uint32_t element_size;
  DimVector x_dims, begin, strides, y_dims;
};

absl::StatusOr<SliceSpec> ReadSliceSpec(const LaunchView& launch) {
  ParamReader reader = launch.Params();
  SliceSpec spec;
  VGPU_ASSIGN_OR_RETURN(spec.element_size, ReadElementSize(reader));
  VGPU_ASSIGN_OR_RETURN(spec.x_dims, ReadDims(reader, "x_dims"));
  const int rank = static_cast<int>(spec.x_dims.size());
  VGPU_ASSIGN_OR_RETURN(spec.begin, ReadDims(reader, "begin", rank));
  VGPU_ASSIGN_OR_RETURN(spec.strides, ReadDims(reader, "strides", rank, false));
  VGPU_ASSIGN_OR_RETURN(spec.y_dims, ReadDims(reader, "y_dims", rank));
  for (int d = 0; d < rank; ++d) {
    if (spec.strides[d] == 0 || spec.strides[d] > kMaxLaunchElements ||
        spec.strides[d] < -kMaxLaunchElements) {
      return absl::InvalidArgumentError(absl::StrCat("bad slice stride ", spec.strides[d]));
    }
  }
  // The selected positions must stay inside each dimension (so that distinct indices of y map
  // to distinct elements of x, which the gradient relies on).
  for (int d = 0; d < rank; ++d) {
    if (spec.y_dims[d] == 0) break;
    const __int128 last = static_cast<__int128>(spec.begin[d]) +
                          static_cast<__int128>(spec.y_dims[d] - 1) * spec.strides[d];
    if (spec.begin[d] >= spec.x_dims[d] || last < 0 || last >= spec.x_dims[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice leaves dimension ", d, " of size ", spec.x_dims[d]));
    }
  }
  return spec;
}

// The plan y[i] = x[begin + i * strides] (reads from x, writes y contiguously).
StridedCopy SlicePlan(const SliceSpec& spec) {
  // ReadSliceSpec checks begin and the strides against x_dims only for a slice that is not
  // empty, and a dimension that selects one element never steps: neither may reach the offset
  // arithmetic (a hostile stride times x's stride overflows).
  const bool empty = std::find(spec.y_dims.begin(), spec.y_dims.end(), 0) != spec.y_dims.end();
  const DimVector x_strides =
      empty ? DimVector(spec.x_dims.size(), 0) : RowMajorStrides(spec.x_dims);
  StridedCopy plan;
  plan.element_size = spec.element_size;
  for (size_t d = 0; d < spec.x_dims.size(); ++d) {
    plan.src_offset += spec.begin[d] * x_strides[d];
    AppendDim(plan, spec.y_dims[d], spec.y_dims[d] > 1 ? spec.strides[d] * x_strides[d] : 0, 0);
  }
  SetDenseDestination(plan);
  return plan;
}

// The parameters of kConcat and kSplit: pieces [outer, inner[k]] of a whole [outer, total_inner].
struct ConcatSpec {
  uint32_t element_size;
  int64_t outer;
  std::vector<int64_t> inner;
  int64_t total_inner = 0;
};

absl::StatusOr<ConcatSpec> ReadConcatSpec(const LaunchView& launch) {
  ParamReader reader = launch.Params();
  ConcatSpec spec;
  VGPU_ASSIGN_OR_RETURN(spec.element_size, ReadElementSize(reader));
  VGPU_ASSIGN_OR_RETURN(spec.outer, reader.Get<int64_t>());
  VGPU_ASSIGN_OR_RETURN(spec.inner, reader.GetArray<int64_t>());
  if (spec.outer < 0 || spec.outer > kMaxLaunchElements) {
    return absl::InvalidArgumentError("bad outer size");
  }
  for (int64_t inner : spec.inner) {
    if (inner < 0 || inner > kMaxLaunchElements) {
      return absl::InvalidArgumentError("bad inner size");
    }
    spec.total_inner += inner;
    if (static_cast<__int128>(spec.total_inner) * spec.outer > kMaxLaunchElements) {
      return absl::InvalidArgumentError("concatenation of too many elements");
    }
  }
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(spec.inner.size() + 1));
  return spec;
}

// The copies between every piece k (buffer piece_buffer0 + k) and its columns of the whole
// (buffer whole_buffer), towards the whole when `to_whole`.
absl::StatusOr<std::vector<BufferCopy>> PieceCopies(const ConcatSpec& spec, bool to_whole,
                                                    size_t piece_buffer0, size_t whole_buffer) {
  const int64_t whole = spec.outer * spec.total_inner;
  std::vector<BufferCopy> copies;
  copies.reserve(spec.inner.size());
  int64_t column = 0;
  for (size_t k = 0; k < spec.inner.size(); ++k) {
    const int64_t inner = spec.inner[k], piece = spec.outer * inner;
    StridedCopy plan;
    plan.element_size = spec.element_size;
    if (to_whole) {
      AppendDim(plan, spec.outer, inner, spec.total_inner);
      AppendDim(plan, inner, 1, 1);
      plan.dst_offset = column;
      VGPU_ASSIGN_OR_RETURN(BufferCopy copy, CheckedBufferCopy(plan, piece_buffer0 + k, piece,
                                                               whole_buffer, whole));
      copies.push_back(copy);
    } else {
      AppendDim(plan, spec.outer, spec.total_inner, inner);
      AppendDim(plan, inner, 1, 1);
      plan.src_offset = column;
      VGPU_ASSIGN_OR_RETURN(BufferCopy copy, CheckedBufferCopy(plan, whole_buffer, whole,
                                                               piece_buffer0 + k, piece));
      copies.push_back(copy);
    }
    column += inner;
  }
  return copies;
}

// The mirror-pad layout that follows the leading uint32 of both mirror-pad parameter blocks.
absl::StatusOr<MirrorPadGeometry> ReadMirrorPadGeometry(ParamReader& reader) {
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                        reader.GetArray<int64_t>(kMaxDataMovementRank));
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> before,
                        reader.GetArray<int64_t>(kMaxDataMovementRank));
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> after,
                        reader.GetArray<int64_t>(kMaxDataMovementRank));
  VGPU_ASSIGN_OR_RETURN(uint32_t mode, reader.Get<uint32_t>());
  if (mode != static_cast<uint32_t>(MirrorPadMode::kReflect) &&
      mode != static_cast<uint32_t>(MirrorPadMode::kSymmetric)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown mirror pad mode ", mode));
  }
  MirrorPadGeometry g;
  g.offset = mode == static_cast<uint32_t>(MirrorPadMode::kReflect) ? 1 : 0;
  const size_t rank = dims.size();
  if (before.size() != rank || after.size() != rank) {
    return absl::InvalidArgumentError("mirror pad: dims and pads differ in rank");
  }
  g.rank = static_cast<int32_t>(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t n = dims[d];
    // The largest pad the mode allows; computed only for a size in range (a hostile size near
    // INT64_MIN would overflow).
    const bool n_in_range = n >= 0 && n <= kMaxLaunchElements;
    const int64_t limit = n_in_range ? n - g.offset : -1;
    if (!n_in_range || before[d] < 0 || after[d] < 0 || before[d] > limit || after[d] > limit) {
      return absl::InvalidArgumentError(absl::StrCat("mirror pad: dimension ", d, " of size ", n,
                                                     " cannot be padded by ", before[d], " and ",
                                                     after[d]));
    }
    g.dims[d] = n;
    g.before[d] = before[d];
    g.after[d] = after[d];
    g.padded[d] = before[d] + n + after[d];
    for (auto [total, factor] : {std::pair{&g.count, n}, std::pair{&g.padded_count, g.padded[d]}}) {
      if (factor != 0 && *total > kMaxLaunchElements / factor) {
        return absl::InvalidArgumentError("mirror pad: too many elements");
      }
      *total *= factor;
    }
  }
  return g;
}

}  // namespace

absl::Status CheckStridedCopyBounds(const StridedCopy& copy, int64_t src_elements,
                                    int64_t dst_elements) {
  if (copy.rank < 0 || copy.rank > kMaxCopyRank) {
    return absl::InvalidArgumentError("strided copy: strides do not match the rank");
  }
  __int128 src_lo = copy.src_offset, src_hi = copy.src_offset;
  __int128 dst_lo = copy.dst_offset, dst_hi = copy.dst_offset;
  for (int d = 0; d < copy.rank; ++d) {
    if (copy.dims[d] < 0) return absl::InvalidArgumentError("strided copy: negative dimension");
    if (copy.dims[d] == 0) return absl::OkStatus();  // nothing is read or written
    const __int128 last = copy.dims[d] - 1;
    const __int128 src_span = last * copy.src_strides[d];
    const __int128 dst_span = last * copy.dst_strides[d];
    (src_span < 0 ? src_lo : src_hi) += src_span;
    (dst_span < 0 ? dst_lo : dst_hi) += dst_span;
  }
  if (src_lo < 0 || src_hi >= src_elements) {
    return absl::InvalidArgumentError(
        absl::StrCat("strided copy reads outside its source of ", src_elements, " elements"));
  }
  if (dst_lo < 0 || dst_hi >= dst_elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        "strided copy writes outside its destination of ", dst_elements, " elements"));
  }
  return absl::OkStatus();
}

StridedCopy SimplifyStridedCopy(const StridedCopy& copy) {
  StridedCopy kept;
  kept.element_size = copy.element_size;
  kept.src_offset = copy.src_offset;
  kept.dst_offset = copy.dst_offset;
  for (int d = 0; d < copy.rank; ++d) {
    if (copy.dims[d] != 1) AppendDim(kept, copy.dims[d], copy.src_strides[d], copy.dst_strides[d]);
  }
  // Merge from the innermost dimension outwards, then put the dimensions back in order.
  StridedCopy merged = kept;
  merged.rank = 0;
  for (int d = kept.rank - 1; d >= 0; --d) {
    if (merged.rank > 0) {
      const int inner = merged.rank - 1;
      if (kept.src_strides[d] == merged.dims[inner] * merged.src_strides[inner] &&
          kept.dst_strides[d] == merged.dims[inner] * merged.dst_strides[inner]) {
        merged.dims[inner] *= kept.dims[d];
        continue;
      }
    }
    AppendDim(merged, kept.dims[d], kept.src_strides[d], kept.dst_strides[d]);
  }
  std::reverse(merged.dims, merged.dims + merged.rank);
  std::reverse(merged.src_strides, merged.src_strides + merged.rank);
  std::reverse(merged.dst_strides, merged.dst_strides + merged.rank);
  return merged;
}

absl::StatusOr<BufferCopy> ReadTransposeLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(2));
  ParamReader reader = launch.Params();
  VGPU_ASSIGN_OR_RETURN(uint32_t element_size, ReadElementSize(reader));
  VGPU_ASSIGN_OR_RETURN(DimVector x_dims, ReadDims(reader, "x_dims"));
  VGPU_ASSIGN_OR_RETURN(std::vector<int32_t> perm,
                        reader.GetArray<int32_t>(kMaxDataMovementRank));
  const int rank = static_cast<int>(x_dims.size());
  if (static_cast<int>(perm.size()) != rank) {
    return absl::InvalidArgumentError("perm does not match the rank of x");
  }
  bool seen[kMaxDataMovementRank] = {};
  for (int32_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) return absl::InvalidArgumentError("perm is no permutation");
    seen[p] = true;
  }
  const DimVector x_strides = RowMajorStrides(x_dims);
  StridedCopy plan;
  plan.element_size = element_size;
  for (int d = 0; d < rank; ++d) AppendDim(plan, x_dims[perm[d]], x_strides[perm[d]], 0);
  SetDenseDestination(plan);
  const int64_t n = ElementCountOf(x_dims);
  return CheckedBufferCopy(plan, 0, n, 1, n);
}

absl::StatusOr<BufferCopy> ReadStridedSliceLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(SliceSpec spec, ReadSliceSpec(launch));
  return CheckedBufferCopy(SlicePlan(spec), 0, ElementCountOf(spec.x_dims), 1,
                           ElementCountOf(spec.y_dims));
}

absl::StatusOr<BufferCopy> ReadSliceScatterLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(SliceSpec spec, ReadSliceSpec(launch));
  // The slice's plan with its two sides exchanged.
  const StridedCopy gather = SlicePlan(spec);
  StridedCopy scatter = gather;
  scatter.src_offset = 0;
  scatter.dst_offset = gather.src_offset;
  for (int d = 0; d < gather.rank; ++d) {
    scatter.src_strides[d] = gather.dst_strides[d];
    scatter.dst_strides[d] = gather.src_strides[d];
  }
  return CheckedBufferCopy(scatter, 0, ElementCountOf(spec.y_dims), 1,
                           ElementCountOf(spec.x_dims));
}

absl::StatusOr<PadLaunch> ReadPadLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(2));
  ParamReader reader = launch.Params();
  PadLaunch read;
  VGPU_ASSIGN_OR_RETURN(uint32_t element_size, ReadElementSize(reader));
  VGPU_ASSIGN_OR_RETURN(DimVector x_dims, ReadDims(reader, "x_dims"));
  const int rank = static_cast<int>(x_dims.size());
  VGPU_ASSIGN_OR_RETURN(DimVector before, ReadDims(reader, "pad_before", rank));
  VGPU_ASSIGN_OR_RETURN(DimVector after, ReadDims(reader, "pad_after", rank));
  VGPU_ASSIGN_OR_RETURN(read.pad_value, reader.Get<uint64_t>());
  DimVector y_dims(rank);
  read.rank = rank;
  for (int d = 0; d < rank; ++d) {
    y_dims[d] = before[d] + x_dims[d] + after[d];
    read.padded |= before[d] != 0 || after[d] != 0;
    read.y_dims[d] = y_dims[d];
    read.box_begin[d] = before[d];
    read.box_dims[d] = x_dims[d];
  }
  // Each of x_dims, pad_before and pad_after is bounded, but their sums can still multiply past
  // 64 bits (found by the libFuzzer run: a zero-sized x padded by huge amounts).
  VGPU_ASSIGN_OR_RETURN(const int64_t y_elements,
                        CheckedProduct(absl::MakeConstSpan(y_dims), "the padded output"));
  const DimVector x_strides = RowMajorStrides(x_dims), y_strides = RowMajorStrides(y_dims);
  StridedCopy plan;
  plan.element_size = element_size;
  for (int d = 0; d < rank; ++d) {
    AppendDim(plan, x_dims[d], x_strides[d], y_strides[d]);
    plan.dst_offset += before[d] * y_strides[d];
  }
  VGPU_ASSIGN_OR_RETURN(read.copy,
                        CheckedBufferCopy(plan, 0, ElementCountOf(x_dims), 1, y_elements));
  return read;
}

absl::StatusOr<BufferCopy> ReadTileLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(2));
  ParamReader reader = launch.Params();
  VGPU_ASSIGN_OR_RETURN(uint32_t element_size, ReadElementSize(reader));
  VGPU_ASSIGN_OR_RETURN(DimVector x_dims, ReadDims(reader, "x_dims"));
  const int rank = static_cast<int>(x_dims.size());
  VGPU_ASSIGN_OR_RETURN(DimVector y_dims, ReadDims(reader, "y_dims", rank));
  const int64_t y_elements = ElementCountOf(y_dims);
  const int64_t x_elements = ElementCountOf(x_dims);
  StridedCopy plan;
  plan.element_size = element_size;
  if (y_elements == 0) {  // nothing to write: the multiples are not checked
    AppendDim(plan, 0, 0, 0);
    return CheckedBufferCopy(plan, 0, x_elements, 1, 0);
  }
  const DimVector x_strides = RowMajorStrides(x_dims);
  for (int d = 0; d < rank; ++d) {
    if (x_dims[d] == 0 || y_dims[d] % x_dims[d] != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dimension ", d, " of y (", y_dims[d], ") is no multiple of x's (", x_dims[d], ")"));
    }
    AppendDim(plan, y_dims[d] / x_dims[d], 0, 0);
    AppendDim(plan, x_dims[d], x_strides[d], 0);
  }
  SetDenseDestination(plan);
  return CheckedBufferCopy(plan, 0, x_elements, 1, y_elements);
}

absl::StatusOr<std::vector<BufferCopy>> ReadConcatLaunch(const LaunchView& launch) {
  VGPU_ASSIGN_OR_RETURN(ConcatSpec spec, ReadConcatSpec(launch));
  return PieceCopies(spec, /*to_whole=*/true, 0, spec.inner.size());
}

absl::StatusOr<std::vector<BufferCopy>> ReadSplitLaunch(const LaunchView& launch) {
  VGPU_ASSIGN_OR_RETURN(ConcatSpec spec, ReadConcatSpec(launch));
  return PieceCopies(spec, /*to_whole=*/false, 1, 0);
}

absl::StatusOr<BufferCopy> ReadReverseLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(2));
  ParamReader reader = launch.Params();
  VGPU_ASSIGN_OR_RETURN(uint32_t element_size, ReadElementSize(reader));
  VGPU_ASSIGN_OR_RETURN(DimVector dims, ReadReversedShape(reader));
  VGPU_ASSIGN_OR_RETURN(std::vector<uint8_t> reversed,
                        reader.GetArray<uint8_t>(kMaxDataMovementRank));
  if (reversed.size() != dims.size()) {
    return absl::InvalidArgumentError("reverse: one flag per dimension expected");
  }
  const DimVector strides = RowMajorStrides(dims);
  StridedCopy plan;
  plan.element_size = element_size;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (reversed[d] > 1) return absl::InvalidArgumentError("reverse: flags must be 0 or 1");
    if (reversed[d] && dims[d] > 0) {
      plan.src_offset += (dims[d] - 1) * strides[d];
      AppendDim(plan, dims[d], -strides[d], strides[d]);
    } else {
      AppendDim(plan, dims[d], strides[d], strides[d]);
    }
  }
  const int64_t n = ElementCountOf(dims);
  return CheckedBufferCopy(plan, 0, n, 1, n);
}

absl::StatusOr<ReverseSequenceGeometry> ReadReverseSequenceLaunch(const LaunchView& launch) {
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(3));
  ParamReader reader = launch.Params();
  ReverseSequenceGeometry g;
  VGPU_ASSIGN_OR_RETURN(g.element_size, ReadElementSize(reader));
  VGPU_ASSIGN_OR_RETURN(uint32_t length_size, reader.Get<uint32_t>());
  if (length_size != 4 && length_size != 8) {
    return absl::InvalidArgumentError("reverse_sequence: lengths must be int32 or int64");
  }
  g.length_size = static_cast<int32_t>(length_size);
  VGPU_ASSIGN_OR_RETURN(DimVector dims, ReadReversedShape(reader));
  VGPU_ASSIGN_OR_RETURN(int32_t batch_dim, reader.Get<int32_t>());
  VGPU_ASSIGN_OR_RETURN(int32_t seq_dim, reader.Get<int32_t>());
  const int rank = static_cast<int>(dims.size());
  if (rank < 2 || rank > 5) {
    return absl::InvalidArgumentError("reverse_sequence: x must have rank 2 to 5");
  }
  if (batch_dim < 0 || batch_dim >= rank || seq_dim < 0 || seq_dim >= rank ||
      batch_dim == seq_dim) {
    return absl::InvalidArgumentError("reverse_sequence: bad batch_dim / seq_dim");
  }
  g.count = ElementCountOf(dims);
  g.batch = dims[batch_dim];
  g.steps = dims[seq_dim];
  const int first = std::min(batch_dim, seq_dim), second = std::max(batch_dim, seq_dim);
  g.batch_first = batch_dim == first;
  if (g.count == 0) return g;  // no run (and the products below could overflow)
  for (int d = 0; d < first; ++d) g.outer *= dims[d];
  for (int d = first + 1; d < second; ++d) g.middle *= dims[d];
  for (int d = second + 1; d < rank; ++d) g.inner *= dims[d];
  g.a_size = dims[first];
  g.b_size = dims[second];
  return g;
}

absl::StatusOr<MirrorPadLaunch> ReadMirrorPadLaunch(const LaunchView& launch) {
  ParamReader reader = launch.Params();
  MirrorPadLaunch read;
  VGPU_ASSIGN_OR_RETURN(read.element_size, launch.ReadParams<uint32_t>(2, &reader));
  VGPU_ASSIGN_OR_RETURN(read.g, ReadMirrorPadGeometry(reader));
  return read;
}

absl::StatusOr<MirrorPadGradLaunch> ReadMirrorPadGradLaunch(const LaunchView& launch) {
  ParamReader reader = launch.Params();
  MirrorPadGradLaunch read;
  VGPU_ASSIGN_OR_RETURN(uint32_t dtype, launch.ReadParams<uint32_t>(2, &reader));
  read.dtype = static_cast<DType>(dtype);
  VGPU_ASSIGN_OR_RETURN(read.g, ReadMirrorPadGeometry(reader));
  return read;
}

MirrorPadFolds MirrorPadFoldsOf(const MirrorPadGeometry& g) {
  MirrorPadFolds folds;
  int64_t current[kMaxDataMovementRank];  // the gradient's dims, shrinking as dimensions fold
  std::copy(g.padded, g.padded + g.rank, current);
  for (int d = 0; d < g.rank; ++d) {
    if (g.before[d] == 0 && g.after[d] == 0) continue;
    MirrorPadFold& fold = folds.folds[folds.count++];
    for (int k = 0; k < d; ++k) fold.outer *= current[k];
    for (int k = d + 1; k < g.rank; ++k) fold.inner *= current[k];
    fold.padded = current[d];
    fold.n = g.dims[d];
    fold.before = g.before[d];
    fold.after = g.after[d];
    fold.offset = g.offset;
    fold.count = fold.outer * fold.n * fold.inner;
    current[d] = g.dims[d];
  }
  if (folds.count > 0) folds.folds[folds.count - 1].into_dx = true;
  return folds;
}

}  // namespace vgpu::data_movement_launch
