// The descriptor kinds of the virtual DNN/BLAS API and the settings each one carries, as they
// travel inside a launch (Command::descriptors in command.h). Settings are fixed-size plain
// structs, always value-initialised so that two settings compare equal byte for byte exactly
// when they are the same. Shapes are dense row-major; layouts are TensorFlow's (NHWC/NCHW, HWIO
// filters).
#ifndef VGPU_PROTOCOL_DESCRIPTORS_H_
#define VGPU_PROTOCOL_DESCRIPTORS_H_

#include <cstddef>
#include <cstdint>

#include "plugin/protocol/kernel_ids.h"

namespace vgpu {

enum class DescriptorKind : uint8_t {
  kTensor = 1,
  kFilter = 2,
  kConvolution = 3,
  kPooling = 4,
  kActivation = 5,
  kOpTensor = 6,
  kReduce = 7,
  kMatmul = 8,
  kRnn = 9,       // a recurrent layer stack (cudnnRNNDescriptor_t)
  kDropout = 10,  // dropout between RNN layers (cudnnDropoutDescriptor_t)
};
// Kinds are numbered 1..kNumDescriptorKinds; a new kind takes the next number (wire format).
inline constexpr int kNumDescriptorKinds = 10;
const char* DescriptorKindName(DescriptorKind kind);

inline constexpr int kMaxRank = 8;

enum class DataFormat : int32_t { kNHWC = 0, kNCHW = 1 };

struct TensorDescriptorSettings {
  DType dtype = DType::kFloat32;
  int32_t rank = 0;
  int64_t dims[kMaxRank] = {};
};

// A convolution filter in TensorFlow's layout: rank 4 [height, width, in_channels,
// out_channels] for 2-D convolutions, rank 5 [depth, height, width, in_channels, out_channels]
// for 3-D ones (depthwise: [height, width, in_channels, channel_multiplier]). For grouped
// convolutions in_channels is the input depth of one group.
struct FilterDescriptorSettings {
  DType dtype = DType::kFloat32;
  int32_t rank = 4;  // 4 or 5; dims beyond it are 0
  int64_t dims[5] = {};
};

// cudnnConvolutionDescriptor_t: the window of a 2-D or 3-D convolution. data_format says where
// the channels are: kNHWC is channels last (NHWC, NDHWC), kNCHW channels first (NCHW, NCDHW).
// The depth (planes) fields apply to 3-D convolutions only and keep their defaults otherwise.
struct ConvolutionDescriptorSettings {
  DataFormat data_format = DataFormat::kNHWC;
  int32_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int32_t stride_h = 1, stride_w = 1;
  int32_t dilation_h = 1, dilation_w = 1;
  int32_t depthwise = 0;  // 1: each input channel has its own filters (DepthwiseConv2dNative)
  int32_t spatial_dims = 2;             // 2 or 3 (cudnnSetConvolutionNdDescriptor's arrayLength)
  int32_t pad_front = 0, pad_back = 0;  // the depth dimension of a 3-D convolution
  int32_t stride_d = 1, dilation_d = 1;
  // cudnnSetConvolutionGroupCount: the input and output channels split into group_count
  // groups, output group g seeing input group g only (input depth = filter in_channels *
  // group_count).
  int32_t group_count = 1;
};

enum class PoolingMode : int32_t { kMax = 0, kAverage = 1 };

// Whether a NaN inside a max-pooling window is its maximum (cudnnNanPropagation_t).
enum class NanPropagation : int32_t { kNotPropagate = 0, kPropagate = 1 };

inline constexpr int kMaxPoolingSpatialDims = 3;

// A pooling window over the 2 or 3 spatial dimensions of a rank spatial_dims + 2 tensor
// (cudnnSetPoolingNdDescriptor). data_format kNHWC means channels last (NHWC, NDHWC), kNCHW
// channels first (NCHW, NCDHW). The per-dimension arrays list the spatial dimensions outermost
// first ([H, W] or [D, H, W]); entries past spatial_dims keep their defaults.
struct PoolingDescriptorSettings {
  PoolingMode mode = PoolingMode::kMax;
  DataFormat data_format = DataFormat::kNHWC;
  int32_t spatial_dims = 2;
  NanPropagation nan_propagation = NanPropagation::kNotPropagate;
  int32_t window[kMaxPoolingSpatialDims] = {1, 1, 1};
  int32_t stride[kMaxPoolingSpatialDims] = {1, 1, 1};
  int32_t pad_before[kMaxPoolingSpatialDims] = {};
  int32_t pad_after[kMaxPoolingSpatialDims] = {};
};

enum class ActivationMode : int32_t {
  kRelu = 0,
  kRelu6 = 1,
  kSigmoid = 2,
  kTanh = 3,
  kElu = 4,
  kSelu = 5,
  kSoftplus = 6,
  kSoftsign = 7,
  kLeakyRelu = 8,  // coef is the slope for negative inputs (alpha)
};

// cudnnSetActivationDescriptor's mode and coef: coef is the mode's parameter (the leaky relu's
// alpha); modes without a parameter leave it 0.
struct ActivationDescriptorSettings {
  ActivationMode mode = ActivationMode::kRelu;
  DType dtype = DType::kFloat32;
  double coef = 0;
};

// Element-wise operations of the op-tensor descriptor (values are part of the wire format).
enum class ElementwiseOp : int32_t {
  // binary
  kAdd = 1, kSub, kMul, kDiv, kDivNoNan, kMaximum, kMinimum, kPow, kSquaredDifference,
  kFloorDiv, kFloorMod, kEqual, kNotEqual, kGreater, kGreaterEqual, kLess, kLessEqual,
  kLogicalAnd, kLogicalOr, kRsqrtGrad, kSqrtGrad, kSigmoidGrad, kTanhGrad, kRelu6Grad,
  kAtan2, kXlogy, kXdivy, kXlog1py, kReciprocalGrad,
  // unary
  kNeg = 100, kAbs, kSqrt, kRsqrt, kSquare, kExp, kLog, kSign, kReciprocal, kLogicalNot,
  kFloor, kCeil, kRound,
  kErf, kErfc, kExpm1, kLog1p, kSin, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh,
  kAcosh, kAtanh,
  kIsFinite, kIsNan, kIsInf,  // floating x, bool y
  kSignBit,  // floating x, bool y: the sign bit (true for -0 and negative NaNs)
};

struct OpTensorDescriptorSettings {
  ElementwiseOp op = ElementwiseOp::kAdd;
  DType dtype = DType::kFloat32;
};

enum class ReduceOp : int32_t { kSum = 0, kMean = 1, kProd = 2, kMax = 3, kMin = 4, kAll = 5, kAny = 6 };

struct ReduceDescriptorSettings {
  ReduceOp op = ReduceOp::kSum;
  DType dtype = DType::kFloat32;
};

struct MatmulDescriptorSettings {
  int32_t transpose_a = 0;
  int32_t transpose_b = 0;
  DType dtype = DType::kFloat32;
  int32_t reserved = 0;
};

// Recurrent layers (the kRnn descriptor). RnnMode takes cudnnRNNMode_t's values.
enum class RnnMode : int32_t { kRelu = 0, kTanh = 1, kLstm = 2, kGru = 3 };
enum class RnnInputMode : int32_t { kLinear = 0, kSkip = 1 };
enum class RnnDirection : int32_t { kUnidirectional = 0, kBidirectional = 1 };
// Layout of the sequence tensors (input and output): [time, batch, features] or
// [batch, time, features]. State tensors are always [layers * directions, batch, features].
enum class RnnDataLayout : int32_t { kTimeMajor = 0, kBatchMajor = 1 };

// A stack of recurrent layers, as cudnnSetRNNDescriptor_v8 describes one. hidden_size is the
// width of the cell (TensorFlow's num_units); proj_size the width of h and of the outputs:
// hidden_size, or smaller for an LSTM with a recurrent projection (TensorFlow's num_proj).
struct RnnDescriptorSettings {
  RnnMode mode = RnnMode::kLstm;
  RnnInputMode input_mode = RnnInputMode::kLinear;
  RnnDirection direction = RnnDirection::kUnidirectional;
  RnnDataLayout data_layout = RnnDataLayout::kTimeMajor;
  DType dtype = DType::kFloat32;       // data, states and weights
  DType math_dtype = DType::kFloat32;  // arithmetic: float32 for the 16-bit types
  int32_t num_layers = 1;
  int32_t reserved = 0;
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  int64_t proj_size = 0;
};

// Dropout applied between stacked recurrent layers while training (cudnnDropoutDescriptor_t).
struct DropoutDescriptorSettings {
  float dropout = 0.0f;  // probability of dropping an element, in [0, 1)
  int32_t reserved = 0;
  uint64_t seed = 0;     // TensorFlow's (seed << 32) | seed2
};

// Maps a settings struct to its kind (DescriptorTraits<S>::kKind).
template <typename Settings>
struct DescriptorTraits;
#define VGPU_DESCRIPTOR_TRAITS(Settings, Kind) \
  template <>                                  \
  struct DescriptorTraits<Settings> {          \
    static constexpr DescriptorKind kKind = Kind; \
  }
VGPU_DESCRIPTOR_TRAITS(TensorDescriptorSettings, DescriptorKind::kTensor);
VGPU_DESCRIPTOR_TRAITS(FilterDescriptorSettings, DescriptorKind::kFilter);
VGPU_DESCRIPTOR_TRAITS(ConvolutionDescriptorSettings, DescriptorKind::kConvolution);
VGPU_DESCRIPTOR_TRAITS(PoolingDescriptorSettings, DescriptorKind::kPooling);
VGPU_DESCRIPTOR_TRAITS(ActivationDescriptorSettings, DescriptorKind::kActivation);
VGPU_DESCRIPTOR_TRAITS(OpTensorDescriptorSettings, DescriptorKind::kOpTensor);
VGPU_DESCRIPTOR_TRAITS(ReduceDescriptorSettings, DescriptorKind::kReduce);
VGPU_DESCRIPTOR_TRAITS(MatmulDescriptorSettings, DescriptorKind::kMatmul);
VGPU_DESCRIPTOR_TRAITS(RnnDescriptorSettings, DescriptorKind::kRnn);
VGPU_DESCRIPTOR_TRAITS(DropoutDescriptorSettings, DescriptorKind::kDropout);
#undef VGPU_DESCRIPTOR_TRAITS

// The largest settings struct: descriptor storage is sized for it.
inline constexpr size_t kMaxDescriptorSettingsSize = sizeof(TensorDescriptorSettings);
static_assert(sizeof(FilterDescriptorSettings) <= kMaxDescriptorSettingsSize);
static_assert(sizeof(ConvolutionDescriptorSettings) <= kMaxDescriptorSettingsSize);
static_assert(sizeof(PoolingDescriptorSettings) <= kMaxDescriptorSettingsSize);
static_assert(sizeof(RnnDescriptorSettings) <= kMaxDescriptorSettingsSize);
static_assert(sizeof(DropoutDescriptorSettings) <= kMaxDescriptorSettingsSize);

}  // namespace vgpu

#endif  // VGPU_PROTOCOL_DESCRIPTORS_H_
