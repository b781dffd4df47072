// The shared-memory data path of a same-host (Unix socket) connection to a `vgpu server`: a
// staging region in a sealed memfd that the client creates, maps and passes to the server once
// (SCM_RIGHTS, wire::MessageType::kShmAttach); bulk copies then name an offset and a length in
// it instead of carrying their bytes through the socket (wire_format.h, flag kShmData).
//
// ShmRegion owns the descriptor and the mapping (RAII) on either side. The server side
// (Attach) treats the descriptor as hostile: it must be a memfd on tmpfs, sealed against
// shrinking (so that no page of the mapping can vanish under the server: a truncated shared
// file would SIGBUS it), of exactly the declared size and within the server's limit. The bytes
// inside stay writable by the tenant at any time: the server never reads metadata from the
// region, only payload bytes at offsets it validated from the command frame (Contains).
//
// ShmSpace hands out contiguous ranges of a client's region to copies in flight (first fit,
// freed ranges coalesce).
#ifndef VGPU_TRANSPORT_SHM_REGION_H_
#define VGPU_TRANSPORT_SHM_REGION_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "plugin/transport/socket_util.h"

namespace vgpu {

class ShmRegion {
 public:
  // Client side: a new memfd of `bytes` (> 0), sealed against shrinking, growing and further
  // seals, mapped read-write. FailedPrecondition when memfd or sealing is unavailable.
  static absl::StatusOr<std::shared_ptr<ShmRegion>> Create(uint64_t bytes);
  // Server side: validates the descriptor a tenant sent (see the top of this file; every
  // refusal is InvalidArgument / ResourceExhausted naming the reason) and maps it read-write.
  // Takes ownership of `fd` (closed on failure too). `declared_bytes` is the size the tenant
  // announced, `max_bytes` the server's limit.
  static absl::StatusOr<std::shared_ptr<ShmRegion>> Attach(ScopedFd fd, uint64_t declared_bytes,
                                                           uint64_t max_bytes);
  // Unmaps and closes.
  ~ShmRegion();
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // The memfd (client: to send it). Owned by the region.
  int fd() const { return fd_.get(); }
  // Gives the region's pages back to the system (they read as zeros from now on) while keeping
  // the mapping, so that a thread still touching it is harmless. For a connection that died.
  void Discard();
  // True when [offset, offset + length) lies inside the region (no overflow possible).
  bool Contains(uint64_t offset, uint64_t length) const {
    return offset <= size_ && length <= size_ - offset;
  }

 private:
  ShmRegion(ScopedFd fd, uint8_t* data, uint64_t size)
      : fd_(std::move(fd)), data_(data), size_(size) {}
  ScopedFd fd_;
  uint8_t* const data_;
  const uint64_t size_;
};

// Ranges of a region lent to copies in flight. Thread-safe.
class ShmSpace {
 public:
  explicit ShmSpace(uint64_t bytes);
  // A free range of `bytes` (> 0): its offset. Waits at most `wait` for one to be released;
  // nullopt if none did (the caller sends the copy through the socket instead, so a full
  // region never blocks a client) or after Close().
  std::optional<uint64_t> Allocate(uint64_t bytes, std::chrono::milliseconds wait);
  // Returns a range from Allocate.
  void Release(uint64_t offset, uint64_t bytes);
  // Fails every Allocate from now on (the connection died).
  void Close();
  uint64_t free_bytes();

 private:
  std::optional<uint64_t> TakeLocked(uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, uint64_t> free_ ABSL_GUARDED_BY(mu_);  // offset -> length, disjoint
  uint64_t free_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace vgpu

#endif  // VGPU_TRANSPORT_SHM_REGION_H_
