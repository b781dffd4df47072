// The CUDA executor's plan cache: cuDNN descriptors with their algorithm choice and workspace
// size, cuBLASLt matmul descriptors with their layouts and heuristic result, made once per
// distinct launch settings and found again by every later launch with the same settings. The
// bounded LRU map, its keys and its created / reused counts (executor_primitives_created /
// _reused) are the executors' shared PlanCache (launch/plan_cache.h); this executor's plans are
// Primitives.
#ifndef VGPU_BACKEND_CUDA_PRIMITIVE_CACHE_H_
#define VGPU_BACKEND_CUDA_PRIMITIVE_CACHE_H_

#include <cstddef>
#include <memory>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "plugin/backend/launch/plan_cache.h"

namespace vgpu::cuda {

// A cached library object: the kernels derive their plan types from it. Destroyed when evicted
// and no launch holds it any more (the library objects are host-side state that the enqueued
// GPU work does not reference after the enqueueing call returned).
class Primitive {
 public:
  virtual ~Primitive() = default;
};

// One per CudaExecutor, shared by its streams. Thread-safe.
class PrimitiveCache : public PlanCache<Primitive> {
 public:
  explicit PrimitiveCache(size_t capacity = 1024) : PlanCache<Primitive>(capacity) {}

  // The primitive of `key`, made by `make` when the cache has none (see
  // PlanCache::FindOrCreate: a failed `make` caches nothing). The caller must use one primitive
  // type P per key (the key's kernel id and variant tag choose it).
  template <typename P>
  absl::StatusOr<std::shared_ptr<P>> GetOrCreate(
      const PlanKey& key, absl::FunctionRef<absl::StatusOr<std::unique_ptr<P>>()> make) {
    absl::StatusOr<std::shared_ptr<Primitive>> found =
        FindOrCreate(key, [&]() -> absl::StatusOr<std::shared_ptr<Primitive>> {
          absl::StatusOr<std::unique_ptr<P>> made = make();
          if (!made.ok()) return made.status();
          return std::shared_ptr<Primitive>(*std::move(made));
        });
    if (!found.ok()) return found.status();
    return std::static_pointer_cast<P>(*std::move(found));
  }
};

}  // namespace vgpu::cuda

#endif  // VGPU_BACKEND_CUDA_PRIMITIVE_CACHE_H_
