// CPU kernels of the data movement family (protocol/kernels/data_movement.h): transpose,
// strided slice and its gradient, pad, tile/broadcast, concat and split. Each kernel reads its
// parameter block, checks it against the buffers it was given, and expresses the operation as
// strided copies (datamove_strided_copy.h) that run on the executor's thread pool.
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/data_movement_kernels.h"
#include "plugin/backend/cpu/kernels/datamove_strided_copy.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/data_movement.h"

namespace vgpu::cpu_kernels {
namespace {

using data_movement::kMaxDataMovementRank;

// No tensor has more elements than this (it keeps every byte count far from overflowing).
constexpr int64_t kMaxElements = kMaxLaunchElements;  // kernel_registry.h

absl::StatusOr<size_t> ReadElementSize(ParamReader& reader) {
  VGPU_ASSIGN_OR_RETURN(uint32_t size, reader.Get<uint32_t>());
  if (size != 1 && size != 2 && size != 4 && size != 8) {
    return absl::InvalidArgumentError(absl::StrCat("element size ", size, " is not 1, 2, 4 or 8"));
  }
  return static_cast<size_t>(size);
}

// Reads an array<int64> of exactly `rank` entries (rank < 0: any rank up to the maximum).
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
      if (product > kMaxElements || v > kMaxElements) {
        return absl::InvalidArgumentError(absl::StrCat(what, " describes too many elements"));
      }
    }
  }
  return DimVector(values.begin(), values.end());
}

// Buffer `index` checked to hold at least `elements` elements of `element_size` bytes.
absl::StatusOr<uint8_t*> BytesOf(const KernelContext& context, size_t index, int64_t elements,
                                 size_t element_size) {
  return context.Buffer<uint8_t>(index, static_cast<uint64_t>(elements) * element_size);
}

// Bounds-checks and runs one copy from buffer `src_index` to buffer `dst_index`.
absl::Status Copy(const KernelContext& context, const StridedCopy& copy, size_t src_index,
                  int64_t src_elements, size_t dst_index, int64_t dst_elements) {
  VGPU_RETURN_IF_ERROR(CheckStridedCopyBounds(copy, src_elements, dst_elements));
  if (ElementCountOf(copy.dims) == 0) return absl::OkStatus();
  VGPU_ASSIGN_OR_RETURN(const uint8_t* src,
                        BytesOf(context, src_index, src_elements, copy.element_size));
  VGPU_ASSIGN_OR_RETURN(uint8_t* dst, BytesOf(context, dst_index, dst_elements, copy.element_size));
  RunStridedCopy(*context.device, copy, src, dst);
  return absl::OkStatus();
}

// data_movement::kTranspose.
absl::Status Transpose(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(size_t esize, ReadElementSize(reader));
  VGPU_ASSIGN_OR_RETURN(DimVector x_dims, ReadDims(reader, "x_dims"));
  VGPU_ASSIGN_OR_RETURN(std::vector<int32_t> perm, reader.GetArray<int32_t>(kMaxDataMovementRank));
  const int rank = static_cast<int>(x_dims.size());
  if (static_cast<int>(perm.size()) != rank) {
    return absl::InvalidArgumentError("perm does not match the rank of x");
  }
  std::vector<bool> seen(rank, false);
  for (int32_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) return absl::InvalidArgumentError("perm is no permutation");
    seen[p] = true;
  }
  const DimVector x_strides = RowMajorStrides(x_dims);
  StridedCopy copy;
  copy.element_size = esize;
  for (int d = 0; d < rank; ++d) {
    copy.dims.push_back(x_dims[perm[d]]);
    copy.src_strides.push_back(x_strides[perm[d]]);
  }
  copy.dst_strides = RowMajorStrides(copy.dims);
  const int64_t n = ElementCountOf(x_dims);
  return Copy(context, copy, 0, n, 1, n);
}

struct SliceSpec {
  size_t element_size;
  DimVector x_dims, begin, strides, y_dims;
};

absl::StatusOr<SliceSpec> ReadSliceSpec(const KernelContext& context) {
  ParamReader reader = context.Params();
  SliceSpec spec;
  VGPU_ASSIGN_OR_RETURN(spec.element_size, ReadElementSize(reader));
  VGPU_ASSIGN_OR_RETURN(spec.x_dims, ReadDims(reader, "x_dims"));
  const int rank = static_cast<int>(spec.x_dims.size());
  VGPU_ASSIGN_OR_RETURN(spec.begin, ReadDims(reader, "begin", rank));
  VGPU_ASSIGN_OR_RETURN(spec.strides, ReadDims(reader, "strides", rank, false));
  VGPU_ASSIGN_OR_RETURN(spec.y_dims, ReadDims(reader, "y_dims", rank));
  for (int d = 0; d < rank; ++d) {
    if (spec.strides[d] == 0 || spec.strides[d] > kMaxElements ||
        spec.strides[d] < -kMaxElements) {
      return absl::InvalidArgumentError(absl::StrCat("bad slice stride ", spec.strides[d]));
    }
  }
  return spec;
}

// The copy y[i] = x[begin + i * strides] (reads from x, writes y contiguously).
StridedCopy SliceCopy(const SliceSpec& spec) {
  const DimVector x_strides = RowMajorStrides(spec.x_dims);
  StridedCopy copy;
  copy.element_size = spec.element_size;
  copy.dims = spec.y_dims;
  copy.dst_strides = RowMajorStrides(spec.y_dims);
  for (size_t d = 0; d < spec.x_dims.size(); ++d) {
    copy.src_offset += spec.begin[d] * x_strides[d];
    copy.src_strides.push_back(spec.strides[d] * x_strides[d]);
  }
  return copy;
}

// The selected positions must stay inside each dimension (so that distinct indices of y map to
// distinct elements of x, which the gradient relies on).
absl::Status CheckSliceInside(const SliceSpec& spec) {
  for (size_t d = 0; d < spec.x_dims.size(); ++d) {
    if (spec.y_dims[d] == 0) return absl::OkStatus();
    const __int128 last =
        static_cast<__int128>(spec.begin[d]) + static_cast<__int128>(spec.y_dims[d] - 1) *
                                                   spec.strides[d];
    if (spec.begin[d] >= spec.x_dims[d] || last < 0 || last >= spec.x_dims[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice leaves dimension ", d, " of size ", spec.x_dims[d]));
    }
  }
  return absl::OkStatus();
}

// data_movement::kStridedSlice.
absl::Status StridedSlice(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(SliceSpec spec, ReadSliceSpec(context));
  VGPU_RETURN_IF_ERROR(CheckSliceInside(spec));
  return Copy(context, SliceCopy(spec), 0, ElementCountOf(spec.x_dims), 1,
              ElementCountOf(spec.y_dims));
}

// Scatters buffer 0 (the slice) back to where a slice of buffer 1 reads; with `zero_rest`,
// the rest of buffer 1 is zeroed first (kStridedSliceGrad), else kept (kStridedSliceAssign).
absl::Status ScatterSlice(const KernelContext& context, bool zero_rest) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(SliceSpec spec, ReadSliceSpec(context));
  VGPU_RETURN_IF_ERROR(CheckSliceInside(spec));
  const int64_t dx_elements = ElementCountOf(spec.x_dims);
  const int64_t dy_elements = ElementCountOf(spec.y_dims);
  StridedCopy gather = SliceCopy(spec);
  StridedCopy scatter;
  scatter.element_size = spec.element_size;
  scatter.dims = gather.dims;
  scatter.src_strides = gather.dst_strides;
  scatter.dst_strides = gather.src_strides;
  scatter.dst_offset = gather.src_offset;
  VGPU_RETURN_IF_ERROR(CheckStridedCopyBounds(scatter, dy_elements, dx_elements));
  if (dx_elements == 0) return absl::OkStatus();
  VGPU_ASSIGN_OR_RETURN(uint8_t* dx, BytesOf(context, 1, dx_elements, spec.element_size));
  if (zero_rest && dy_elements != dx_elements) {  // otherwise every element is written below
    FillElements(*context.device, dx, dx_elements, spec.element_size, 0);
  }
  return Copy(context, scatter, 0, dy_elements, 1, dx_elements);
}

// data_movement::kStridedSliceGrad: zero dx, then scatter dy back to where the slice read.
absl::Status StridedSliceGrad(const KernelContext& context) {
  return ScatterSlice(context, /*zero_rest=*/true);
}

// data_movement::kStridedSliceAssign: x[slice] = value, the rest of x unchanged.
absl::Status StridedSliceAssign(const KernelContext& context) {
  return ScatterSlice(context, /*zero_rest=*/false);
}

// data_movement::kPad.
absl::Status Pad(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(size_t esize, ReadElementSize(reader));
  VGPU_ASSIGN_OR_RETURN(DimVector x_dims, ReadDims(reader, "x_dims"));
  const int rank = static_cast<int>(x_dims.size());
  VGPU_ASSIGN_OR_RETURN(DimVector before, ReadDims(reader, "pad_before", rank));
  VGPU_ASSIGN_OR_RETURN(DimVector after, ReadDims(reader, "pad_after", rank));
  VGPU_ASSIGN_OR_RETURN(uint64_t pad_value, reader.Get<uint64_t>());
  DimVector y_dims(rank);
  bool padded = false;
  for (int d = 0; d < rank; ++d) {
    y_dims[d] = before[d] + x_dims[d] + after[d];
    padded |= before[d] != 0 || after[d] != 0;
  }
  // Each of x_dims, pad_before and pad_after is bounded, but their sums can still multiply past
  // 64 bits (found by the libFuzzer run: a zero-sized x padded by huge amounts).
  VGPU_ASSIGN_OR_RETURN(const int64_t y_elements,
                        CheckedProduct(absl::MakeConstSpan(y_dims), "the padded output"));
  const int64_t x_elements = ElementCountOf(x_dims);
  StridedCopy copy;
  copy.element_size = esize;
  copy.dims = x_dims;
  copy.src_strides = RowMajorStrides(x_dims);
  copy.dst_strides = RowMajorStrides(y_dims);
  for (int d = 0; d < rank; ++d) copy.dst_offset += before[d] * copy.dst_strides[d];
  VGPU_RETURN_IF_ERROR(CheckStridedCopyBounds(copy, x_elements, y_elements));
  if (y_elements == 0) return absl::OkStatus();
  VGPU_ASSIGN_OR_RETURN(uint8_t* y, BytesOf(context, 1, y_elements, esize));
  if (padded) FillElements(*context.device, y, y_elements, esize, pad_value);
  return Copy(context, copy, 0, x_elements, 1, y_elements);
}

// data_movement::kTile: y[i] = x[i mod x_dims], as a copy over [y/x, x] pairs of dimensions
// that reads x with stride 0 along the repetitions.
absl::Status Tile(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(size_t esize, ReadElementSize(reader));
  VGPU_ASSIGN_OR_RETURN(DimVector x_dims, ReadDims(reader, "x_dims"));
  const int rank = static_cast<int>(x_dims.size());
  VGPU_ASSIGN_OR_RETURN(DimVector y_dims, ReadDims(reader, "y_dims", rank));
  const int64_t y_elements = ElementCountOf(y_dims);
  const int64_t x_elements = ElementCountOf(x_dims);
  if (y_elements == 0) return absl::OkStatus();
  const DimVector x_strides = RowMajorStrides(x_dims);
  StridedCopy copy;
  copy.element_size = esize;
  for (int d = 0; d < rank; ++d) {
    if (x_dims[d] == 0 || y_dims[d] % x_dims[d] != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dimension ", d, " of y (", y_dims[d], ") is no multiple of x's (", x_dims[d], ")"));
    }
    copy.dims.push_back(y_dims[d] / x_dims[d]);
    copy.src_strides.push_back(0);
    copy.dims.push_back(x_dims[d]);
    copy.src_strides.push_back(x_strides[d]);
  }
  copy.dst_strides = RowMajorStrides(copy.dims);
  return Copy(context, copy, 0, x_elements, 1, y_elements);
}

struct ConcatSpec {
  size_t element_size;
  int64_t outer;
  std::vector<int64_t> inner;
  int64_t total_inner = 0;
};

absl::StatusOr<ConcatSpec> ReadConcatSpec(const KernelContext& context) {
  ParamReader reader = context.Params();
  ConcatSpec spec;
  VGPU_ASSIGN_OR_RETURN(spec.element_size, ReadElementSize(reader));
  VGPU_ASSIGN_OR_RETURN(spec.outer, reader.Get<int64_t>());
  VGPU_ASSIGN_OR_RETURN(spec.inner, reader.GetArray<int64_t>());
  if (spec.outer < 0 || spec.outer > kMaxElements) {
    return absl::InvalidArgumentError("bad outer size");
  }
  for (int64_t inner : spec.inner) {
    if (inner < 0 || inner > kMaxElements) return absl::InvalidArgumentError("bad inner size");
    spec.total_inner += inner;
    if (static_cast<__int128>(spec.total_inner) * spec.outer > kMaxElements) {
      return absl::InvalidArgumentError("concatenation of too many elements");
    }
  }
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(spec.inner.size() + 1));
  return spec;
}

// The copy between piece k ([outer, inner[k]]) and its columns of the whole
// ([outer, total_inner]), in the direction given by `to_whole`.
StridedCopy PieceCopy(const ConcatSpec& spec, size_t k, int64_t column, bool to_whole) {
  StridedCopy copy;
  copy.element_size = spec.element_size;
  copy.dims = {spec.outer, spec.inner[k]};
  DimVector piece_strides = {spec.inner[k], 1};
  DimVector whole_strides = {spec.total_inner, 1};
  copy.src_strides = to_whole ? piece_strides : whole_strides;
  copy.dst_strides = to_whole ? whole_strides : piece_strides;
  (to_whole ? copy.dst_offset : copy.src_offset) = column;
  return copy;
}

// data_movement::kConcat.
absl::Status Concat(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(ConcatSpec spec, ReadConcatSpec(context));
  const size_t n = spec.inner.size();
  const int64_t whole = spec.outer * spec.total_inner;
  int64_t column = 0;
  for (size_t k = 0; k < n; ++k) {
    VGPU_RETURN_IF_ERROR(Copy(context, PieceCopy(spec, k, column, true), k,
                              spec.outer * spec.inner[k], n, whole));
    column += spec.inner[k];
  }
  return absl::OkStatus();
}

// data_movement::kSplit.
absl::Status Split(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(ConcatSpec spec, ReadConcatSpec(context));
  const int64_t whole = spec.outer * spec.total_inner;
  int64_t column = 0;
  for (size_t k = 0; k < spec.inner.size(); ++k) {
    VGPU_RETURN_IF_ERROR(Copy(context, PieceCopy(spec, k, column, false), 0, whole, k + 1,
                              spec.outer * spec.inner[k]));
    column += spec.inner[k];
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace vgpu::cpu_kernels

namespace vgpu {

void AddDataMovementKernels(KernelTable& table) {
  cpu_kernels::AddReverseKernels(table);
  table.Add(data_movement::kTranspose, "transpose", cpu_kernels::Transpose);
  table.Add(data_movement::kStridedSlice, "strided_slice", cpu_kernels::StridedSlice);
  table.Add(data_movement::kStridedSliceGrad, "strided_slice_grad", cpu_kernels::StridedSliceGrad);
  table.Add(data_movement::kStridedSliceAssign, "strided_slice_assign",
            cpu_kernels::StridedSliceAssign);
  table.Add(data_movement::kPad, "pad", cpu_kernels::Pad);
  table.Add(data_movement::kTile, "tile", cpu_kernels::Tile);
  table.Add(data_movement::kConcat, "concat", cpu_kernels::Concat);
  table.Add(data_movement::kSplit, "split", cpu_kernels::Split);
  cpu_kernels::AddMirrorPadKernels(table);
}

}  // namespace vgpu
