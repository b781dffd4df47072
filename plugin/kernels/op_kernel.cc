// OpConstruction, OpContext and kernel registration (see op_kernel.h).
#include "plugin/kernels/op_kernel.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "plugin/common/activity.h"
#include "plugin/common/log.h"
#include "plugin/kernels/op_catalog.h"
#include "xla/tsl/util/determinism.h"

namespace vgpu {

namespace {

// Reads the scalar attribute `name` through `get`, one of TensorFlow's
// TF_OpKernelConstruction_GetAttr* functions for a single value of type `Value`.
template <typename Value>
absl::StatusOr<Value> ScalarAttribute(TF_OpKernelConstruction* construction, const char* name,
                                      void (*get)(TF_OpKernelConstruction*, const char*, Value*,
                                                  TF_Status*)) {
  ScopedTfStatus status;
  Value value{};
  get(construction, name, &value, status.get());
  VGPU_RETURN_IF_ERROR(status.ToStatus());
  return value;
}

// The size of attribute `name`: the length of a list, or the bytes of a string (TensorFlow's
// TF_OpKernelConstruction_GetAttrSize), never negative.
struct AttributeSize {
  size_t list_size = 0;
  size_t total_size = 0;
};

absl::StatusOr<AttributeSize> SizeOfAttribute(TF_OpKernelConstruction* construction,
                                              const char* name) {
  ScopedTfStatus status;
  int32_t list_size = 0;
  int32_t total_size = 0;
  TF_OpKernelConstruction_GetAttrSize(construction, name, &list_size, &total_size, status.get());
  VGPU_RETURN_IF_ERROR(status.ToStatus());
  return AttributeSize{static_cast<size_t>(list_size < 0 ? 0 : list_size),
                       static_cast<size_t>(total_size < 0 ? 0 : total_size)};
}

}  // namespace

bool OpConstruction::Has(const char* name) {
  ScopedTfStatus status;
  return TF_OpKernelConstruction_HasAttr(construction_, name, status.get());
}

absl::StatusOr<int64_t> OpConstruction::Int(const char* name) {
  return ScalarAttribute<int64_t>(construction_, name, TF_OpKernelConstruction_GetAttrInt64);
}

absl::StatusOr<float> OpConstruction::Float(const char* name) {
  return ScalarAttribute<float>(construction_, name, TF_OpKernelConstruction_GetAttrFloat);
}

absl::StatusOr<bool> OpConstruction::Bool(const char* name) {
  VGPU_ASSIGN_OR_RETURN(
      TF_Bool value,
      ScalarAttribute<TF_Bool>(construction_, name, TF_OpKernelConstruction_GetAttrBool));
  return value != 0;
}

absl::StatusOr<std::string> OpConstruction::String(const char* name) {
  VGPU_ASSIGN_OR_RETURN(AttributeSize size, SizeOfAttribute(construction_, name));
  std::string value(size.total_size, '\0');
  ScopedTfStatus status;
  TF_OpKernelConstruction_GetAttrString(construction_, name, value.data(), value.size(),
                                        status.get());
  VGPU_RETURN_IF_ERROR(status.ToStatus());
  return value;
}

absl::StatusOr<TF_DataType> OpConstruction::Type(const char* name) {
  return ScalarAttribute<TF_DataType>(construction_, name, TF_OpKernelConstruction_GetAttrType);
}

absl::StatusOr<std::vector<int64_t>> OpConstruction::IntList(const char* name) {
  VGPU_ASSIGN_OR_RETURN(AttributeSize size, SizeOfAttribute(construction_, name));
  std::vector<int64_t> values(size.list_size);
  ScopedTfStatus status;
  TF_OpKernelConstruction_GetAttrInt64List(construction_, name, values.data(),
                                           static_cast<int>(values.size()), status.get());
  VGPU_RETURN_IF_ERROR(status.ToStatus());
  return values;
}

absl::StatusOr<std::vector<int64_t>> OpContext::DeviceIntegers(const TF_Tensor* tensor) const {
  VGPU_ASSIGN_OR_RETURN(ClientStream * stream, Stream());
  const int64_t count = TF_TensorElementCount(tensor);
  std::vector<int64_t> values(static_cast<size_t>(count));
  if (count == 0) return values;
  const TF_DataType dtype = TF_TensorType(tensor);
  std::vector<uint8_t> bytes(TF_TensorByteSize(tensor));
  VGPU_RETURN_IF_ERROR(stream->device().CopyDeviceToHost(*stream, bytes.data(),
                                                         BufferOf(tensor).address, bytes.size()));
  VGPU_RETURN_IF_ERROR(stream->device().SynchronizeStream(*stream));
  for (int64_t i = 0; i < count; ++i) {
    if (dtype == TF_INT32) {
      int32_t v;
      std::memcpy(&v, bytes.data() + i * sizeof(v), sizeof(v));
      values[i] = v;
    } else {
      int64_t v;
      std::memcpy(&v, bytes.data() + i * sizeof(v), sizeof(v));
      values[i] = v;
    }
  }
  return values;
}

absl::StatusOr<Padding> ReadPadding(OpConstruction& construction,
                                    absl::string_view unknown_message) {
  return construction.StringChoice<Padding>(
      "padding",
      {{"VALID", Padding::kValid}, {"SAME", Padding::kSame}, {"EXPLICIT", Padding::kExplicit}},
      unknown_message);
}

absl::Status OpContext::RefuseUnderOpDeterminism(const char* message) {
  if (tsl::OpDeterminismRequired()) return absl::UnimplementedError(message);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TensorPtr>> OpContext::InputList(int count) const {
  std::vector<TensorPtr> inputs;
  inputs.reserve(count);
  for (int i = 0; i < count; ++i) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr input, Input(i));
    inputs.push_back(std::move(input));
  }
  return inputs;
}

absl::StatusOr<std::vector<int64_t>> OpContext::InputShape(int index) const {
  VGPU_ASSIGN_OR_RETURN(TensorPtr tensor, Input(index));
  return ShapeOf(tensor.get());
}

absl::StatusOr<std::vector<int64_t>> OpContext::HostIntegers(int index) const {
  VGPU_ASSIGN_OR_RETURN(TensorPtr tensor, Input(index));
  const int64_t count = TF_TensorElementCount(tensor.get());
  std::vector<int64_t> values(static_cast<size_t>(count));
  const void* data = TF_TensorData(tensor.get());
  switch (TF_TensorType(tensor.get())) {
    case TF_INT32:
      for (int64_t i = 0; i < count; ++i) values[i] = static_cast<const int32_t*>(data)[i];
      return values;
    case TF_INT64:
      for (int64_t i = 0; i < count; ++i) values[i] = static_cast<const int64_t*>(data)[i];
      return values;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("input ", index, " must be int32 or int64"));
  }
}

namespace {

// The element count of a shape TensorFlow is asked to allocate, or InvalidArgument (TensorFlow's
// wording) where a dimension is negative or the count overflows int64: TensorFlow's TensorShape
// would abort the process on such a shape (a CHECK), while its CPU kernels return this error.
absl::StatusOr<int64_t> CheckedShapeElements(absl::Span<const int64_t> dims) {
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Expected a non-negative size, got ", d));
    }
    int64_t product = 0;
    if (__builtin_mul_overflow(elements, d, &product)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Encountered overflow when multiplying ", elements, " with ", d, ", result: -1"));
    }
    elements = product;
  }
  return elements;
}

}  // namespace

absl::StatusOr<TensorPtr> OpContext::AllocateOutput(int index, TF_DataType dtype,
                                                    absl::Span<const int64_t> dims) const {
  ScopedTfStatus status;
  VGPU_ASSIGN_OR_RETURN(const int64_t elements, CheckedShapeElements(dims));
  TF_Tensor* tensor =
      TF_AllocateOutput(context_, index, dtype, dims.data(), static_cast<int>(dims.size()),
                        static_cast<size_t>(elements) * TF_DataTypeSize(dtype), status.get());
  TensorPtr owned(tensor);
  VGPU_RETURN_IF_ERROR(status.ToStatus());
  return owned;
}

absl::StatusOr<TensorPtr> OpContext::ForwardOrAllocateOutput(
    std::initializer_list<int> candidate_inputs, int index, TF_DataType dtype,
    absl::Span<const int64_t> dims) const {
  absl::InlinedVector<ForwardCandidate, 4> candidates;
  for (int input : candidate_inputs) candidates.push_back({input, nullptr});
  return ForwardOrAllocate(candidates, index, dtype, dims);
}

absl::StatusOr<TensorPtr> OpContext::ForwardHeldOrAllocateOutput(
    std::initializer_list<ForwardCandidate> candidates, int index, TF_DataType dtype,
    absl::Span<const int64_t> dims) const {
  return ForwardOrAllocate(absl::MakeConstSpan(candidates.begin(), candidates.size()), index,
                           dtype, dims);
}

absl::StatusOr<TensorPtr> OpContext::ForwardOrAllocate(
    absl::Span<const ForwardCandidate> candidates, int index, TF_DataType dtype,
    absl::Span<const int64_t> dims) const {
  VGPU_RETURN_IF_ERROR(CheckedShapeElements(dims).status());
  absl::InlinedVector<int, 4> inputs;
  absl::InlinedVector<ForwardCandidate, 4> released;
  for (const ForwardCandidate& candidate : candidates) {
    inputs.push_back(candidate.input);
    if (candidate.held != nullptr && *candidate.held != nullptr) {
      candidate.held->reset();
      released.push_back(candidate);
    }
  }
  ScopedTfStatus status;
  int forwarded = -1;
  TensorPtr owned(TF_ForwardInputOrAllocateOutput(
      context_, inputs.data(), static_cast<int>(inputs.size()), index, dims.data(),
      static_cast<int>(dims.size()), &forwarded, status.get()));
  for (const ForwardCandidate& candidate : released) {
    VGPU_ASSIGN_OR_RETURN(*candidate.held, Input(candidate.input));
  }
  VGPU_RETURN_IF_ERROR(status.ToStatus());
  if (TF_TensorType(owned.get()) != dtype) {
    return absl::InternalError("forwarded output has the wrong dtype");
  }
  if (forwarded >= 0) {
    VGPU_ASSIGN_OR_RETURN(ClientStream * stream, Stream());
    stream->device().counters().CountForwardedOutput();
  }
  return owned;
}

absl::StatusOr<TensorPtr> OpContext::AllocateTemp(TF_DataType dtype,
                                                  absl::Span<const int64_t> dims) const {
  VGPU_RETURN_IF_ERROR(CheckedShapeElements(dims).status());
  ScopedTfStatus status;
  TF_AllocatorAttributes attributes;
  attributes.struct_size = TF_ALLOCATOR_ATTRIBUTES_STRUCT_SIZE;
  attributes.on_host = 0;
  TF_Tensor* tensor = TF_AllocateTemp(context_, dtype, dims.data(),
                                      static_cast<int>(dims.size()), &attributes, status.get());
  TensorPtr owned(tensor);
  VGPU_RETURN_IF_ERROR(status.ToStatus());
  return owned;
}

absl::Status OpContext::CopyUnlessForwarded(const TF_Tensor* from, const TF_Tensor* to) const {
  const BufferArg source = BufferOf(from);
  const BufferArg destination = BufferOf(to);
  if (destination.address == source.address || source.size == 0) return absl::OkStatus();
  VGPU_ASSIGN_OR_RETURN(ClientStream * stream, Stream());
  return stream->device().CopyDeviceToDevice(*stream, destination.address, source.address,
                                             source.size);
}

absl::Status OpContext::SetOutput(int index, const TF_Tensor* tensor) const {
  ScopedTfStatus status;
  TF_SetOutput(context_, index, tensor, status.get());
  return status.ToStatus();
}

absl::Status OpContext::SetOutputView(int index, const TF_Tensor* tensor, TF_DataType dtype,
                                      absl::Span<const int64_t> dims) const {
  const int64_t empty_dims[] = {0};  // a placeholder; BitcastFrom gives it tensor's buffer
  TensorPtr view(TF_AllocateTensor(dtype, empty_dims, 1, 0));
  if (view == nullptr) return absl::InternalError("could not create the output tensor");
  ScopedTfStatus status;
  TF_TensorBitcastFrom(tensor, dtype, view.get(), dims.data(), static_cast<int>(dims.size()),
                       status.get());
  VGPU_RETURN_IF_ERROR(status.ToStatus());
  return SetOutput(index, view.get());
}

absl::StatusOr<DType> DTypeOf(TF_DataType dtype) {
  std::optional<DType> mapped = ToDType(dtype);
  if (!mapped) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype ", static_cast<int>(dtype), " is not supported on the virtual GPU"));
  }
  return *mapped;
}

absl::StatusOr<TensorDescriptorSettings> TensorSettings(TF_DataType dtype,
                                                        absl::Span<const int64_t> dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensors of rank ", dims.size(), " exceed the supported rank ", kMaxRank));
  }
  TensorDescriptorSettings settings;
  VGPU_ASSIGN_OR_RETURN(settings.dtype, DTypeOf(dtype));
  settings.rank = static_cast<int32_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) settings.dims[i] = dims[i];
  return settings;
}

absl::StatusOr<TensorDescriptorSettings> TensorSettings(const TF_Tensor* tensor) {
  std::vector<int64_t> dims = ShapeOf(tensor);
  return TensorSettings(TF_TensorType(tensor), dims);
}

namespace internal {
namespace {

// Field `field` of wire type "length-delimited" of a serialised protobuf message, as bytes
// ("" if absent or the message is malformed): enough to read a NodeDef's op (field 2).
std::string_view StringField(std::string_view message, uint32_t field) {
  size_t at = 0;
  auto varint = [&](uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64 && at < message.size(); shift += 7) {
      const uint8_t byte = static_cast<uint8_t>(message[at++]);
      *value |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  };
  uint64_t tag = 0, length = 0;
  while (at < message.size() && varint(&tag)) {
    switch (tag & 7) {
      case 0:  // varint
        if (!varint(&length)) return {};
        break;
      case 1:  // fixed64
        at += 8;
        break;
      case 5:  // fixed32
        at += 4;
        break;
      case 2:  // length-delimited
        if (!varint(&length) || length > message.size() - std::min(at, message.size())) return {};
        if ((tag >> 3) == field) return message.substr(at, length);
        at += length;
        break;
      default:
        return {};
    }
  }
  return {};
}

}  // namespace

NodeActivityNames ActivityNamesOfNode(TF_OpKernelConstruction* construction) {
  NodeActivityNames names;
  TF_StringView node = TF_OpKernelConstruction_GetName(construction);
  names.op_name = activity::Intern(std::string_view(node.data, node.len));
  ScopedTfStatus status;
  TF_Buffer* node_def = TF_OpKernelConstruction_GetNodeDef(construction, status.get());
  if (node_def != nullptr) {
    if (TF_GetCode(status.get()) == TF_OK) {
      names.op = activity::Intern(StringField(
          std::string_view(static_cast<const char*>(node_def->data), node_def->length), 2));
    }
    TF_DeleteBuffer(node_def);
  }
  return names;
}

LaunchRole RoleOfNode(TF_OpKernelConstruction* construction) {
  TF_StringView name = TF_OpKernelConstruction_GetName(construction);
  std::string_view view(name.data, name.len);
  for (std::string_view marker : {"gradient", "Gradient", "Grad", "Backprop"}) {
    if (view.find(marker) != std::string_view::npos) return LaunchRole::kBackward;
  }
  return LaunchRole::kForward;
}

void FailConstruction(TF_OpKernelConstruction* construction, const absl::Status& status) {
  ScopedTfStatus tf_status;
  ToTfStatus(status, tf_status.get());
  TF_OpKernelConstruction_Failure(construction, tf_status.get());
}

void RecordRegistration(const char* op_name,
                        std::initializer_list<TypeConstraint> type_constraints,
                        std::initializer_list<const char*> host_memory) {
  std::vector<CatalogConstraint> constraints;
  for (const TypeConstraint& c : type_constraints) constraints.push_back({c.attribute, c.dtype});
  CatalogKernel(op_name, constraints, std::vector<const char*>(host_memory));
}

void RegisterKernelWithCallbacks(const char* op_name, const char* device_type,
                                 std::initializer_list<TypeConstraint> type_constraints,
                                 std::initializer_list<const char*> host_memory,
                                 void* (*create)(TF_OpKernelConstruction*),
                                 void (*compute)(void*, TF_OpKernelContext*),
                                 void (*destroy)(void*)) {
  ScopedTfStatus status;
  TF_KernelBuilder* builder = TF_NewKernelBuilder(op_name, device_type, create, compute, destroy);
  for (const TypeConstraint& constraint : type_constraints) {
    TF_KernelBuilder_TypeConstraint(builder, constraint.attribute, constraint.dtype, status.get());
    if (absl::Status s = status.ToStatus(); !s.ok()) {
      Log(LogLevel::kError, absl::StrCat("kernel ", op_name, ": ", s.message()));
      TF_DeleteKernelBuilder(builder);
      return;
    }
  }
  for (const char* name : host_memory) TF_KernelBuilder_HostMemory(builder, name);
  TF_RegisterKernelBuilder(op_name, builder, status.get());  // TensorFlow owns the builder now
  if (absl::Status s = status.ToStatus(); !s.ok()) {
    Log(LogLevel::kError, absl::StrCat("kernel ", op_name, " not registered: ", s.message()));
    return;
  }
  RecordRegistration(op_name, type_constraints, host_memory);
}

}  // namespace internal
}  // namespace vgpu
