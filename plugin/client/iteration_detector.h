// Detects the end of a training iteration from the addresses kernels use (METHOD.md, claim 8):
// it records the address of the output of the model's first layer (the first forward
// computation it sees), and during backward propagation compares each computation's inputs
// with it; an equal address means the iteration is complete. An explicit step mark
// (vgpu.mark_step(), the Keras callback) completes an iteration too. Correctness never
// depends on it: it only decides when descriptor reuse starts. Thread-safe.
#ifndef VGPU_CLIENT_ITERATION_DETECTOR_H_
#define VGPU_CLIENT_ITERATION_DETECTOR_H_

#include <atomic>
#include <cstdint>
#include <mutex>

#include "absl/types/span.h"

namespace vgpu {

enum class LaunchRole { kForward, kBackward };

class IterationDetector {
 public:
  // Observes one computation. `inputs` and `output` are device addresses (0 = none). Returns
  // true if this computation completed an iteration.
  bool Observe(LaunchRole role, absl::Span<const uint64_t> inputs, uint64_t output);

  // An explicit step boundary.
  void MarkStep();

  uint64_t iterations() const { return iterations_.load(std::memory_order_acquire); }
  // True once at least one iteration completed (claim 7: reuse may start).
  bool warmup_complete() const { return iterations() > 0; }
  // The recorded first-layer output address (0 if none yet).
  uint64_t recorded_address() const;

 private:
  mutable std::mutex mu_;
  uint64_t first_output_ = 0;
  // Set when the last boundary was seen; cleared by the next forward computation, so that the
  // several backward computations reading the same address count one iteration, not several.
  bool boundary_pending_ = false;
  std::atomic<uint64_t> iterations_{0};
};

}  // namespace vgpu

#endif  // VGPU_CLIENT_ITERATION_DETECTOR_H_
