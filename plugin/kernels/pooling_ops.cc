// TensorFlow op kernels of the pooling family on the virtual GPU: MaxPool, AvgPool and their
// gradients (MaxPoolGrad, AvgPoolGrad), NHWC and NCHW, VALID / SAME (and EXPLICIT for the max
// ops). Written as TensorFlow's cuDNN kernels are: validate the attributes and shapes as
// TensorFlow does, then per call create and set a pooling descriptor and tensor descriptors,
// launch, destroy (RAII).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/protocol/kernels/pooling.h"

namespace vgpu {
namespace {

constexpr std::initializer_list<TF_DataType> kFloatingTypes = {TF_FLOAT, TF_HALF, TF_BFLOAT16,
                                                                TF_DOUBLE};

std::string ShapeString(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

enum class Padding { kValid, kSame, kExplicit };

// The window attributes every pooling op carries, validated as TensorFlow's kernels do.
struct PoolAttributes {
  DataFormat format = DataFormat::kNHWC;
  std::vector<int64_t> ksize;    // 4 values in `format`'s order
  std::vector<int64_t> strides;  // 4 values in `format`'s order
  Padding padding = Padding::kValid;
  std::vector<int64_t> explicit_paddings;  // 8 values (before, after per dimension) or empty

  int h() const { return format == DataFormat::kNCHW ? 2 : 1; }
  int w() const { return format == DataFormat::kNCHW ? 3 : 2; }
  int c() const { return format == DataFormat::kNCHW ? 1 : 3; }
};

absl::StatusOr<PoolAttributes> ReadPoolAttributes(OpConstruction& construction) {
  PoolAttributes attributes;
  std::string format = "NHWC";
  if (construction.Has("data_format")) {
    VGPU_ASSIGN_OR_RETURN(format, construction.String("data_format"));
  }
  if (format == "NHWC") {
    attributes.format = DataFormat::kNHWC;
  } else if (format == "NCHW") {
    attributes.format = DataFormat::kNCHW;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("Invalid data format: ", format, " (the virtual GPU pools NHWC and NCHW)"));
  }
  VGPU_ASSIGN_OR_RETURN(attributes.ksize, construction.IntList("ksize"));
  if (attributes.ksize.size() != 4) {
    return absl::InvalidArgumentError("Sliding window ksize field must specify 4 dimensions");
  }
  VGPU_ASSIGN_OR_RETURN(attributes.strides, construction.IntList("strides"));
  if (attributes.strides.size() != 4) {
    return absl::InvalidArgumentError("Sliding window stride field must specify 4 dimensions");
  }
  for (int64_t k : attributes.ksize) {
    if (k <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Sliding window ksize must be positive. The specified or inferred ksize is: ",
          absl::StrJoin(attributes.ksize, ",")));
    }
  }
  for (int64_t s : attributes.strides) {
    if (s <= 0) return absl::InvalidArgumentError(absl::StrCat("Stride must be > 0, but got ", s));
  }
  if (attributes.ksize[0] != 1 || attributes.strides[0] != 1) {
    return absl::UnimplementedError("Pooling is not yet supported on the batch dimension.");
  }
  if (attributes.ksize[attributes.c()] != 1) {
    if (attributes.ksize[attributes.h()] == 1 && attributes.ksize[attributes.w()] == 1) {
      return absl::UnimplementedError(
          "Depthwise max pooling is currently only implemented for CPU devices.");
    }
    return absl::UnimplementedError(
        "MaxPooling supports exactly one of pooling across depth or pooling across "
        "width/height.");
  }
  VGPU_ASSIGN_OR_RETURN(std::string padding, construction.String("padding"));
  if (construction.Has("explicit_paddings")) {
    VGPU_ASSIGN_OR_RETURN(attributes.explicit_paddings,
                          construction.IntList("explicit_paddings"));
  }
  if (padding == "VALID") {
    attributes.padding = Padding::kValid;
  } else if (padding == "SAME") {
    attributes.padding = Padding::kSame;
  } else if (padding == "EXPLICIT") {
    attributes.padding = Padding::kExplicit;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("Invalid padding: ", padding));
  }
  if (attributes.padding == Padding::kExplicit) {
    const std::vector<int64_t>& p = attributes.explicit_paddings;
    if (p.size() != 8) {
      return absl::InvalidArgumentError(absl::StrCat(
          "explicit_paddings attribute must contain 8 values, but got: ", p.size()));
    }
    for (int64_t v : p) {
      if (v < 0) {
        return absl::InvalidArgumentError("All elements of explicit_paddings must be nonnegative");
      }
    }
    const int n = 0, c = attributes.c();
    if (p[2 * n] != 0 || p[2 * n + 1] != 0 || p[2 * c] != 0 || p[2 * c + 1] != 0) {
      return absl::InvalidArgumentError(
          "Nonzero explicit padding in the batch or depth dimensions is not supported");
    }
    // TensorFlow's CheckPaddingSize: every padding smaller than the window.
    const char* names[2][2] = {{"Top", "Bottom"}, {"Left", "Right"}};
    for (int i = 0; i < 2; ++i) {
      const int dim = i == 0 ? attributes.h() : attributes.w();
      for (int side = 0; side < 2; ++side) {
        if (p[2 * dim + side] >= attributes.ksize[dim]) {
          return absl::InvalidArgumentError(
              absl::StrCat(names[i][side], " padding ", p[2 * dim + side],
                           " needs to be smaller than the window size ", attributes.ksize[dim]));
        }
      }
    }
  } else {
    attributes.explicit_paddings.clear();  // ignored unless the padding is EXPLICIT, as on CPU
  }
  return attributes;
}

// Output size and padding of one spatial dimension (TensorFlow's GetWindowedOutputSize).
struct WindowedSize {
  int64_t out = 0, pad_before = 0, pad_after = 0;
};

absl::StatusOr<WindowedSize> WindowedOutputSize(const PoolAttributes& attributes, int dim,
                                                int64_t in) {
  const int64_t k = attributes.ksize[dim], s = attributes.strides[dim];
  WindowedSize size;
  switch (attributes.padding) {
    case Padding::kValid:
      size.out = (in - k + s) / s;
      break;
    case Padding::kSame: {
      size.out = (in + s - 1) / s;
      const int64_t needed = std::max<int64_t>(0, (size.out - 1) * s + k - in);
      size.pad_before = needed / 2;
      size.pad_after = needed - size.pad_before;
      break;
    }
    case Padding::kExplicit:
      size.pad_before = attributes.explicit_paddings[2 * dim];
      size.pad_after = attributes.explicit_paddings[2 * dim + 1];
      size.out = (in + size.pad_before + size.pad_after - k + s) / s;
      break;
  }
  if (size.out < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Computed output size would be negative: ", size.out, " [input_size: ", in,
        ", effective_filter_size: ", k, ", stride: ", s, "]"));
  }
  return size;
}

// The pooling geometry of one call: the output shape and the descriptor settings.
struct PoolPlan {
  std::vector<int64_t> output_dims;
  PoolingDescriptorSettings settings;
};

absl::StatusOr<PoolPlan> PlanPooling(const PoolAttributes& attributes, PoolingMode mode,
                                     absl::Span<const int64_t> input_dims) {
  if (input_dims.size() != 4) {
    return absl::InvalidArgumentError("tensor_in must be 4-dimensional");
  }
  VGPU_ASSIGN_OR_RETURN(WindowedSize rows,
                        WindowedOutputSize(attributes, attributes.h(), input_dims[attributes.h()]));
  VGPU_ASSIGN_OR_RETURN(WindowedSize cols,
                        WindowedOutputSize(attributes, attributes.w(), input_dims[attributes.w()]));
  PoolPlan plan;
  plan.output_dims.assign(input_dims.begin(), input_dims.end());
  plan.output_dims[attributes.h()] = rows.out;
  plan.output_dims[attributes.w()] = cols.out;
  PoolingDescriptorSettings& s = plan.settings;
  s.mode = mode;
  s.data_format = attributes.format;
  s.window_h = static_cast<int32_t>(attributes.ksize[attributes.h()]);
  s.window_w = static_cast<int32_t>(attributes.ksize[attributes.w()]);
  s.stride_h = static_cast<int32_t>(attributes.strides[attributes.h()]);
  s.stride_w = static_cast<int32_t>(attributes.strides[attributes.w()]);
  s.pad_top = static_cast<int32_t>(rows.pad_before);
  s.pad_bottom = static_cast<int32_t>(rows.pad_after);
  s.pad_left = static_cast<int32_t>(cols.pad_before);
  s.pad_right = static_cast<int32_t>(cols.pad_after);
  return plan;
}

// Creates the pooling descriptor and the x / y tensor descriptors of `plan` and launches
// `kernel` on `buffers` (the pooling family's layouts, protocol/kernels/pooling.h).
absl::Status LaunchPooling(OpContext& context, KernelId kernel, const PoolPlan& plan,
                           TF_DataType dtype, absl::Span<const int64_t> input_dims,
                           std::initializer_list<BufferArg> buffers) {
  return KernelLaunch(context)
      .Describe(plan.settings)
      .DescribeTensor(dtype, input_dims)
      .DescribeTensor(dtype, plan.output_dims)
      .Buffers(buffers)
      .Run(kernel);
}

// MaxPool / AvgPool.
template <PoolingMode kMode>
class PoolOp {
 public:
  static absl::StatusOr<std::unique_ptr<PoolOp>> Create(OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(PoolAttributes attributes, ReadPoolAttributes(construction));
    return std::unique_ptr<PoolOp>(new PoolOp(std::move(attributes)));
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    const std::vector<int64_t> x_dims = ShapeOf(x.get());
    VGPU_ASSIGN_OR_RETURN(PoolPlan plan, PlanPooling(attributes_, kMode, x_dims));
    const TF_DataType dtype = TF_TensorType(x.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, plan.output_dims));
    if (TF_TensorElementCount(y.get()) == 0) return absl::OkStatus();
    return LaunchPooling(context, pooling::kForward, plan, dtype, x_dims,
                         {BufferOf(x.get()), BufferOf(y.get())});
  }

 private:
  explicit PoolOp(PoolAttributes attributes) : attributes_(std::move(attributes)) {}
  PoolAttributes attributes_;
};

// MaxPoolGrad(orig_input, orig_output, grad) -> gradient with respect to orig_input.
class MaxPoolGradOp {
 public:
  static absl::StatusOr<std::unique_ptr<MaxPoolGradOp>> Create(OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(PoolAttributes attributes, ReadPoolAttributes(construction));
    return std::unique_ptr<MaxPoolGradOp>(new MaxPoolGradOp(std::move(attributes)));
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.Input(1));
    VGPU_ASSIGN_OR_RETURN(TensorPtr dy, context.Input(2));
    const std::vector<int64_t> x_dims = ShapeOf(x.get());
    if (x_dims.size() != 4) {
      return absl::InvalidArgumentError("tensor_in must be 4-dimensional");
    }
    if (TF_NumDims(y.get()) != 4) {
      return absl::InvalidArgumentError("tensor_out must be 4-dimensional");
    }
    if (TF_NumDims(dy.get()) != 4) {
      return absl::InvalidArgumentError("out_backprop must be 4-dimensional");
    }
    VGPU_ASSIGN_OR_RETURN(PoolPlan plan, PlanPooling(attributes_, PoolingMode::kMax, x_dims));
    if (ShapeOf(y.get()) != plan.output_dims) {
      return absl::InvalidArgumentError(
          absl::StrCat("Expected orig_output shape to be ", ShapeString(plan.output_dims),
                       ", but got ", ShapeString(ShapeOf(y.get()))));
    }
    if (ShapeOf(dy.get()) != plan.output_dims) {
      return absl::InvalidArgumentError(
          absl::StrCat("Expected grad shape to be ", ShapeString(plan.output_dims), ", but got ",
                       ShapeString(ShapeOf(dy.get()))));
    }
    const TF_DataType dtype = TF_TensorType(x.get());
    // Never forwarded into x: the kernel reads x while it writes dx.
    VGPU_ASSIGN_OR_RETURN(TensorPtr dx, context.AllocateOutput(0, dtype, x_dims));
    if (TF_TensorElementCount(dx.get()) == 0) return absl::OkStatus();
    return LaunchPooling(context, pooling::kBackward, plan, dtype, x_dims,
                         {BufferOf(x.get()), BufferOf(dy.get()), BufferOf(dx.get())});
  }

 private:
  explicit MaxPoolGradOp(PoolAttributes attributes) : attributes_(std::move(attributes)) {}
  PoolAttributes attributes_;
};

// AvgPoolGrad(orig_input_shape (host int32), grad) -> gradient with respect to the input.
class AvgPoolGradOp {
 public:
  static absl::StatusOr<std::unique_ptr<AvgPoolGradOp>> Create(OpConstruction& construction) {
    VGPU_ASSIGN_OR_RETURN(PoolAttributes attributes, ReadPoolAttributes(construction));
    if (attributes.padding == Padding::kExplicit) {
      return absl::InvalidArgumentError("AvgPoolGrad does not support EXPLICIT padding");
    }
    return std::unique_ptr<AvgPoolGradOp>(new AvgPoolGradOp(std::move(attributes)));
  }

  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr shape_tensor, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(TensorPtr dy, context.Input(1));
    if (TF_NumDims(shape_tensor.get()) != 1 || TF_TensorElementCount(shape_tensor.get()) != 4) {
      return absl::InvalidArgumentError("orig_input_shape must be 1-dimensional and 4 elements");
    }
    if (TF_NumDims(dy.get()) != 4) {
      return absl::InvalidArgumentError("out_backprop must be 4-dimensional");
    }
    VGPU_ASSIGN_OR_RETURN(std::vector<int64_t> x_dims, context.HostIntegers(0));
    for (int64_t d : x_dims) {
      if (d < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("orig_input_shape has a negative dimension: ", ShapeString(x_dims)));
      }
    }
    VGPU_ASSIGN_OR_RETURN(PoolPlan plan, PlanPooling(attributes_, PoolingMode::kAverage, x_dims));
    if (ShapeOf(dy.get()) != plan.output_dims) {
      return absl::InvalidArgumentError(
          absl::StrCat("Expected grad shape to be ", ShapeString(plan.output_dims), ", but got ",
                       ShapeString(ShapeOf(dy.get()))));
    }
    const TF_DataType dtype = TF_TensorType(dy.get());
    VGPU_ASSIGN_OR_RETURN(TensorPtr dx, context.AllocateOutput(0, dtype, x_dims));
    if (TF_TensorElementCount(dx.get()) == 0) return absl::OkStatus();
    return LaunchPooling(context, pooling::kBackward, plan, dtype, x_dims,
                         {BufferOf(dy.get()), BufferOf(dx.get())});
  }

 private:
  explicit AvgPoolGradOp(PoolAttributes attributes) : attributes_(std::move(attributes)) {}
  PoolAttributes attributes_;
};

}  // namespace

void RegisterPoolingOps(const char* device_type) {
  RegisterKernelForTypes<PoolOp<PoolingMode::kMax>>("MaxPool", device_type, "T", kFloatingTypes);
  RegisterKernelForTypes<PoolOp<PoolingMode::kAverage>>("AvgPool", device_type, "T",
                                                        kFloatingTypes);
  RegisterKernelForTypes<MaxPoolGradOp>("MaxPoolGrad", device_type, "T", kFloatingTypes);
  RegisterKernelForTypes<AvgPoolGradOp>("AvgPoolGrad", device_type, "T", kFloatingTypes,
                                        {"orig_input_shape"});
}

}  // namespace vgpu
