// LaunchTemplateCache and LaunchTemplateTable (see launch_templates.h).
#include "plugin/protocol/launch_templates.h"

#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace vgpu {
namespace {

template <typename T>
void AppendBytesOf(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// Keys seen once that the cache remembers before it starts over.
constexpr size_t kMaxSeenOnce = 4 * wire::kMaxTemplates;

}  // namespace

LaunchTemplateCache::LaunchTemplateCache(uint64_t budget_bytes) : budget_bytes_(budget_bytes) {}

void LaunchTemplateCache::BuildKey(const Command& command) {
  key_.clear();
  AppendBytesOf(&key_, command.device);
  AppendBytesOf(&key_, command.stream);
  AppendBytesOf(&key_, command.object);
  AppendBytesOf(&key_, static_cast<uint32_t>(command.buffers.size()));
  AppendBytesOf(&key_, static_cast<uint32_t>(command.params.size()));
  key_.append(reinterpret_cast<const char*>(command.params.data()), command.params.size());
  key_.append(reinterpret_cast<const char*>(command.descriptors.data()),
              command.descriptors.size());
}

void LaunchTemplateCache::EvictLeastRecent(absl::InlinedVector<uint32_t, 2>* released) {
  auto victim = templates_.find(recency_.back());
  bytes_ -= victim->second.charge;
  free_ids_.push_back(victim->second.id);
  released->push_back(victim->second.id);
  templates_.erase(victim);
  recency_.pop_back();
}

LaunchPlan LaunchTemplateCache::Plan(const Command& command) {
  LaunchPlan plan;
  if (command.kind != CommandKind::kLaunch || budget_bytes_ == 0 ||
      command.buffers.size() > wire::kMaxTemplateBuffers) {
    return plan;
  }
  const uint64_t charge = wire::TemplateChargeBytes(command);
  if (charge > budget_bytes_ / 4) return plan;  // one template never crowds out the rest
  BuildKey(command);
  auto found = templates_.find(key_);
  if (found != templates_.end()) {
    Template& known = found->second;
    for (size_t i = 0; i < command.buffers.size(); ++i) {
      const BufferArg& now = command.buffers[i];
      BufferArg& last = known.buffers[i];
      if (now.address != last.address || now.size != last.size) {
        plan.bindings.push_back(wire::BindingBetween(static_cast<uint16_t>(i), last, now));
        last = now;
      }
    }
    recency_.splice(recency_.begin(), recency_, known.recency);
    plan.form = wire::BatchEntryForm::kTemplatedLaunch;
    plan.template_id = known.id;
    ++launches_by_template_;
    return plan;
  }
  // Admission: a key becomes a template the second time it is seen.
  const size_t hash = absl::HashOf(absl::string_view(key_));
  if (seen_once_.insert(hash).second) {
    if (seen_once_.size() > kMaxSeenOnce) seen_once_.clear();
    return plan;
  }
  seen_once_.erase(hash);
  while (!templates_.empty() &&
         (bytes_ + charge > budget_bytes_ || templates_.size() >= wire::kMaxTemplates)) {
    EvictLeastRecent(&plan.released);
  }
  Template created;
  if (!free_ids_.empty()) {
    created.id = free_ids_.back();
    free_ids_.pop_back();
    // The definition replaces the template of a reused id: it needs no release of its own.
    if (!plan.released.empty() && plan.released.back() == created.id) plan.released.pop_back();
  } else {
    created.id = next_id_++;
  }
  created.charge = charge;
  created.buffers.assign(command.buffers.begin(), command.buffers.end());
  recency_.push_front(key_);
  created.recency = recency_.begin();
  bytes_ += charge;
  plan.form = wire::BatchEntryForm::kDefineTemplate;
  plan.template_id = created.id;
  templates_.emplace(key_, std::move(created));
  ++templates_created_;
  return plan;
}

absl::Status LaunchTemplateTable::Define(uint32_t id, const Command& launch) {
  static_assert(sizeof(Slot) <= wire::kTemplateOverheadBytes,
                "a template's charge must cover its slot");
  if (launch.kind != CommandKind::kLaunch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "launch template ", id, " defined by a ", CommandKindName(launch.kind),
        " (only a launch can be a template)"));
  }
  if (id >= wire::kMaxTemplates || launch.buffers.size() > wire::kMaxTemplateBuffers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "launch template ", id, " with ", launch.buffers.size(), " buffers is out of range (ids < ",
        wire::kMaxTemplates, ", at most ", wire::kMaxTemplateBuffers, " buffers)"));
  }
  auto existing = slots_.find(id);
  const uint64_t charge = wire::TemplateChargeBytes(launch);
  const uint64_t held = bytes_ - (existing != slots_.end() ? existing->second.charge : 0);
  if (held + charge > budget_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "launch template ", id, " (", charge, " bytes) does not fit the connection's template "
        "budget of ", budget_bytes_, " bytes (", held, " held)"));
  }
  Slot& slot = slots_[id];
  bytes_ = held + charge;
  slot.charge = charge;
  slot.launch = launch;
  slot.launch.activity = {};
  slot.launch.host_storage.reset();
  return absl::OkStatus();
}

absl::Status LaunchTemplateTable::Release(uint32_t id) {
  auto slot = slots_.find(id);
  if (slot == slots_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("release of launch template ", id, ", which is not defined"));
  }
  bytes_ -= slot->second.charge;
  slots_.erase(slot);
  return absl::OkStatus();
}

absl::StatusOr<Command> LaunchTemplateTable::Instantiate(
    uint32_t id, absl::Span<const wire::TemplateBinding> bindings) {
  auto slot = slots_.find(id);
  if (slot == slots_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a launch names template ", id, ", which this connection has not defined"));
  }
  Command& launch = slot->second.launch;
  for (const wire::TemplateBinding& binding : bindings) {
    if (binding.index >= launch.buffers.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a launch of template ", id, " binds buffer ", binding.index, " of ",
          launch.buffers.size()));
    }
  }
  for (const wire::TemplateBinding& binding : bindings) {
    launch.buffers[binding.index] = wire::ApplyBinding(launch.buffers[binding.index], binding);
  }
  return launch;
}

}  // namespace vgpu
