// TensorFlow's strided-slice semantics on the host, shared by the ops that slice (StridedSlice,
// StridedSliceGrad, TensorStridedSliceUpdate in data_movement_ops.cc) and the one that assigns
// into a variable's slice (ResourceStridedSliceAssign in variable_ops.cc): the sparse
// specification of begin/end/strides and masks made dense and canonical, and the broadcasting
// rule of an assigned value. Plain host arithmetic: no TensorFlow headers.
#ifndef VGPU_KERNELS_STRIDED_SLICE_PLAN_H_
#define VGPU_KERNELS_STRIDED_SLICE_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/client/device_client.h"

namespace vgpu {

using Dims = std::vector<int64_t>;

// A host-memory integer input: its shape and its values.
struct HostInts {
  Dims shape;
  std::vector<int64_t> values;
};

// The five mask attributes of the strided-slice ops.
struct StridedSliceMasks {
  int32_t begin = 0, end = 0, ellipsis = 0, new_axis = 0, shrink_axis = 0;
};

// What a strided slice of an input of known shape selects: per input dimension the canonical
// begin/end/stride and the number of elements taken (the processing shape), and the shape of
// the result after new axes are inserted and shrunk axes dropped (the final shape).
struct StridedSlicePlan {
  Dims begin, end, strides;
  Dims processing_dims;
  Dims final_dims;
  bool is_identity = true;
};

// TensorFlow's strided slice semantics (ValidateStridedSliceOp): the sparse specification of
// begin/end/strides and masks, with at most one ellipsis (an implicit one at the end), is
// expanded to one entry per input dimension, then each entry is made canonical and
// bounds-checked. Errors are InvalidArgument with TensorFlow's messages.
absl::StatusOr<StridedSlicePlan> PlanStridedSlice(const Dims& input_dims, const HostInts& begin,
                                                  const HostInts& end, const HostInts& strides,
                                                  const StridedSliceMasks& masks);

// The value of a slice assignment broadcast to the slice (TensorFlow's StridedSliceAssignBCast):
// returns the value's dims brought to the rank of `final_dims` (ones prepended, or leading ones
// dropped), each then equal to final_dims' or 1; InvalidArgument "Cannot broadcast input shape
// ... into final shape ..." otherwise.
absl::StatusOr<Dims> BroadcastAssignedValue(const Dims& value_dims, const Dims& final_dims);

// The launches of a slice assignment, target[plan's slice] = value, on `stream` (posted, not
// waited for): when `value_dims` (from BroadcastAssignedValue) differ from the plan's final
// dims, the value is first broadcast into `scratch` (the plan's final element count of
// `element_size` bytes each; unused otherwise), then scattered into `target` (of
// `target_dims`) by data_movement::kStridedSliceAssign. Nothing is launched for an empty slice.
absl::Status LaunchSliceAssignment(ClientStream& stream, uint32_t element_size,
                                   const StridedSlicePlan& plan, const Dims& target_dims,
                                   const Dims& value_dims, BufferArg value, BufferArg scratch,
                                   BufferArg target);

}  // namespace vgpu

#endif  // VGPU_KERNELS_STRIDED_SLICE_PLAN_H_
