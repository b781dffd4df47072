// Convolutions as matrix products of image patches on the CPU backing executor (see
// convolution_kernels.h): 2-D and 3-D, grouped or not, with any strides, dilations and
// paddings. The patches of a group of output rows (im2col, about kColumnBufferElements values
// at a time) are multiplied with the filter by Eigen's contractions on the thread pool, as
// TensorFlow's custom CPU convolution kernels do; the input gradient scatters the products
// back into the image (col2im). A 2-D convolution is a 3-D one with a single plane.
#include <algorithm>
#include <cstring>

#include "absl/status/statusor.h"
#include "plugin/backend/cpu/kernels/convolution_kernels.h"
#include "plugin/common/status_macros.h"

namespace vgpu::cpu_kernels {
namespace {

// Scratch budget of the im2col buffer, in elements, and the most one output row's patches may
// take (a launch beyond it is refused rather than allowed to exhaust the executor's memory).
constexpr Index kColumnBufferElements = Index{8} << 20;
constexpr Index kMaxRowPatchElements = Index{1} << 28;

// Output positions are walked in "rows": one row is the out_cols pixels of one output row of
// one plane of one image; rows are numbered image-major, then plane, then row.
Index TotalRows(const ConvolutionGeometry& g) { return g.batch * g.out[kPlanes] * g.out[kRows]; }
Index RowsPerImage(const ConvolutionGeometry& g) { return g.out[kPlanes] * g.out[kRows]; }

// The number of rows whose patches fit in the column buffer (at least 1).
Index RowsPerChunk(const ConvolutionGeometry& g, Index patch) {
  const Index per_row = std::max<Index>(1, g.out[kCols] * patch);
  return std::clamp<Index>(kColumnBufferElements / per_row, 1, std::max<Index>(1, TotalRows(g)));
}

// True when the patches are the input pixels themselves (1x1 filter, unit strides, no padding).
bool PatchesAreInput(const ConvolutionGeometry& g) {
  return g.FilterTaps() == 1 && g.UnitStridesAndDilations() && g.NoPadding() && g.groups == 1;
}

// How a convolution that is not PatchesAreInput walks its output rows: in chunks of
// rows_per_chunk rows whose patches fit in the column buffer, group by group.
struct PatchPlan {
  Index patch = 0;           // elements of one patch: filter taps * filter_in_depth
  Index per_group = 0;       // output channels of one group
  Index total_rows = 0;      // TotalRows
  Index rows_per_chunk = 0;  // RowsPerChunk

  // Elements of the column buffer: the patches of one chunk.
  Index ColumnElements(const ConvolutionGeometry& g) const {
    return rows_per_chunk * g.out[kCols] * patch;
  }
  // Elements of one chunk's output pixels in one group's channels.
  Index GroupChunkElements(const ConvolutionGeometry& g) const {
    return rows_per_chunk * g.out[kCols] * per_group;
  }
  // Calls fn(first, rows, pixels) for each chunk, in order: output rows [first, first + rows),
  // pixels = rows * out[kCols] output pixels.
  template <typename Fn>
  void ForEachChunk(const ConvolutionGeometry& g, Fn&& fn) const {
    for (Index first = 0; first < total_rows; first += rows_per_chunk) {
      const Index rows = std::min(rows_per_chunk, total_rows - first);
      fn(first, rows, rows * g.out[kCols]);
    }
  }
};

// The plan of `g`; ResourceExhausted when one output row's patches exceed
// kMaxRowPatchElements.
absl::StatusOr<PatchPlan> PlanPatches(const ConvolutionGeometry& g) {
  PatchPlan plan;
  plan.patch = g.FilterTaps() * g.filter_in_depth;
  if (plan.patch > kMaxRowPatchElements || g.out[kCols] * plan.patch > kMaxRowPatchElements) {
    return absl::ResourceExhaustedError(
        "convolution patches exceed the executor's scratch budget");
  }
  plan.per_group = g.out_depth / g.groups;
  plan.total_rows = TotalRows(g);
  plan.rows_per_chunk = RowsPerChunk(g, plan.patch);
  return plan;
}

// Calls visit(tap, input pixel) for each filter tap whose input position, for the output pixel
// (out_plane, out_row, out_col), lies inside the image; taps are numbered plane-major like the
// filter, pixels plane-major within the image.
template <typename Visit>
inline void ForEachTap(const ConvolutionGeometry& g, Index out_plane, Index out_row,
                       Index out_col, Visit&& visit) {
  Index tap = 0;
  // The input position of filter tap `k` of dimension `dim` for output position `o`.
  auto input_position = [&g](int dim, Index o, Index k) {
    return o * g.stride[dim] - g.pad_before[dim] + k * g.dilation[dim];
  };
  for (Index kd = 0; kd < g.filter[kPlanes]; ++kd) {
    const Index ip = input_position(kPlanes, out_plane, kd);
    const bool plane_inside = ip >= 0 && ip < g.in[kPlanes];
    for (Index kh = 0; kh < g.filter[kRows]; ++kh) {
      const Index ih = input_position(kRows, out_row, kh);
      const bool row_inside = plane_inside && ih >= 0 && ih < g.in[kRows];
      for (Index kw = 0; kw < g.filter[kCols]; ++kw, ++tap) {
        const Index iw = input_position(kCols, out_col, kw);
        if (row_inside && iw >= 0 && iw < g.in[kCols]) {
          visit(tap, (ip * g.in[kRows] + ih) * g.in[kCols] + iw);
        } else {
          visit(tap, Index{-1});
        }
      }
    }
  }
}

// Copies the patches of group `group` for rows [first_row, first_row + rows) into `columns`:
// one row of [taps, filter_in_depth] values per output pixel, zeros where the window reaches
// into the padding. Rows are spread over the thread pool.
template <typename CT>
void ExtractPatches(const Eigen::ThreadPoolDevice& device, const ConvolutionGeometry& g,
                    const CT* input, Index group, Index first_row, Index rows, CT* columns) {
  const Index depth = g.filter_in_depth;
  const Index patch = g.FilterTaps() * depth;
  const size_t depth_bytes = depth * sizeof(CT);
  const Eigen::TensorOpCost row_cost(g.out[kCols] * patch * sizeof(CT),
                                     g.out[kCols] * patch * sizeof(CT), g.out[kCols] * patch);
  device.parallelFor(rows, row_cost, [&](Index first, Index last) {
    for (Index r = first; r < last; ++r) {
      const Index row = first_row + r;
      const Index n = row / RowsPerImage(g);
      const Index out_plane = (row / g.out[kRows]) % g.out[kPlanes];
      const Index out_row = row % g.out[kRows];
      const CT* image = input + n * g.InputPixels() * g.in_depth + group * depth;
      CT* out = columns + r * g.out[kCols] * patch;
      for (Index out_col = 0; out_col < g.out[kCols]; ++out_col, out += patch) {
        ForEachTap(g, out_plane, out_row, out_col, [&](Index tap, Index pixel) {
          if (pixel < 0) {
            std::memset(out + tap * depth, 0, depth_bytes);
          } else {
            std::memcpy(out + tap * depth, image + pixel * g.in_depth, depth_bytes);
          }
        });
      }
    }
  });
}

// The inverse of ExtractPatches: adds the patch values of `columns` (rows [first_row,
// first_row + rows), group `group`) into the input-shaped `in_backprop`. Work is split by
// image and by block of channels, so no two tasks add to the same element.
template <typename CT>
void AddPatches(const Eigen::ThreadPoolDevice& device, const ConvolutionGeometry& g,
                const CT* columns, Index group, Index first_row, Index rows, CT* in_backprop) {
  if (rows == 0) return;
  const Index depth = g.filter_in_depth;
  const Index patch = g.FilterTaps() * depth;
  const Index first_image = first_row / RowsPerImage(g);
  const Index images = (first_row + rows - 1) / RowsPerImage(g) - first_image + 1;
  const Index blocks =
      std::clamp<Index>((4 * device.numThreads() + images - 1) / images, 1, depth);
  const Index rows_per_task = std::max<Index>(1, rows / images);
  const Eigen::TensorOpCost task_cost(rows_per_task * g.out[kCols] * patch * sizeof(CT) / blocks,
                                      rows_per_task * g.out[kCols] * patch * sizeof(CT) / blocks,
                                      rows_per_task * g.out[kCols] * patch / blocks);
  device.parallelFor(images * blocks, task_cost, [&](Index first_task, Index last_task) {
    for (Index task = first_task; task < last_task; ++task) {
      const Index n = first_image + task / blocks;
      const Index block = task % blocks;
      const Index c0 = depth * block / blocks, c1 = depth * (block + 1) / blocks;
      const Index begin = std::max(first_row, n * RowsPerImage(g));
      const Index end = std::min(first_row + rows, (n + 1) * RowsPerImage(g));
      CT* image = in_backprop + n * g.InputPixels() * g.in_depth + group * depth;
      for (Index row = begin; row < end; ++row) {
        const Index out_plane = (row / g.out[kRows]) % g.out[kPlanes];
        const Index out_row = row % g.out[kRows];
        const CT* column = columns + (row - first_row) * g.out[kCols] * patch;
        for (Index out_col = 0; out_col < g.out[kCols]; ++out_col, column += patch) {
          ForEachTap(g, out_plane, out_row, out_col, [&](Index tap, Index pixel) {
            if (pixel < 0) return;
            const CT* __restrict source = column + tap * depth;
            CT* __restrict target = image + pixel * g.in_depth;
            for (Index c = c0; c < c1; ++c) target[c] += source[c];
          });
        }
      }
    }
  });
}

// The filter of group `group` as a contiguous [patch, out_depth / groups] matrix: the filter
// itself for a single group, else its columns of that group, copied into `staged`.
template <typename CT>
const CT* GroupFilter(const Eigen::ThreadPoolDevice& device, const ConvolutionGeometry& g,
                      const CT* filter, Index group, Scratch<CT>& staged) {
  if (g.groups == 1) return filter;
  const Index patch = g.FilterTaps() * g.filter_in_depth;
  const Index per_group = g.out_depth / g.groups;
  const Eigen::array<Index, 2> offsets{0, group * per_group};
  const Eigen::array<Index, 2> extents{patch, per_group};
  Map2<CT>(staged.data(), patch, per_group).device(device) =
      ConstMap2<CT>(filter, patch, g.out_depth).slice(offsets, extents);
  return staged.data();
}

// The output gradient of group `group` for the `pixels` output pixels from row `first` on, as a
// [pixels, out_depth / groups] matrix: dy's own rows (contiguous in channels-last order, like
// the patches) for a single group, else its columns of that group, copied into `staged`.
template <typename CT>
ConstMap2<CT> GroupGradients(const Eigen::ThreadPoolDevice& device, const ConvolutionGeometry& g,
                             const CT* out_backprop, Index first, Index pixels, Index group,
                             Scratch<CT>& staged) {
  const CT* rows = out_backprop + first * g.out[kCols] * g.out_depth;
  const Index per_group = g.out_depth / g.groups;
  if (g.groups == 1) return ConstMap2<CT>(rows, pixels, per_group);
  const Eigen::array<Index, 2> offsets{0, group * per_group};
  const Eigen::array<Index, 2> extents{pixels, per_group};
  Map2<CT>(staged.data(), pixels, per_group).device(device) =
      ConstMap2<CT>(rows, pixels, g.out_depth).slice(offsets, extents);
  return ConstMap2<CT>(staged.data(), pixels, per_group);
}

}  // namespace

template <typename CT>
absl::Status Im2col<CT>::Forward(const Eigen::ThreadPoolDevice& device,
                                 const ConvolutionGeometry& g, const CT* input, const CT* filter,
                                 CT* output) {
  const ContractDims matmul{Eigen::IndexPair<Index>(1, 0)};
  if (PatchesAreInput(g)) {
    const Index pixels = g.batch * g.InputPixels();
    Map2<CT>(output, pixels, g.out_depth).device(device) =
        ConstMap2<CT>(input, pixels, g.in_depth)
            .contract(ConstMap2<CT>(filter, g.in_depth, g.out_depth), matmul);
    return absl::OkStatus();
  }
  VGPU_ASSIGN_OR_RETURN(const PatchPlan plan, PlanPatches(g));
  const Index patch = plan.patch, per_group = plan.per_group;
  Scratch<CT> columns(plan.ColumnElements(g));
  Scratch<CT> group_filter(g.groups > 1 ? patch * per_group : 0);
  Map2<CT> result(output, plan.total_rows * g.out[kCols], g.out_depth);
  for (Index group = 0; group < g.groups; ++group) {
    ConstMap2<CT> weights(GroupFilter(device, g, filter, group, group_filter), patch, per_group);
    plan.ForEachChunk(g, [&](Index first, Index rows, Index pixels) {
      ExtractPatches(device, g, input, group, first, rows, columns.data());
      ConstMap2<CT> patches(columns.data(), pixels, patch);
      const Eigen::array<Index, 2> offsets{first * g.out[kCols], group * per_group};
      const Eigen::array<Index, 2> extents{pixels, per_group};
      result.slice(offsets, extents).device(device) = patches.contract(weights, matmul);
    });
  }
  return absl::OkStatus();
}

template <typename CT>
absl::Status Im2col<CT>::BackwardInput(const Eigen::ThreadPoolDevice& device,
                                       const ConvolutionGeometry& g, const CT* filter,
                                       const CT* out_backprop, CT* in_backprop) {
  const ContractDims by_out_depth{Eigen::IndexPair<Index>(1, 1)};
  if (PatchesAreInput(g)) {
    const Index pixels = g.batch * g.InputPixels();
    Map2<CT>(in_backprop, pixels, g.in_depth).device(device) =
        ConstMap2<CT>(out_backprop, pixels, g.out_depth)
            .contract(ConstMap2<CT>(filter, g.in_depth, g.out_depth), by_out_depth);
    return absl::OkStatus();
  }
  VGPU_ASSIGN_OR_RETURN(const PatchPlan plan, PlanPatches(g));
  RowMajorMap<CT, 1> zeroed(in_backprop, g.input_elements);
  zeroed.device(device) = zeroed.constant(CT(0));
  const Index patch = plan.patch, per_group = plan.per_group;
  Scratch<CT> columns(plan.ColumnElements(g));
  Scratch<CT> group_filter(g.groups > 1 ? patch * per_group : 0);
  Scratch<CT> group_gradients(g.groups > 1 ? plan.GroupChunkElements(g) : 0);
  for (Index group = 0; group < g.groups; ++group) {
    ConstMap2<CT> weights(GroupFilter(device, g, filter, group, group_filter), patch, per_group);
    plan.ForEachChunk(g, [&](Index first, Index rows, Index pixels) {
      const ConstMap2<CT> gradients =
          GroupGradients(device, g, out_backprop, first, pixels, group, group_gradients);
      Map2<CT>(columns.data(), pixels, patch).device(device) =
          gradients.contract(weights, by_out_depth);
      AddPatches(device, g, columns.data(), group, first, rows, in_backprop);
    });
  }
  return absl::OkStatus();
}

template <typename CT>
absl::Status Im2col<CT>::BackwardFilter(const Eigen::ThreadPoolDevice& device,
                                        const ConvolutionGeometry& g, const CT* input,
                                        const CT* out_backprop, CT* filter_backprop) {
  const ContractDims by_pixels{Eigen::IndexPair<Index>(0, 0)};
  if (PatchesAreInput(g)) {
    const Index pixels = g.batch * g.InputPixels();
    Map2<CT>(filter_backprop, g.in_depth, g.out_depth).device(device) =
        ConstMap2<CT>(input, pixels, g.in_depth)
            .contract(ConstMap2<CT>(out_backprop, pixels, g.out_depth), by_pixels);
    return absl::OkStatus();
  }
  VGPU_ASSIGN_OR_RETURN(const PatchPlan plan, PlanPatches(g));
  const Index patch = plan.patch, per_group = plan.per_group;
  Scratch<CT> columns(plan.ColumnElements(g));
  Scratch<CT> group_gradients(g.groups > 1 ? plan.GroupChunkElements(g) : 0);
  // A single group sums straight into the filter gradient, several each into scratch first.
  Scratch<CT> group_result(g.groups > 1 ? patch * per_group : 0);
  Map2<CT> filter_matrix(filter_backprop, patch, g.out_depth);
  for (Index group = 0; group < g.groups; ++group) {
    Map2<CT> result(g.groups > 1 ? group_result.data() : filter_backprop, patch, per_group);
    plan.ForEachChunk(g, [&](Index first, Index rows, Index pixels) {
      ExtractPatches(device, g, input, group, first, rows, columns.data());
      ConstMap2<CT> patches(columns.data(), pixels, patch);
      const ConstMap2<CT> gradients =
          GroupGradients(device, g, out_backprop, first, pixels, group, group_gradients);
      if (first == 0) {
        result.device(device) = patches.contract(gradients, by_pixels);
      } else {
        result.device(device) += patches.contract(gradients, by_pixels);
      }
    });
    if (g.groups > 1) {
      const Eigen::array<Index, 2> offsets{0, group * per_group};
      const Eigen::array<Index, 2> extents{patch, per_group};
      filter_matrix.slice(offsets, extents).device(device) = result;
    }
  }
  return absl::OkStatus();
}

template struct Im2col<float>;
template struct Im2col<double>;

}  // namespace vgpu::cpu_kernels
