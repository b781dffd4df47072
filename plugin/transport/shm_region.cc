// Shared-memory staging regions and their range allocator (see shm_region.h).
#include "plugin/transport/shm_region.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstring>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace vgpu {
namespace {

std::string ErrnoText() { return std::strerror(errno); }

absl::StatusOr<uint8_t*> MapShared(int fd, uint64_t bytes) {
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory region cannot be mapped read-write: ", ErrnoText()));
  }
  return static_cast<uint8_t*>(data);
}

}  // namespace

absl::StatusOr<std::shared_ptr<ShmRegion>> ShmRegion::Create(uint64_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("an empty shared memory region");
  ScopedFd fd(::memfd_create("vgpu-staging", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) {
    return absl::FailedPreconditionError(absl::StrCat("memfd_create: ", ErrnoText()));
  }
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("ftruncate of the memfd: ", ErrnoText()));
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("sealing the memfd: ", ErrnoText()));
  }
  absl::StatusOr<uint8_t*> data = MapShared(fd.get(), bytes);
  if (!data.ok()) return absl::FailedPreconditionError(data.status().message());
  return std::shared_ptr<ShmRegion>(new ShmRegion(std::move(fd), *data, bytes));
}

absl::StatusOr<std::shared_ptr<ShmRegion>> ShmRegion::Attach(ScopedFd fd, uint64_t declared_bytes,
                                                             uint64_t max_bytes) {
  auto refuse = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("shared memory refused: ", why));
  };
  if (!fd.valid()) return refuse("no file descriptor");
  if (declared_bytes == 0) return refuse("an empty region");
  if (declared_bytes > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("shared memory refused: a region of ", declared_bytes,
                     " bytes exceeds this connection's limit of ", max_bytes, " bytes"));
  }
  // The seals first, the size after: once F_SEAL_SHRINK is on, the file can never again be
  // shorter than the size read next, so no page of the mapping can lie beyond its end (SIGBUS).
  // Read the other way round, a tenant could shrink the file between the two reads and seal it
  // afterwards.
  const int seals = ::fcntl(fd.get(), F_GET_SEALS);
  if (seals < 0) return refuse("the descriptor is not a memfd (it cannot be sealed)");
  if ((seals & F_SEAL_SHRINK) == 0) {
    return refuse("the memfd is not sealed against shrinking (F_SEAL_SHRINK)");
  }
  struct stat status {};
  if (::fstat(fd.get(), &status) != 0) return refuse(absl::StrCat("fstat: ", ErrnoText()));
  if (!S_ISREG(status.st_mode)) return refuse("the descriptor is not a memfd (not a file)");
  struct statfs filesystem {};
  if (::fstatfs(fd.get(), &filesystem) != 0) {
    return refuse(absl::StrCat("fstatfs: ", ErrnoText()));
  }
  // Only plain shmem: a hugetlbfs memfd can fault (SIGBUS) when its pool runs dry.
  if (static_cast<uint64_t>(filesystem.f_type) != TMPFS_MAGIC) {
    return refuse("the descriptor is not a memfd on tmpfs");
  }
  // Exactly the declared size. Growing later does not matter (the mapping covers the declared
  // bytes only); shrinking cannot happen (sealed above).
  if (status.st_size < 0 || static_cast<uint64_t>(status.st_size) != declared_bytes) {
    return refuse(absl::StrCat("the memfd holds ", status.st_size, " bytes, the frame declared ",
                               declared_bytes));
  }
  absl::StatusOr<uint8_t*> data = MapShared(fd.get(), declared_bytes);
  if (!data.ok()) return refuse(data.status().message());
  return std::shared_ptr<ShmRegion>(new ShmRegion(std::move(fd), *data, declared_bytes));
}

void ShmRegion::Discard() {
  (void)::fallocate(fd_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                    static_cast<off_t>(size_));
}

ShmRegion::~ShmRegion() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

ShmSpace::ShmSpace(uint64_t bytes) {
  if (bytes > 0) free_.emplace(0, bytes);
  free_bytes_ = bytes;
}

std::optional<uint64_t> ShmSpace::TakeLocked(uint64_t bytes) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < bytes) continue;
    const uint64_t offset = it->first;
    const uint64_t rest = it->second - bytes;
    free_.erase(it);
    if (rest > 0) free_.emplace(offset + bytes, rest);
    free_bytes_ -= bytes;
    return offset;
  }
  return std::nullopt;
}

std::optional<uint64_t> ShmSpace::Allocate(uint64_t bytes, std::chrono::milliseconds wait) {
  if (bytes == 0) return std::nullopt;
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<uint64_t> offset;
  cv_.wait_for(lock, wait, [&] {
    if (closed_) return true;
    offset = TakeLocked(bytes);
    return offset.has_value();
  });
  return offset;  // empty when closed (the predicate checks closed_ first)
}

void ShmSpace::Release(uint64_t offset, uint64_t bytes) {
  if (bytes == 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = free_.emplace(offset, bytes);
    if (!inserted) return;  // released twice: a bug, but never corrupt the map
    free_bytes_ += bytes;
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto previous = std::prev(it);
      if (previous->first + previous->second == it->first) {
        previous->second += it->second;
        free_.erase(it);
      }
    }
  }
  cv_.notify_all();
}

void ShmSpace::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

uint64_t ShmSpace::free_bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return free_bytes_;
}

}  // namespace vgpu
