// The non-template parts of the kernel table (see kernel_table.h).
#include "plugin/backend/launch/kernel_table.h"

#include <exception>
#include <new>

#include "absl/strings/str_cat.h"
#include "plugin/common/log.h"

namespace vgpu {

void ReportDuplicateKernel(uint32_t id, const char* kept, const char* dropped) {
  Log(LogLevel::kError, absl::StrCat("kernel id ", id, " registered twice (", kept, ", ", dropped,
                                     "); keeping ", kept));
}

absl::Status RunGuarded(const char* kernel_name, absl::FunctionRef<absl::Status()> body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    Log(LogLevel::kWarning, absl::StrCat("kernel ", kernel_name, " ran out of host memory"));
    return absl::ResourceExhaustedError(
        absl::StrCat(kernel_name, ": the backing executor ran out of host memory"));
  } catch (const std::exception& e) {
    Log(LogLevel::kWarning, absl::StrCat("kernel ", kernel_name, " threw: ", e.what()));
    return absl::InternalError(absl::StrCat(kernel_name, " failed: ", e.what()));
  } catch (...) {
    Log(LogLevel::kWarning,
        absl::StrCat("kernel ", kernel_name, " threw an unknown exception"));
    return absl::InternalError(absl::StrCat(kernel_name, " failed with an unknown exception"));
  }
}

}  // namespace vgpu
