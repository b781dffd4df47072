// MatrixDiagPart, MatrixDiagPartV2 and MatrixDiagPartV3 (tf.linalg.diag_part; Keras' IoU metrics
// take the diagonal of their confusion matrix every step) as compositions of the data movement
// family's byte-moving kernels (protocol/kernels/data_movement.h), so that neither executor
// needs a kernel of its own:
//   one diagonal (diag_part's default, and the only case of MatrixDiagPart) = one kStridedSlice
//     of the matrices viewed as rows of M * N elements, with a stride of N + 1;
//   a band of diagonals = a kPad of the matrices with padding_value as far as the aligned
//     diagonals reach beyond them (skipped when they do not) into scratch memory, then per
//     diagonal a kStridedSlice into a scratch row and a kStridedSliceAssign of it into the output.
// k and padding_value are host-memory inputs, as on TensorFlow's GPU. Inputs are checked as
// TensorFlow's kernel checks them (matrix_diag_op.cc: same conditions, same words).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/kernels/data_movement_launch.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_kernel.h"
#include "plugin/protocol/kernels/data_movement.h"

namespace vgpu {
namespace {

using Dims = std::vector<int64_t>;

// Which diagonals of a band are aligned to the left of the output's rows (the others to the
// right): TensorFlow's align attribute. MatrixDiagPartV2's packing is LEFT_LEFT.
struct Alignment {
  bool superdiagonals_left = true;
  bool subdiagonals_left = true;
};

absl::StatusOr<Alignment> ReadAlignment(OpConstruction& construction) {
  VGPU_ASSIGN_OR_RETURN(std::string align, construction.String("align"));
  // TensorFlow's op definition allows LEFT_RIGHT, RIGHT_LEFT, LEFT_LEFT and RIGHT_RIGHT: the
  // first word for superdiagonals, the second for subdiagonals.
  return Alignment{align == "LEFT_LEFT" || align == "LEFT_RIGHT",
                   align == "LEFT_LEFT" || align == "RIGHT_LEFT"};
}

// What the op's inputs say: the band [lower, upper] and the padding value's bytes.
struct Band {
  int64_t lower = 0, upper = 0;
  uint64_t padding = 0;  // the low element-size bytes are the value's
};

absl::StatusOr<Band> ReadBand(const OpContext& context, TF_DataType dtype) {
  Band band;
  VGPU_ASSIGN_OR_RETURN(TensorPtr k, context.Input(1));
  const Dims k_dims = ShapeOf(k.get());
  if (k_dims.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "diag_index must be a scalar or vector, received shape: ", ShapeString(k_dims)));
  }
  VGPU_ASSIGN_OR_RETURN(Dims k_values, context.HostIntegers(1));
  if (k_values.empty()) {
    return absl::InvalidArgumentError("Expected diag_index to have at least 1 element");
  }
  if (k_values.size() > 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "diag_index must have only one or two elements, received ", k_values.size(),
        " elements."));
  }
  band.lower = k_values[0];
  band.upper = k_values.back();
  VGPU_ASSIGN_OR_RETURN(TensorPtr padding, context.Input(2));
  if (!ShapeOf(padding.get()).empty()) {
    return absl::InvalidArgumentError("Padding must be scalar.");
  }
  std::memcpy(&band.padding, TF_TensorData(padding.get()), TF_DataTypeSize(dtype));
  return band;
}

// The length of diagonal d of an M x N matrix.
int64_t DiagonalLength(int64_t d, int64_t rows, int64_t cols) {
  return std::min(rows + std::min<int64_t>(d, 0), cols - std::max<int64_t>(d, 0));
}

absl::Status DiagonalPart(OpContext& context, const Band& band, const Alignment& alignment) {
  VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
  const Dims x_dims = ShapeOf(x.get());
  if (x_dims.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input must be at least 2-dim, received shape: ", ShapeString(x_dims)));
  }
  const size_t rank = x_dims.size();
  const int64_t rows = x_dims[rank - 2], cols = x_dims[rank - 1];
  // (A matrix with no rows or no columns has diagonal 0 only.)
  if (!((-rows < band.lower && band.lower < cols) || band.lower == 0)) {
    return absl::InvalidArgumentError(absl::StrCat("lower_diag_index is out of bound: ",
                                                   band.lower, ". It must be between ", -rows,
                                                   " and ", cols));
  }
  if (!((-rows < band.upper && band.upper < cols) || band.upper == 0)) {
    return absl::InvalidArgumentError(absl::StrCat("upper_diag_index is out of bound: ",
                                                   band.upper, " It must be between ", -rows,
                                                   " and ", cols));
  }
  if (band.lower > band.upper) {
    return absl::InvalidArgumentError(
        absl::StrCat("lower_diag_index must not be larger than upper_diag_index: ", band.lower,
                     " > ", band.upper));
  }
  const TF_DataType dtype = TF_TensorType(x.get());
  const int64_t diagonals = band.upper - band.lower + 1;
  const int64_t longest = std::min(rows + std::min<int64_t>(band.upper, 0),
                                   cols - std::max<int64_t>(band.lower, 0));
  Dims y_dims(x_dims.begin(), x_dims.end() - 2);
  int64_t matrices = 1;
  for (int64_t extent : y_dims) matrices *= extent;
  if (diagonals > 1) y_dims.push_back(diagonals);
  y_dims.push_back(longest);
  VGPU_ASSIGN_OR_RETURN(TensorPtr y, context.AllocateOutput(0, dtype, y_dims));
  if (NumElements(y_dims) == 0) return absl::OkStatus();
  if (diagonals == 1) {  // no padding: the diagonal is `longest` long
    const int64_t d = band.lower;
    return LaunchSlice(context, data_movement::kStridedSlice, dtype, {matrices, rows * cols},
                       {0, std::max<int64_t>(-d, 0) * cols + std::max<int64_t>(d, 0)},
                       {1, cols + 1}, {matrices, longest}, BufferOf(x.get()),
                       BufferOf(y.get()));
  }
  // Row m of the output holds diagonal d = upper - m: element n is input (n + top_m, n +
  // left_m), or the padding where that lies outside the matrix.
  std::vector<int64_t> top(diagonals), left(diagonals);
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  for (int64_t m = 0; m < diagonals; ++m) {
    const int64_t d = band.upper - m;
    const bool left_aligned = (d >= 0 && alignment.superdiagonals_left) ||
                              (d <= 0 && alignment.subdiagonals_left);
    const int64_t offset = left_aligned ? 0 : longest - DiagonalLength(d, rows, cols);
    top[m] = std::max<int64_t>(-d, 0) - offset;
    left[m] = std::max<int64_t>(d, 0) - offset;
    pad_top = std::max(pad_top, -top[m]);
    pad_left = std::max(pad_left, -left[m]);
    pad_bottom = std::max(pad_bottom, top[m] + longest - rows);
    pad_right = std::max(pad_right, left[m] + longest - cols);
  }
  const int64_t padded_rows = rows + pad_top + pad_bottom;
  const int64_t padded_cols = cols + pad_left + pad_right;
  BufferArg matrix = BufferOf(x.get());
  TensorPtr padded;
  if (padded_rows != rows || padded_cols != cols) {
    VGPU_ASSIGN_OR_RETURN(padded, context.AllocateTemp(dtype, {matrices, padded_rows,
                                                               padded_cols}));
    matrix = BufferOf(padded.get());
    VGPU_RETURN_IF_ERROR(LaunchPad(context, dtype, {matrices, rows, cols},
                                   {0, pad_top, pad_left}, {0, pad_bottom, pad_right},
                                   band.padding, BufferOf(x.get()), matrix));
  }
  VGPU_ASSIGN_OR_RETURN(TensorPtr row, context.AllocateTemp(dtype, {matrices, longest}));
  for (int64_t m = 0; m < diagonals; ++m) {
    VGPU_RETURN_IF_ERROR(LaunchSlice(
        context, data_movement::kStridedSlice, dtype, {matrices, padded_rows * padded_cols},
        {0, (top[m] + pad_top) * padded_cols + left[m] + pad_left}, {1, padded_cols + 1},
        {matrices, longest}, matrix, BufferOf(row.get())));
    VGPU_RETURN_IF_ERROR(LaunchSlice(context, data_movement::kStridedSliceAssign, dtype,
                                     {matrices, diagonals, longest}, {0, m, 0}, {1, 1, 1},
                                     {matrices, 1, longest}, BufferOf(row.get()),
                                     BufferOf(y.get())));
  }
  return absl::OkStatus();
}

// MatrixDiagPart: the main diagonal.
class MatrixDiagPartOp : public NoAttributes<MatrixDiagPartOp> {
 public:
  absl::Status Compute(OpContext& context) { return DiagonalPart(context, Band{}, Alignment{}); }
};

// MatrixDiagPartV2 (bands packed LEFT_LEFT) and MatrixDiagPartV3 (align attribute).
class MatrixDiagPartV2Op : public NoAttributes<MatrixDiagPartV2Op> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(Band band, ReadBand(context, TF_TensorType(x.get())));
    return DiagonalPart(context, band, Alignment{});
  }
};

class MatrixDiagPartV3Op
    : public WithAttributes<MatrixDiagPartV3Op, Alignment, ReadAlignment> {
 public:
  absl::Status Compute(OpContext& context) {
    VGPU_ASSIGN_OR_RETURN(TensorPtr x, context.Input(0));
    VGPU_ASSIGN_OR_RETURN(Band band, ReadBand(context, TF_TensorType(x.get())));
    return DiagonalPart(context, band, this->attributes_);
  }
};

}  // namespace

// Called by RegisterDataMovementOps (the family's registration).
void RegisterMatrixDiagOps(const char* device_type) {
  DocumentOp("MatrixDiagPart", "", "One strided slice of the matrices (stride N + 1).");
  DocumentOp("MatrixDiagPartV2", "",
             "k and padding_value in host memory. One diagonal: one strided slice; a band: a "
             "pad (where the aligned diagonals reach beyond the matrix), then two launches a "
             "diagonal.");
  DocumentOp("MatrixDiagPartV3", "", "As MatrixDiagPartV2, with the align attribute.");
  for (TF_DataType dtype : kDataMovementTypes) {
    RegisterKernel<MatrixDiagPartOp>("MatrixDiagPart", device_type, {{"T", dtype}}, {});
    RegisterKernel<MatrixDiagPartV2Op>("MatrixDiagPartV2", device_type, {{"T", dtype}},
                                       {"k", "padding_value"});
    RegisterKernel<MatrixDiagPartV3Op>("MatrixDiagPartV3", device_type, {{"T", dtype}},
                                       {"k", "padding_value"});
  }
}

}  // namespace vgpu
