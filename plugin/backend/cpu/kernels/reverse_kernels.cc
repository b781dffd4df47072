// CPU kernels of the reversals of the data movement family (protocol/kernels/data_movement.h,
// kReverse and kReverseSequence). Like the other data movement kernels they move elements of
// 1, 2, 4 or 8 bytes without looking at them: a reverse is one strided copy with negative
// strides on the reversed dimensions; a sequence reverse copies contiguous runs of elements,
// one per (outer index, batch entry, sequence position), each from its mirrored position.
#define EIGEN_USE_THREADS

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/data_movement_kernels.h"
#include "plugin/backend/cpu/kernels/datamove_strided_copy.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/data_movement.h"
#include "unsupported/Eigen/CXX11/Tensor"

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

// Reads x_dims: at most kMaxDataMovementRank non-negative dimensions of a bounded tensor.
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

// data_movement::kReverse.
absl::Status Reverse(const KernelContext& context) {
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
  RunStridedCopy(*context.device, copy, x, y);
  return absl::OkStatus();
}

// data_movement::kReverseSequence.
absl::Status ReverseSequence(const KernelContext& context) {
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
  const int64_t batch = dims[batch_dim], steps = dims[seq_dim];
  VGPU_ASSIGN_OR_RETURN(const uint8_t* lengths_bytes,
                        context.Buffer<const uint8_t>(1, batch * length_size));
  if (n == 0) return absl::OkStatus();
  VGPU_ASSIGN_OR_RETURN(const uint8_t* x, context.Buffer<const uint8_t>(0, n * esize));
  VGPU_ASSIGN_OR_RETURN(uint8_t* y, context.Buffer<uint8_t>(2, n * esize));
  std::vector<int64_t> lengths(batch);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t length;
    if (length_size == 4) {
      int32_t value;
      std::memcpy(&value, lengths_bytes + b * 4, 4);
      length = value;
    } else {
      std::memcpy(&length, lengths_bytes + b * 8, 8);
    }
    lengths[b] = std::clamp<int64_t>(length, 0, steps);
  }
  // x viewed as [outer, a, middle, b, inner]: a and b the batch and sequence dimensions in
  // order; every (outer, a, middle, b) index is a contiguous run of `inner` elements.
  const int first = std::min(batch_dim, seq_dim), second = std::max(batch_dim, seq_dim);
  int64_t outer = 1, middle = 1, inner = 1;
  for (int d = 0; d < first; ++d) outer *= dims[d];
  for (int d = first + 1; d < second; ++d) middle *= dims[d];
  for (int d = second + 1; d < rank; ++d) inner *= dims[d];
  const int64_t a_size = dims[first], b_size = dims[second];
  const bool batch_first = batch_dim == first;
  const int64_t runs = outer * a_size * middle * b_size;
  const size_t run_bytes = static_cast<size_t>(inner) * esize;
  context.device->parallelFor(
      runs, Eigen::TensorOpCost(run_bytes, run_bytes, 1), [&](Eigen::Index begin, Eigen::Index end) {
        for (int64_t run = begin; run < end; ++run) {
          int64_t rest = run;
          const int64_t j = rest % b_size;
          rest /= b_size;
          const int64_t m = rest % middle;
          rest /= middle;
          const int64_t i = rest % a_size;
          const int64_t o = rest / a_size;
          const int64_t batch_index = batch_first ? i : j;
          const int64_t seq_index = batch_first ? j : i;
          const int64_t length = lengths[batch_index];
          const int64_t source_seq = seq_index < length ? length - 1 - seq_index : seq_index;
          const int64_t si = batch_first ? i : source_seq, sj = batch_first ? source_seq : j;
          const int64_t source_run = ((o * a_size + si) * middle + m) * b_size + sj;
          std::memcpy(y + run * run_bytes, x + source_run * run_bytes, run_bytes);
        }
      });
  return absl::OkStatus();
}

}  // namespace

void AddReverseKernels(KernelTable& table) {
  table.Add(data_movement::kReverse, "reverse", Reverse);
  table.Add(data_movement::kReverseSequence, "reverse_sequence", ReverseSequence);
}

}  // namespace vgpu::cpu_kernels
