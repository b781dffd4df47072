// Rate limit on failed authentications, per peer (a uid over a Unix socket, an IP address over
// TCP): a token bucket each, so that a peer guessing the server's token gets a few tries at
// once and then about one a second, while other peers are not affected. A throttled attempt is
// refused without its token being compared at all.
#ifndef VGPU_SERVER_AUTH_THROTTLE_H_
#define VGPU_SERVER_AUTH_THROTTLE_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

namespace vgpu {

class AuthThrottle {
 public:
  struct Options {
    double burst = 10;          // failures a peer may have at once before it is throttled
    double per_second = 1;      // failures forgiven per second
    size_t max_peers = 4096;    // peers remembered; past it the most forgiven one is forgotten
  };
  AuthThrottle() : AuthThrottle(Options{}) {}
  explicit AuthThrottle(Options options) : options_(options) {}

  // OK if `peer` may present a token now; ResourceExhausted (saying when to retry) if it has
  // failed too often. Thread-safe, non-blocking.
  absl::Status Admit(const std::string& peer, int64_t now_ns);
  // Counts one failed authentication of `peer`. Returns true when this failure is the one that
  // throttles it (for a single log line per episode). Thread-safe, non-blocking.
  bool RecordFailure(const std::string& peer, int64_t now_ns);

  // Peers remembered now (for tests and statistics).
  size_t peers() const;

 private:
  struct Bucket {
    double tokens = 0;
    int64_t updated_ns = 0;
  };
  // Refills `bucket` up to `now_ns`.
  void Refill(Bucket& bucket, int64_t now_ns) const;

  const Options options_;
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace vgpu

#endif  // VGPU_SERVER_AUTH_THROTTLE_H_
