// TensorFlow's Einsum on the virtual GPU (Keras' MultiHeadAttention and EinsumDense use it,
// and its gradient is Einsum too). The equation is parsed when the kernel is built and each
// call is planned on the host as TensorFlow's GPU kernel plans it (einsum_op_impl.h): labels
// are typed batch, free, contract or reduce, ellipses become broadcast dimensions, a label
// repeated in an operand takes a generalized diagonal and one repeated in the output writes a
// diagonal. The work is a sequence of launches, each through KernelLaunch, with temporaries
// from AllocateTemp:
//   per operand   a rearrangement (kRearrange) into [broadcast..., batch..., free..., contract]
//                 with reduce labels summed out, skipped when the operand already has that
//                 layout (or its transpose);
//   contraction   one batched matrix product (kMatmul) with broadcasting, which writes the
//                 output directly when the labels come out in the output's order;
//   output        otherwise a rearrangement into the output's order.
// One operand needs a single rearrangement. float32, float16, bfloat16 and float64.
#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "plugin/kernels/convolution_ops.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/protocol/kernels/convolution.h"

namespace vgpu::conv {
namespace {

constexpr int kEllipsis = -1;

// An equation parsed as TensorFlow's ParseEinsumEquation does: labels are numbered in order of
// first appearance (inputs first, then the output); kEllipsis marks an ellipsis.
struct EinsumEquation {
  std::vector<std::vector<int>> inputs;
  std::vector<int> output;
  std::vector<char> names;  // label -> its character
};

absl::Status MapLabels(const std::string& subscript, const std::string& equation,
                       std::vector<int>* labels, std::vector<char>* names) {
  bool seen_ellipsis = false;
  for (size_t i = 0; i < subscript.size(); ++i) {
    const char c = subscript[i];
    if (c == '.') {
      if (subscript.compare(i, 3, "...") != 0 || seen_ellipsis) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Invalid ellipsis in subscript '", subscript, "' of einsum equation: ", equation));
      }
      seen_ellipsis = true;
      labels->push_back(kEllipsis);
      i += 2;
      continue;
    }
    auto found = std::find(names->begin(), names->end(), c);
    if (found == names->end()) {
      names->push_back(c);
      found = names->end() - 1;
    }
    labels->push_back(static_cast<int>(found - names->begin()));
  }
  return absl::OkStatus();
}

absl::StatusOr<EinsumEquation> ParseEquation(const std::string& equation) {
  std::vector<std::string> sides = absl::StrSplit(equation, "->");
  if (sides.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("Expecting exactly one '->' in einsum equation: ", equation));
  }
  std::vector<std::string> inputs = absl::StrSplit(sides[0], ',');
  if (inputs.size() != 1 && inputs.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("Expecting 1 or 2 input subscripts in equation '", equation,
                     "' but got: ", inputs.size()));
  }
  EinsumEquation parsed;
  parsed.inputs.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    VGPU_RETURN_IF_ERROR(MapLabels(inputs[i], equation, &parsed.inputs[i], &parsed.names));
  }
  const size_t input_labels = parsed.names.size();
  VGPU_RETURN_IF_ERROR(MapLabels(sides[1], equation, &parsed.output, &parsed.names));
  if (parsed.names.size() > input_labels) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Output subscript contains the label '", std::string(1, parsed.names[input_labels]),
        "', which appears in no input subscript of einsum equation: ", equation));
  }
  return parsed;
}

enum class LabelType { kBroadcast, kBatch, kFree, kContract, kReduce };

// Row-major strides of `shape`.
std::vector<int64_t> Strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * shape[i + 1];
  }
  return strides;
}

int64_t Product(const std::vector<int64_t>& dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<int64_t>());
}

// One call's plan: every label typed and sized, each operand's axes labelled (broadcast
// dimensions as labels num_named + position, right-aligned to the longest ellipsis).
struct EinsumPlan {
  int num_named = 0;
  int broadcast_rank = 0;  // of the output's ellipsis
  std::vector<LabelType> types;
  std::vector<int64_t> sizes;                   // per label
  std::vector<std::vector<int>> operand_labels;  // per operand, per axis
  std::vector<int> output_labels;               // per output axis
};

// The labels of `labels` (in order, first occurrences) that have `type`.
std::vector<int> LabelsOfType(const EinsumPlan& plan, const std::vector<int>& labels,
                              LabelType type) {
  std::vector<int> result;
  for (int label : labels) {
    if (plan.types[label] == type &&
        std::find(result.begin(), result.end(), label) == result.end()) {
      result.push_back(label);
    }
  }
  return result;
}

std::vector<int64_t> SizesOf(const EinsumPlan& plan, const std::vector<int>& labels) {
  std::vector<int64_t> sizes;
  for (int label : labels) sizes.push_back(plan.sizes[label]);
  return sizes;
}

std::vector<int> Concat(std::initializer_list<std::vector<int>> parts) {
  std::vector<int> all;
  for (const auto& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

// TensorFlow's EinsumHelper::ProcessDimensions and label typing, for `shapes` of the inputs.
absl::StatusOr<EinsumPlan> PlanEinsum(const EinsumEquation& equation,
                                      const std::vector<std::vector<int64_t>>& shapes) {
  EinsumPlan plan;
  plan.num_named = static_cast<int>(equation.names.size());
  const int num_inputs = static_cast<int>(equation.inputs.size());
  if (static_cast<int>(shapes.size()) != num_inputs) {
    return absl::InvalidArgumentError(
        absl::StrCat("Expected ", num_inputs, " inputs but got: ", shapes.size()));
  }
  plan.sizes.assign(plan.num_named, -1);
  std::vector<int> broadcast_ranks(num_inputs, 0);
  for (int i = 0; i < num_inputs; ++i) {
    const std::vector<int>& labels = equation.inputs[i];
    const int rank = static_cast<int>(shapes[i].size());
    const bool has_ellipsis =
        std::find(labels.begin(), labels.end(), kEllipsis) != labels.end();
    const int named = static_cast<int>(labels.size()) - (has_ellipsis ? 1 : 0);
    if (!has_ellipsis && rank != named) {
      return absl::InvalidArgumentError(absl::StrCat("Expected input ", i, " to have rank ",
                                                     named, " but got: ", rank));
    }
    if (has_ellipsis && rank < named) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Expected input ", i, " to have rank at least ", named, " but got: ", rank));
    }
    broadcast_ranks[i] = rank - named;
    plan.broadcast_rank = std::max(plan.broadcast_rank, broadcast_ranks[i]);
  }
  const bool output_has_ellipsis =
      std::find(equation.output.begin(), equation.output.end(), kEllipsis) !=
      equation.output.end();
  if (!output_has_ellipsis && plan.broadcast_rank > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Output contains ", plan.broadcast_rank,
        " broadcasting dimension(s) but no ellipsis (...) was found in the output subscripts."));
  }
  // Label every axis; record and check the named labels' sizes and the broadcast sizes.
  std::vector<int64_t> broadcast_sizes(plan.broadcast_rank, 1);
  for (int i = 0; i < num_inputs; ++i) {
    std::vector<int>& axes = plan.operand_labels.emplace_back();
    for (int label : equation.inputs[i]) {
      if (label != kEllipsis) {
        axes.push_back(label);
        continue;
      }
      for (int j = 0; j < broadcast_ranks[i]; ++j) {
        axes.push_back(plan.num_named + plan.broadcast_rank - broadcast_ranks[i] + j);
      }
    }
    for (size_t axis = 0; axis < axes.size(); ++axis) {
      const int64_t dim = shapes[i][axis];
      const int label = axes[axis];
      if (label >= plan.num_named) {
        int64_t& size = broadcast_sizes[label - plan.num_named];
        if (size != 1 && dim != 1 && size != dim) {
          return absl::InvalidArgumentError(absl::StrCat("Invalid broadcasting dimensions: ",
                                                         ShapeString(shapes[0]), " vs. ",
                                                         ShapeString(shapes.back())));
        }
        if (size == 1) size = dim;
        continue;
      }
      if (plan.sizes[label] != -1 && plan.sizes[label] != dim) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Expected dimension ", plan.sizes[label], " at axis ", axis,
            " of the input shaped ", ShapeString(shapes[i]), " but got dimension ", dim));
      }
      plan.sizes[label] = dim;
    }
  }
  plan.sizes.insert(plan.sizes.end(), broadcast_sizes.begin(), broadcast_sizes.end());
  for (int label : equation.output) {
    if (label != kEllipsis) {
      plan.output_labels.push_back(label);
      continue;
    }
    for (int j = 0; j < plan.broadcast_rank; ++j) {
      plan.output_labels.push_back(plan.num_named + j);
    }
  }
  // TensorFlow's dimension types.
  plan.types.assign(plan.sizes.size(), LabelType::kBroadcast);
  for (int label = 0; label < plan.num_named; ++label) {
    const bool removed = std::find(plan.output_labels.begin(), plan.output_labels.end(),
                                   label) == plan.output_labels.end();
    int operands = 0;
    for (const auto& labels : plan.operand_labels) {
      if (std::find(labels.begin(), labels.end(), label) != labels.end()) ++operands;
    }
    const bool unique = operands < 2;
    plan.types[label] = unique ? (removed ? LabelType::kReduce : LabelType::kFree)
                               : (removed ? LabelType::kContract : LabelType::kBatch);
  }
  return plan;
}

// The rearrangement that makes a dense tensor labelled `y_labels` (kept labels; a repeated one
// is a written diagonal) out of `x` labelled `x_labels` of shape `x_shape` (a repeated label is
// a taken diagonal), summing out the labels of x that y lacks.
convolution::RearrangeParams RearrangeFor(const std::vector<int>& x_labels,
                                          const std::vector<int64_t>& x_shape,
                                          const std::vector<int>& y_labels,
                                          const EinsumPlan& plan) {
  const std::vector<int64_t> x_strides = Strides(x_shape);
  auto stride_of = [&](int label) {
    int64_t stride = 0;
    for (size_t axis = 0; axis < x_labels.size(); ++axis) {
      if (x_labels[axis] == label) stride += x_strides[axis];
    }
    return stride;
  };
  convolution::RearrangeParams params;
  for (size_t k = 0; k < y_labels.size(); ++k) {
    const auto first = std::find(y_labels.begin(), y_labels.end(), y_labels[k]);
    if (first != y_labels.begin() + k) {
      params.ties[k] = static_cast<int32_t>(first - y_labels.begin());
    } else {
      params.x_strides[k] = stride_of(y_labels[k]);
    }
  }
  std::vector<int> summed;
  for (int label : x_labels) {
    if (std::find(y_labels.begin(), y_labels.end(), label) == y_labels.end() &&
        std::find(summed.begin(), summed.end(), label) == summed.end()) {
      params.summed_sizes[summed.size()] = plan.sizes[label];
      params.summed_strides[summed.size()] = stride_of(label);
      summed.push_back(label);
    }
  }
  params.summed_rank = static_cast<int32_t>(summed.size());
  return params;
}

absl::Status LaunchRearrange(OpContext& context, TF_DataType dtype, BufferArg x,
                             const std::vector<int64_t>& x_shape, BufferArg y,
                             const std::vector<int64_t>& y_shape,
                             const convolution::RearrangeParams& params) {
  return KernelLaunch(context)
      .DescribeTensor(dtype, x_shape)
      .DescribeTensor(dtype, y_shape)
      .Buffer(x)
      .Buffer(y)
      .Param(params)
      .Run(convolution::kRearrange);
}

// An operand of the contraction as the matrix product reads it: [broadcast..., B, F, C] (or
// [broadcast..., B, C, F] when `transposed`), B, F and C the products of its batch, free and
// contract sizes.
struct MatmulOperand {
  BufferArg buffer;
  std::vector<int64_t> dims;
  bool transposed = false;
  std::vector<int> free_labels;
  TensorPtr temporary;  // holds a rearranged operand until the kernel returns
};

class EinsumOp {
 public:
  static absl::StatusOr<std::unique_ptr<EinsumOp>> Create(OpConstruction& construction) {
    auto op = std::make_unique<EinsumOp>();
    VGPU_ASSIGN_OR_RETURN(op->equation_text_, construction.String("equation"));
    VGPU_ASSIGN_OR_RETURN(op->equation_, ParseEquation(op->equation_text_));
    return op;
  }

  absl::Status Compute(OpContext& context) {
    const int num_inputs = context.num_inputs();
    VGPU_ASSIGN_OR_RETURN(std::vector<TensorPtr> inputs, context.InputList(num_inputs));
    const std::vector<std::vector<int64_t>> shapes = ShapesOf(inputs);
    VGPU_ASSIGN_OR_RETURN(EinsumPlan plan, PlanEinsum(equation_, shapes));
    const TF_DataType dtype = TF_TensorType(inputs[0].get());
    const std::vector<int64_t> output_shape = SizesOf(plan, plan.output_labels);
    for (const auto& shape : shapes) VGPU_RETURN_IF_ERROR(CheckRank(shape.size()));
    VGPU_RETURN_IF_ERROR(CheckRank(output_shape.size()));
    int64_t output_elements = 1;
    for (int64_t dim : output_shape) {
      if (__builtin_mul_overflow(output_elements, dim, &output_elements)) {
        return absl::InvalidArgumentError(
            absl::StrCat("Einsum output shape ", ShapeString(output_shape), " is too large"));
      }
    }
    VGPU_ASSIGN_OR_RETURN(TensorPtr output, context.AllocateOutput(0, dtype, output_shape));
    if (output_elements == 0) return absl::OkStatus();
    if (num_inputs == 1) {
      return LaunchRearrange(
          context, dtype, BufferOf(inputs[0].get()), shapes[0], BufferOf(output.get()),
          output_shape, RearrangeFor(plan.operand_labels[0], shapes[0], plan.output_labels, plan));
    }
    return Contract(context, plan, dtype, inputs, shapes, output.get(), output_shape);
  }

 private:
  static absl::Status CheckRank(size_t rank) {
    if (rank > static_cast<size_t>(kMaxRank)) {
      return absl::UnimplementedError(absl::StrCat(
          "Einsum on the virtual GPU supports tensors of rank up to ", kMaxRank, ", got ",
          rank));
    }
    return absl::OkStatus();
  }

  // Operand `i` as the matrix product reads it: the tensor itself when its axes are already
  // [broadcast, batch, free, contract] (or with free and contract swapped) without diagonals
  // or summed labels, else a rearranged temporary.
  absl::StatusOr<MatmulOperand> PrepareOperand(OpContext& context, const EinsumPlan& plan,
                                               TF_DataType dtype, const TF_Tensor* tensor,
                                               const std::vector<int64_t>& shape, int i,
                                               const std::vector<int>& batch,
                                               const std::vector<int>& contract) {
    const std::vector<int>& labels = plan.operand_labels[i];
    MatmulOperand operand;
    operand.free_labels = LabelsOfType(plan, plan.output_labels, LabelType::kFree);
    operand.free_labels.erase(
        std::remove_if(operand.free_labels.begin(), operand.free_labels.end(),
                       [&](int label) {
                         return std::find(labels.begin(), labels.end(), label) == labels.end();
                       }),
        operand.free_labels.end());
    const std::vector<int> broadcast = LabelsOfType(plan, labels, LabelType::kBroadcast);
    // Sizes as this operand has them (its broadcast dimensions may be 1 where the plan's
    // are not).
    auto sizes_of = [&](const std::vector<int>& wanted) {
      std::vector<int64_t> sizes;
      for (int label : wanted) {
        sizes.push_back(shape[std::find(labels.begin(), labels.end(), label) - labels.begin()]);
      }
      return sizes;
    };
    const int64_t b = Product(sizes_of(batch));
    const int64_t f = Product(sizes_of(operand.free_labels));
    const int64_t c = Product(sizes_of(contract));
    operand.dims = sizes_of(broadcast);
    const std::vector<int> plain = Concat({broadcast, batch, operand.free_labels, contract});
    const std::vector<int> transposed = Concat({broadcast, batch, contract, operand.free_labels});
    if (labels == plain || labels == transposed) {
      operand.buffer = BufferOf(tensor);
      operand.transposed = labels != plain;
      operand.dims.insert(operand.dims.end(), {b, operand.transposed ? c : f,
                                               operand.transposed ? f : c});
      return operand;
    }
    const std::vector<int64_t> rearranged_shape = sizes_of(plain);
    VGPU_ASSIGN_OR_RETURN(operand.temporary, context.AllocateTemp(dtype, rearranged_shape));
    operand.buffer = BufferOf(operand.temporary.get());
    operand.dims.insert(operand.dims.end(), {b, f, c});
    if (NumElements(rearranged_shape) > 0) {
      VGPU_RETURN_IF_ERROR(LaunchRearrange(context, dtype, BufferOf(tensor), shape,
                                           operand.buffer, rearranged_shape,
                                           RearrangeFor(labels, shape, plain, plan)));
    }
    return operand;
  }

  absl::Status Contract(OpContext& context, const EinsumPlan& plan, TF_DataType dtype,
                        const std::vector<TensorPtr>& inputs,
                        const std::vector<std::vector<int64_t>>& shapes, TF_Tensor* output,
                        const std::vector<int64_t>& output_shape) {
    // The matrix product's tensors have the broadcast dimensions and three more.
    if (plan.broadcast_rank + 3 > kMaxRank) {
      return absl::UnimplementedError(absl::StrCat("Einsum on the virtual GPU supports up to ",
                                                   kMaxRank - 3,
                                                   " broadcast (ellipsis) dimensions"));
    }
    // Batch labels in the output's order, contract labels in the first operand's.
    const std::vector<int> batch = LabelsOfType(plan, plan.output_labels, LabelType::kBatch);
    const std::vector<int> contract =
        LabelsOfType(plan, plan.operand_labels[0], LabelType::kContract);
    MatmulOperand operands[2];
    for (int i = 0; i < 2; ++i) {
      VGPU_ASSIGN_OR_RETURN(operands[i], PrepareOperand(context, plan, dtype, inputs[i].get(),
                                                        shapes[i], i, batch, contract));
    }
    // The product's labels, with the operands in either order: when one order gives the
    // output's, the product is written straight into the output. Its batch dimensions are the
    // operands' broadcast (right-aligned), which the plan checked and sized.
    const std::vector<int> broadcast_labels =
        LabelsOfType(plan, plan.output_labels, LabelType::kBroadcast);
    int first = 0;
    std::vector<int> product_labels = Concat(
        {broadcast_labels, batch, operands[0].free_labels, operands[1].free_labels});
    const std::vector<int> swapped_labels = Concat(
        {broadcast_labels, batch, operands[1].free_labels, operands[0].free_labels});
    if (product_labels != plan.output_labels && swapped_labels == plan.output_labels) {
      first = 1;
      product_labels = swapped_labels;
    }
    const MatmulOperand& a = operands[first];
    const MatmulOperand& b = operands[1 - first];
    const bool direct = product_labels == plan.output_labels;
    std::vector<int64_t> product_dims = SizesOf(plan, broadcast_labels);
    product_dims.insert(product_dims.end(), {a.dims[a.dims.size() - 3],
                                             Product(SizesOf(plan, a.free_labels)),
                                             Product(SizesOf(plan, b.free_labels))});
    TensorPtr product;
    BufferArg product_buffer = BufferOf(output);
    if (!direct) {
      VGPU_ASSIGN_OR_RETURN(product, context.AllocateTemp(dtype, product_dims));
      product_buffer = BufferOf(product.get());
    }
    MatmulDescriptorSettings matmul;
    matmul.transpose_a = a.transposed ? 1 : 0;
    matmul.transpose_b = b.transposed ? 0 : 1;  // the product needs op(b) = [..., C, F]
    VGPU_ASSIGN_OR_RETURN(matmul.dtype, DTypeOf(dtype));
    VGPU_RETURN_IF_ERROR(KernelLaunch(context)
                             .Describe(matmul)
                             .DescribeTensor(dtype, a.dims)
                             .DescribeTensor(dtype, b.dims)
                             .DescribeTensor(dtype, product_dims)
                             .Buffer(a.buffer)
                             .Buffer(b.buffer)
                             .Buffer(product_buffer)
                             .Run(convolution::kMatmul));
    if (direct) return absl::OkStatus();
    // The product, dense in its labels' sizes, rearranged into the output's order (writing
    // diagonals for repeated output labels).
    const std::vector<int64_t> product_shape = SizesOf(plan, product_labels);
    return LaunchRearrange(context, dtype, product_buffer, product_shape, BufferOf(output),
                           output_shape,
                           RearrangeFor(product_labels, product_shape, plan.output_labels, plan));
  }

  std::string equation_text_;
  EinsumEquation equation_;
};

}  // namespace

void RegisterEinsumOps(const char* device_type) {
  RegisterKernelForTypes<EinsumOp>("Einsum", device_type, "T",
                                   {TF_FLOAT, TF_HALF, TF_BFLOAT16, TF_DOUBLE});
  DocumentOp("Einsum", "",
             "One or two operands; ellipsis broadcasting, summed labels, diagonals (a label "
             "repeated in an operand or in the output). Planned on the host, run as "
             "rearrangements and one batched matrix product; tensors of rank <= 8.");
}

}  // namespace vgpu::conv
