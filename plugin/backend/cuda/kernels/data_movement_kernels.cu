// CUDA kernels of the data movement family (protocol/kernels/data_movement.h): transpose,
// strided slice and its gradient, pad, tile/broadcast, concat, split, reverse, reverse
// sequence, mirror pad and its gradient. As on the CPU executor (cpu/kernels/
// data_movement_kernels.cc, reverse_kernels.cc, mirror_pad_kernels.cc) most of them are one
// strided copy of fixed-size elements (1, 2, 4 or 8 bytes, never interpreted) described by
// dims, source and destination strides and offsets; here a copy is one grid-stride kernel, one
// thread per element, with the copy's shape passed by value (rank <= 16: a tile doubles the
// rank). Every launch is parsed and checked on the host exactly as the CPU kernel checks it
// before anything is enqueued.
//
// What the GPU run must confirm (tests/cuda against the CPU executor): every id for element
// sizes 1, 2, 4, 8, including buffers placed at odd byte addresses (the bytewise element path),
// rank 0 and zero-sized tensors; tile with rank 8 (copy rank 16); mirror pad grad for every
// floating dtype (float32 within rtol 1e-3; the additions are in the CPU's order, so results
// should in fact match bit for bit apart from FMA-free float adds).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/element_helpers.cuh"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/data_movement.h"

namespace vgpu::cuda {
namespace {

using data_movement::kMaxDataMovementRank;
using data_movement::MirrorPadMode;

constexpr int64_t kMaxElements = kMaxLaunchElements;
// A tile copy has two dimensions per dimension of x.
constexpr int kMaxCopyRank = 2 * kMaxDataMovementRank;

using DimVector = absl::InlinedVector<int64_t, kMaxCopyRank>;

// --- Host side: the strided copy description (as datamove_strided_copy.h) -------------------

// For every index i of `dims` (row-major):
//   dst[dst_offset + sum_d i_d * dst_strides[d]] = src[src_offset + sum_d i_d * src_strides[d]]
// in elements of `element_size` bytes.
struct StridedCopy {
  size_t element_size = 1;
  DimVector dims, src_strides, dst_strides;
  int64_t src_offset = 0;
  int64_t dst_offset = 0;
};

DimVector RowMajorStrides(const DimVector& dims) {
  DimVector strides(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * dims[d + 1];
  }
  return strides;
}

int64_t ElementCountOf(const DimVector& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Fails unless every element `copy` reads lies in [0, src_elements) and every element it
// writes in [0, dst_elements) (the CPU executor's CheckStridedCopyBounds, same messages).
absl::Status CheckStridedCopyBounds(const StridedCopy& copy, int64_t src_elements,
                                    int64_t dst_elements) {
  if (copy.src_strides.size() != copy.dims.size() ||
      copy.dst_strides.size() != copy.dims.size()) {
    return absl::InvalidArgumentError("strided copy: strides do not match the rank");
  }
  __int128 src_lo = copy.src_offset, src_hi = copy.src_offset;
  __int128 dst_lo = copy.dst_offset, dst_hi = copy.dst_offset;
  for (size_t d = 0; d < copy.dims.size(); ++d) {
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

// Drops unit dimensions and merges neighbours contiguous in both source and destination, so
// that the device does as few divisions per element as possible.
StridedCopy Simplify(const StridedCopy& copy) {
  StridedCopy kept;
  kept.element_size = copy.element_size;
  kept.src_offset = copy.src_offset;
  kept.dst_offset = copy.dst_offset;
  for (size_t d = 0; d < copy.dims.size(); ++d) {
    if (copy.dims[d] == 1) continue;
    kept.dims.push_back(copy.dims[d]);
    kept.src_strides.push_back(copy.src_strides[d]);
    kept.dst_strides.push_back(copy.dst_strides[d]);
  }
  StridedCopy merged = kept;
  merged.dims.clear();
  merged.src_strides.clear();
  merged.dst_strides.clear();
  for (int d = static_cast<int>(kept.dims.size()) - 1; d >= 0; --d) {
    if (!merged.dims.empty() &&
        kept.src_strides[d] == merged.dims.back() * merged.src_strides.back() &&
        kept.dst_strides[d] == merged.dims.back() * merged.dst_strides.back()) {
      merged.dims.back() *= kept.dims[d];
      continue;
    }
    merged.dims.push_back(kept.dims[d]);
    merged.src_strides.push_back(kept.src_strides[d]);
    merged.dst_strides.push_back(kept.dst_strides[d]);
  }
  std::reverse(merged.dims.begin(), merged.dims.end());
  std::reverse(merged.src_strides.begin(), merged.src_strides.end());
  std::reverse(merged.dst_strides.begin(), merged.dst_strides.end());
  return merged;
}

// --- Device side ----------------------------------------------------------------------------

// The shape of one strided copy, passed by value (3 * 16 * 8 + 32 bytes).
struct CopyShape {
  int32_t rank = 0;
  int64_t count = 0;  // product of dims
  int64_t dims[kMaxCopyRank];
  int64_t src_strides[kMaxCopyRank];
  int64_t dst_strides[kMaxCopyRank];
};

template <typename E>
__global__ void StridedCopyKernel(CopyShape shape, const E* __restrict__ src,
                                  E* __restrict__ dst) {
  for (int64_t i = elements::GridThreadIndex(); i < shape.count; i += elements::GridStride()) {
    int64_t rest = i, s = 0, t = 0;
    for (int d = shape.rank - 1; d >= 0; --d) {
      const int64_t index = rest % shape.dims[d];
      rest /= shape.dims[d];
      s += index * shape.src_strides[d];
      t += index * shape.dst_strides[d];
    }
    dst[t] = src[s];
  }
}

template <typename E>
__global__ void FillKernel(E* __restrict__ dst, int64_t count, E value) {
  for (int64_t i = elements::GridThreadIndex(); i < count; i += elements::GridStride()) dst[i] = value;
}

// Enqueues `copy` (checked by CheckStridedCopyBounds against the buffers behind src and dst).
absl::Status EnqueueStridedCopy(const CudaKernelContext& context, const char* name,
                                const StridedCopy& original, const uint8_t* src, uint8_t* dst) {
  for (int64_t d : original.dims) {
    if (d == 0) return absl::OkStatus();
  }
  const StridedCopy copy = Simplify(original);
  CopyShape shape;
  shape.rank = static_cast<int32_t>(copy.dims.size());
  shape.count = ElementCountOf(copy.dims);
  for (int d = 0; d < shape.rank; ++d) {
    shape.dims[d] = copy.dims[d];
    shape.src_strides[d] = copy.src_strides[d];
    shape.dst_strides[d] = copy.dst_strides[d];
  }
  const int64_t esize = static_cast<int64_t>(copy.element_size);
  const uint8_t* src_base = src + copy.src_offset * esize;
  uint8_t* dst_base = dst + copy.dst_offset * esize;
  return elements::DispatchElement(copy.element_size, {src_base, dst_base}, [&](auto zero) {
    using E = decltype(zero);
    return elements::Launch(name, *context.device, shape.count, StridedCopyKernel<E>, shape,
                      reinterpret_cast<const E*>(src_base), reinterpret_cast<E*>(dst_base));
  });
}

// Enqueues dst[0, count) = the low element_size bytes of value_bits.
absl::Status EnqueueFill(const CudaKernelContext& context, const char* name, uint8_t* dst,
                         int64_t count, size_t element_size, uint64_t value_bits) {
  if (count <= 0) return absl::OkStatus();
  if (value_bits == 0) {
    return elements::CudaError(cudaMemsetAsync(dst, 0, static_cast<size_t>(count) * element_size,
                                         context.device->stream),
                         name);
  }
  return elements::DispatchElement(element_size, {dst}, [&](auto zero) {
    using E = decltype(zero);
    E value;
    std::memcpy(&value, &value_bits, sizeof(E));  // little-endian: the low bytes
    return elements::Launch(name, *context.device, count, FillKernel<E>, reinterpret_cast<E*>(dst),
                      count, value);
  });
}

// --- Parsing, as the CPU kernels parse ------------------------------------------------------

absl::StatusOr<size_t> ReadElementSize(ParamReader& reader) {
  VGPU_ASSIGN_OR_RETURN(uint32_t size, reader.Get<uint32_t>());
  if (size != 1 && size != 2 && size != 4 && size != 8) {
    return absl::InvalidArgumentError(absl::StrCat("element size ", size, " is not 1, 2, 4 or 8"));
  }
  return static_cast<size_t>(size);
}

// An array<int64> of exactly `rank` entries (rank < 0: any rank up to the maximum).
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

absl::StatusOr<uint8_t*> BytesOf(const CudaKernelContext& context, size_t index,
                                 int64_t elements, size_t element_size) {
  return context.Buffer<uint8_t>(index, static_cast<uint64_t>(elements) * element_size);
}

// A copy from buffer src_index to buffer dst_index, checked (bounds, then buffer sizes), ready
// to enqueue; `empty` when it moves nothing (then the buffers are not checked, as on the CPU).
struct CheckedCopy {
  StridedCopy copy;
  const uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
  bool empty = false;
};

absl::StatusOr<CheckedCopy> CheckCopy(const CudaKernelContext& context, const StridedCopy& copy,
                                      size_t src_index, int64_t src_elements, size_t dst_index,
                                      int64_t dst_elements) {
  VGPU_RETURN_IF_ERROR(CheckStridedCopyBounds(copy, src_elements, dst_elements));
  CheckedCopy checked;
  checked.copy = copy;
  if (ElementCountOf(copy.dims) == 0) {
    checked.empty = true;
    return checked;
  }
  VGPU_ASSIGN_OR_RETURN(checked.src, BytesOf(context, src_index, src_elements, copy.element_size));
  VGPU_ASSIGN_OR_RETURN(checked.dst, BytesOf(context, dst_index, dst_elements, copy.element_size));
  return checked;
}

absl::Status Enqueue(const CudaKernelContext& context, const char* name,
                     const CheckedCopy& checked) {
  if (checked.empty) return absl::OkStatus();
  return EnqueueStridedCopy(context, name, checked.copy, checked.src, checked.dst);
}

// --- Kernels --------------------------------------------------------------------------------

// data_movement::kTranspose.
absl::Status Transpose(const CudaKernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(size_t esize, ReadElementSize(reader));
  VGPU_ASSIGN_OR_RETURN(DimVector x_dims, ReadDims(reader, "x_dims"));
  VGPU_ASSIGN_OR_RETURN(std::vector<int32_t> perm, reader.GetArray<int32_t>(kMaxDataMovementRank));
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
  StridedCopy copy;
  copy.element_size = esize;
  for (int d = 0; d < rank; ++d) {
    copy.dims.push_back(x_dims[perm[d]]);
    copy.src_strides.push_back(x_strides[perm[d]]);
  }
  copy.dst_strides = RowMajorStrides(copy.dims);
  const int64_t n = ElementCountOf(x_dims);
  VGPU_ASSIGN_OR_RETURN(CheckedCopy checked, CheckCopy(context, copy, 0, n, 1, n));
  return Enqueue(context, "transpose", checked);
}

struct SliceSpec {
  size_t element_size;
  DimVector x_dims, begin, strides, y_dims;
};

absl::StatusOr<SliceSpec> ReadSliceSpec(const CudaKernelContext& context) {
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

absl::Status CheckSliceInside(const SliceSpec& spec) {
  for (size_t d = 0; d < spec.x_dims.size(); ++d) {
    if (spec.y_dims[d] == 0) return absl::OkStatus();
    const __int128 last = static_cast<__int128>(spec.begin[d]) +
                          static_cast<__int128>(spec.y_dims[d] - 1) * spec.strides[d];
    if (spec.begin[d] >= spec.x_dims[d] || last < 0 || last >= spec.x_dims[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice leaves dimension ", d, " of size ", spec.x_dims[d]));
    }
  }
  return absl::OkStatus();
}

// data_movement::kStridedSlice.
absl::Status StridedSlice(const CudaKernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(SliceSpec spec, ReadSliceSpec(context));
  VGPU_RETURN_IF_ERROR(CheckSliceInside(spec));
  VGPU_ASSIGN_OR_RETURN(CheckedCopy checked,
                        CheckCopy(context, SliceCopy(spec), 0, ElementCountOf(spec.x_dims), 1,
                                  ElementCountOf(spec.y_dims)));
  return Enqueue(context, "strided_slice", checked);
}

// Scatters buffer 0 (the slice) back to where a slice of buffer 1 reads; with `zero_rest`,
// the rest of buffer 1 is zeroed first (kStridedSliceGrad), else kept (kStridedSliceAssign).
absl::Status ScatterSlice(const CudaKernelContext& context, bool zero_rest) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(SliceSpec spec, ReadSliceSpec(context));
  VGPU_RETURN_IF_ERROR(CheckSliceInside(spec));
  const int64_t dx_elements = ElementCountOf(spec.x_dims);
  const int64_t dy_elements = ElementCountOf(spec.y_dims);
  const StridedCopy gather = SliceCopy(spec);
  StridedCopy scatter;
  scatter.element_size = spec.element_size;
  scatter.dims = gather.dims;
  scatter.src_strides = gather.dst_strides;
  scatter.dst_strides = gather.src_strides;
  scatter.dst_offset = gather.src_offset;
  VGPU_RETURN_IF_ERROR(CheckStridedCopyBounds(scatter, dy_elements, dx_elements));
  if (dx_elements == 0) return absl::OkStatus();
  VGPU_ASSIGN_OR_RETURN(uint8_t* dx, BytesOf(context, 1, dx_elements, spec.element_size));
  // Every check before the first enqueue (the CPU checks dy after zeroing dx).
  VGPU_ASSIGN_OR_RETURN(CheckedCopy checked,
                        CheckCopy(context, scatter, 0, dy_elements, 1, dx_elements));
  if (zero_rest && dy_elements != dx_elements) {  // otherwise the copy writes every element
    VGPU_RETURN_IF_ERROR(
        EnqueueFill(context, "strided_slice_grad (zero)", dx, dx_elements, spec.element_size, 0));
  }
  return Enqueue(context, zero_rest ? "strided_slice_grad" : "strided_slice_assign", checked);
}

// data_movement::kStridedSliceGrad: zero dx, then scatter dy to where the slice read.
absl::Status StridedSliceGrad(const CudaKernelContext& context) {
  return ScatterSlice(context, /*zero_rest=*/true);
}

// data_movement::kStridedSliceAssign: x[slice] = value, the rest of x unchanged.
absl::Status StridedSliceAssign(const CudaKernelContext& context) {
  return ScatterSlice(context, /*zero_rest=*/false);
}

// data_movement::kPad.
absl::Status Pad(const CudaKernelContext& context) {
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
  VGPU_ASSIGN_OR_RETURN(CheckedCopy checked, CheckCopy(context, copy, 0, x_elements, 1, y_elements));
  if (padded) VGPU_RETURN_IF_ERROR(EnqueueFill(context, "pad (fill)", y, y_elements, esize, pad_value));
  return Enqueue(context, "pad", checked);
}

// data_movement::kTile: a copy over [y/x, x] pairs of dimensions reading x with stride 0 along
// the repetitions.
absl::Status Tile(const CudaKernelContext& context) {
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
  VGPU_ASSIGN_OR_RETURN(CheckedCopy checked,
                        CheckCopy(context, copy, 0, x_elements, 1, y_elements));
  return Enqueue(context, "tile", checked);
}

struct ConcatSpec {
  size_t element_size;
  int64_t outer;
  std::vector<int64_t> inner;
  int64_t total_inner = 0;
};

absl::StatusOr<ConcatSpec> ReadConcatSpec(const CudaKernelContext& context) {
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

StridedCopy PieceCopy(const ConcatSpec& spec, size_t k, int64_t column, bool to_whole) {
  StridedCopy copy;
  copy.element_size = spec.element_size;
  copy.dims = {spec.outer, spec.inner[k]};
  const DimVector piece_strides = {spec.inner[k], 1};
  const DimVector whole_strides = {spec.total_inner, 1};
  copy.src_strides = to_whole ? piece_strides : whole_strides;
  copy.dst_strides = to_whole ? whole_strides : piece_strides;
  (to_whole ? copy.dst_offset : copy.src_offset) = column;
  return copy;
}

// data_movement::kConcat (to_whole) and kSplit: every piece checked, then one copy per piece.
absl::Status ConcatOrSplit(const CudaKernelContext& context, bool to_whole, const char* name) {
  VGPU_ASSIGN_OR_RETURN(ConcatSpec spec, ReadConcatSpec(context));
  const size_t n = spec.inner.size();
  const int64_t whole = spec.outer * spec.total_inner;
  std::vector<CheckedCopy> copies;
  copies.reserve(n);
  int64_t column = 0;
  for (size_t k = 0; k < n; ++k) {
    const int64_t piece = spec.outer * spec.inner[k];
    const StridedCopy copy = PieceCopy(spec, k, column, to_whole);
    VGPU_ASSIGN_OR_RETURN(CheckedCopy checked,
                          to_whole ? CheckCopy(context, copy, k, piece, n, whole)
                                   : CheckCopy(context, copy, 0, whole, k + 1, piece));
    copies.push_back(std::move(checked));
    column += spec.inner[k];
  }
  for (const CheckedCopy& checked : copies) VGPU_RETURN_IF_ERROR(Enqueue(context, name, checked));
  return absl::OkStatus();
}

absl::Status Concat(const CudaKernelContext& context) {
  return ConcatOrSplit(context, true, "concat");
}
absl::Status Split(const CudaKernelContext& context) {
  return ConcatOrSplit(context, false, "split");
}

// --- Reversals (reverse_kernels.cc) -----------------------------------------------------------

absl::StatusOr<DimVector> ReadShape(ParamReader& reader) {
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> values,
                        reader.GetArray<int64_t>(kMaxDataMovementRank));
  __int128 product = 1;
  for (int64_t v : values) {
    if (v < 0 || v > kMaxElements) {
      return absl::InvalidArgumentError("x_dims has a negative or too large dimension");
    }
    product *= v;
    if (product > kMaxElements) return absl::InvalidArgumentError("x_dims has too many elements");
  }
  return DimVector(values.begin(), values.end());
}

// data_movement::kReverse: one strided copy with negative strides on the reversed dimensions.
absl::Status Reverse(const CudaKernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(size_t esize, ReadElementSize(reader));
  VGPU_ASSIGN_OR_RETURN(DimVector dims, ReadShape(reader));
  VGPU_ASSIGN_OR_RETURN(std::vector<uint8_t> reversed,
                        reader.GetArray<uint8_t>(kMaxDataMovementRank));
  if (reversed.size() != dims.size()) {
    return absl::InvalidArgumentError("reverse: one flag per dimension expected");
  }
  const DimVector strides = RowMajorStrides(dims);
  StridedCopy copy;
  copy.element_size = esize;
  copy.dims = dims;
  copy.dst_strides = strides;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (reversed[d] > 1) return absl::InvalidArgumentError("reverse: flags must be 0 or 1");
    if (reversed[d] && dims[d] > 0) {
      copy.src_offset += (dims[d] - 1) * strides[d];
      copy.src_strides.push_back(-strides[d]);
    } else {
      copy.src_strides.push_back(strides[d]);
    }
  }
  const int64_t n = ElementCountOf(dims);
  VGPU_RETURN_IF_ERROR(CheckStridedCopyBounds(copy, n, n));
  if (n == 0) return absl::OkStatus();
  VGPU_ASSIGN_OR_RETURN(const uint8_t* x, context.Buffer<const uint8_t>(0, n * esize));
  VGPU_ASSIGN_OR_RETURN(uint8_t* y, context.Buffer<uint8_t>(1, n * esize));
  return EnqueueStridedCopy(context, "reverse", copy, x, y);
}

// x viewed as [outer, a, middle, b, inner] with a, b the batch and sequence dimensions in order.
struct ReverseSequenceShape {
  int64_t outer, a_size, middle, b_size, inner;
  int64_t steps;         // x_dims[seq_dim]
  int32_t batch_first;   // batch_dim < seq_dim
  int32_t length_size;   // 4 or 8
  int64_t count;         // elements of x
};

// The length of batch entry b, read bytewise (the CPU reads the lengths with memcpy at any
// byte address), little-endian, clamped to [0, steps].
__device__ inline int64_t SequenceLength(const uint8_t* lengths, int64_t b, int32_t size,
                                         int64_t steps) {
  const uint8_t* p = lengths + b * size;
  uint64_t bits = 0;
  for (int k = size - 1; k >= 0; --k) bits = (bits << 8) | p[k];
  const int64_t length =
      size == 4 ? static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(bits)))
                : static_cast<int64_t>(bits);
  return length < 0 ? 0 : (length > steps ? steps : length);
}

template <typename E>
__global__ void ReverseSequenceKernel(ReverseSequenceShape s, const E* __restrict__ x,
                                      const uint8_t* __restrict__ lengths, E* __restrict__ y) {
  for (int64_t i = elements::GridThreadIndex(); i < s.count; i += elements::GridStride()) {
    const int64_t run = i / s.inner, k = i % s.inner;
    int64_t rest = run;
    const int64_t j = rest % s.b_size;
    rest /= s.b_size;
    const int64_t m = rest % s.middle;
    rest /= s.middle;
    const int64_t a = rest % s.a_size;
    const int64_t o = rest / s.a_size;
    const int64_t batch_index = s.batch_first ? a : j;
    const int64_t seq_index = s.batch_first ? j : a;
    const int64_t length = SequenceLength(lengths, batch_index, s.length_size, s.steps);
    const int64_t source_seq = seq_index < length ? length - 1 - seq_index : seq_index;
    const int64_t sa = s.batch_first ? a : source_seq, sj = s.batch_first ? source_seq : j;
    const int64_t source_run = ((o * s.a_size + sa) * s.middle + m) * s.b_size + sj;
    y[i] = x[source_run * s.inner + k];
  }
}

// data_movement::kReverseSequence.
absl::Status ReverseSequence(const CudaKernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(3));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(size_t esize, ReadElementSize(reader));
  VGPU_ASSIGN_OR_RETURN(uint32_t length_size, reader.Get<uint32_t>());
  if (length_size != 4 && length_size != 8) {
    return absl::InvalidArgumentError("reverse_sequence: lengths must be int32 or int64");
  }
  VGPU_ASSIGN_OR_RETURN(DimVector dims, ReadShape(reader));
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
  const int64_t n = ElementCountOf(dims);
  const int64_t batch = dims[batch_dim];
  VGPU_ASSIGN_OR_RETURN(const uint8_t* lengths,
                        context.Buffer<const uint8_t>(1, batch * length_size));
  if (n == 0) return absl::OkStatus();
  VGPU_ASSIGN_OR_RETURN(const uint8_t* x, context.Buffer<const uint8_t>(0, n * esize));
  VGPU_ASSIGN_OR_RETURN(uint8_t* y, context.Buffer<uint8_t>(2, n * esize));
  const int first = std::min(batch_dim, seq_dim), second = std::max(batch_dim, seq_dim);
  ReverseSequenceShape shape;
  shape.outer = shape.middle = shape.inner = 1;
  for (int d = 0; d < first; ++d) shape.outer *= dims[d];
  for (int d = first + 1; d < second; ++d) shape.middle *= dims[d];
  for (int d = second + 1; d < rank; ++d) shape.inner *= dims[d];
  shape.a_size = dims[first];
  shape.b_size = dims[second];
  shape.steps = dims[seq_dim];
  shape.batch_first = batch_dim == first ? 1 : 0;
  shape.length_size = static_cast<int32_t>(length_size);
  shape.count = n;
  return elements::DispatchElement(esize, {x, y}, [&](auto zero) {
    using E = decltype(zero);
    return elements::Launch("reverse_sequence", *context.device, n, ReverseSequenceKernel<E>, shape,
                      reinterpret_cast<const E*>(x), lengths, reinterpret_cast<E*>(y));
  });
}

// --- MirrorPad (mirror_pad_kernels.cc) -------------------------------------------------------

struct MirrorLayout {
  std::vector<int64_t> dims, before, after, padded;
  int64_t offset = 0;  // 1 for REFLECT, 0 for SYMMETRIC
  int64_t count = 1, padded_count = 1;
};

absl::StatusOr<MirrorLayout> ReadLayout(ParamReader& reader) {
  MirrorLayout layout;
  VGPU_ASSIGN_OR_RETURN(layout.dims, reader.GetArray<int64_t>(kMaxDataMovementRank));
  VGPU_ASSIGN_OR_RETURN(layout.before, reader.GetArray<int64_t>(kMaxDataMovementRank));
  VGPU_ASSIGN_OR_RETURN(layout.after, reader.GetArray<int64_t>(kMaxDataMovementRank));
  VGPU_ASSIGN_OR_RETURN(uint32_t mode, reader.Get<uint32_t>());
  if (mode != static_cast<uint32_t>(MirrorPadMode::kReflect) &&
      mode != static_cast<uint32_t>(MirrorPadMode::kSymmetric)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown mirror pad mode ", mode));
  }
  layout.offset = mode == static_cast<uint32_t>(MirrorPadMode::kReflect) ? 1 : 0;
  const size_t rank = layout.dims.size();
  if (layout.before.size() != rank || layout.after.size() != rank) {
    return absl::InvalidArgumentError("mirror pad: dims and pads differ in rank");
  }
  layout.padded.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t n = layout.dims[d], before = layout.before[d], after = layout.after[d];
    const int64_t limit = n - layout.offset;
    if (n < 0 || n > kMaxElements || before < 0 || after < 0 || before > limit ||
        after > limit) {
      return absl::InvalidArgumentError(absl::StrCat("mirror pad: dimension ", d, " of size ", n,
                                                     " cannot be padded by ", before, " and ",
                                                     after));
    }
    layout.padded[d] = before + n + after;
    for (auto [total, factor] : {std::pair{&layout.count, n},
                                 std::pair{&layout.padded_count, layout.padded[d]}}) {
      if (factor != 0 && *total > kMaxElements / factor) {
        return absl::InvalidArgumentError("mirror pad: too many elements");
      }
      *total *= factor;
    }
  }
  return layout;
}

struct MirrorShape {
  int32_t rank;
  int64_t offset;
  int64_t padded_count;
  int64_t dims[kMaxDataMovementRank];
  int64_t before[kMaxDataMovementRank];
  int64_t padded[kMaxDataMovementRank];
};

// The input index along dimension d that padded index p reads.
__device__ inline int64_t MirrorSource(const MirrorShape& s, int d, int64_t p) {
  if (p < s.before[d]) return s.before[d] - 1 - p + s.offset;
  if (p < s.before[d] + s.dims[d]) return p - s.before[d];
  return 2 * s.dims[d] - 1 - p + s.before[d] - s.offset;
}

template <typename E>
__global__ void MirrorPadKernel(MirrorShape s, const E* __restrict__ x, E* __restrict__ y) {
  for (int64_t i = elements::GridThreadIndex(); i < s.padded_count; i += elements::GridStride()) {
    int64_t rest = i, source = 0, stride = 1;
    for (int d = s.rank - 1; d >= 0; --d) {
      source += MirrorSource(s, d, rest % s.padded[d]) * stride;
      rest /= s.padded[d];
      stride *= s.dims[d];
    }
    y[i] = x[source];
  }
}

// data_movement::kMirrorPad.
absl::Status MirrorPad(const CudaKernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(uint32_t element_size, reader.Get<uint32_t>());
  VGPU_ASSIGN_OR_RETURN(MirrorLayout layout, ReadLayout(reader));
  if (layout.padded_count == 0) return absl::OkStatus();
  MirrorShape shape;
  shape.rank = static_cast<int32_t>(layout.dims.size());
  shape.offset = layout.offset;
  shape.padded_count = layout.padded_count;
  for (int d = 0; d < shape.rank; ++d) {
    shape.dims[d] = layout.dims[d];
    shape.before[d] = layout.before[d];
    shape.padded[d] = layout.padded[d];
  }
  auto run = [&](auto zero) -> absl::Status {
    using E = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const E* x, context.Buffer<const E>(0, layout.count));
    VGPU_ASSIGN_OR_RETURN(E* y, context.Buffer<E>(1, layout.padded_count));
    return elements::Launch("mirror_pad", *context.device, layout.padded_count, MirrorPadKernel<E>,
                      shape, x, y);
  };
  switch (element_size) {
    case 1: return run(uint8_t{});
    case 2: return run(uint16_t{});
    case 4: return run(uint32_t{});
    case 8: return run(uint64_t{});
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("element size ", element_size, " is not 1, 2, 4 or 8"));
  }
}

// One fold of the gradient: in [outer, padded, inner] -> out [outer, n, inner],
// out[o, j, i] = in[o, before + j, i] (+ in[o, head(j), i]) (+ in[o, tail(j), i]), in that order.
struct FoldShape {
  int64_t outer, padded, n, inner, before, after, offset;
  int64_t count;  // outer * n * inner
};

template <typename T>
__global__ void FoldDimensionKernel(FoldShape s, const T* __restrict__ in, T* __restrict__ out) {
  for (int64_t index = elements::GridThreadIndex(); index < s.count; index += elements::GridStride()) {
    const int64_t i = index % s.inner;
    const int64_t oj = index / s.inner;
    const int64_t o = oj / s.n, j = oj % s.n;
    const T* plane = in + o * s.padded * s.inner;
    T value = plane[(s.before + j) * s.inner + i];
    const int64_t head = s.before - 1 - j + s.offset;
    if (head >= 0 && head < s.before) value = value + plane[head * s.inner + i];
    const int64_t tail = 2 * s.n - 1 - j + s.before - s.offset;
    if (tail >= s.before + s.n && tail < s.before + s.n + s.after) {
      value = value + plane[tail * s.inner + i];
    }
    out[index] = value;
  }
}

// data_movement::kMirrorPadGrad.
absl::Status MirrorPadGrad(const CudaKernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(uint32_t dtype, reader.Get<uint32_t>());
  VGPU_ASSIGN_OR_RETURN(MirrorLayout layout, ReadLayout(reader));
  return elements::Dispatch::Floating(static_cast<DType>(dtype), [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* dy, context.Buffer<const T>(0, layout.padded_count));
    VGPU_ASSIGN_OR_RETURN(T* dx, context.Buffer<T>(1, layout.count));
    if (layout.count == 0) return absl::OkStatus();
    const int rank = static_cast<int>(layout.dims.size());
    const cudaStream_t stream = context.device->stream;
    std::vector<int64_t> current_dims = layout.padded;
    // Scratch of the intermediate folds (at most rank - 1), freed in stream order at return.
    std::vector<std::unique_ptr<elements::StreamScratch>> scratch;
    const T* current = dy;
    for (int d = 0; d < rank; ++d) {
      if (layout.before[d] == 0 && layout.after[d] == 0) continue;
      FoldShape shape;
      shape.outer = shape.inner = 1;
      for (int k = 0; k < d; ++k) shape.outer *= current_dims[k];
      for (int k = d + 1; k < rank; ++k) shape.inner *= current_dims[k];
      shape.padded = current_dims[d];
      shape.n = layout.dims[d];
      shape.before = layout.before[d];
      shape.after = layout.after[d];
      shape.offset = layout.offset;
      shape.count = shape.outer * shape.n * shape.inner;
      bool last_fold = true;
      for (int k = d + 1; k < rank; ++k) {
        if (layout.before[k] != 0 || layout.after[k] != 0) last_fold = false;
      }
      T* next = dx;
      if (!last_fold) {
        scratch.push_back(std::make_unique<elements::StreamScratch>());
        VGPU_RETURN_IF_ERROR(
            scratch.back()->Allocate(stream, static_cast<size_t>(shape.count) * sizeof(T)));
        next = scratch.back()->template As<T>();
      }
      VGPU_RETURN_IF_ERROR(elements::Launch("mirror_pad_grad", *context.device, shape.count,
                                      FoldDimensionKernel<T>, shape, current, next));
      current_dims[d] = layout.dims[d];
      current = next;
    }
    if (current == dy) {  // nothing was padded
      return elements::CudaError(cudaMemcpyAsync(dx, dy, static_cast<size_t>(layout.count) * sizeof(T),
                                           cudaMemcpyDeviceToDevice, stream),
                           "mirror_pad_grad (copy)");
    }
    return absl::OkStatus();
  });
}

}  // namespace

void AddCudaDataMovementKernels(CudaKernelTable& table) {
  table.Add(data_movement::kTranspose, "transpose", Transpose);
  table.Add(data_movement::kStridedSlice, "strided_slice", StridedSlice);
  table.Add(data_movement::kStridedSliceGrad, "strided_slice_grad", StridedSliceGrad);
  table.Add(data_movement::kStridedSliceAssign, "strided_slice_assign", StridedSliceAssign);
  table.Add(data_movement::kPad, "pad", Pad);
  table.Add(data_movement::kTile, "tile", Tile);
  table.Add(data_movement::kConcat, "concat", Concat);
  table.Add(data_movement::kSplit, "split", Split);
  table.Add(data_movement::kReverse, "reverse", Reverse);
  table.Add(data_movement::kReverseSequence, "reverse_sequence", ReverseSequence);
  table.Add(data_movement::kMirrorPad, "mirror_pad", MirrorPad);
  table.Add(data_movement::kMirrorPadGrad, "mirror_pad_grad", MirrorPadGrad);
}

}  // namespace vgpu::cuda
