// The strided copy engine of the CPU data movement kernels (see strided_copy_engine.h). A copy
// is first simplified (launch/data_movement_launch.h: unit dimensions dropped, dimensions that
// stay contiguous in both source and destination merged), then split into runs along its
// innermost dimension; runs are spread over the thread pool, long runs cut into chunks so that
// even a single huge row uses every thread. Contiguous runs are memcpy'd, broadcast runs filled,
// the rest copied by a typed loop; transpositions (source and destination contiguous along
// different dimensions) go by tiles, and short rows repeated along a dimension (a broadcast of a
// per-channel vector) are written once and then doubled in place. Elements are moved as words,
// or bytewise where a tenant placed a tensor at a misaligned address (launch/element_bytes.h).
#define EIGEN_USE_THREADS
#include "plugin/backend/cpu/kernels/strided_copy_engine.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "plugin/backend/launch/element_bytes.h"
#include "plugin/common/status_macros.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

using data_movement_launch::BufferCopy;
using data_movement_launch::CopyBuffers;
using data_movement_launch::kMaxCopyRank;
using data_movement_launch::SimplifyStridedCopy;
using data_movement_launch::StridedCopy;
using data_movement_launch::TakeCopyBuffers;

using DimVector = absl::InlinedVector<int64_t, kMaxCopyRank>;

// Work below this many bytes per unit is not worth handing to another thread.
constexpr int64_t kChunkBytes = 64 * 1024;

// Copies n elements from src (stride ss) to dst (stride ds); strides in elements.
template <typename E>
void CopyRun(const E* src, int64_t ss, E* dst, int64_t ds, int64_t n) {
  if (ss == 1 && ds == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(E));
  } else if (ss == 0) {
    const E value = *src;
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

// Copies the tile [a0, a1) x [b0, b1) of a 2-D transposition: element (a, b) moves from
// src[a + b * src_b_stride] to dst[a * dst_a_stride + b].
template <typename E>
void TransposeTile(const E* src, int64_t src_b_stride, E* dst, int64_t dst_a_stride, int64_t a0,
                   int64_t a1, int64_t b0, int64_t b1) {
  for (int64_t a = a0; a < a1; ++a) {
    E* out = dst + a * dst_a_stride;
    const E* in = src + a;
    for (int64_t b = b0; b < b1; ++b) out[b] = in[b * src_b_stride];
  }
}

// A simplified copy whose destination is contiguous along the last dimension b while the
// source is contiguous along another dimension a (a transposition) is done in square tiles,
// so that both sides stay in cache. Returns false (nothing done) for other copies. `src` and
// `dst` point at the copy's offsets.
template <typename E>
bool RunTiledTranspose(const Eigen::ThreadPoolDevice& device, const StridedCopy& copy,
                       const E* src, E* dst) {
  constexpr int64_t kTile = 32;
  const int rank = copy.rank;
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
  int64_t outer_count = 1;
  for (int d = 0; d < rank - 1; ++d) {
    if (d == a_dim) continue;
    outer_dims.push_back(copy.dims[d]);
    outer_src.push_back(copy.src_strides[d]);
    outer_dst.push_back(copy.dst_strides[d]);
    outer_count *= copy.dims[d];
  }
  const int64_t a_tiles = (a_size + kTile - 1) / kTile;
  const int64_t b_tiles = (b_size + kTile - 1) / kTile;
  const int64_t a_dst_stride = copy.dst_strides[a_dim];
  const double tile_bytes = static_cast<double>(kTile * kTile * sizeof(E));
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
          TransposeTile(src + src_off, b_src_stride, dst + dst_off, a_dst_stride, a_tile * kTile,
                        std::min(a_size, (a_tile + 1) * kTile), b_tile * kTile,
                        std::min(b_size, (b_tile + 1) * kTile));
        }
      });
  return true;
}

// Rows shorter than this are repeated by doubling (RunRepeatedRows) rather than copied one by
// one: a broadcast's rows of a few channels cost a call and an odometer step each otherwise.
constexpr int64_t kRepeatedRowBytes = 1024;

// A copy whose two innermost dimensions are [repeats, inner] with the source's repeat stride 0
// and the destination dense over both (a tile or broadcast of short rows, such as a per-channel
// vector spread over N*H*W positions): per outer position and chunk of repeats, the row is
// copied once into the destination and then doubled there with memcpy (each copy reads the
// part written already, never overlapping what it writes), so the destination is written once,
// in long contiguous stores. Returns false, doing nothing, for any other copy.
template <typename E>
bool RunRepeatedRows(const Eigen::ThreadPoolDevice& device, const StridedCopy& copy,
                     const E* src, E* dst) {
  const int rank = copy.rank;
  if (rank < 2) return false;
  const int64_t inner = copy.dims[rank - 1];
  const int64_t repeats = copy.dims[rank - 2];
  const int64_t row_bytes = inner * static_cast<int64_t>(sizeof(E));
  if (copy.src_strides[rank - 2] != 0 || copy.dst_strides[rank - 1] != 1 ||
      copy.dst_strides[rank - 2] != inner || repeats < 2 || row_bytes >= kRepeatedRowBytes) {
    return false;
  }
  const int64_t inner_ss = copy.src_strides[rank - 1];
  const int outer_rank = rank - 2;
  int64_t outer = 1;
  for (int d = 0; d < outer_rank; ++d) outer *= copy.dims[d];
  // Chunks of about kChunkBytes of the destination: the unit of work handed to a thread.
  const int64_t repeats_per_chunk = std::max<int64_t>(1, kChunkBytes / row_bytes);
  const int64_t chunks = (repeats + repeats_per_chunk - 1) / repeats_per_chunk;
  const double unit_bytes = static_cast<double>(repeats_per_chunk * row_bytes);
  auto work = [&](Eigen::Index first, Eigen::Index last) {
    for (Eigen::Index unit = first; unit < last; ++unit) {
      int64_t position = unit / chunks;  // over the outer dimensions, row-major
      const int64_t chunk = unit % chunks;
      int64_t src_off = 0, dst_off = 0;
      for (int d = outer_rank - 1; d >= 0; --d) {
        const int64_t index = position % copy.dims[d];
        position /= copy.dims[d];
        src_off += index * copy.src_strides[d];
        dst_off += index * copy.dst_strides[d];
      }
      const int64_t first_repeat = chunk * repeats_per_chunk;
      const int64_t total = std::min(repeats_per_chunk, repeats - first_repeat) * inner;
      E* block = dst + dst_off + first_repeat * inner;
      CopyRun(src + src_off, inner_ss, block, 1, inner);
      for (int64_t filled = inner; filled < total;) {
        const int64_t n = std::min(filled, total - filled);
        std::memcpy(block + filled, block, static_cast<size_t>(n) * sizeof(E));
        filled += n;
      }
    }
  };
  device.parallelFor(outer * chunks, Eigen::TensorOpCost(row_bytes, unit_bytes, unit_bytes / 8),
                     work);
  return true;
}

// Runs the simplified `copy` (at least one element) with elements of type E; `src` and `dst`
// point at the copy's offsets.
template <typename E>
void RunTypedCopy(const Eigen::ThreadPoolDevice& device, const StridedCopy& copy, const E* src,
                  E* dst) {
  const int rank = copy.rank;
  if (rank == 0) {  // a single element
    dst[0] = src[0];
    return;
  }
  if (RunTiledTranspose(device, copy, src, dst)) return;
  if (RunRepeatedRows(device, copy, src, dst)) return;
  const int64_t inner = copy.dims[rank - 1];
  const int64_t inner_ss = copy.src_strides[rank - 1];
  const int64_t inner_ds = copy.dst_strides[rank - 1];
  const int outer_rank = rank - 1;
  int64_t rows = 1;
  for (int d = 0; d < outer_rank; ++d) rows *= copy.dims[d];

  // Cut long rows into chunks when there are too few rows to keep every thread busy.
  const int64_t row_bytes = inner * static_cast<int64_t>(sizeof(E));
  const int64_t threads = std::max(1, device.numThreads());
  int64_t chunks_per_row = 1;
  if (rows < 4 * threads && row_bytes > kChunkBytes) {
    chunks_per_row = std::min((row_bytes + kChunkBytes - 1) / kChunkBytes,
                              (4 * threads + rows - 1) / rows);
  }
  const int64_t chunk_len = (inner + chunks_per_row - 1) / chunks_per_row;
  const int64_t units = rows * chunks_per_row;
  const double unit_bytes = static_cast<double>(chunk_len) * static_cast<double>(sizeof(E));

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
      CopyRun(src + src_off + begin * inner_ss, inner_ss, dst + dst_off + begin * inner_ds,
              inner_ds, n);
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

}  // namespace

absl::Status RunStridedCopy(const Eigen::ThreadPoolDevice& device, const StridedCopy& original,
                            const uint8_t* src, uint8_t* dst) {
  if (original.ElementCount() == 0) return absl::OkStatus();
  const StridedCopy copy = SimplifyStridedCopy(original);
  const int64_t esize = static_cast<int64_t>(copy.element_size);
  const uint8_t* src_base = src + copy.src_offset * esize;
  uint8_t* dst_base = dst + copy.dst_offset * esize;
  return DispatchElementBytes(copy.element_size, {src_base, dst_base},
                              [&](auto zero) -> absl::Status {
    using E = decltype(zero);
    RunTypedCopy(device, copy, reinterpret_cast<const E*>(src_base),
                 reinterpret_cast<E*>(dst_base));
    return absl::OkStatus();
  });
}

absl::Status RunBufferCopy(const KernelContext& context, const BufferCopy& copy) {
  VGPU_ASSIGN_OR_RETURN(CopyBuffers buffers, TakeCopyBuffers(context, copy));
  if (copy.Empty()) return absl::OkStatus();
  return RunStridedCopy(*context.device, copy.plan, buffers.src, buffers.dst);
}

absl::Status FillElements(const Eigen::ThreadPoolDevice& device, uint8_t* dst, int64_t count,
                          uint32_t element_size, uint64_t value_bits) {
  if (count <= 0) return absl::OkStatus();
  return DispatchElementBytes(element_size, {dst}, [&](auto zero) -> absl::Status {
    using E = decltype(zero);
    E value;
    std::memcpy(&value, &value_bits, sizeof(E));  // little-endian: the low bytes
    E* elements = reinterpret_cast<E*>(dst);
    device.parallelFor(count, Eigen::TensorOpCost(0, sizeof(E), 0.1),
                       [&](Eigen::Index first, Eigen::Index last) {
      if (value_bits == 0) {
        std::memset(elements + first, 0, static_cast<size_t>(last - first) * sizeof(E));
      } else {
        std::fill(elements + first, elements + last, value);
      }
    });
    return absl::OkStatus();
  });
}

absl::Status FillPadding(const Eigen::ThreadPoolDevice& device, uint8_t* y,
                         const data_movement_launch::PadLaunch& pad) {
  const int rank = pad.rank;
  // An element outside the box has a first dimension d where its index leaves the box; along
  // every dimension before d it lies inside. So the padding is, for each d and each index of
  // the box's dimensions before d, two contiguous runs of y: the pad before the box along d
  // and the pad after it, each spanning all of the dimensions after d. Every padding element
  // belongs to exactly one run.
  int64_t y_strides[data_movement_launch::kMaxDataMovementRank] = {};
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    y_strides[d] = stride;
    stride *= pad.y_dims[d];
  }
  return DispatchElementBytes(pad.copy.plan.element_size, {y}, [&](auto zero) -> absl::Status {
    using E = decltype(zero);
    E value;
    std::memcpy(&value, &pad.pad_value, sizeof(E));  // little-endian: the low bytes
    E* elements = reinterpret_cast<E*>(y);
    for (int d = 0; d < rank; ++d) {
      const int64_t before = pad.box_begin[d] * y_strides[d];
      const int64_t after = (pad.y_dims[d] - pad.box_begin[d] - pad.box_dims[d]) * y_strides[d];
      if (before == 0 && after == 0) continue;
      int64_t runs = 1;  // the box's index tuples over dimensions [0, d)
      for (int k = 0; k < d; ++k) runs *= pad.box_dims[k];
      if (runs == 0) break;  // the box is empty there: the earlier dimensions covered y
      const int64_t box_end = (pad.box_begin[d] + pad.box_dims[d]) * y_strides[d];
      device.parallelFor(
          runs, Eigen::TensorOpCost(0, static_cast<double>((before + after) * sizeof(E)), 1),
          [&](Eigen::Index first, Eigen::Index last) {
            for (Eigen::Index run = first; run < last; ++run) {
              int64_t rest = run, offset = 0;
              for (int k = d - 1; k >= 0; --k) {
                offset += (pad.box_begin[k] + rest % pad.box_dims[k]) * y_strides[k];
                rest /= pad.box_dims[k];
              }
              std::fill(elements + offset, elements + offset + before, value);
              std::fill(elements + offset + box_end, elements + offset + box_end + after, value);
            }
          });
    }
    return absl::OkStatus();
  });
}

}  // namespace vgpu::cpu_kernels
