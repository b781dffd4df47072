// The recurrent family's launch readers (see rnn_launch.h).
#include "plugin/backend/launch/rnn_launch.h"

#include <cstring>
#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "plugin/common/status_macros.h"

namespace vgpu::rnn_launch {
namespace {

bool IsFloatingDType(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16;
}

absl::Status ExpectDims(const char* what, const TensorDescriptorSettings& t, DType dtype,
                        std::initializer_list<int64_t> dims) {
  bool same = t.dtype == dtype && t.rank == static_cast<int32_t>(dims.size());
  int i = 0;
  for (int64_t d : dims) {
    if (!same) break;
    same = t.dims[i++] == d;
  }
  if (same) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("rnn: the ", what, " tensor descriptor does not match the rnn descriptor"));
}

uint64_t LengthsHash(const std::vector<int32_t>& lengths) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (int32_t length : lengths) {
    uint8_t bytes[4];
    std::memcpy(bytes, &length, sizeof(bytes));
    for (uint8_t byte : bytes) hash = (hash ^ byte) * 0x100000001b3ull;
  }
  return hash;
}

// Reads the descriptors [rnn, dropout, x, y, h, c, w] and the sequence lengths (the next
// parameter of `reader`) of a launch whose training flag is launch->training, and checks them
// against each other.
absl::Status ReadStack(const LaunchView& view, ParamReader& reader, RnnLaunch* launch) {
  VGPU_ASSIGN_OR_RETURN(launch->rnn, view.Descriptor<RnnDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(const DropoutDescriptorSettings dropout,
                        view.Descriptor<DropoutDescriptorSettings>(1));
  TensorDescriptorSettings t[5];
  for (int i = 0; i < 5; ++i) {
    VGPU_ASSIGN_OR_RETURN(t[i], view.Descriptor<TensorDescriptorSettings>(2 + i));
  }
  const RnnDescriptorSettings& r = launch->rnn;
  if (!IsFloatingDType(r.dtype)) {
    return absl::InvalidArgumentError("rnn: the data type must be a floating-point type");
  }
  const DType math = r.dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  if (r.math_dtype != math) {
    return absl::InvalidArgumentError(
        "rnn: the math type must be float64 for float64 data and float32 otherwise");
  }
  if (r.input_mode == RnnInputMode::kSkip) {
    return absl::UnimplementedError("rnn: input_mode skip_input is not supported");
  }
  if (r.input_mode != RnnInputMode::kLinear) {
    return absl::InvalidArgumentError("rnn: unknown input mode");
  }
  if (r.direction != RnnDirection::kUnidirectional &&
      r.direction != RnnDirection::kBidirectional) {
    return absl::InvalidArgumentError("rnn: unknown direction mode");
  }
  if (r.data_layout != RnnDataLayout::kTimeMajor && r.data_layout != RnnDataLayout::kBatchMajor) {
    return absl::InvalidArgumentError("rnn: unknown data layout");
  }
  launch->batch_major = r.data_layout == RnnDataLayout::kBatchMajor;
  if (!(dropout.dropout >= 0.0f && dropout.dropout < 1.0f)) {
    return absl::InvalidArgumentError("rnn: dropout must be in [0, 1)");
  }
  launch->dropout = dropout.dropout;
  launch->seed = dropout.seed;
  const TensorDescriptorSettings& x = t[0];
  if (x.rank != 3) return absl::InvalidArgumentError("rnn: x must be 3-dimensional");
  rnn::Geometry& g = launch->g;
  g.mode = r.mode;
  g.num_layers = r.num_layers;
  g.directions = r.direction == RnnDirection::kBidirectional ? 2 : 1;
  g.input_size = r.input_size;
  g.hidden_size = r.hidden_size;
  g.proj_size = r.proj_size;
  g.max_seq_length = launch->batch_major ? x.dims[1] : x.dims[0];
  g.batch_size = launch->batch_major ? x.dims[0] : x.dims[1];
  g.dropout_masks = launch->training && launch->dropout > 0.0f && g.num_layers > 1;
  if (!rnn::GeometryIsValid(g)) {
    return absl::InvalidArgumentError(
        "rnn: invalid or too large sizes (mode, layers, input/hidden/projection sizes, "
        "sequence length, batch)");
  }
  const int64_t T = g.max_seq_length, B = g.batch_size, P = g.pseudo_layers();
  const int64_t out = g.directions * g.proj_size;
  const int64_t c_width = g.mode == RnnMode::kLstm ? g.hidden_size : g.proj_size;
  VGPU_RETURN_IF_ERROR(ExpectDims("x", x, r.dtype, {x.dims[0], x.dims[1], g.input_size}));
  VGPU_RETURN_IF_ERROR(ExpectDims("y", t[1], r.dtype, {x.dims[0], x.dims[1], out}));
  VGPU_RETURN_IF_ERROR(ExpectDims("h", t[2], r.dtype, {P, B, g.proj_size}));
  VGPU_RETURN_IF_ERROR(ExpectDims("c", t[3], r.dtype, {P, B, c_width}));
  launch->params_elements = rnn::ParamsSize(g);
  VGPU_RETURN_IF_ERROR(ExpectDims("w", t[4], r.dtype, {launch->params_elements}));
  launch->x_elements = T * B * g.input_size;
  launch->y_elements = T * B * out;
  launch->h_elements = P * B * g.proj_size;
  launch->c_elements = P * B * c_width;
  launch->c_buffer_elements = g.mode == RnnMode::kLstm ? launch->c_elements : 0;
  launch->reserve_bytes =
      launch->training ? rnn::ReserveBytes(g, static_cast<int64_t>(DTypeSize(r.math_dtype))) : 0;

  VGPU_ASSIGN_OR_RETURN(std::vector<int32_t> lengths,
                        reader.GetArray<int32_t>(static_cast<uint32_t>(rnn::kMaxDimension)));
  if (lengths.empty()) {
    launch->lengths.assign(B, static_cast<int32_t>(T));
  } else {
    if (static_cast<int64_t>(lengths.size()) != B) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rnn: ", lengths.size(), " sequence lengths for a batch of ", B));
    }
    for (int32_t length : lengths) {
      if (length < 0 || length > T) {
        return absl::InvalidArgumentError(
            absl::StrCat("rnn: sequence length ", length, " is not in [0, ", T, "]"));
      }
    }
    launch->lengths = std::move(lengths);
  }
  return absl::OkStatus();
}

// Checks buffers first, first + 1, ... for the element counts `elements`, in the data dtype.
absl::Status ExpectDataBuffers(const LaunchView& view, const RnnLaunch& launch, size_t first,
                               std::initializer_list<int64_t> elements) {
  const uint64_t size = DTypeSize(launch.rnn.dtype);
  size_t index = first;
  for (int64_t count : elements) {
    VGPU_RETURN_IF_ERROR(
        view.ExpectElements(index++, static_cast<uint64_t>(count), size, size));
  }
  return absl::OkStatus();
}

// Buffers [x, hx, cx, w, y, hy, cy] (forward) or [x, hx, cx, w, dy, dhy, dcy] (backward).
absl::Status ExpectPassBuffers(const LaunchView& view, const RnnLaunch& launch) {
  return ExpectDataBuffers(view, launch, 0,
                           {launch.x_elements, launch.h_elements, launch.c_buffer_elements,
                            launch.params_elements, launch.y_elements, launch.h_elements,
                            launch.c_buffer_elements});
}

// The reserve space, buffer 7 of either pass.
absl::Status ExpectReserve(const LaunchView& view, const RnnLaunch& launch) {
  return view.ExpectElements(7, static_cast<uint64_t>(launch.reserve_bytes), 1, 1);
}

}  // namespace

absl::StatusOr<RnnLaunch> ReadRnnForwardLaunch(const LaunchView& view) {
  RnnLaunch launch;
  ParamReader reader = view.Params();
  VGPU_ASSIGN_OR_RETURN(const uint32_t flags, reader.Get<uint32_t>());
  if (flags & ~1u) return absl::InvalidArgumentError("rnn: unknown forward flags");
  launch.training = (flags & 1u) != 0;
  VGPU_ASSIGN_OR_RETURN(launch.dropout_call, reader.Get<uint64_t>());
  VGPU_RETURN_IF_ERROR(ReadStack(view, reader, &launch));
  VGPU_RETURN_IF_ERROR(view.ExpectBuffers(launch.training ? 8 : 7));
  VGPU_RETURN_IF_ERROR(ExpectPassBuffers(view, launch));
  if (launch.training) VGPU_RETURN_IF_ERROR(ExpectReserve(view, launch));
  return launch;
}

absl::StatusOr<RnnLaunch> ReadRnnBackwardLaunch(const LaunchView& view) {
  RnnLaunch launch;
  launch.training = true;
  ParamReader reader = view.Params();
  VGPU_RETURN_IF_ERROR(ReadStack(view, reader, &launch));
  VGPU_RETURN_IF_ERROR(view.ExpectBuffers(12));
  VGPU_RETURN_IF_ERROR(ExpectPassBuffers(view, launch));
  VGPU_RETURN_IF_ERROR(ExpectReserve(view, launch));
  // [dx, dhx, dcx, dw]
  VGPU_RETURN_IF_ERROR(ExpectDataBuffers(view, launch, 8,
                                         {launch.x_elements, launch.h_elements,
                                          launch.c_buffer_elements, launch.params_elements}));
  return launch;
}

rnn::ReserveHeader ReserveHeaderOf(const RnnLaunch& launch) {
  const rnn::Geometry& g = launch.g;
  rnn::ReserveHeader header;
  header.mode = static_cast<int32_t>(g.mode);
  header.math_dtype = static_cast<int32_t>(launch.rnn.math_dtype);
  header.num_layers = g.num_layers;
  header.directions = g.directions;
  header.input_size = g.input_size;
  header.hidden_size = g.hidden_size;
  header.proj_size = g.proj_size;
  header.max_seq_length = g.max_seq_length;
  header.batch_size = g.batch_size;
  header.dropout_masks = g.dropout_masks ? 1 : 0;
  header.seq_lengths_hash = LengthsHash(launch.lengths);
  return header;
}

absl::Status CheckReserveHeader(const RnnLaunch& launch, const rnn::ReserveHeader& header) {
  const rnn::Geometry& g = launch.g;
  if (header.magic != rnn::kReserveMagic || header.version != rnn::kReserveVersion) {
    return absl::InvalidArgumentError(
        "rnn: reserve_space does not come from a training forward pass");
  }
  if (header.mode != static_cast<int32_t>(g.mode) ||
      header.math_dtype != static_cast<int32_t>(launch.rnn.math_dtype) ||
      header.num_layers != g.num_layers || header.directions != g.directions ||
      header.input_size != g.input_size || header.hidden_size != g.hidden_size ||
      header.proj_size != g.proj_size || header.max_seq_length != g.max_seq_length ||
      header.batch_size != g.batch_size || header.dropout_masks != (g.dropout_masks ? 1u : 0u)) {
    return absl::InvalidArgumentError(
        "rnn: reserve_space comes from a forward pass of another configuration");
  }
  if (header.seq_lengths_hash != LengthsHash(launch.lengths)) {
    return absl::InvalidArgumentError(
        "rnn: reserve_space comes from a forward pass with other sequence lengths");
  }
  return absl::OkStatus();
}

}  // namespace vgpu::rnn_launch
