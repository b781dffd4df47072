// TensorFlow's strided-slice semantics on the host (strided_slice_plan.h).
#include "plugin/kernels/strided_slice_plan.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "plugin/kernels/kernel_launch.h"
#include "plugin/kernels/kernel_support.h"
#include "plugin/protocol/kernels/data_movement.h"
#include "plugin/protocol/launch_params.h"

namespace vgpu {

absl::StatusOr<StridedSlicePlan> PlanStridedSlice(const Dims& input_dims, const HostInts& begin,
                                                  const HostInts& end, const HostInts& strides,
                                                  const StridedSliceMasks& masks) {
  const bool begin_wrong = !(begin.shape.size() == 1 &&
                             begin.values.size() == strides.values.size() &&
                             begin.values.size() < 32);
  const bool end_wrong =
      !(end.shape.size() == 1 && end.values.size() == strides.values.size());
  if (begin_wrong || end_wrong || strides.shape.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Expected begin, end, and strides to be 1D equal size tensors, but got shapes ",
        ShapeString(begin.shape), ", ", ShapeString(end.shape), ", and ",
        ShapeString(strides.shape), " instead."));
  }
  if (masks.ellipsis != 0 && (masks.ellipsis & (masks.ellipsis - 1)) != 0) {
    return absl::InvalidArgumentError("Multiple ellipses in slice spec not allowed");
  }

  // The sparse specification: one entry per element of begin/end/strides (+ implicit ellipsis).
  int sparse_dims = static_cast<int>(strides.values.size());
  int32_t ellipsis_mask = masks.ellipsis;
  int new_axes_after_ellipsis = 0;
  bool ellipsis_seen = false;
  for (int i = 0; i < sparse_dims; ++i) {
    if (ellipsis_seen && ((1 << i) & masks.new_axis) != 0) ++new_axes_after_ellipsis;
    if ((1 << i) & ellipsis_mask) ellipsis_seen = true;
  }
  if (!ellipsis_seen) {
    ellipsis_mask |= 1 << sparse_dims;
    ++sparse_dims;
  }

  // The dense specification: one entry per input dimension.
  constexpr int64_t kShrinkAxis = -1, kNewAxis = -2;
  const int dense_dims = static_cast<int>(input_dims.size());
  StridedSlicePlan plan;
  plan.begin.assign(dense_dims, 0);
  plan.end.assign(dense_dims, 0);
  plan.strides.assign(dense_dims, 1);
  int32_t begin_mask = 0, end_mask = 0, shrink_mask = 0;
  std::vector<int64_t> final_gather;  // input dimension, kNewAxis or kShrinkAxis
  int full_index = 0;
  for (int i = 0; i < sparse_dims; ++i) {
    if ((1 << i) & ellipsis_mask) {
      const int next_index =
          std::min(dense_dims - (sparse_dims - i) + 1 + new_axes_after_ellipsis, dense_dims);
      for (; full_index < next_index; ++full_index) {
        plan.begin[full_index] = plan.end[full_index] = 0;
        plan.strides[full_index] = 1;
        begin_mask |= 1 << full_index;
        end_mask |= 1 << full_index;
        final_gather.push_back(full_index);
      }
    } else if ((1 << i) & masks.new_axis) {
      final_gather.push_back(kNewAxis);
    } else {
      if (full_index == dense_dims) {
        if (dense_dims == 0) return absl::InvalidArgumentError("Attempting to slice scalar input.");
        return absl::InvalidArgumentError(absl::StrCat("Index out of range using input dim ",
                                                       full_index, "; input has only ",
                                                       dense_dims, " dims"));
      }
      plan.begin[full_index] = begin.values[i];
      plan.end[full_index] = end.values[i];
      plan.strides[full_index] = strides.values[i];
      if (masks.begin & (1 << i)) begin_mask |= 1 << full_index;
      if (masks.end & (1 << i)) end_mask |= 1 << full_index;
      if (masks.shrink_axis & (1 << i)) {
        final_gather.push_back(kShrinkAxis);
        shrink_mask |= 1 << full_index;
      } else {
        final_gather.push_back(full_index);
      }
      ++full_index;
    }
  }

  // Canonical, bounds-checked ranges per input dimension.
  for (int i = 0; i < dense_dims; ++i) {
    int64_t& begin_i = plan.begin[i];
    int64_t& end_i = plan.end[i];
    const int64_t stride_i = plan.strides[i];
    const int64_t dim_i = input_dims[i];
    if (stride_i == 0) {
      return absl::InvalidArgumentError(absl::StrCat("strides[", i, "] must be non-zero"));
    }
    const bool shrink_i = shrink_mask & (1 << i);
    const bool masked[2] = {(begin_mask & (1 << i)) != 0, (end_mask & (1 << i)) != 0};
    const int64_t valid_range[2] = {stride_i > 0 ? 0 : -1, stride_i > 0 ? dim_i : dim_i - 1};
    auto canonical = [&](int64_t x, int c) {
      if (masked[c]) return stride_i > 0 ? valid_range[c] : valid_range[(c + 1) & 1];
      const int64_t x_fwd = x < 0 ? dim_i + x : x;  // negative indices count from the end
      return x_fwd < valid_range[0] ? valid_range[0]
                                    : (x_fwd > valid_range[1] ? valid_range[1] : x_fwd);
    };
    if (shrink_i && stride_i <= 0) {
      return absl::InvalidArgumentError("only stride 1 allowed on non-range indexing.");
    }
    if (shrink_i) {
      // foo[-1] has begin -1 and end 0; the end is recreated as begin + 1.
      const int64_t x_fwd = begin_i < 0 ? dim_i + begin_i : begin_i;
      begin_i = x_fwd;
      end_i = begin_i + 1;
      if (x_fwd < 0 || x_fwd >= dim_i) {
        return absl::InvalidArgumentError(
            absl::StrCat("slice index ", begin_i, " of dimension ", i, " out of bounds."));
      }
    } else {
      begin_i = canonical(begin_i, 0);
      end_i = canonical(end_i, 1);
    }
    plan.is_identity &= stride_i == 1 && begin_i == 0 && end_i == dim_i;
    const int64_t interval = end_i - begin_i;
    int64_t size_i;
    if (interval == 0 || ((interval < 0) != (stride_i < 0))) {
      size_i = 0;
    } else {
      size_i = interval / stride_i + (interval % stride_i != 0 ? 1 : 0);
    }
    plan.processing_dims.push_back(size_i);
  }
  for (int64_t gather : final_gather) {
    if (gather >= 0) {
      plan.final_dims.push_back(plan.processing_dims[gather]);
    } else if (gather == kNewAxis) {
      plan.final_dims.push_back(1);
    }
  }
  return plan;
}

absl::StatusOr<Dims> BroadcastAssignedValue(const Dims& value_dims, const Dims& final_dims) {
  auto cannot = [&] {
    return absl::InvalidArgumentError(absl::StrCat("Cannot broadcast input shape ",
                                                   ShapeString(value_dims), " into final shape ",
                                                   ShapeString(final_dims)));
  };
  Dims reshaped(final_dims.size(), 1);
  size_t first = 0;
  if (value_dims.size() > final_dims.size()) {
    // NumPy lets a value of higher rank be assigned when its extra leading dimensions are 1.
    first = value_dims.size() - final_dims.size();
    for (size_t i = 0; i < first; ++i) {
      if (value_dims[i] != 1) return cannot();
    }
  }
  std::copy(value_dims.begin() + first, value_dims.end(),
            reshaped.end() - (value_dims.size() - first));
  for (size_t i = 0; i < final_dims.size(); ++i) {
    if (reshaped[i] != final_dims[i] && reshaped[i] != 1) return cannot();
  }
  return reshaped;
}

absl::Status LaunchSliceAssignment(ClientStream& stream, uint32_t element_size,
                                   const StridedSlicePlan& slice, const Dims& slice_target_dims,
                                   const Dims& slice_value_dims, BufferArg value,
                                   BufferArg scratch, BufferArg target) {
  StridedSlicePlan plan = slice;
  Dims target_dims = slice_target_dims, value_dims = slice_value_dims;
  if (element_size == 16) {
    // complex128: the copy kernels move at most 8 bytes an element, so each element becomes a
    // pair along a new last dimension, taken whole.
    element_size = 8;
    for (Dims* dims : {&target_dims, &value_dims, &plan.processing_dims, &plan.final_dims}) {
      dims->push_back(2);
    }
    plan.begin.push_back(0);
    plan.strides.push_back(1);
  }
  int64_t count = 1;
  for (int64_t d : plan.processing_dims) count *= d;
  if (count == 0) return absl::OkStatus();
  if (target_dims.size() > static_cast<size_t>(data_movement::kMaxDataMovementRank)) {
    return absl::UnimplementedError(
        absl::StrCat("tensors of rank ", target_dims.size(),
                     " are not supported on the virtual GPU (at most ",
                     data_movement::kMaxDataMovementRank, ")"));
  }
  BufferArg source = value;
  if (value_dims != plan.final_dims) {
    ParamBlock tile;
    ParamWriter(&tile).Put(element_size).PutArray<int64_t>(value_dims).PutArray<int64_t>(
        plan.final_dims);
    VGPU_RETURN_IF_ERROR(
        KernelLaunch(stream).Buffer(value).Buffer(scratch).Params(tile).Run(data_movement::kTile));
    source = scratch;
  }
  // The final and processing shapes differ only by axes of size 1: the same element order.
  ParamBlock scatter;
  ParamWriter(&scatter)
      .Put(element_size)
      .PutArray<int64_t>(target_dims)
      .PutArray<int64_t>(plan.begin)
      .PutArray<int64_t>(plan.strides)
      .PutArray<int64_t>(plan.processing_dims);
  return KernelLaunch(stream)
      .Buffer(source)
      .Buffer(target)
      .Params(scatter)
      .Run(data_movement::kStridedSliceAssign);
}

}  // namespace vgpu
