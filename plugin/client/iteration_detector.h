// Detects the end of a training iteration from the addresses kernels use (METHOD.md, claim 8):
// it records the address of the output of the model's first layer, and during backward
// propagation compares each computation's input addresses with it; an equal address means the
// iteration is complete. An explicit step mark (vgpu.mark_step(), the Keras callback) completes
// an iteration too. Correctness never depends on it: it only decides when descriptor reuse
// starts. Thread-safe.
//
// Which output is the first layer's is learned, not guessed: forward computations' outputs are
// recorded in order (since the last backward phase); at the end of the first backward phase the
// earliest recorded output that some backward computation read is taken as the first layer's
// output. That skips work done before training (weight initialisers) and survives models whose
// first launch is not a layer. If a later backward phase never reads the recorded address (the
// allocation moved: a new batch size), the address is learned again the same way. At most one
// iteration is counted per backward phase.
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
  // Forward outputs remembered per forward phase while learning the first layer's output.
  static constexpr size_t kMaxRecordedOutputs = 1024;

  // Observes one computation. `inputs` and `output` are device addresses (0 = none). Returns
  // true if an iteration was completed by (or just before) this computation.
  bool Observe(LaunchRole role, absl::Span<const uint64_t> inputs, uint64_t output);

  // An explicit step boundary. Counts an iteration unless detection already counted this step
  // (so using both never counts a step twice).
  void MarkStep();

  uint64_t iterations() const { return iterations_.load(std::memory_order_acquire); }
  // True once at least one iteration completed (claim 7: reuse may start).
  bool warmup_complete() const { return iterations() > 0; }
  // The first layer's output address as currently known (0 while learning).
  uint64_t recorded_address() const;

 private:
  // Ends a backward phase (a forward computation or a step mark follows it). Caller holds mu_.
  bool EndBackwardPhaseLocked();
  void CountLocked() {
    iterations_.fetch_add(1, std::memory_order_acq_rel);
    counted_since_mark_ = true;
  }

  mutable std::mutex mu_;
  uint64_t first_output_ = 0;              // the first layer's output (0: learning)
  std::vector<uint64_t> forward_outputs_;  // outputs of this forward phase, in order
  bool in_backward_ = false;
  bool counted_this_phase_ = false;        // an iteration was counted in this backward phase
  size_t earliest_read_ = SIZE_MAX;        // learning: earliest forward output read backward
  bool counted_since_mark_ = false;        // detection already counted this step
  std::atomic<uint64_t> iterations_{0};
};

}  // namespace vgpu

#endif  // VGPU_CLIENT_ITERATION_DETECTOR_H_
