// The one place where absl::Status and TensorFlow's TF_Status (the C boundary) convert into
// each other, and the RAII owner of a TF_Status.
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

// The absl::Status that `status` holds (OK for TF_OK).
inline absl::Status FromTfStatus(const TF_Status* status) {
  const TF_Code code = TF_GetCode(status);
  if (code == TF_OK) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(code), TF_Message(status));
}

// Owns a TF_Status for the duration of a call into TensorFlow's C API.
class ScopedTfStatus {
 public:
  ScopedTfStatus() : status_(TF_NewStatus()) {}
  ~ScopedTfStatus() { TF_DeleteStatus(status_); }
  ScopedTfStatus(const ScopedTfStatus&) = delete;
  ScopedTfStatus& operator=(const ScopedTfStatus&) = delete;
  TF_Status* get() { return status_; }
  absl::Status ToStatus() const { return FromTfStatus(status_); }

 private:
  TF_Status* status_;
};

}  // namespace vgpu

#endif  // VGPU_DEVICE_TF_STATUS_BRIDGE_H_
