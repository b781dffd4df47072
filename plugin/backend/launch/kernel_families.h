// The kernels of each family, id and name, written once for every executor: an executor's table
// registers a family with one KernelRegistry::AddFamily call naming its function for each kernel,
// in the order listed here (kernel_table.h), so that the names a launch error or a test reports
// are the same on every executor. Ids and layouts: plugin/protocol/kernels/<family>.h. (The
// training family's list is training_launch.h's kUpdateKernels.)
#ifndef VGPU_BACKEND_LAUNCH_KERNEL_FAMILIES_H_
#define VGPU_BACKEND_LAUNCH_KERNEL_FAMILIES_H_

#include "plugin/protocol/kernel_ids.h"
#include "plugin/protocol/kernels/activation.h"
#include "plugin/protocol/kernels/convolution.h"
#include "plugin/protocol/kernels/data_movement.h"
#include "plugin/protocol/kernels/elementwise.h"
#include "plugin/protocol/kernels/image_resize.h"
#include "plugin/protocol/kernels/image_transform.h"
#include "plugin/protocol/kernels/normalization.h"
#include "plugin/protocol/kernels/pooling.h"
#include "plugin/protocol/kernels/random.h"
#include "plugin/protocol/kernels/reduction.h"
#include "plugin/protocol/kernels/rnn.h"
#include "plugin/protocol/kernels/sparse.h"

namespace vgpu {

// One kernel of the protocol as every executor's kernel table names it.
struct KernelIdentity {
  KernelId id;
  const char* name;
};

namespace kernel_families {

inline constexpr KernelIdentity kActivation[] = {
    {activation::kForward, "activation_forward"},
    {activation::kBackward, "activation_backward"},
    {activation::kReluInt8, "relu_int8"},
};

inline constexpr KernelIdentity kElementwise[] = {
    {elementwise::kBinary, "elementwise_binary"},
    {elementwise::kUnary, "elementwise_unary"},
    {elementwise::kSelect, "elementwise_select"},
    {elementwise::kCast, "elementwise_cast"},
    {elementwise::kAddN, "elementwise_add_n"},
    {elementwise::kFill, "elementwise_fill"},
    {elementwise::kSetTensor, "elementwise_set_tensor"},
    {elementwise::kRange, "elementwise_range"},
};

// The convolution id range (protocol/kernels/convolution.h) holds four families.
inline constexpr KernelIdentity kConvolution[] = {
    {convolution::kForward, "convolution_forward"},
    {convolution::kBackwardInput, "convolution_backward_input"},
    {convolution::kBackwardFilter, "convolution_backward_filter"},
    {convolution::kForwardBiasActivation, "convolution_bias_activation_forward"},
};
inline constexpr KernelIdentity kMatmul[] = {
    {convolution::kMatmul, "matmul"},
    {convolution::kMatmulBiasActivation, "matmul_bias_activation"},
};
inline constexpr KernelIdentity kBias[] = {
    {convolution::kBiasAdd, "bias_add"},
    {convolution::kBiasAddGrad, "bias_add_grad"},
};
inline constexpr KernelIdentity kRearrange[] = {
    {convolution::kRearrange, "rearrange"},
};

inline constexpr KernelIdentity kPooling[] = {
    {pooling::kForward, "pooling_forward"},
    {pooling::kBackward, "pooling_backward"},
    {pooling::kForwardWithArgmax, "pooling_forward_with_argmax"},
    {pooling::kBackwardWithArgmax, "pooling_backward_with_argmax"},
    {pooling::kGradGradWithArgmax, "pooling_grad_grad_with_argmax"},
    {pooling::kGradGrad, "pooling_grad_grad"},
    {pooling::kBackwardThroughRelu, "pooling_backward_through_relu"},
    {pooling::kForwardWithWindowIndex, "pooling_forward_with_window_index"},
    {pooling::kBackwardFromWindowIndex, "pooling_backward_from_window_index"},
    {pooling::kBackwardFromWindowIndexThroughRelu,
     "pooling_backward_from_window_index_through_relu"},
};

// The reduction id range holds three families.
inline constexpr KernelIdentity kReduction[] = {
    {reduction::kReduce, "reduce"},
    {reduction::kArgReduce, "arg_reduce"},
};
inline constexpr KernelIdentity kSoftmax[] = {
    {reduction::kSoftmax, "softmax"},
    {reduction::kSoftmaxCrossEntropy, "softmax_cross_entropy"},
    {reduction::kSparseSoftmaxCrossEntropyHostLabels, "sparse_softmax_cross_entropy_host_labels"},
    {reduction::kSparseSoftmaxCrossEntropy, "sparse_softmax_cross_entropy"},
};
inline constexpr KernelIdentity kScanTopK[] = {
    {reduction::kScan, "scan"},
    {reduction::kTopK, "top_k"},
    {reduction::kInTopK, "in_top_k"},
};

// The data movement id range holds three families.
inline constexpr KernelIdentity kDataMovement[] = {
    {data_movement::kTranspose, "transpose"},
    {data_movement::kStridedSlice, "strided_slice"},
    {data_movement::kStridedSliceGrad, "strided_slice_grad"},
    {data_movement::kStridedSliceAssign, "strided_slice_assign"},
    {data_movement::kPad, "pad"},
    {data_movement::kTile, "tile"},
    {data_movement::kConcat, "concat"},
    {data_movement::kSplit, "split"},
};
inline constexpr KernelIdentity kReverse[] = {
    {data_movement::kReverse, "reverse"},
    {data_movement::kReverseSequence, "reverse_sequence"},
};
inline constexpr KernelIdentity kMirrorPad[] = {
    {data_movement::kMirrorPad, "mirror_pad"},
    {data_movement::kMirrorPadGrad, "mirror_pad_grad"},
};

inline constexpr KernelIdentity kRandom[] = {
    {random::kUniform, "random_uniform"},
    {random::kNormal, "random_normal"},
    {random::kTruncatedNormal, "random_truncated_normal"},
    {random::kUniformInt, "random_uniform_int"},
    {random::kUniformFullInt, "random_uniform_full_int"},
    {random::kKeyCounterFromSeed, "random_key_counter"},
};

// The weight of a kernel whose work its bytes do not bound (a matrix product, a convolution):
// a launch of it is never "small" (any buffer byte exceeds a bound divided by it).
inline constexpr uint64_t kUnboundedWork = ~uint64_t{0};

// How many element-wise bytes of work one byte of a launch of `kernel` stands for, for the
// rules that keep small launches where they are cheapest: the inline bound
// (SessionLimits::inline_launch_bytes, ClientSession::RunsInline) and the CPU executor's serial
// bound (CpuExecutor::SerialLaunchBytes).
//   - a random generator hashes a counter per element, some 30x an element-wise op's work per
//     byte (64 KiB of uniform floats: ~120 us against ~3 us for a multiply): 16;
//   - a matrix product or convolution: kUnboundedWork. It never runs inline: on the CPU
//     executor it runs on oneDNN's OpenMP team, and OpenMP keeps one team per calling thread,
//     so run inline TensorFlow's thread became the master of a second team competing with the
//     stream worker's for two cores (an mlp's two 40 KiB gradient products took 90-120 us each
//     inline against 13-16 us on the stream worker). Nor is it made serial by its size: its
//     own rule sizes its team by multiply-adds (OnednnThreadsFor).
inline uint64_t ByteWorkWeight(KernelId kernel) {
  for (const KernelIdentity& random_kernel : kRandom) {
    if (random_kernel.id == kernel) return 16;
  }
  for (const KernelIdentity& contraction : kMatmul) {
    if (contraction.id == kernel) return kUnboundedWork;
  }
  for (const KernelIdentity& contraction : kConvolution) {
    if (contraction.id == kernel) return kUnboundedWork;
  }
  return 1;
}

inline constexpr KernelIdentity kNormalization[] = {
    {normalization::kForwardTraining, "batch_norm_forward_training"},
    {normalization::kForwardInference, "batch_norm_forward_inference"},
    {normalization::kBackwardTraining, "batch_norm_backward_training"},
    {normalization::kBackwardInference, "batch_norm_backward_inference"},
};

inline constexpr KernelIdentity kRnn[] = {
    {rnn::kForward, "rnn_forward"},
    {rnn::kBackward, "rnn_backward"},
};

inline constexpr KernelIdentity kSparse[] = {
    {sparse::kGather, "gather"},
    {sparse::kGatherNd, "gather_nd"},
    {sparse::kScatter, "scatter"},
    {sparse::kScatterNd, "scatter_nd"},
    {sparse::kSegmentReduce, "segment_reduce"},
    {sparse::kCountTrue, "count_true"},
    {sparse::kWhere, "where"},
};

inline constexpr KernelIdentity kImageResize[] = {
    {image_resize::kResizeBilinear, "resize_bilinear"},
    {image_resize::kResizeBilinearGrad, "resize_bilinear_grad"},
    {image_resize::kResizeNearestNeighbor, "resize_nearest_neighbor"},
    {image_resize::kResizeNearestNeighborGrad, "resize_nearest_neighbor_grad"},
    {image_resize::kResizeBicubic, "resize_bicubic"},
    {image_resize::kResizeBicubicGrad, "resize_bicubic_grad"},
    {image_resize::kResizeArea, "resize_area"},
    {image_resize::kScaleAndTranslate, "scale_and_translate"},
    {image_resize::kScaleAndTranslateGrad, "scale_and_translate_grad"},
};

// The image transform id range holds two families.
inline constexpr KernelIdentity kImageTransform[] = {
    {image_transform::kProjectiveTransform, "image_projective_transform"},
    {image_transform::kCropAndResize, "crop_and_resize"},
    {image_transform::kCropAndResizeGradImage, "crop_and_resize_grad_image"},
    {image_transform::kCropAndResizeGradBoxes, "crop_and_resize_grad_boxes"},
    {image_transform::kNonMaxSuppression, "non_max_suppression"},
};
inline constexpr KernelIdentity kImageColor[] = {
    {image_transform::kAdjustContrast, "adjust_contrast"},
    {image_transform::kAdjustHsv, "adjust_hsv"},
    {image_transform::kRgbToHsv, "rgb_to_hsv"},
    {image_transform::kHsvToRgb, "hsv_to_rgb"},
};

}  // namespace kernel_families
}  // namespace vgpu

#endif  // VGPU_BACKEND_LAUNCH_KERNEL_FAMILIES_H_
