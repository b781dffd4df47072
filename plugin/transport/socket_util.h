// Sockets for the remote transport and the server: an owning file descriptor, connecting and
// listening, whole-frame writes and a buffered frame reader. Errors are absl::Status.
#ifndef VGPU_TRANSPORT_SOCKET_UTIL_H_
#define VGPU_TRANSPORT_SOCKET_UTIL_H_

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugin/common/backend_address.h"
#include "plugin/protocol/wire_format.h"

namespace vgpu {



// An owned file descriptor, closed on destruction. Move-only.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() { Reset(); }
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.Release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = other.Release();
    }
    return *this;
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Reset();

 private:
  int fd_ = -1;
};

// Connects (blocking, at most `timeout_ms` for TCP) and sets TCP_NODELAY and keepalive.
absl::StatusOr<ScopedFd> ConnectSocket(const SocketAddress& address, int timeout_ms = 5000);
// Binds and listens (a stale Unix socket file is replaced). For tcp port 0, `bound_port` gets
// the port chosen.
absl::StatusOr<ScopedFd> ListenSocket(const SocketAddress& address, uint16_t* bound_port);
// Sets TCP_NODELAY and a short keepalive on a TCP socket (no-op on Unix sockets).
void TuneSocket(int fd);

// Writes all of `parts` (blocking; retries on EINTR and short writes). Not synchronised: the
// caller serialises writers. MSG_NOSIGNAL: a closed peer is an error, never SIGPIPE.
absl::Status WriteAll(int fd, std::vector<iovec> parts);

// Writes one frame: header + payload parts.
absl::Status WriteFrame(int fd, wire::MessageType type, uint64_t sequence,
                        std::vector<iovec> payload_parts);
// Writes one frame whose first bytes carry `passed_fd` (SCM_RIGHTS; Unix sockets only). The
// caller keeps owning `passed_fd`; the peer receives its own copy.
absl::Status WriteFrameWithFd(int fd, wire::MessageType type, uint64_t sequence,
                              std::vector<iovec> payload_parts, int passed_fd);

// Reads frames from a socket through a buffer, so that small frames cost no extra system call.
// One reader per socket; not thread-safe.
class FrameReader {
 public:
  static constexpr size_t kDefaultBufferBytes = 256 * 1024;
  // A payload larger than this (and not yet in the buffer) grows as its bytes arrive.
  static constexpr size_t kPayloadChunkBytes = 1 << 20;

  // `received`, if given, counts the bytes received (for another thread to watch progress).
  explicit FrameReader(int fd, size_t buffer_bytes = kDefaultBufferBytes,
                       std::atomic<uint64_t>* received = nullptr)
      : fd_(fd), buffer_(buffer_bytes), received_(received) {}
  // Reads and validates the next header. Unavailable on EOF or a socket error.
  absl::StatusOr<wire::FrameHeader> ReadHeader();
  // Reads exactly `size` bytes into `dst` (large reads bypass the buffer). `dst` may be null
  // to discard.
  absl::Status ReadExact(void* dst, size_t size);
  // Reads a payload of `size` bytes into `out` (resized to `size`) without allocating the
  // declared size before the bytes arrive: `out` grows at most kPayloadChunkBytes (or its own
  // size, doubling) ahead of the data received. `grow(n)` is called before each growth by n
  // bytes; an error it returns ends the read and is returned. Small payloads and payloads
  // already buffered are read at once (one grow call).
  absl::Status ReadPayload(size_t size, std::vector<uint8_t>* out,
                           absl::FunctionRef<absl::Status(size_t)> grow);
  // Enlarges the read buffer (never shrinks it; buffered bytes are kept).
  void EnsureBufferBytes(size_t bytes) {
    if (bytes > buffer_.size()) buffer_.resize(bytes);
  }
  // Bytes of the stream handed out so far (by ReadHeader, ReadExact, ReadPayload): the offset
  // of the next frame when called between frames.
  uint64_t consumed() const { return total_received_ - (end_ - begin_); }
  // The file descriptor a peer passed (SCM_RIGHTS) together with some of the bytes
  // [frame_begin, frame_end) of the stream, if any. A descriptor belongs to the bytes of the
  // recvmsg that brought it: at most one is kept (any other is closed on arrival), and it is
  // closed as soon as those bytes have all been consumed without a frame taking it (the next
  // ReadHeader), so a descriptor sent with a frame that does not expect one is never kept past
  // that frame (a peer passing its own socket cannot hide its disconnection).
  ScopedFd TakeFdFor(uint64_t frame_begin, uint64_t frame_end);

 private:
  absl::Status Fill();  // at least one more byte into the buffer
  absl::Status Receive(void* dst, size_t capacity, size_t* received);  // one recv
  int fd_;
  std::vector<uint8_t> buffer_;
  size_t begin_ = 0;
  size_t end_ = 0;
  // Closes the kept descriptor once every byte it came with has been consumed.
  void DropConsumedFd();
  std::atomic<uint64_t>* const received_;
  uint64_t total_received_ = 0;  // bytes received from the socket
  ScopedFd received_fd_;
  uint64_t fd_bytes_begin_ = 0, fd_bytes_end_ = 0;  // the stream bytes it came with
};

}  // namespace vgpu

#endif  // VGPU_TRANSPORT_SOCKET_UTIL_H_
