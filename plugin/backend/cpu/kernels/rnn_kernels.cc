// The recurrent family (protocol/kernels/rnn.h) on the CPU backing executor: forward and
// backward passes of cuDNN-style stacks of relu/tanh RNN, LSTM (optionally with a recurrent
// projection) and GRU layers, uni- or bidirectional, time- or batch-major, with variable
// sequence lengths and dropout between layers.
//
// Everything is computed time-major in the math type (float for the 16-bit types and float,
// double for double). Per layer and direction, the input projection of a block of time steps
// is one GEMM, each step one recurrent GEMM (Eigen contractions on the executor's thread pool),
// and the gates are evaluated row by row in parallel (Eigen's vectorized sigmoid and tanh). The
// backward pass walks the steps in reverse: per step one pass over the rows for the gates'
// gradients and one GEMM carrying the state gradient back; per block of steps one GEMM each
// for the recurrent weights', the input weights' and the input gradients. Blocks bound the
// scratch memory: it stays a small multiple of the launch's own buffers whatever T is. The
// launches are read and validated by the launch layer (launch/rnn_launch.h).
#define EIGEN_USE_THREADS

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/launch/rnn_launch.h"
#include "plugin/common/philox.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/rnn.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

using Index = Eigen::DenseIndex;
using Device = Eigen::ThreadPoolDevice;
using rnn_launch::CheckReserveHeader;
using rnn_launch::ReadRnnBackwardLaunch;
using rnn_launch::ReadRnnForwardLaunch;
using rnn_launch::ReserveHeaderOf;
using rnn_launch::RnnLaunch;

template <typename T, int kRank>
using RowMajorMap =
    Eigen::TensorMap<Eigen::Tensor<T, kRank, Eigen::RowMajor, Index>, Eigen::Unaligned>;

template <typename T>
using Vector = RowMajorMap<T, 1>;
template <typename T>
using ConstVector = RowMajorMap<const T, 1>;

// The input projection is computed for blocks of time steps of at most this many gate values
// (a block always holds at least one step).
constexpr Index kBlockElements = Index{1} << 22;
// GEMMs with at least this many multiply-adds run on the thread pool; smaller ones inline.
constexpr double kParallelGemmWork = 32.0 * 32.0 * 32.0;

// The math type of element type T: double for double, float for the others (the rnn
// descriptor's math_dtype, which the launch reader checks).
template <typename T>
using MathType = std::conditional_t<std::is_same_v<T, double>, double, float>;

// ---------------------------------------------------------------------------------------------
// Dense building blocks in the math type A.

// c[m, n] (+)= op(a) op(b); a is [m, k] ([k, m] when transpose_a), b is [k, n] ([n, k] when
// transpose_b), all row-major.
template <typename A>
void Gemm(const Device& device, Index m, Index n, Index k, const A* a, bool transpose_a,
          const A* b, bool transpose_b, A* c, bool accumulate) {
  if (m == 0 || n == 0) return;
  RowMajorMap<A, 2> out(c, m, n);
  if (k == 0) {
    if (!accumulate) std::fill(c, c + m * n, A(0));
    return;
  }
  RowMajorMap<const A, 2> lhs(a, transpose_a ? k : m, transpose_a ? m : k);
  RowMajorMap<const A, 2> rhs(b, transpose_b ? n : k, transpose_b ? k : n);
  const Eigen::array<Eigen::IndexPair<Index>, 1> pair{
      Eigen::IndexPair<Index>(transpose_a ? 0 : 1, transpose_b ? 1 : 0)};
  const bool parallel = static_cast<double>(m) * n * k >= kParallelGemmWork;
  if (parallel) {
    if (accumulate) {
      out.device(device) += lhs.contract(rhs, pair);
    } else {
      out.device(device) = lhs.contract(rhs, pair);
    }
  } else {
    if (accumulate) {
      out += lhs.contract(rhs, pair);
    } else {
      out = lhs.contract(rhs, pair);
    }
  }
}

// m[r, :] += v for every row r of the [rows, n] matrix m.
template <typename A>
void AddRowVector(const Device& device, A* m, Index rows, Index n, const A* v) {
  if (rows == 0 || n == 0) return;
  device.parallelFor(rows, Eigen::TensorOpCost(n * sizeof(A), n * sizeof(A), n),
                     [&](Index begin, Index end) {
    for (Index r = begin; r < end; ++r) {
      A* row = m + r * n;
      for (Index j = 0; j < n; ++j) row[j] += v[j];
    }
  });
}

// out[j] += sum over the rows of the [rows, n] matrix m. Tasks own blocks of columns and walk
// the rows in order, so every access is contiguous.
template <typename A>
void AddColumnSums(const Device& device, const A* m, Index rows, Index n, A* out) {
  if (rows == 0 || n == 0) return;
  constexpr Index kColumns = 64;
  const Index blocks = (n + kColumns - 1) / kColumns;
  device.parallelFor(blocks, Eigen::TensorOpCost(rows * kColumns * sizeof(A), kColumns * sizeof(A),
                                                 rows * kColumns),
                     [&](Index begin, Index end) {
    A sums[kColumns];
    for (Index block = begin; block < end; ++block) {
      const Index first = block * kColumns, width = std::min(kColumns, n - first);
      std::fill(sums, sums + width, A(0));
      for (Index r = 0; r < rows; ++r) {
        const A* row = m + r * n + first;
        for (Index j = 0; j < width; ++j) sums[j] += row[j];
      }
      for (Index j = 0; j < width; ++j) out[first + j] += sums[j];
    }
  });
}

// Copies `steps` x `batch` rows of `width` elements from src to dst converting From to To;
// with `transpose`, row (t, b) of dst (time-major) is row (b, t) of src (batch-major) or the
// other way round (`to_batch_major`).
template <typename From, typename To>
void CopyRows(const Device& device, const From* src, Index steps, Index batch, Index width,
              bool transpose, bool to_batch_major, To* dst) {
  if (steps * batch * width == 0) return;
  device.parallelFor(steps * batch, Eigen::TensorOpCost(width * sizeof(From),
                                                        width * sizeof(To), width),
                     [&](Index begin, Index end) {
    for (Index row = begin; row < end; ++row) {
      const Index t = row / batch, b = row % batch;  // row of the time-major side
      const Index other = transpose ? b * steps + t : row;
      const From* in = src + (to_batch_major ? row : other) * width;
      To* out = dst + (to_batch_major ? other : row) * width;
      for (Index j = 0; j < width; ++j) {
        if constexpr (std::is_same_v<From, To>) {
          out[j] = in[j];
        } else {  // the 16-bit types convert through float
          out[j] = static_cast<To>(static_cast<float>(in[j]));
        }
      }
    }
  });
}

// A sequence tensor (x, y, dx, dy) of element type T in its layout, as time-major values of A.
template <typename T, typename A>
void StageSequence(const Device& device, const T* src, bool batch_major, Index steps,
                   Index batch, Index width, A* dst) {
  CopyRows(device, src, steps, batch, width, batch_major, /*to_batch_major=*/false, dst);
}

// The inverse of StageSequence.
template <typename T, typename A>
void UnstageSequence(const Device& device, const A* src, bool batch_major, Index steps,
                     Index batch, Index width, T* dst) {
  CopyRows(device, src, steps, batch, width, batch_major, /*to_batch_major=*/true, dst);
}

template <typename From, typename To>
void Convert(const Device& device, const From* src, Index count, To* dst) {
  if (count == 0) return;
  RowMajorMap<To, 1>(dst, count).device(device) =
      RowMajorMap<const From, 1>(src, count).template cast<To>();
}

// Values of T as a buffer of A: the buffer itself when the types agree, else a converted copy.
template <typename T, typename A>
class MathView {
 public:
  MathView(const Device& device, const T* data, Index count) {
    if constexpr (std::is_same_v<T, A>) {
      data_ = data;
    } else {
      copy_.resize(count);
      Convert(device, data, count, copy_.data());
      data_ = copy_.data();
    }
  }
  // Movable (a converted copy's storage moves with it), not copyable: data_ may point into it.
  MathView(MathView&&) = default;
  MathView(const MathView&) = delete;
  const A* data() const { return data_; }

 private:
  const A* data_ = nullptr;
  std::vector<A> copy_;
};

// ---------------------------------------------------------------------------------------------
// One direction of one layer.

// The sizes one direction works with.
struct StepSizes {
  Index steps = 0, batch = 0, gates = 1, cell = 0, proj = 0;  // T, B, G, C, Hp
  bool projects = false;
  const int32_t* lengths = nullptr;
  Index gate_width() const { return gates * cell; }
  bool active(Index t, Index b) const { return t < lengths[b]; }
};

// One pseudo-layer's pieces of a buffer shaped like the weight space: its weights (P = const A)
// or their gradient accumulators (P = A).
template <typename P>
struct DirectionParams {
  P* w = nullptr;   // [G*C, in]
  P* r = nullptr;   // [G*C, Hp]
  P* p = nullptr;   // [Hp, C], projection only
  P* bw = nullptr;  // [G*C]
  P* br = nullptr;  // [G*C]
  Index in = 0;
};
template <typename A>
using DirectionWeights = DirectionParams<const A>;
template <typename A>
using DirectionGrads = DirectionParams<A>;

// Where a pseudo-layer's records live in the reserve space (null: not recorded). P is the
// math type, const for the backward pass, which only reads them.
template <typename P>
struct DirectionRecord {
  P* gates = nullptr;
  P* states = nullptr;
  P* cells = nullptr;
  P* unprojected = nullptr;
  P* recurrent_new = nullptr;
};

// The element at `offset` of `data`, or null for an absent piece (offset -1), as the protocol's
// offsets (rnn::ParamsOf, rnn::RecordOf) say.
template <typename P>
P* PieceAt(P* data, int64_t offset) {
  return offset >= 0 ? data + offset : nullptr;
}

template <typename P>  // A or const A
DirectionParams<P> ParamsIn(const rnn::Geometry& g, P* data, Index pseudo_layer) {
  const rnn::PseudoLayerParams p = rnn::ParamsOf(g, pseudo_layer);
  return {PieceAt(data, p.input_weights), PieceAt(data, p.recurrent_weights),
          PieceAt(data, p.projection), PieceAt(data, p.input_bias),
          PieceAt(data, p.recurrent_bias), p.input_size};
}

template <typename P>  // A or const A
DirectionRecord<P> RecordIn(const rnn::Geometry& g, P* data, Index pseudo_layer) {
  const rnn::PseudoLayerRecord r = rnn::RecordOf(g, pseudo_layer);
  return {PieceAt(data, r.gates), PieceAt(data, r.states), PieceAt(data, r.cells),
          PieceAt(data, r.unprojected), PieceAt(data, r.recurrent_new)};
}

// Row b's bookkeeping after step t: the states record (h, and c for lstm) and the output (h
// when the step is active, zeros otherwise).
template <typename A>
void FinishRow(const StepSizes& s, Index t, Index b, const A* h_row, const A* c_row,
               const DirectionRecord<A>& record, A* y, Index y_width, Index y_column) {
  const Index B = s.batch, Hp = s.proj, C = s.cell;
  if (record.states) std::copy(h_row, h_row + Hp, record.states + (t * B + b) * Hp);
  if (c_row && record.cells) std::copy(c_row, c_row + C, record.cells + (t * B + b) * C);
  A* y_row = y + (t * B + b) * y_width + y_column;
  if (s.active(t, b)) {
    std::copy(h_row, h_row + Hp, y_row);
  } else {
    std::fill(y_row, y_row + Hp, A(0));
  }
}

// The bias added to the input projection: bW + bR, except for the gru's candidate gate, whose
// recurrent bias stays inside r * (Rh h + bRh).
template <RnnMode kMode, typename A>
std::vector<A> InputSideBias(const StepSizes& s, const DirectionWeights<A>& w) {
  const Index GC = s.gate_width();
  std::vector<A> bias(w.bw, w.bw + GC);
  const Index folded = kMode == RnnMode::kGru ? 2 * s.cell : GC;
  for (Index j = 0; j < folded; ++j) bias[j] += w.br[j];
  return bias;
}

// Time steps per block of the input-side GEMMs: at least one, at most kBlockElements gate values.
Index BlockSteps(const StepSizes& s) {
  const Index per_step = std::max<Index>(1, s.batch * s.gate_width());
  return std::max<Index>(1, std::min<Index>(s.steps, kBlockElements / per_step));
}

// Runs one direction over the whole sequence. xin: [T, B, in] time-major; y: [T, B, y_width],
// this direction writes columns [y_column, y_column + Hp). h0/c0 initial states, h_out/c_out
// final states (c only for lstm). Per block of steps one GEMM projects the inputs; per step one
// GEMM projects h and one parallel pass over the batch rows evaluates the cell.
template <RnnMode kMode, typename A>
void ForwardDirection(const Device& device, const StepSizes& s, const DirectionWeights<A>& w,
                      const A* xin, bool reverse, const A* h0, const A* c0, A* y, Index y_width,
                      Index y_column, A* h_out, A* c_out, const DirectionRecord<A>& record) {
  constexpr bool kLstm = kMode == RnnMode::kLstm;
  constexpr bool kGru = kMode == RnnMode::kGru;
  const Index T = s.steps, B = s.batch, C = s.cell, Hp = s.proj, GC = s.gate_width();
  std::vector<A> h(h0, h0 + B * Hp);
  std::vector<A> c;
  if (kLstm) c.assign(c0, c0 + B * C);
  std::vector<A> gh(B * GC);
  std::vector<A> unprojected, projected;
  if (s.projects) {
    unprojected.resize(B * C);
    projected.resize(B * Hp);
  }
  const std::vector<A> input_bias = InputSideBias<kMode>(s, w);
  const Index block_steps = BlockSteps(s);
  std::vector<A> gx(std::min(block_steps, T) * B * GC);
  std::vector<A> gate_scratch(record.gates ? 0 : B * GC);
  const Eigen::TensorOpCost row_cost(3 * GC * sizeof(A), (GC + 3 * C) * sizeof(A), 20 * GC);

  for (Index s0 = 0; s0 < T; s0 += block_steps) {
    const Index n = std::min(block_steps, T - s0);
    const Index t0 = reverse ? T - s0 - n : s0;  // first time index of the block
    Gemm(device, n * B, GC, w.in, xin + t0 * B * w.in, false, w.w, true, gx.data(), false);
    AddRowVector(device, gx.data(), n * B, GC, input_bias.data());
    for (Index k = 0; k < n; ++k) {
      const Index t = reverse ? T - 1 - (s0 + k) : s0 + k;
      const A* gxt = gx.data() + (t - t0) * B * GC;
      Gemm(device, B, GC, Hp, h.data(), false, w.r, true, gh.data(), false);
      // Activated gates go to the record (training) or to scratch (inference).
      A* gates_t = record.gates ? record.gates + t * B * GC : gate_scratch.data();
      A* rec_new = record.recurrent_new ? record.recurrent_new + t * B * C : nullptr;
      device.parallelFor(B, row_cost, [&](Index begin, Index end) {
        for (Index b = begin; b < end; ++b) {
          const bool active = s.active(t, b);
          A* gates = gates_t + b * GC;
          Vector<A> h_row(h.data() + b * Hp, Hp);
          if (!active) {
            std::fill(gates, gates + GC, A(0));
            if (rec_new) std::fill(rec_new + b * C, rec_new + (b + 1) * C, A(0));
          } else {
            // Pre-activation of gate k: input projection (with its biases) plus h's.
            const A* x_pre = gxt + b * GC;
            const A* h_pre = gh.data() + b * GC;
            auto pre = [&](Index k) {
              return ConstVector<A>(x_pre + k * C, C) + ConstVector<A>(h_pre + k * C, C);
            };
            auto gate = [&](Index k) { return Vector<A>(gates + k * C, C); };
            if constexpr (kLstm) {
              gate(0) = pre(0).sigmoid();
              gate(1) = pre(1).sigmoid();
              gate(2) = pre(2).tanh();
              gate(3) = pre(3).sigmoid();
              Vector<A> cell(c.data() + b * C, C);
              cell = gate(1) * cell + gate(0) * gate(2);
              Vector<A>(s.projects ? unprojected.data() + b * C : h_row.data(), C) =
                  gate(3) * cell.tanh();
            } else if constexpr (kGru) {
              gate(0) = pre(0).sigmoid();
              gate(1) = pre(1).sigmoid();
              Vector<A> recurrent_new(rec_new ? rec_new + b * C : gh.data() + b * GC + 2 * C, C);
              recurrent_new = ConstVector<A>(h_pre + 2 * C, C) + ConstVector<A>(w.br + 2 * C, C);
              gate(2) = (ConstVector<A>(x_pre + 2 * C, C) + gate(0) * recurrent_new).tanh();
              h_row = (gate(1).constant(A(1)) - gate(1)) * gate(2) + gate(1) * h_row;
            } else if constexpr (kMode == RnnMode::kRelu) {
              h_row = pre(0).cwiseMax(A(0));
              gate(0) = h_row;
            } else {
              h_row = pre(0).tanh();
              gate(0) = h_row;
            }
          }
          if (!s.projects) FinishRow(s, t, b, h_row.data(), kLstm ? c.data() + b * C : nullptr,
                                     record, y, y_width, y_column);
        }
      });
      if (s.projects) {
        Gemm(device, B, Hp, C, unprojected.data(), false, w.p, true, projected.data(), false);
        device.parallelFor(B, Eigen::TensorOpCost(3 * Hp * sizeof(A), 3 * Hp * sizeof(A), Hp),
                           [&](Index begin, Index end) {
          for (Index b = begin; b < end; ++b) {
            const bool active = s.active(t, b);
            A* h_row = h.data() + b * Hp;
            if (active) {
              std::copy(projected.data() + b * Hp, projected.data() + (b + 1) * Hp, h_row);
            }
            if (record.unprojected) {
              A* rec = record.unprojected + (t * B + b) * C;
              if (active) {
                std::copy(unprojected.data() + b * C, unprojected.data() + (b + 1) * C, rec);
              } else {
                std::fill(rec, rec + C, A(0));
              }
            }
            FinishRow(s, t, b, h_row, c.data() + b * C, record, y, y_width, y_column);
          }
        });
      }
    }
  }
  std::copy(h.begin(), h.end(), h_out);
  if (kLstm) std::copy(c.begin(), c.end(), c_out);
}

// The backward pass of ForwardDirection, over the steps in reverse. dy: [T, B, dy_width], this
// direction reads columns [dy_column, dy_column + Hp) at active steps. Accumulates into dxin
// [T, B, in] and the gradients; writes dh0/dc0. Per step one parallel pass over the batch rows
// computes the gates' pre-activation gradients and one GEMM carries the state gradient back;
// per block of steps one GEMM each gives the recurrent weights', the input weights' and the
// input gradients.
template <RnnMode kMode, typename A>
void BackwardDirection(const Device& device, const StepSizes& s, const DirectionWeights<A>& w,
                       const DirectionGrads<A>& grads, const A* xin, bool reverse, const A* h0,
                       const A* c0, const A* dy, Index dy_width, Index dy_column, const A* dhy,
                       const A* dcy, const DirectionRecord<const A>& record, A* dxin, A* dh0,
                       A* dc0) {
  constexpr bool kLstm = kMode == RnnMode::kLstm;
  constexpr bool kGru = kMode == RnnMode::kGru;
  const Index T = s.steps, B = s.batch, C = s.cell, Hp = s.proj, GC = s.gate_width();
  std::vector<A> dh(dhy, dhy + B * Hp), dh_next(B * Hp);
  std::vector<A> dc;
  if (kLstm) dc.assign(dcy, dcy + B * C);
  std::vector<A> dh_total, dm;  // projection only: the gradient reaching h, and o * tanh(c)
  if (s.projects) {
    dh_total.resize(B * Hp);
    dm.resize(B * C);
  }
  const Index block_steps = BlockSteps(s);
  const Index block_rows = std::min(block_steps, T) * B;
  // Per block: the gates' pre-activation gradients on the input side and (gru: different) on
  // the recurrent side, and the states the recurrent weights multiplied.
  std::vector<A> dgx(block_rows * GC), dgh(kGru ? block_rows * GC : 0);
  std::vector<A> h_prev_block(block_rows * Hp);
  const Eigen::TensorOpCost row_cost(5 * GC * sizeof(A), (GC + 2 * C + Hp) * sizeof(A), 12 * GC);

  for (Index s_end = T; s_end > 0;) {
    const Index n = std::min(block_steps, s_end);
    const Index s0 = s_end - n;
    const Index t0 = reverse ? T - s0 - n : s0;
    for (Index step = s_end - 1; step >= s0; --step) {
      const Index t = reverse ? T - 1 - step : step;
      const Index t_prev = reverse ? t + 1 : t - 1;
      const A* h_prev = step == 0 ? h0 : record.states + t_prev * B * Hp;
      const A* c_prev = kLstm ? (step == 0 ? c0 : record.cells + t_prev * B * C) : nullptr;
      const A* gates_t = record.gates + t * B * GC;
      const Index slot = (t - t0) * B;  // the step's first row in the block buffers
      A* dgxt = dgx.data() + slot * GC;
      A* dght = kGru ? dgh.data() + slot * GC : dgxt;
      // The gradient reaching h_t of row b: carried plus the output's (zero when inactive).
      auto total_of = [&](Index b, A* out) {
        const A* carried = dh.data() + b * Hp;
        const A* from_output = dy + (t * B + b) * dy_width + dy_column;
        if (s.active(t, b)) {
          for (Index j = 0; j < Hp; ++j) out[j] = carried[j] + from_output[j];
        } else {
          std::fill(out, out + Hp, A(0));
        }
      };
      if (s.projects) {  // h = P m: the gradient of m = o * tanh(c), and P's
        for (Index b = 0; b < B; ++b) total_of(b, dh_total.data() + b * Hp);
        Gemm(device, B, C, Hp, dh_total.data(), false, w.p, false, dm.data(), false);
        Gemm(device, Hp, C, B, dh_total.data(), true, record.unprojected + t * B * C, false,
             grads.p, true);
      }
      device.parallelFor(B, row_cost, [&](Index begin, Index end) {
        std::vector<A> total_row(s.projects ? 0 : Hp), tanh_cell(kLstm ? C : 0);
        for (Index b = begin; b < end; ++b) {
          A* dx_pre = dgxt + b * GC;
          A* next = dh_next.data() + b * Hp;
          std::copy(h_prev + b * Hp, h_prev + (b + 1) * Hp, h_prev_block.data() + (slot + b) * Hp);
          if (!s.active(t, b)) {  // nothing happened at this step: gradients pass through
            std::fill(dx_pre, dx_pre + GC, A(0));
            if (kGru) std::fill(dght + b * GC, dght + (b + 1) * GC, A(0));
            std::copy(dh.data() + b * Hp, dh.data() + (b + 1) * Hp, next);
            continue;
          }
          const A* gb = gates_t + b * GC;
          const A* total = nullptr;
          if (!s.projects) {
            total_of(b, total_row.data());
            total = total_row.data();
          }
          if constexpr (kLstm) {
            const A* dmb = s.projects ? dm.data() + b * C : total;
            Vector<A>(tanh_cell.data(), C) =
                ConstVector<A>(record.cells + (t * B + b) * C, C).tanh();
            A* dcb = dc.data() + b * C;
            const A* cpb = c_prev + b * C;
            for (Index j = 0; j < C; ++j) {
              const A i = gb[j], f = gb[C + j], g = gb[2 * C + j], o = gb[3 * C + j];
              const A tanh_c = tanh_cell[j];
              const A d_out = dmb[j] * tanh_c;
              const A d_cell = dcb[j] + dmb[j] * o * (A(1) - tanh_c * tanh_c);
              dx_pre[j] = d_cell * g * i * (A(1) - i);
              dx_pre[C + j] = d_cell * cpb[j] * f * (A(1) - f);
              dx_pre[2 * C + j] = d_cell * i * (A(1) - g * g);
              dx_pre[3 * C + j] = d_out * o * (A(1) - o);
              dcb[j] = d_cell * f;
            }
            std::fill(next, next + Hp, A(0));
          } else if constexpr (kGru) {
            const A* hpb = h_prev + b * Hp;
            const A* rnew = record.recurrent_new + (t * B + b) * C;
            A* dh_pre = dght + b * GC;
            for (Index j = 0; j < C; ++j) {
              const A r = gb[j], z = gb[C + j], candidate = gb[2 * C + j];
              const A d_candidate = total[j] * (A(1) - z) * (A(1) - candidate * candidate);
              const A d_r = d_candidate * rnew[j] * r * (A(1) - r);
              const A d_z = total[j] * (hpb[j] - candidate) * z * (A(1) - z);
              dx_pre[j] = d_r;
              dx_pre[C + j] = d_z;
              dx_pre[2 * C + j] = d_candidate;
              dh_pre[j] = d_r;
              dh_pre[C + j] = d_z;
              dh_pre[2 * C + j] = d_candidate * r;
              next[j] = total[j] * z;
            }
          } else {
            const A* hb = record.states + (t * B + b) * Hp;
            for (Index j = 0; j < C; ++j) {
              if (kMode == RnnMode::kRelu) {
                dx_pre[j] = hb[j] > A(0) ? total[j] : A(0);
              } else {
                dx_pre[j] = total[j] * (A(1) - hb[j] * hb[j]);
              }
            }
            std::fill(next, next + Hp, A(0));
          }
        }
      });
      Gemm(device, B, Hp, GC, dght, false, w.r, false, dh_next.data(), true);
      std::swap(dh, dh_next);
    }
    // The block's weight gradients and input gradient.
    const A* dgh_block = kGru ? dgh.data() : dgx.data();
    Gemm(device, GC, Hp, n * B, dgh_block, true, h_prev_block.data(), false, grads.r, true);
    AddColumnSums(device, dgh_block, n * B, GC, grads.br);
    const A* x_block = xin + t0 * B * w.in;
    Gemm(device, GC, w.in, n * B, dgx.data(), true, x_block, false, grads.w, true);
    AddColumnSums(device, dgx.data(), n * B, GC, grads.bw);
    Gemm(device, n * B, w.in, GC, dgx.data(), false, w.w, false, dxin + t0 * B * w.in, true);
    s_end = s0;
  }
  std::copy(dh.begin(), dh.end(), dh0);
  if (kLstm) std::copy(dc.begin(), dc.end(), dc0);
}

template <typename Fn>
void DispatchMode(RnnMode mode, Fn&& fn) {
  switch (mode) {
    case RnnMode::kRelu: fn(std::integral_constant<RnnMode, RnnMode::kRelu>{}); break;
    case RnnMode::kTanh: fn(std::integral_constant<RnnMode, RnnMode::kTanh>{}); break;
    case RnnMode::kLstm: fn(std::integral_constant<RnnMode, RnnMode::kLstm>{}); break;
    case RnnMode::kGru: fn(std::integral_constant<RnnMode, RnnMode::kGru>{}); break;
  }
}

StepSizes SizesOf(const RnnLaunch& launch) {
  const rnn::Geometry& g = launch.g;
  StepSizes s;
  s.steps = g.max_seq_length;
  s.batch = g.batch_size;
  s.gates = g.gates();
  s.cell = g.hidden_size;
  s.proj = g.proj_size;
  s.projects = g.projects();
  s.lengths = launch.lengths.data();
  return s;
}

// The dropout mask of layer `layer` (protocol/kernels/rnn.h): 0 or 1 / (1 - p) per element.
template <typename A>
void FillDropoutMask(const Device& device, const RnnLaunch& launch, uint64_t call, Index layer,
                     A* mask, Index count) {
  const A scale = A(1) / (A(1) - static_cast<A>(launch.dropout));
  const float p = launch.dropout;
  const uint64_t counter_high = (call << 16) | static_cast<uint64_t>(layer);
  const Index blocks = (count + 3) / 4;
  device.parallelFor(blocks, Eigen::TensorOpCost(0, 4 * sizeof(A), 60),
                     [&](Index begin, Index end) {
    for (Index q = begin; q < end; ++q) {
      const uint64_t counter[2] = {static_cast<uint64_t>(q), counter_high};
      Philox4x32 philox(launch.seed, counter);
      const Philox4x32::Block bits = philox.Next();
      for (Index lane = 0; lane < 4 && q * 4 + lane < count; ++lane) {
        mask[q * 4 + lane] = UniformFloat(bits.word[lane]) >= p ? scale : A(0);
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// The kernels.

// The inputs both passes start from, in the math type A: the sequence x staged time-major
// ([T, B, input_size]), the weights and the initial states h0 and (LSTM only; empty otherwise)
// c0.
template <typename T, typename A>
struct MathInputs {
  std::vector<A> x;
  MathView<T, A> w;
  std::vector<A> h0, c0;
};

// Reads buffers 0 to 3 (x, hx, cx: a placeholder for a GRU or plain RNN, the weights), checked,
// into MathInputs.
template <typename T, typename A>
absl::StatusOr<MathInputs<T, A>> ReadMathInputs(const KernelContext& context,
                                                const RnnLaunch& launch) {
  VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, launch.x_elements));
  VGPU_ASSIGN_OR_RETURN(const T* hx, context.Buffer<const T>(1, launch.h_elements));
  VGPU_ASSIGN_OR_RETURN(const T* cx, context.Buffer<const T>(2, launch.c_buffer_elements));
  VGPU_ASSIGN_OR_RETURN(const T* params, context.Buffer<const T>(3, launch.params_elements));
  const Device& device = *context.device;
  const rnn::Geometry& g = launch.g;
  MathInputs<T, A> in{std::vector<A>(g.max_seq_length * g.batch_size * g.input_size),
                      MathView<T, A>(device, params, launch.params_elements),
                      std::vector<A>(launch.h_elements),
                      {}};
  StageSequence(device, x, launch.batch_major, g.max_seq_length, g.batch_size, g.input_size,
                in.x.data());
  Convert(device, hx, launch.h_elements, in.h0.data());
  if (g.mode == RnnMode::kLstm) {
    in.c0.resize(launch.c_elements);
    Convert(device, cx, launch.c_elements, in.c0.data());
  }
  return in;
}

template <typename T>
absl::Status ForwardTyped(const KernelContext& context, const RnnLaunch& launch) {
  using A = MathType<T>;
  const Device& device = *context.device;
  const rnn::Geometry& g = launch.g;
  const bool lstm = g.mode == RnnMode::kLstm;
  const bool training = launch.training;
  VGPU_ASSIGN_OR_RETURN(const auto staged, (ReadMathInputs<T, A>(context, launch)));
  VGPU_ASSIGN_OR_RETURN(T* y, context.Buffer<T>(4, launch.y_elements));
  VGPU_ASSIGN_OR_RETURN(T* hy, context.Buffer<T>(5, launch.h_elements));
  VGPU_ASSIGN_OR_RETURN(T* cy, context.Buffer<T>(6, launch.c_buffer_elements));
  A* reserve_data = nullptr;
  if (training) {
    VGPU_ASSIGN_OR_RETURN(uint8_t* reserve, context.Buffer<uint8_t>(7, launch.reserve_bytes));
    const rnn::ReserveHeader header = ReserveHeaderOf(launch);
    std::memset(reserve, 0, rnn::kReserveHeaderBytes);
    std::memcpy(reserve, &header, sizeof(header));
    reserve_data = reinterpret_cast<A*>(reserve + rnn::kReserveHeaderBytes);
  }
  if (!lstm) {  // the placeholder output_c
    std::fill(cy, cy + context.buffer_sizes[6] / sizeof(T), T(0));
  }

  const Index T_ = g.max_seq_length, B = g.batch_size, Hp = g.proj_size, C = g.hidden_size;
  const Index out_width = g.directions * Hp;
  const StepSizes sizes = SizesOf(launch);
  std::vector<A> h1(launch.h_elements), c1(lstm ? launch.c_elements : 0);
  std::vector<A> outputs(T_ * B * out_width), inputs;
  const A* layer_input = staged.x.data();
  for (Index layer = 0; layer < g.num_layers; ++layer) {
    if (layer > 0) {
      // The previous layer's outputs, through the dropout mask while training.
      const rnn::LayerRecord layer_record = rnn::LayerRecordOf(g, layer);
      const Index count = T_ * B * out_width;
      A* destination;
      if (training) {
        destination = reserve_data + layer_record.input;
      } else {
        inputs.resize(count);
        destination = inputs.data();
      }
      if (training && g.dropout_masks) {
        A* mask = reserve_data + layer_record.mask;
        FillDropoutMask(device, launch, launch.dropout_call, layer, mask, count);
        RowMajorMap<A, 1>(destination, count).device(device) =
            RowMajorMap<const A, 1>(outputs.data(), count) * RowMajorMap<const A, 1>(mask, count);
      } else {
        std::copy(outputs.begin(), outputs.begin() + count, destination);
      }
      layer_input = destination;
    }
    for (Index dir = 0; dir < g.directions; ++dir) {
      const Index p = layer * g.directions + dir;
      const DirectionWeights<A> weights = ParamsIn<const A>(g, staged.w.data(), p);
      const DirectionRecord<A> record =
          training ? RecordIn(g, reserve_data, p) : DirectionRecord<A>{};
      DispatchMode(g.mode, [&](auto mode) {
        ForwardDirection<decltype(mode)::value, A>(
            device, sizes, weights, layer_input, dir == 1, staged.h0.data() + p * B * Hp,
            lstm ? staged.c0.data() + p * B * C : nullptr, outputs.data(), out_width, dir * Hp,
            h1.data() + p * B * Hp, lstm ? c1.data() + p * B * C : nullptr, record);
      });
    }
  }
  UnstageSequence(device, outputs.data(), launch.batch_major, T_, B, out_width, y);
  Convert(device, h1.data(), launch.h_elements, hy);
  if (lstm) Convert(device, c1.data(), launch.c_elements, cy);
  return absl::OkStatus();
}

template <typename T>
absl::Status BackwardTyped(const KernelContext& context, const RnnLaunch& launch) {
  using A = MathType<T>;
  const Device& device = *context.device;
  const rnn::Geometry& g = launch.g;
  const bool lstm = g.mode == RnnMode::kLstm;
  VGPU_ASSIGN_OR_RETURN(const auto staged, (ReadMathInputs<T, A>(context, launch)));
  VGPU_ASSIGN_OR_RETURN(const T* dy, context.Buffer<const T>(4, launch.y_elements));
  VGPU_ASSIGN_OR_RETURN(const T* dhy, context.Buffer<const T>(5, launch.h_elements));
  VGPU_ASSIGN_OR_RETURN(const T* dcy, context.Buffer<const T>(6, launch.c_buffer_elements));
  VGPU_ASSIGN_OR_RETURN(const uint8_t* reserve,
                        context.Buffer<const uint8_t>(7, launch.reserve_bytes));
  VGPU_ASSIGN_OR_RETURN(T* dx, context.Buffer<T>(8, launch.x_elements));
  VGPU_ASSIGN_OR_RETURN(T* dhx, context.Buffer<T>(9, launch.h_elements));
  VGPU_ASSIGN_OR_RETURN(T* dcx, context.Buffer<T>(10, launch.c_buffer_elements));
  VGPU_ASSIGN_OR_RETURN(T* dw, context.Buffer<T>(11, launch.params_elements));
  rnn::ReserveHeader header;
  std::memcpy(&header, reserve, sizeof(header));
  VGPU_RETURN_IF_ERROR(CheckReserveHeader(launch, header));
  const A* records = reinterpret_cast<const A*>(reserve + rnn::kReserveHeaderBytes);
  if (!lstm) std::fill(dcx, dcx + context.buffer_sizes[10] / sizeof(T), T(0));

  const Index T_ = g.max_seq_length, B = g.batch_size, Hp = g.proj_size, C = g.hidden_size;
  const Index out_width = g.directions * Hp;
  const StepSizes sizes = SizesOf(launch);
  std::vector<A> dh_final(launch.h_elements), dh0(launch.h_elements);
  Convert(device, dhy, launch.h_elements, dh_final.data());
  std::vector<A> dc_final, dc0;
  if (lstm) {
    dc_final.resize(launch.c_elements);
    dc0.resize(launch.c_elements);
    Convert(device, dcy, launch.c_elements, dc_final.data());
  }
  std::vector<A> grads(launch.params_elements, A(0));
  // The gradient reaching the current layer's outputs, and the one it passes to its inputs.
  std::vector<A> d_outputs(T_ * B * out_width);
  StageSequence(device, dy, launch.batch_major, T_, B, out_width, d_outputs.data());
  std::vector<A> d_inputs;
  for (Index layer = g.num_layers - 1; layer >= 0; --layer) {
    const Index in = g.layer_input_size(layer);
    const rnn::LayerRecord layer_record = rnn::LayerRecordOf(g, layer);
    const A* layer_input = layer == 0 ? staged.x.data() : records + layer_record.input;
    d_inputs.assign(T_ * B * in, A(0));
    for (Index dir = g.directions - 1; dir >= 0; --dir) {
      const Index p = layer * g.directions + dir;
      const DirectionWeights<A> weights = ParamsIn<const A>(g, staged.w.data(), p);
      const DirectionGrads<A> direction_grads = ParamsIn<A>(g, grads.data(), p);
      const DirectionRecord<const A> record = RecordIn(g, records, p);
      DispatchMode(g.mode, [&](auto mode) {
        BackwardDirection<decltype(mode)::value, A>(
            device, sizes, weights, direction_grads, layer_input, dir == 1,
            staged.h0.data() + p * B * Hp, lstm ? staged.c0.data() + p * B * C : nullptr,
            d_outputs.data(), out_width, dir * Hp, dh_final.data() + p * B * Hp,
            lstm ? dc_final.data() + p * B * C : nullptr, record, d_inputs.data(),
            dh0.data() + p * B * Hp, lstm ? dc0.data() + p * B * C : nullptr);
      });
    }
    if (layer > 0) {
      const Index count = T_ * B * out_width;
      if (g.dropout_masks) {
        const A* mask = records + layer_record.mask;
        RowMajorMap<A, 1>(d_outputs.data(), count).device(device) =
            RowMajorMap<const A, 1>(d_inputs.data(), count) *
            RowMajorMap<const A, 1>(mask, count);
      } else {
        std::copy(d_inputs.begin(), d_inputs.end(), d_outputs.begin());
      }
    }
  }
  UnstageSequence(device, d_inputs.data(), launch.batch_major, T_, B, g.input_size, dx);
  Convert(device, dh0.data(), launch.h_elements, dhx);
  if (lstm) Convert(device, dc0.data(), launch.c_elements, dcx);
  Convert(device, grads.data(), launch.params_elements, dw);
  return absl::OkStatus();
}

// rnn::kForward (see protocol/kernels/rnn.h).
absl::Status RnnForward(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const RnnLaunch launch, ReadRnnForwardLaunch(context));
  return Dispatch::Floating(launch.rnn.dtype, [&](auto zero) {
    return ForwardTyped<decltype(zero)>(context, launch);
  });
}

// rnn::kBackward (see protocol/kernels/rnn.h).
absl::Status RnnBackward(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(const RnnLaunch launch, ReadRnnBackwardLaunch(context));
  return Dispatch::Floating(launch.rnn.dtype, [&](auto zero) {
    return BackwardTyped<decltype(zero)>(context, launch);
  });
}

}  // namespace

void AddRnnKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kRnn, RnnForward, RnnBackward);
}

}  // namespace vgpu::cpu_kernels
