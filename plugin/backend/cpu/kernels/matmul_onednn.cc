// The matmul family's oneDNN path on the CPU executor (declared in onednn_kernels.h):
// float32 MatMul / BatchMatMulV2 with broadcast batch dimensions and transposed operands, and
// _FusedMatMul's bias and activation as a oneDNN bias and post-op. Primitives are built once per
// shape and reused (onednn_primitives.h); shapes oneDNN serves only with its reference code go
// back to the Eigen kernel of matmul_kernels.cc. bfloat16 products run on oneDNN's bfloat16
// kernels (float32 accumulation, one rounding) where the CPU has bfloat16 math.
#include <optional>

#include "plugin/backend/cpu/kernels/onednn_kernels.h"
#include "plugin/backend/cpu/kernels/onednn_primitives.h"

#if VGPU_HAVE_ONEDNN
#include <cstring>

#include "plugin/common/status_macros.h"
#endif

namespace vgpu::cpu_kernels {

#if VGPU_HAVE_ONEDNN
namespace {

using dnnl::memory;
using matmul_launch::MatmulGeometry;

struct MatmulEntry {
  dnnl::primitive primitive;
  memory::desc a, b, c, bias, scratchpad;
};

// A row-major description of a [batch[0..batch_rank)..., rows, cols] operand whose two last
// dimensions are stored transposed when `transposed` (logical dims stay [batch..., rows, cols]).
memory::desc Operand(memory::data_type type, const int64_t* batch, int batch_rank, int64_t rows,
                     int64_t cols, bool transposed) {
  memory::dims dims(batch, batch + batch_rank);
  dims.push_back(rows);
  dims.push_back(cols);
  memory::dims strides(dims.size());
  const size_t r = dims.size() - 2, c = dims.size() - 1;
  strides[c] = transposed ? rows : 1;
  strides[r] = transposed ? 1 : cols;
  int64_t step = rows * cols;
  for (size_t i = r; i-- > 0;) {
    strides[i] = step;
    step *= dims[i];
  }
  return memory::desc(dims, type, strides);
}

std::shared_ptr<const MatmulEntry> MakeMatmul(const MatmulGeometry& s, bool with_bias,
                                              std::optional<ActivationMode> activation) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (activation.has_value()) {
    dnnl::algorithm algorithm = dnnl::algorithm::eltwise_relu;
    float beta = 0.0f;
    switch (*activation) {
      case ActivationMode::kRelu:
        break;
      case ActivationMode::kRelu6:
        algorithm = dnnl::algorithm::eltwise_clip;
        beta = 6.0f;
        break;
      case ActivationMode::kSigmoid:
        algorithm = dnnl::algorithm::eltwise_logistic;
        break;
      case ActivationMode::kTanh:
        algorithm = dnnl::algorithm::eltwise_tanh;
        break;
      default:
        return nullptr;
    }
    dnnl::post_ops post_ops;
    post_ops.append_eltwise(algorithm, 0.0f, beta);
    attr.set_post_ops(post_ops);
  }
  auto entry = std::make_shared<MatmulEntry>();
  const memory::data_type type =
      s.dtype == DType::kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
  entry->a = Operand(type, s.a_batch, s.batch_rank, s.m, s.k, s.transpose_a);
  entry->b = Operand(type, s.b_batch, s.batch_rank, s.k, s.n, s.transpose_b);
  entry->c = Operand(type, s.out_batch, s.batch_rank, s.m, s.n, false);
  std::optional<dnnl::matmul::primitive_desc> pd;
  if (with_bias) {
    const int64_t ones[kMaxRank] = {1, 1, 1, 1, 1, 1, 1, 1};
    entry->bias = Operand(type, ones, s.batch_rank, 1, s.n, false);
    pd.emplace(onednn::Engine(), entry->a, entry->b, entry->bias, entry->c, attr);
  } else {
    pd.emplace(onednn::Engine(), entry->a, entry->b, entry->c, attr);
  }
  const char* implementation = pd->impl_info_str();
  if (implementation == nullptr || std::strncmp(implementation, "ref", 3) == 0) return nullptr;
  entry->primitive = dnnl::matmul(*pd);
  entry->scratchpad = pd->scratchpad_desc();
  return entry;
}

memory Memory(const memory::desc& desc, const void* data) {
  return memory(desc, onednn::Engine(), const_cast<void*>(data));
}

}  // namespace
#endif  // VGPU_HAVE_ONEDNN

template <typename T>
absl::StatusOr<bool> OnednnMatmul(const Eigen::ThreadPoolDevice& device,
                                  const matmul_launch::MatmulGeometry& shape, const T* a,
                                  const T* b, const T* bias,
                                  std::optional<ActivationMode> activation, T* c) {
#if VGPU_HAVE_ONEDNN
  if (!ExecutorUsesOnednn() || shape.m == 0 || shape.n == 0 || shape.k == 0) return false;
  const bool type_served = shape.dtype == DType::kFloat32 ||
                           (shape.dtype == DType::kBFloat16 && CpuHasBfloat16Math());
  if (!type_served) return false;
  if (shape.batch_rank + 2 > DNNL_MAX_NDIMS) return false;
  double products = 1;  // the output's batch count
  for (int i = 0; i < shape.batch_rank; ++i) products *= static_cast<double>(shape.out_batch[i]);
  const int threads = OnednnThreadsFor(
      device.numThreads(), products * static_cast<double>(shape.m) *
                               static_cast<double>(shape.n) * static_cast<double>(shape.k));
  onednn::UseThreads(threads);
  onednn::PrimitiveKey key(onednn::kMatmul);
  key.Add(threads).Add(static_cast<int64_t>(shape.dtype)).Add(shape.transpose_a).Add(shape.transpose_b).Add(shape.m).Add(shape.n)
      .Add(shape.k).Add(bias != nullptr)
      .Add(activation.has_value() ? static_cast<int64_t>(*activation) : -1)
      .Add(shape.batch_rank);
  for (int i = 0; i < shape.batch_rank; ++i) {
    key.Add(shape.a_batch[i]).Add(shape.b_batch[i]).Add(shape.out_batch[i]);
  }
  auto entry = onednn::Cache().FindOrCreate<MatmulEntry>(
      key, [&] { return MakeMatmul(shape, bias != nullptr, activation); });
  if (entry == nullptr) return false;
  onednn::ThreadScratch scratch;
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, Memory(entry->a, a)},
                                       {DNNL_ARG_WEIGHTS, Memory(entry->b, b)},
                                       {DNNL_ARG_DST, Memory(entry->c, c)}};
  if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, Memory(entry->bias, bias));
  const size_t scratch_bytes = entry->scratchpad.get_size();
  if (scratch_bytes > 0) {
    args.emplace(DNNL_ARG_SCRATCHPAD, Memory(entry->scratchpad, scratch.Get(0, scratch_bytes)));
  }
  VGPU_RETURN_IF_ERROR(onednn::Execute(entry->primitive, args, "matmul"));
  return true;
#else
  return false;
#endif
}

// The element types of the oneDNN path (onednn_kernels.h).
template absl::StatusOr<bool> OnednnMatmul<float>(const Eigen::ThreadPoolDevice&,
                                                  const matmul_launch::MatmulGeometry&,
                                                  const float*, const float*, const float*,
                                                  std::optional<ActivationMode>, float*);
template absl::StatusOr<bool> OnednnMatmul<Eigen::bfloat16>(
    const Eigen::ThreadPoolDevice&, const matmul_launch::MatmulGeometry&, const Eigen::bfloat16*,
    const Eigen::bfloat16*, const Eigen::bfloat16*, std::optional<ActivationMode>,
    Eigen::bfloat16*);

}  // namespace vgpu::cpu_kernels
