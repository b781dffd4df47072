// The random family's launches (protocol/kernels/random.h), read once for every executor: the
// parameter block of a Philox kernel and its one output buffer, validated as a hostile client
// could send them. What is left to an executor is the stream itself (philox.h's arithmetic and
// conversions), which it computes without further checks.
#ifndef VGPU_BACKEND_LAUNCH_RANDOM_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_RANDOM_LAUNCH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/random.h"

namespace vgpu::random_launch {

// The dtypes a Philox kernel's output takes.
enum class RandomOutput {
  kFloating,   // kUniform, kNormal, kTruncatedNormal: float32, float64, float16, bfloat16
  kInt32Or64,  // kUniformFullInt (and kUniformInt, read by ReadUniformIntLaunch)
};

// random::kUniform, kNormal, kTruncatedNormal and kUniformFullInt: buffers [y] (or [y, key,
// counter] with kKeyCounterInBuffers), params PhiloxParams. Checks, in this order, the parameter
// block, the flags and buffers (key 8 bytes, counter 16, each 8-aligned), that count is at most
// kMaxLaunchElements, that the dtype is one of `output`'s (the executor
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

// random::kKeyCounterFromSeed: buffers [seed, key, counter], params SeedParams. Checks that the
// launch has three buffers, that the seed's dtype is int32 or int64, and the buffers' sizes
// (two seed elements, key 8 bytes, counter 16, each aligned). Returns the seed's dtype.
absl::StatusOr<DType> ReadKeyCounterLaunch(const LaunchView& launch);

// The key and counter a Philox kernel draws with: `params`' own, or with kKeyCounterInBuffers
// what read_words(buffer index, uint64_t* out, words) reads from buffers 1 (one word) and 2 (two),
// in the kernel's stream order. The flag is cleared in the result.
template <typename ReadWords>
absl::StatusOr<random::PhiloxParams> ResolveKeyCounter(random::PhiloxParams params,
                                                       ReadWords&& read_words) {
  if ((params.flags & random::kKeyCounterInBuffers) == 0) return params;
  VGPU_RETURN_IF_ERROR(read_words(1, &params.key, 1));
  VGPU_RETURN_IF_ERROR(read_words(2, params.counter, 2));
  params.flags = 0;
  return params;
}

// Every Philox kernel's start on an executor: T, the element type `Dispatch` (an executor's
// DTypeDispatch) gives params.dtype among kOutput's dtypes, and y (buffer 0) as params.count
// values of T; then fill(T* y) fills it, unless it is empty (OK then). Returns fill's status,
// or the dispatch's or the buffer's error (neither happens after the launch's reader).
template <typename Dispatch, RandomOutput kOutput, typename Context, typename Fill>
absl::Status FillRandomOutput(const Context& context, const random::PhiloxParams& params,
                              Fill&& fill) {
  auto typed = [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(T * y, context.template Buffer<T>(0, params.count));
    if (params.count == 0) return absl::OkStatus();
    return fill(y);
  };
  if constexpr (kOutput == RandomOutput::kFloating) {
    return Dispatch::Floating(params.dtype, typed);
  } else {
    return Dispatch::Int32Or64(params.dtype, typed);
  }
}

// A Philox kernel of kOutput's dtypes whose launch is ReadPhiloxLaunch's (kUniform, kNormal,
// kTruncatedNormal, kUniformFullInt): reads it, then FillRandomOutput with
// fill(const random::PhiloxParams& params, T* y). The reader's error first.
template <typename Dispatch, RandomOutput kOutput, typename Context, typename Fill>
absl::Status FillPhiloxOutput(const Context& context, Fill&& fill) {
  VGPU_ASSIGN_OR_RETURN(const random::PhiloxParams params, ReadPhiloxLaunch(context, kOutput));
  return FillRandomOutput<Dispatch, kOutput>(
      context, params, [&](auto* y) -> absl::Status { return fill(params, y); });
}

}  // namespace vgpu::random_launch

#endif  // VGPU_BACKEND_LAUNCH_RANDOM_LAUNCH_H_
