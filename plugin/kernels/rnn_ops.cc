// TensorFlow op kernels of the recurrent family on the virtual GPU: CudnnRNN, CudnnRNNV2,
// CudnnRNNV3 and their gradients CudnnRNNBackprop(V2, V3), CudnnRNNParamsSize, and the
// conversions CudnnRNNParamsToCanonical(V2) / CudnnRNNCanonicalToParams(V2).
//
// Written as TensorFlow's cuDNN kernels (tensorflow/core/kernels/cudnn_rnn_ops.cc) are: the
// attributes are parsed when the kernel is built; each call extracts and checks the model's
// shapes as TensorFlow does (same conditions, error classes and wording), allocates the
// outputs, then creates and sets an RNN descriptor, a dropout descriptor and the tensor
// descriptors, launches one kernel of protocol/kernels/rnn.h and destroys them (RAII).
// Semantics, the weight-space layout and the reserve space are documented in
// protocol/kernels/rnn.h. Differences from TensorFlow's GPU kernels, by necessity or choice:
//   * input_mode skip_input (and auto_select when it picks skip_input) is Unimplemented;
//   * inter-layer dropout uses the documented Philox mask: the n-th call (0-based) of a kernel
//     instance draws with counter n, so masks differ from call to call yet are reproducible;
//   * sizes TensorFlow leaves to cuDNN to reject (non-positive layers/units, a params buffer
//     of the wrong size, sequence lengths outside [0, max_seq_length], dropout outside [0, 1))
//     are InvalidArgument errors raised before anything is launched.
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/data_movement.h"
#include "plugin/protocol/kernels/rnn.h"

namespace vgpu {
namespace {

using Dims = std::vector<int64_t>;

constexpr std::initializer_list<TF_DataType> kRnnTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                          TF_DOUBLE};

enum class InputModeAttribute { kLinear, kSkip, kAutoSelect };

// The attributes every CudnnRNN op carries (CudnnRNNKernelCommon).
struct RnnAttributes {
  RnnMode mode = RnnMode::kLstm;
  InputModeAttribute input_mode = InputModeAttribute::kLinear;
  RnnDirection direction = RnnDirection::kUnidirectional;
  float dropout = 0.0f;
  int32_t seed = 0, seed2 = 0;
  int64_t num_proj = 0;  // 0 where the op has no num_proj attribute

  int64_t dir_count() const { return direction == RnnDirection::kBidirectional ? 2 : 1; }
  bool has_input_c() const { return mode == RnnMode::kLstm; }
  // TensorFlow's 64-bit dropout seed: (seed << 32) | seed2, seed2 sign-extended as in C++.
  uint64_t Seed64() const {
    return (static_cast<uint64_t>(static_cast<uint32_t>(seed)) << 32) |
           static_cast<uint64_t>(static_cast<int64_t>(seed2));
  }
};

absl::StatusOr<RnnAttributes> ReadRnnAttributes(OpConstruction& construction) {
  RnnAttributes a;
  VGPU_ASSIGN_OR_RETURN(a.dropout, construction.Float("dropout"));
  VGPU_ASSIGN_OR_RETURN(int64_t seed, construction.Int("seed"));
  VGPU_ASSIGN_OR_RETURN(int64_t seed2, construction.Int("seed2"));
  a.seed = static_cast<int32_t>(seed);
  a.seed2 = static_cast<int32_t>(seed2);
  VGPU_ASSIGN_OR_RETURN(a.mode, construction.StringChoice<RnnMode>(
                                    "rnn_mode",
                                    {{"rnn_relu", RnnMode::kRelu},
                                     {"rnn_tanh", RnnMode::kTanh},
                                     {"lstm", RnnMode::kLstm},
                                     {"gru", RnnMode::kGru}},
                                    "Invalid RNN mode: "));
  VGPU_ASSIGN_OR_RETURN(a.input_mode, construction.StringChoice<InputModeAttribute>(
                                          "input_mode",
                                          {{"linear_input", InputModeAttribute::kLinear},
                                           {"skip_input", InputModeAttribute::kSkip},
                                           {"auto_select", InputModeAttribute::kAutoSelect}},
                                          "Invalid RNN input mode: "));
  VGPU_ASSIGN_OR_RETURN(a.direction, construction.StringChoice<RnnDirection>(
                                         "direction",
                                         {{"unidirectional", RnnDirection::kUnidirectional},
                                          {"bidirectional", RnnDirection::kBidirectional}},
                                         "Invalid RNN direction mode: "));
  if (construction.Has("num_proj")) {
    VGPU_ASSIGN_OR_RETURN(a.num_proj, construction.Int("num_proj"));
  }
  return a;
}

// TensorFlow's ToRNNInputMode, restricted to what the virtual GPU implements.
absl::Status CheckInputMode(const RnnAttributes& a, int64_t num_units, int64_t input_size) {
  const bool skip = a.input_mode == InputModeAttribute::kSkip ||
                    (a.input_mode == InputModeAttribute::kAutoSelect && input_size == num_units);
  if (skip) {
    return absl::UnimplementedError(
        "CudnnRNN input_mode skip_input (or auto_select with input_size == num_units) is not "
        "supported on the virtual GPU; use linear_input");
  }
  return absl::OkStatus();
}

absl::Status CheckDropout(float dropout) {
  if (!(dropout >= 0.0f && dropout < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dropout must be in [0, 1), got ", dropout));
  }
  return absl::OkStatus();
}

// The sizes of a model and the geometry the protocol derives layouts from; fails unless they
// are positive and small enough.
absl::StatusOr<rnn::Geometry> MakeGeometry(const RnnAttributes& a, int64_t num_layers,
                                           int64_t h_units, int64_t c_units, int64_t input_size,
                                           int64_t max_seq_length, int64_t batch_size) {
  if (num_layers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_layers must be positive, got ", num_layers));
  }
  if (h_units < 1 || c_units < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_units must be positive, got ", h_units < 1 ? h_units : c_units));
  }
  if (input_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("input_size must not be negative, got ", input_size));
  }
  rnn::Geometry g;
  g.mode = a.mode;
  g.num_layers = num_layers;
  g.directions = a.dir_count();
  g.input_size = input_size;
  g.hidden_size = c_units;
  g.proj_size = h_units;
  g.max_seq_length = max_seq_length;
  g.batch_size = batch_size;
  if (!rnn::GeometryIsValid(g)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CudnnRNN model too large for the virtual GPU: ", num_layers, " layers, ", h_units,
        " units, ", c_units, " cell units, input size ", input_size, ", sequence length ",
        max_seq_length, ", batch ", batch_size));
  }
  return g;
}

// TensorFlow's CudnnRnnModelShapes, as ExtractForwardInput fills it.
struct RnnModelShapes {
  int64_t num_layers = 0, input_size = 0, num_units = 0, cell_num_units = 0, dir_count = 1;
  int64_t max_seq_length = 0, batch_size = 0;
  Dims input_shape, output_shape, hidden_state_shape, cell_state_shape;
};

// The inputs every CudnnRNN op reads: input, input_h, input_c, params (and sequence_lengths).
struct ForwardInputs {
  TensorPtr input, input_h, input_c, params;
};

absl::StatusOr<ForwardInputs> ReadForwardInputs(const OpContext& context) {
  ForwardInputs in;
  VGPU_ASSIGN_OR_RETURN(in.input, context.Input(0));
  VGPU_ASSIGN_OR_RETURN(in.input_h, context.Input(1));
  VGPU_ASSIGN_OR_RETURN(in.input_c, context.Input(2));
  VGPU_ASSIGN_OR_RETURN(in.params, context.Input(3));
  return in;
}

// TensorFlow's ExtractForwardInput: the model's shapes from input, input_h and input_c.
absl::StatusOr<RnnModelShapes> ExtractForwardInput(const RnnAttributes& a, bool time_major,
                                                   int64_t num_proj, const ForwardInputs& in) {
  RnnModelShapes m;
  const Dims input = ShapeOf(in.input.get());
  const Dims input_h = ShapeOf(in.input_h.get());
  if (input.size() != 3) {
    return absl::InvalidArgumentError("RNN input must be a 3-D vector.");
  }
  m.max_seq_length = time_major ? input[0] : input[1];
  m.batch_size = time_major ? input[1] : input[0];
  m.input_size = input[2];
  m.input_shape = input;
  m.dir_count = a.dir_count();
  if (input_h.size() != 3) {
    return absl::InvalidArgumentError("RNN input_h must be a 3-D vector.");
  }
  m.num_layers = (time_major ? input_h[0] : input_h[1]) / m.dir_count;
  m.num_units = input_h[2];
  const int64_t states = m.dir_count * m.num_layers;
  m.hidden_state_shape = time_major ? Dims{states, m.batch_size, m.num_units}
                                    : Dims{m.batch_size, states, m.num_units};
  if (input_h != m.hidden_state_shape) {
    return absl::InvalidArgumentError(absl::StrCat("Invalid input_h shape: ",
                                                   ShapeString(input_h), " ",
                                                   ShapeString(m.hidden_state_shape)));
  }
  if (a.has_input_c()) {
    const Dims input_c = ShapeOf(in.input_c.get());
    if (num_proj == 0) {
      if (input_h != input_c) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input_h and input_c must have the same shape w/o projection: ",
            ShapeString(input_h), " ", ShapeString(input_c)));
      }
    } else if (input_c.size() != 3 || input_h[2] > input_c[2] || num_proj != input_h[2] ||
               input_h[0] != input_c[0] || input_h[1] != input_c[1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Invalid input_h and input_c w/ projection size: ", num_proj, " ",
          ShapeString(input_h), " ", ShapeString(input_c)));
    }
    m.cell_num_units = input_c[2];
    m.cell_state_shape = time_major ? Dims{states, m.batch_size, m.cell_num_units}
                                    : Dims{m.batch_size, states, m.cell_num_units};
  } else {
    m.cell_state_shape = m.hidden_state_shape;
    m.cell_num_units = 0;
  }
  const int64_t out = m.dir_count * m.num_units;
  m.output_shape = time_major ? Dims{m.max_seq_length, m.batch_size, out}
                              : Dims{m.batch_size, m.max_seq_length, out};
  return m;
}

// Everything one CudnnRNN call (forward or backward) launches with.
struct RnnCall {
  RnnModelShapes shapes;
  rnn::Geometry geometry;
  RnnDescriptorSettings rnn;
  DropoutDescriptorSettings dropout;
  TF_DataType dtype = TF_FLOAT;
  std::vector<int32_t> seq_lengths;  // empty: every sequence is max_seq_length long
  int64_t params_size = 0;

  int64_t math_bytes() const { return dtype == TF_DOUBLE ? 8 : 4; }
  // The reserve_space tensor's element count while training.
  int64_t ReserveElements() const {
    const int64_t bytes = rnn::ReserveBytes(geometry, math_bytes());
    const int64_t size = TF_DataTypeSize(dtype);
    return (bytes + size - 1) / size;
  }
};

// Checks a call's inputs as TensorFlow's kernel does, and the sizes TensorFlow leaves to cuDNN,
// and prepares the descriptors. `sequence_lengths_index` < 0: the op has none.
absl::StatusOr<RnnCall> PrepareCall(const OpContext& context, const RnnAttributes& a,
                                    bool time_major, int sequence_lengths_index,
                                    const ForwardInputs& in, bool training) {
  RnnCall call;
  const int64_t num_proj = a.has_input_c() ? a.num_proj : 0;
  if (num_proj < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_proj must not be negative, got ", num_proj));
  }
  VGPU_ASSIGN_OR_RETURN(call.shapes, ExtractForwardInput(a, time_major, num_proj, in));
  const RnnModelShapes& m = call.shapes;
  VGPU_RETURN_IF_ERROR(CheckInputMode(a, m.num_units, m.input_size));
  VGPU_RETURN_IF_ERROR(CheckDropout(a.dropout));
  const int64_t c_units = a.has_input_c() ? m.cell_num_units : m.num_units;
  VGPU_ASSIGN_OR_RETURN(call.geometry,
                        MakeGeometry(a, m.num_layers, m.num_units, c_units, m.input_size,
                                     m.max_seq_length, m.batch_size));
  call.geometry.dropout_masks = training && a.dropout > 0.0f && m.num_layers > 1;
  call.dtype = TF_TensorType(in.input.get());
  call.params_size = rnn::ParamsSize(call.geometry);
  const Dims params_shape = ShapeOf(in.params.get());
  if (NumElements(params_shape) != call.params_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Invalid params shape: ", ShapeString(params_shape), ": the model needs ",
        call.params_size, " parameters (CudnnRNNParamsSize)"));
  }
  if (sequence_lengths_index >= 0) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr lengths_tensor, context.Input(sequence_lengths_index));
    const Dims lengths_shape = ShapeOf(lengths_tensor.get());
    if (lengths_shape != Dims{m.batch_size}) {
      return absl::InvalidArgumentError(
          absl::StrCat("Invalid sequence_lengths shape: ", ShapeString(lengths_shape),
                       ", expected [", m.batch_size, "]"));
    }
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> lengths,
                          context.HostIntegers(sequence_lengths_index));
    call.seq_lengths.reserve(lengths.size());
    for (size_t i = 0; i < lengths.size(); ++i) {
      if (lengths[i] < 0 || lengths[i] > m.max_seq_length) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequence_lengths[", i, "] = ", lengths[i], " is not in [0, ",
                         m.max_seq_length, "]"));
      }
      call.seq_lengths.push_back(static_cast<int32_t>(lengths[i]));
    }
  }
  RnnDescriptorSettings& r = call.rnn;
  r.mode = a.mode;
  r.input_mode = RnnInputMode::kLinear;
  r.direction = a.direction;
  r.data_layout = time_major ? RnnDataLayout::kTimeMajor : RnnDataLayout::kBatchMajor;
  VGPU_ASSIGN_OR_RETURN(r.dtype, DTypeOf(call.dtype));
  r.math_dtype = call.dtype == TF_DOUBLE ? DType::kFloat64 : DType::kFloat32;
  r.num_layers = static_cast<int32_t>(m.num_layers);
  r.input_size = m.input_size;
  r.hidden_size = call.geometry.hidden_size;
  r.proj_size = call.geometry.proj_size;
  call.dropout.dropout = a.dropout;
  call.dropout.seed = a.Seed64();
  return call;
}

// Adds the call's descriptors [rnn, dropout, x, y, h, c, w] to `launch`. The state
// descriptors are cuDNN's [layers * directions, batch, units], whatever the data layout.
KernelLaunch& DescribeCall(KernelLaunch& launch, const RnnCall& call) {
  const rnn::Geometry& g = call.geometry;
  const int64_t states = g.pseudo_layers();
  const int64_t c_width = g.mode == RnnMode::kLstm ? g.hidden_size : g.proj_size;
  return launch.Describe(call.rnn)
      .Describe(call.dropout)
      .DescribeTensor(call.dtype, call.shapes.input_shape)
      .DescribeTensor(call.dtype, call.shapes.output_shape)
      .DescribeTensor(call.dtype, {states, g.batch_size, g.proj_size})
      .DescribeTensor(call.dtype, {states, g.batch_size, c_width})
      .DescribeTensor(call.dtype, {call.params_size});
}

// DescribeCall, then the forward inputs' buffers [x, hx, cx, w]: how the forward and the
// backward launch start.
KernelLaunch& DescribeCallAndInputs(KernelLaunch& launch, const RnnCall& call,
                                    const ForwardInputs& in) {
  return DescribeCall(launch, call)
      .Buffer(in.input.get())
      .Buffer(in.input_h.get())
      .Buffer(in.input_c.get())
      .Buffer(in.params.get());
}

// What the forward and backward ops of one version share: the RNN attributes and V3's
// time_major, read when TensorFlow builds the kernel, and the call their forward inputs
// (input, input_h, input_c, params, V3's sequence_lengths) describe.
template <int kVersion>
class CudnnRnnOpBase {
 protected:
  absl::Status ReadVersionAttributes(OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(attributes_, ReadRnnAttributes(construction));
    if constexpr (kVersion == 3) {
      VGPU_ASSIGN_OR_RETURN(time_major_, construction.Bool("time_major"));
    }
    return absl::OkStatus();
  }

  // The call of `in` (ReadForwardInputs), with the reserve space of training when `training`.
  absl::StatusOr<RnnCall> PrepareVersionCall(const OpContext& context, const ForwardInputs& in,
                                             bool training) const {
    return PrepareCall(context, attributes_, time_major_, kVersion == 3 ? 4 : -1, in, training);
  }

  // The shape of output_c / input_c_backprop: the cell state's for lstm, else empty.
  Dims CellStateShape(const RnnModelShapes& m) const {
    return attributes_.has_input_c() ? m.cell_state_shape : Dims{};
  }

  RnnAttributes attributes_;
  bool time_major_ = true;
};

// ---------------------------------------------------------------------------------------------
// CudnnRNN (kVersion 1), CudnnRNNV2 (2), CudnnRNNV3 (3).

template <int kVersion>
class CudnnRnnForwardOp : public CudnnRnnOpBase<kVersion> {
 public:
  static absl::StatusOr<std::unique_ptr<CudnnRnnForwardOp>> Create(OpConstruction& construction) {
    auto op = std::unique_ptr<CudnnRnnForwardOp>(new CudnnRnnForwardOp());
    VGPU_RETURN_IF_ERROR(op->ReadVersionAttributes(construction));
    VGPU_ASSIGN_OR_RETURN(op->is_training_, construction.Bool("is_training"));
    return op;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(ForwardInputs in, ReadForwardInputs(context));
    VGPU_ASSIGN_OR_RETURN(RnnCall call, this->PrepareVersionCall(context, in, is_training_));
    const RnnModelShapes& m = call.shapes;
    const TF_DataType dtype = call.dtype;
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.AllocateOutput(0, dtype, m.output_shape));
    VGPU_ASSIGN_OR_RETURN(TensorPtr output_h,
                          context.AllocateOutput(1, dtype, m.hidden_state_shape));
    VGPU_ASSIGN_OR_RETURN(TensorPtr output_c,
                          context.AllocateOutput(2, dtype, this->CellStateShape(m)));
    VGPU_ASSIGN_OR_RETURN(
        TensorPtr reserve,
        context.AllocateOutput(3, dtype,
                               is_training_ ? Dims{call.ReserveElements()} : Dims{}));
    if constexpr (kVersion >= 2) {
      // TensorFlow's host_reserved: V2 while training holds the algorithm (id, tensor ops);
      // the virtual GPU has one algorithm and reports cuDNN's "default" (-1, 0).
      const bool algorithm = kVersion == 2 && is_training_;
      VGPU_ASSIGN_OR_RETURN(TensorPtr host_reserved,
                            context.AllocateOutput(4, TF_INT8, algorithm ? Dims{2} : Dims{}));
      auto* bytes = static_cast<int8_t*>(TF_TensorData(host_reserved.get()));
      if (algorithm) {
        bytes[0] = -1;
        bytes[1] = 0;
      } else {
        bytes[0] = 0;
      }
    }
    KernelLaunch launch(context);
    DescribeCallAndInputs(launch, call, in)
        .Buffer(output.get())
        .Buffer(output_h.get())
        .Buffer(output_c.get());
    if (is_training_) launch.Buffer(reserve.get());
    const uint64_t dropout_call = calls_.fetch_add(1, std::memory_order_relaxed);
    return launch.Param<uint32_t>(is_training_ ? 1u : 0u)
        .Param<uint64_t>(dropout_call)
        .ParamArray<int32_t>(call.seq_lengths)
        .Run(rnn::kForward);
  }

 private:
  CudnnRnnForwardOp() = default;
  bool is_training_ = true;
  std::atomic<uint64_t> calls_{0};  // the dropout mask's call counter
};

// ---------------------------------------------------------------------------------------------
// CudnnRNNBackprop (kVersion 1), CudnnRNNBackpropV2 (2), CudnnRNNBackpropV3 (3).

template <int kVersion>
class CudnnRnnBackwardOp : public CudnnRnnOpBase<kVersion> {
 public:
  static absl::StatusOr<std::unique_ptr<CudnnRnnBackwardOp>> Create(
      OpConstruction& construction) {
    auto op = std::unique_ptr<CudnnRnnBackwardOp>(new CudnnRnnBackwardOp());
    VGPU_RETURN_IF_ERROR(op->ReadVersionAttributes(construction));
    return op;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(ForwardInputs in, ReadForwardInputs(context));
    VGPU_ASSIGN_OR_RETURN(RnnCall call,
                          this->PrepareVersionCall(context, in, /*training=*/true));
    const RnnModelShapes& m = call.shapes;
    const int first = kVersion == 3 ? 5 : 4;  // index of "output"
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.Input(first));
    VGPU_ASSIGN_OR_RETURN(TensorPtr output_h, context.Input(first + 1));
    VGPU_ASSIGN_OR_RETURN(TensorPtr output_c, context.Input(first + 2));
    VGPU_ASSIGN_OR_RETURN(TensorPtr output_backprop, context.Input(first + 3));
    VGPU_ASSIGN_OR_RETURN(TensorPtr output_h_backprop, context.Input(first + 4));
    VGPU_ASSIGN_OR_RETURN(TensorPtr output_c_backprop, context.Input(first + 5));
    VGPU_ASSIGN_OR_RETURN(TensorPtr reserve, context.Input(first + 6));
    // TensorFlow's ExtractBackwardInputs, in its order.
    VGPU_RETURN_IF_ERROR(ExpectShape("output", output.get(), m.output_shape));
    VGPU_RETURN_IF_ERROR(ExpectShape("output_h", output_h.get(), m.hidden_state_shape));
    VGPU_RETURN_IF_ERROR(ExpectShape("output_backprop", output_backprop.get(), m.output_shape));
    VGPU_RETURN_IF_ERROR(
        ExpectShape("output_h_backprop", output_h_backprop.get(), m.hidden_state_shape));
    if (this->attributes_.has_input_c()) {
      VGPU_RETURN_IF_ERROR(ExpectShape("output_c", output_c.get(), m.cell_state_shape));
      VGPU_RETURN_IF_ERROR(
          ExpectShape("output_c_backprop", output_c_backprop.get(), m.cell_state_shape));
    }
    const Dims reserve_shape = ShapeOf(reserve.get());
    if (reserve_shape != Dims{call.ReserveElements()}) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Invalid reserve_space shape: ", ShapeString(reserve_shape), ", expected [",
          call.ReserveElements(),
          "]: it must come from the forward op run with is_training=true and the same "
          "configuration"));
    }
    const TF_DataType dtype = call.dtype;
    VGPU_ASSIGN_OR_RETURN(TensorPtr input_backprop,
                          context.AllocateOutput(0, dtype, m.input_shape));
    VGPU_ASSIGN_OR_RETURN(TensorPtr input_h_backprop,
                          context.AllocateOutput(1, dtype, m.hidden_state_shape));
    VGPU_ASSIGN_OR_RETURN(TensorPtr input_c_backprop,
                          context.AllocateOutput(2, dtype, this->CellStateShape(m)));
    VGPU_ASSIGN_OR_RETURN(TensorPtr params_backprop,
                          context.AllocateOutput(3, dtype, ShapeOf(in.params.get())));
    KernelLaunch launch(context);
    return DescribeCallAndInputs(launch, call, in)
        .Buffer(output_backprop.get())
        .Buffer(output_h_backprop.get())
        .Buffer(output_c_backprop.get())
        .Buffer(reserve.get())
        .Buffer(input_backprop.get())
        .Buffer(input_h_backprop.get())
        .Buffer(input_c_backprop.get())
        .Buffer(params_backprop.get())
        .ParamArray<int32_t>(call.seq_lengths)
        .Run(rnn::kBackward);
  }

 private:
  CudnnRnnBackwardOp() = default;

  static absl::Status ExpectShape(const char* name, const TF_Tensor* tensor,
                                  const Dims& expected) {
    const Dims shape = ShapeOf(tensor);
    if (shape == expected) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("Invalid ", name, " shape: ",
                                                   ShapeString(shape), " ",
                                                   ShapeString(expected)));
  }
};

// ---------------------------------------------------------------------------------------------
// CudnnRNNParamsSize and the canonical conversions. Their sizes come from host scalars.

struct ScalarSizes {
  int64_t num_layers = 0, num_units = 0, input_size = 0;
};

absl::StatusOr<ScalarSizes> ReadScalarSizes(const OpContext& context) {
  ScalarSizes sizes;
  const char* names[3] = {"num_layers", "num_units", "input_size"};
  int64_t* values[3] = {&sizes.num_layers, &sizes.num_units, &sizes.input_size};
  for (int i = 0; i < 3; ++i) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr tensor, context.Input(i));
    if (TF_NumDims(tensor.get()) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(names[i], " is not a scalar"));
    }
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> value, context.HostIntegers(i));
    *values[i] = value[0];
  }
  return sizes;
}

// The geometry ExtractCudnnRNNParamsInfo describes: h units num_proj (or num_units), cell
// units num_units.
absl::StatusOr<rnn::Geometry> ParamsGeometry(const RnnAttributes& a, const ScalarSizes& s) {
  if (a.num_proj < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_proj must not be negative, got ", a.num_proj));
  }
  if (a.num_proj != 0 && a.mode != RnnMode::kLstm) {
    return absl::UnimplementedError("num_proj (a recurrent projection) requires rnn_mode lstm");
  }
  if (a.num_proj > s.num_units) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_proj (", a.num_proj, ") must not exceed num_units (", s.num_units, ")"));
  }
  const int64_t h_units = a.num_proj == 0 ? s.num_units : a.num_proj;
  VGPU_RETURN_IF_ERROR(CheckInputMode(a, h_units, s.input_size));
  return MakeGeometry(a, s.num_layers, h_units, s.num_units, s.input_size, 0, 0);
}

template <typename Index>
class CudnnRnnParamsSizeOp
    : public WithAttributes<CudnnRnnParamsSizeOp<Index>, RnnAttributes, ReadRnnAttributes> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(ScalarSizes sizes, ReadScalarSizes(context));
    VGPU_ASSIGN_OR_RETURN(rnn::Geometry g, ParamsGeometry(this->attributes_, sizes));
    const int64_t params_size = rnn::ParamsSize(g);
    if constexpr (sizeof(Index) == 4) {
      if (params_size > INT32_MAX) {
        return absl::InvalidArgumentError(
            absl::StrCat("params_size ", params_size, " does not fit int32"));
      }
    }
    constexpr TF_DataType kType = sizeof(Index) == 4 ? TF_INT32 : TF_INT64;
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.AllocateOutput(0, kType, {1}));
    *static_cast<Index*>(TF_TensorData(output.get())) = static_cast<Index>(params_size);
    return absl::OkStatus();
  }
};

// One canonical weight or bias: its offset in the weight space and its canonical shape.
struct CanonicalPiece {
  int64_t offset = 0;
  Dims shape;
};

// The canonical weights (per pseudo-layer: input matrices per gate, recurrent matrices per
// gate, the projection) and biases (bW per gate, bR per gate), in weight-space order.
void CanonicalPieces(const rnn::Geometry& g, std::vector<CanonicalPiece>* weights,
                     std::vector<CanonicalPiece>* biases) {
  const int64_t gates = g.gates(), c = g.hidden_size, h = g.proj_size;
  for (int64_t p = 0; p < g.pseudo_layers(); ++p) {
    const rnn::PseudoLayerParams params = rnn::ParamsOf(g, p);
    for (int64_t k = 0; k < gates; ++k) {
      weights->push_back({params.input_weights + k * c * params.input_size,
                          {c, params.input_size}});
    }
    for (int64_t k = 0; k < gates; ++k) {
      weights->push_back({params.recurrent_weights + k * c * h, {c, h}});
    }
    if (params.projection >= 0) weights->push_back({params.projection, {h, c}});
    for (int64_t k = 0; k < 2 * gates; ++k) {
      biases->push_back({params.input_bias + k * c, {c}});
    }
  }
}

// TensorFlow's checks of the number of canonical tensors (CudnnRNNParamsToCanonical).
absl::Status CheckCanonicalCounts(const rnn::Geometry& g, bool projection,
                                  int64_t num_params_weights, int64_t num_params_biases,
                                  size_t weight_regions, size_t bias_regions) {
  const int64_t pseudo_layers = g.pseudo_layers();
  if (num_params_weights % pseudo_layers != 0) {
    return absl::InvalidArgumentError(
        "Number of params (weights) is not a multipleof num_layers * num_dirs.");
  }
  if (num_params_biases % pseudo_layers != 0) {
    return absl::InvalidArgumentError(
        "Number of params (biases) is not a multipleof num_layers * num_dirs.");
  }
  const int64_t per_layer = num_params_weights / pseudo_layers;
  if (!projection && per_layer % 2 != 0) {
    return absl::InvalidArgumentError(
        "Number of params (weights) per layer is notan even number with no projection.");
  }
  if (projection && per_layer % 2 == 0) {
    return absl::InvalidArgumentError(
        "Number of params (weights) per layer is notan odl number with projection.");
  }
  if (num_params_weights != static_cast<int64_t>(weight_regions)) {
    return absl::InvalidArgumentError(absl::StrCat("C Number of params mismatch. Expected ",
                                                   num_params_weights, ", got ",
                                                   weight_regions));
  }
  if (num_params_biases != static_cast<int64_t>(bias_regions)) {
    return absl::InvalidArgumentError(absl::StrCat("A Number of params mismatch. Expected ",
                                                   num_params_biases, ", got ", bias_regions));
  }
  return absl::OkStatus();
}

// The number of weight and bias tensors of the V1 (num_params) or V2 (num_params_weights,
// num_params_biases) canonical ops.
absl::Status ReadCanonicalCounts(OpConstruction& construction, int64_t* weights,
                                 int64_t* biases) {
  if (construction.Has("num_params")) {
    VGPU_ASSIGN_OR_RETURN(*weights, construction.Int("num_params"));
    *biases = *weights;
    return absl::OkStatus();
  }
  VGPU_ASSIGN_OR_RETURN(*weights, construction.Int("num_params_weights"));
  VGPU_ASSIGN_OR_RETURN(*biases, construction.Int("num_params_biases"));
  return absl::OkStatus();
}

// Launches data_movement's kSplit (or kConcat) of the weight space into (from) the pieces'
// tensors, skipping empty ones: the weight space is exactly their concatenation.
absl::Status LaunchCanonicalCopy(const OpContext& context, KernelId kernel, TF_DataType dtype,
                                 const TF_Tensor* params,
                                 const std::vector<const TF_Tensor*>& pieces) {
  std::vector<int64_t> inner;
  std::vector<BufferArg> buffers;
  if (kernel == data_movement::kSplit) buffers.push_back(BufferOf(params));
  for (const TF_Tensor* piece : pieces) {
    const int64_t elements = TF_TensorElementCount(piece);
    if (elements == 0) continue;
    inner.push_back(elements);
    buffers.push_back(BufferOf(piece));
  }
  if (kernel == data_movement::kConcat) buffers.push_back(BufferOf(params));
  if (inner.empty()) return absl::OkStatus();
  return KernelLaunch(context)
      .Buffers(buffers)
      .Param<uint32_t>(static_cast<uint32_t>(TF_DataTypeSize(dtype)))
      .Param<int64_t>(1)
      .ParamArray<int64_t>(inner)
      .Run(kernel);
}

// The attributes of the conversions between the weight space and the canonical tensors: the
// RNN's, and the numbers of canonical weights and biases.
struct CanonicalAttributes {
  RnnAttributes rnn;
  int64_t num_params_weights = 0, num_params_biases = 0;
};

absl::StatusOr<CanonicalAttributes> ReadCanonicalAttributes(OpConstruction& construction) {
  CanonicalAttributes a;
  VGPU_ASSIGN_OR_RETURN(a.rnn, ReadRnnAttributes(construction));
  VGPU_RETURN_IF_ERROR(
      ReadCanonicalCounts(construction, &a.num_params_weights, &a.num_params_biases));
  return a;
}

// The base of the conversions' kernel classes K.
template <typename K>
class CanonicalConversionKernel
    : public WithAttributes<K, CanonicalAttributes, ReadCanonicalAttributes> {
 protected:
  // A model's geometry (from the sizes in host-memory inputs 0 to 2) and its canonical weights
  // and biases, in weight-space order.
  struct Model {
    rnn::Geometry g;
    std::vector<CanonicalPiece> weights, biases;
  };

  absl::StatusOr<Model> ReadModel(OpContext& context) const {
    Model model;
    VGPU_ASSIGN_OR_RETURN(ScalarSizes sizes, ReadScalarSizes(context));
    VGPU_ASSIGN_OR_RETURN(model.g, ParamsGeometry(this->attributes_.rnn, sizes));
    CanonicalPieces(model.g, &model.weights, &model.biases);
    return model;
  }
};

class CudnnRnnParamsToCanonicalOp
    : public CanonicalConversionKernel<CudnnRnnParamsToCanonicalOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(const Model model, ReadModel(context));
    const auto& [g, weights, biases] = model;
    VGPU_ASSIGN_OR_RETURN(TensorPtr params, context.Input(3));
    VGPU_RETURN_IF_ERROR(CheckCanonicalCounts(g, attributes_.rnn.num_proj != 0,
                                              attributes_.num_params_weights,
                                              attributes_.num_params_biases, weights.size(),
                                              biases.size()));
    const int64_t params_size = rnn::ParamsSize(g);
    if (TF_TensorElementCount(params.get()) != params_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Invalid params shape: ", ShapeString(ShapeOf(params.get())), ": the model needs ",
          params_size, " parameters (CudnnRNNParamsSize)"));
    }
    const TF_DataType dtype = TF_TensorType(params.get());
    std::vector<TensorPtr> outputs;
    std::vector<const TF_Tensor*> pieces;
    int index = 0;
    for (const std::vector<CanonicalPiece>* list : {&weights, &biases}) {
      for (const CanonicalPiece& piece : *list) {
        VGPU_ASSIGN_OR_RETURN(TensorPtr out, context.AllocateOutput(index++, dtype, piece.shape));
        pieces.push_back(out.get());
        outputs.push_back(std::move(out));
      }
    }
    return LaunchCanonicalCopy(context, data_movement::kSplit, dtype, params.get(), pieces);
  }
};

class CudnnRnnCanonicalToParamsOp
    : public CanonicalConversionKernel<CudnnRnnCanonicalToParamsOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(const Model model, ReadModel(context));
    const auto& [g, weights, biases] = model;
    // TensorFlow CHECK-fails (aborts) here; the virtual GPU reports the mismatch.
    const int64_t num_params_weights = attributes_.num_params_weights;
    const int64_t num_params_biases = attributes_.num_params_biases;
    if (num_params_weights != static_cast<int64_t>(weights.size()) ||
        num_params_biases != static_cast<int64_t>(biases.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Number of params mismatch. Expected ", weights.size(), " weights and ",
          biases.size(), " biases, got ", num_params_weights, " and ", num_params_biases));
    }
    std::vector<TensorPtr> inputs;
    std::vector<const TF_Tensor*> pieces;
    int index = 3;
    for (const std::vector<CanonicalPiece>* list : {&weights, &biases}) {
      for (const CanonicalPiece& piece : *list) {
        VGPU_ASSIGN_OR_RETURN(TensorPtr in, context.Input(index++));
        const int64_t expected = NumElements(piece.shape);
        if (TF_TensorElementCount(in.get()) != expected) {
          return absl::InvalidArgumentError(
              absl::StrCat("Params size mismatch. Expected ", expected, ", got ",
                           TF_TensorElementCount(in.get())));
        }
        pieces.push_back(in.get());
        inputs.push_back(std::move(in));
      }
    }
    const TF_DataType dtype = TF_TensorType(inputs.front().get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr params,
                          context.AllocateOutput(0, dtype, {rnn::ParamsSize(g)}));
    return LaunchCanonicalCopy(context, data_movement::kConcat, dtype, params.get(), pieces);
  }
};

constexpr char kRnnNotes[] =
    "cuDNN semantics (rnn_relu, rnn_tanh, lstm, gru; uni/bidirectional; layers from input_h). "
    "params: all weights then all biases, pseudo-layers in order (layer 0 fw, layer 0 bw, "
    "layer 1 fw, ...), each [units, input] row-major, gates lstm i,f,c,o / gru r,z,h "
    "(protocol/kernels/rnn.h). Batch-major states are read and written in cuDNN's "
    "[layers*dirs, batch, units] order, as TensorFlow's GPU kernel does. float16/bfloat16 "
    "compute in float32. input_mode skip_input: Unimplemented. Dropout between layers while "
    "training: a Philox mask from (seed, seed2) and the kernel's call count.";

}  // namespace

void RegisterRnnOps(const char* device_type) {
  RegisterKernelForTypes<CudnnRnnForwardOp<1>>("CudnnRNN", device_type, "T", kRnnTypes);
  RegisterKernelForTypes<CudnnRnnForwardOp<2>>("CudnnRNNV2", device_type, "T", kRnnTypes,
                                               {"host_reserved"});
  RegisterKernelForTypes<CudnnRnnForwardOp<3>>("CudnnRNNV3", device_type, "T", kRnnTypes,
                                               {"sequence_lengths", "host_reserved"});
  RegisterKernelForTypes<CudnnRnnBackwardOp<1>>("CudnnRNNBackprop", device_type, "T",
                                                kRnnTypes);
  RegisterKernelForTypes<CudnnRnnBackwardOp<2>>("CudnnRNNBackpropV2", device_type, "T",
                                                kRnnTypes, {"host_reserved"});
  RegisterKernelForTypes<CudnnRnnBackwardOp<3>>("CudnnRNNBackpropV3", device_type, "T",
                                                kRnnTypes, {"sequence_lengths", "host_reserved"});
  const std::initializer_list<const char*> sizes = {"num_layers", "num_units", "input_size"};
  for (TF_DataType dtype : kRnnTypes) {
    RegisterKernel<CudnnRnnParamsSizeOp<int32_t>>("CudnnRNNParamsSize", device_type,
                                                  {{"T", dtype}, {"S", TF_INT32}},
                                                  {"num_layers", "num_units", "input_size",
                                                   "params_size"});
    RegisterKernel<CudnnRnnParamsSizeOp<int64_t>>("CudnnRNNParamsSize", device_type,
                                                  {{"T", dtype}, {"S", TF_INT64}},
                                                  {"num_layers", "num_units", "input_size",
                                                   "params_size"});
  }
  for (const char* op : {"CudnnRNNParamsToCanonical", "CudnnRNNParamsToCanonicalV2"}) {
    RegisterKernelForTypes<CudnnRnnParamsToCanonicalOp>(op, device_type, "T", kRnnTypes, sizes);
  }
  for (const char* op : {"CudnnRNNCanonicalToParams", "CudnnRNNCanonicalToParamsV2"}) {
    RegisterKernelForTypes<CudnnRnnCanonicalToParamsOp>(op, device_type, "T", kRnnTypes, sizes);
  }

  DocumentOp("CudnnRNN", "", kRnnNotes);
  DocumentOp("CudnnRNNV2", "",
             "As CudnnRNN; host_reserved (training) is [-1, 0]: one algorithm, no autotuning.");
  DocumentOp("CudnnRNNV3", "time-major, batch-major",
             "As CudnnRNN, with sequence_lengths (host memory, each in [0, max_seq_length]): "
             "outputs beyond a sequence's length are zero, final states those after its last "
             "valid step; the backward direction starts at each sequence's last valid step. "
             "num_proj: LSTM recurrent projection (h = P (o * tanh(c))).");
  DocumentOp("CudnnRNNBackprop", "",
             "Gradients of CudnnRNN from its reserve_space (the virtual GPU's format: saved "
             "gates and states in float32/float64, checked against the call's sizes and "
             "sequence lengths).");
  DocumentOp("CudnnRNNBackpropV2", "", "As CudnnRNNBackprop; host_reserved is ignored.");
  DocumentOp("CudnnRNNBackpropV3", "time-major, batch-major",
             "As CudnnRNNBackprop, with sequence_lengths: output gradients beyond a "
             "sequence's length are ignored and input gradients there are zero.");
  DocumentOp("CudnnRNNParamsSize", "",
             "Computed on the host (params_size in host memory, int32 or int64). skip_input: "
             "Unimplemented; num_proj requires lstm.");
  DocumentOp("CudnnRNNParamsToCanonical", "",
             "Splits params into TensorFlow's canonical weights and biases (the weight space "
             "is their concatenation).");
  DocumentOp("CudnnRNNParamsToCanonicalV2", "",
             "As CudnnRNNParamsToCanonical; with num_proj the lstm projection is the 9th "
             "weight of each pseudo-layer, [num_proj, num_units].");
  DocumentOp("CudnnRNNCanonicalToParams", "",
             "Concatenates the canonical weights and biases into params; wrong counts or "
             "sizes are InvalidArgument (TensorFlow aborts).");
  DocumentOp("CudnnRNNCanonicalToParamsV2", "", "As CudnnRNNCanonicalToParams, with num_proj.");
}

}  // namespace vgpu
