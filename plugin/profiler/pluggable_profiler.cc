// TF_InitProfiler: the plugin's device profiler, registered through TensorFlow's pluggable
// profiler C API. While a TensorFlow profiling session runs (tf.profiler.experimental.start /
// stop, the Keras TensorBoard callback's profile_batch, a profiler server) the activity log
// (plugin/common/activity.h) records what each virtual device ran; when TensorFlow collects the
// session's data, the records become one plane per device (device_planes.h) beside TensorFlow's
// own host plane. Outside a session nothing is recorded.
#include <cstring>
#include <mutex>
#include <string>

#include "plugin/common/activity.h"
#include "plugin/profiler/device_planes.h"
#include "plugin/profiler/xspace_builder.h"
#include "tensorflow/c/experimental/pluggable_profiler/pluggable_profiler.h"

namespace vgpu::profiler {
namespace {

// The serialised planes between TensorFlow's two collect calls (size, then data).
std::mutex collected_mu;
std::string collected;

void StartProfile(const TP_Profiler*, TF_Status* status) {
  activity::Start();
  TF_SetStatus(status, TF_OK, "");
}

void StopProfile(const TP_Profiler*, TF_Status* status) {
  activity::Stop();
  TF_SetStatus(status, TF_OK, "");
}

// With `buffer` null: takes the log's records, builds the planes and reports their size; with a
// buffer of that size: copies them out (once).
void CollectProfile(const TP_Profiler*, uint8_t* buffer, size_t* size_in_bytes,
                    TF_Status* status) {
  std::lock_guard<std::mutex> lock(collected_mu);
  if (buffer == nullptr) {
    uint64_t dropped = 0;
    // The in-process records and those of every server the process uses (activity::Source).
    const std::vector<activity::Record> records = activity::Collect(&dropped);
    XSpaceBuilder space;
    AddDevicePlanes(records, dropped, &space);
    collected = space.Serialize();
    *size_in_bytes = collected.size();
    TF_SetStatus(status, TF_OK, "");
    return;
  }
  if (*size_in_bytes != collected.size()) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "vgpu profiler: the buffer is not the size the first collect call returned");
    return;
  }
  std::memcpy(buffer, collected.data(), collected.size());
  collected.clear();
  TF_SetStatus(status, TF_OK, "");
}

// TensorFlow calls these on copies of the structures too: they own nothing, so do nothing.
void DestroyProfiler(TP_Profiler*) {}
void DestroyProfilerFns(TP_ProfilerFns*) {}

}  // namespace
}  // namespace vgpu::profiler

extern "C" {

void TF_InitProfiler(TF_ProfilerRegistrationParams* params, TF_Status* status) {
  params->struct_size = TF_PROFILER_REGISTRATION_PARAMS_STRUCT_SIZE;
  params->profiler->struct_size = TP_PROFILER_STRUCT_SIZE;
  params->profiler->device_type = "GPU";  // the device type the plugin registers
  params->profiler_fns->struct_size = TP_PROFILER_FNS_STRUCT_SIZE;
  params->profiler_fns->start = vgpu::profiler::StartProfile;
  params->profiler_fns->stop = vgpu::profiler::StopProfile;
  params->profiler_fns->collect_data_xspace = vgpu::profiler::CollectProfile;
  params->destroy_profiler = vgpu::profiler::DestroyProfiler;
  params->destroy_profiler_fns = vgpu::profiler::DestroyProfilerFns;
  TF_SetStatus(status, TF_OK, "");
}

}  // extern "C"
