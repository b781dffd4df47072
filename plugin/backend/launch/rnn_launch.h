// The recurrent family's launches (protocol/kernels/rnn.h), read once for every executor: the
// rnn, dropout and tensor descriptors, the parameter block (flags, dropout call, sequence
// lengths) and every buffer's size, validated as a hostile client could send them, become an
// RnnLaunch: the stack's rnn::Geometry and the element counts of its tensors. The reserve
// space's header, which the forward pass writes and the backward pass checks, is built and
// checked here too; where the header lives (host or device memory) is the executor's business.
#ifndef VGPU_BACKEND_LAUNCH_RNN_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_RNN_LAUNCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/rnn.h"

namespace vgpu::rnn_launch {

// One rnn::kForward or kBackward launch, validated. Host data (the lengths are a vector).
struct RnnLaunch {
  RnnDescriptorSettings rnn;  // dtype floating; math_dtype float64 for float64, else float32
  rnn::Geometry g;            // rnn::GeometryIsValid
  bool training = false;      // forward: flags bit 0 (the reserve space is written); backward
  uint64_t dropout_call = 0;  // forward: mixed into the dropout masks' counter
  bool batch_major = false;
  float dropout = 0.0f;           // in [0, 1)
  uint64_t seed = 0;              // the dropout descriptor's
  std::vector<int32_t> lengths;   // batch_size effective lengths, each in [0, max_seq_length]
  // Elements of x, y, a state h and a cell state c, and of the weight space; c_buffer_elements
  // is what cx/cy (dcy/dcx) must hold: c_elements for lstm, 0 for the modes that ignore them.
  int64_t x_elements = 0, y_elements = 0, h_elements = 0, c_elements = 0, params_elements = 0;
  int64_t c_buffer_elements = 0;
  int64_t reserve_bytes = 0;  // training: rnn::ReserveBytes of the math type (header included)
};

// Reads an rnn::kForward launch: params uint32 flags (only bit 0), uint64 dropout_call, the
// sequence lengths; descriptors [rnn, dropout, x, y, h, c, w]; buffers [x, hx, cx, w, y, hy, cy]
// plus the reserve space when training. Checks, in this order, the flags, the descriptors
// against each other, the lengths, the buffer count, then every buffer's size and alignment
// (data buffers in the data dtype, the reserve space in bytes).
absl::StatusOr<RnnLaunch> ReadRnnForwardLaunch(const LaunchView& launch);

// Reads an rnn::kBackward launch: params the sequence lengths; descriptors as kForward; buffers
// [x, hx, cx, w, dy, dhy, dcy, reserve, dx, dhx, dcx, dw]. Checks as ReadRnnForwardLaunch (a
// training configuration). The reserve space's header is left to CheckReserveHeader.
absl::StatusOr<RnnLaunch> ReadRnnBackwardLaunch(const LaunchView& launch);

// The header a training forward pass writes at the start of the reserve space (the rest of its
// first rnn::kReserveHeaderBytes bytes are zeros).
rnn::ReserveHeader ReserveHeaderOf(const RnnLaunch& launch);

// Whether `header` (copied from a backward launch's reserve space) comes from a training
// forward pass of `launch`'s configuration and sequence lengths; InvalidArgument saying which
// part differs otherwise.
absl::Status CheckReserveHeader(const RnnLaunch& launch, const rnn::ReserveHeader& header);

}  // namespace vgpu::rnn_launch

#endif  // VGPU_BACKEND_LAUNCH_RNN_LAUNCH_H_
