// The kernel-payload fuzz target shared by the libFuzzer binary (kernel_launch_fuzzer.cc,
// scripts/fuzz.sh) and the bounded mutation test of vgpu_core_tests (hostile_launch_kernels_test.cc):
// bytes -> one kernel launch (kernel id from the CPU executor's table, descriptor section,
// parameter block, buffer sizes) run through the kernel dispatch against fenced buffers: each ends
// right before an inaccessible page (a read or write past it faults, with or without a sanitizer)
// and starts after canary bytes (a write before it is reported).
//
// Seeds: with VGPU_RECORD_FUZZ_CORPUS set, the kernel dispatch (RunKernel) writes every launch
// it runs in this layout (scripts/fuzz.sh --seeds runs the kernel tests that way).
//
// Input layout (little-endian; a short input reads as zeros):
//   uint32 kernel id          an id the table lacks selects table entry (id % table size)
//   uint8  buffer count       modulo kMaxFuzzBuffers + 1
//   uint32 size per buffer    modulo kMaxFuzzBufferBytes + 1
//   uint16 descriptor bytes   then that many bytes: the launch's descriptor section
//   ...                       the rest: the parameter block
#ifndef VGPU_TESTS_FUZZ_KERNEL_LAUNCH_FUZZ_H_
#define VGPU_TESTS_FUZZ_KERNEL_LAUNCH_FUZZ_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace Eigen {
struct ThreadPoolDevice;
}  // namespace Eigen

namespace vgpu::fuzz {

inline constexpr size_t kMaxFuzzBuffers = 16;
inline constexpr uint32_t kMaxFuzzBufferBytes = 1u << 16;

struct FuzzedLaunch {
  uint32_t kernel_id = 0;
  std::vector<uint32_t> buffer_sizes;
  std::vector<uint8_t> descriptors;  // the descriptor section, as Command::descriptors
  std::vector<uint8_t> params;
};

// Decodes fuzzer bytes (any bytes decode). The kernel id is mapped onto the table.
FuzzedLaunch DecodeFuzzedLaunch(absl::Span<const uint8_t> data);
// The bytes DecodeFuzzedLaunch turns back into `launch` (for seed corpora).
std::vector<uint8_t> EncodeFuzzedLaunch(const FuzzedLaunch& launch);

struct FuzzOutcome {
  std::string kernel_name;
  absl::Status status;        // the launch's status (errors are expected for hostile input)
  bool canaries_intact = true;  // false: the kernel wrote before a buffer (a bug)
};

// Runs `launch` on `device` with fenced buffers (contents derived from the parameter block, so
// runs are deterministic). Blocks until the kernel returns. Not reentrant: one launch at a time
// per process (the buffer slots are shared).
FuzzOutcome RunFuzzedLaunch(const FuzzedLaunch& launch, const Eigen::ThreadPoolDevice& device);

// A compute device for fuzzing: the thread pool of a two-thread CpuExecutor, built on first use.
const Eigen::ThreadPoolDevice& FuzzDevice();

}  // namespace vgpu::fuzz

#endif  // VGPU_TESTS_FUZZ_KERNEL_LAUNCH_FUZZ_H_
