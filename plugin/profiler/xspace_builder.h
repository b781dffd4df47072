// Builds a profile in TensorFlow's profiler format, XSpace (tsl/profiler/protobuf/xplane.proto),
// and serialises it in the protobuf wire format without the protobuf library: the pluggable
// profiler hands TensorFlow a serialised XSpace, and the plugin must not depend on the protobuf
// runtime TensorFlow was built with.
//
// An XSpace holds planes (one per device); a plane holds lines (one per stream or thread),
// event and stat metadata (names, interned per plane) and stats; a line holds events (an offset
// from the line's timestamp and a duration, in picoseconds) with stats.
//
// Not thread-safe: one thread builds a space, then serialises it.
#ifndef VGPU_PROFILER_XSPACE_BUILDER_H_
#define VGPU_PROFILER_XSPACE_BUILDER_H_

#include <cstdint>
#include <deque>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace vgpu::profiler {

// One statistic of an event or a plane: a name (interned as stat metadata) and a value.
struct XStatValue {
  int64_t metadata_id = 0;
  std::variant<int64_t, uint64_t, double, std::string> value;
};

struct XEventRecord {
  int64_t metadata_id = 0;
  int64_t offset_ps = 0;  // from the line's timestamp_ns
  int64_t duration_ps = 0;
  std::vector<XStatValue> stats;
};

class XLineBuilder {
 public:
  XLineBuilder(int64_t id, std::string name, int64_t timestamp_ns)
      : id_(id), name_(std::move(name)), timestamp_ns_(timestamp_ns) {}

  // An event starting `start_ns` (absolute, the clock of the line's timestamp) and lasting
  // `duration_ps`; a start before the line's timestamp is clamped to it. The returned event
  // stays valid until the next AddEvent (to add stats).
  XEventRecord& AddEvent(int64_t metadata_id, int64_t start_ns, int64_t duration_ps);

  int64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  int64_t timestamp_ns() const { return timestamp_ns_; }
  size_t event_count() const { return events_.size(); }
  const std::vector<XEventRecord>& events() const { return events_; }

  // Appends this line's wire encoding (an XLine message body) to `out`.
  void Serialize(std::string* out) const;

 private:
  int64_t id_;
  std::string name_;
  int64_t timestamp_ns_;
  std::vector<XEventRecord> events_;
};

class XPlaneBuilder {
 public:
  XPlaneBuilder(int64_t id, std::string name) : id_(id), name_(std::move(name)) {}

  // The id of the event metadata named `name`, created on first use (ids start at 1).
  int64_t EventMetadataId(absl::string_view name);
  // The id of the stat metadata named `name`, created on first use (ids start at 1).
  int64_t StatMetadataId(absl::string_view name);

  // A new line; the reference stays valid for the plane's lifetime.
  XLineBuilder& AddLine(int64_t id, std::string name, int64_t timestamp_ns);
  // A statistic of the plane itself (e.g. the device's totals).
  void AddStat(XStatValue stat) { stats_.push_back(std::move(stat)); }

  int64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  const std::deque<XLineBuilder>& lines() const { return lines_; }
  // The name of event / stat metadata `id` ("" if there is none).
  std::string EventName(int64_t id) const { return NameAt(event_names_, id); }
  std::string StatName(int64_t id) const { return NameAt(stat_names_, id); }

  // Appends this plane's wire encoding (an XPlane message body) to `out`.
  void Serialize(std::string* out) const;

 private:
  static std::string NameAt(const std::vector<std::string>& names, int64_t id) {
    return id >= 1 && id <= static_cast<int64_t>(names.size()) ? names[id - 1] : std::string();
  }
  static int64_t Intern(absl::string_view name, absl::flat_hash_map<std::string, int64_t>* ids,
                        std::vector<std::string>* names);

  int64_t id_;
  std::string name_;
  std::deque<XLineBuilder> lines_;  // deque: references stay valid as lines are added
  absl::flat_hash_map<std::string, int64_t> event_ids_, stat_ids_;
  std::vector<std::string> event_names_, stat_names_;  // [id - 1]
  std::vector<XStatValue> stats_;
};

class XSpaceBuilder {
 public:
  // A new plane; the reference stays valid for the space's lifetime.
  XPlaneBuilder& AddPlane(int64_t id, std::string name);
  void AddWarning(std::string warning) { warnings_.push_back(std::move(warning)); }

  const std::deque<XPlaneBuilder>& planes() const { return planes_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

  // The serialised XSpace.
  std::string Serialize() const;

 private:
  std::deque<XPlaneBuilder> planes_;
  std::vector<std::string> warnings_;
};

}  // namespace vgpu::profiler

#endif  // VGPU_PROFILER_XSPACE_BUILDER_H_
