// IterationDetector (see iteration_detector.h).
#include "plugin/client/iteration_detector.h"

namespace vgpu {

bool IterationDetector::Observe(LaunchRole role, absl::Span<const uint64_t> inputs,
                                uint64_t output) {
  std::lock_guard<std::mutex> lock(mu_);
  if (role == LaunchRole::kForward) {
    if (first_output_ == 0 && output != 0) first_output_ = output;
    boundary_pending_ = false;
    return false;
  }
  if (first_output_ == 0 || boundary_pending_) return false;
  for (uint64_t input : inputs) {
    if (input == first_output_) {
      boundary_pending_ = true;
      iterations_.fetch_add(1, std::memory_order_acq_rel);
      return true;
    }
  }
  return false;
}

void IterationDetector::MarkStep() {
  std::lock_guard<std::mutex> lock(mu_);
  boundary_pending_ = true;
  iterations_.fetch_add(1, std::memory_order_acq_rel);
}

uint64_t IterationDetector::recorded_address() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_output_;
}

}  // namespace vgpu
