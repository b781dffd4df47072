// The broadcast layout of element-wise launches (see broadcast_layout.h).
#include "plugin/backend/launch/broadcast_layout.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/launch/dense_tensor.h"

namespace vgpu {

template <int kInputs>
absl::StatusOr<BroadcastLayout<kInputs>> MakeBroadcastLayout(
    const TensorDescriptorSettings& output,
    const std::array<TensorDescriptorSettings, kInputs>& inputs) {
  BroadcastLayout<kInputs> layout;
  const int rank = output.rank;
  if (rank < 0 || rank > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat("output rank ", rank, " is out of range"));
  }
  // in_dims[k][d]: input k's dimension aligned to output dimension d (1 where it has none).
  int64_t in_dims[kInputs][kMaxRank];
  {
    absl::StatusOr<int64_t> count = DenseElementCount(output);
    if (!count.ok()) return count.status();
    layout.output_count = *count;
  }
  for (int k = 0; k < kInputs; ++k) {
    const TensorDescriptorSettings& input = inputs[k];
    if (input.rank < 0 || input.rank > rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("input ", k, " has rank ", input.rank, ", the output ", rank));
    }
    const int pad = rank - input.rank;
    layout.input_counts[k] = 1;
    for (int d = 0; d < rank; ++d) {
      const int64_t dim = d < pad ? 1 : input.dims[d - pad];
      if (dim != output.dims[d] && dim != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input ", k, " dimension ", d - pad, " (", dim,
            ") does not broadcast to the output's (", output.dims[d], ")"));
      }
      if (dim != 0 && layout.input_counts[k] > kMaxLaunchElements / dim) {
        return absl::InvalidArgumentError("tensor has too many elements");
      }
      in_dims[k][d] = dim;
      layout.input_counts[k] *= dim;
    }
  }
  if (layout.output_count == 0) return layout;

  // Merge: drop output dimensions of size 1, join neighbours every input treats alike.
  bool broadcast[kInputs][kMaxRank] = {};
  int merged = 0;
  for (int d = 0; d < rank; ++d) {
    if (output.dims[d] == 1) continue;
    bool same_as_previous = merged > 0;
    for (int k = 0; k < kInputs && same_as_previous; ++k) {
      same_as_previous = broadcast[k][merged - 1] == (in_dims[k][d] == 1);
    }
    if (same_as_previous) {
      layout.dims[merged - 1] *= output.dims[d];
      continue;
    }
    layout.dims[merged] = output.dims[d];
    for (int k = 0; k < kInputs; ++k) broadcast[k][merged] = in_dims[k][d] == 1;
    ++merged;
  }
  if (merged == 0) {  // a single element
    layout.rank = 1;
    layout.dims[0] = 1;
    for (int k = 0; k < kInputs; ++k) layout.strides[k][0] = 1;
    return layout;
  }
  layout.rank = merged;
  for (int k = 0; k < kInputs; ++k) {
    int64_t stride = 1;
    for (int d = merged - 1; d >= 0; --d) {
      layout.strides[k][d] = broadcast[k][d] ? 0 : stride;
      if (!broadcast[k][d]) stride *= layout.dims[d];
    }
  }
  return layout;
}

template absl::StatusOr<BroadcastLayout<2>> MakeBroadcastLayout<2>(
    const TensorDescriptorSettings&, const std::array<TensorDescriptorSettings, 2>&);
template absl::StatusOr<BroadcastLayout<3>> MakeBroadcastLayout<3>(
    const TensorDescriptorSettings&, const std::array<TensorDescriptorSettings, 3>&);

}  // namespace vgpu
