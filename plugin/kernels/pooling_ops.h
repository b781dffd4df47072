// What the pooling family's op kernels share (pooling_ops.cc, pooling_argmax_ops.cc,
// pooling_3d_ops.cc): the window attributes of TensorFlow's pooling ops, their checks with
// TensorFlow's error classes and wording, the output geometry, the NaN propagation setting and
// the one launch path (a pooling descriptor plus x / y tensor descriptors).
#ifndef VGPU_KERNELS_POOLING_OPS_H_
#define VGPU_KERNELS_POOLING_OPS_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu {

// The window of a pooling op over 2 or 3 spatial dimensions. ksize and strides hold one value
// per tensor dimension in the op's data format (NHWC / NCHW / NDHWC / NCDHW).
struct PoolWindow {
  int spatial_dims = 2;
  DataFormat format = DataFormat::kNHWC;  // kNHWC: channels last; kNCHW: channels first
  std::vector<int64_t> ksize, strides;
  Padding padding = Padding::kValid;
  std::vector<int64_t> explicit_paddings;  // (before, after) per dimension; EXPLICIT only

  int rank() const { return spatial_dims + 2; }
  int ChannelDim() const { return format == DataFormat::kNCHW ? 1 : spatial_dims + 1; }
  int SpatialDim(int k) const { return (format == DataFormat::kNCHW ? 2 : 1) + k; }
};

// Reads data_format (channels last when the op has none; NHWC / NCHW for 2-D ops, NDHWC /
// NCDHW for 3-D ops), padding and, for EXPLICIT padding, explicit_paddings.
absl::StatusOr<PoolWindow> ReadPoolLayout(OpConstruction& construction, int spatial_dims);

// Reads the ksize and strides attributes into `window` (unchecked).
absl::Status ReadWindowAttributes(OpConstruction& construction, PoolWindow& window);

// ksize / strides given as host-memory int32 tensors (the V2 ops), read at Compute.
absl::Status ReadWindowInputs(const OpContext& context, int ksize_input, int strides_input,
                              PoolWindow& window);

// The checks of TensorFlow's pooling kernels, each with TensorFlow's class and wording; an op
// calls those its TensorFlow kernel makes, in the same order.
//   "Sliding window ksize field must specify N dimensions" and "Sliding window <stride_word>
//   field must specify N dimensions" (TensorFlow says "stride" or "strides" depending on the op).
absl::Status CheckWindowFieldSizes(const PoolWindow& window, const char* stride_word);
//   Every ksize value > 0, else InvalidArgument(message) (`append_value`: followed by the
//   offending value, as some of TensorFlow's kernels do).
absl::Status CheckKsizePositive(const PoolWindow& window, const char* message,
                                bool append_value);
//   Strides > 0 ("Stride must be > 0, but got ...").
absl::Status CheckStridesPositive(const PoolWindow& window);
//   Unimplemented "Pooling is not yet supported on the batch dimension."
absl::Status CheckNoBatchPooling(const PoolWindow& window);
//   2-D pooling across depth and across width/height at once: Unimplemented, as TensorFlow's
//   PoolParameters. A depth window of 1 pools spatially whatever the depth stride (TensorFlow
//   ignores it then); a depth window > 1 is refused by PlanPooling, which knows the depth.
absl::Status CheckNoDepthPooling2d(const PoolWindow& window);
//   3-D pooling across depth: Unimplemented(message).
absl::Status CheckNoDepthPooling3d(const PoolWindow& window, const char* message);
//   EXPLICIT padding: 2 values per dimension, non-negative, none in batch / depth, each smaller
//   than the window (TensorFlow's CheckValidPadding and CheckPaddingSize).
absl::Status CheckExplicitPadding(const PoolWindow& window);

// Whether max pooling propagates NaNs: TF_ENABLE_MAXPOOL_NANPROP read as TensorFlow's
// ReadBoolFromEnvVar does (unset: no; "1"/"true": yes; "0"/"false": no, case-insensitive;
// anything else: InvalidArgument). TensorFlow's 2-D GPU max pooling kernels read it once, at
// construction.
absl::StatusOr<NanPropagation> MaxPoolNanPropagationFromEnvironment();

// The geometry of one pooling call: the pooled output's shape and the descriptor settings.
struct PoolPlan {
  std::vector<int64_t> output_dims;
  PoolingDescriptorSettings settings;
};

// Plans pooling of an input of `input_dims` (rank must be window.rank(), else
// InvalidArgument(rank_message)); per spatial dimension the output size and padding of
// TensorFlow's GetWindowedOutputSize, with its errors.
absl::StatusOr<PoolPlan> PlanPooling(const PoolWindow& window, PoolingMode mode,
                                     NanPropagation nan_propagation,
                                     absl::Span<const int64_t> input_dims,
                                     const char* rank_message);

// Launches `kernel` with descriptors [pooling, x tensor (input_dims), y tensor (plan's output)]
// and `buffers` (protocol/kernels/pooling.h).
absl::Status LaunchPooling(OpContext& context, KernelId kernel, const PoolPlan& plan,
                           TF_DataType dtype, absl::Span<const int64_t> input_dims,
                           std::initializer_list<BufferArg> buffers);

// Allocates the pooled output (output 0: `x`'s dtype, `plan`'s shape) and, unless it is empty,
// launches the forward pooling of `x` (of `x_dims`).
absl::Status LaunchPoolingForward(OpContext& context, const PoolPlan& plan, const TF_Tensor* x,
                                  absl::Span<const int64_t> x_dims);

// How an average-pooling gradient's kernel words its checks of orig_input_shape (TensorFlow's
// AvgPoolGrad and AvgPool3DGrad kernels differ).
struct AvgPoolGradWording {
  // Its name in "<shape_name> must be 1-dimensional and <rank> elements".
  const char* shape_name;
  // The message for `shape`, which holds the negative `dimension`.
  std::string (*negative_dimension)(int64_t dimension, absl::Span<const int64_t> shape);
};

// The whole of an average-pooling gradient with `window`: inputs orig_input_shape (host
// integers, window.rank() of them) and grad, checked in TensorFlow's order; then the gradient
// (output 0: grad's dtype, orig_input_shape) and, unless it is empty, the backward kernel.
absl::Status ComputeAvgPoolingBackward(OpContext& context, const PoolWindow& window,
                                       const AvgPoolGradWording& wording);

// InvalidArgument "Expected <what> shape to be <expected>, but got <actual>" unless equal.
absl::Status ExpectShape(const char* what, absl::Span<const int64_t> expected,
                         absl::Span<const int64_t> actual);

// The inputs of a max-pooling gradient, orig_input, orig_output and grad (inputs 0-2), each of
// `rank` dimensions, else InvalidArgument as TensorFlow words it: "tensor_in must be
// 4-dimensional", then tensor_out, then `grad_name` (out_backprop; out_grad_backprop for the
// second-order gradient). Its fields bind in order: `const auto& [x, y, grad, x_dims] = in;`.
struct MaxPoolGradInputs {
  TensorPtr orig_input, orig_output, grad;
  std::vector<int64_t> orig_input_dims;
};
absl::StatusOr<MaxPoolGradInputs> ReadMaxPoolGradInputs(const OpContext& context, int rank,
                                                        const char* grad_name);

// The plan of a max-pooling gradient of `in` with `window` and `nan`, after TensorFlow's check
// that orig_output has the pooled shape ("Expected orig_output shape to be ...").
absl::StatusOr<PoolPlan> PlanMaxPoolGradient(const PoolWindow& window, NanPropagation nan,
                                             const MaxPoolGradInputs& in);

// MaxPoolWithArgmax, MaxPoolGradWithArgmax, MaxPoolGradGradWithArgmax (pooling_argmax_ops.cc).
void RegisterPoolingArgmaxOps(const char* device_type);
// MaxPool3D, AvgPool3D, MaxPool3DGrad, AvgPool3DGrad, MaxPool3DGradGrad (pooling_3d_ops.cc).
void RegisterPooling3dOps(const char* device_type);

}  // namespace vgpu

#endif  // VGPU_KERNELS_POOLING_OPS_H_
