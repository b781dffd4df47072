// The building blocks of the plugin's op kernels (TensorFlow's kernel C API underneath):
//   OpConstruction  reads a node's attributes once, when TensorFlow builds the kernel;
//   OpContext       one Compute call: inputs, outputs, host-memory inputs, the stream, the DNN API;
//   RegisterKernel  registers a kernel class for an op on the virtual device.
// A kernel class provides
//   static absl::StatusOr<std::unique_ptr<K>> Create(OpConstruction& construction);
//   absl::Status Compute(OpContext& context);
// and never keeps descriptors between calls (the client runtime decides what to reuse).
#ifndef VGPU_KERNELS_OP_KERNEL_H_
#define VGPU_KERNELS_OP_KERNEL_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "plugin/client/device_client.h"
#include "plugin/common/activity.h"
#include "plugin/common/status_macros.h"
#include "plugin/kernels/dtype_map.h"
#include "plugin/kernels/kernel_launch.h"
#include "plugin/kernels/kernel_support.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/launch_params.h"
#include "tensorflow/c/kernels.h"

namespace vgpu {

class OpConstruction {
 public:
  explicit OpConstruction(TF_OpKernelConstruction* construction) : construction_(construction) {}
  bool Has(const char* name);
  absl::StatusOr<int64_t> Int(const char* name);
  absl::StatusOr<float> Float(const char* name);
  absl::StatusOr<bool> Bool(const char* name);
  absl::StatusOr<std::string> String(const char* name);
  absl::StatusOr<TF_DataType> Type(const char* name);
  absl::StatusOr<std::vector<int64_t>> IntList(const char* name);
  // The value `choices` pairs with the text of string attribute `name`; InvalidArgument
  // StrCat(message_prefix, text, message_suffix) when the text is none of theirs.
  template <typename T>
  absl::StatusOr<T> StringChoice(const char* name,
                                 std::initializer_list<std::pair<absl::string_view, T>> choices,
                                 absl::string_view message_prefix,
                                 absl::string_view message_suffix = "") {
    VGPU_ASSIGN_OR_RETURN(std::string text, String(name));
    for (const auto& [choice, value] : choices) {
      if (text == choice) return value;
    }
    return absl::InvalidArgumentError(absl::StrCat(message_prefix, text, message_suffix));
  }
  TF_OpKernelConstruction* raw() const { return construction_; }

 private:
  TF_OpKernelConstruction* construction_;
};

// The padding attribute of TensorFlow's windowed ops (convolution, pooling).
enum class Padding { kValid, kSame, kExplicit };

// Reads attribute "padding" (VALID, SAME, EXPLICIT); another text is InvalidArgument
// StrCat(unknown_message, text) (TensorFlow's convolution and pooling kernels word it apart).
absl::StatusOr<Padding> ReadPadding(OpConstruction& construction,
                                    absl::string_view unknown_message);

class OpContext {
 public:
  explicit OpContext(TF_OpKernelContext* context) : context_(context) {}

  int num_inputs() const { return TF_NumInputs(context_); }
  absl::StatusOr<TensorPtr> Input(int index) const { return GetInput(context_, index); }
  TF_DataType InputType(int index) const { return TF_InputDatatype(context_, index); }
  // Inputs 0 .. N-1, in order: the prologue of a kernel, named by a structured binding
  //   VGPU_ASSIGN_OR_RETURN(auto inputs, context.Inputs<2>());
  //   const auto& [x, y] = inputs;
  // The first input TensorFlow cannot give is the error.
  template <size_t N>
  absl::StatusOr<std::array<TensorPtr, N>> Inputs() const {
    std::array<TensorPtr, N> inputs;
    for (size_t i = 0; i < N; ++i) {
      VGPU_ASSIGN_OR_RETURN(inputs[i], Input(static_cast<int>(i)));
    }
    return inputs;
  }

  // Inputs 0 .. count-1, in order: an op's list of inputs (AddN, Pack, ConcatV2's values).
  absl::StatusOr<std::vector<TensorPtr>> InputList(int count) const;

  // The shape of input `index`.
  absl::StatusOr<std::vector<int64_t>> InputShape(int index) const;

  // The values of a host-memory integer input (int32 or int64), e.g. an axis or a shape.
  absl::StatusOr<std::vector<int64_t>> HostIntegers(int index) const;

  // The values of an int32 / int64 tensor in device memory, copied to the host. Blocks: a round
  // trip that synchronises the op's stream. Only for the checks TensorFlow's GPU kernels make on
  // the host too (indices that would otherwise fail the stream asynchronously).
  absl::StatusOr<std::vector<int64_t>> DeviceIntegers(const TF_Tensor* tensor) const;

  // Unimplemented(`message`) while TensorFlow's op determinism is required
  // (tf.config.experimental.enable_op_determinism), else OK: for the ops whose CUDA kernel
  // TensorFlow refuses to run then (code written for a GPU expects the error), even where the
  // executor's kernel is deterministic.
  static absl::Status RefuseUnderOpDeterminism(const char* message);

  // Output `index` of `dtype` and `dims`.
  absl::StatusOr<TensorPtr> AllocateOutput(int index, TF_DataType dtype,
                                           absl::Span<const int64_t> dims) const;
  // Like AllocateOutput, but reuses one of `candidate_inputs`' buffers when TensorFlow allows
  // (never one the kernel holds a handle on: see ForwardHeldOrAllocateOutput).
  absl::StatusOr<TensorPtr> ForwardOrAllocateOutput(std::initializer_list<int> candidate_inputs,
                                                    int index, TF_DataType dtype,
                                                    absl::Span<const int64_t> dims) const;
  // An input offered for an output's buffer, with the kernel's own handle on it (nullptr if the
  // kernel holds none).
  struct ForwardCandidate {
    int input;
    TensorPtr* held;
  };
  // Like ForwardOrAllocateOutput, for a kernel that holds handles on the candidate inputs.
  // TensorFlow forwards an input only while nothing else references its buffer, and a held
  // TensorPtr is such a reference (so ForwardOrAllocateOutput never forwards an input the kernel
  // holds). Each `held` handle is dropped for the call and taken again after it: it stays valid,
  // and shares the output's buffer if TensorFlow forwarded that input (the input itself stays
  // alive meanwhile, TensorFlow holds it until the kernel returns). Only for ops whose executor
  // kernels may write the output over an input: element-wise ones, where each output element is
  // written from its own input elements only.
  absl::StatusOr<TensorPtr> ForwardHeldOrAllocateOutput(
      std::initializer_list<ForwardCandidate> candidates, int index, TF_DataType dtype,
      absl::Span<const int64_t> dims) const;
  // A scratch device buffer that lives until the kernel returns (stream order keeps it valid
  // for the work launched before that).
  absl::StatusOr<TensorPtr> AllocateTemp(TF_DataType dtype, absl::Span<const int64_t> dims) const;

  // Copies `from`'s bytes into `to` on the op's stream, unless `to` holds `from`'s buffer (an
  // output TensorFlow let take over an input's buffer) or `from` is empty.
  absl::Status CopyUnlessForwarded(const TF_Tensor* from, const TF_Tensor* to) const;

  // Makes `tensor` output `index` as it is, without copying (TensorFlow's set_output).
  absl::Status SetOutput(int index, const TF_Tensor* tensor) const;
  // Makes output `index` a view of `tensor`'s bytes as `dtype` and `dims` (a bitcast: the byte
  // size must stay the same), sharing its buffer; nothing is launched.
  absl::Status SetOutputView(int index, const TF_Tensor* tensor, TF_DataType dtype,
                             absl::Span<const int64_t> dims) const;

  // The stream this op runs on, and its device's DNN API.
  absl::StatusOr<ClientStream*> Stream() const { return GetClientStream(context_); }

  TF_OpKernelContext* raw() const { return context_; }

 private:
  absl::StatusOr<TensorPtr> ForwardOrAllocate(absl::Span<const ForwardCandidate> candidates,
                                              int index, TF_DataType dtype,
                                              absl::Span<const int64_t> dims) const;
  TF_OpKernelContext* context_;
};

// Settings of a dense tensor descriptor for `tensor` (rank <= kMaxRank).
absl::StatusOr<TensorDescriptorSettings> TensorSettings(const TF_Tensor* tensor);
absl::StatusOr<TensorDescriptorSettings> TensorSettings(TF_DataType dtype,
                                                        absl::Span<const int64_t> dims);

// Element type of a tensor for the protocol; InvalidArgument if unsupported.
absl::StatusOr<DType> DTypeOf(TF_DataType dtype);

struct TypeConstraint {
  const char* attribute;
  TF_DataType dtype;
};

namespace internal {
void RegisterKernelWithCallbacks(const char* op_name, const char* device_type,
                                 std::initializer_list<TypeConstraint> type_constraints,
                                 std::initializer_list<const char*> host_memory,
                                 void* (*create)(TF_OpKernelConstruction*),
                                 void (*compute)(void*, TF_OpKernelContext*),
                                 void (*destroy)(void*));
void FailConstruction(TF_OpKernelConstruction* construction, const absl::Status& status);
// Forward or backward propagation, from the node's name (TensorFlow names gradient nodes
// "gradient_tape/..." or "gradients/..."; gradient op types end in Grad or contain Backprop).
// Read once, when TensorFlow constructs the node's kernel.
LaunchRole RoleOfNode(TF_OpKernelConstruction* construction);

// A node's op type and name as activity-log names (plugin/common/activity.h), read once when
// TensorFlow constructs the node's kernel.
struct NodeActivityNames {
  activity::NameId op = activity::kNoName;
  activity::NameId op_name = activity::kNoName;
};
NodeActivityNames ActivityNamesOfNode(TF_OpKernelConstruction* construction);

// What TensorFlow holds for one node: the kernel, the node's role and activity names.
template <typename K>
struct KernelInstance {
  std::unique_ptr<K> kernel;
  LaunchRole role;
  NodeActivityNames names;
};
}  // namespace internal

// Registers kernel class `K` for `op_name` on `device_type`. `host_memory` names inputs or
// outputs that stay in host memory (shapes, axes). Failures are logged, never fatal.
template <typename K>
void RegisterKernel(const char* op_name, const char* device_type,
                    std::initializer_list<TypeConstraint> type_constraints,
                    std::initializer_list<const char*> host_memory = {}) {
  auto create = [](TF_OpKernelConstruction* raw) -> void* {
    OpConstruction construction(raw);
    absl::StatusOr<std::unique_ptr<K>> kernel = K::Create(construction);
    if (!kernel.ok()) {
      internal::FailConstruction(raw, kernel.status());
      return nullptr;
    }
    return new internal::KernelInstance<K>{*std::move(kernel), internal::RoleOfNode(raw),
                                           internal::ActivityNamesOfNode(raw)};
  };
  auto compute = [](void* instance, TF_OpKernelContext* raw) {
    auto* node = static_cast<internal::KernelInstance<K>*>(instance);
    ScopedLaunchRole role(node->role);
    // Tags the commands the kernel issues with its op; records its span while profiling.
    activity::ScopedOp op(node->names.op, node->names.op_name,
                          activity::Enabled() ? static_cast<uint32_t>(TF_GetDeviceId(raw)) : 0);
    OpContext context(raw);
    FailOp(raw, node->kernel->Compute(context));
  };
  auto destroy = [](void* instance) { delete static_cast<internal::KernelInstance<K>*>(instance); };
  internal::RegisterKernelWithCallbacks(op_name, device_type, type_constraints, host_memory,
                                        create, compute, destroy);
}

// Registers `K` once per dtype for the attribute `attribute` (usually "T").
template <typename K>
void RegisterKernelForTypes(const char* op_name, const char* device_type, const char* attribute,
                            std::initializer_list<TF_DataType> dtypes,
                            std::initializer_list<const char*> host_memory = {}) {
  for (TF_DataType dtype : dtypes) {
    RegisterKernel<K>(op_name, device_type, {{attribute, dtype}}, host_memory);
  }
}

// A kernel class without attributes can use this as its Create.
template <typename K>
struct NoAttributes {
  static absl::StatusOr<std::unique_ptr<K>> Create(OpConstruction&) {
    return std::make_unique<K>();
  }
};

// The base of a kernel class K whose state is one `Attributes` value, which kRead reads (and
// checks) when TensorFlow builds the node's kernel: gives K its Create and `attributes_`.
template <typename K, typename Attributes,
          absl::StatusOr<Attributes> (*kRead)(OpConstruction&)>
class WithAttributes {
 public:
  static absl::StatusOr<std::unique_ptr<K>> Create(OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(Attributes attributes, kRead(construction));
    auto kernel = std::make_unique<K>();
    static_cast<WithAttributes&>(*kernel).attributes_ = std::move(attributes);
    return kernel;
  }

 protected:
  Attributes attributes_;
};

// Reads integer attribute `kName` (a character array with linkage, e.g. constexpr char kAxis[]
// = "axis"): the reader of a kernel class whose state is that one attribute,
//   class PackOp : public WithAttributes<PackOp, int64_t, IntAttribute<kAxis>> {...};
template <const char* kName>
absl::StatusOr<int64_t> IntAttribute(OpConstruction& construction) {
  return construction.Int(kName);
}

}  // namespace vgpu

#endif  // VGPU_KERNELS_OP_KERNEL_H_
