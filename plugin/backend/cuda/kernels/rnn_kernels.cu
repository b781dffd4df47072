// CUDA kernels of the recurrent family (protocol/kernels/rnn.h) on the CUDA executor: not served
// yet. Both ids are registered with a kernel that fails with Unimplemented naming the kernel, so
// that a launch gets a clear error rather than an unknown-kernel one.
//
// Why not cuDNN's RNN directly: the protocol fixes its own weight-space order (canonical
// weights then biases per pseudo-layer, TensorFlow's CudnnRNNParamsToCanonical order) and its
// own reserve-space layout (a header, then gates / states / cells per pseudo-layer in the math
// dtype, time-major) that the CPU executor's forward writes and its backward reads, and dropout
// masks from TensorFlow's Philox stream. cuDNN's reserve space is opaque and its weight layout
// and dropout RNG differ, so a cuDNN implementation needs a weight repacking kernel (weight
// space -> cudnnGetRNNWeightParams' matrices), and either a reserve space that carries cuDNN's
// opaque reserve after the protocol's header or kernels of this executor's own. Left for a
// later change, which starts from the launch layer's reader (launch/rnn_launch.h: the launch
// validated, the reserve header built and checked) as the CPU executor does; until then a
// launch is refused before it is read.
#include "absl/status/status.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/protocol/kernels/rnn.h"

namespace vgpu::cuda {
namespace {

absl::Status RnnForward(const CudaKernelContext&) {
  return absl::UnimplementedError("the CUDA executor has no rnn_forward kernel yet");
}

absl::Status RnnBackward(const CudaKernelContext&) {
  return absl::UnimplementedError("the CUDA executor has no rnn_backward kernel yet");
}

}  // namespace

void AddCudaRnnKernels(CudaKernelTable& table) {
  table.AddFamily(kernel_families::kRnn, RnnForward, RnnBackward);
}

}  // namespace vgpu::cuda
