// The per-peer rate limit on failed authentications (see auth_throttle.h).
#include "plugin/server/auth_throttle.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace vgpu {

void AuthThrottle::Refill(Bucket& bucket, int64_t now_ns) const {
  if (now_ns > bucket.updated_ns) {
    bucket.tokens = std::min(options_.burst, bucket.tokens + options_.per_second *
                                                 static_cast<double>(now_ns - bucket.updated_ns) /
                                                 1e9);
    bucket.updated_ns = now_ns;
  }
}

absl::Status AuthThrottle::Admit(const std::string& peer, int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buckets_.find(peer);
  if (it == buckets_.end()) return absl::OkStatus();
  Refill(it->second, now_ns);
  if (it->second.tokens >= 1) return absl::OkStatus();
  const double wait_s = (1 - it->second.tokens) / options_.per_second;
  return absl::ResourceExhaustedError(absl::StrCat(
      "too many failed authentications from ", peer, "; retry in ",
      static_cast<int>(std::ceil(wait_s)), " s"));
}

bool AuthThrottle::RecordFailure(const std::string& peer, int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buckets_.find(peer);
  if (it == buckets_.end()) {
    if (buckets_.size() >= options_.max_peers) {
      // Forget the peer closest to being forgiven anyway (the most tokens).
      auto most = buckets_.begin();
      for (auto candidate = buckets_.begin(); candidate != buckets_.end(); ++candidate) {
        Refill(candidate->second, now_ns);
        if (candidate->second.tokens > most->second.tokens) most = candidate;
      }
      buckets_.erase(most);
    }
    it = buckets_.emplace(peer, Bucket{options_.burst, now_ns}).first;
  }
  Refill(it->second, now_ns);
  const bool was_admitted = it->second.tokens >= 1;
  it->second.tokens = std::max(0.0, it->second.tokens - 1);
  return was_admitted && it->second.tokens < 1;
}

size_t AuthThrottle::peers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buckets_.size();
}

}  // namespace vgpu
