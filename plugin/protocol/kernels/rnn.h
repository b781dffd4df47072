// Kernel ids and launch layouts of the recurrent family (ids 1000-1099): cuDNN-style stacks of
// recurrent layers (TensorFlow's CudnnRNN ops), and the two layouts both sides of the boundary
// compute from the same sizes: the weight space ("params") and the reserve space.
//
// Equations (cuDNN's; x_t the layer input, h/c the states, W/R the input/recurrent weights,
// bW/bR their biases, one block per gate, s = sigmoid):
//   rnn_relu / rnn_tanh:  h_t = act(W x_t + bW + R h_{t-1} + bR)
//   lstm:  i = s(Wi x + bWi + Ri h + bRi)   f = s(Wf x + bWf + Rf h + bRf)
//          g = tanh(Wc x + bWc + Rc h + bRc)   o = s(Wo x + bWo + Ro h + bRo)
//          c_t = f * c_{t-1} + i * g           h_t = o * tanh(c_t)   (with a projection P:
//          h_t = P (o * tanh(c_t)), h is proj_size wide, c hidden_size wide)
//   gru:   r = s(Wr x + bWr + Rr h + bRr)   z = s(Wz x + bWz + Rz h + bRz)
//          n = tanh(Wh x + bWh + r * (Rh h + bRh))   h_t = (1 - z) * n + z * h_{t-1}
// Layer l > 0 reads the outputs of layer l - 1 (for a bidirectional stack the forward and
// backward outputs side by side, [fw, bw]). While training with dropout > 0, layer l > 0 reads
// them multiplied by a dropout mask (below).
//
// Variable sequence lengths: sequence b has length len_b <= max_seq_length. Step t of sequence
// b is active when t < len_b. The forward direction runs t = 0 .. len_b - 1, the backward
// direction t = len_b - 1 .. 0; inactive steps keep the state unchanged and output zeros, so the
// final states are those after the last valid step (forward) and after step 0 (backward).
#ifndef VGPU_PROTOCOL_KERNELS_RNN_H_
#define VGPU_PROTOCOL_KERNELS_RNN_H_

#include <cstdint>

#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernel_ids.h"

namespace vgpu::rnn {

// Forward pass (cudnnRNNForward).
// descriptors: [rnn, dropout, x, y, h, c, w] with
//   x  [T, B, input_size] (time-major) or [B, T, input_size] (batch-major; rnn.data_layout)
//   y  the same layout with directions * proj_size features
//   h  [num_layers * directions, B, proj_size]    (pseudo-layer p = layer * directions + dir)
//   c  [num_layers * directions, B, hidden_size]  (lstm; other modes: as h, unused)
//   w  [ParamsSize] (the weight space below)
// buffers: training [x, hx, cx, w, y, hy, cy, reserve]; inference [x, hx, cx, w, y, hy, cy].
//   Modes other than lstm ignore cx and set every element of cy to zero (TensorFlow's
//   placeholder output). The state buffers are read and written in h's order whatever the
//   data layout (as cuDNN does with the memory TensorFlow hands it).
// params: uint32 flags (bit 0: training: fill the reserve space), uint64 dropout_call (mixed
//   into the dropout mask's counter), array<int32> seq_lengths (empty: every sequence is T
//   long; otherwise B lengths in [0, T]).
// Dropout masks (training, dropout p > 0, layer l > 0): element e of the time-major layer input
//   [T, B, directions * proj_size] is kept, and scaled by 1 / (1 - p), when the uniform [0, 1)
//   float of Philox4x32-10 (TensorFlow's conventions) with key = dropout.seed and counter
//   (word 0..1 = e / 4, word 2..3 = (dropout_call << 16) | l), lane e % 4, is >= p.
inline constexpr KernelId kForward = KernelId{1000};

// Backward pass (cudnnRNNBackwardData + cudnnRNNBackwardWeights).
// descriptors: as kForward. buffers: [x, hx, cx, w, dy, dhy, dcy, reserve, dx, dhx, dcx, dw]
//   (reserve: the forward's, training mode, same sizes and sequence lengths).
//   dy at inactive steps is ignored and dx there is zero; modes other than lstm ignore dcy and
//   set dcx to zeros. dw has the weight space's layout.
// params: array<int32> seq_lengths (as kForward).
inline constexpr KernelId kBackward = KernelId{1001};

// ---------------------------------------------------------------------------------------------
// Sizes. The weight space: all weights, then all biases; within each, the pseudo-layers in
// order (layer 0 forward, layer 0 backward, layer 1 forward, ...). A pseudo-layer's weights are
// its input matrices (one [hidden_size, layer input size] matrix per gate, gate order lstm
// i,f,c,o / gru r,z,h), then its recurrent matrices (one [hidden_size, proj_size] per gate),
// then (lstm with projection) the projection [proj_size, hidden_size]; matrices row-major. Its
// biases: bW per gate, then bR per gate, hidden_size each. This is the concatenation of the
// canonical weights and biases of CudnnRNNParamsToCanonical, and for one unidirectional layer
// the buffer Keras builds.

struct Geometry {
  RnnMode mode = RnnMode::kLstm;
  int64_t num_layers = 1;
  int64_t directions = 1;
  int64_t input_size = 0;
  int64_t hidden_size = 0;  // cell width (C)
  int64_t proj_size = 0;    // h width (equals hidden_size unless an lstm projects)
  int64_t max_seq_length = 0;
  int64_t batch_size = 0;
  bool dropout_masks = false;  // training with dropout > 0: masks for layers > 0

  int64_t gates() const {
    return mode == RnnMode::kLstm ? 4 : mode == RnnMode::kGru ? 3 : 1;
  }
  bool projects() const { return mode == RnnMode::kLstm && proj_size != hidden_size; }
  int64_t pseudo_layers() const { return num_layers * directions; }
  int64_t layer_input_size(int64_t layer) const {
    return layer == 0 ? input_size : directions * proj_size;
  }
};

// Element offsets of one pseudo-layer's parameters in the weight space.
struct PseudoLayerParams {
  int64_t input_size = 0;         // columns of the input matrices
  int64_t input_weights = 0;      // [gates * hidden_size, input_size]
  int64_t recurrent_weights = 0;  // [gates * hidden_size, proj_size]
  int64_t projection = -1;        // [proj_size, hidden_size], -1 without projection
  int64_t input_bias = 0;         // [gates * hidden_size]
  int64_t recurrent_bias = 0;     // [gates * hidden_size]
};

inline int64_t WeightElements(const Geometry& g, int64_t layer) {
  const int64_t gc = g.gates() * g.hidden_size;
  return gc * g.layer_input_size(layer) + gc * g.proj_size +
         (g.projects() ? g.proj_size * g.hidden_size : 0);
}

inline int64_t ParamsSize(const Geometry& g) {
  int64_t size = 0;
  for (int64_t layer = 0; layer < g.num_layers; ++layer) {
    size += g.directions * (WeightElements(g, layer) + 2 * g.gates() * g.hidden_size);
  }
  return size;
}

inline PseudoLayerParams ParamsOf(const Geometry& g, int64_t pseudo_layer) {
  const int64_t layer = pseudo_layer / g.directions;
  const int64_t gc = g.gates() * g.hidden_size;
  PseudoLayerParams p;
  int64_t weights = 0, all_weights = 0;
  for (int64_t l = 0; l < g.num_layers; ++l) {
    if (l < layer) weights += g.directions * WeightElements(g, l);
    all_weights += g.directions * WeightElements(g, l);
  }
  weights += (pseudo_layer % g.directions) * WeightElements(g, layer);
  p.input_size = g.layer_input_size(layer);
  p.input_weights = weights;
  p.recurrent_weights = weights + gc * p.input_size;
  if (g.projects()) p.projection = p.recurrent_weights + gc * g.proj_size;
  p.input_bias = all_weights + pseudo_layer * 2 * gc;
  p.recurrent_bias = p.input_bias + gc;
  return p;
}

// ---------------------------------------------------------------------------------------------
// The reserve space (training forward -> backward): a header, then values of the math dtype
// (float32, or float64 for float64 data), all time-major:
//   per pseudo-layer p:  gates [T, B, gates * C] (activated values; 0 at inactive steps),
//                        states [T, B, proj_size] (h after step t; carried at inactive steps),
//                        lstm: cells [T, B, C] (c after step t);
//                        lstm with projection: unprojected [T, B, C] (o * tanh(c));
//                        gru: recurrent_new [T, B, C] (Rh h_{t-1} + bRh);
//   then per layer l > 0: input [T, B, directions * proj_size] (what layer l read),
//                        with dropout masks: mask [T, B, directions * proj_size] (0 or 1/(1-p)).
// The reserve tensor is ceil(ReserveBytes / sizeof(dtype)) elements of the op's dtype.

inline constexpr uint32_t kReserveMagic = 0x4E4E5256;  // "VRNN"
inline constexpr uint32_t kReserveVersion = 1;

// The reserve space's first bytes: what the forward pass was, checked by the backward pass.
struct ReserveHeader {
  uint32_t magic = kReserveMagic;
  uint32_t version = kReserveVersion;
  int32_t mode = 0;
  int32_t math_dtype = 0;
  int64_t num_layers = 0, directions = 0, input_size = 0, hidden_size = 0, proj_size = 0;
  int64_t max_seq_length = 0, batch_size = 0;
  uint64_t dropout_masks = 0;
  uint64_t seq_lengths_hash = 0;  // FNV-1a of the B effective lengths (int32, little-endian)
};
inline constexpr int64_t kReserveHeaderBytes = 128;  // the data starts here
static_assert(sizeof(ReserveHeader) <= kReserveHeaderBytes);

// Element offsets (after the header) of one pseudo-layer's records; -1 when absent.
struct PseudoLayerRecord {
  int64_t gates = 0, states = 0, cells = -1, unprojected = -1, recurrent_new = -1;
};
// Element offsets of layer l's (l > 0) input and dropout mask (-1 when absent).
struct LayerRecord {
  int64_t input = -1, mask = -1;
};

inline int64_t PseudoLayerRecordElements(const Geometry& g) {
  const int64_t steps = g.max_seq_length * g.batch_size;
  int64_t per_step = g.gates() * g.hidden_size + g.proj_size;
  if (g.mode == RnnMode::kLstm) per_step += g.hidden_size;
  if (g.projects()) per_step += g.hidden_size;
  if (g.mode == RnnMode::kGru) per_step += g.hidden_size;
  return steps * per_step;
}

inline PseudoLayerRecord RecordOf(const Geometry& g, int64_t pseudo_layer) {
  const int64_t steps = g.max_seq_length * g.batch_size;
  PseudoLayerRecord r;
  int64_t at = pseudo_layer * PseudoLayerRecordElements(g);
  r.gates = at;
  at += steps * g.gates() * g.hidden_size;
  r.states = at;
  at += steps * g.proj_size;
  if (g.mode == RnnMode::kLstm) {
    r.cells = at;
    at += steps * g.hidden_size;
  }
  if (g.projects()) r.unprojected = at;
  if (g.mode == RnnMode::kGru) r.recurrent_new = at;
  return r;
}

inline LayerRecord LayerRecordOf(const Geometry& g, int64_t layer) {
  LayerRecord r;
  if (layer == 0) return r;
  const int64_t block = g.max_seq_length * g.batch_size * g.directions * g.proj_size;
  const int64_t per_layer = g.dropout_masks ? 2 * block : block;
  r.input = g.pseudo_layers() * PseudoLayerRecordElements(g) + (layer - 1) * per_layer;
  if (g.dropout_masks) r.mask = r.input + block;
  return r;
}

// Values of the math dtype after the header.
inline int64_t ReserveElements(const Geometry& g) {
  const int64_t block = g.max_seq_length * g.batch_size * g.directions * g.proj_size;
  return g.pseudo_layers() * PseudoLayerRecordElements(g) +
         (g.num_layers - 1) * (g.dropout_masks ? 2 * block : block);
}

inline int64_t ReserveBytes(const Geometry& g, int64_t math_bytes) {
  return kReserveHeaderBytes + ReserveElements(g) * math_bytes;
}

// Limits every size of a geometry must respect (they keep all the arithmetic above, and every
// buffer size derived from it, far from overflowing int64).
inline constexpr int64_t kMaxDimension = int64_t{1} << 31;
inline constexpr int64_t kMaxLayers = 1 << 12;
inline constexpr int64_t kMaxTotalElements = int64_t{1} << 52;

// True when every field is within range and every size derived from `g` (the weight space,
// the reserve space, each tensor) stays below kMaxTotalElements. Call before using the
// functions above on sizes from an untrusted source.
inline bool GeometryIsValid(const Geometry& g) {
  if (g.mode != RnnMode::kRelu && g.mode != RnnMode::kTanh && g.mode != RnnMode::kLstm &&
      g.mode != RnnMode::kGru) {
    return false;
  }
  if (g.num_layers < 1 || g.num_layers > kMaxLayers) return false;
  if (g.directions != 1 && g.directions != 2) return false;
  for (int64_t d : {g.input_size, g.hidden_size, g.proj_size, g.max_seq_length, g.batch_size}) {
    if (d < 0 || d > kMaxDimension) return false;
  }
  if (g.hidden_size < 1 || g.proj_size < 1) return false;
  if (g.mode != RnnMode::kLstm && g.proj_size != g.hidden_size) return false;
  if (g.proj_size > g.hidden_size) return false;
  const __int128 limit = kMaxTotalElements;
  const __int128 gc = static_cast<__int128>(g.gates()) * g.hidden_size;
  const __int128 widest_input =
      g.input_size > g.directions * g.proj_size ? g.input_size : g.directions * g.proj_size;
  const __int128 per_layer_params = gc * (widest_input + g.proj_size + 2) +
                                    static_cast<__int128>(g.proj_size) * g.hidden_size;
  if (per_layer_params * g.num_layers * g.directions > limit) return false;
  const __int128 steps = static_cast<__int128>(g.max_seq_length) * g.batch_size;
  const __int128 per_step = gc + g.proj_size + 3 * static_cast<__int128>(g.hidden_size) +
                            2 * widest_input;
  if (steps * per_step * g.num_layers * g.directions > limit) return false;
  return true;
}

}  // namespace vgpu::rnn

#endif  // VGPU_PROTOCOL_KERNELS_RNN_H_
