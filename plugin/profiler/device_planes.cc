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
      break;
  }
  std::string name = activity::NameOf(record.name);
  return name.empty() ? "kernel" : name;
}

// A line's key: executor streams by id, the host-side op kernels on their own line.
int64_t LineId(const Record& record) {
  return record.kind == Kind::kOp ? kOpKernelsLineId : static_cast<int64_t>(record.stream);
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
    for (auto& [line_id, line_records] : lines) {
      std::stable_sort(line_records.begin(), line_records.end(),
                       [](const Record* a, const Record* b) { return a->start_ns < b->start_ns; });
      const std::string name = line_id == kOpKernelsLineId
                                   ? std::string(kOpKernelsLineName)
                                   : absl::StrCat("Stream #", line_id);
      XLineBuilder& line = plane.AddLine(line_id, name, line_records.front()->start_ns);
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
        if (record->bytes != 0) event.stats.push_back({bytes, record->bytes});
      }
    }
  }
  if (dropped != 0) {
    space->AddWarning(absl::StrCat("vgpu: ", dropped,
                                   " device events were not recorded (the activity log was full)"));
  }
}

}  // namespace vgpu::profiler
