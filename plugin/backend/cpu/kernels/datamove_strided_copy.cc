// The strided copy engine of the data movement kernels (see datamove_strided_copy.h). A copy is
// first simplified (unit dimensions dropped, dimensions that stay contiguous in both source and
// destination merged), then split into runs along its innermost dimension; runs are spread over
// the thread pool, long runs cut into chunks so that even a single huge row uses every thread.
// Contiguous runs are memcpy'd, broadcast runs filled, the rest copied by a typed loop;
// transpositions (source and destination contiguous along different dimensions) go by tiles.
#include "plugin/backend/cpu/kernels/datamove_strided_copy.h"

#define EIGEN_USE_THREADS
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

// Work below this many bytes per unit is not worth handing to another thread.
constexpr int64_t kChunkBytes = 64 * 1024;

// Drops unit dimensions and merges neighbours that are contiguous in both source and
// destination, so that e.g. a slice of whole rows becomes one long run.
StridedCopy Simplify(const StridedCopy& copy) {
  StridedCopy out;
  out.element_size = copy.element_size;
  out.src_offset = copy.src_offset;
  out.dst_offset = copy.dst_offset;
  for (size_t d = 0; d < copy.dims.size(); ++d) {
    if (copy.dims[d] == 1) continue;
    out.dims.push_back(copy.dims[d]);
    out.src_strides.push_back(copy.src_strides[d]);
    out.dst_strides.push_back(copy.dst_strides[d]);
  }
  // Merge from the innermost dimension outwards.
  StridedCopy merged = out;
  merged.dims.clear();
  merged.src_strides.clear();
  merged.dst_strides.clear();
  for (int d = static_cast<int>(out.dims.size()) - 1; d >= 0; --d) {
    if (!merged.dims.empty()) {
      const int64_t inner_dim = merged.dims.back();
      if (out.src_strides[d] == inner_dim * merged.src_strides.back() &&
          out.dst_strides[d] == inner_dim * merged.dst_strides.back()) {
        merged.dims.back() *= out.dims[d];
        continue;
      }
    }
    merged.dims.push_back(out.dims[d]);
    merged.src_strides.push_back(out.src_strides[d]);
    merged.dst_strides.push_back(out.dst_strides[d]);
  }
  std::reverse(merged.dims.begin(), merged.dims.end());
  std::reverse(merged.src_strides.begin(), merged.src_strides.end());
  std::reverse(merged.dst_strides.begin(), merged.dst_strides.end());
  return merged;
}

// Copies n elements from src (stride ss) to dst (stride ds); strides in elements.
template <typename T>
void CopyRun(const T* src, int64_t ss, T* dst, int64_t ds, int64_t n) {
  if (ss == 1 && ds == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
  } else if (ss == 0) {
    const T value = *src;
    if (ds == 1) {
      std::fill(dst, dst + n, value);
    } else {
      for (int64_t i = 0; i < n; ++i) dst[i * ds] = value;
    }
  } else if (ds == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i * ss];
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i * ds] = src[i * ss];
  }
}

void CopyRunBytes(size_t element_size, const uint8_t* src, int64_t ss, uint8_t* dst, int64_t ds,
                  int64_t n) {
  // A tenant may place a tensor at any byte: elements that are not aligned for a word access
  // are copied bytewise (a word access through a misaligned pointer is undefined behaviour).
  const bool word_sized = element_size == 2 || element_size == 4 || element_size == 8;
  if (word_sized && ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) &
                     (element_size - 1)) != 0) {
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(dst + i * ds * static_cast<int64_t>(element_size),
                  src + i * ss * static_cast<int64_t>(element_size), element_size);
    }
    return;
  }
  switch (element_size) {
    case 1: return CopyRun(src, ss, dst, ds, n);
    case 2:
      return CopyRun(reinterpret_cast<const uint16_t*>(src), ss, reinterpret_cast<uint16_t*>(dst),
                     ds, n);
    case 4:
      return CopyRun(reinterpret_cast<const uint32_t*>(src), ss, reinterpret_cast<uint32_t*>(dst),
                     ds, n);
    case 8:
      return CopyRun(reinterpret_cast<const uint64_t*>(src), ss, reinterpret_cast<uint64_t*>(dst),
                     ds, n);
    default: return;  // rejected by the kernels before they get here
  }
}

// Copies the tile [a0, a1) x [b0, b1) of a 2-D transposition: element (a, b) moves from
// src[a + b * src_b_stride] to dst[a * dst_a_stride + b].
template <typename T>
void TransposeTile(const T* src, int64_t src_b_stride, T* dst, int64_t dst_a_stride, int64_t a0,
                   int64_t a1, int64_t b0, int64_t b1) {
  for (int64_t a = a0; a < a1; ++a) {
    T* out = dst + a * dst_a_stride;
    const T* in = src + a;
    for (int64_t b = b0; b < b1; ++b) out[b] = in[b * src_b_stride];
  }
}

void TransposeTileBytes(size_t element_size, const uint8_t* src, int64_t src_b_stride,
                        uint8_t* dst, int64_t dst_a_stride, int64_t a0, int64_t a1, int64_t b0,
                        int64_t b1) {
  switch (element_size) {
    case 1: return TransposeTile(src, src_b_stride, dst, dst_a_stride, a0, a1, b0, b1);
    case 2:
      return TransposeTile(reinterpret_cast<const uint16_t*>(src), src_b_stride,
                           reinterpret_cast<uint16_t*>(dst), dst_a_stride, a0, a1, b0, b1);
    case 4:
      return TransposeTile(reinterpret_cast<const uint32_t*>(src), src_b_stride,
                           reinterpret_cast<uint32_t*>(dst), dst_a_stride, a0, a1, b0, b1);
    case 8:
      return TransposeTile(reinterpret_cast<const uint64_t*>(src), src_b_stride,
                           reinterpret_cast<uint64_t*>(dst), dst_a_stride, a0, a1, b0, b1);
    default: return;
  }
}

// A simplified copy whose destination is contiguous along the last dimension b while the
// source is contiguous along another dimension a (a transposition) is done in square tiles,
// so that both sides stay in cache. Returns false (nothing done) for other copies.
bool RunTiledTranspose(const Eigen::ThreadPoolDevice& device, const StridedCopy& copy,
                       const uint8_t* src_base, uint8_t* dst_base) {
  constexpr int64_t kTile = 32;
  const int rank = static_cast<int>(copy.dims.size());
  if (rank < 2 || copy.dst_strides[rank - 1] != 1) return false;
  const int64_t b_src_stride = copy.src_strides[rank - 1];
  if (b_src_stride == 1 || b_src_stride == 0) return false;
  int a_dim = -1;
  for (int d = 0; d < rank - 1; ++d) {
    if (copy.src_strides[d] == 1) a_dim = d;
  }
  if (a_dim < 0) return false;
  const int64_t a_size = copy.dims[a_dim];
  const int64_t b_size = copy.dims[rank - 1];
  if (a_size < kTile / 4 || b_size < kTile / 4) return false;
  // The remaining dimensions, iterated as an outer index.
  DimVector outer_dims, outer_src, outer_dst;
  for (int d = 0; d < rank - 1; ++d) {
    if (d == a_dim) continue;
    outer_dims.push_back(copy.dims[d]);
    outer_src.push_back(copy.src_strides[d]);
    outer_dst.push_back(copy.dst_strides[d]);
  }
  const int64_t outer_count = ElementCountOf(outer_dims);
  const int64_t a_tiles = (a_size + kTile - 1) / kTile;
  const int64_t b_tiles = (b_size + kTile - 1) / kTile;
  const int64_t esize = static_cast<int64_t>(copy.element_size);
  const int64_t a_dst_stride = copy.dst_strides[a_dim];
  const double tile_bytes = static_cast<double>(kTile * kTile * esize);
  device.parallelFor(
      outer_count * a_tiles * b_tiles, Eigen::TensorOpCost(tile_bytes, tile_bytes, tile_bytes / 4),
      [&](Eigen::Index first, Eigen::Index last) {
        for (Eigen::Index unit = first; unit < last; ++unit) {
          const int64_t b_tile = unit % b_tiles;
          const int64_t a_tile = (unit / b_tiles) % a_tiles;
          int64_t rest = unit / (b_tiles * a_tiles);
          int64_t src_off = 0, dst_off = 0;
          for (int d = static_cast<int>(outer_dims.size()) - 1; d >= 0; --d) {
            const int64_t i = rest % outer_dims[d];
            rest /= outer_dims[d];
            src_off += i * outer_src[d];
            dst_off += i * outer_dst[d];
          }
          TransposeTileBytes(copy.element_size, src_base + src_off * esize, b_src_stride,
                             dst_base + dst_off * esize, a_dst_stride, a_tile * kTile,
                             std::min(a_size, (a_tile + 1) * kTile), b_tile * kTile,
                             std::min(b_size, (b_tile + 1) * kTile));
        }
      });
  return true;
}

}  // namespace

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

void RunStridedCopy(const Eigen::ThreadPoolDevice& device, const StridedCopy& original,
                    const uint8_t* src, uint8_t* dst) {
  for (int64_t d : original.dims) {
    if (d == 0) return;
  }
  const StridedCopy copy = Simplify(original);
  const size_t esize = copy.element_size;
  const uint8_t* src_base = src + copy.src_offset * static_cast<int64_t>(esize);
  uint8_t* dst_base = dst + copy.dst_offset * static_cast<int64_t>(esize);
  const int rank = static_cast<int>(copy.dims.size());
  if (rank == 0) {  // a single element
    std::memcpy(dst_base, src_base, esize);
    return;
  }
  if (RunTiledTranspose(device, copy, src_base, dst_base)) return;
  const int64_t inner = copy.dims[rank - 1];
  const int64_t inner_ss = copy.src_strides[rank - 1];
  const int64_t inner_ds = copy.dst_strides[rank - 1];
  const int outer_rank = rank - 1;
  int64_t rows = 1;
  for (int d = 0; d < outer_rank; ++d) rows *= copy.dims[d];

  // Cut long rows into chunks when there are too few rows to keep every thread busy.
  const int64_t row_bytes = inner * static_cast<int64_t>(esize);
  const int64_t threads = std::max(1, device.numThreads());
  int64_t chunks_per_row = 1;
  if (rows < 4 * threads && row_bytes > kChunkBytes) {
    chunks_per_row = std::min((row_bytes + kChunkBytes - 1) / kChunkBytes,
                              (4 * threads + rows - 1) / rows);
  }
  const int64_t chunk_len = (inner + chunks_per_row - 1) / chunks_per_row;
  const int64_t units = rows * chunks_per_row;
  const double unit_bytes = static_cast<double>(chunk_len) * static_cast<double>(esize);

  auto work = [&](Eigen::Index first, Eigen::Index last) {
    const int64_t row = first / chunks_per_row;
    int64_t chunk = first % chunks_per_row;
    // The multi-index of `row` over the outer dimensions, and its offsets.
    DimVector index(outer_rank, 0);
    int64_t src_off = 0, dst_off = 0;
    {
      int64_t rest = row;
      for (int d = outer_rank - 1; d >= 0; --d) {
        index[d] = rest % copy.dims[d];
        rest /= copy.dims[d];
        src_off += index[d] * copy.src_strides[d];
        dst_off += index[d] * copy.dst_strides[d];
      }
    }
    for (Eigen::Index unit = first; unit < last; ++unit) {
      const int64_t begin = chunk * chunk_len;
      const int64_t n = std::min(inner, begin + chunk_len) - begin;
      CopyRunBytes(esize,
                   src_base + (src_off + begin * inner_ss) * static_cast<int64_t>(esize), inner_ss,
                   dst_base + (dst_off + begin * inner_ds) * static_cast<int64_t>(esize), inner_ds,
                   n);
      if (++chunk == chunks_per_row) {
        chunk = 0;
        // Advance the outer multi-index (odometer), keeping the offsets in step.
        for (int d = outer_rank - 1; d >= 0; --d) {
          ++index[d];
          src_off += copy.src_strides[d];
          dst_off += copy.dst_strides[d];
          if (index[d] < copy.dims[d]) break;
          src_off -= index[d] * copy.src_strides[d];
          dst_off -= index[d] * copy.dst_strides[d];
          index[d] = 0;
        }
      }
    }
  };
  device.parallelFor(units, Eigen::TensorOpCost(unit_bytes, unit_bytes, unit_bytes / 8), work);
}

void FillElements(const Eigen::ThreadPoolDevice& device, uint8_t* dst, int64_t count,
                  size_t element_size, uint64_t value_bits) {
  if (count <= 0) return;
  const double unit_bytes = static_cast<double>(element_size);
  auto fill = [&](Eigen::Index first, Eigen::Index last) {
    const int64_t n = last - first;
    if (value_bits == 0) {
      std::memset(dst + first * element_size, 0, static_cast<size_t>(n) * element_size);
      return;
    }
    if ((reinterpret_cast<uintptr_t>(dst) & (element_size - 1)) != 0) {
      // Misaligned for a word store (a tenant may place a tensor at any byte): bytewise.
      for (int64_t i = first; i < last; ++i) {
        std::memcpy(dst + i * static_cast<int64_t>(element_size), &value_bits, element_size);
      }
      return;
    }
    switch (element_size) {
      case 1:
        std::memset(dst + first, static_cast<uint8_t>(value_bits), static_cast<size_t>(n));
        return;
      case 2: {
        auto* p = reinterpret_cast<uint16_t*>(dst) + first;
        std::fill(p, p + n, static_cast<uint16_t>(value_bits));
        return;
      }
      case 4: {
        auto* p = reinterpret_cast<uint32_t*>(dst) + first;
        std::fill(p, p + n, static_cast<uint32_t>(value_bits));
        return;
      }
      case 8: {
        auto* p = reinterpret_cast<uint64_t*>(dst) + first;
        std::fill(p, p + n, value_bits);
        return;
      }
      default: return;
    }
  };
  device.parallelFor(count, Eigen::TensorOpCost(0, unit_bytes, 0.1), fill);
}

}  // namespace vgpu::cpu_kernels
