// The random family's launch readers (see random_launch.h).
#include "plugin/backend/launch/random_launch.h"

#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "plugin/backend/launch/reader_dispatch.h"
#include "plugin/common/status_macros.h"

namespace vgpu::random_launch {
namespace {

absl::Status CheckCount(const random::PhiloxParams& philox) {
  if (philox.count > static_cast<uint64_t>(kMaxLaunchElements)) {
    return absl::InvalidArgumentError(absl::StrCat("too many random numbers: ", philox.count));
  }
  return absl::OkStatus();
}

// y (buffer 0) must hold `count` elements of `element_size` bytes, aligned to their size.
absl::Status CheckOutput(const LaunchView& launch, uint64_t count, size_t element_size) {
  return launch.ExpectElements(0, count, element_size, element_size);
}

// The launch's buffers as its flags say: [y], or [y, key, counter] with kKeyCounterInBuffers.
absl::Status CheckBuffers(const LaunchView& launch, const random::PhiloxParams& philox) {
  if (philox.flags == 0) return launch.ExpectBuffers(1);
  if (philox.flags != random::kKeyCounterInBuffers) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown flags ", philox.flags, " in a random kernel's parameters"));
  }
  VGPU_RETURN_IF_ERROR(launch.ExpectBuffers(3));
  VGPU_RETURN_IF_ERROR(launch.ExpectElements(1, 1, sizeof(uint64_t), sizeof(uint64_t)));
  return launch.ExpectElements(2, 2, sizeof(uint64_t), sizeof(uint64_t));
}

}  // namespace

absl::StatusOr<random::PhiloxParams> ReadPhiloxLaunch(const LaunchView& launch,
                                                      RandomOutput output) {
  VGPU_ASSIGN_OR_RETURN(const random::PhiloxParams philox,
                        launch.Params().Get<random::PhiloxParams>());
  VGPU_RETURN_IF_ERROR(CheckBuffers(launch, philox));
  VGPU_RETURN_IF_ERROR(CheckCount(philox));
  size_t element_size = 0;
  auto measure = [&](auto zero) -> absl::Status {
    element_size = sizeof(zero);
    return absl::OkStatus();
  };
  VGPU_RETURN_IF_ERROR(output == RandomOutput::kFloating
                           ? ReaderDispatch::Floating(philox.dtype, measure)
                           : ReaderDispatch::Int32Or64(philox.dtype, measure));
  VGPU_RETURN_IF_ERROR(CheckOutput(launch, philox.count, element_size));
  return philox;
}

absl::StatusOr<UniformIntLaunch> ReadUniformIntLaunch(const LaunchView& launch) {
  VGPU_ASSIGN_OR_RETURN(const random::UniformIntParams params,
                        launch.Params().Get<random::UniformIntParams>());
  VGPU_RETURN_IF_ERROR(CheckBuffers(launch, params.philox));
  VGPU_RETURN_IF_ERROR(CheckCount(params.philox));
  UniformIntLaunch read;
  read.philox = params.philox;
  read.minval = params.minval;
  size_t element_size = 0;
  VGPU_RETURN_IF_ERROR(
      ReaderDispatch::Int32Or64(params.philox.dtype, [&](auto zero) -> absl::Status {
        using T = decltype(zero);
        using Unsigned = std::make_unsigned_t<T>;
        if (params.minval < std::numeric_limits<T>::min() ||
            params.maxval > std::numeric_limits<T>::max() || params.minval >= params.maxval) {
          return absl::InvalidArgumentError(
              absl::StrCat("uniform integers need minval < maxval within the dtype, got ",
                           params.minval, " and ", params.maxval));
        }
        element_size = sizeof(T);
        read.range = static_cast<Unsigned>(static_cast<Unsigned>(static_cast<T>(params.maxval)) -
                                           static_cast<Unsigned>(static_cast<T>(params.minval)));
        return absl::OkStatus();
      }));
  VGPU_RETURN_IF_ERROR(CheckOutput(launch, params.philox.count, element_size));
  return read;
}

absl::StatusOr<DType> ReadKeyCounterLaunch(const LaunchView& launch) {
  VGPU_ASSIGN_OR_RETURN(const random::SeedParams params,
                        launch.ReadParams<random::SeedParams>(3));
  size_t seed_size = 0;
  if (params.dtype == DType::kInt32) {
    seed_size = sizeof(int32_t);
  } else if (params.dtype == DType::kInt64) {
    seed_size = sizeof(int64_t);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("a seed is int32 or int64, not dtype ", static_cast<int>(params.dtype)));
  }
  VGPU_RETURN_IF_ERROR(launch.ExpectElements(0, 2, seed_size, seed_size));
  VGPU_RETURN_IF_ERROR(launch.ExpectElements(1, 1, sizeof(uint64_t), sizeof(uint64_t)));
  VGPU_RETURN_IF_ERROR(launch.ExpectElements(2, 2, sizeof(uint64_t), sizeof(uint64_t)));
  return params.dtype;
}

}  // namespace vgpu::random_launch
