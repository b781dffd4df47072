// UsableCpuCount (see cpu_count.h).
#include "plugin/common/cpu_count.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

namespace vgpu {
namespace {

std::optional<std::string> ReadFile(const char* path) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::optional<int> QuotaCpus(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return std::nullopt;
  return static_cast<int>(std::max<long long>(1, (quota + period - 1) / period));
}

}  // namespace

std::optional<int> CpuCountFromCgroupV2(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota;
  long long period = 0;
  if (!(in >> quota >> period) || quota == "max") return std::nullopt;
  try {
    return QuotaCpus(std::stoll(quota), period);
  } catch (...) {
    return std::nullopt;
  }
}

int UsableCpuCount() {
  int cpus = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) cpus = CPU_COUNT(&mask);
  std::optional<int> quota;
  if (std::optional<std::string> v2 = ReadFile("/sys/fs/cgroup/cpu.max")) {
    quota = CpuCountFromCgroupV2(*v2);
  } else {
    std::optional<std::string> q = ReadFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
    std::optional<std::string> p = ReadFile("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
    if (q && p) {
      try {
        quota = QuotaCpus(std::stoll(*q), std::stoll(*p));
      } catch (...) {
      }
    }
  }
  if (quota) cpus = cpus > 0 ? std::min(cpus, *quota) : *quota;
  return std::max(1, cpus);
}

}  // namespace vgpu
