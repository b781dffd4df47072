// Finding the running TensorFlow's version (see tf_version.h). TF_Version() lives in
// libtensorflow_cc.so.2, which the plugin does not link; it is looked up, as the other
// functions of that library the plugin calls, among the libraries already loaded in the
// process.
#include "plugin/device/tf_version.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace vgpu {
namespace {

using VersionFn = const char* (*)();

int CollectLibrary(struct dl_phdr_info* info, size_t, void* data) {
  if (info->dlpi_name != nullptr && std::strstr(info->dlpi_name, "libtensorflow_cc.so") != nullptr) {
    static_cast<std::vector<std::string>*>(data)->push_back(info->dlpi_name);
  }
  return 0;
}

}  // namespace

void* LoadedTensorFlowFunction(const char* name) {
  void* function = ::dlsym(RTLD_DEFAULT, name);
  if (function != nullptr) return function;
  std::vector<std::string> libraries;
  ::dl_iterate_phdr(CollectLibrary, &libraries);
  for (const std::string& path : libraries) {
    void* handle = ::dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    function = ::dlsym(handle, name);
    ::dlclose(handle);  // NOLOAD: the library stays loaded, as it was
    if (function != nullptr) return function;
  }
  return nullptr;
}

std::optional<std::string> RunningTensorFlowVersion() {
  VersionFn fn = reinterpret_cast<VersionFn>(LoadedTensorFlowFunction("TF_Version"));
  if (fn == nullptr) return std::nullopt;
  const char* version = fn();
  if (version == nullptr) return std::nullopt;
  return std::string(version);
}

absl::Status CheckTensorFlowVersion(std::string_view built, std::string_view running) {
  std::vector<std::string_view> b = absl::StrSplit(built, '.');
  std::vector<std::string_view> r = absl::StrSplit(running, '.');
  if (b.size() < 2 || r.size() < 2 || b[0] != r[0] || b[1] != r[1]) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this plugin was built for TensorFlow ", built, " but TensorFlow ", running,
        " is running; install tensorflow-cpu==", b.size() >= 2 ? absl::StrCat(b[0], ".", b[1], ".*") : std::string(built)));
  }
  return absl::OkStatus();
}

}  // namespace vgpu
