// Mapping from TensorFlow's element types to the protocol's DType. TF_DataType (C API) and
// tensorflow::DataType (C++ API) share their numeric values, so one function serves both.
#ifndef VGPU_KERNELS_DTYPE_MAP_H_
#define VGPU_KERNELS_DTYPE_MAP_H_

#include <optional>

#include "plugin/protocol/kernel_ids.h"
#include "tensorflow/c/tf_datatype.h"

namespace vgpu {

inline std::optional<DType> ToDType(TF_DataType dtype) {
  switch (dtype) {
    case TF_FLOAT: return DType::kFloat32;
    case TF_DOUBLE: return DType::kFloat64;
    case TF_HALF: return DType::kFloat16;
    case TF_BFLOAT16: return DType::kBFloat16;
    case TF_INT32: return DType::kInt32;
    case TF_INT64: return DType::kInt64;
    case TF_UINT8: return DType::kUInt8;
    case TF_BOOL: return DType::kBool;
    default: return std::nullopt;
  }
}

}  // namespace vgpu

#endif  // VGPU_KERNELS_DTYPE_MAP_H_
