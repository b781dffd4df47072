// libFuzzer entry point of the kernel-payload fuzz target (kernel_launch_fuzz.h); built with
// -fsanitize=fuzzer,address,undefined by scripts/fuzz.sh. A launch may fail (hostile input is
// expected to be refused); it must never crash, read or write past a buffer, or throw.
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/kernel_launch_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vgpu::fuzz;
  const FuzzedLaunch launch = DecodeFuzzedLaunch(absl::MakeConstSpan(data, size));
  const FuzzOutcome outcome = RunFuzzedLaunch(launch, FuzzDevice());
  if (!outcome.canaries_intact) {
    std::fprintf(stderr, "kernel %s wrote outside a buffer\n", outcome.kernel_name.c_str());
    std::abort();
  }
  if (outcome.status.code() == absl::StatusCode::kInternal) {  // an exception escaped a kernel
    std::fprintf(stderr, "kernel %s: %s\n", outcome.kernel_name.c_str(),
                 std::string(outcome.status.message()).c_str());
    std::abort();
  }
  return 0;
}
