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
//  * inference has no backward phase, so it never completes an iteration of the claim's kind:
//    a forward-only run of launches between two host waits (the host blocking until the device
//    is done: a device or stream synchronisation) that repeats the previous one launch for
//    launch (the same kernels with the same parameters and descriptor settings, in the same
//    order) for the third time in a row completes the warm-up as an inference iteration (a
//    served model, a repeated tf.function). Three, not two: a model's initialisation can run
//    the same small initialiser twice between waits, and training must keep its first step as
//    the warm-up. It is not counted in iterations() (no step record), and a phase
//    with a backward launch never counts as one.
//  * a repeated tf.function called with no host wait between its runs (nothing read back)
//    makes one long run, which never equals the previous one. So the forward-only launches
//    since the last host wait are also checked for a period: when the launches from one of a
//    few starting points (the host wait, then the 193rd, 577th and 1345th launch after it) to
//    the latest are three equal blocks of P launches, P at least kMinPeriodLaunches (the
//    launch signatures compared one by one), the warm-up completes as an inference iteration
//    too. The later starting points find a loop that begins after other work (the model's
//    initialisation); after kMaxPeriodicRunLaunches launches the search starts again from the
//    next one. The period must be long, so that initialisers (a few launches each) do not
//    qualify, and a backward launch ends the search until the next host wait, so that a
//    training step is never taken for an inference run.
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

  // Observes one computation. `inputs` and `output` are device addresses (0 = none);
  // `signature` identifies what ran (a hash of its kernel, parameters and descriptor settings).
  // Returns true if this computation completed an iteration.
  bool Observe(LaunchRole role, absl::Span<const uint64_t> inputs, uint64_t output,
               uint64_t signature = 0);

  // The host waits for the device (see the top of the file). Returns true if this completed
  // the warm-up as an inference iteration.
  bool ObserveHostWait();

  // An explicit step boundary. Counts an iteration unless detection already counted this step
  // (so using both never counts a step twice).
  void MarkStep();

  uint64_t iterations() const { return iterations_.load(std::memory_order_acquire); }
  // True once at least one iteration completed (claim 7: reuse may start).
  // True once at least one iteration completed, or a repeated inference run was seen.
  bool warmup_complete() const {
    return iterations() > 0 || inference_warmup_.load(std::memory_order_acquire);
  }
  bool inference_warmup() const { return inference_warmup_.load(std::memory_order_acquire); }
  // The recorded forward output whose backward read completed the last iteration (0 if none).
  uint64_t recorded_address() const;

 private:
  void CountLocked(uint64_t matched);
  // Adds a forward launch's signature to the periodic run; true if the launches from one of
  // its starting points on are now three equal blocks of at least kMinPeriodLaunches launches
  // (see the top of the file).
  bool ExtendPeriodicRunLocked(uint64_t signature);
  // Ends the search for a period until the next host wait.
  void ClosePeriodicRunLocked();

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
  // Launches since the last host wait, whether one of them was a backward one, the combined
  // signature of those launches, the signature of the last forward-only run between host waits
  // (0: none) and how many runs in a row had it.
  static constexpr int kInferenceRepeats = 3;
  // The periodic run: the shortest period that counts, and the most launches kept to find one.
  static constexpr size_t kMinPeriodLaunches = 64;
  static constexpr size_t kMaxPeriodicRunLaunches = 3 * 1024;
  static constexpr size_t kPeriodicRunStarts[] = {0, 192, 576, 1344};
  size_t launches_since_wait_ = 0;
  bool backward_since_wait_ = false;
  uint64_t run_signature_ = 0;
  uint64_t last_forward_only_run_ = 0;
  int equal_runs_ = 0;
  // The signatures of the forward-only launches since the last host wait, while a period may
  // still be found (cleared by a backward launch, a launch without signature or the bound).
  std::vector<uint64_t> periodic_run_;
  bool periodic_run_open_ = true;
  std::atomic<bool> inference_warmup_{false};
};

}  // namespace vgpu

#endif  // VGPU_CLIENT_ITERATION_DETECTOR_H_
