// Activity records -> device planes (see device_planes.h).
#include "plugin/profiler/device_planes.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"

namespace vgpu::profiler {
namespace {

using activity::Kind;
using activity::Record;

// The event name of an executor record: the kernel's name, or what a copy or memset is.
std::string EventName(const Record& record) {
  switch (record.kind) {
    case Kind::kCopyToDevice:
      return "MemcpyH2D";
    case Kind::kCopyToHost:
      return "MemcpyD2H";
    case Kind::kCopyOnDevice:
      return "MemcpyD2D";
    case Kind::kMemset:
      return "Memset";
    case Kind::kOp:
    case Kind::kKernel:
    case Kind::kCall:
    case Kind::kEventWait:
      break;
  }
  std::string name = activity::NameOf(record.name);
  return name.empty() ? "kernel" : name;
}

// A line's key: executor streams by id, the host-side op kernels and calls on lines of their own.
int64_t LineId(const Record& record) {
  switch (record.kind) {
    case Kind::kOp:
      return kOpKernelsLineId;
    case Kind::kCall:
      return kRoundTripsLineId;
    case Kind::kEventWait:
      return kEventWaitsLineId;
    default:
      return static_cast<int64_t>(record.stream);
  }
}

std::string LineName(int64_t line_id) {
  if (line_id == kOpKernelsLineId) return kOpKernelsLineName;
  if (line_id == kRoundTripsLineId) return kRoundTripsLineName;
  if (line_id == kEventWaitsLineId) return kEventWaitsLineName;
  return absl::StrCat("Stream #", line_id);
}

}  // namespace

void AddDevicePlanes(absl::Span<const Record> records, uint64_t dropped, XSpaceBuilder* space) {
  // device -> line id -> the line's records (ordered maps: planes and lines in id order).
  std::map<uint32_t, std::map<int64_t, std::vector<const Record*>>> devices;
  for (const Record& record : records) devices[record.device][LineId(record)].push_back(&record);

  for (auto& [device, lines] : devices) {
    XPlaneBuilder& plane = space->AddPlane(device + 1, absl::StrCat("/device:GPU:", device));
    const int64_t tf_op = plane.StatMetadataId("tf_op");
    const int64_t bytes = plane.StatMetadataId("bytes");
    const int64_t params_bytes = plane.StatMetadataId("params_bytes");
    const int64_t descriptors_local = plane.StatMetadataId("descriptor_calls_local");
    const int64_t descriptors_forwarded = plane.StatMetadataId("descriptor_calls_forwarded");
    const int64_t round_trips = plane.StatMetadataId("round_trips");
    const int64_t queue_wait = plane.StatMetadataId("queue_wait_ns");
    const int64_t waiting_stream = plane.StatMetadataId("stream");
    for (auto& [line_id, line_records] : lines) {
      std::stable_sort(line_records.begin(), line_records.end(),
                       [](const Record* a, const Record* b) { return a->start_ns < b->start_ns; });
      XLineBuilder& line =
          plane.AddLine(line_id, LineName(line_id), line_records.front()->start_ns);
      for (const Record* record : line_records) {
        const int64_t duration_ns = std::max<int64_t>(0, record->end_ns - record->start_ns);
        XEventRecord& event = line.AddEvent(plane.EventMetadataId(EventName(*record)),
                                            record->start_ns, duration_ns * 1000);
        // TensorFlow's tools read "tf_op" as "<op name>:<op type>".
        const std::string op = activity::NameOf(record->op);
        if (!op.empty()) {
          const std::string op_name = activity::NameOf(record->op_name);
          event.stats.push_back({tf_op, absl::StrCat(op_name.empty() ? op : op_name, ":", op)});
        }
        if (record->bytes != 0) {
          event.stats.push_back(
              {record->kind == Kind::kKernel ? params_bytes : bytes, record->bytes});
        }
        if (record->queued_ns != 0) {
          event.stats.push_back(
              {queue_wait, static_cast<uint64_t>(
                               std::max<int64_t>(0, record->start_ns - record->queued_ns))});
        }
        if (record->kind == Kind::kEventWait) {
          event.stats.push_back({waiting_stream, record->stream});
        }
        if (record->kind == Kind::kOp) {
          event.stats.push_back({descriptors_local, uint64_t{record->descriptor_calls_local}});
          event.stats.push_back(
              {descriptors_forwarded, uint64_t{record->descriptor_calls_forwarded}});
          event.stats.push_back({round_trips, uint64_t{record->round_trips}});
        }
      }
    }
  }
  if (dropped != 0) {
    space->AddWarning(absl::StrCat("vgpu: ", dropped,
                                   " device events were not recorded (the activity log was full)"));
  }
}

}  // namespace vgpu::profiler
