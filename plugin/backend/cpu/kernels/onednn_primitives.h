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

// The counts of this process's CPU executors (of the primitive cache they share, Cache()) since
// the start or the last reset. Thread-safe.
ExecutorPrimitiveCounts ExecutorPrimitiveCounters();
// Zeroes the counts (the cached primitives stay). Thread-safe.
void ResetExecutorPrimitiveCounters();
// Whether this build runs kernels through oneDNN (VGPU_ONEDNN at configure time) and the
// process did not turn it off: the environment variable VGPU_ONEDNN=0, read once, leaves every
// kernel to Eigen (to compare, or to step around a oneDNN problem).
bool ExecutorUsesOnednn();
// Whether this CPU has bfloat16 arithmetic oneDNN's bfloat16 kernels run on natively
// (AVX512-BF16 or AMX-BF16): only then do bfloat16 convolutions and products take oneDNN's
// bfloat16 kernels; elsewhere they run on float32 copies. Read once.
bool CpuHasBfloat16Math();

// The OpenMP threads a oneDNN primitive of `multiply_adds` multiply-adds runs on, given the
// executor's `device_threads`: one below the bound, all of them above. The team's other threads
// sleep between kernels (OMP_WAIT_POLICY=PASSIVE, below), and waking them costs more than a
// small primitive's work: an mlp's or cnn's 64x128x10 product took 33-86 us on two threads
// (oneDNN's own timing, AVX-512 Xeon), ~2 us on one. The bound is 2^20 multiply-adds, and
// 2^24 on two threads: there the second thread shares a core with the thread issuing the next
// ops, and the mlp's 64x784x256 product (12.8 M) made the step slower split than whole (3.6-3.8
// against 3.1-3.5 ms, cnn unchanged). Pure; it depends on the shape only, so a shape always
// runs with the same primitive (the results do not depend on timing).
inline constexpr double kParallelOnednnMultiplyAdds = 1 << 20;
inline constexpr double kParallelOnednnMultiplyAddsOnTwoThreads = 1 << 24;
inline int OnednnThreadsFor(int device_threads, double multiply_adds) {
  const double bound = device_threads <= 2 ? kParallelOnednnMultiplyAddsOnTwoThreads
                                           : kParallelOnednnMultiplyAdds;
  if (device_threads < 1 || multiply_adds < bound) return 1;
  return device_threads;
}

}  // namespace vgpu

#if VGPU_HAVE_ONEDNN
#include <memory>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "plugin/backend/launch/plan_cache.h"

namespace vgpu::onednn {

// The CPU engine every executor primitive is created on (process-wide, created on first use).
const dnnl::engine& Engine();

// A CPU stream for the calling thread (oneDNN streams are not shared between threads).
dnnl::stream& ThreadStream();

// Makes oneDNN parallel regions started from the calling thread use `threads` OpenMP threads
// (at least 1). Cheap when unchanged.
void UseThreads(int threads);

// The settings a primitive depends on (a PlanKey, launch/plan_cache.h) starting with its
// PrimitiveKind. Append every field that changes what the primitive computes or how it was tuned.
class PrimitiveKey : public PlanKey {
 public:
  explicit PrimitiveKey(int kind) { Add(kind); }
  PrimitiveKey& Add(int64_t value) {
    AddValue(value);
    return *this;
  }
};

// Primitive kinds (the first field of every key).
enum PrimitiveKind : int {
  kConvolutionForward = 1,
  kConvolutionBackwardData = 2,
  kConvolutionBackwardWeights = 3,
  kMatmul = 4,
};

// The executors' bounded LRU plan cache (launch/plan_cache.h) holding immutable entries of any
// type (primitives are thread-safe to execute concurrently with user-managed scratchpads).
// Thread-safe.
class PrimitiveCache {
 public:
  explicit PrimitiveCache(size_t capacity) : entries_(capacity) {}

  // The entry cached under `key`, or the one `create()` builds (std::shared_ptr<Entry>; null
  // means oneDNN does not serve these settings, which is remembered too, so the caller's
  // fallback is chosen without retrying). Counts a reuse for a cached non-null entry and a
  // creation for a new non-null one. `create` runs without the lock; a dnnl::error it throws
  // is treated as "not served". Other exceptions propagate (RunKernel turns them into errors).
  // One key must always hold one Entry type (the key's PrimitiveKind chooses it).
  template <typename Entry, typename Create>
  std::shared_ptr<const Entry> FindOrCreate(const PrimitiveKey& key, Create&& create) {
    absl::StatusOr<std::shared_ptr<const void>> entry = entries_.FindOrCreate(
        key, [&]() -> absl::StatusOr<std::shared_ptr<const void>> {
          try {
            return std::shared_ptr<const void>(create());
          } catch (const dnnl::error&) {
            return std::shared_ptr<const void>();
          }
        });
    // `create` reports no error but as "not served": the status is always OK.
    return entry.ok() ? std::static_pointer_cast<const Entry>(*std::move(entry)) : nullptr;
  }

  uint64_t created() const { return entries_.created(); }
  uint64_t reused() const { return entries_.reused(); }
  void ResetCounts() { entries_.ResetCounts(); }
  size_t size() const { return entries_.size(); }
  // Drops every entry (tests).
  void Clear() { entries_.Clear(); }

 private:
  PlanCache<const void> entries_;
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
