// The one place where absl::Status becomes TensorFlow's TF_Status (C boundary).
#ifndef VGPU_DEVICE_TF_STATUS_BRIDGE_H_
#define VGPU_DEVICE_TF_STATUS_BRIDGE_H_

#include <string>

#include "absl/status/status.h"
#include "tensorflow/c/tf_status.h"

namespace vgpu {

// Writes `status` (code and message) into `out`. The absl and TF codes share their numbers.
inline void ToTfStatus(const absl::Status& status, TF_Status* out) {
  if (out == nullptr) return;
  if (status.ok()) {
    TF_SetStatus(out, TF_OK, "");
    return;
  }
  std::string message(status.message());
  TF_SetStatus(out, static_cast<TF_Code>(status.code()), message.c_str());
}

}  // namespace vgpu

#endif  // VGPU_DEVICE_TF_STATUS_BRIDGE_H_
