// ClientCounters (see counters.h).
#include "plugin/client/counters.h"

#include "absl/strings/str_cat.h"

namespace vgpu {

void ClientCounters::AddAllocation(uint64_t bytes) {
  allocations_.fetch_add(1, std::memory_order_relaxed);
  int64_t now = bytes_in_use_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed) +
                static_cast<int64_t>(bytes);
  int64_t peak = peak_bytes_in_use_.load(std::memory_order_relaxed);
  while (now > peak &&
         !peak_bytes_in_use_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void ClientCounters::AddFree(uint64_t bytes) {
  frees_.fetch_add(1, std::memory_order_relaxed);
  bytes_in_use_.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
}

void ClientCounters::Reset() {
  for (auto& c : commands_) c.store(0, std::memory_order_relaxed);
  round_trips_.store(0, std::memory_order_relaxed);
  for (auto& kind : descriptor_calls_) {
    for (auto& verb : kind) verb.store(0, std::memory_order_relaxed);
  }
  descriptor_calls_local_.store(0, std::memory_order_relaxed);
  descriptor_calls_forwarded_.store(0, std::memory_order_relaxed);
  settings_updates_.store(0, std::memory_order_relaxed);
  queue_misses_.store(0, std::memory_order_relaxed);
  outputs_forwarded_.store(0, std::memory_order_relaxed);
  local_synchronizations_.store(0, std::memory_order_relaxed);
  early_events_.store(0, std::memory_order_relaxed);
  bytes_sent_.store(0, std::memory_order_relaxed);
  bytes_received_.store(0, std::memory_order_relaxed);
  bytes_to_device_.store(0, std::memory_order_relaxed);
  bytes_from_device_.store(0, std::memory_order_relaxed);
  allocations_.store(0, std::memory_order_relaxed);
  frees_.store(0, std::memory_order_relaxed);
  peak_bytes_in_use_.store(bytes_in_use_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

std::string ClientCounters::ToJson() const {
  std::string json = "{\"commands\": {";
  uint64_t total = 0;
  for (size_t i = 0; i < commands_.size(); ++i) {
    uint64_t n = commands_[i].load(std::memory_order_relaxed);
    total += n;
    absl::StrAppend(&json, i == 0 ? "" : ", ", "\"", CommandKindName(static_cast<CommandKind>(i)),
                    "\": ", n);
  }
  absl::StrAppend(&json, "}, \"descriptor_calls\": {");
  static constexpr const char* kVerbs[] = {"create", "set", "destroy"};
  for (int k = 0; k < kNumDescriptorKinds; ++k) {
    absl::StrAppend(&json, k == 0 ? "" : ", ", "\"",
                    DescriptorKindName(static_cast<DescriptorKind>(k + 1)), "\": {");
    for (int v = 0; v < kNumDescriptorVerbs; ++v) {
      absl::StrAppend(&json, v == 0 ? "" : ", ", "\"", kVerbs[v],
                      "\": ", descriptor_calls_[k][v].load(std::memory_order_relaxed));
    }
    absl::StrAppend(&json, "}");
  }
  absl::StrAppend(&json, "}, \"descriptor_calls_local\": ",
                  descriptor_calls_local_.load(std::memory_order_relaxed),
                  ", \"descriptor_calls_forwarded\": ",
                  descriptor_calls_forwarded_.load(std::memory_order_relaxed),
                  ", \"descriptor_settings_updates\": ",
                  settings_updates_.load(std::memory_order_relaxed),
                  ", \"descriptor_queue_misses\": ", queue_misses_.load(std::memory_order_relaxed));
  absl::StrAppend(&json, ", \"commands_sent\": ", total,
                  ", \"launches\": ", commands(CommandKind::kLaunch),
                  ", \"round_trips\": ", round_trips(),
                  ", \"synchronizations_local\": ", local_synchronizations(),
                  ", \"events_completed_early\": ", early_events(),
                  ", \"bytes_sent\": ", bytes_sent_.load(std::memory_order_relaxed),
                  ", \"bytes_received\": ", bytes_received_.load(std::memory_order_relaxed),
                  ", \"bytes_to_device\": ", bytes_to_device(),
                  ", \"bytes_from_device\": ", bytes_from_device(),
                  ", \"allocations\": ", allocations_.load(std::memory_order_relaxed),
                  ", \"frees\": ", frees_.load(std::memory_order_relaxed),
                  ", \"bytes_in_use\": ", bytes_in_use(),
                  ", \"peak_bytes_in_use\": ", peak_bytes_in_use_.load(std::memory_order_relaxed),
                  ", \"outputs_forwarded\": ", outputs_forwarded(),
                  "}");
  return json;
}

}  // namespace vgpu
