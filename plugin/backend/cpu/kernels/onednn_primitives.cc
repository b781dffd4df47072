// The process-wide oneDNN state of the CPU executor (see onednn_primitives.h): the engine, the
// per-thread streams, OpenMP thread counts and scratch memory, the primitive cache and its
// counters.
#include "plugin/backend/cpu/kernels/onednn_primitives.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <new>
#include <string_view>

#if VGPU_HAVE_ONEDNN
#include <omp.h>

#include "absl/strings/str_cat.h"
#endif

namespace vgpu {

ExecutorPrimitiveCounts ExecutorPrimitiveCounters() {
  ExecutorPrimitiveCounts counts;
#if VGPU_HAVE_ONEDNN
  counts.created = onednn::Cache().created();
  counts.reused = onednn::Cache().reused();
#endif
  return counts;
}

void ResetExecutorPrimitiveCounters() {
#if VGPU_HAVE_ONEDNN
  onednn::Cache().ResetCounts();
#endif
}

bool ExecutorUsesOnednn() {
  static const bool enabled = [] {
    const char* value = std::getenv("VGPU_ONEDNN");
    return VGPU_HAVE_ONEDNN != 0 && (value == nullptr || std::string_view(value) != "0");
  }();
  return enabled;
}

bool CpuHasBfloat16Math() {
#if defined(__x86_64__) || defined(__i386__)
  // From CPUID itself: not every compiler knows "avx512bf16" or "amx-bf16" as a feature name.
  // AVX512-BF16 is leaf 7 sub-leaf 1, EAX bit 5; AMX-BF16 leaf 7 sub-leaf 0, EDX bit 22. Both
  // need the operating system to save AVX-512 state, which "avx512f" checks.
  static const bool has = [] {
    if (!__builtin_cpu_supports("avx512f")) return false;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool amx_bf16 = (edx & (1u << 22)) != 0;
    const unsigned max_subleaf = eax;
    bool avx512_bf16 = false;
    if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) {
      avx512_bf16 = (eax & (1u << 5)) != 0;
    }
    return avx512_bf16 || amx_bf16;
  }();
  return has;
#else
  return false;
#endif
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
