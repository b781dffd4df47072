// The parameter block of the data movement family's MirrorPad and MirrorPadGrad launches (the
// layout of protocol/kernels/data_movement.h), written in one place: by the op kernels
// (mirror_pad_ops.cc) and by the tests that feed it to the executors' reader. Header-only, on
// the protocol alone.
#ifndef VGPU_KERNELS_MIRROR_PAD_PARAMS_H_
#define VGPU_KERNELS_MIRROR_PAD_PARAMS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "plugin/protocol/kernels/data_movement.h"
#include "plugin/protocol/launch_params.h"

namespace vgpu {

// `first` (kMirrorPad: the element size; kMirrorPadGrad: the floating DType), the dims of x (of
// dx for the gradient), the pads before and after each dimension, and the mode.
inline ParamBlock MirrorPadParams(uint32_t first, absl::Span<const int64_t> dims,
                                  absl::Span<const int64_t> before,
                                  absl::Span<const int64_t> after,
                                  data_movement::MirrorPadMode mode) {
  ParamBlock params;
  ParamWriter(&params)
      .Put(first)
      .PutArray<int64_t>(dims)
      .PutArray<int64_t>(before)
      .PutArray<int64_t>(after)
      .Put(static_cast<uint32_t>(mode));
  return params;
}

}  // namespace vgpu

#endif  // VGPU_KERNELS_MIRROR_PAD_PARAMS_H_
