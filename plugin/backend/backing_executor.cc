// What every backing executor shares (see backing_executor.h): the defaults of the optional
// operations and the executor-independent session every client gets.
#include "plugin/backend/backing_executor.h"

#include "plugin/backend/client_session.h"

namespace vgpu {

MemoryInfo BackingExecutor::DeviceMemoryInfo(uint32_t device) {
  if (device >= static_cast<uint32_t>(device_count())) return MemoryInfo{};
  return arena(device).Info();
}

absl::Status BackingExecutor::SynchronizeStream(ExecutorStream*) { return absl::OkStatus(); }

absl::StatusOr<std::unique_ptr<ExecutorDescriptor>> BackingExecutor::CreateDescriptor(
    uint8_t kind) {
  descriptors_created_.fetch_add(1, std::memory_order_relaxed);
  return std::make_unique<ExecutorDescriptor>(kind);
}

absl::Status BackingExecutor::SetDescriptor(ExecutorDescriptor& descriptor,
                                            absl::Span<const uint8_t> settings) {
  descriptor.set_settings(settings);
  return absl::OkStatus();
}

std::unique_ptr<ExecutorSession> BackingExecutor::OpenSession(
    CompletionSink* sink, uint64_t quota_bytes, std::shared_ptr<SharedQuota> shared_quota,
    std::shared_ptr<StreamThreadBudget> stream_threads) {
  SessionLimits limits = session_limits();
  if (stream_threads != nullptr) limits.stream_threads = std::move(stream_threads);
  return std::make_unique<ClientSession>(this, next_session_id_.fetch_add(1), sink, quota_bytes,
                                         std::move(limits), std::move(shared_quota));
}

}  // namespace vgpu
