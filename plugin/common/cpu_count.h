// How many CPUs this process may really use: the executor's compute threads (Eigen's pool and
// oneDNN's OpenMP team, the same size) are sized by it, so that a container limited by its
// cgroup or a process pinned by taskset is not oversubscribed by one thread per host core.
#ifndef VGPU_COMMON_CPU_COUNT_H_
#define VGPU_COMMON_CPU_COUNT_H_

#include <optional>
#include <string>

namespace vgpu {

// The CPUs of this process's affinity mask, further limited by a cgroup CPU quota (cgroup v2
// cpu.max, or v1 cpu.cfs_quota_us / cpu.cfs_period_us; a fractional quota rounds up); at least
// 1. Reads /proc and /sys; thread-safe; not cached.
int UsableCpuCount();

// The CPU count a cgroup quota allows: ceil(quota / period) from cgroup v2's cpu.max text
// ("max 100000" or "150000 100000"), or nullopt for no quota or unreadable text. Pure.
std::optional<int> CpuCountFromCgroupV2(const std::string& cpu_max);

}  // namespace vgpu

#endif  // VGPU_COMMON_CPU_COUNT_H_
