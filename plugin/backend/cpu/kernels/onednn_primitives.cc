// The process-wide oneDNN state of the CPU executor (see onednn_primitives.h): the engine, the
// per-thread streams, OpenMP thread counts and scratch memory, the primitive cache and its
// counters.
#include "plugin/backend/cpu/kernels/onednn_primitives.h"

#include <atomic>
#include <cstdlib>
#include <new>
#include <string_view>

#if VGPU_HAVE_ONEDNN
#include <omp.h>

#include "absl/strings/str_cat.h"
#endif

namespace vgpu {
namespace {

std::atomic<uint64_t> primitives_created{0};
std::atomic<uint64_t> primitives_reused{0};

}  // namespace

ExecutorPrimitiveCounts ExecutorPrimitiveCounters() {
  ExecutorPrimitiveCounts counts;
  counts.created = primitives_created.load(std::memory_order_relaxed);
  counts.reused = primitives_reused.load(std::memory_order_relaxed);
  return counts;
}

void ResetExecutorPrimitiveCounters() {
  primitives_created.store(0, std::memory_order_relaxed);
  primitives_reused.store(0, std::memory_order_relaxed);
}

bool ExecutorUsesOnednn() {
  static const bool enabled = [] {
    const char* value = std::getenv("VGPU_ONEDNN");
    return VGPU_HAVE_ONEDNN != 0 && (value == nullptr || std::string_view(value) != "0");
  }();
  return enabled;
}

}  // namespace vgpu

#if VGPU_HAVE_ONEDNN
namespace vgpu::onednn {
namespace {

constexpr size_t kKeptScratchBytes = size_t{64} << 20;
constexpr int kScratchSlots = 3;

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

struct ScratchSlot {
  std::unique_ptr<void, AlignedFree> data;
  size_t bytes = 0;
};

thread_local ScratchSlot scratch_slots[kScratchSlots];

}  // namespace

const dnnl::engine& Engine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(Engine());
  return stream;
}

void UseThreads(int threads) {
  if (threads < 1) threads = 1;
  thread_local int current = 0;
  if (current == threads) return;
  omp_set_num_threads(threads);
  current = threads;
}

std::shared_ptr<const void> PrimitiveCache::Find(const std::string& key, bool* found) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    *found = false;
    return nullptr;
  }
  *found = true;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void PrimitiveCache::Insert(const std::string& key, std::shared_ptr<const void> entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index_.contains(key)) return;  // another thread built it meanwhile
  lru_.emplace_front(key, std::move(entry));
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

size_t PrimitiveCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lru_.size();
}

void PrimitiveCache::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  index_.clear();
  lru_.clear();
}

void PrimitiveCache::CountCreated() {
  primitives_created.fetch_add(1, std::memory_order_relaxed);
}

void PrimitiveCache::CountReused() { primitives_reused.fetch_add(1, std::memory_order_relaxed); }

PrimitiveCache& Cache() {
  static PrimitiveCache* cache = new PrimitiveCache(1024);
  return *cache;
}

void* ThreadScratch::Get(int slot, size_t bytes) {
  if (bytes == 0) return nullptr;
  ScratchSlot& s = scratch_slots[slot];
  if (s.bytes < bytes) {
    s.data.reset();
    s.bytes = 0;
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* memory = std::aligned_alloc(64, rounded);
    if (memory == nullptr) throw std::bad_alloc();
    s.data.reset(memory);
    s.bytes = rounded;
  }
  return s.data.get();
}

ThreadScratch::~ThreadScratch() {
  for (ScratchSlot& s : scratch_slots) {
    if (s.bytes > kKeptScratchBytes) {
      s.data.reset();
      s.bytes = 0;
    }
  }
}

absl::Status Execute(const dnnl::primitive& primitive,
                     const std::unordered_map<int, dnnl::memory>& args, const char* what) {
  try {
    dnnl::stream& stream = ThreadStream();
    primitive.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat("oneDNN ", what, " failed: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace vgpu::onednn
#endif  // VGPU_HAVE_ONEDNN
