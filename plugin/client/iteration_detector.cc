// IterationDetector (see iteration_detector.h).
#include "plugin/client/iteration_detector.h"

#include <algorithm>
#include <cstddef>

namespace vgpu {

void IterationDetector::CountLocked(uint64_t matched) {
  iterations_.fetch_add(1, std::memory_order_acq_rel);
  counted_since_mark_ = true;
  candidate_ = false;
  if (iterations_.load(std::memory_order_relaxed) == 1) {
    min_step_launches_ = std::max<size_t>(1, phase_launches_ / 2);
  }
  first_output_ = matched;
}

void IterationDetector::ClosePeriodicRunLocked() {
  periodic_run_open_ = false;
  periodic_run_.clear();
}

bool IterationDetector::ExtendPeriodicRunLocked(uint64_t signature) {
  if (!periodic_run_open_) return false;
  if (signature == 0) {
    ClosePeriodicRunLocked();
    return false;
  }
  if (periodic_run_.size() >= kMaxPeriodicRunLaunches) periodic_run_.clear();  // start again
  periodic_run_.push_back(signature);
  const size_t launches = periodic_run_.size();
  for (const size_t start : kPeriodicRunStarts) {
    if (start >= launches) break;
    const size_t length = launches - start;
    const size_t period = length / kInferenceRepeats;
    if (length % kInferenceRepeats != 0 || period < kMinPeriodLaunches) continue;
    const auto first = periodic_run_.begin() + static_cast<std::ptrdiff_t>(start);
    if (std::equal(first, first + period, first + period) &&
        std::equal(first, first + period, first + 2 * period)) {
      return true;
    }
  }
  return false;
}

bool IterationDetector::Observe(LaunchRole role, absl::Span<const uint64_t> inputs,
                                uint64_t output, uint64_t signature) {
  std::lock_guard<std::mutex> lock(mu_);
  ++launches_since_wait_;
  // Order-dependent combination (boost-style), never 0 for a non-empty run.
  run_signature_ ^= signature + 0x9e3779b97f4a7c15ull + (run_signature_ << 6) + (run_signature_ >> 2);
  run_signature_ |= 1;
  if (role == LaunchRole::kBackward) {
    backward_since_wait_ = true;
    ClosePeriodicRunLocked();
  }
  if (role == LaunchRole::kForward && !warmup_complete() && ExtendPeriodicRunLocked(signature)) {
    // A repeated forward-only run with no host wait in between: an inference warm-up. Not an
    // iteration (no step record), so Observe still returns false.
    inference_warmup_.store(true, std::memory_order_release);
    ClosePeriodicRunLocked();
  }
  if (role == LaunchRole::kForward) {
    if (in_backward_) {  // a new forward phase begins
      in_backward_ = false;
      phase_outputs_.clear();
      phase_launches_ = 0;
    }
    ++phase_launches_;
    if (output != 0 && phase_outputs_.size() < kMaxRecordedOutputs) {
      phase_outputs_.push_back(output);
    }
    return false;
  }
  if (!in_backward_) {  // the backward phase that follows this forward phase
    in_backward_ = true;
    candidate_ = phase_launches_ >= min_step_launches_;
  }
  if (!candidate_) return false;
  for (uint64_t input : inputs) {
    if (input != 0 &&
        std::find(phase_outputs_.begin(), phase_outputs_.end(), input) != phase_outputs_.end()) {
      CountLocked(input);
      return true;
    }
  }
  return false;
}

bool IterationDetector::ObserveHostWait() {
  std::lock_guard<std::mutex> lock(mu_);
  if (launches_since_wait_ == 0) return false;  // a second wait for the same work
  const uint64_t run = backward_since_wait_ ? 0 : run_signature_;
  equal_runs_ = run != 0 && run == last_forward_only_run_ ? equal_runs_ + 1 : 1;
  last_forward_only_run_ = run;
  launches_since_wait_ = 0;
  backward_since_wait_ = false;
  run_signature_ = 0;
  periodic_run_.clear();
  periodic_run_open_ = true;
  // Once warm (by a training step or earlier inference runs) signatures are no longer computed.
  if (run == 0 || equal_runs_ < kInferenceRepeats ||
      inference_warmup_.load(std::memory_order_relaxed) ||
      iterations_.load(std::memory_order_relaxed) > 0) {
    return false;
  }
  inference_warmup_.store(true, std::memory_order_release);
  return true;
}

void IterationDetector::MarkStep() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!counted_since_mark_) CountLocked(first_output_);
  counted_since_mark_ = false;
  candidate_ = false;
}

uint64_t IterationDetector::recorded_address() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_output_;
}

}  // namespace vgpu
