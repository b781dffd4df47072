// What the client runtime counts: commands sent by kind, round trips, bytes moved to and from
// the device, allocations. Lock-free (relaxed atomics); read by `vgpu.stats()`.
#ifndef VGPU_CLIENT_COUNTERS_H_
#define VGPU_CLIENT_COUNTERS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "plugin/common/activity.h"
#include "plugin/protocol/command.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu {

enum class DescriptorVerb { kCreate = 0, kSet = 1, kDestroy = 2 };
inline constexpr int kNumDescriptorVerbs = 3;

class ClientCounters {
 public:
  // Counts one command of `kind`; `round_trip` if the sender waited for a reply.
  void CountCommand(CommandKind kind, bool round_trip) {
    commands_[static_cast<size_t>(kind)].fetch_add(1, std::memory_order_relaxed);
    if (round_trip) round_trips_.fetch_add(1, std::memory_order_relaxed);
  }
  // Bytes of protocol frames: commands sent, and replies and device-to-host data received. The
  // in-process transport counts what the same commands would occupy on the wire.
  void AddBytesSent(uint64_t bytes) { bytes_sent_.fetch_add(bytes, std::memory_order_relaxed); }
  void AddBytesReceived(uint64_t bytes) {
    bytes_received_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void AddBytesToDevice(uint64_t bytes) { bytes_to_device_.fetch_add(bytes, std::memory_order_relaxed); }
  void AddBytesFromDevice(uint64_t bytes) { bytes_from_device_.fetch_add(bytes, std::memory_order_relaxed); }
  void AddAllocation(uint64_t bytes);
  // Reuse mode: a reused descriptor got other settings than it had (a changed call sequence or
  // shape); a create found no reusable descriptor in its queue.
  void CountSettingsUpdate() { settings_updates_.fetch_add(1, std::memory_order_relaxed); }
  void CountQueueMiss() { queue_misses_.fetch_add(1, std::memory_order_relaxed); }
  // An op kernel's output that TensorFlow let take over an input's buffer (computed in place).
  void CountForwardedOutput() { outputs_forwarded_.fetch_add(1, std::memory_order_relaxed); }
  // A synchronisation answered without a round trip (DeviceClient::SynchronizeDevice).
  void CountLocalSynchronization() {
    local_synchronizations_.fetch_add(1, std::memory_order_relaxed);
  }
  // An event that completed when it was recorded (DeviceClient::RecordEvent).
  void CountEarlyEvent() { early_events_.fetch_add(1, std::memory_order_relaxed); }
  // A descriptor call of the virtual DNN API: answered locally or forwarded to the executor.
  void CountDescriptorCall(DescriptorKind kind, DescriptorVerb verb, bool forwarded) {
    descriptor_calls_[static_cast<size_t>(kind) - 1][static_cast<size_t>(verb)].fetch_add(
        1, std::memory_order_relaxed);
    (forwarded ? descriptor_calls_forwarded_ : descriptor_calls_local_)
        .fetch_add(1, std::memory_order_relaxed);
    activity::CountDescriptorCall(forwarded);  // the issuing op's, while a profile is taken
  }
  void AddFree(uint64_t bytes);

  uint64_t commands(CommandKind kind) const {
    return commands_[static_cast<size_t>(kind)].load(std::memory_order_relaxed);
  }
  uint64_t round_trips() const { return round_trips_.load(std::memory_order_relaxed); }
  uint64_t descriptor_calls_local() const {
    return descriptor_calls_local_.load(std::memory_order_relaxed);
  }
  uint64_t descriptor_calls_forwarded() const {
    return descriptor_calls_forwarded_.load(std::memory_order_relaxed);
  }
  uint64_t settings_updates() const { return settings_updates_.load(std::memory_order_relaxed); }
  uint64_t queue_misses() const { return queue_misses_.load(std::memory_order_relaxed); }
  uint64_t outputs_forwarded() const {
    return outputs_forwarded_.load(std::memory_order_relaxed);
  }
  uint64_t local_synchronizations() const {
    return local_synchronizations_.load(std::memory_order_relaxed);
  }
  uint64_t early_events() const { return early_events_.load(std::memory_order_relaxed); }
  uint64_t bytes_to_device() const { return bytes_to_device_.load(std::memory_order_relaxed); }
  uint64_t bytes_from_device() const { return bytes_from_device_.load(std::memory_order_relaxed); }
  int64_t bytes_in_use() const { return bytes_in_use_.load(std::memory_order_relaxed); }

  // Zeroes every counter except bytes_in_use (memory still held stays held).
  void Reset();

  // A JSON object: {"commands": {"launch": n, ...}, "commands_sent": n, "round_trips": n, ...}.
  std::string ToJson() const;

 private:
  std::array<std::atomic<uint64_t>, static_cast<size_t>(CommandKind::kNumKinds)> commands_{};
  std::atomic<uint64_t> round_trips_{0};
  std::array<std::array<std::atomic<uint64_t>, kNumDescriptorVerbs>, kNumDescriptorKinds>
      descriptor_calls_{};
  std::atomic<uint64_t> descriptor_calls_local_{0};
  std::atomic<uint64_t> settings_updates_{0};
  std::atomic<uint64_t> queue_misses_{0};
  std::atomic<uint64_t> outputs_forwarded_{0};
  std::atomic<uint64_t> local_synchronizations_{0};
  std::atomic<uint64_t> early_events_{0};
  std::atomic<uint64_t> descriptor_calls_forwarded_{0};
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<uint64_t> bytes_to_device_{0};
  std::atomic<uint64_t> bytes_from_device_{0};
  std::atomic<uint64_t> allocations_{0};
  std::atomic<uint64_t> frees_{0};
  std::atomic<int64_t> bytes_in_use_{0};
  std::atomic<int64_t> peak_bytes_in_use_{0};
};

}  // namespace vgpu

#endif  // VGPU_CLIENT_COUNTERS_H_
