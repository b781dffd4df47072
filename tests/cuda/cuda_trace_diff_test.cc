// The differential test of the CUDA executor against the CPU executor, over a recorded command
// trace (VGPU_CUDA_DIFF_TRACE=FILE, e.g. the op-test trace of scripts/prepare_device_kit.sh):
// the trace is replayed with the trace replay machinery (trace/trace_replay.h) on the "cpu" and
// on the "cuda" executor, each in-process, and every device-to-host result of both is compared
// with the recorded one (recorded on the CPU executor; float32 rtol 1e-3). A result the CPU
// replay reproduces but the CUDA replay does not is a CUDA kernel's difference: the test names
// the last launch before it. It compares what the trace copied back to the host (what the
// recorded program observed), not every intermediate buffer. Skips without a trace or a GPU.
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "plugin/backend/cuda/cuda_executor.h"
#include "plugin/trace/trace_replay.h"

namespace vgpu::cuda {
namespace {

std::string DescribeMismatch(const trace::ReplayReport& report) {
  if (!report.first_mismatch) return "none";
  const trace::Mismatch& m = *report.first_mismatch;
  std::string kernel = "?";
  for (const trace::KernelStats& k : report.kernels) {
    if (k.kernel_id == m.last_launch_kernel) kernel = k.name;
  }
  return "record " + std::to_string(m.record_index) + " (after launch of kernel " +
         std::to_string(m.last_launch_kernel) + " " + kernel + "): " + m.detail;
}

TEST(CudaTraceDiffTest, CudaReplayMatchesTheCpuExecutorOnEveryResult) {
  const char* path = std::getenv("VGPU_CUDA_DIFF_TRACE");
  if (path == nullptr || *path == '\0') GTEST_SKIP() << "VGPU_CUDA_DIFF_TRACE is not set";
  ExecutorOptions probe;
  probe.memory_limit_per_device = 1 << 20;
  if (absl::StatusOr<std::unique_ptr<CudaExecutor>> gpu = CudaExecutor::Create(probe); !gpu.ok()) {
    GTEST_SKIP() << "no usable GPU: " << gpu.status().message();
  }
  trace::ReplayOptions options;
  options.rtol = 1e-3;
  options.atol = 1e-4;
  options.stop_at_mismatch = false;
  options.executor = "cpu";
  absl::StatusOr<trace::ReplayReport> cpu = trace::ReplayTrace(path, options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  options.executor = "cuda";
  absl::StatusOr<trace::ReplayReport> cuda = trace::ReplayTrace(path, options);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_EQ(cpu->results_compared, cuda->results_compared);
  EXPECT_EQ(cpu->mismatches, 0u) << "the CPU replay itself differs: " << DescribeMismatch(*cpu);
  EXPECT_EQ(cuda->mismatches, 0u) << cuda->mismatches << " of " << cuda->results_compared
                                  << " results differ; first: " << DescribeMismatch(*cuda)
                                  << "; max abs " << cuda->max_abs_error << ", max rel "
                                  << cuda->max_rel_error;
}

}  // namespace
}  // namespace vgpu::cuda
