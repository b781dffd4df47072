// CUDA kernels of the data movement family (protocol/kernels/data_movement.h): transpose,
// strided slice and its gradient, pad, tile/broadcast, concat, split, reverse, reverse
// sequence, mirror pad and its gradient. The launch layer (launch/data_movement_launch.h) reads
// and checks every launch on the host exactly as for the CPU executor, before anything is
// enqueued; most kernels are then one strided copy of fixed-size elements (1, 2, 4 or 8 bytes,
// never interpreted), here one grid-stride kernel, one thread per element, taking the simplified
// plan by value (rank <= 16: a tile doubles the rank). Elements go as words, or bytewise where a
// tenant placed a tensor at an odd address (launch/element_bytes.h).
//
// What the GPU run must confirm (tests/cuda against the CPU executor): every id for element
// sizes 1, 2, 4, 8, including buffers placed at odd byte addresses (the bytewise element path),
// rank 0 and zero-sized tensors; tile with rank 8 (copy rank 16); mirror pad grad for every
// floating dtype (float32 within rtol 1e-3; the additions are in the CPU's order, so results
// should in fact match bit for bit apart from FMA-free float adds).
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/kernels/element_helpers.cuh"
#include "plugin/backend/launch/data_movement_launch.h"
#include "plugin/backend/launch/element_bytes.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/data_movement.h"

namespace vgpu::cuda {
namespace {

using data_movement_launch::BufferCopy;
using data_movement_launch::CopyBuffers;
using data_movement_launch::MirrorFoldHead;
using data_movement_launch::MirrorFoldTail;
using data_movement_launch::MirrorPadFold;
using data_movement_launch::MirrorPadGeometry;
using data_movement_launch::MirrorSource;
using data_movement_launch::ReverseSequenceGeometry;
using data_movement_launch::ReverseSequenceSourceRun;
using data_movement_launch::StridedCopy;
using elements::GridStride;
using elements::GridThreadIndex;

// --- Strided copies and fills ---------------------------------------------------------------

// dst[plan's destination of i] = src[plan's source of i] for the first `count` indices i.
template <typename E>
__global__ void StridedCopyKernel(StridedCopy plan, int64_t count, const E* __restrict__ src,
                                  E* __restrict__ dst) {
  for (int64_t i = GridThreadIndex(); i < count; i += GridStride()) {
    int64_t rest = i, s = plan.src_offset, t = plan.dst_offset;
    for (int d = plan.rank - 1; d >= 0; --d) {
      const int64_t index = rest % plan.dims[d];
      rest /= plan.dims[d];
      s += index * plan.src_strides[d];
      t += index * plan.dst_strides[d];
    }
    dst[t] = src[s];
  }
}

template <typename E>
__global__ void FillKernel(E* __restrict__ dst, int64_t count, E value) {
  for (int64_t i = GridThreadIndex(); i < count; i += GridStride()) dst[i] = value;
}

// Enqueues `plan` (checked against the buffers behind src and dst by the launch layer).
absl::Status EnqueueStridedCopy(const CudaKernelContext& context, const char* name,
                                const StridedCopy& original, const uint8_t* src, uint8_t* dst) {
  if (original.ElementCount() == 0) return absl::OkStatus();
  const StridedCopy plan = data_movement_launch::SimplifyStridedCopy(original);
  const int64_t count = plan.ElementCount();
  const int64_t esize = plan.element_size;
  return DispatchElementBytes(
      plan.element_size, {src + plan.src_offset * esize, dst + plan.dst_offset * esize},
      [&](auto zero) {
        using E = decltype(zero);
        return elements::Launch(name, *context.device, count, StridedCopyKernel<E>, plan, count,
                                reinterpret_cast<const E*>(src), reinterpret_cast<E*>(dst));
      });
}

// Enqueues dst[0, count) = the low element_size bytes of value_bits.
absl::Status EnqueueFill(const CudaKernelContext& context, const char* name, uint8_t* dst,
                         int64_t count, uint32_t element_size, uint64_t value_bits) {
  if (count <= 0) return absl::OkStatus();
  if (value_bits == 0) {
    return elements::CudaError(
        cudaMemsetAsync(dst, 0, static_cast<size_t>(count) * element_size, context.device->stream),
        name);
  }
  return DispatchElementBytes(element_size, {dst}, [&](auto zero) {
    using E = decltype(zero);
    E value;
    std::memcpy(&value, &value_bits, sizeof(E));  // little-endian: the low bytes
    return elements::Launch(name, *context.device, count, FillKernel<E>,
                            reinterpret_cast<E*>(dst), count, value);
  });
}

// Enqueues a checked copy whose buffers were taken (TakeCopyBuffers); nothing for a copy that
// moves nothing.
absl::Status EnqueueCopy(const CudaKernelContext& context, const char* name,
                         const BufferCopy& copy, const CopyBuffers& buffers) {
  if (copy.Empty()) return absl::OkStatus();
  return EnqueueStridedCopy(context, name, copy.plan, buffers.src, buffers.dst);
}

// A launch that is one checked copy: takes its buffers and enqueues it.
absl::Status RunCopy(const CudaKernelContext& context, const char* name,
                     absl::StatusOr<BufferCopy> read) {
  if (!read.ok()) return read.status();
  VGPU_ASSIGN_OR_RETURN(CopyBuffers buffers,
                        data_movement_launch::TakeCopyBuffers(context, *read));
  return EnqueueCopy(context, name, *read, buffers);
}

// --- Copy kernels ---------------------------------------------------------------------------

// data_movement::kTranspose.
absl::Status Transpose(const CudaKernelContext& context) {
  return RunCopy(context, "transpose", data_movement_launch::ReadTransposeLaunch(context));
}

// data_movement::kStridedSlice.
absl::Status StridedSlice(const CudaKernelContext& context) {
  return RunCopy(context, "strided_slice",
                 data_movement_launch::ReadStridedSliceLaunch(context));
}

// Scatters buffer 0 (the slice) back to where a slice of buffer 1 reads; with `zero_rest`,
// the rest of buffer 1 is zeroed first (kStridedSliceGrad), else kept (kStridedSliceAssign).
absl::Status ScatterSlice(const CudaKernelContext& context, bool zero_rest) {
  VGPU_ASSIGN_OR_RETURN(BufferCopy scatter,
                        data_movement_launch::ReadSliceScatterLaunch(context));
  if (scatter.dst_elements == 0) return absl::OkStatus();
  VGPU_ASSIGN_OR_RETURN(uint8_t* dx, context.Buffer<uint8_t>(1, scatter.DstBytes()));
  // Every buffer checked before the first enqueue (the CPU checks dy after zeroing dx): a
  // failed launch leaves dx as it was.
  VGPU_ASSIGN_OR_RETURN(CopyBuffers buffers,
                        data_movement_launch::TakeCopyBuffers(context, scatter));
  if (zero_rest && scatter.src_elements != scatter.dst_elements) {
    // Otherwise the scatter writes every element.
    VGPU_RETURN_IF_ERROR(EnqueueFill(context, "strided_slice_grad (zero)", dx,
                                     scatter.dst_elements, scatter.plan.element_size, 0));
  }
  return EnqueueCopy(context, zero_rest ? "strided_slice_grad" : "strided_slice_assign", scatter,
                     buffers);
}

// data_movement::kStridedSliceGrad: zero dx, then scatter dy to where the slice read.
absl::Status StridedSliceGrad(const CudaKernelContext& context) {
  return ScatterSlice(context, /*zero_rest=*/true);
}

// data_movement::kStridedSliceAssign: x[slice] = value, the rest of x unchanged.
absl::Status StridedSliceAssign(const CudaKernelContext& context) {
  return ScatterSlice(context, /*zero_rest=*/false);
}

// data_movement::kPad: fill y with the pad value where padded, then copy x into it.
absl::Status Pad(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(data_movement_launch::PadLaunch pad,
                        data_movement_launch::ReadPadLaunch(context));
  if (pad.copy.dst_elements == 0) return absl::OkStatus();
  VGPU_ASSIGN_OR_RETURN(uint8_t* y, context.Buffer<uint8_t>(1, pad.copy.DstBytes()));
  VGPU_ASSIGN_OR_RETURN(CopyBuffers buffers,
                        data_movement_launch::TakeCopyBuffers(context, pad.copy));
  if (pad.padded) {
    VGPU_RETURN_IF_ERROR(EnqueueFill(context, "pad (fill)", y, pad.copy.dst_elements,
                                     pad.copy.plan.element_size, pad.pad_value));
  }
  return EnqueueCopy(context, "pad", pad.copy, buffers);
}

// data_movement::kTile.
absl::Status Tile(const CudaKernelContext& context) {
  return RunCopy(context, "tile", data_movement_launch::ReadTileLaunch(context));
}

// data_movement::kConcat and kSplit: every piece's buffers checked, then one copy per piece.
absl::Status RunPieceCopies(const CudaKernelContext& context, const char* name,
                            absl::StatusOr<std::vector<BufferCopy>> read) {
  if (!read.ok()) return read.status();
  std::vector<CopyBuffers> buffers;
  buffers.reserve(read->size());
  for (const BufferCopy& piece : *read) {
    VGPU_ASSIGN_OR_RETURN(CopyBuffers taken,
                          data_movement_launch::TakeCopyBuffers(context, piece));
    buffers.push_back(taken);
  }
  for (size_t k = 0; k < read->size(); ++k) {
    VGPU_RETURN_IF_ERROR(EnqueueCopy(context, name, (*read)[k], buffers[k]));
  }
  return absl::OkStatus();
}

absl::Status Concat(const CudaKernelContext& context) {
  return RunPieceCopies(context, "concat", data_movement_launch::ReadConcatLaunch(context));
}
absl::Status Split(const CudaKernelContext& context) {
  return RunPieceCopies(context, "split", data_movement_launch::ReadSplitLaunch(context));
}

// data_movement::kReverse: one strided copy with negative strides on the reversed dimensions.
absl::Status Reverse(const CudaKernelContext& context) {
  return RunCopy(context, "reverse", data_movement_launch::ReadReverseLaunch(context));
}

// --- Reverse sequence -----------------------------------------------------------------------

template <typename E>
__global__ void ReverseSequenceKernel(ReverseSequenceGeometry g, const E* __restrict__ x,
                                      const uint8_t* __restrict__ lengths, E* __restrict__ y) {
  for (int64_t i = GridThreadIndex(); i < g.count; i += GridStride()) {
    const int64_t run = i / g.inner, k = i % g.inner;
    y[i] = x[ReverseSequenceSourceRun(g, lengths, run) * g.inner + k];
  }
}

// data_movement::kReverseSequence.
absl::Status ReverseSequence(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(ReverseSequenceGeometry g,
                        data_movement_launch::ReadReverseSequenceLaunch(context));
  VGPU_ASSIGN_OR_RETURN(data_movement_launch::ReverseSequenceBuffers buffers,
                        data_movement_launch::TakeReverseSequenceBuffers(context, g));
  if (g.count == 0) return absl::OkStatus();
  return DispatchElementBytes(g.element_size, {buffers.x, buffers.y}, [&](auto zero) {
    using E = decltype(zero);
    return elements::Launch("reverse_sequence", *context.device, g.count,
                            ReverseSequenceKernel<E>, g, reinterpret_cast<const E*>(buffers.x),
                            buffers.lengths, reinterpret_cast<E*>(buffers.y));
  });
}

// --- Mirror pad -----------------------------------------------------------------------------

template <typename E>
__global__ void MirrorPadKernel(MirrorPadGeometry g, const E* __restrict__ x, E* __restrict__ y) {
  for (int64_t i = GridThreadIndex(); i < g.padded_count; i += GridStride()) {
    int64_t rest = i, source = 0, stride = 1;
    for (int d = g.rank - 1; d >= 0; --d) {
      source += MirrorSource(g, d, rest % g.padded[d]) * stride;
      rest /= g.padded[d];
      stride *= g.dims[d];
    }
    y[i] = x[source];
  }
}

// data_movement::kMirrorPad.
absl::Status MirrorPad(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(data_movement_launch::MirrorPadLaunch pad,
                        data_movement_launch::ReadMirrorPadLaunch(context));
  return data_movement_launch::WithMirrorPadBuffers(context, pad, [&](const auto* x, auto* y) {
    using E = std::remove_pointer_t<decltype(y)>;
    return elements::Launch("mirror_pad", *context.device, pad.g.padded_count,
                            MirrorPadKernel<E>, pad.g, x, y);
  });
}

// One fold of the gradient (MirrorPadFold), one thread per element of `out`.
template <typename T>
__global__ void FoldDimensionKernel(MirrorPadFold f, const T* __restrict__ in,
                                    T* __restrict__ out) {
  for (int64_t index = GridThreadIndex(); index < f.count; index += GridStride()) {
    const int64_t i = index % f.inner;
    const int64_t oj = index / f.inner;
    const int64_t o = oj / f.n, j = oj % f.n;
    const T* plane = in + o * f.padded * f.inner;
    T value = plane[(f.before + j) * f.inner + i];
    const int64_t head = MirrorFoldHead(f, j);
    if (head >= 0) value = value + plane[head * f.inner + i];
    const int64_t tail = MirrorFoldTail(f, j);
    if (tail >= 0) value = value + plane[tail * f.inner + i];
    out[index] = value;
  }
}

// data_movement::kMirrorPadGrad.
absl::Status MirrorPadGrad(const CudaKernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(data_movement_launch::MirrorPadGradLaunch grad,
                        data_movement_launch::ReadMirrorPadGradLaunch(context));
  const MirrorPadGeometry& g = grad.g;
  return data_movement_launch::WithMirrorPadGradBuffers<elements::Dispatch>(
      context, grad, [&](const auto* dy, auto* dx) -> absl::Status {
    using T = std::remove_pointer_t<decltype(dx)>;
    const cudaStream_t stream = context.device->stream;
    const data_movement_launch::MirrorPadFolds folds = data_movement_launch::MirrorPadFoldsOf(g);
    if (folds.count == 0) {  // nothing was padded
      return elements::CudaError(
          cudaMemcpyAsync(dx, dy, static_cast<size_t>(g.count) * sizeof(T),
                          cudaMemcpyDeviceToDevice, stream),
          "mirror_pad_grad (copy)");
    }
    // Scratch of the intermediate folds (at most rank - 1), freed in stream order at return.
    std::vector<std::unique_ptr<elements::StreamScratch>> scratch;
    const T* current = dy;
    for (int k = 0; k < folds.count; ++k) {
      const MirrorPadFold& fold = folds.folds[k];
      T* next = dx;
      if (!fold.into_dx) {
        scratch.push_back(std::make_unique<elements::StreamScratch>());
        VGPU_RETURN_IF_ERROR(
            scratch.back()->Allocate(stream, static_cast<size_t>(fold.count) * sizeof(T)));
        next = scratch.back()->template As<T>();
      }
      VGPU_RETURN_IF_ERROR(elements::Launch("mirror_pad_grad", *context.device, fold.count,
                                            FoldDimensionKernel<T>, fold, current, next));
      current = next;
    }
    return absl::OkStatus();
  });
}

}  // namespace

void AddCudaDataMovementKernels(CudaKernelTable& table) {
  table.AddFamily(kernel_families::kDataMovement, Transpose, StridedSlice, StridedSliceGrad,
                  StridedSliceAssign, Pad, Tile, Concat, Split);
  table.AddFamily(kernel_families::kReverse, Reverse, ReverseSequence);
  table.AddFamily(kernel_families::kMirrorPad, MirrorPad, MirrorPadGrad);
}

}  // namespace vgpu::cuda
