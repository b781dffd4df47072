// The CUDA executor's reuse of library objects (the executor-side mirror of the descriptor
// method): cuDNN descriptors with their algorithm choice and workspace size, cuBLASLt matmul
// descriptors with their layouts and heuristic result, made once per distinct launch settings
// and found again by every later launch with the same settings. Counted (created / reused) for
// the executor_primitives_created / _reused statistics.
#ifndef VGPU_BACKEND_CUDA_PRIMITIVE_CACHE_H_
#define VGPU_BACKEND_CUDA_PRIMITIVE_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"

namespace vgpu::cuda {

// A cached library object: the kernels derive their primitive types from it. Destroyed when
// evicted and no launch holds it any more (the library objects are host-side state that the
// enqueued GPU work does not reference after the enqueueing call returned).
class Primitive {
 public:
  virtual ~Primitive() = default;
};

// The key of a primitive: the bytes of everything its creation depended on.
class PrimitiveKey {
 public:
  // The kernel id, then every descriptor (kind and settings bytes) and the parameter block of
  // `context`: two launches of one kernel with equal keys get the same primitive.
  static PrimitiveKey ForLaunch(uint32_t kernel_id, const CudaKernelContext& context);
  // Appends more of what the primitive depends on (a variant tag, a derived geometry).
  PrimitiveKey& Add(absl::Span<const uint8_t> bytes);
  template <typename T>
  PrimitiveKey& AddValue(const T& value) {
    return Add(absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(&value), sizeof(T)));
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// Executor-side reuse: thread-safe, process-wide per executor (one per CudaExecutor), a bounded
// LRU map from PrimitiveKey to primitive.
class PrimitiveCache {
 public:
  explicit PrimitiveCache(size_t capacity = 1024);
  PrimitiveCache(const PrimitiveCache&) = delete;
  PrimitiveCache& operator=(const PrimitiveCache&) = delete;

  uint64_t created() const { return created_.load(std::memory_order_relaxed); }  // made
  uint64_t reused() const { return reused_.load(std::memory_order_relaxed); }    // found
  size_t size() const;

  // The primitive of `key`, made by `make` when the cache has none (the cache lock is not held
  // while `make` runs: two threads missing the same key both make one, the first inserted is
  // kept and returned to both). A failed `make` caches nothing. The caller must use one
  // primitive type P per key (the key's kernel id and variant tag choose it).
  template <typename P>
  absl::StatusOr<std::shared_ptr<P>> GetOrCreate(
      const PrimitiveKey& key, absl::FunctionRef<absl::StatusOr<std::unique_ptr<P>>()> make) {
    if (std::shared_ptr<Primitive> found = Find(key)) {
      return std::static_pointer_cast<P>(std::move(found));
    }
    absl::StatusOr<std::unique_ptr<P>> made = make();
    if (!made.ok()) return made.status();
    created_.fetch_add(1, std::memory_order_relaxed);
    std::shared_ptr<Primitive> kept = Insert(key, std::shared_ptr<Primitive>(std::move(*made)));
    return std::static_pointer_cast<P>(std::move(kept));
  }

 private:
  using Entry = std::pair<std::string, std::shared_ptr<Primitive>>;
  // The primitive of `key` (counted as reused and moved to the front), or null.
  std::shared_ptr<Primitive> Find(const PrimitiveKey& key);
  // Inserts `primitive` unless `key` has one already; returns the one kept. Evicts the least
  // recently used entries beyond the capacity.
  std::shared_ptr<Primitive> Insert(const PrimitiveKey& key, std::shared_ptr<Primitive> primitive);

  const size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  std::atomic<uint64_t> created_{0};
  std::atomic<uint64_t> reused_{0};
};

}  // namespace vgpu::cuda

#endif  // VGPU_BACKEND_CUDA_PRIMITIVE_CACHE_H_
