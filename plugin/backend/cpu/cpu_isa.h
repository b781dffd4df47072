// The instruction set the CPU executor's hand-vectorised kernels may use on this machine, found
// at run time. The package is compiled for TensorFlow's baseline (x86-64-v2 with AVX,
// cmake/CpuTarget.cmake) so that it loads on every CPU TensorFlow does; the few kernels that
// gain most from wider vectors (max pooling's window-index kernels) carry AVX2 and AVX-512
// variants as well, compiled with per-function target attributes, and pick one through
// HostCpuIsa(). Results are bit for bit the same at every level (the variants use no
// fused multiply-add and keep the portable loops' order of operations).
#ifndef VGPU_BACKEND_CPU_CPU_ISA_H_
#define VGPU_BACKEND_CPU_CPU_ISA_H_

#include <optional>

#include "absl/strings/string_view.h"

namespace vgpu {

// Ordered: each level includes the ones before it.
enum class CpuIsa {
  kBaseline = 0,  // what the build targets (no hand-vectorised variant)
  kAvx2 = 1,      // AVX2 (256-bit integer and float lanes)
  kAvx512 = 2,    // AVX-512 F, BW and VL (16 float lanes, masked loads and stores)
};

// "baseline", "avx2" or "avx512".
absl::string_view CpuIsaName(CpuIsa isa);

// The widest level this CPU and its operating system support (CPUID and XGETBV, through the
// compiler's __builtin_cpu_supports), capped by VGPU_CPU_ISA=baseline|avx2|avx512 when set (an
// unknown value is ignored with a warning), unless a test overrode it. Detected once; cheap
// afterwards. Thread-safe.
CpuIsa HostCpuIsa();

// For tests: makes HostCpuIsa() return `isa` (nullopt: what was detected again). Not
// synchronised with kernels running on other threads: call it between launches.
void SetCpuIsaForTesting(std::optional<CpuIsa> isa);

}  // namespace vgpu

#endif  // VGPU_BACKEND_CPU_CPU_ISA_H_
