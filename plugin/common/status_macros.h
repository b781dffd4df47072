// Status propagation helpers used everywhere inside the plugin. Errors travel as absl::Status /
// absl::StatusOr and become TF_Status only at the C boundary (device/tf_status_bridge.h).
#ifndef VGPU_COMMON_STATUS_MACROS_H_
#define VGPU_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define VGPU_STATUS_CONCAT_INNER(a, b) a##b
#define VGPU_STATUS_CONCAT(a, b) VGPU_STATUS_CONCAT_INNER(a, b)

// Returns from the enclosing function with the status of `expr` if it is not OK.
#define VGPU_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::absl::Status vgpu_status_ = (expr);           \
    if (!vgpu_status_.ok()) return vgpu_status_;    \
  } while (false)

// Declares/assigns `lhs` from the value of the StatusOr `expr`, or returns its error.
#define VGPU_ASSIGN_OR_RETURN(lhs, expr)                                               \
  VGPU_ASSIGN_OR_RETURN_IMPL(VGPU_STATUS_CONCAT(vgpu_statusor_, __LINE__), lhs, expr)
#define VGPU_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

#endif  // VGPU_COMMON_STATUS_MACROS_H_
