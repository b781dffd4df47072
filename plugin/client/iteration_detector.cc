// IterationDetector (see iteration_detector.h).
#include "plugin/client/iteration_detector.h"

#include <algorithm>

namespace vgpu {

bool IterationDetector::EndBackwardPhaseLocked() {
  bool counted = false;
  if (first_output_ == 0 && earliest_read_ != SIZE_MAX) {
    // Learned: the earliest forward output the backward phase read is the first layer's.
    first_output_ = forward_outputs_[earliest_read_];
    if (!counted_this_phase_) {
      CountLocked();
      counted = true;
    }
  } else if (first_output_ != 0 && !counted_this_phase_) {
    first_output_ = 0;  // never read this time: the address moved; learn it again
  }
  in_backward_ = false;
  counted_this_phase_ = false;
  earliest_read_ = SIZE_MAX;
  forward_outputs_.clear();
  return counted;
}

bool IterationDetector::Observe(LaunchRole role, absl::Span<const uint64_t> inputs,
                                uint64_t output) {
  std::lock_guard<std::mutex> lock(mu_);
  if (role == LaunchRole::kForward) {
    const bool counted = in_backward_ && EndBackwardPhaseLocked();
    if (output != 0 && forward_outputs_.size() < kMaxRecordedOutputs) {
      forward_outputs_.push_back(output);
    }
    return counted;
  }
  in_backward_ = true;
  if (counted_this_phase_) return false;
  if (first_output_ != 0) {
    if (std::find(inputs.begin(), inputs.end(), first_output_) == inputs.end()) return false;
    counted_this_phase_ = true;
    CountLocked();
    return true;
  }
  for (uint64_t input : inputs) {
    if (input == 0) continue;
    auto it = std::find(forward_outputs_.begin(), forward_outputs_.end(), input);
    if (it != forward_outputs_.end()) {
      earliest_read_ = std::min(earliest_read_, static_cast<size_t>(it - forward_outputs_.begin()));
    }
  }
  return false;
}

void IterationDetector::MarkStep() {
  std::lock_guard<std::mutex> lock(mu_);
  if (in_backward_) EndBackwardPhaseLocked();
  if (!counted_since_mark_) CountLocked();
  counted_since_mark_ = false;
}

uint64_t IterationDetector::recorded_address() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_output_;
}

}  // namespace vgpu
