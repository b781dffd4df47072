// Socket helpers (see socket_util.h).
#include "plugin/transport/socket_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "plugin/common/status_macros.h"

namespace vgpu {
namespace {

absl::Status Errno(absl::string_view what) {
  int error = errno;
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(error)));
}

}  // namespace

void ScopedFd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void TuneSocket(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  int idle = 2, interval = 1, count = 3;  // a silent dead peer is noticed within ~5 s
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

absl::StatusOr<ScopedFd> ConnectSocket(const SocketAddress& address, int timeout_ms) {
  if (address.kind == SocketAddress::Kind::kUnix) {
    ScopedFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return Errno("socket");
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, address.path.c_str(), sizeof(addr.sun_path) - 1);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return Errno(absl::StrCat("connect to ", address.endpoint));
    }
    return fd;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* results = nullptr;
  int rc = ::getaddrinfo(address.host.c_str(), std::to_string(address.port).c_str(), &hints,
                         &results);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", address.host, ": ", ::gai_strerror(rc)));
  }
  absl::Status last = absl::UnavailableError(absl::StrCat("no address for ", address.host));
  for (addrinfo* ai = results; ai != nullptr; ai = ai->ai_next) {
    ScopedFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) continue;
    // Non-blocking connect bounded by timeout_ms, then back to blocking.
    int flags = ::fcntl(fd.get(), F_GETFL, 0);
    ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK);
    int c = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
    if (c != 0 && errno == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      int ready = ::poll(&p, 1, timeout_ms);
      int error = 0;
      socklen_t len = sizeof(error);
      if (ready <= 0) {
        errno = ETIMEDOUT;
      } else if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len) == 0) {
        errno = error;
      }
      c = (ready > 0 && error == 0) ? 0 : -1;
    }
    if (c != 0) {
      last = Errno(absl::StrCat("connect to ", address.endpoint));
      continue;
    }
    ::fcntl(fd.get(), F_SETFL, flags);
    TuneSocket(fd.get());
    ::freeaddrinfo(results);
    return fd;
  }
  ::freeaddrinfo(results);
  return last;
}

absl::StatusOr<ScopedFd> ListenSocket(const SocketAddress& address, uint16_t* bound_port) {
  if (address.kind == SocketAddress::Kind::kUnix) {
    ScopedFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return Errno("socket");
    struct stat st;
    if (::stat(address.path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
      ::unlink(address.path.c_str());  // a stale socket of an earlier server
    }
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, address.path.c_str(), sizeof(addr.sun_path) - 1);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return Errno(absl::StrCat("bind ", address.endpoint));
    }
    if (::listen(fd.get(), 64) != 0) return Errno("listen");
    return fd;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* results = nullptr;
  const char* host = address.host.empty() || address.host == "*" ? nullptr : address.host.c_str();
  int rc = ::getaddrinfo(host, std::to_string(address.port).c_str(), &hints, &results);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve ", address.host, ": ", ::gai_strerror(rc)));
  }
  absl::Status last = absl::UnavailableError("no address to listen on");
  for (addrinfo* ai = results; ai != nullptr; ai = ai->ai_next) {
    ScopedFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) continue;
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd.get(), 64) != 0) {
      last = Errno(absl::StrCat("listen on ", address.endpoint));
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
    if (bound_port != nullptr) {
      *bound_port = ntohs(bound.ss_family == AF_INET6
                              ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    }
    ::freeaddrinfo(results);
    return fd;
  }
  ::freeaddrinfo(results);
  return last;
}

absl::Status WriteAll(int fd, std::vector<iovec> parts) {
  size_t index = 0;
  while (index < parts.size()) {
    msghdr message{};
    message.msg_iov = parts.data() + index;
    message.msg_iovlen = std::min<size_t>(parts.size() - index, IOV_MAX);
    ssize_t written = ::sendmsg(fd, &message, MSG_NOSIGNAL);
    if (written < 0) {
      if (errno == EINTR) continue;
      return Errno("write");
    }
    size_t left = static_cast<size_t>(written);
    while (index < parts.size() && left >= parts[index].iov_len) {
      left -= parts[index].iov_len;
      ++index;
    }
    if (left > 0) {
      parts[index].iov_base = static_cast<uint8_t*>(parts[index].iov_base) + left;
      parts[index].iov_len -= left;
    }
  }
  return absl::OkStatus();
}

absl::Status WriteFrame(int fd, wire::MessageType type, uint64_t sequence,
                        std::vector<iovec> payload_parts) {
  uint64_t length = 0;
  for (const iovec& part : payload_parts) length += part.iov_len;
  if (length > wire::kMaxPayloadBytes) {
    return absl::InvalidArgumentError(absl::StrCat("frame of ", length, " bytes is too large"));
  }
  uint8_t header[wire::kHeaderBytes];
  wire::EncodeHeader({type, sequence, static_cast<uint32_t>(length)}, header);
  payload_parts.insert(payload_parts.begin(), iovec{header, sizeof(header)});
  return WriteAll(fd, std::move(payload_parts));
}

absl::Status WriteFrameWithFd(int fd, wire::MessageType type, uint64_t sequence,
                              std::vector<iovec> payload_parts, int passed_fd) {
  uint64_t length = 0;
  for (const iovec& part : payload_parts) length += part.iov_len;
  if (length > wire::kMaxPayloadBytes) {
    return absl::InvalidArgumentError("frame payload exceeds the limit");
  }
  uint8_t header[wire::kHeaderBytes];
  wire::EncodeHeader({type, sequence, static_cast<uint32_t>(length)}, header);
  std::vector<iovec> parts;
  parts.reserve(payload_parts.size() + 1);
  parts.push_back(iovec{header, sizeof(header)});
  parts.insert(parts.end(), payload_parts.begin(), payload_parts.end());
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = parts.data();
  message.msg_iovlen = std::min<size_t>(parts.size(), IOV_MAX);
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&message);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &passed_fd, sizeof(int));
  ssize_t written;
  do {
    written = ::sendmsg(fd, &message, MSG_NOSIGNAL);
  } while (written < 0 && errno == EINTR);
  if (written < 0) return Errno("write");
  // The descriptor went with the first byte; the rest (if the write was short) goes plainly.
  size_t left = static_cast<size_t>(written);
  size_t index = 0;
  while (index < parts.size() && left >= parts[index].iov_len) {
    left -= parts[index].iov_len;
    ++index;
  }
  if (index == parts.size()) return absl::OkStatus();
  parts[index].iov_base = static_cast<uint8_t*>(parts[index].iov_base) + left;
  parts[index].iov_len -= left;
  return WriteAll(fd, std::vector<iovec>(parts.begin() + index, parts.end()));
}

absl::Status FrameReader::Receive(void* dst, size_t capacity, size_t* received) {
  for (;;) {
    // recvmsg with room for a few descriptors: passed ones are kept (the first) or closed,
    // never leaked; MSG_CTRUNC drops (closes) any beyond the room.
    alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
    iovec part{dst, capacity};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    ssize_t n = ::recvmsg(fd_, &message, MSG_CMSG_CLOEXEC);
    if (n >= 0 && message.msg_controllen > 0) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
          int passed = -1;
          std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
          ScopedFd owned(passed);
          if (!received_fd_.valid() && n > 0) {
            received_fd_ = std::move(owned);
            fd_bytes_begin_ = total_received_;
            fd_bytes_end_ = total_received_ + static_cast<uint64_t>(n);
          }
        }
      }
    }
    if (n > 0) {
      *received = static_cast<size_t>(n);
      total_received_ += static_cast<uint64_t>(n);
      if (received_ != nullptr) received_->fetch_add(*received, std::memory_order_relaxed);
      return absl::OkStatus();
    }
    if (n == 0) return absl::UnavailableError("connection closed by the peer");
    if (errno == EINTR) continue;
    return Errno("read");
  }
}

absl::Status FrameReader::Fill() {
  if (begin_ == end_) begin_ = end_ = 0;
  if (end_ == buffer_.size()) {  // compact
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  size_t n = 0;
  VGPU_RETURN_IF_ERROR(Receive(buffer_.data() + end_, buffer_.size() - end_, &n));
  end_ += n;
  return absl::OkStatus();
}

ScopedFd FrameReader::TakeFdFor(uint64_t frame_begin, uint64_t frame_end) {
  if (!received_fd_.valid() || fd_bytes_end_ <= frame_begin || fd_bytes_begin_ >= frame_end) {
    return ScopedFd();
  }
  return std::move(received_fd_);
}

void FrameReader::DropConsumedFd() {
  if (received_fd_.valid() && fd_bytes_end_ <= consumed()) received_fd_.Reset();
}

absl::StatusOr<wire::FrameHeader> FrameReader::ReadHeader() {
  DropConsumedFd();  // before waiting for more bytes: the frames it came with are done
  uint8_t header[wire::kHeaderBytes];
  if (absl::Status s = ReadExact(header, sizeof(header)); !s.ok()) return s;
  return wire::DecodeHeader(absl::MakeConstSpan(header, sizeof(header)));
}

absl::Status FrameReader::ReadExact(void* dst, size_t size) {
  uint8_t* out = static_cast<uint8_t*>(dst);
  while (size > 0) {
    if (begin_ < end_) {
      size_t n = std::min(size, end_ - begin_);
      if (out != nullptr) {
        std::memcpy(out, buffer_.data() + begin_, n);
        out += n;
      }
      begin_ += n;
      size -= n;
      continue;
    }
    if (out != nullptr && size >= buffer_.size() / 2) {  // large: straight into the destination
      size_t n = 0;
      VGPU_RETURN_IF_ERROR(Receive(out, size, &n));
      out += n;
      size -= n;
      continue;
    }
    VGPU_RETURN_IF_ERROR(Fill());
  }
  return absl::OkStatus();
}

absl::Status FrameReader::ReadPayload(size_t size, std::vector<uint8_t>* out,
                                      absl::FunctionRef<absl::Status(size_t)> grow) {
  out->clear();
  if (size <= kPayloadChunkBytes || size <= end_ - begin_) {  // the common, small case
    VGPU_RETURN_IF_ERROR(grow(size));
    out->resize(size);
    return ReadExact(out->data(), size);
  }
  size_t filled = 0;
  while (filled < size) {
    if (filled == out->size()) {  // full: grow by a chunk, or double, but never past `size`
      size_t target = std::min(size, filled + std::max(kPayloadChunkBytes, filled));
      VGPU_RETURN_IF_ERROR(grow(target - filled));
      out->resize(target);
    }
    size_t want = out->size() - filled;
    if (begin_ < end_) {
      size_t n = std::min(want, end_ - begin_);
      std::memcpy(out->data() + filled, buffer_.data() + begin_, n);
      begin_ += n;
      filled += n;
      continue;
    }
    size_t n = 0;
    VGPU_RETURN_IF_ERROR(Receive(out->data() + filled, want, &n));
    filled += n;
  }
  return absl::OkStatus();
}

}  // namespace vgpu
