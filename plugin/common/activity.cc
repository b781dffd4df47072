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

// A thread's activity state, in one thread-local (one TLS lookup per use in a shared object).
struct ThreadActivity {
  NameId op = kNoName;       // the op the thread computes (ScopedOp)
  NameId op_name = kNoName;
  // What the thread did while a profile was taken (monotonic; ScopedOp records differences).
  uint64_t descriptor_calls_local = 0;
  uint64_t descriptor_calls_forwarded = 0;
  uint64_t round_trips = 0;
};
thread_local ThreadActivity thread_activity;

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
  ThreadActivity& thread = thread_activity;
  ++(forwarded ? thread.descriptor_calls_forwarded : thread.descriptor_calls_local);
}

void CountRoundTrip() {
  if (Enabled()) ++thread_activity.round_trips;
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

NameId CurrentOp() { return thread_activity.op; }
NameId CurrentOpName() { return thread_activity.op_name; }

ScopedOp::ScopedOp(NameId op, NameId op_name, uint32_t device) : device_(device) {
  // No profile: the thread is not even tagged (commands made meanwhile are not recorded, so
  // nothing reads the tag); the thread-local state is left as the enclosing scopes set it.
  if (!Enabled()) return;
  ThreadActivity& thread = thread_activity;
  outer_ = thread.op;
  outer_name_ = thread.op_name;
  thread.op = op;
  thread.op_name = op_name;
  op_ = op;
  op_name_ = op_name;
  start_ns_ = NowNs();
  descriptor_calls_local_ = thread.descriptor_calls_local;
  descriptor_calls_forwarded_ = thread.descriptor_calls_forwarded;
  round_trips_ = thread.round_trips;
}

ScopedOp::~ScopedOp() {
  if (start_ns_ == 0) return;  // not tagged (no profile when it started)
  ThreadActivity& thread = thread_activity;
  thread.op = outer_;
  thread.op_name = outer_name_;
  if (!Enabled()) return;  // the profile stopped meanwhile: not recorded
  Record record;
  record.kind = Kind::kOp;
  record.device = device_;
  record.name = op_;
  record.op = op_;
  record.op_name = op_name_;
  record.start_ns = start_ns_;
  record.end_ns = NowNs();
  record.descriptor_calls_local =
      static_cast<uint32_t>(thread.descriptor_calls_local - descriptor_calls_local_);
  record.descriptor_calls_forwarded =
      static_cast<uint32_t>(thread.descriptor_calls_forwarded - descriptor_calls_forwarded_);
  record.round_trips = static_cast<uint32_t>(thread.round_trips - round_trips_);
  Add(record);
}

}  // namespace vgpu::activity
