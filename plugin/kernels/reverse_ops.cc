// TensorFlow op kernels of the reversals on the virtual GPU (data movement family): ReverseV2
// (axis in host memory) and ReverseSequence (seq_lengths on the device), which Keras uses for
// go_backwards and Bidirectional recurrent layers. Inputs are validated as TensorFlow's GPU
// kernels do (reverse_op.cc, reverse_sequence_op.cc: same conditions and wording); then one
// byte-moving kernel of protocol/kernels/data_movement.h is launched with a parameter block.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/protocol/kernels/data_movement.h"

namespace vgpu {
namespace {

using Dims = std::vector<int64_t>;

// ReverseV2's device types on TensorFlow's GPU (uint8, bool and the floating types; int32
// stays in host memory there, so it is left to the CPU here).
constexpr std::initializer_list<TF_DataType> kReverseTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                              TF_DOUBLE, TF_UINT8, TF_BOOL};
// ReverseSequence's (the floating types and bool).
constexpr std::initializer_list<TF_DataType> kReverseSequenceTypes = {
    TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE, TF_BOOL};

class ReverseV2Op : public NoAttributes<ReverseV2Op> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [input, axis] = inputs;
    const Dims dims = ShapeOf(input.get());
    if (dims.empty() || TF_TensorElementCount(input.get()) == 0) {
      return context.SetOutput(0, input.get());
    }
    const int rank = static_cast<int>(dims.size());
    if (TF_NumDims(axis.get()) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("'dims' must be 1-dimension, not ", TF_NumDims(axis.get())));
    }
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> axes, context.HostIntegers(1));
    std::vector<uint8_t> reversed(rank, 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t canonical = axes[i] < 0 ? rank + axes[i] : axes[i];
      if (canonical < 0 || canonical >= rank) {
        return absl::InvalidArgumentError(absl::StrCat("'axis'[", i, "] = ", axes[i],
                                                       " is out of valid range [0, ", rank - 1));
      }
      if (reversed[canonical]) {
        return absl::InvalidArgumentError(
            absl::StrCat("axis ", canonical, " specified more than once."));
      }
      reversed[canonical] = 1;
    }
    if (rank > data_movement::kMaxDataMovementRank) {
      return absl::UnimplementedError("reverse is not implemented for tensors of rank > 8.");
    }
    const TF_DataType dtype = TF_TensorType(input.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.AllocateOutput(0, dtype, dims));
    return KernelLaunch(context)
        .Buffer(input.get())
        .Buffer(output.get())
        .Param<uint32_t>(static_cast<uint32_t>(TF_DataTypeSize(dtype)))
        .ParamArray<int64_t>(dims)
        .ParamArray<uint8_t>(reversed)
        .Run(data_movement::kReverse);
  }
};

class ReverseSequenceOp {
 public:
  static absl::StatusOr<std::unique_ptr<ReverseSequenceOp>> Create(OpConstruction& construction) {
    auto op = std::unique_ptr<ReverseSequenceOp>(new ReverseSequenceOp());
    VGPU_ASSIGN_OR_RETURN(op->batch_dim_, construction.Int("batch_dim"));
    VGPU_ASSIGN_OR_RETURN(op->seq_dim_, construction.Int("seq_dim"));
    if (op->batch_dim_ < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Invalid batch_dim ", op->batch_dim_));
    }
    if (op->seq_dim_ < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Invalid seq_dim ", op->seq_dim_));
    }
    return op;
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
    const auto& [input, seq_lengths] = inputs;
    if (TF_NumDims(seq_lengths.get()) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("seq_lengths must be 1-dim, not ", TF_NumDims(seq_lengths.get())));
    }
    const Dims dims = ShapeOf(input.get());
    const int64_t rank = static_cast<int64_t>(dims.size());
    // TensorFlow's CheckErrorsGPU (the lengths stay on the device; their values are clamped).
    if (batch_dim_ == seq_dim_) {
      return absl::InvalidArgumentError(absl::StrCat("batch_dim == seq_dim == ", seq_dim_));
    }
    if (seq_dim_ >= rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("seq_dim must be < input rank ( ", seq_dim_, " vs. ", rank, ")"));
    }
    if (batch_dim_ >= rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch_dim must be < input rank ( ", batch_dim_, " vs. ", rank, ")"));
    }
    const int64_t lengths = TF_TensorElementCount(seq_lengths.get());
    if (lengths != dims[batch_dim_]) {
      return absl::InvalidArgumentError(
          absl::StrCat("Length of seq_lengths != input.dims(", batch_dim_, "), (", lengths,
                       " vs. ", dims[batch_dim_], ")"));
    }
    if (rank < 2 || rank > 5) {
      return absl::InvalidArgumentError(
          absl::StrCat("ReverseSequenceOp : Unhandled input dimensions: ", rank));
    }
    const TF_DataType dtype = TF_TensorType(input.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.AllocateOutput(0, dtype, dims));
    if (TF_TensorElementCount(output.get()) == 0) return absl::OkStatus();
    return KernelLaunch(context)
        .Buffer(input.get())
        .Buffer(seq_lengths.get())
        .Buffer(output.get())
        .Param<uint32_t>(static_cast<uint32_t>(TF_DataTypeSize(dtype)))
        .Param<uint32_t>(static_cast<uint32_t>(TF_DataTypeSize(TF_TensorType(seq_lengths.get()))))
        .ParamArray<int64_t>(dims)
        .Param<int32_t>(static_cast<int32_t>(batch_dim_))
        .Param<int32_t>(static_cast<int32_t>(seq_dim_))
        .Run(data_movement::kReverseSequence);
  }

 private:
  ReverseSequenceOp() = default;
  int64_t batch_dim_ = 0, seq_dim_ = 0;
};

}  // namespace

// Called by RegisterDataMovementOps (the family's registration).
void RegisterReverseOps(const char* device_type) {
  for (TF_DataType dtype : kReverseTypes) {
    for (TF_DataType index : {TF_INT32, TF_INT64}) {
      RegisterKernel<ReverseV2Op>("ReverseV2", device_type, {{"T", dtype}, {"Tidx", index}},
                                  {"axis"});
    }
  }
  for (TF_DataType dtype : kReverseSequenceTypes) {
    for (TF_DataType length : {TF_INT32, TF_INT64}) {
      RegisterKernel<ReverseSequenceOp>("ReverseSequence", device_type,
                                        {{"T", dtype}, {"Tlen", length}});
    }
  }
  DocumentOp("ReverseV2", "",
             "Any rank up to 8; axis in host memory (int32 or int64). int32 tensors stay on the "
             "CPU, as with TensorFlow's GPU kernels.");
  DocumentOp("ReverseSequence", "",
             "Rank 2 to 5; seq_lengths on the device (int32 or int64). Lengths are not checked "
             "against the sequence dimension (they live on the device, as on TensorFlow's GPU): "
             "a negative length reverses nothing, a longer one reverses the whole dimension.");
}

}  // namespace vgpu
