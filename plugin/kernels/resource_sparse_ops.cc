// The sparse family's resource-variable ops on the virtual GPU: ResourceGather,
// ResourceGatherNd, ResourceScatter{Update, Add, Sub, Mul, Div, Min, Max} (Keras applies
// IndexedSlices gradients through these) and ResourceScatterNd{Update, Add, Sub, Min, Max}.
// Variables are looked up and locked with TensorFlow's C++ kernel API (variable_support.h);
// scatters update them in place after making their buffer private (variables::PrepareToUpdate;
// the plugin does not use TensorFlow's copy-on-read mode, see there), and the work runs on the
// backing executor in stream order (protocol/kernels/sparse.h).
//
// Index semantics are TensorFlow's GPU kernels': a gather writes zeros for an index outside the
// variable, a floating-point scatter ignores it. Integer scatters are different on TensorFlow's
// GPU build too: it runs them on the host, where a bad index is an InvalidArgument error; here
// their indices are read back (a round trip) and checked the same way before the launch.
// Variables of the integer dtypes the executors have no arithmetic for are scattered in host
// memory (ScattersOnHost).
#include "plugin/kernels/resource_sparse_ops.h"

#include <algorithm>
#include <array>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "plugin/client/device_client.h"
#include "plugin/kernels/dtype_map.h"
#include "plugin/kernels/kernel_launch.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/sparse_shapes.h"
#include "plugin/kernels/status_op_kernel.h"
#include "plugin/kernels/variable_support.h"
#include "plugin/protocol/kernels/sparse.h"
#include "tensorflow/core/framework/types.h"

namespace vgpu {
namespace {

namespace tf = ::tensorflow;
using sparse_shapes::Dims;
using variables::BufferOf;
using variables::LockedVariables;

Dims DimsOf(const tf::TensorShape& shape) {
  Dims dims;
  for (int i = 0; i < shape.dims(); ++i) dims.push_back(shape.dim_size(i));
  return dims;
}

absl::StatusOr<DType> DTypeOfTensor(const tf::Tensor& tensor) {
  std::optional<DType> dtype = ToDType(static_cast<TF_DataType>(tensor.dtype()));
  if (!dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype ", tf::DataTypeString(tensor.dtype()),
                     " is not supported on the virtual GPU"));
  }
  return *dtype;
}

// One call of a resource-variable op: the op's stream and the variable of input 0, locked while
// this object lives.
struct VariableCall {
  ClientStream* stream = nullptr;
  std::unique_ptr<LockedVariables> locked;

  // The tensor the variable holds.
  const tf::Tensor& params() const { return *locked->get(0)->tensor(); }
};

// Finds the op's stream and locks the variable of input 0, checked to hold `dtype`
// (InvalidArgument `mismatch_message` otherwise). For an update (`for_update`), its buffer is
// made private first; a gather reads it as it is (the launch is stream-ordered before any later
// in-place update).
absl::StatusOr<VariableCall> BeginVariableCall(tf::OpKernelContext* context, tf::DataType dtype,
                                               const char* mismatch_message, bool for_update) {
  VariableCall call;
  VGPU_ASSIGN_OR_RETURN(call.stream, variables::StreamOf(context));
  VGPU_ASSIGN_OR_RETURN(call.locked, LockedVariables::Acquire(context, {0}));
  tf::Var* variable = call.locked->get(0);
  if (variable->tensor()->dtype() != dtype) {
    return absl::InvalidArgumentError(mismatch_message);
  }
  if (for_update) {
    VGPU_RETURN_IF_ERROR(variables::PrepareToUpdate(context, variable, *call.stream));
  }
  return call;
}

// BeginVariableCall for a gather (inputs: resource, indices) of `dtype` values.
absl::StatusOr<VariableCall> BeginGather(tf::OpKernelContext* context, tf::DataType dtype) {
  return BeginVariableCall(context, dtype,
                           "Trying to gather from a variable of another dtype than the op's",
                           /*for_update=*/false);
}

// ---------------------------------------------------------------------------------------------
// Gathers

// ResourceGather(resource, indices) with batch_dims.
class ResourceGatherOp : public StatusOpKernel {
 public:
  explicit ResourceGatherOp(tf::OpKernelConstruction* context) : StatusOpKernel(context) {
    OP_REQUIRES_OK(context, context->GetAttr("batch_dims", &batch_dims_));
    OP_REQUIRES(context, batch_dims_ >= 0,
                absl::InvalidArgumentError(
                    absl::StrCat("batch_dims is negative (", batch_dims_, ")")));
  }

 protected:
  absl::Status ComputeWithStatus(tf::OpKernelContext* context) override {
    VGPU_ASSIGN_OR_RETURN(VariableCall call, BeginGather(context, output_type(0)));
    const tf::Tensor& params = call.params();
    const tf::Tensor& indices = context->input(1);
    const Dims params_dims = DimsOf(params.shape());
    const Dims indices_dims = DimsOf(indices.shape());
    const int64_t batch_dims = batch_dims_;
    if (params_dims.empty()) {
      return absl::InvalidArgumentError("params must be at least 1 dimensional");
    }
    if (static_cast<int64_t>(params_dims.size()) < batch_dims) {
      return absl::InvalidArgumentError(absl::StrCat(
          "params must have at least ", batch_dims,
          " (batch_dims) dimensions but it has shape ", ShapeString(params_dims)));
    }
    // TensorFlow's kernel reads past the shapes (and aborts) in these cases; GatherV2's checks.
    if (batch_dims >= static_cast<int64_t>(params_dims.size())) {
      return absl::InvalidArgumentError(absl::StrCat("batch_dims (", batch_dims,
                                                     ") must be less than rank(params) (",
                                                     params_dims.size(), ")."));
    }
    if (batch_dims > static_cast<int64_t>(indices_dims.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("Expected batch_dims in the range [", -static_cast<int64_t>(indices_dims.size()),
                       ", ", indices_dims.size(), "], but got ", batch_dims));
    }
    for (int64_t i = 0; i < batch_dims; ++i) {
      if (params_dims[i] != indices_dims[i]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "params.shape[", i, "]: ", params_dims[i], " should be equal to indices.shape[", i,
            "]: ", indices_dims[i]));
      }
    }
    VGPU_ASSIGN_OR_RETURN(DType index_dtype, sparse_shapes::IndexDTypeOf(indices.dtype()));
    if (params_dims[0] > sparse_shapes::IndexMax(index_dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat("params.shape[0] too large for ", sparse_shapes::IndexName(index_dtype),
                       " indexing: ", params_dims[0], " > ",
                       sparse_shapes::IndexMax(index_dtype)));
    }
    // Output: params.shape[:batch_dims] + indices.shape[batch_dims:] + params.shape[batch_dims+1:].
    sparse::GatherParams p;
    p.index_dtype = index_dtype;
    p.element_size = static_cast<uint32_t>(tf::DataTypeSize(params.dtype()));
    if (p.element_size == 16) {  // complex128: rows of twice as many 8-byte halves
      p.element_size = 8;
      p.inner = 2;
    }
    p.gather_size = params_dims[batch_dims];
    tf::TensorShape output_shape;
    for (int64_t i = 0; i < batch_dims; ++i) {
      VGPU_RETURN_IF_ERROR(output_shape.AddDimWithStatus(params_dims[i]));
      p.batch *= params_dims[i];
    }
    for (size_t i = batch_dims; i < indices_dims.size(); ++i) {
      VGPU_RETURN_IF_ERROR(output_shape.AddDimWithStatus(indices_dims[i]));
    }
    for (size_t i = batch_dims + 1; i < params_dims.size(); ++i) {
      VGPU_RETURN_IF_ERROR(output_shape.AddDimWithStatus(params_dims[i]));
      p.inner *= params_dims[i];
    }
    tf::Tensor* out = nullptr;
    VGPU_RETURN_IF_ERROR(context->allocate_output(0, output_shape, &out));
    if (out->NumElements() == 0) return absl::OkStatus();
    p.indices_per_batch = indices.NumElements() / p.batch;
    return KernelLaunch(*call.stream)
        .Buffers({BufferOf(params), BufferOf(indices), BufferOf(*out)})
        .Param(p)
        .Run(sparse::kGather);
  }

 private:
  int32_t batch_dims_ = 0;
};

// ResourceGatherNd(resource, indices).
class ResourceGatherNdOp : public StatusOpKernel {
 public:
  using StatusOpKernel::StatusOpKernel;

 protected:
  absl::Status ComputeWithStatus(tf::OpKernelContext* context) override {
    VGPU_ASSIGN_OR_RETURN(VariableCall call, BeginGather(context, output_type(0)));
    const tf::Tensor& params = call.params();
    const tf::Tensor& indices = context->input(1);
    VGPU_ASSIGN_OR_RETURN(DType index_dtype, sparse_shapes::IndexDTypeOf(indices.dtype()));
    VGPU_ASSIGN_OR_RETURN(
        sparse_shapes::GatherNdPlan plan,
        sparse_shapes::PlanGatherNd(DimsOf(params.shape()), DimsOf(indices.shape()), index_dtype,
                                    static_cast<uint32_t>(tf::DataTypeSize(params.dtype()))));
    tf::TensorShape output_shape;
    for (int64_t d : plan.output_dims) {
      VGPU_RETURN_IF_ERROR(output_shape.AddDimWithStatus(d));
    }
    tf::Tensor* out = nullptr;
    VGPU_RETURN_IF_ERROR(context->allocate_output(0, output_shape, &out));
    if (!plan.launch) return absl::OkStatus();
    return KernelLaunch(*call.stream)
        .Buffers({BufferOf(params), BufferOf(indices), BufferOf(*out)})
        .Param(plan.params)
        .ParamArray<int64_t>(plan.prefix_dims)
        .Run(sparse::kGatherNd);
  }
};

// ---------------------------------------------------------------------------------------------
// Scatters

constexpr const char* kDTypeMismatch = "DType of scatter resource and updates does not match.";

// Variables of the integer dtypes the executors have no arithmetic for (int8, uint8, int16,
// uint16, uint32, uint64; TensorFlow's GPU build registers their scatters): the scatter is a
// round trip through host memory, as AssignAddVariableOp's for them (variable_ops.cc). Such
// variables are counters and masks, small and rarely updated, so the copies cost little.
bool ScattersOnHost(tf::DataType dtype) {
  switch (dtype) {
    case tf::DT_INT8: case tf::DT_UINT8: case tf::DT_INT16: case tf::DT_UINT16:
    case tf::DT_UINT32: case tf::DT_UINT64:
      return true;
    default:
      return false;
  }
}

template <typename T>
inline constexpr bool IsComplexV = false;
template <typename T>
inline constexpr bool IsComplexV<std::complex<T>> = true;

// `p op u` with TensorFlow's integer semantics: sums, differences and products wrap (computed
// unsigned, at least 32 bits wide, so no promotion overflows); quotients truncate.
template <typename T>
T CombineIntegersOnHost(sparse::ScatterOp op, T p, T u) {
  using Wide = std::conditional_t<(sizeof(T) < sizeof(uint32_t)), uint32_t, std::make_unsigned_t<T>>;
  switch (op) {
    case sparse::ScatterOp::kAssign: return u;
    case sparse::ScatterOp::kAdd: return static_cast<T>(static_cast<Wide>(p) + static_cast<Wide>(u));
    case sparse::ScatterOp::kSub: return static_cast<T>(static_cast<Wide>(p) - static_cast<Wide>(u));
    case sparse::ScatterOp::kMul: return static_cast<T>(static_cast<Wide>(p) * static_cast<Wide>(u));
    case sparse::ScatterOp::kDiv: return static_cast<T>(p / u);  // u != 0: checked before
    case sparse::ScatterOp::kMin: return std::min(p, u);
    case sparse::ScatterOp::kMax: return std::max(p, u);
  }
  return p;
}

// `p op u` on the host: integers as above; complex values (ScatterRows) as TensorFlow computes
// them (a zero divisor is refused before).
template <typename T>
T CombineOnHost(sparse::ScatterOp op, T p, T u) {
  if constexpr (IsComplexV<T>) {  // no min or max (not registered)
    switch (op) {
      case sparse::ScatterOp::kAssign: return u;
      case sparse::ScatterOp::kAdd: return p + u;
      case sparse::ScatterOp::kSub: return p - u;
      case sparse::ScatterOp::kMul: return p * u;
      case sparse::ScatterOp::kDiv: return p / u;
      default: return p;
    }
  } else {
    return CombineIntegersOnHost(op, p, u);
  }
}

// Reads `params` and `updates` into host memory; for each update i in order whose slice start
// `starts[i]` (an element offset into params) is not negative, combines params[starts[i] + j]
// with updates[i * slice_size + j] (updates[0] when `scalar_update`) for j < slice_size; writes
// params back. Blocks until the write has run. A zero divisor of kDiv (complex ones too, as
// TensorFlow's CPU kernel) is InvalidArgument and leaves the variable as it was.
template <typename T>
absl::Status ScatterSlicesAs(ClientStream& stream, sparse::ScatterOp op, const tf::Tensor& params,
                             const tf::Tensor& updates, bool scalar_update,
                             absl::Span<const int64_t> starts, int64_t slice_size) {
  std::vector<T> values(static_cast<size_t>(params.NumElements()));
  std::vector<T> update(static_cast<size_t>(updates.NumElements()));
  DeviceClient& device = stream.device();
  VGPU_RETURN_IF_ERROR(device.CopyDeviceToHost(stream, values.data(), BufferOf(params).address,
                                               values.size() * sizeof(T)));
  VGPU_RETURN_IF_ERROR(device.CopyDeviceToHost(stream, update.data(), BufferOf(updates).address,
                                               update.size() * sizeof(T)));
  VGPU_RETURN_IF_ERROR(device.SynchronizeStream(stream));
  if (op == sparse::ScatterOp::kDiv &&
      std::find(update.begin(), update.end(), T{0}) != update.end()) {
    return absl::InvalidArgumentError("updates must not contain 0");
  }
  for (size_t i = 0; i < starts.size(); ++i) {
    if (starts[i] < 0) continue;
    T* row = values.data() + starts[i];
    for (int64_t j = 0; j < slice_size; ++j) {
      row[j] = CombineOnHost(op, row[j], update[scalar_update ? 0 : i * slice_size + j]);
    }
  }
  VGPU_RETURN_IF_ERROR(device.CopyHostToDevice(stream, BufferOf(params).address, values.data(),
                                               values.size() * sizeof(T)));
  return device.SynchronizeStream(stream);
}

absl::Status ScatterSlicesOnHost(ClientStream& stream, sparse::ScatterOp op,
                                 const tf::Tensor& params, const tf::Tensor& updates,
                                 bool scalar_update, absl::Span<const int64_t> starts,
                                 int64_t slice_size) {
  switch (params.dtype()) {
    case tf::DT_INT8:
      return ScatterSlicesAs<int8_t>(stream, op, params, updates, scalar_update, starts, slice_size);
    case tf::DT_UINT8:
      return ScatterSlicesAs<uint8_t>(stream, op, params, updates, scalar_update, starts, slice_size);
    case tf::DT_INT16:
      return ScatterSlicesAs<int16_t>(stream, op, params, updates, scalar_update, starts, slice_size);
    case tf::DT_UINT16:
      return ScatterSlicesAs<uint16_t>(stream, op, params, updates, scalar_update, starts,
                                       slice_size);
    case tf::DT_UINT32:
      return ScatterSlicesAs<uint32_t>(stream, op, params, updates, scalar_update, starts,
                                       slice_size);
    case tf::DT_UINT64:
      return ScatterSlicesAs<uint64_t>(stream, op, params, updates, scalar_update, starts,
                                       slice_size);
    case tf::DT_COMPLEX64:
      return ScatterSlicesAs<std::complex<float>>(stream, op, params, updates, scalar_update,
                                                  starts, slice_size);
    case tf::DT_COMPLEX128:
      return ScatterSlicesAs<std::complex<double>>(stream, op, params, updates, scalar_update,
                                                   starts, slice_size);
    default:
      return absl::InternalError(absl::StrCat("no host scatter for dtype ",
                                              tf::DataTypeString(params.dtype())));
  }
}

// How a resource scatter updates the variable's tensor `params` with `updates` at `indices`, on
// `stream` (ScatterRows, ScatterNd).
using ScatterFunction = absl::Status (*)(ClientStream& stream, const tf::Tensor& params,
                                         const tf::Tensor& indices, const tf::Tensor& updates);

// A resource scatter op (inputs: resource, indices, updates): the variable is locked and made
// private for the update, and checked to hold the updates' dtype, before kScatter runs.
template <ScatterFunction kScatter>
class ResourceScatterKernel : public StatusOpKernel {
 public:
  using StatusOpKernel::StatusOpKernel;

 private:
  absl::Status ComputeWithStatus(tf::OpKernelContext* context) final {
    const tf::Tensor& indices = context->input(1);
    const tf::Tensor& updates = context->input(2);
    VGPU_ASSIGN_OR_RETURN(VariableCall call,
                          BeginVariableCall(context, updates.dtype(), kDTypeMismatch,
                                            /*for_update=*/true));
    return kScatter(*call.stream, call.params(), indices, updates);
  }
};

// Integer scatters: TensorFlow's GPU build runs them on the host, where indices are checked;
// returns the indices, each in [0, rows).
absl::StatusOr<std::vector<int64_t>> CheckedIndices(ClientStream& stream,
                                                    const tf::Tensor& indices, int64_t rows) {
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> values,
                        variables::ReadIntegersToHost(stream, indices));
  const Dims indices_dims = DimsOf(indices.shape());
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] >= rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "indices", sparse_shapes::SliceDebugString(indices_dims, static_cast<int64_t>(i)),
          " = ", values[i], " is not in [0, ", rows, ")"));
    }
  }
  return values;
}

// An integer division by zero is refused instead of trapping.
absl::Status CheckDivisors(sparse::ScatterOp op, ClientStream& stream, const tf::Tensor& updates) {
  if (op != sparse::ScatterOp::kDiv ||
      (updates.dtype() != tf::DT_INT32 && updates.dtype() != tf::DT_INT64)) {
    return absl::OkStatus();
  }
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> divisors,
                        variables::ReadIntegersToHost(stream, updates));
  for (int64_t d : divisors) {
    if (d == 0) return absl::InvalidArgumentError("updates must not contain 0");
  }
  return absl::OkStatus();
}

// ResourceScatter{Update, Add, Sub, Mul, Div, Min, Max}(resource, indices, updates): rows of the
// variable.
template <sparse::ScatterOp kOp>
absl::Status ScatterRows(ClientStream& stream, const tf::Tensor& params, const tf::Tensor& indices,
                         const tf::Tensor& updates) {
  const Dims params_dims = DimsOf(params.shape());
  const Dims indices_dims = DimsOf(indices.shape());
  const Dims updates_dims = DimsOf(updates.shape());
  // (TensorFlow reads params.shape[0] without checking; a scalar variable is refused here.)
  if (params_dims.empty()) {
    return absl::InvalidArgumentError("params must be at least 1 dimensional");
  }
  const auto shape_error = [&]() {
    return absl::InvalidArgumentError(absl::StrCat(
        "Must have updates.shape = indices.shape + params.shape[1:] or updates.shape = [], "
        "got updates.shape ",
        ShapeString(updates_dims), ", indices.shape ", ShapeString(indices_dims),
        ", params.shape ", ShapeString(params_dims)));
  };
  const bool scalar = updates_dims.empty();
  if (!scalar && updates_dims.size() != indices_dims.size() + params_dims.size() - 1) {
    return shape_error();
  }
  VGPU_ASSIGN_OR_RETURN(DType index_dtype, sparse_shapes::IndexDTypeOf(indices.dtype()));
  const int64_t index_max = sparse_shapes::IndexMax(index_dtype);
  const int64_t n = indices.NumElements();
  if (n > index_max) {
    return absl::InvalidArgumentError(
        absl::StrCat("indices has too many elements for ",
                     sparse_shapes::IndexName(index_dtype), " indexing: ", n, " > ",
                     index_max));
  }
  if (params_dims[0] > index_max) {
    return absl::InvalidArgumentError(
        absl::StrCat("params.shape[0] too large for ", sparse_shapes::IndexName(index_dtype),
                     " indexing: ", params_dims[0], " > ", index_max));
  }
  if (n == 0) return absl::OkStatus();
  if (!scalar) {
    if (!std::equal(indices_dims.begin(), indices_dims.end(), updates_dims.begin())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "The shape of indices (", ShapeString(indices_dims),
          ") must be a prefix of the shape of updates (", ShapeString(updates_dims), ")"));
    }
    // TensorFlow only checks the rank here and then reads the rows with params' row size;
    // rows of another size are refused.
    if (!std::equal(params_dims.begin() + 1, params_dims.end(),
                    updates_dims.begin() + indices_dims.size())) {
      return shape_error();
    }
  }
  const int64_t inner = params.NumElements() / std::max<int64_t>(params_dims[0], 1);
  // Complex rows (Update, Add, Sub, Mul, Div) are combined on the host as well: a complex
  // product is not one of its parts', and complex variables are rare.
  if (ScattersOnHost(params.dtype()) || tf::DataTypeIsComplex(params.dtype())) {
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> starts,
                          CheckedIndices(stream, indices, params_dims[0]));
    for (int64_t& start : starts) start *= inner;
    return ScatterSlicesOnHost(stream, kOp, params, updates, scalar, starts, inner);
  }
  VGPU_ASSIGN_OR_RETURN(DType dtype, DTypeOfTensor(params));
  if (tf::DataTypeIsInteger(params.dtype())) {
    VGPU_RETURN_IF_ERROR(CheckedIndices(stream, indices, params_dims[0]).status());
    VGPU_RETURN_IF_ERROR(CheckDivisors(kOp, stream, updates));
  }
  sparse::ScatterParams p;
  p.dtype = dtype;
  p.index_dtype = index_dtype;
  p.op = kOp;
  p.scalar_update = scalar ? 1 : 0;
  p.rows = params_dims[0];
  p.inner = inner;
  p.num_indices = n;
  return KernelLaunch(stream)
      .Buffers({BufferOf(params), BufferOf(indices), BufferOf(updates)})
      .Param(p)
      .Run(sparse::kScatter);
}

// The element offset of each index tuple's slice in the variable, -1 for a tuple outside it
// (ignored, as by the executors' kernel).
absl::StatusOr<std::vector<int64_t>> SliceStarts(ClientStream& stream, const tf::Tensor& indices,
                                                 absl::Span<const int64_t> prefix_dims,
                                                 int64_t slice_size) {
  VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> tuples,
                        variables::ReadIntegersToHost(stream, indices));
  const size_t depth = prefix_dims.size();
  std::vector<int64_t> starts(tuples.size() / depth);
  for (size_t n = 0; n < starts.size(); ++n) {
    int64_t offset = 0;
    for (size_t d = 0; d < depth && offset >= 0; ++d) {
      const int64_t index = tuples[n * depth + d];
      offset = index < 0 || index >= prefix_dims[d] ? -1 : offset * prefix_dims[d] + index;
    }
    starts[n] = offset < 0 ? -1 : offset * slice_size;
  }
  return starts;
}

// ResourceScatterNd{Update, Add, Sub, Min, Max}(ref, indices, updates): slices of the variable
// addressed by index tuples.
template <sparse::ScatterOp kOp>
absl::Status ScatterNd(ClientStream& stream, const tf::Tensor& params, const tf::Tensor& indices,
                       const tf::Tensor& updates) {
  // complex64 / complex128 (Update, Add, Sub only): pairs of float32 / float64 along an extra
  // last dimension, which the index tuples never reach; a complex sum is the sum of its parts.
  const bool complex = params.dtype() == tf::DT_COMPLEX64 || params.dtype() == tf::DT_COMPLEX128;
  const bool on_host = ScattersOnHost(params.dtype());
  DType dtype = params.dtype() == tf::DT_COMPLEX128 ? DType::kFloat64 : DType::kFloat32;
  if (!complex && !on_host) {  // (the host path does not launch: any dtype plans it)
    VGPU_ASSIGN_OR_RETURN(dtype, DTypeOfTensor(params));
  }
  VGPU_ASSIGN_OR_RETURN(DType index_dtype, sparse_shapes::IndexDTypeOf(indices.dtype()));
  Dims params_dims = DimsOf(params.shape()), updates_dims = DimsOf(updates.shape());
  VGPU_ASSIGN_OR_RETURN(
      sparse_shapes::ScatterNdPlan plan,
      sparse_shapes::PlanScatterNd(params_dims, DimsOf(indices.shape()), updates_dims, dtype,
                                   index_dtype));
  if (!plan.launch) return absl::OkStatus();
  if (on_host) {
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> starts,
                          SliceStarts(stream, indices, plan.prefix_dims,
                                      plan.params.slice_size));
    return ScatterSlicesOnHost(stream, kOp, params, updates, /*scalar_update=*/false, starts,
                               plan.params.slice_size);
  }
  if (complex) {  // validated with the tensors' own shapes above
    params_dims.push_back(2);
    updates_dims.push_back(2);
    VGPU_ASSIGN_OR_RETURN(plan, sparse_shapes::PlanScatterNd(params_dims,
                                                             DimsOf(indices.shape()),
                                                             updates_dims, dtype, index_dtype));
  }
  plan.params.op = kOp;
  return KernelLaunch(stream)
      .Buffers({BufferOf(params), BufferOf(indices), BufferOf(updates)})
      .Param(plan.params)
      .ParamArray<int64_t>(plan.prefix_dims)
      .Run(sparse::kScatterNd);
}

// The two scatter families' kernels.
template <sparse::ScatterOp kOp>
using ResourceScatterOp = ResourceScatterKernel<&ScatterRows<kOp>>;
template <sparse::ScatterOp kOp>
using ResourceScatterNdOp = ResourceScatterKernel<&ScatterNd<kOp>>;

// Registers `K` for `op_name` for every (value dtype, index dtype) pair.
template <typename K>
void RegisterIndexed(const char* op_name, const char* device_type, const char* value_attribute,
                     const std::vector<tf::DataType>& dtypes,
                     const std::vector<tf::DataType>& index_types,
                     const char* resource_argument) {
  for (tf::DataType dtype : dtypes) {
    for (tf::DataType index : index_types) {
      variables::RegisterVariableKernel(op_name, device_type,
                                        {{value_attribute, dtype}, {"Tindices", index}},
                                        {resource_argument},
                                        [](tf::OpKernelConstruction* context) -> tf::OpKernel* {
                                          return new K(context);
                                        });
    }
  }
}

// Registers K<kOps[i]> as `op_names[i]`, each like RegisterIndexed: one family of scatter
// ops whose kernels differ only in how an update combines with the variable.
template <template <sparse::ScatterOp> class K, sparse::ScatterOp... kOps>
void RegisterScatterFamily(const std::array<const char*, sizeof...(kOps)>& op_names,
                           const char* device_type, const char* value_attribute,
                           const std::vector<tf::DataType>& dtypes,
                           const std::vector<tf::DataType>& index_types,
                           const char* resource_argument) {
  size_t i = 0;
  (RegisterIndexed<K<kOps>>(op_names[i++], device_type, value_attribute, dtypes, index_types,
                            resource_argument),
   ...);
}

}  // namespace

void RegisterResourceSparseOps(const char* device_type) {
  using Op = sparse::ScatterOp;
  using Types = std::vector<tf::DataType>;
  const Types kIndex = {tf::DT_INT32, tf::DT_INT64};
  // TensorFlow's GPU registrations, less the types the virtual GPU does not have. The integer
  // types after int64 are scattered through host memory (ScattersOnHost); gathers only copy
  // bytes, and complex scatter-nd updates run as pairs of floats.
  const Types kNumber = {tf::DT_FLOAT, tf::DT_HALF,  tf::DT_BFLOAT16, tf::DT_DOUBLE,
                         tf::DT_INT64, tf::DT_INT8,  tf::DT_UINT8,    tf::DT_INT16,
                         tf::DT_UINT16, tf::DT_UINT32, tf::DT_UINT64};
  const Types kWithComplex = [&] {
    Types types = kNumber;
    types.insert(types.end(), {tf::DT_COMPLEX64, tf::DT_COMPLEX128});
    return types;
  }();
  const Types kGathered = [&] {
    Types types = kWithComplex;
    types.push_back(tf::DT_BOOL);
    return types;
  }();
  RegisterIndexed<ResourceGatherOp>("ResourceGather", device_type, "dtype", kGathered, kIndex,
                                    "resource");
  RegisterIndexed<ResourceGatherNdOp>("ResourceGatherNd", device_type, "dtype", kNumber, kIndex,
                                      "resource");
  constexpr std::array<const char*, 7> kScatterOps = {
      "ResourceScatterUpdate", "ResourceScatterAdd", "ResourceScatterSub", "ResourceScatterMul",
      "ResourceScatterDiv",    "ResourceScatterMin", "ResourceScatterMax"};
  RegisterScatterFamily<ResourceScatterOp, Op::kAssign, Op::kAdd, Op::kSub, Op::kMul, Op::kDiv,
                        Op::kMin, Op::kMax>(kScatterOps, device_type, "dtype", kNumber, kIndex,
                                            "resource");
  RegisterIndexed<ResourceScatterOp<Op::kAssign>>("ResourceScatterUpdate", device_type, "dtype",
                                                  {tf::DT_BOOL}, {tf::DT_INT32}, "resource");
  const Types kComplex = {tf::DT_COMPLEX64, tf::DT_COMPLEX128};
  RegisterScatterFamily<ResourceScatterOp, Op::kAssign, Op::kAdd, Op::kSub, Op::kMul, Op::kDiv>(
      {kScatterOps[0], kScatterOps[1], kScatterOps[2], kScatterOps[3], kScatterOps[4]},
      device_type, "dtype", kComplex, kIndex, "resource");
  // Min and Max do not take complex values.
  constexpr std::array<const char*, 5> kScatterNdOps = {
      "ResourceScatterNdUpdate", "ResourceScatterNdAdd", "ResourceScatterNdSub",
      "ResourceScatterNdMin", "ResourceScatterNdMax"};
  RegisterScatterFamily<ResourceScatterNdOp, Op::kAssign, Op::kAdd, Op::kSub>(
      {kScatterNdOps[0], kScatterNdOps[1], kScatterNdOps[2]}, device_type, "T", kWithComplex,
      kIndex, "ref");
  RegisterScatterFamily<ResourceScatterNdOp, Op::kMin, Op::kMax>(
      {kScatterNdOps[3], kScatterNdOps[4]}, device_type, "T", kNumber, kIndex, "ref");
  RegisterIndexed<ResourceScatterNdOp<Op::kAssign>>("ResourceScatterNdUpdate", device_type, "T",
                                                    {tf::DT_BOOL}, kIndex, "ref");

  DocumentOp("ResourceGather", "",
             "An index outside the variable's gathered dimension gives a zero output row, no "
             "error (TensorFlow's GPU kernel).");
  DocumentOp("ResourceGatherNd", "",
             "An index tuple outside the variable gives zeros, no error (TensorFlow's GPU "
             "kernel).");
  constexpr const char* kScatterNote =
      "In place; duplicate indices combine in index order (deterministic). Floating point: an "
      "index outside the variable is ignored (TensorFlow's GPU kernel); integers: indices are "
      "read back and a bad one is InvalidArgument, as TensorFlow's GPU build runs integer "
      "scatters on the host. int8, uint8, int16, uint16, uint32 and uint64 variables are "
      "updated through host memory (a round trip), and so are complex64 and complex128 ones "
      "(Update, Add, Sub, Mul and Div; a bad index is InvalidArgument).";
  for (const char* op : kScatterOps) DocumentOp(op, "", kScatterNote);
  constexpr const char* kScatterNdNote =
      "In place; duplicate indices combine in index order (deterministic); an index tuple "
      "outside the variable is ignored, no error (TensorFlow's GPU kernel). Update, Add and Sub "
      "also take complex64/complex128 (as pairs of float32/float64), and Update bool; int8, "
      "uint8, int16, uint16, uint32 and uint64 variables are updated through host memory (a "
      "round trip).";
  for (const char* op : kScatterNdOps) DocumentOp(op, "", kScatterNdNote);
}

}  // namespace vgpu
