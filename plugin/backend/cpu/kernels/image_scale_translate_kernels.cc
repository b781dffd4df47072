// ScaleAndTranslate and its gradient (protocol/kernels/image_resize.h) on the CPU backing
// executor: TensorFlow's separable resampling with a sampling kernel (Lanczos 1/3/5, Gaussian,
// box, triangle, Keys cubic, Mitchell-Cubic), scale and translation. The spans and weights of
// each dimension are computed once per launch as TensorFlow's ComputeSpans does, in float; the
// gradient uses the transposed spans, so each input element gathers its terms in TensorFlow's
// order. The launch is read by launch/image_resize_launch.h.
#define EIGEN_USE_THREADS
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/backend/cpu/kernels/image_resampling.h"
#include "plugin/backend/launch/image_resize_launch.h"
#include "plugin/common/status_macros.h"
#include "plugin/protocol/kernels/image_resize.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::cpu_kernels {
namespace {

using namespace image_resampling;  // NOLINT: the family's shared helpers
using image_resize::SamplingKernel;
using image_resize_launch::ReadResizeGeometry;

// The most weights a ScaleAndTranslate sampling table may hold (4 GiB of floats): only a
// scale/size combination no real image uses needs more, and such a launch is refused rather
// than allowed to exhaust the executor's memory.
constexpr int64_t kMaxSamplingWeights = int64_t{1} << 30;

// --- ScaleAndTranslate ------------------------------------------------------------------------

// TensorFlow's sampling kernels, evaluated in float as TensorFlow evaluates them.
struct LanczosKernel {
  float radius;
  float Radius() const { return radius; }
  float operator()(float x) const {
    constexpr float kPi = 3.14159265359f;
    x = std::abs(x);
    if (x > radius) return 0.0f;
    if (x <= 1e-3) return 1.0f;
    return radius * std::sin(kPi * x) * std::sin(kPi * x / radius) / (kPi * kPi * x * x);
  }
};
struct GaussianKernel {
  float Radius() const { return 1.5f; }
  float operator()(float x) const {
    constexpr float kSigma = 1.5f / 3.0f;
    x = std::abs(x);
    if (x >= Radius()) return 0.0f;
    return static_cast<float>(std::exp(-x * x / (2.0 * kSigma * kSigma)));
  }
};
struct BoxKernel {
  float Radius() const { return 1.0f; }
  float operator()(float x) const {
    x = std::abs(x);
    return x < 0.5f ? 1.0f : (x == 0.5f ? 0.5f : 0.0f);
  }
};
struct TriangleKernel {
  float Radius() const { return 1.0f; }
  float operator()(float x) const {
    x = std::abs(x);
    return x < 1.0f ? 1.0f - x : 0.0f;
  }
};
struct KeysCubicKernel {
  float Radius() const { return 2.0f; }
  float operator()(float x) const {
    x = std::abs(x);
    if (x >= 2.0f) return 0.0f;
    if (x >= 1.0f) return ((-0.5f * x + 2.5f) * x - 4.0f) * x + 2.0f;
    return ((1.5f * x - 2.5f) * x) * x + 1.0f;
  }
};
struct MitchellCubicKernel {
  float Radius() const { return 2.0f; }
  float operator()(float x) const {
    x = std::abs(x);
    if (x >= 2.0f) return 0.0f;
    if (x >= 1.0f) {
      return (((-7.0f / 18.0f) * x + 2.0f) * x - 10.0f / 3.0f) * x + 16.0f / 9.0f;
    }
    return (((7.0f / 6.0f) * x - 2.0f) * x) * x + 8.0f / 9.0f;
  }
};

template <typename Fn>
absl::Status DispatchSamplingKernel(uint32_t kernel, Fn&& fn) {
  switch (static_cast<SamplingKernel>(kernel)) {
    case SamplingKernel::kLanczos1: return fn(LanczosKernel{1.0f});
    case SamplingKernel::kLanczos3: return fn(LanczosKernel{3.0f});
    case SamplingKernel::kLanczos5: return fn(LanczosKernel{5.0f});
    case SamplingKernel::kGaussian: return fn(GaussianKernel{});
    case SamplingKernel::kBox: return fn(BoxKernel{});
    case SamplingKernel::kTriangle: return fn(TriangleKernel{});
    case SamplingKernel::kKeysCubic: return fn(KeysCubicKernel{});
    case SamplingKernel::kMitchellCubic: return fn(MitchellCubicKernel{});
  }
  return absl::InvalidArgumentError(absl::StrCat("scale and translate: unknown kernel ", kernel));
}

// Output index i along one dimension is the weighted sum of inputs [starts[i], starts[i] +
// span_size) (clipped to the input) with weights [i * span_size, (i + 1) * span_size); unused
// weights are 0 (TensorFlow's Spans).
struct SampleSpans {
  int64_t span_size = 0;
  std::vector<int64_t> starts;
  std::vector<float> weights;
};

absl::Status ReserveSpans(SampleSpans& spans, int64_t outputs, int64_t span_size) {
  if (span_size > 0 && outputs > kMaxSamplingWeights / span_size) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "scale and translate: a sampling table of ", outputs, " x ", span_size,
        " weights is too large"));
  }
  spans.span_size = span_size;
  spans.starts.assign(outputs, 0);
  spans.weights.assign(outputs * span_size, 0.0f);
  return absl::OkStatus();
}

// The spans sampling an input of `input_size` into `output_size` outputs (TensorFlow's
// ComputeSpansCore). input_size >= 1, scale > 0.
template <typename Kernel>
absl::StatusOr<SampleSpans> ForwardSpans(const Kernel& kernel, int64_t output_size,
                                         int64_t input_size, float scale, float translate,
                                         bool antialias) {
  const float inverse_scale = static_cast<float>(1.0 / static_cast<double>(scale));
  const float inverse_translate = -inverse_scale * translate;
  const float kernel_scale = antialias ? std::max(inverse_scale, 1.0f) : 1.0f;
  const float radius = Materialized(kernel.Radius() * kernel_scale);
  // 2 * ceil(radius) + 1 taps at most, never more than the input has.
  const double widest = 2.0 * std::ceil(static_cast<double>(radius)) + 1.0;
  const int64_t span_size =
      widest >= static_cast<double>(input_size) ? input_size : static_cast<int64_t>(widest);
  SampleSpans spans;
  VGPU_RETURN_IF_ERROR(ReserveSpans(spans, output_size, span_size));
  const float inverse_kernel_scale = 1.0f / kernel_scale;
  std::vector<float> taps;
  for (int64_t x = 0; x < output_size; ++x) {
    const float center = static_cast<float>(x) + 0.5f;
    const float sample = Materialized(center * inverse_scale) + inverse_translate;
    // No sample outside the input: an empty span (start 0, weights 0).
    if (sample < 0 || sample > static_cast<float>(input_size)) continue;
    const int64_t start = ClampIndex(ToIndex(std::ceil(sample - radius - 0.5f)), input_size);
    const int64_t end = ClampIndex(ToIndex(std::floor(sample + radius - 0.5f)), input_size) + 1;
    if (end - start > span_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scale and translate: a span of ", end - start, " exceeds ", span_size));
    }
    float total = 0.0f;
    taps.clear();
    for (int64_t source = start; source < end; ++source) {
      const float position = static_cast<float>(source) + 0.5f - sample;
      const float weight = kernel(std::abs(position * inverse_kernel_scale));
      total += weight;
      taps.push_back(weight);
    }
    if (std::abs(total) >= 1000.0f * std::numeric_limits<float>::min()) {
      const float inverse_total = 1.0f / total;
      float* weights = spans.weights.data() + x * span_size;
      for (size_t j = 0; j < taps.size(); ++j) weights[j] = taps[j] * inverse_total;
    }
    spans.starts[x] = start;
  }
  return spans;
}

// The transpose of `forward` (which maps an input of `input_size` to `output_size` outputs):
// spans mapping the outputs' gradient back to the input (TensorFlow's ComputeGradSpansCore).
absl::StatusOr<SampleSpans> TransposedSpans(const SampleSpans& forward, int64_t output_size,
                                            int64_t input_size) {
  // Per input index, the outputs that weigh it, in ascending order (a compressed table).
  std::vector<int64_t> first(input_size, -1), last(input_size, -1);
  for (int64_t o = 0; o < output_size; ++o) {
    for (int64_t j = 0; j < forward.span_size; ++j) {
      const int64_t input = forward.starts[o] + j;
      if (forward.weights[o * forward.span_size + j] == 0.0f || input >= input_size) continue;
      if (first[input] < 0) first[input] = o;
      last[input] = o;
    }
  }
  int64_t span_size = 0;
  for (int64_t i = 0; i < input_size; ++i) {
    if (first[i] >= 0) span_size = std::max(span_size, last[i] - first[i] + 1);
  }
  SampleSpans spans;
  VGPU_RETURN_IF_ERROR(ReserveSpans(spans, input_size, span_size));
  for (int64_t i = 0; i < input_size; ++i) spans.starts[i] = std::max<int64_t>(first[i], 0);
  for (int64_t o = 0; o < output_size; ++o) {
    for (int64_t j = 0; j < forward.span_size; ++j) {
      const int64_t input = forward.starts[o] + j;
      const float weight = forward.weights[o * forward.span_size + j];
      if (weight == 0.0f || input >= input_size) continue;
      spans.weights[input * span_size + (o - first[input])] += weight;
    }
  }
  return spans;
}

// output[b, y, x, :] = sum_j col_w[x, j] * (sum_i row_w[y, i] * input[b, row_start + i,
// col_start + j, :]): rows resampled first into a per-thread row of floats, then columns, each
// sum in span order (TensorFlow's GatherRows then GatherColumns).
template <typename E>
void GatherSpans(const Eigen::ThreadPoolDevice& device, const E* input, int64_t batch,
                 int64_t input_height, int64_t input_width, int64_t channels,
                 const SampleSpans& rows, int64_t output_height, const SampleSpans& columns,
                 int64_t output_width, float* output) {
  const int64_t input_row = input_width * channels;
  const int64_t output_row = output_width * channels;
  const double row_cost = 2.0 * (static_cast<double>(rows.span_size) * input_row +
                                 static_cast<double>(columns.span_size) * output_row);
  device.parallelFor(
      batch * output_height, Eigen::TensorOpCost(row_cost, output_row * 4.0, row_cost),
      [&](Eigen::Index first, Eigen::Index end) {
        std::vector<float> resampled(input_row);
        for (int64_t index = first; index < end; ++index) {
          const int64_t b = index / output_height, y = index % output_height;
          std::fill(resampled.begin(), resampled.end(), 0.0f);
          const int64_t row_start = rows.starts[y];
          const int64_t row_taps =
              std::min(row_start + rows.span_size, input_height) - row_start;
          const float* row_weights = rows.weights.data() + y * rows.span_size;
          for (int64_t i = 0; i < row_taps; ++i) {
            const E* source = input + (b * input_height + row_start + i) * input_row;
            const float weight = row_weights[i];
            for (int64_t k = 0; k < input_row; ++k) {
              resampled[k] += weight * static_cast<float>(source[k]);
            }
          }
          float* out = output + index * output_row;
          for (int64_t x = 0; x < output_width; ++x) {
            const int64_t column_start = columns.starts[x];
            const int64_t column_taps =
                std::min(column_start + columns.span_size, input_width) - column_start;
            const float* column_weights = columns.weights.data() + x * columns.span_size;
            float* pixel = out + x * channels;
            std::fill(pixel, pixel + channels, 0.0f);
            for (int64_t j = 0; j < column_taps; ++j) {
              const float* source = resampled.data() + (column_start + j) * channels;
              const float weight = column_weights[j];
              for (int64_t c = 0; c < channels; ++c) pixel[c] += weight * source[c];
            }
          }
        }
      });
}

// The sampling parameters after the geometry.
struct SamplingParams {
  uint32_t kernel = 0;
  bool antialias = false;
  float row_scale = 1, column_scale = 1, row_translation = 0, column_translation = 0;
};

absl::StatusOr<SamplingParams> ReadSamplingParams(ParamReader& reader,
                                                  const ResizeGeometry& g) {
  if (g.align_corners || g.half_pixel_centers) {
    return absl::InvalidArgumentError("scale and translate: options must be 0");
  }
  SamplingParams p;
  VGPU_ASSIGN_OR_RETURN(p.kernel, reader.Get<uint32_t>());
  VGPU_ASSIGN_OR_RETURN(uint32_t antialias, reader.Get<uint32_t>());
  if (antialias > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("scale and translate: antialias ", antialias, " is not 0 or 1"));
  }
  p.antialias = antialias == 1;
  for (float* field : {&p.row_scale, &p.column_scale, &p.row_translation,
                       &p.column_translation}) {
    VGPU_ASSIGN_OR_RETURN(*field, reader.Get<float>());
  }
  if (!(p.row_scale > 0) || !(p.column_scale > 0)) {
    return absl::InvalidArgumentError("scale and translate: scales must be greater than zero");
  }
  return p;
}

}  // namespace

// image_resize::kScaleAndTranslate.
absl::Status ScaleAndTranslate(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(uint32_t pixel_type, reader.Get<uint32_t>());
  VGPU_ASSIGN_OR_RETURN(ResizeGeometry g, ReadResizeGeometry(reader));
  VGPU_ASSIGN_OR_RETURN(SamplingParams p, ReadSamplingParams(reader, g));
  return ForwardResize(context, pixel_type, g, [&](auto zero, const auto& io) -> absl::Status {
    using E = decltype(zero);
    SampleSpans rows, columns;
    VGPU_RETURN_IF_ERROR(DispatchSamplingKernel(p.kernel, [&](auto kernel) -> absl::Status {
      VGPU_ASSIGN_OR_RETURN(columns, ForwardSpans(kernel, g.resized_width, g.image_width,
                                                  p.column_scale, p.column_translation,
                                                  p.antialias));
      VGPU_ASSIGN_OR_RETURN(rows, ForwardSpans(kernel, g.resized_height, g.image_height,
                                               p.row_scale, p.row_translation, p.antialias));
      return absl::OkStatus();
    }));
    GatherSpans<E>(*context.device, io.image, g.batch, g.image_height, g.image_width,
                   g.channels, rows, g.resized_height, columns, g.resized_width, io.resized);
    return absl::OkStatus();
  });
}

// image_resize::kScaleAndTranslateGrad.
absl::Status ScaleAndTranslateGrad(const KernelContext& context) {
  VGPU_RETURN_IF_ERROR(context.ExpectBuffers(2));
  ParamReader reader = context.Params();
  VGPU_ASSIGN_OR_RETURN(uint32_t dtype, reader.Get<uint32_t>());
  if (static_cast<DType>(dtype) != DType::kFloat32) {
    return absl::InvalidArgumentError(
        absl::StrCat("scale and translate grad: dtype ", dtype, " is not float32"));
  }
  VGPU_ASSIGN_OR_RETURN(ResizeGeometry g, ReadResizeGeometry(reader));
  VGPU_ASSIGN_OR_RETURN(SamplingParams p, ReadSamplingParams(reader, g));
  using Buffers = GradBuffers<float, float>;
  VGPU_ASSIGN_OR_RETURN(Buffers io, (GetGradBuffers<float, float>(context, g)));
  if (g.image_count == 0 || g.resized_count == 0) return absl::OkStatus();
  SampleSpans rows, columns;
  VGPU_RETURN_IF_ERROR(DispatchSamplingKernel(p.kernel, [&](auto kernel) -> absl::Status {
    VGPU_ASSIGN_OR_RETURN(SampleSpans forward_columns,
                          ForwardSpans(kernel, g.resized_width, g.image_width, p.column_scale,
                                       p.column_translation, p.antialias));
    VGPU_ASSIGN_OR_RETURN(columns,
                          TransposedSpans(forward_columns, g.resized_width, g.image_width));
    VGPU_ASSIGN_OR_RETURN(SampleSpans forward_rows,
                          ForwardSpans(kernel, g.resized_height, g.image_height, p.row_scale,
                                       p.row_translation, p.antialias));
    VGPU_ASSIGN_OR_RETURN(rows, TransposedSpans(forward_rows, g.resized_height, g.image_height));
    return absl::OkStatus();
  }));
  GatherSpans<float>(*context.device, io.resized_grad, g.batch, g.resized_height,
                     g.resized_width, g.channels, rows, g.image_height, columns, g.image_width,
                     io.image_grad);
  return absl::OkStatus();
}

}  // namespace vgpu::cpu_kernels
