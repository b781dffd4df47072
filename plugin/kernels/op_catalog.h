// The catalog of what the plugin registers with TensorFlow: every kernel registration (op,
// type constraints, host-memory arguments) is recorded here as it happens, and each op family
// describes its ops (data formats, notes) with DocumentOp. `vgpu ops` prints it and
// docs/ops.md is generated from it (a test keeps the file current).
#ifndef VGPU_KERNELS_OP_CATALOG_H_
#define VGPU_KERNELS_OP_CATALOG_H_

#include <string>

#include "absl/types/span.h"
#include "tensorflow/c/tf_datatype.h"

namespace vgpu {

// One type constraint of a kernel registration: attribute `attribute` is `dtype`.
struct CatalogConstraint {
  std::string attribute;
  TF_DataType dtype;
};

// Records one kernel registration of `op_name`. Thread-safe; called by the registration helpers
// (op_kernel.h, and the C++ API registrations of variable/training ops).
void CatalogKernel(const char* op_name, absl::Span<const CatalogConstraint> constraints,
                   absl::Span<const char* const> host_memory);

// Describes an op: the data formats it accepts ("" when layout does not apply) and notes for a
// user (semantics beyond TensorFlow's, limits). Call once per op from its family's Register*.
void DocumentOp(const char* op_name, const char* data_formats, const char* notes);

// The catalog as a JSON array, sorted by op name:
//   [{"op": "Conv2D", "dtypes": ["bfloat16", "float16", ...], "constraints": [{"T": "float32"}...],
//     "host_memory": [...], "data_formats": "NHWC, NCHW", "notes": "..."}, ...]
std::string OpCatalogJson();

}  // namespace vgpu

#endif  // VGPU_KERNELS_OP_CATALOG_H_
