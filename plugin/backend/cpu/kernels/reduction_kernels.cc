// Tensor reductions (sum, mean, prod, max, min, all, any) and arg-max/arg-min on the CPU backing
// executor, with Eigen's tensor reductions on the executor's thread pool. The input arrives in
// TensorFlow's ReductionHelper layout (alternating reduced / kept runs, see
// protocol/kernels/reduction.h) and is reduced with the same Eigen expressions as TensorFlow's
// CPU kernels for each layout, so the results agree with them up to the order in which the
// thread pool combines partial sums.
#define EIGEN_USE_THREADS

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/elementwise_broadcast.h"
#include "plugin/backend/cpu/kernels/scan_topk_kernels.h"
#include "plugin/backend/cpu/kernels/softmax_kernels.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/reduction.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

template <typename T, int kRank>
using Map = Eigen::TensorMap<Eigen::Tensor<T, kRank, Eigen::RowMajor, Eigen::DenseIndex>,
                             Eigen::Unaligned>;

using AxisZero = Eigen::IndexList<Eigen::type2index<0>>;
using AxisOne = Eigen::IndexList<Eigen::type2index<1>>;
using AxesZeroTwo = Eigen::IndexList<Eigen::type2index<0>, Eigen::type2index<2>>;

// Copies the rank-`rank` row-major tensor `in` of `dims` into `out` transposed by `perm`
// (out dimension i is in dimension perm[i]), in parallel over output rows.
template <typename T>
void Transpose(const Eigen::ThreadPoolDevice& device, const T* in, T* out,
               const std::vector<int64_t>& dims, const std::vector<int>& perm) {
  const int rank = static_cast<int>(dims.size());
  std::vector<int64_t> in_strides(rank, 1);
  for (int i = rank - 2; i >= 0; --i) in_strides[i] = in_strides[i + 1] * dims[i + 1];
  std::vector<int64_t> out_dims(rank), strides(rank);
  for (int i = 0; i < rank; ++i) {
    out_dims[i] = dims[perm[i]];
    strides[i] = in_strides[perm[i]];
  }
  const int64_t row_length = out_dims[rank - 1];
  const int64_t inner_stride = strides[rank - 1];
  int64_t rows = 1;
  for (int i = 0; i + 1 < rank; ++i) rows *= out_dims[i];
  device.parallelFor(rows, Eigen::TensorOpCost(row_length * sizeof(T), row_length * sizeof(T), 1),
                     [&](Eigen::Index begin, Eigen::Index end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t offset = 0;
      int64_t rest = row;
      for (int i = rank - 2; i >= 0; --i) {
        offset += (rest % out_dims[i]) * strides[i];
        rest /= out_dims[i];
      }
      T* target = out + row * row_length;
      for (int64_t j = 0; j < row_length; ++j) target[j] = in[offset + j * inner_stride];
    }
  });
}

// Runs `apply(out_map, in_map, axes)` for the reduction layout `runs` (alternating runs starting
// with a reduced one when `reduce_first`), choosing the same view of the data as TensorFlow's
// ReductionOp: 1-D to scalar, 2-D along either axis, 3-D along the middle or outer axes, and
// anything longer transposed so that the reduced runs come last, then reduced as 2-D.
template <typename T, typename Apply>
void ReduceInLayout(const Eigen::ThreadPoolDevice& device, const T* in, T* out,
                    const std::vector<int64_t>& runs, bool reduce_first, Apply&& apply) {
  const int n = static_cast<int>(runs.size());
  if (n == 1) {
    apply(Map<T, 0>(out), Map<const T, 1>(in, runs[0]), AxisZero());
  } else if (n == 2 && reduce_first) {
    apply(Map<T, 1>(out, runs[1]), Map<const T, 2>(in, runs[0], runs[1]), AxisZero());
  } else if (n == 2) {
    apply(Map<T, 1>(out, runs[0]), Map<const T, 2>(in, runs[0], runs[1]), AxisOne());
  } else if (n == 3 && reduce_first) {
    apply(Map<T, 1>(out, runs[1]), Map<const T, 3>(in, runs[0], runs[1], runs[2]),
          AxesZeroTwo());
  } else if (n == 3) {
    apply(Map<T, 2>(out, runs[0], runs[2]), Map<const T, 3>(in, runs[0], runs[1], runs[2]),
          AxisOne());
  } else {
    std::vector<int> perm;
    int64_t kept = 1, reduced = 1;
    for (int i = reduce_first ? 1 : 0; i < n; i += 2) {
      perm.push_back(i);
      kept *= runs[i];
    }
    for (int i = reduce_first ? 0 : 1; i < n; i += 2) {
      perm.push_back(i);
      reduced *= runs[i];
    }
    std::unique_ptr<T[]> shuffled(new T[kept * reduced]);
    Transpose(device, in, shuffled.get(), runs, perm);
    apply(Map<T, 1>(out, kept), Map<const T, 2>(shuffled.get(), kept, reduced), AxisOne());
  }
}

// The identity a reduction of nothing yields (TensorFlow's FillIdentity values).
template <typename T>
T IdentityOf(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd:
    case ReduceOp::kAll: return T(1);
    case ReduceOp::kMax: return Eigen::internal::MaxReducer<T, Eigen::PropagateNaN>().initialize();
    case ReduceOp::kMin: return Eigen::internal::MinReducer<T, Eigen::PropagateNaN>().initialize();
    case ReduceOp::kMean:
      if constexpr (Eigen::NumTraits<T>::IsInteger) {
        return T(0);
      } else {
        return Eigen::NumTraits<T>::quiet_NaN();
      }
    default: return T(0);
  }
}

// True when T's sums (sum and mean) accumulate in float: the 16-bit types, as TensorFlow's GPU
// kernels do (its CPU kernel does so for bfloat16 only, and overflows to inf or NaN in float16
// where the float sum is representable).
template <typename T>
constexpr bool kAccumulatesInFloat =
    std::is_same_v<T, Eigen::bfloat16> || std::is_same_v<T, Eigen::half>;

template <typename T>
absl::Status ReduceNumeric(const Eigen::ThreadPoolDevice& device, ReduceOp op, const T* in,
                           T* out, const std::vector<int64_t>& runs, bool reduce_first,
                           int64_t in_count, int64_t out_count) {
  const int64_t per_output = out_count == 0 ? 0 : in_count / out_count;
  switch (op) {
    case ReduceOp::kSum:
      ReduceInLayout<T>(device, in, out, runs, reduce_first, [&](auto y, auto x, auto axes) {
        if constexpr (kAccumulatesInFloat<T>) {
          y.device(device) = x.template cast<float>()
                                 .reduce(axes, Eigen::internal::SumReducer<float>())
                                 .template cast<T>();
        } else {
          y.device(device) = x.reduce(axes, Eigen::internal::SumReducer<T>());
        }
      });
      return absl::OkStatus();
    case ReduceOp::kMean:
      ReduceInLayout<T>(device, in, out, runs, reduce_first, [&](auto y, auto x, auto axes) {
        if constexpr (kAccumulatesInFloat<T>) {
          y.device(device) = (x.template cast<float>().reduce(
                                  axes, Eigen::internal::SumReducer<float>()) /
                              static_cast<float>(per_output))
                                 .template cast<T>();
        } else {
          y.device(device) =
              x.reduce(axes, Eigen::internal::SumReducer<T>()) / static_cast<T>(per_output);
        }
      });
      return absl::OkStatus();
    case ReduceOp::kProd:
      ReduceInLayout<T>(device, in, out, runs, reduce_first, [&](auto y, auto x, auto axes) {
        y.device(device) = x.reduce(axes, Eigen::internal::ProdReducer<T>());
      });
      return absl::OkStatus();
    case ReduceOp::kMax:
      ReduceInLayout<T>(device, in, out, runs, reduce_first, [&](auto y, auto x, auto axes) {
        y.device(device) = x.reduce(axes, Eigen::internal::MaxReducer<T, Eigen::PropagateNaN>());
      });
      return absl::OkStatus();
    case ReduceOp::kMin:
      ReduceInLayout<T>(device, in, out, runs, reduce_first, [&](auto y, auto x, auto axes) {
        y.device(device) = x.reduce(axes, Eigen::internal::MinReducer<T, Eigen::PropagateNaN>());
      });
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("reduce op ", static_cast<int>(op), " does not apply to this dtype"));
  }
}

absl::Status ReduceBool(const Eigen::ThreadPoolDevice& device, ReduceOp op, const bool* in,
                        bool* out, const std::vector<int64_t>& runs, bool reduce_first) {
  switch (op) {
    case ReduceOp::kAll:
      ReduceInLayout<bool>(device, in, out, runs, reduce_first, [&](auto y, auto x, auto axes) {
        y.device(device) = x.reduce(axes, Eigen::internal::AndReducer());
      });
      return absl::OkStatus();
    case ReduceOp::kAny:
      ReduceInLayout<bool>(device, in, out, runs, reduce_first, [&](auto y, auto x, auto axes) {
        y.device(device) = x.reduce(axes, Eigen::internal::OrReducer());
      });
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError("bool tensors reduce only with all/any");
  }
}

// Invokes fn(T{}) for the numeric dtypes the reduction kernels are built for.
template <typename Fn>
absl::Status DispatchReducible(DType dtype, Fn&& fn) {
  if (dtype == DType::kInt64) return fn(int64_t{});
  return Dispatch::Floating(dtype, fn);
}

}  // namespace

// reduction::kReduce (see protocol/kernels/reduction.h).
absl::Status Reduce(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(ReduceDescriptorSettings reduce,
                        context.Descriptor<ReduceDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings x_desc,
                        context.Descriptor<TensorDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings y_desc,
                        context.Descriptor<TensorDescriptorSettings>(2));
  VGPU_ASSIGN_OR_RETURN(reduction::ReduceLayoutParams params,
                        context.Params().Get<reduction::ReduceLayoutParams>());
  if (x_desc.dtype != reduce.dtype || y_desc.dtype != reduce.dtype) {
    return absl::InvalidArgumentError("reduce descriptor and tensor dtypes differ");
  }
  const bool reduce_first = params.reduce_first_axis != 0;
  // Validates both ranks and bounds every product of dimensions.
  VGPU_ASSIGN_OR_RETURN(const int64_t in_count, DenseElementCount(x_desc));
  VGPU_ASSIGN_OR_RETURN(const int64_t out_count, DenseElementCount(y_desc));
  std::vector<int64_t> runs(x_desc.dims, x_desc.dims + x_desc.rank);
  int64_t kept_count = 1;
  for (int i = 0; i < x_desc.rank; ++i) {
    if ((i % 2 == 0) == reduce_first) continue;
    if (runs[i] != 0 && kept_count > kMaxElements / runs[i]) {
      return absl::InvalidArgumentError("reduce layout keeps too many elements");
    }
    kept_count *= runs[i];
  }
  if (out_count != kept_count) {
    return absl::InvalidArgumentError(absl::StrCat("reduce output holds ", out_count,
                                                   " elements, the layout keeps ", kept_count));
  }
  const bool copies = runs.empty() || (runs.size() == 1 && !reduce_first);
  const auto& device = *context.device;

  auto run = [&](auto zero, auto&& reduce_fn) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, in_count));
    VGPU_ASSIGN_OR_RETURN(T* y, context.Buffer<T>(1, out_count));
    if (out_count == 0) return absl::OkStatus();
    if (copies) {
      std::memcpy(y, x, out_count * sizeof(T));
      return absl::OkStatus();
    }
    if (in_count == 0) {
      Map<T, 1>(y, out_count).device(device) =
          Map<T, 1>(y, out_count).constant(IdentityOf<T>(reduce.op));
      return absl::OkStatus();
    }
    return reduce_fn(x, y, in_count);
  };

  if (reduce.dtype == DType::kBool) {
    if (reduce.op != ReduceOp::kAll && reduce.op != ReduceOp::kAny) {
      return absl::InvalidArgumentError("bool tensors reduce only with all/any");
    }
    return run(bool{}, [&](const bool* x, bool* y, int64_t) {
      return ReduceBool(device, reduce.op, x, y, runs, reduce_first);
    });
  }
  return DispatchReducible(reduce.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    return run(zero, [&](const T* x, T* y, int64_t count) {
      return ReduceNumeric<T>(device, reduce.op, x, y, runs, reduce_first, count, out_count);
    });
  });
}

// reduction::kArgReduce (see protocol/kernels/reduction.h).
absl::Status ArgReduce(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  VGPU_ASSIGN_OR_RETURN(ReduceDescriptorSettings reduce,
                        context.Descriptor<ReduceDescriptorSettings>(0));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings x_desc,
                        context.Descriptor<TensorDescriptorSettings>(1));
  VGPU_ASSIGN_OR_RETURN(TensorDescriptorSettings y_desc,
                        context.Descriptor<TensorDescriptorSettings>(2));
  if (x_desc.rank != 3 || y_desc.rank != 2 || x_desc.dims[0] != y_desc.dims[0] ||
      x_desc.dims[2] != y_desc.dims[1] || x_desc.dims[1] <= 0 || x_desc.dims[0] < 0 ||
      x_desc.dims[2] < 0) {
    return absl::InvalidArgumentError(
        "arg-reduce takes x [outer, n > 0, inner] and y [outer, inner]");
  }
  if (reduce.op != ReduceOp::kMax && reduce.op != ReduceOp::kMin) {
    return absl::InvalidArgumentError("arg-reduce supports max and min only");
  }
  if (x_desc.dtype != reduce.dtype) {
    return absl::InvalidArgumentError("reduce descriptor and input dtypes differ");
  }
  const int64_t outer = x_desc.dims[0], n = x_desc.dims[1], inner = x_desc.dims[2];
  VGPU_ASSIGN_OR_RETURN(const int64_t x_count, DenseElementCount(x_desc));
  VGPU_ASSIGN_OR_RETURN(const int64_t y_count, DenseElementCount(y_desc));
  const auto& device = *context.device;
  return DispatchReducible(x_desc.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* x_data, context.Buffer<const T>(0, x_count));
    Map<const T, 3> x(x_data, outer, n, inner);
    auto write = [&](auto index_zero) -> absl::Status {
      using Index = decltype(index_zero);
      VGPU_ASSIGN_OR_RETURN(Index * y_data, context.Buffer<Index>(1, y_count));
      if (y_count == 0) return absl::OkStatus();
      Map<Index, 2> y(y_data, outer, inner);
      if (reduce.op == ReduceOp::kMax) {
        y.device(device) = x.argmax(1).template cast<Index>();
      } else {
        y.device(device) = x.argmin(1).template cast<Index>();
      }
      return absl::OkStatus();
    };
    switch (y_desc.dtype) {
      case DType::kInt32: return write(int32_t{});
      case DType::kInt64: return write(int64_t{});
      default: return absl::InvalidArgumentError("arg-reduce output must be int32 or int64");
    }
  });
}

}  // namespace vgpu::cpu_kernels

namespace vgpu {

void AddReductionKernels(KernelTable& table) {
  table.Add(reduction::kReduce, "reduce", cpu_kernels::Reduce);
  table.Add(reduction::kArgReduce, "arg_reduce", cpu_kernels::ArgReduce);
  cpu_kernels::AddSoftmaxKernels(table);
  cpu_kernels::AddScanAndTopKKernels(table);
}

}  // namespace vgpu
