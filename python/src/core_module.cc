// vgpu._core: connects the Python package to the plugin instance TensorFlow loaded. It finds the
// plugin among the process's loaded libraries (it never loads a second copy) and calls the
// plugin's exported C API (plugin/c_api/vgpu_c_api.h).
#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "plugin/c_api/vgpu_c_api.h"

namespace py = pybind11;

namespace {

constexpr char kPluginFileName[] = "libvgpu_plugin.so";

int CollectPlugin(struct dl_phdr_info* info, size_t, void* data) {
  const char* name = info->dlpi_name;
  if (name == nullptr) return 0;
  size_t length = std::strlen(name);
  size_t suffix = sizeof(kPluginFileName) - 1;
  if (length >= suffix && std::strcmp(name + length - suffix, kPluginFileName) == 0) {
    static_cast<std::vector<std::string>*>(data)->push_back(name);
  }
  return 0;
}

// The plugin TensorFlow loaded, as a dlopen handle with its C API resolved.
class Plugin {
 public:
  explicit Plugin(const std::string& path) : path_(path) {
    handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (handle_ == nullptr) {
      throw std::runtime_error("the vgpu plugin " + path + " is not loaded in this process");
    }
    auto version = reinterpret_cast<int (*)()>(::dlsym(handle_, "VGPU_ApiVersion"));
    stats_ = reinterpret_cast<size_t (*)(char*, size_t)>(::dlsym(handle_, "VGPU_StatsJson"));
    info_ = reinterpret_cast<size_t (*)(char*, size_t)>(::dlsym(handle_, "VGPU_InfoJson"));
    reset_ = reinterpret_cast<void (*)()>(::dlsym(handle_, "VGPU_ResetStats"));
    mark_step_ = reinterpret_cast<void (*)()>(::dlsym(handle_, "VGPU_MarkStep"));
    if (version == nullptr || stats_ == nullptr || info_ == nullptr || reset_ == nullptr ||
        mark_step_ == nullptr) {
      throw std::runtime_error(path + " does not export the vgpu C API");
    }
    if (version() != VGPU_C_API_VERSION) {
      throw std::runtime_error(path + " speaks vgpu C API version " + std::to_string(version()) +
                               ", this package version " + std::to_string(VGPU_C_API_VERSION) +
                               "; reinstall tensorflow-vgpu");
    }
  }
  ~Plugin() {
    if (handle_ != nullptr) ::dlclose(handle_);
  }
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  std::string StatsJson() const { return Read(stats_); }
  std::string InfoJson() const { return Read(info_); }
  void ResetStats() const { reset_(); }
  void MarkStep() const { mark_step_(); }
  const std::string& path() const { return path_; }

 private:
  static std::string Read(size_t (*fn)(char*, size_t)) {
    std::string buffer(4096, '\0');
    for (;;) {
      size_t needed = fn(buffer.data(), buffer.size());
      if (needed < buffer.size()) {
        buffer.resize(needed);
        return buffer;
      }
      buffer.assign(needed + 1, '\0');
    }
  }

  std::string path_;
  void* handle_ = nullptr;
  size_t (*stats_)(char*, size_t) = nullptr;
  size_t (*info_)(char*, size_t) = nullptr;
  void (*reset_)() = nullptr;
  void (*mark_step_)() = nullptr;
};

py::object FindLoadedPlugin() {
  std::vector<std::string> found;
  ::dl_iterate_phdr(CollectPlugin, &found);
  if (found.empty()) return py::none();
  return py::str(found.front());
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "Bridge from the vgpu package to the loaded TensorFlow plugin";
  m.attr("PLUGIN_FILE_NAME") = kPluginFileName;
  m.attr("C_API_VERSION") = VGPU_C_API_VERSION;
  m.def("find_loaded_plugin", &FindLoadedPlugin,
        "Path of the loaded libvgpu_plugin.so, or None if TensorFlow has not loaded it.");
  py::class_<Plugin>(m, "Plugin")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("path", &Plugin::path)
      .def("stats_json", &Plugin::StatsJson, py::call_guard<py::gil_scoped_release>())
      .def("info_json", &Plugin::InfoJson, py::call_guard<py::gil_scoped_release>())
      .def("reset_stats", &Plugin::ResetStats, py::call_guard<py::gil_scoped_release>())
      .def("mark_step", &Plugin::MarkStep, py::call_guard<py::gil_scoped_release>());
}
