// TensorFlow op kernels for Softmax, LogSoftmax, SoftmaxCrossEntropyWithLogits and
// SparseSoftmaxCrossEntropyWithLogits on the virtual GPU (kernel ids of the reduction family).
// Shapes and broadcasting are validated as TensorFlow's kernels do; the launches carry tensor
// descriptors created and destroyed per call, as cudnnSoftmaxForward's callers do.
//
// SparseSoftmaxCrossEntropyWithLogits takes its labels in device memory, as TensorFlow's GPU
// kernel does. (They were a HostMemory input once: Keras casts the labels on the device, so
// TensorFlow copied them back to the host in the middle of every training step, and the op's
// thread waited for the executor to finish the whole forward pass before it could issue the
// backward one.) A label outside [0, classes) gives a NaN loss and a NaN gradient row, as
// TensorFlow's CUDA kernel does (its CPU kernel raises InvalidArgument "Received a label value
// of ...").
#include "plugin/kernels/softmax_ops.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/reduction.h"

namespace vgpu {
namespace {

constexpr std::initializer_list<TF_DataType> kFloatingTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                                TF_DOUBLE};

// Softmax (kLog = false) and LogSoftmax (kLog = true) over the last dimension.
template <bool kLog>
class SoftmaxOp : public NoAttributes<SoftmaxOp<kLog>> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    const std::vector<int64_t> dims = ShapeOf(x.get());
    if (dims.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("logits must have >= 1 dimension, got ", ShapeString(dims)));
    }
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.ForwardOrAllocateOutput({0}, 0, dtype, dims));
    const int64_t count = TF_TensorElementCount(x.get());
    if (count == 0) return absl::OkStatus();
    const int64_t classes = dims.back();
    const int64_t view[2] = {count / classes, classes};
    reduction::SoftmaxParams softmax;
    softmax.log = kLog ? 1 : 0;
    return KernelLaunch(context)
        .DescribeTensor(dtype, view)
        .Buffer(x.get())
        .Buffer(y.get())
        .Param(softmax)
        .Run(reduction::kSoftmax);
  }
};

// The shape two operands broadcast to (numpy rules), or nullopt when they do not.
std::optional<std::vector<int64_t>> BroadcastShape(const std::vector<int64_t>& a,
                                                   const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// `dims` (rank <= 2) as a rank-2 shape with leading 1s.
std::vector<int64_t> AsMatrix(const std::vector<int64_t>& dims) {
  std::vector<int64_t> matrix(2 - dims.size(), 1);
  matrix.insert(matrix.end(), dims.begin(), dims.end());
  return matrix;
}

// The inputs of a cross-entropy op: the logits (features) and the labels, with their shapes.
struct CrossEntropyInputs {
  TensorPtr logits, labels;
  std::vector<int64_t> logits_dims, labels_dims;
};

absl::StatusOr<CrossEntropyInputs> ReadCrossEntropyInputs(const OpContext& context) {
  CrossEntropyInputs in;
  VGPU_ASSIGN_OR_RETURN(in.logits, context.Input(0));
  VGPU_ASSIGN_OR_RETURN(in.labels, context.Input(1));
  in.logits_dims = ShapeOf(in.logits.get());
  in.labels_dims = ShapeOf(in.labels.get());
  return in;
}

// The outputs of a cross-entropy op over logits of `dtype` and [batch, classes] `shape`: the
// loss [batch] (output 0) and the backprop of `shape` (output 1, in the logits' buffer where
// TensorFlow allows).
struct CrossEntropyOutputs {
  TensorPtr loss, backprop;
};

absl::StatusOr<CrossEntropyOutputs> AllocateCrossEntropyOutputs(
    OpContext& context, TF_DataType dtype, const std::vector<int64_t>& shape) {
  CrossEntropyOutputs outputs;
  VGPU_ASSIGN_OR_RETURN(outputs.loss, context.AllocateOutput(0, dtype, {shape[0]}));
  VGPU_ASSIGN_OR_RETURN(outputs.backprop, context.ForwardOrAllocateOutput({0}, 1, dtype, shape));
  return outputs;
}

// SoftmaxCrossEntropyWithLogits(features, labels) -> (loss, backprop).
class SoftmaxCrossEntropyOp : public NoAttributes<SoftmaxCrossEntropyOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(const CrossEntropyInputs in, ReadCrossEntropyInputs(context));
    const auto& [logits, labels, logits_dims, labels_dims] = in;
    std::vector<int64_t> shape = logits_dims;
    if (logits_dims != labels_dims) {
      std::optional<std::vector<int64_t>> broadcast = BroadcastShape(logits_dims, labels_dims);
      if (!broadcast) {
        return absl::InvalidArgumentError(absl::StrCat(
            "logits and labels must be broadcastable: logits_size=", ShapeString(logits_dims),
            " labels_size=", ShapeString(labels_dims)));
      }
      shape = *broadcast;
    }
    if (shape.size() != 2) {
      return absl::InvalidArgumentError(
          "logits and labels must be either 2-dimensional, or broadcasted to be "
          "2-dimensional");
    }
    const TF_DataType dtype = TF_TensorType(logits.get());
    VGPU_ASSIGN_OR_RETURN(CrossEntropyOutputs out,
                          AllocateCrossEntropyOutputs(context, dtype, shape));
    if (shape[0] == 0) return absl::OkStatus();

    return KernelLaunch(context)
        .DescribeTensor(dtype, AsMatrix(logits_dims))
        .DescribeTensor(dtype, AsMatrix(labels_dims))
        .DescribeTensor(dtype, shape)
        .Buffer(logits.get())
        .Buffer(labels.get())
        .Buffer(out.loss.get())
        .Buffer(out.backprop.get())
        .Run(reduction::kSoftmaxCrossEntropy);
  }
};

// SparseSoftmaxCrossEntropyWithLogits(features [batch, classes], labels [batch]).
class SparseSoftmaxCrossEntropyOp : public NoAttributes<SparseSoftmaxCrossEntropyOp> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(const CrossEntropyInputs in, ReadCrossEntropyInputs(context));
    const auto& [logits, labels, logits_dims, labels_dims] = in;
    if (logits_dims.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("logits must be 2-D, but got shape ", ShapeString(logits_dims)));
    }
    if (labels_dims.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels must be 1-D, but got shape ", ShapeString(labels_dims)));
    }
    if (logits_dims[0] != labels_dims[0]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "logits and labels must have the same first dimension, got logits shape ",
          ShapeString(logits_dims), " and labels shape ", ShapeString(labels_dims)));
    }
    if (logits_dims[1] == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Must have at least one class, but got logits shape ", ShapeString(logits_dims)));
    }
    const TF_DataType dtype = TF_TensorType(logits.get());
    VGPU_ASSIGN_OR_RETURN(CrossEntropyOutputs out,
                          AllocateCrossEntropyOutputs(context, dtype, logits_dims));
    if (logits_dims[0] == 0) return absl::OkStatus();

    return KernelLaunch(context)
        .DescribeTensor(dtype, logits_dims)
        .DescribeTensor(TF_TensorType(labels.get()), labels_dims)
        .Buffer(logits.get())
        .Buffer(labels.get())
        .Buffer(out.loss.get())
        .Buffer(out.backprop.get())
        .Run(reduction::kSparseSoftmaxCrossEntropy);
  }

};

}  // namespace

void RegisterSoftmaxOps(const char* device_type) {
  RegisterKernelForTypes<SoftmaxOp<false>>("Softmax", device_type, "T", kFloatingTypes);
  RegisterKernelForTypes<SoftmaxOp<true>>("LogSoftmax", device_type, "T", kFloatingTypes);
  RegisterKernelForTypes<SoftmaxCrossEntropyOp>("SoftmaxCrossEntropyWithLogits", device_type,
                                                "T", kFloatingTypes);
  for (TF_DataType dtype : kFloatingTypes) {
    for (TF_DataType label_type : {TF_INT32, TF_INT64}) {
      RegisterKernel<SparseSoftmaxCrossEntropyOp>("SparseSoftmaxCrossEntropyWithLogits",
                                                  device_type,
                                                  {{"T", dtype}, {"Tlabels", label_type}});
    }
  }
  DocumentOp("Softmax", "", "Over the last dimension; 16-bit types computed in float.");
  DocumentOp("LogSoftmax", "", "Over the last dimension; 16-bit types computed in float.");
  DocumentOp("SoftmaxCrossEntropyWithLogits", "",
             "Logits and labels broadcast to [batch, classes]; 16-bit types computed in float.");
  DocumentOp("SparseSoftmaxCrossEntropyWithLogits", "",
             "Labels in device memory. A label out of range gives a NaN loss and gradient row, as "
             "TensorFlow's CUDA kernel (its CPU kernel raises InvalidArgument).");
}

}  // namespace vgpu
