// The random family's launches (protocol/kernels/random.h), read once for every executor: the
// parameter block of a Philox kernel and its one output buffer, validated as a hostile client
// could send them. What is left to an executor is the stream itself (philox.h's arithmetic and
// conversions), which it computes without further checks.
#ifndef VGPU_BACKEND_LAUNCH_RANDOM_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_RANDOM_LAUNCH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/protocol/kernels/random.h"

namespace vgpu::random_launch {

// The dtypes a Philox kernel's output takes.
enum class RandomOutput {
  kFloating,   // kUniform, kNormal, kTruncatedNormal: float32, float64, float16, bfloat16
  kInt32Or64,  // kUniformFullInt (and kUniformInt, read by ReadUniformIntLaunch)
};

// random::kUniform, kNormal, kTruncatedNormal and kUniformFullInt: buffers [y], params
// PhiloxParams. Checks, in this order, that the launch has one buffer, the parameter block, that
// count is at most kMaxLaunchElements, that the dtype is one of `output`'s (the executor
// dispatch's error otherwise), and that y holds count aligned elements of the dtype. Returns the
// parameters: the executor's typed Buffer(0, count) then cannot fail.
absl::StatusOr<random::PhiloxParams> ReadPhiloxLaunch(const LaunchView& launch,
                                                      RandomOutput output);

// random::kUniformInt, validated: y = minval + (bits mod range) with wrap-around.
struct UniformIntLaunch {
  random::PhiloxParams philox;  // as ReadPhiloxLaunch returns it (dtype int32 or int64)
  int64_t minval = 0;           // within the dtype
  // maxval - minval in the dtype's unsigned type (the low 32 bits for int32): at least 1.
  uint64_t range = 1;
};

// Reads random::kUniformInt's launch: buffers [y], params UniformIntParams. Checks as
// ReadPhiloxLaunch for an int32 or int64 output, and, before y's size, that
// minval < maxval and both lie within the dtype.
absl::StatusOr<UniformIntLaunch> ReadUniformIntLaunch(const LaunchView& launch);

}  // namespace vgpu::random_launch

#endif  // VGPU_BACKEND_LAUNCH_RANDOM_LAUNCH_H_
