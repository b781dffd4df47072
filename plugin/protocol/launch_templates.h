// Launch templates: the state both ends of a connection keep in step so that a launch repeated
// with the same kernel, parameters and descriptor settings crosses the wire as a template id and
// the buffers that changed (wire_format.h, CommandBatch entry forms). The sender's side
// (LaunchTemplateCache) decides how each launch goes; the receiver's (LaunchTemplateTable)
// rebuilds the launch. Both apply the entries in the connection's order, so they agree on every
// template's content and last buffers without ever talking about it.
#ifndef VGPU_PROTOCOL_LAUNCH_TEMPLATES_H_
#define VGPU_PROTOCOL_LAUNCH_TEMPLATES_H_

#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugin/protocol/command.h"
#include "plugin/protocol/wire_format.h"

namespace vgpu {

// How a launch goes on the wire.
struct LaunchPlan {
  wire::BatchEntryForm form = wire::BatchEntryForm::kCommand;
  uint32_t template_id = 0;                               // kDefineTemplate, kTemplatedLaunch
  absl::InlinedVector<wire::TemplateBinding, 4> bindings;  // kTemplatedLaunch: what changed
  // kDefineTemplate: templates to release first (kReleaseTemplate entries) to make room.
  absl::InlinedVector<uint32_t, 2> released;
};

// The client's view of its connection's templates. A launch is made a template the second time
// its key (device, stream, kernel, buffer count, params, descriptors) is seen, so that launches
// whose parameters change every time (a random op's counter) do not churn the table; from then
// on it goes as kTemplatedLaunch. The table keeps within the connection's budget
// (Welcome::template_bytes, counted with wire::TemplateChargeBytes) and wire::kMaxTemplates by
// releasing its least recently used templates (or redefining their ids). Not thread-safe: the caller serialises Plan calls in
// the order their entries are written.
class LaunchTemplateCache {
 public:
  // `budget_bytes` 0: every launch goes as kCommand.
  explicit LaunchTemplateCache(uint64_t budget_bytes);

  // Decides how `command` goes and updates the table as the receiver will when it reads the
  // entry. Anything but an eligible kLaunch goes as kCommand.
  LaunchPlan Plan(const Command& command);

  uint64_t templates_created() const { return templates_created_; }
  uint64_t launches_by_template() const { return launches_by_template_; }
  size_t size() const { return templates_.size(); }
  uint64_t bytes() const { return bytes_; }

 private:
  struct Template {
    uint32_t id = 0;
    uint64_t charge = 0;
    absl::InlinedVector<BufferArg, 4> buffers;  // of its last launch
    std::list<std::string>::iterator recency;   // its key's place in recency_
  };
  // The key's bytes, built in key_ (reused: no allocation per launch once warm).
  void BuildKey(const Command& command);
  // Frees the least recently used template's id and charge; adds the id to `released`.
  void EvictLeastRecent(absl::InlinedVector<uint32_t, 2>* released);

  const uint64_t budget_bytes_;
  std::string key_;
  absl::flat_hash_map<std::string, Template> templates_;
  std::list<std::string> recency_;  // keys, most recently used first
  std::vector<uint32_t> free_ids_;
  uint32_t next_id_ = 0;
  uint64_t bytes_ = 0;
  // Hashes of keys seen once (cleared when it grows past a bound).
  absl::flat_hash_set<size_t> seen_once_;
  uint64_t templates_created_ = 0;
  uint64_t launches_by_template_ = 0;
};

// The server's table of one connection's templates, bounded by its budget. Not thread-safe:
// the connection's reader applies entries in order.
class LaunchTemplateTable {
 public:
  explicit LaunchTemplateTable(uint64_t budget_bytes) : budget_bytes_(budget_bytes) {}

  // Makes `launch` template `id`, replacing an earlier one. Checked once here: the command is a
  // kLaunch, it has at most wire::kMaxTemplateBuffers buffers, `id` is in range, and the table
  // stays within its budget. InvalidArgument otherwise (a client that breaks this breaks the
  // protocol).
  absl::Status Define(uint32_t id, const Command& launch);

  // Forgets template `id`. InvalidArgument when it is not defined.
  absl::Status Release(uint32_t id);

  // Template `id`'s launch with `bindings` applied (and kept for the next one). Only the
  // bindings are checked: InvalidArgument for an id this table does not hold or a buffer index
  // the template does not have.
  absl::StatusOr<Command> Instantiate(uint32_t id,
                                      absl::Span<const wire::TemplateBinding> bindings);

  size_t size() const { return slots_.size(); }
  uint64_t bytes() const { return bytes_; }

 private:
  struct Slot {
    uint64_t charge = 0;
    Command launch;
  };
  const uint64_t budget_bytes_;
  // By id: only the defined ones (ids are the client's; a table sized by the highest would
  // hold far more than the templates are charged). A node each, so that a template holds its
  // slot and a pointer, within its charge.
  absl::node_hash_map<uint32_t, Slot> slots_;
  uint64_t bytes_ = 0;
};

}  // namespace vgpu

#endif  // VGPU_PROTOCOL_LAUNCH_TEMPLATES_H_
