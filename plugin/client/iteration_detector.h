// Detects the end of a training iteration from the addresses kernels use (docs/method.md, claim 8):
// the outputs of the forward computations of a step, the first layer's first among them, are
// recorded, and during backward propagation each computation's input addresses are compared with
// them; a backward computation reading a recorded output means the step's iteration is
// complete. An explicit step mark (vgpu.mark_step(), the Keras callback) completes an iteration
// too. Correctness never depends on it: it only decides when descriptor reuse starts.
// Thread-safe.
//
// Practical refinements over the claim's wording, found on real Keras training steps:
//  * outputs are recorded per forward phase (the forward launches between two backward ones),
//    so the first layer's output is recognised even when its address changes from step to step
//    (TensorFlow's allocator may alternate buffers between steps, or a last partial batch moves
//    them);
//  * TensorFlow interleaves a few forward-role computations with the backward pass; such short
//    phases are not steps: once a step was seen, a forward phase shorter than half of that
//    step's forward phase does not start a new iteration, and at most one iteration is counted
//    per step.
#ifndef VGPU_CLIENT_ITERATION_DETECTOR_H_
#define VGPU_CLIENT_ITERATION_DETECTOR_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/types/span.h"

namespace vgpu {

enum class LaunchRole { kForward, kBackward };

class IterationDetector {
 public:
  // Outputs recorded per forward phase (the first ones: the first layer's is among them).
  static constexpr size_t kMaxRecordedOutputs = 1024;

  // Observes one computation. `inputs` and `output` are device addresses (0 = none). Returns
  // true if this computation completed an iteration.
  bool Observe(LaunchRole role, absl::Span<const uint64_t> inputs, uint64_t output);

  // An explicit step boundary. Counts an iteration unless detection already counted this step
  // (so using both never counts a step twice).
  void MarkStep();

  uint64_t iterations() const { return iterations_.load(std::memory_order_acquire); }
  // True once at least one iteration completed (claim 7: reuse may start).
  bool warmup_complete() const { return iterations() > 0; }
  // The recorded forward output whose backward read completed the last iteration (0 if none).
  uint64_t recorded_address() const;

 private:
  void CountLocked(uint64_t matched);

  mutable std::mutex mu_;
  // The forward phase in progress (or the one the current backward phase follows).
  std::vector<uint64_t> phase_outputs_;
  size_t phase_launches_ = 0;
  bool in_backward_ = false;
  // The backward phase in progress may complete an iteration (it follows a step-sized forward
  // phase and has not counted yet).
  bool candidate_ = false;
  size_t min_step_launches_ = 1;  // learned from the first recognised step
  uint64_t first_output_ = 0;
  bool counted_since_mark_ = false;
  std::atomic<uint64_t> iterations_{0};
};

}  // namespace vgpu

#endif  // VGPU_CLIENT_ITERATION_DETECTOR_H_
