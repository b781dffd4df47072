// Run-time detection of the CPU executor's instruction set level (see cpu_isa.h).
#include "plugin/backend/cpu/cpu_isa.h"

#include <atomic>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "plugin/common/log.h"

namespace vgpu {
namespace {

CpuIsa DetectedCpuIsa() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    return CpuIsa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2")) return CpuIsa::kAvx2;
#endif
  return CpuIsa::kBaseline;
}

CpuIsa CappedByEnvironment(CpuIsa detected) {
  const char* value = std::getenv("VGPU_CPU_ISA");
  if (value == nullptr) return detected;
  const absl::string_view text = absl::StripAsciiWhitespace(value);
  for (CpuIsa cap : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (CpuIsaName(cap) == text) return cap < detected ? cap : detected;
  }
  Log(LogLevel::kWarning, absl::StrCat("VGPU_CPU_ISA=", value,
                                       " is not one of baseline, avx2, avx512; ignored"));
  return detected;
}

// -1: no override.
std::atomic<int> isa_override{-1};

}  // namespace

absl::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline:
      return "baseline";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "baseline";
}

CpuIsa HostCpuIsa() {
  const int forced = isa_override.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<CpuIsa>(forced);
  static const CpuIsa isa = CappedByEnvironment(DetectedCpuIsa());
  return isa;
}

void SetCpuIsaForTesting(std::optional<CpuIsa> isa) {
  isa_override.store(isa.has_value() ? static_cast<int>(*isa) : -1, std::memory_order_relaxed);
}

}  // namespace vgpu
