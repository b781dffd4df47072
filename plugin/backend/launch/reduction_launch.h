// The reduction family's reduce and arg-reduce launches (protocol/kernels/reduction.h), read
// once for every executor: the reduce and tensor descriptors, the layout parameters and the
// buffer sizes, validated as a hostile client could send them (in the order the CPU executor's
// kernels always checked them), become a ReduceGeometry: the input's ReductionHelper layout
// (alternating reduced / kept runs) and, equivalently, a kept index space and a reduced index
// space with element strides. The CPU executor reduces the runs with Eigen; the CUDA executor
// copies the geometry to the device and walks the index spaces. Plain data.
#ifndef VGPU_BACKEND_LAUNCH_REDUCTION_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_REDUCTION_LAUNCH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/backend/launch/host_device.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu::reduction_launch {

// Runs of one kind (reduced or kept) in a layout of at most kMaxRank runs.
inline constexpr int kMaxReduceRuns = (kMaxRank + 1) / 2;

struct ReduceGeometry {
  // The layout: x's dimensions as runs; run 0 is reduced when reduce_first, the kinds alternate.
  int rank = 0;
  int64_t runs[kMaxRank] = {};
  bool reduce_first = false;
  int64_t in_count = 0, out_count = 0;  // x's and y's elements
  bool copies = false;         // no reduced run (rank 0, or rank 1 kept): y is a copy of x
  bool last_run_kept = false;  // neighbouring outputs read neighbouring elements
  // The index spaces, meaningful when in_count > 0 (every run is then positive): output o has
  // the kept coordinates of o (row-major over kept_dims) and reduces the per_output elements at
  // those plus every reduced coordinate.
  int kept_rank = 0;
  int64_t kept_dims[kMaxReduceRuns] = {};
  int64_t kept_strides[kMaxReduceRuns] = {};
  int reduced_rank = 0;
  int64_t reduced_dims[kMaxReduceRuns] = {};
  int64_t reduced_strides[kMaxReduceRuns] = {};
  int64_t per_output = 1;

  // The element offset in x of output `output`'s first element.
  VGPU_HOST_DEVICE int64_t KeptOffset(int64_t output) const {
    int64_t offset = 0;
    for (int d = kept_rank - 1; d >= 0; --d) {
      offset += (output % kept_dims[d]) * kept_strides[d];
      output /= kept_dims[d];
    }
    return offset;
  }
  // The element offset, from KeptOffset, of the `index`th element reduced into an output.
  VGPU_HOST_DEVICE int64_t ReducedOffset(int64_t index) const {
    if (reduced_rank == 1) return index * reduced_strides[0];
    int64_t offset = 0;
    for (int d = reduced_rank - 1; d >= 0; --d) {
      offset += (index % reduced_dims[d]) * reduced_strides[d];
      index /= reduced_dims[d];
    }
    return offset;
  }
};

// What a valid reduce launch asks for.
enum class ReduceWork {
  kNothing,       // y is empty
  kCopy,          // no reduced run: y = x
  kFillIdentity,  // x is empty: y = the op's identity
  kReduce,        // the op over the reduced index space
};

// reduction::kReduce: descriptors [reduce, x, y], buffers [x, y], params ReduceLayoutParams.
// dtype: bool (op kAll or kAny) or int64 / floating (DispatchReducible; op kSum, kMean, kProd,
// kMax or kMin when there is something to reduce).
struct ReduceLaunch {
  ReduceOp op = ReduceOp::kSum;
  DType dtype = DType::kFloat32;
  ReduceGeometry geometry;
  ReduceWork work = ReduceWork::kNothing;
};
absl::StatusOr<ReduceLaunch> ReadReduceLaunch(const LaunchView& launch);
// The error of a numeric reduce op outside kSum, kMean, kProd, kMax and kMin.
absl::Status UnservedReduceOp(ReduceOp op);

// reduction::kArgReduce: descriptors [reduce (kMax or kMin), x [outer, n > 0, inner],
// y [outer, inner]], buffers [x, y]. dtype: int64 / floating (DispatchReducible); index_dtype:
// int32 or int64 (DTypeDispatch::Index).
struct ArgReduceLaunch {
  ReduceOp op = ReduceOp::kMax;
  DType dtype = DType::kFloat32, index_dtype = DType::kInt64;
  int64_t outer = 0, n = 0, inner = 0;
  int64_t x_count = 0, y_count = 0;
};
absl::StatusOr<ArgReduceLaunch> ReadArgReduceLaunch(const LaunchView& launch);

}  // namespace vgpu::reduction_launch

#endif  // VGPU_BACKEND_LAUNCH_REDUCTION_LAUNCH_H_
