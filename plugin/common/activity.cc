// The process-wide activity log (see activity.h).
#include "plugin/common/activity.h"

#include <algorithm>
#include <ctime>
#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace vgpu::activity {
namespace {

std::atomic<bool> enabled{false};

struct Log {
  std::mutex mu;
  std::vector<Record> records;
  uint64_t dropped = 0;
  size_t capacity = kDefaultCapacity;
};

Log& TheLog() {
  static Log* log = new Log();  // never destroyed: records may come from exiting threads
  return *log;
}

struct Names {
  std::mutex mu;
  absl::flat_hash_map<std::string, NameId> ids;
  std::vector<std::string> names;  // [id - 1]
};

Names& TheNames() {
  static Names* names = new Names();
  return *names;
}

thread_local NameId current_op = kNoName;
thread_local NameId current_op_name = kNoName;
// What the thread did while a profile was taken (monotonic; ScopedOp records differences).
thread_local uint64_t thread_descriptor_calls_local = 0;
thread_local uint64_t thread_descriptor_calls_forwarded = 0;
thread_local uint64_t thread_round_trips = 0;

struct Sources {
  std::mutex mu;  // held while a source is called: Unregister waits for the call to return
  std::vector<Source*> sources;
};

Sources& TheSources() {
  static Sources* sources = new Sources();
  return *sources;
}

}  // namespace

int64_t NowNs() {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

bool Enabled() { return enabled.load(std::memory_order_relaxed); }

void Start(size_t capacity) {
  Log& log = TheLog();
  {
    std::lock_guard<std::mutex> lock(log.mu);
    log.records.clear();
    log.dropped = 0;
    log.capacity = capacity;
  }
  enabled.store(true, std::memory_order_release);
  Sources& sources = TheSources();
  std::lock_guard<std::mutex> lock(sources.mu);
  for (Source* source : sources.sources) source->OnProfileStart();
}

void Stop() { enabled.store(false, std::memory_order_release); }

std::vector<Record> Take(uint64_t* dropped) {
  Log& log = TheLog();
  std::lock_guard<std::mutex> lock(log.mu);
  if (dropped != nullptr) *dropped = log.dropped;
  log.dropped = 0;
  return std::exchange(log.records, {});
}

std::vector<Record> Collect(uint64_t* dropped) {
  Stop();
  uint64_t dropped_here = 0;
  std::vector<Record> records = Take(&dropped_here);
  Sources& sources = TheSources();
  {
    std::lock_guard<std::mutex> lock(sources.mu);
    for (Source* source : sources.sources) source->Collect(&records, &dropped_here);
  }
  if (dropped != nullptr) *dropped = dropped_here;
  return records;
}

void RegisterSource(Source* source) {
  Sources& sources = TheSources();
  std::lock_guard<std::mutex> lock(sources.mu);
  sources.sources.push_back(source);
}

void UnregisterSource(Source* source) {
  Sources& sources = TheSources();
  std::lock_guard<std::mutex> lock(sources.mu);
  sources.sources.erase(std::remove(sources.sources.begin(), sources.sources.end(), source),
                        sources.sources.end());
}

void CountDescriptorCall(bool forwarded) {
  if (!Enabled()) return;
  ++(forwarded ? thread_descriptor_calls_forwarded : thread_descriptor_calls_local);
}

void CountRoundTrip() {
  if (Enabled()) ++thread_round_trips;
}

void Add(const Record& record) {
  if (!Enabled()) return;
  Log& log = TheLog();
  std::lock_guard<std::mutex> lock(log.mu);
  if (log.records.size() >= log.capacity) {
    ++log.dropped;
    return;
  }
  log.records.push_back(record);
}

NameId Intern(absl::string_view name) {
  if (name.empty()) return kNoName;
  Names& names = TheNames();
  std::lock_guard<std::mutex> lock(names.mu);
  auto [it, inserted] = names.ids.try_emplace(name, static_cast<NameId>(names.names.size() + 1));
  if (inserted) names.names.emplace_back(name);
  return it->second;
}

std::string NameOf(NameId id) {
  Names& names = TheNames();
  std::lock_guard<std::mutex> lock(names.mu);
  return id == kNoName || id > names.names.size() ? std::string() : names.names[id - 1];
}

NameId CurrentOp() { return current_op; }
NameId CurrentOpName() { return current_op_name; }

ScopedOp::ScopedOp(NameId op, NameId op_name, uint32_t device)
    : op_(op),
      op_name_(op_name),
      outer_(current_op),
      outer_name_(current_op_name),
      device_(device),
      start_ns_(Enabled() ? NowNs() : 0),
      descriptor_calls_local_(thread_descriptor_calls_local),
      descriptor_calls_forwarded_(thread_descriptor_calls_forwarded),
      round_trips_(thread_round_trips) {
  current_op = op;
  current_op_name = op_name;
}

ScopedOp::~ScopedOp() {
  current_op = outer_;
  current_op_name = outer_name_;
  if (start_ns_ != 0 && Enabled()) {
    Record record;
    record.kind = Kind::kOp;
    record.device = device_;
    record.name = op_;
    record.op = op_;
    record.op_name = op_name_;
    record.start_ns = start_ns_;
    record.end_ns = NowNs();
    record.descriptor_calls_local =
        static_cast<uint32_t>(thread_descriptor_calls_local - descriptor_calls_local_);
    record.descriptor_calls_forwarded =
        static_cast<uint32_t>(thread_descriptor_calls_forwarded - descriptor_calls_forwarded_);
    record.round_trips = static_cast<uint32_t>(thread_round_trips - round_trips_);
    Add(record);
  }
}

}  // namespace vgpu::activity
