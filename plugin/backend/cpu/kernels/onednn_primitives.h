// Executor-side reuse of oneDNN primitives (issue 12): the CPU executor's oneDNN kernels
// (convolution_onednn.cc, matmul_onednn.cc) create a primitive — with the reorders it needs —
// once per distinct settings (kind, shapes, strides, dtypes, fused epilogue, thread count) and
// reuse it from a bounded, process-wide cache, the executor's mirror of the client's descriptor
// reuse. The counters exist in every build (they stay 0 without oneDNN) and are what
// `vgpu.stats()` reports as executor_primitives_created / executor_primitives_reused.
//
// Threads: oneDNN here is the GNU OpenMP build. A kernel calls UseThreads(n) with its Eigen
// device's thread count before creating or running a primitive, so the OpenMP team of the calling
// stream worker is as large as the executor's Eigen pool (VGPU's compute_threads, one per core by
// default) and never larger: the Eigen pool is idle while a oneDNN kernel runs on the same stream.
// Between kernels the OpenMP threads must sleep, not spin (a spinning team took 3-4x the MLP's
// step time on two cores, competing with the Eigen pool): the package sets OMP_WAIT_POLICY=PASSIVE
// before libgomp loads (tensorflow_vgpu.pth; vgpu.server for vgpu-server), unless it is set.
#ifndef VGPU_BACKEND_CPU_KERNELS_ONEDNN_PRIMITIVES_H_
#define VGPU_BACKEND_CPU_KERNELS_ONEDNN_PRIMITIVES_H_

#include <cstddef>
#include <cstdint>

#ifndef VGPU_HAVE_ONEDNN
#define VGPU_HAVE_ONEDNN 0
#endif

namespace vgpu {

struct ExecutorPrimitiveCounts {
  uint64_t created = 0;  // cache entries (a primitive and its reorders) built
  uint64_t reused = 0;   // launches served by an entry built earlier
};

// The counts of this process's CPU executors since the start or the last reset. Thread-safe.
ExecutorPrimitiveCounts ExecutorPrimitiveCounters();
// Zeroes the counts (the cached primitives stay). Thread-safe.
void ResetExecutorPrimitiveCounters();
// Whether this build runs kernels through oneDNN (VGPU_ONEDNN at configure time) and the
// process did not turn it off: the environment variable VGPU_ONEDNN=0, read once, leaves every
// kernel to Eigen (to compare, or to step around a oneDNN problem).
bool ExecutorUsesOnednn();

}  // namespace vgpu

#if VGPU_HAVE_ONEDNN
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace vgpu::onednn {

// The CPU engine every executor primitive is created on (process-wide, created on first use).
const dnnl::engine& Engine();

// A CPU stream for the calling thread (oneDNN streams are not shared between threads).
dnnl::stream& ThreadStream();

// Makes oneDNN parallel regions started from the calling thread use `threads` OpenMP threads
// (at least 1). Cheap when unchanged.
void UseThreads(int threads);

// The settings a primitive depends on, as bytes (a cache key). Append every field that changes
// what the primitive computes or how it was tuned.
class PrimitiveKey {
 public:
  explicit PrimitiveKey(int kind) { Add(kind); }
  PrimitiveKey& Add(int64_t value) {
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof(value));
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// Primitive kinds (the first field of every key).
enum PrimitiveKind : int {
  kConvolutionForward = 1,
  kConvolutionBackwardData = 2,
  kConvolutionBackwardWeights = 3,
  kMatmul = 4,
};

// A bounded LRU map from settings to immutable entries (primitives are thread-safe to execute
// concurrently with user-managed scratchpads). Entries are shared: evicting one that a kernel is
// running stays safe. Thread-safe.
class PrimitiveCache {
 public:
  explicit PrimitiveCache(size_t capacity) : capacity_(capacity) {}

  // The entry cached under `key`, or the one `create()` builds (std::shared_ptr<Entry>; null
  // means oneDNN does not serve these settings, which is remembered too, so the caller's
  // fallback is chosen without retrying). Counts a reuse for a cached non-null entry and a
  // creation for a new non-null one. `create` runs without the lock; a dnnl::error it throws
  // is treated as "not served". Other exceptions propagate (RunKernel turns them into errors).
  template <typename Entry, typename Create>
  std::shared_ptr<const Entry> FindOrCreate(const PrimitiveKey& key, Create&& create) {
    bool found = false;
    std::shared_ptr<const void> cached = Find(key.bytes(), &found);
    if (found) {
      if (cached != nullptr) CountReused();
      return std::static_pointer_cast<const Entry>(cached);
    }
    std::shared_ptr<const Entry> made;
    try {
      made = create();
    } catch (const dnnl::error&) {
      made = nullptr;
    }
    if (made != nullptr) CountCreated();
    Insert(key.bytes(), made);
    return made;
  }

  size_t size() const;
  // Drops every entry (tests).
  void Clear();

 private:
  using Lru = std::list<std::pair<std::string, std::shared_ptr<const void>>>;
  std::shared_ptr<const void> Find(const std::string& key, bool* found);
  void Insert(const std::string& key, std::shared_ptr<const void> entry);
  static void CountCreated();
  static void CountReused();

  const size_t capacity_;
  mutable std::mutex mutex_;
  Lru lru_;  // most recently used first
  absl::flat_hash_map<std::string, Lru::iterator> index_;
};

// The process-wide cache of the CPU executor's primitives (1024 entries).
PrimitiveCache& Cache();

// Scratch memory of the calling thread for one kernel call: slot 0 for a primitive's
// scratchpad, 1 and 2 for reordered operands. Memory is kept for the thread's next call unless
// it is large (over 64 MiB), when the destructor returns it. Not shareable between threads.
class ThreadScratch {
 public:
  ThreadScratch() = default;
  ~ThreadScratch();
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;
  // At least `bytes` bytes, 64-byte aligned (nullptr for 0 bytes); std::bad_alloc on failure.
  void* Get(int slot, size_t bytes);
};

// Runs `primitive` with `args` on the calling thread's stream and waits for it; a dnnl::error
// becomes Internal naming `what`.
absl::Status Execute(const dnnl::primitive& primitive,
                     const std::unordered_map<int, dnnl::memory>& args, const char* what);

}  // namespace vgpu::onednn
#endif  // VGPU_HAVE_ONEDNN

#endif  // VGPU_BACKEND_CPU_KERNELS_ONEDNN_PRIMITIVES_H_
