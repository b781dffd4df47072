// Turns the activity log's records (plugin/common/activity.h) into TensorFlow profiler planes:
// one XPlane per virtual device, "/device:GPU:<n>" as TensorFlow names a GPU's plane, with a
// line per executor stream ("Stream #<id>": kernels, copies and memsets, each event named by
// what ran and carrying the TensorFlow op that issued it as its "tf_op" stat), a line of the op
// kernels TensorFlow ran on the device, measured on the host (their client-side cost, with the
// descriptor calls answered locally and forwarded and the round trips each made), and a line of
// the calls the client waited for (round trips). An executor event that knows when its command
// was queued carries "queue_wait_ns", the time from then to its start; an executor stream that
// was blocked on another stream's event is an event on the "Event waits" line.
#ifndef VGPU_PROFILER_DEVICE_PLANES_H_
#define VGPU_PROFILER_DEVICE_PLANES_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "plugin/common/activity.h"
#include "plugin/profiler/xspace_builder.h"

namespace vgpu::profiler {

// The name of the host-side line of op kernels on each device plane.
inline constexpr char kOpKernelsLineName[] = "Op kernels (host)";
// Its line id: above any stream id a client uses.
inline constexpr int64_t kOpKernelsLineId = int64_t{1} << 40;
// The host-side line of the calls the client waited for (round trips), named by command kind.
inline constexpr char kRoundTripsLineName[] = "Round trips (host)";
inline constexpr int64_t kRoundTripsLineId = kOpKernelsLineId + 1;
// The line of the times an executor stream was blocked on another stream's event (each event
// named "wait for stream <id>", with the waiting stream as its "stream" stat). Not a stream
// line: nothing ran on the device meanwhile.
inline constexpr char kEventWaitsLineName[] = "Event waits";
inline constexpr int64_t kEventWaitsLineId = kOpKernelsLineId + 2;

// Adds to `space` a plane per device that has any of `records`; `dropped` records that did not
// fit in the log are reported as a warning of the space. Thread-compatible.
void AddDevicePlanes(absl::Span<const activity::Record> records, uint64_t dropped,
                     XSpaceBuilder* space);

}  // namespace vgpu::profiler

#endif  // VGPU_PROFILER_DEVICE_PLANES_H_
