// The convolution family's oneDNN path on the CPU executor (declared in onednn_kernels.h):
// float32 2-D and 3-D convolutions — regular, grouped and depthwise — forward (with the fused
// bias and activation of kForwardBiasActivation), backward data and backward weights, on
// TensorFlow's layouts as launched (NHWC/NCHW tensors, [(D,) H, W, I, O] filters). Filters are
// reordered into the layout oneDNN's kernel prefers and back; primitives and reorders are built
// once per geometry and reused (onednn_primitives.h). Geometries are checked by the launch
// layer (launch/convolution_launch.h) before they get here; whatever oneDNN does not serve (or
// serves only with its slow reference code) goes back to the Eigen kernels. bfloat16 runs on
// oneDNN's bfloat16 kernels (float32 accumulation, one rounding) where the CPU has bfloat16
// instructions (AVX512-BF16 or AMX), as TensorFlow-CPU's own bfloat16 convolutions do.
#include <optional>

#include "plugin/backend/cpu/kernels/convolution_kernels.h"
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
using Tag = memory::format_tag;

// oneDNN's description of a convolution geometry: memory descriptors in TensorFlow's layouts
// and the window.
struct ConvolutionDescs {
  memory::desc x, y;             // source / destination (or their gradients)
  memory::desc user_filter;      // the filter as TensorFlow stores it
  memory::desc any_filter;       // the filter in whatever layout the primitive picks
  memory::dims strides, dilates, pad_before, pad_after;
};

// The oneDNN element type of the geometry's tensors (Served admits float32 and bfloat16).
memory::data_type DataTypeOf(const ConvolutionGeometry& g) {
  return g.dtype == DType::kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
}

ConvolutionDescs Describe(const ConvolutionGeometry& g) {
  const bool three_d = g.spatial_dims == 3;
  const bool channels_last = g.data_format == DataFormat::kNHWC;
  memory::dims x{g.batch, g.in_depth}, y{g.batch, g.out_depth}, window;
  ConvolutionDescs d;
  for (int dim = 3 - g.spatial_dims; dim < 3; ++dim) {  // the launch's spatial dimensions
    x.push_back(g.in[dim]);
    y.push_back(g.out[dim]);
    window.push_back(g.filter[dim]);
    d.strides.push_back(g.stride[dim]);
    d.dilates.push_back(g.dilation[dim] - 1);
    d.pad_before.push_back(g.pad_before[dim]);
    d.pad_after.push_back(g.pad_after[dim]);
  }
  // Depthwise: one group per input channel, the channel multiplier being the group's outputs.
  // TensorFlow's [.., in/group, out] filter with out = group * per_group is oneDNN's *higo/*hwigo.
  const bool grouped = g.depthwise || g.groups > 1;
  memory::dims filter;
  if (grouped) {
    const int64_t groups = g.depthwise ? g.in_depth : g.groups;
    const int64_t per_group_out = g.depthwise ? g.filter_out : g.out_depth / g.groups;
    const int64_t per_group_in = g.depthwise ? 1 : g.filter_in_depth;
    filter = {groups, per_group_out, per_group_in};
  } else {
    filter = {g.out_depth, g.filter_in_depth};
  }
  filter.insert(filter.end(), window.begin(), window.end());
  const Tag data_tag = three_d ? (channels_last ? Tag::ndhwc : Tag::ncdhw)
                               : (channels_last ? Tag::nhwc : Tag::nchw);
  const Tag filter_tag = three_d ? (grouped ? Tag::dhwigo : Tag::dhwio)
                                 : (grouped ? Tag::hwigo : Tag::hwio);
  const memory::data_type type = DataTypeOf(g);
  d.x = memory::desc(x, type, data_tag);
  d.y = memory::desc(y, type, data_tag);
  d.user_filter = memory::desc(filter, type, filter_tag);
  d.any_filter = memory::desc(filter, type, Tag::any);
  return d;
}

// A cached convolution: the primitive, the layouts it runs on, and the filter reorder between
// TensorFlow's layout and the primitive's (to it for forward and backward data, from it for
// backward weights) when they differ.
struct ConvolutionEntry {
  dnnl::primitive primitive;
  memory::desc x, y, user_filter, filter, bias;
  memory::desc scratchpad;
  std::optional<dnnl::reorder> filter_reorder;
  memory::desc reorder_scratchpad;
};

dnnl::primitive_attr UserScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// True when oneDNN chose its reference implementation, far slower than the Eigen kernels.
bool IsReference(const char* implementation) {
  return implementation == nullptr || std::strncmp(implementation, "ref", 3) == 0;
}

// The multiply-adds of a convolution (each direction does as many): every output element's
// taps times the input channels of its group (one for a depthwise convolution).
double MultiplyAdds(const ConvolutionGeometry& g) {
  const int64_t depth = g.depthwise ? 1 : g.filter_in_depth;
  return static_cast<double>(g.output_elements) * static_cast<double>(g.FilterTaps()) *
         static_cast<double>(depth);
}

// Settings every convolution primitive depends on.
onednn::PrimitiveKey ConvolutionKey(int kind, const ConvolutionGeometry& g, int threads) {
  onednn::PrimitiveKey key(kind);
  for (int64_t v : {int64_t{threads}, static_cast<int64_t>(g.dtype),
                    static_cast<int64_t>(g.data_format),
                    int64_t{g.spatial_dims}, int64_t{g.depthwise}, g.groups, g.batch, g.in_depth,
                    g.out_depth, g.filter_in_depth, g.filter_out}) {
    key.Add(v);
  }
  for (int dim = 0; dim < 3; ++dim) {
    key.Add(g.in[dim]).Add(g.out[dim]).Add(g.filter[dim]).Add(g.pad_before[dim]);
    key.Add(g.pad_after[dim]).Add(g.stride[dim]).Add(g.dilation[dim]);
  }
  return key;
}

// The forward primitive description of geometry `d` (the hint of the backward passes too).
dnnl::convolution_forward::primitive_desc ForwardDesc(const ConvolutionDescs& d,
                                                      const memory::desc* bias,
                                                      const dnnl::primitive_attr& attr) {
  if (bias != nullptr) {
    return dnnl::convolution_forward::primitive_desc(
        onednn::Engine(), dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
        d.x, d.any_filter, *bias, d.y, d.strides, d.dilates, d.pad_before, d.pad_after, attr);
  }
  return dnnl::convolution_forward::primitive_desc(
      onednn::Engine(), dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
      d.x, d.any_filter, d.y, d.strides, d.dilates, d.pad_before, d.pad_after, attr);
}

// Adds the filter reorder between `from` and `to` to `entry` when the layouts differ.
void AddFilterReorder(const memory::desc& from, const memory::desc& to, ConvolutionEntry* entry) {
  if (from == to) return;
  dnnl::reorder::primitive_desc pd(onednn::Engine(), from, onednn::Engine(), to,
                                   UserScratchpad());
  entry->filter_reorder.emplace(pd);
  entry->reorder_scratchpad = pd.scratchpad_desc();
}

std::optional<dnnl::algorithm> EltwiseOf(ActivationMode mode, float* alpha, float* beta) {
  *alpha = 0.0f;
  *beta = 0.0f;
  switch (mode) {
    case ActivationMode::kRelu:
      return dnnl::algorithm::eltwise_relu;
    case ActivationMode::kRelu6:
      *beta = 6.0f;
      return dnnl::algorithm::eltwise_clip;
    case ActivationMode::kSigmoid:
      return dnnl::algorithm::eltwise_logistic;
    case ActivationMode::kTanh:
      return dnnl::algorithm::eltwise_tanh;
    default:  // ReadFusedEpilogue admits no other mode
      break;
  }
  return std::nullopt;
}

std::shared_ptr<const ConvolutionEntry> MakeForward(const ConvolutionGeometry& g, bool with_bias,
                                                    std::optional<ActivationMode> activation) {
  const ConvolutionDescs d = Describe(g);
  dnnl::primitive_attr attr = UserScratchpad();
  if (activation.has_value()) {
    float alpha, beta;
    std::optional<dnnl::algorithm> algorithm = EltwiseOf(*activation, &alpha, &beta);
    if (!algorithm.has_value()) return nullptr;
    dnnl::post_ops post_ops;
    post_ops.append_eltwise(*algorithm, alpha, beta);
    attr.set_post_ops(post_ops);
  }
  const memory::desc bias({g.out_depth}, DataTypeOf(g), Tag::a);
  auto pd = ForwardDesc(d, with_bias ? &bias : nullptr, attr);
  if (IsReference(pd.impl_info_str())) return nullptr;
  auto entry = std::make_shared<ConvolutionEntry>();
  entry->primitive = dnnl::convolution_forward(pd);
  entry->x = d.x;
  entry->y = d.y;
  entry->user_filter = d.user_filter;
  entry->filter = pd.weights_desc();
  if (with_bias) entry->bias = bias;
  entry->scratchpad = pd.scratchpad_desc();
  AddFilterReorder(d.user_filter, entry->filter, entry.get());
  return entry;
}

std::shared_ptr<const ConvolutionEntry> MakeBackwardData(const ConvolutionGeometry& g) {
  const ConvolutionDescs d = Describe(g);
  auto hint = ForwardDesc(d, nullptr, dnnl::primitive_attr());
  dnnl::convolution_backward_data::primitive_desc pd(
      onednn::Engine(), dnnl::algorithm::convolution_direct, d.x, d.any_filter, d.y, d.strides,
      d.dilates, d.pad_before, d.pad_after, hint, UserScratchpad());
  if (IsReference(pd.impl_info_str())) return nullptr;
  auto entry = std::make_shared<ConvolutionEntry>();
  entry->primitive = dnnl::convolution_backward_data(pd);
  entry->x = d.x;
  entry->y = d.y;
  entry->user_filter = d.user_filter;
  entry->filter = pd.weights_desc();
  entry->scratchpad = pd.scratchpad_desc();
  AddFilterReorder(d.user_filter, entry->filter, entry.get());
  return entry;
}

std::shared_ptr<const ConvolutionEntry> MakeBackwardWeights(const ConvolutionGeometry& g) {
  const ConvolutionDescs d = Describe(g);
  auto hint = ForwardDesc(d, nullptr, dnnl::primitive_attr());
  dnnl::convolution_backward_weights::primitive_desc pd(
      onednn::Engine(), dnnl::algorithm::convolution_direct, d.x, d.any_filter, d.y, d.strides,
      d.dilates, d.pad_before, d.pad_after, hint, UserScratchpad());
  if (IsReference(pd.impl_info_str())) return nullptr;
  auto entry = std::make_shared<ConvolutionEntry>();
  entry->primitive = dnnl::convolution_backward_weights(pd);
  entry->x = d.x;
  entry->y = d.y;
  entry->user_filter = d.user_filter;
  entry->filter = pd.diff_weights_desc();
  entry->scratchpad = pd.scratchpad_desc();
  AddFilterReorder(entry->filter, d.user_filter, entry.get());
  return entry;
}

// Whether the oneDNN path is tried at all: float32, or bfloat16 on a CPU with bfloat16 math
// (the caller's T), with elements on every side.
// Depthwise convolutions with a channel multiplier above 1 stay with the Eigen kernel: oneDNN
// has depthwise kernels for a multiplier of 1 only and runs the others as grouped convolutions
// with every group padded to 16 channels.
bool Served(const ConvolutionGeometry& g) {
  const bool type_served =
      g.dtype == DType::kFloat32 || (g.dtype == DType::kBFloat16 && CpuHasBfloat16Math());
  return ExecutorUsesOnednn() && type_served && g.input_elements > 0 &&
         g.output_elements > 0 && g.filter_elements > 0 && !(g.depthwise && g.filter_out != 1);
}

memory Memory(const memory::desc& desc, const void* data) {
  return memory(desc, onednn::Engine(), const_cast<void*>(data));
}

// Adds the scratchpad argument of `desc` (if it needs memory) from scratch slot `slot`.
void AddScratchpad(const memory::desc& desc, int slot, onednn::ThreadScratch& scratch,
                   std::unordered_map<int, memory>* args) {
  const size_t bytes = desc.get_size();
  if (bytes == 0) return;
  args->emplace(DNNL_ARG_SCRATCHPAD, Memory(desc, scratch.Get(slot, bytes)));
}

absl::Status ReorderFilter(const ConvolutionEntry& entry, const memory& from, const memory& to,
                           onednn::ThreadScratch& scratch) {
  std::unordered_map<int, memory> args{{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  AddScratchpad(entry.reorder_scratchpad, 2, scratch, &args);
  return onednn::Execute(*entry.filter_reorder, args, "filter reorder");
}

// TensorFlow's filter as the primitive reads it: the user's memory itself, or a reorder of it
// into the primitive's preferred layout in this thread's scratch (slot 1).
absl::StatusOr<memory> FilterForPrimitive(const ConvolutionEntry& entry, const void* filter,
                                          onednn::ThreadScratch& scratch) {
  memory user_filter = Memory(entry.user_filter, filter);
  if (!entry.filter_reorder.has_value()) return user_filter;
  memory reordered = Memory(entry.filter, scratch.Get(1, entry.filter.get_size()));
  VGPU_RETURN_IF_ERROR(ReorderFilter(entry, user_filter, reordered, scratch));
  return reordered;
}

}  // namespace
#endif  // VGPU_HAVE_ONEDNN

template <typename T>
absl::StatusOr<bool> OnednnConvolutionForward(const Eigen::ThreadPoolDevice& device,
                                              const ConvolutionGeometry& g, const T* x,
                                              const T* filter, const T* bias,
                                              std::optional<ActivationMode> activation, T* y) {
#if VGPU_HAVE_ONEDNN
  if (!Served(g)) return false;
  const int threads = OnednnThreadsFor(device.numThreads(), MultiplyAdds(g));
  onednn::UseThreads(threads);
  onednn::PrimitiveKey key = ConvolutionKey(onednn::kConvolutionForward, g, threads);
  key.Add(bias != nullptr).Add(activation.has_value() ? static_cast<int64_t>(*activation) : -1);
  auto entry = onednn::Cache().FindOrCreate<ConvolutionEntry>(
      key, [&] { return MakeForward(g, bias != nullptr, activation); });
  if (entry == nullptr) return false;
  onednn::ThreadScratch scratch;
  absl::StatusOr<memory> used_filter = FilterForPrimitive(*entry, filter, scratch);
  if (!used_filter.ok()) return used_filter.status();
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, Memory(entry->x, x)},
                                       {DNNL_ARG_WEIGHTS, *used_filter},
                                       {DNNL_ARG_DST, Memory(entry->y, y)}};
  if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, Memory(entry->bias, bias));
  AddScratchpad(entry->scratchpad, 0, scratch, &args);
  VGPU_RETURN_IF_ERROR(onednn::Execute(entry->primitive, args, "convolution forward"));
  return true;
#else
  return false;
#endif
}

template <typename T>
absl::StatusOr<bool> OnednnConvolutionBackwardInput(const Eigen::ThreadPoolDevice& device,
                                                    const ConvolutionGeometry& g, const T* filter,
                                                    const T* dy, T* dx) {
#if VGPU_HAVE_ONEDNN
  if (!Served(g)) return false;
  const int threads = OnednnThreadsFor(device.numThreads(), MultiplyAdds(g));
  onednn::UseThreads(threads);
  auto entry = onednn::Cache().FindOrCreate<ConvolutionEntry>(
      ConvolutionKey(onednn::kConvolutionBackwardData, g, threads),
      [&] { return MakeBackwardData(g); });
  if (entry == nullptr) return false;
  onednn::ThreadScratch scratch;
  absl::StatusOr<memory> used_filter = FilterForPrimitive(*entry, filter, scratch);
  if (!used_filter.ok()) return used_filter.status();
  std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, Memory(entry->y, dy)},
                                       {DNNL_ARG_WEIGHTS, *used_filter},
                                       {DNNL_ARG_DIFF_SRC, Memory(entry->x, dx)}};
  AddScratchpad(entry->scratchpad, 0, scratch, &args);
  VGPU_RETURN_IF_ERROR(onednn::Execute(entry->primitive, args, "convolution backward data"));
  return true;
#else
  return false;
#endif
}

template <typename T>
absl::StatusOr<bool> OnednnConvolutionBackwardFilter(const Eigen::ThreadPoolDevice& device,
                                                     const ConvolutionGeometry& g, const T* x,
                                                     const T* dy, T* dfilter) {
#if VGPU_HAVE_ONEDNN
  if (!Served(g)) return false;
  const int threads = OnednnThreadsFor(device.numThreads(), MultiplyAdds(g));
  onednn::UseThreads(threads);
  auto entry = onednn::Cache().FindOrCreate<ConvolutionEntry>(
      ConvolutionKey(onednn::kConvolutionBackwardWeights, g, threads),
      [&] { return MakeBackwardWeights(g); });
  if (entry == nullptr) return false;
  onednn::ThreadScratch scratch;
  memory user_filter = Memory(entry->user_filter, dfilter);
  memory computed_filter = user_filter;
  if (entry->filter_reorder.has_value()) {
    computed_filter = Memory(entry->filter, scratch.Get(1, entry->filter.get_size()));
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, Memory(entry->x, x)},
                                       {DNNL_ARG_DIFF_DST, Memory(entry->y, dy)},
                                       {DNNL_ARG_DIFF_WEIGHTS, computed_filter}};
  AddScratchpad(entry->scratchpad, 0, scratch, &args);
  VGPU_RETURN_IF_ERROR(onednn::Execute(entry->primitive, args, "convolution backward weights"));
  if (entry->filter_reorder.has_value()) {
    VGPU_RETURN_IF_ERROR(ReorderFilter(*entry, computed_filter, user_filter, scratch));
  }
  return true;
#else
  return false;
#endif
}

// The element types of the oneDNN path (onednn_kernels.h).
#define VGPU_ONEDNN_CONVOLUTIONS(T)                                                            \
  template absl::StatusOr<bool> OnednnConvolutionForward<T>(                                   \
      const Eigen::ThreadPoolDevice&, const ConvolutionGeometry&, const T*, const T*, const T*, \
      std::optional<ActivationMode>, T*);                                                      \
  template absl::StatusOr<bool> OnednnConvolutionBackwardInput<T>(                             \
      const Eigen::ThreadPoolDevice&, const ConvolutionGeometry&, const T*, const T*, T*);      \
  template absl::StatusOr<bool> OnednnConvolutionBackwardFilter<T>(                            \
      const Eigen::ThreadPoolDevice&, const ConvolutionGeometry&, const T*, const T*, T*);
VGPU_ONEDNN_CONVOLUTIONS(float)
VGPU_ONEDNN_CONVOLUTIONS(Eigen::bfloat16)
#undef VGPU_ONEDNN_CONVOLUTIONS

}  // namespace vgpu::cpu_kernels
