// The training family's launches (protocol/kernels/training.h), read once for every executor:
// which kernels the family has and how each one's buffers are laid out (kUpdateKernels), the
// readers that validate a dense or sparse update's parameter block and buffers against that
// layout, and the registration of an executor's kernels from the same list, each reading its
// launch and dispatching its dtype. An executor writes only the arithmetic of each update (its
// Update<id>) and the loops that apply it to a validated launch (its Runner).
#ifndef VGPU_BACKEND_LAUNCH_TRAINING_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_TRAINING_LAUNCH_H_

#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plugin/backend/launch/kernel_table.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/training.h"

namespace vgpu::training_launch {

// One kernel of the family. `layout` has one letter per buffer, in the op's input order: 'v' a
// variable updated in place, 'g' the read-only gradient, 's' a scalar hyper-parameter, 'i' the
// indices of a sparse update (a kernel is sparse exactly when its layout has an 'i').
struct UpdateKernelSpec {
  KernelId id;
  const char* name;  // the kernel table's name
  const char* layout;
};

// Every kernel of the family, dense ones first, each in id order.
inline constexpr UpdateKernelSpec kUpdateKernels[] = {
    {training::kApplyGradientDescent, "apply_gradient_descent", "vsg"},
    {training::kApplyMomentum, "apply_momentum", "vvsgs"},
    {training::kApplyAdam, "apply_adam", "vvvssssssg"},
    {training::kApplyAdagrad, "apply_adagrad", "vvsg"},
    {training::kApplyAdagradV2, "apply_adagrad_v2", "vvssg"},
    {training::kApplyProximalAdagrad, "apply_proximal_adagrad", "vvsssg"},
    {training::kApplyProximalGradientDescent, "apply_proximal_gradient_descent", "vsssg"},
    {training::kApplyAdadelta, "apply_adadelta", "vvvsssg"},
    {training::kApplyRMSProp, "apply_rms_prop", "vvvssssg"},
    {training::kApplyCenteredRMSProp, "apply_centered_rms_prop", "vvvvssssg"},
    {training::kApplyAdamWithAmsgrad, "apply_adam_with_amsgrad", "vvvvssssssg"},
    {training::kApplyAdaMax, "apply_ada_max", "vvvsssssg"},
    {training::kApplyFtrl, "apply_ftrl", "vvvgssss"},
    {training::kApplyFtrlV2, "apply_ftrl_v2", "vvvgsssss"},
    {training::kApplyKerasMomentum, "apply_keras_momentum", "vvsgs"},
    {training::kApplyAddSign, "apply_add_sign", "vvssssg"},
    {training::kApplyPowerSign, "apply_power_sign", "vvssssg"},
    {training::kApplyKerasAdam, "apply_keras_adam", "vvvssssg"},
    {training::kSparseApplyAdagrad, "sparse_apply_adagrad", "vvsgi"},
    {training::kSparseApplyAdagradV2, "sparse_apply_adagrad_v2", "vvssgi"},
    {training::kSparseApplyProximalAdagrad, "sparse_apply_proximal_adagrad", "vvsssgi"},
    {training::kSparseApplyFtrl, "sparse_apply_ftrl", "vvvgissss"},
    {training::kSparseApplyFtrlV2, "sparse_apply_ftrl_v2", "vvvgisssss"},
    {training::kSparseApplyKerasMomentum, "sparse_apply_keras_momentum", "vvsgis"},
    {training::kSparseApplyMomentum, "sparse_apply_momentum", "vvsgis"},
    {training::kSparseApplyAdadelta, "sparse_apply_adadelta", "vvvsssgi"},
    {training::kSparseApplyRMSProp, "sparse_apply_rms_prop", "vvvssssgi"},
    {training::kSparseApplyCenteredRMSProp, "sparse_apply_centered_rms_prop", "vvvvssssgi"},
    {training::kSparseApplyProximalGradientDescent, "sparse_apply_proximal_gradient_descent",
     "vsssgi"},
};
inline constexpr size_t kUpdateKernelCount = sizeof(kUpdateKernels) / sizeof(kUpdateKernels[0]);

// The most buffers a kernel of the family takes (the longest layout).
constexpr size_t MaxUpdateBuffers() {
  size_t most = 0;
  for (const UpdateKernelSpec& kernel : kUpdateKernels) {
    size_t length = 0;
    while (kernel.layout[length] != '\0') ++length;
    if (length > most) most = length;
  }
  return most;
}

// Whether `kernel` is a sparse update (its layout names indices).
constexpr bool IsSparse(const UpdateKernelSpec& kernel) {
  for (const char* letter = kernel.layout; *letter != '\0'; ++letter) {
    if (*letter == 'i') return true;
  }
  return false;
}

// The buffer index of a sparse kernel's indices (of its layout's 'i').
constexpr size_t IndicesBuffer(const UpdateKernelSpec& kernel) {
  size_t index = 0;
  while (kernel.layout[index] != '\0' && kernel.layout[index] != 'i') ++index;
  return index;
}

// A dense update's launch (params: UpdateParams), validated.
struct DenseUpdateLaunch {
  training::UpdateParams params;  // dtype a floating-point type
  int64_t count = 0;              // elements of every variable and of the gradient
};

// Reads the launch of dense kernel `kernel`. Checks, in this order: the parameter block, that
// count is at most kMaxLaunchElements, that the dtype is a floating-point one (the executor
// dispatch's error otherwise), then the buffers against the layout (CheckUpdateBuffers).
absl::StatusOr<DenseUpdateLaunch> ReadDenseUpdateLaunch(const LaunchView& launch,
                                                        const UpdateKernelSpec& kernel);

// A sparse update's launch (params: SparseUpdateParams), validated: variables [rows, inner],
// gradient [num_indices, inner], indices [num_indices] at buffer indices_buffer.
struct SparseUpdateLaunch {
  training::SparseUpdateParams params;  // dtype floating, index_dtype int32 or int64
  int64_t var_count = 0;                // rows * inner
  int64_t grad_count = 0;               // num_indices * inner
  size_t indices_buffer = 0;
};

// Reads the launch of sparse kernel `kernel`. Checks, in this order: the parameter block, that no
// size is negative, that neither product nor num_indices exceeds kMaxLaunchElements, the index
// dtype, the dtype (as ReadDenseUpdateLaunch), then the buffers against the layout.
absl::StatusOr<SparseUpdateLaunch> ReadSparseUpdateLaunch(const LaunchView& launch,
                                                          const UpdateKernelSpec& kernel);

// Checks every buffer of `launch` against `layout`: the number of buffers, then per buffer its
// alignment and size ('v': count elements of element_size bytes, 'g': grad_count of them, 's':
// one, 'i': index_count elements of index_size bytes). Internal for a letter outside "vgsi".
absl::Status CheckUpdateBuffers(const LaunchView& launch, const char* layout,
                                uint64_t element_size, int64_t count, int64_t grad_count,
                                int64_t index_count, uint64_t index_size);

// --- Registration ---------------------------------------------------------------------------

// The function an executor's kernel table holds for kUpdateKernels[kIndex]: reads the launch,
// dispatches its dtype with Runner::Dispatch (a DTypeDispatch) and, unless the update is empty,
// calls Runner's computation with the arithmetic Update<id> of the kernel:
//   Runner::Dense<Update<id>, T>(context, kernel, const DenseUpdateLaunch&)
//   Runner::Sparse<Update<id>, T>(context, kernel, const SparseUpdateLaunch&)
template <template <KernelId> class Update, typename Runner, size_t kIndex>
struct UpdateKernelFunction {
  template <typename Context>
  static absl::Status Run(const Context& context) {
    constexpr const UpdateKernelSpec& kKernel = kUpdateKernels[kIndex];
    using Arithmetic = Update<kKernel.id>;
    if constexpr (IsSparse(kKernel)) {
      VGPU_ASSIGN_OR_RETURN(const SparseUpdateLaunch launch,
                            ReadSparseUpdateLaunch(context, kKernel));
      return Runner::Dispatch::Floating(launch.params.dtype, [&](auto zero) -> absl::Status {
        if (launch.grad_count == 0) return absl::OkStatus();
        return Runner::template Sparse<Arithmetic, decltype(zero)>(context, kKernel, launch);
      });
    } else {
      VGPU_ASSIGN_OR_RETURN(const DenseUpdateLaunch launch,
                            ReadDenseUpdateLaunch(context, kKernel));
      return Runner::Dispatch::Floating(launch.params.dtype, [&](auto zero) -> absl::Status {
        if (launch.count == 0) return absl::OkStatus();
        return Runner::template Dense<Arithmetic, decltype(zero)>(context, kKernel, launch);
      });
    }
  }
};

template <template <KernelId> class Update, typename Runner, typename Context, size_t... kIndex>
void AddUpdateKernelSequence(KernelRegistry<Context>& table, std::index_sequence<kIndex...>) {
  (table.Add(kUpdateKernels[kIndex].id, kUpdateKernels[kIndex].name,
             &UpdateKernelFunction<Update, Runner, kIndex>::template Run<Context>),
   ...);
}

// Adds every kernel of the family to an executor's `table`, under its id and name, as
// UpdateKernelFunction<Update, Runner, k> describes. Called once, while the table is built.
template <template <KernelId> class Update, typename Runner, typename Context>
void AddUpdateKernels(KernelRegistry<Context>& table) {
  AddUpdateKernelSequence<Update, Runner>(table, std::make_index_sequence<kUpdateKernelCount>());
}

}  // namespace vgpu::training_launch

#endif  // VGPU_BACKEND_LAUNCH_TRAINING_LAUNCH_H_
