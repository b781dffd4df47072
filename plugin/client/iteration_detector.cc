// IterationDetector (see iteration_detector.h).
#include "plugin/client/iteration_detector.h"

#include <algorithm>

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

bool IterationDetector::Observe(LaunchRole role, absl::Span<const uint64_t> inputs,
                                uint64_t output) {
  std::lock_guard<std::mutex> lock(mu_);
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
