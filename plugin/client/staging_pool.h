// Host buffers that hold the bytes of in-process host-to-device copies until their stream has run
// them (DeviceClient::CopyHostToDevice takes a copy's bytes so that the event after it may
// complete at once). A buffer goes back to the pool when the last reference to it is dropped and
// is reused by a later copy of a similar size: a fresh allocation of megabytes costs a page fault
// per page on every copy (glibc returns large blocks to the system when they are freed).
#ifndef VGPU_CLIENT_STAGING_POOL_H_
#define VGPU_CLIENT_STAGING_POOL_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace vgpu {

class StagingPool : public std::enable_shared_from_this<StagingPool> {
 public:
  // Keeps at most `max_kept_bytes` of returned buffers (the oldest go first; a buffer larger
  // than that is freed when returned).
  static std::shared_ptr<StagingPool> Create(uint64_t max_kept_bytes);

  // A buffer of at least `size` bytes (a kept one of at most twice the size, or a new one), or
  // null without memory for it. The buffer returns to the pool when its last reference goes,
  // from any thread; it keeps the pool alive until then. Thread-safe.
  std::shared_ptr<uint8_t> Take(uint64_t size);

  // Bytes of the buffers kept for reuse. Thread-safe.
  uint64_t kept_bytes() const;

 private:
  explicit StagingPool(uint64_t max_kept_bytes) : max_kept_bytes_(max_kept_bytes) {}
  void Return(uint8_t* buffer, uint64_t capacity);

  struct Kept {
    uint64_t capacity;
    std::unique_ptr<uint8_t[]> buffer;
  };
  const uint64_t max_kept_bytes_;
  mutable std::mutex mu_;
  std::vector<Kept> kept_ ABSL_GUARDED_BY(mu_);
  uint64_t kept_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace vgpu

#endif  // VGPU_CLIENT_STAGING_POOL_H_
