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
  // Takes a cleared TF_Status from a small per-thread pool (an op calls TensorFlow's C API
  // several times per launch; a fresh heap object each time showed in profiles) and gives it
  // back cleared. Not shared between threads.
  ScopedTfStatus() : status_(Acquire()) {}
  ~ScopedTfStatus() { Release(status_); }
  ScopedTfStatus(const ScopedTfStatus&) = delete;
  ScopedTfStatus& operator=(const ScopedTfStatus&) = delete;
  TF_Status* get() { return status_; }
  absl::Status ToStatus() const { return FromTfStatus(status_); }

 private:
  struct Pool {
    static constexpr size_t kMaxKept = 8;
    TF_Status* kept[kMaxKept];
    size_t size = 0;
    ~Pool() {
      while (size > 0) TF_DeleteStatus(kept[--size]);
    }
  };
  static Pool& ThisThreadsPool() {
    thread_local Pool pool;
    return pool;
  }
  static TF_Status* Acquire() {
    Pool& pool = ThisThreadsPool();
    return pool.size > 0 ? pool.kept[--pool.size] : TF_NewStatus();
  }
  static void Release(TF_Status* status) {
    Pool& pool = ThisThreadsPool();
    if (pool.size == Pool::kMaxKept) {
      TF_DeleteStatus(status);
      return;
    }
    TF_SetStatus(status, TF_OK, "");
    pool.kept[pool.size++] = status;
  }

  TF_Status* status_;
};

}  // namespace vgpu

#endif  // VGPU_DEVICE_TF_STATUS_BRIDGE_H_
