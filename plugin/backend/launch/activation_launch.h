// The activation family's launches (protocol/kernels/activation.h), read once for every
// executor: the activation and tensor descriptors and the buffer sizes, validated as a hostile
// client could send them, in the order the CPU executor's kernels always checked them. Also the
// constants both executors' formulas share.
#ifndef VGPU_BACKEND_LAUNCH_ACTIVATION_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_ACTIVATION_LAUNCH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu::activation_launch {

// SELU's constants (Klambauer et al.), as TensorFlow spells them.
inline constexpr double kSeluScale = 1.0507009873554804934193349852946;
inline constexpr double kSeluScaleAlpha = 1.7580993408473768599402175208123;

// The modes kForward and kBackward serve: relu, relu6, sigmoid, tanh, elu, selu, softplus,
// softsign, leaky relu.
bool IsKnownActivationMode(ActivationMode mode);
// The error of a mode outside them.
absl::Status UnknownActivationMode(ActivationMode mode);

// activation::kForward (buffers [x, y]) and kBackward (buffers [a, b, out]): descriptors
// [activation, tensor], a floating dtype both descriptors name, every buffer `count` elements.
// An unknown mode is refused only when there is an element to compute (count > 0).
struct ActivationLaunch {
  ActivationDescriptorSettings activation;
  DType dtype = DType::kFloat32;
  int64_t count = 0;

  // The leaky relu's alpha as TensorFlow's kernel holds it: the float attribute (cast to the
  // dtype by the kernel).
  float LeakyAlpha() const { return static_cast<float>(activation.coef); }
};
absl::StatusOr<ActivationLaunch> ReadActivationForward(const LaunchView& launch);
absl::StatusOr<ActivationLaunch> ReadActivationBackward(const LaunchView& launch);

// activation::kReluInt8: no descriptors, buffers [x, y] of `count` int8 each, params
// ReluInt8Params; the count (a multiple of 4, as TensorFlow's GPU kernel needs).
absl::StatusOr<int64_t> ReadReluInt8Launch(const LaunchView& launch);

}  // namespace vgpu::activation_launch

#endif  // VGPU_BACKEND_LAUNCH_ACTIVATION_LAUNCH_H_
