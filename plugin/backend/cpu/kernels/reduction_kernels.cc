// Tensor reductions (sum, mean, prod, max, min, all, any) and arg-max/arg-min on the CPU backing
// executor, with Eigen's tensor reductions on the executor's thread pool. The input arrives in
// TensorFlow's ReductionHelper layout (alternating reduced / kept runs, see
// protocol/kernels/reduction.h) and is reduced with the same Eigen expressions as TensorFlow's
// CPU kernels for each layout, so the results agree with them up to the order in which the
// thread pool combines partial sums; floating sums and means over every dimension but the last
// are column sums in one pass over memory instead (row_sums.h). The launch layer
// (launch/reduction_launch.h) reads and validates every launch; these only compute.
#define EIGEN_USE_THREADS

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/dtype_dispatch.h"
#include "plugin/backend/cpu/kernels/row_sums.h"
#include "plugin/backend/launch/dtype_sets.h"
#include "plugin/backend/launch/reduction_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/reduction.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {

using reduction_launch::ArgReduceLaunch;
using reduction_launch::ReadArgReduceLaunch;
using reduction_launch::ReadReduceLaunch;
using reduction_launch::ReduceGeometry;
using reduction_launch::ReduceLaunch;
using reduction_launch::ReduceWork;

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

// `per_output`: the elements reduced into each output.
template <typename T>
absl::Status ReduceNumeric(const Eigen::ThreadPoolDevice& device, ReduceOp op, const T* in,
                           T* out, const std::vector<int64_t>& runs, bool reduce_first,
                           int64_t per_output) {
  // Over every dimension but the last (BatchNormalization's statistics, for one): the column
  // sums of a [rows, columns] matrix, one pass over memory (row_sums.h).
  if constexpr (!Eigen::NumTraits<T>::IsInteger) {
    if (runs.size() == 2 && reduce_first && (op == ReduceOp::kSum || op == ReduceOp::kMean)) {
      using CT = std::conditional_t<kAccumulatesInFloat<T>, float, T>;
      const CT count = static_cast<CT>(per_output);
      const bool mean = op == ReduceOp::kMean;
      SumColumns<T, CT>(device, in, runs[0], runs[1], out, [&](CT sum) {
        return static_cast<T>(mean ? sum / count : sum);
      });
      return absl::OkStatus();
    }
  }
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
    default: return reduction_launch::UnservedReduceOp(op);  // the reader refused it
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
    default: return reduction_launch::UnservedReduceOp(op);  // the reader refused it
  }
}

}  // namespace

// reduction::kReduce (see protocol/kernels/reduction.h).
absl::Status Reduce(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(ReduceLaunch launch, ReadReduceLaunch(context));
  const ReduceGeometry& g = launch.geometry;
  const std::vector<int64_t> runs(g.runs, g.runs + g.rank);
  const auto& device = *context.device;

  auto run = [&](auto zero, auto&& reduce_fn) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* x, context.Buffer<const T>(0, g.in_count));
    VGPU_ASSIGN_OR_RETURN(T* y, context.Buffer<T>(1, g.out_count));
    switch (launch.work) {
      case ReduceWork::kNothing: return absl::OkStatus();
      case ReduceWork::kCopy:
        std::memcpy(y, x, g.out_count * sizeof(T));
        return absl::OkStatus();
      case ReduceWork::kFillIdentity:
        Map<T, 1>(y, g.out_count).device(device) =
            Map<T, 1>(y, g.out_count).constant(IdentityOf<T>(launch.op));
        return absl::OkStatus();
      case ReduceWork::kReduce: break;
    }
    return reduce_fn(x, y);
  };

  if (launch.dtype == DType::kBool) {
    return run(bool{}, [&](const bool* x, bool* y) {
      return ReduceBool(device, launch.op, x, y, runs, g.reduce_first);
    });
  }
  return DispatchReducible<Dispatch>(launch.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    return run(zero, [&](const T* x, T* y) {
      return ReduceNumeric<T>(device, launch.op, x, y, runs, g.reduce_first, g.per_output);
    });
  });
}

// reduction::kArgReduce (see protocol/kernels/reduction.h).
absl::Status ArgReduce(const KernelContext& context) {
  VGPU_ASSIGN_OR_RETURN(ArgReduceLaunch launch, ReadArgReduceLaunch(context));
  const auto& device = *context.device;
  return DispatchReducible<Dispatch>(launch.dtype, [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    VGPU_ASSIGN_OR_RETURN(const T* x_data, context.Buffer<const T>(0, launch.x_count));
    Map<const T, 3> x(x_data, launch.outer, launch.n, launch.inner);
    return Dispatch::Index(launch.index_dtype, [&](auto index_zero) -> absl::Status {
      using Index = decltype(index_zero);
      VGPU_ASSIGN_OR_RETURN(Index * y_data, context.Buffer<Index>(1, launch.y_count));
      if (launch.y_count == 0) return absl::OkStatus();
      Map<Index, 2> y(y_data, launch.outer, launch.inner);
      if (launch.op == ReduceOp::kMax) {
        y.device(device) = x.argmax(1).template cast<Index>();
      } else {
        y.device(device) = x.argmin(1).template cast<Index>();
      }
      return absl::OkStatus();
    });
  });
}

void AddReductionKernels(KernelTable& table) {
  table.AddFamily(kernel_families::kReduction, Reduce, ArgReduce);
}

}  // namespace vgpu::cpu_kernels
