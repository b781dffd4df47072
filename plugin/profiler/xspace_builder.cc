// The XSpace builder and its protobuf wire encoding (see xspace_builder.h). Field numbers are
// those of tsl/profiler/protobuf/xplane.proto.
#include "plugin/profiler/xspace_builder.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace vgpu::profiler {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2 };

void PutVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void PutTag(uint32_t field, WireType type, std::string* out) {
  PutVarint((uint64_t{field} << 3) | type, out);
}

// An int64 field: a varint of its two's complement (proto3 leaves out zeros unless `always`,
// which a oneof member needs to say which member is set).
void PutInt64(uint32_t field, int64_t value, std::string* out, bool always = false) {
  if (value == 0 && !always) return;
  PutTag(field, kVarint, out);
  PutVarint(static_cast<uint64_t>(value), out);
}

void PutBytes(uint32_t field, absl::string_view bytes, std::string* out, bool always = false) {
  if (bytes.empty() && !always) return;
  PutTag(field, kLengthDelimited, out);
  PutVarint(bytes.size(), out);
  out->append(bytes.data(), bytes.size());
}

// XStat: metadata_id = 1; oneof value { double = 2; uint64 = 3; int64 = 4; str = 5 }.
void PutStat(uint32_t field, const XStatValue& stat, std::string* out) {
  std::string body;
  PutInt64(1, stat.metadata_id, &body);
  if (const auto* v = std::get_if<double>(&stat.value)) {
    PutTag(2, kFixed64, &body);
    uint64_t bits;
    std::memcpy(&bits, v, sizeof(bits));
    for (int i = 0; i < 8; ++i) body.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  } else if (const auto* u = std::get_if<uint64_t>(&stat.value)) {
    PutTag(3, kVarint, &body);
    PutVarint(*u, &body);
  } else if (const auto* i = std::get_if<int64_t>(&stat.value)) {
    PutInt64(4, *i, &body, /*always=*/true);
  } else {
    PutBytes(5, std::get<std::string>(stat.value), &body, /*always=*/true);
  }
  PutBytes(field, body, out, /*always=*/true);
}

// A map<int64, M> entry whose value M is {id = 1, name = 2} (XEventMetadata, XStatMetadata).
void PutMetadataEntry(uint32_t field, int64_t id, const std::string& name, std::string* out) {
  std::string value;
  PutInt64(1, id, &value);
  PutBytes(2, name, &value);
  std::string entry;
  PutInt64(1, id, &entry);
  PutBytes(2, value, &entry, /*always=*/true);
  PutBytes(field, entry, out, /*always=*/true);
}

}  // namespace

XEventRecord& XLineBuilder::AddEvent(int64_t metadata_id, int64_t start_ns, int64_t duration_ps) {
  XEventRecord& event = events_.emplace_back();
  event.metadata_id = metadata_id;
  event.offset_ps = start_ns > timestamp_ns_ ? (start_ns - timestamp_ns_) * 1000 : 0;
  event.duration_ps = duration_ps > 0 ? duration_ps : 0;
  return event;
}

// XLine: id = 1; name = 2; timestamp_ns = 3; events = 4; duration_ps = 9; display_id = 10.
void XLineBuilder::Serialize(std::string* out) const {
  PutInt64(1, id_, out);
  PutBytes(2, name_, out);
  PutInt64(3, timestamp_ns_, out);
  int64_t end_ps = 0;
  for (const XEventRecord& event : events_) {
    // XEvent: metadata_id = 1; oneof data { offset_ps = 2 }; duration_ps = 3; stats = 4.
    std::string body;
    PutInt64(1, event.metadata_id, &body);
    PutInt64(2, event.offset_ps, &body, /*always=*/true);
    PutInt64(3, event.duration_ps, &body);
    for (const XStatValue& stat : event.stats) PutStat(4, stat, &body);
    PutBytes(4, body, out, /*always=*/true);
    end_ps = std::max(end_ps, event.offset_ps + event.duration_ps);
  }
  PutInt64(9, end_ps, out);
  PutInt64(10, id_, out);
}

int64_t XPlaneBuilder::Intern(absl::string_view name,
                              absl::flat_hash_map<std::string, int64_t>* ids,
                              std::vector<std::string>* names) {
  auto [it, inserted] = ids->try_emplace(name, static_cast<int64_t>(names->size()) + 1);
  if (inserted) names->emplace_back(name);
  return it->second;
}

int64_t XPlaneBuilder::EventMetadataId(absl::string_view name) {
  return Intern(name, &event_ids_, &event_names_);
}

int64_t XPlaneBuilder::StatMetadataId(absl::string_view name) {
  return Intern(name, &stat_ids_, &stat_names_);
}

XLineBuilder& XPlaneBuilder::AddLine(int64_t id, std::string name, int64_t timestamp_ns) {
  return lines_.emplace_back(id, std::move(name), timestamp_ns);
}

// XPlane: id = 1; name = 2; lines = 3; event_metadata = 4; stat_metadata = 5; stats = 6.
void XPlaneBuilder::Serialize(std::string* out) const {
  PutInt64(1, id_, out);
  PutBytes(2, name_, out);
  for (const XLineBuilder& line : lines_) {
    std::string body;
    line.Serialize(&body);
    PutBytes(3, body, out, /*always=*/true);
  }
  for (size_t i = 0; i < event_names_.size(); ++i) {
    PutMetadataEntry(4, static_cast<int64_t>(i) + 1, event_names_[i], out);
  }
  for (size_t i = 0; i < stat_names_.size(); ++i) {
    PutMetadataEntry(5, static_cast<int64_t>(i) + 1, stat_names_[i], out);
  }
  for (const XStatValue& stat : stats_) PutStat(6, stat, out);
}

XPlaneBuilder& XSpaceBuilder::AddPlane(int64_t id, std::string name) {
  return planes_.emplace_back(id, std::move(name));
}

// XSpace: planes = 1; errors = 2; warnings = 3; hostnames = 4.
std::string XSpaceBuilder::Serialize() const {
  std::string out;
  for (const XPlaneBuilder& plane : planes_) {
    std::string body;
    plane.Serialize(&body);
    PutBytes(1, body, &out, /*always=*/true);
  }
  for (const std::string& warning : warnings_) PutBytes(3, warning, &out, /*always=*/true);
  return out;
}

}  // namespace vgpu::profiler
