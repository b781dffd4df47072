// Launch templates (protocol/launch_templates.h, the CommandBatch entry forms of wire_format.h):
// the entry forms round-trip and malformed ones are refused; the client's cache makes a launch a
// template the second time it is seen, sends only changed buffers, and keeps within its budget;
// the server's table checks definitions once and bindings per launch; and the two, driven
// through the wire by the same random launches, rebuild every launch exactly.
#include "plugin/protocol/launch_templates.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/protocol/wire_format.h"

namespace vgpu {
namespace {

using wire::BatchEntryForm;

Command Launch(uint64_t kernel, std::vector<uint8_t> params,
               std::vector<BufferArg> buffers = {{0x1000, 64}, {0x2000, 64}}) {
  Command launch;
  launch.kind = CommandKind::kLaunch;
  launch.device = 0;
  launch.stream = 5;
  launch.object = kernel;
  launch.params.assign(params.begin(), params.end());
  launch.descriptors = {1, 5, 16, 0};
  launch.buffers.assign(buffers.begin(), buffers.end());
  return launch;
}

bool SameLaunch(const Command& a, const Command& b) {
  if (a.kind != b.kind || a.device != b.device || a.stream != b.stream || a.object != b.object ||
      a.params != b.params || a.descriptors != b.descriptors ||
      a.buffers.size() != b.buffers.size()) {
    return false;
  }
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    if (a.buffers[i].address != b.buffers[i].address || a.buffers[i].size != b.buffers[i].size) {
      return false;
    }
  }
  return true;
}

TEST(LaunchTemplateEntries, EveryFormRoundTrips) {
  const Command launch = Launch(200, {1, 2, 3});
  std::vector<uint8_t> payload;
  wire::BatchWriter writer(&payload);
  writer.AddCommand(7, launch);
  writer.AddDefinition(8, 42, launch);
  const BufferArg moved{0x9000, 128};
  const std::vector<wire::TemplateBinding> bindings = {
      wire::BindingBetween(1, launch.buffers[1], moved)};
  writer.AddTemplatedLaunch(9, 42, bindings);
  writer.AddRelease(9, 42);
  absl::StatusOr<std::vector<wire::BatchEntry>> entries = wire::SplitBatch(payload);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 4u);
  EXPECT_EQ((*entries)[0].form, BatchEntryForm::kCommand);
  EXPECT_EQ((*entries)[1].form, BatchEntryForm::kDefineTemplate);
  EXPECT_EQ((*entries)[1].template_id, 42u);
  EXPECT_EQ((*entries)[1].sequence, 8u);
  auto decoded = wire::DecodeCommand(std::make_shared<std::vector<uint8_t>>(
      (*entries)[1].command.begin(), (*entries)[1].command.end()));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(SameLaunch(decoded->command, launch));
  EXPECT_EQ((*entries)[2].form, BatchEntryForm::kTemplatedLaunch);
  EXPECT_EQ((*entries)[2].template_id, 42u);
  const auto decoded_bindings = wire::DecodeBindings((*entries)[2]);
  ASSERT_EQ(decoded_bindings.size(), 1u);
  EXPECT_EQ(decoded_bindings[0].index, 1);
  const BufferArg applied = wire::ApplyBinding(launch.buffers[1], decoded_bindings[0]);
  EXPECT_EQ(applied.address, 0x9000u);
  EXPECT_EQ(applied.size, 128u);
  EXPECT_EQ((*entries)[3].form, BatchEntryForm::kReleaseTemplate);
  EXPECT_EQ((*entries)[3].template_id, 42u);
  // A templated launch with no binding, right after the previous entry, is 4 bytes: the
  // sequence delta, the length and form, the id and the binding count.
  std::vector<uint8_t> bare;
  wire::BatchWriter bare_writer(&bare);
  bare_writer.AddCommand(10, launch);
  const size_t before = bare.size();
  bare_writer.AddTemplatedLaunch(11, 3, {});
  EXPECT_EQ(bare.size() - before, 4u);
}

TEST(LaunchTemplateEntries, ABindingIsTheBuffersMoveNotItsAddress) {
  // A buffer a page further on, of the same size: its binding is the index with the flag and
  // zigzag(4096) in two bytes, not the 6-byte address and the size.
  const BufferArg last{0x7f3a00001000, 65536}, now{0x7f3a00002000, 65536};
  const wire::TemplateBinding moved = wire::BindingBetween(2, last, now);
  EXPECT_FALSE(moved.size_changed);
  std::vector<uint8_t> payload;
  wire::BatchWriter writer(&payload);
  writer.AddTemplatedLaunch(1, 3, std::vector<wire::TemplateBinding>{moved});
  // delta, length and form, id, count, then the binding's three bytes.
  EXPECT_EQ(payload.size(), 7u);
  // Moves down, across the ends of the address space, and size changes come back exactly.
  const std::vector<std::pair<BufferArg, BufferArg>> moves = {
      {last, now}, {now, last}, {{~0ull - 15, 8}, {16, 8}}, {{16, 8}, {~0ull - 15, 24}},
      {{0x1000, 64}, {0x1000, 0}}};
  for (const auto& [from, to] : moves) {
    payload.clear();
    wire::BatchWriter move_writer(&payload);
    move_writer.AddTemplatedLaunch(1, 3,
                                   std::vector<wire::TemplateBinding>{
                                       wire::BindingBetween(0, from, to)});
    absl::StatusOr<std::vector<wire::BatchEntry>> entries = wire::SplitBatch(payload);
    ASSERT_TRUE(entries.ok()) << entries.status();
    const auto decoded = wire::DecodeBindings((*entries)[0]);
    ASSERT_EQ(decoded.size(), 1u);
    const BufferArg applied = wire::ApplyBinding(from, decoded[0]);
    EXPECT_EQ(applied.address, to.address);
    EXPECT_EQ(applied.size, to.size);
  }
}

TEST(LaunchTemplateEntries, MalformedEntriesAreRefused) {
  const auto batch_of = [](auto add) {
    std::vector<uint8_t> payload;
    wire::BatchWriter writer(&payload);
    add(writer);
    return payload;
  };
  const std::vector<uint8_t> templated = batch_of([](wire::BatchWriter& w) {
    w.AddTemplatedLaunch(1, 3, std::vector<wire::TemplateBinding>{{0, 1, true, 2}});
  });
  ASSERT_TRUE(wire::CheckBatch(templated).ok());
  // templated = delta 2, length 5 << 3 | 2, id 3, count 1, index 0 << 1 | size changed,
  // zigzag(address delta 1) = 2, size 2.
  ASSERT_EQ(templated.size(), 7u);
  std::vector<uint8_t> size_missing = templated;  // the flag says a size follows; none does
  size_missing.pop_back();
  size_missing[1] = 4 << 3 | 2;
  EXPECT_FALSE(wire::CheckBatch(size_missing).ok());
  std::vector<uint8_t> short_bindings = templated;  // the count says 2, one is there
  short_bindings[3] = 2;
  EXPECT_FALSE(wire::CheckBatch(short_bindings).ok());
  std::vector<uint8_t> index_out_of_range = templated;  // a binding past kMaxTemplateBuffers
  index_out_of_range.erase(index_out_of_range.begin() + 4);
  const uint8_t index[] = {0x81, 0x10};  // 1024 << 1 | 1
  index_out_of_range.insert(index_out_of_range.begin() + 4, index, index + 2);
  index_out_of_range[1] = 6 << 3 | 2;
  EXPECT_FALSE(wire::CheckBatch(index_out_of_range).ok());
  EXPECT_FALSE(wire::CheckBatch(batch_of([](wire::BatchWriter& w) {
    w.AddTemplatedLaunch(1, wire::kMaxTemplates, {});  // id out of range
  })).ok());
  EXPECT_FALSE(wire::CheckBatch(batch_of([](wire::BatchWriter& w) {
    w.AddRelease(1, wire::kMaxTemplates);
  })).ok());
  std::vector<uint8_t> definition =
      batch_of([](wire::BatchWriter& w) { w.AddDefinition(1, 3, Launch(1, {})); });
  ASSERT_TRUE(wire::CheckBatch(definition).ok());
  definition.resize(definition.size() - 1);  // the command overruns the entry
  EXPECT_FALSE(wire::CheckBatch(definition).ok());
  // A cursor stops at the first entry it cannot read (it walks checked payloads only).
  wire::BatchCursor cursor(short_bindings);
  wire::BatchEntry entry;
  EXPECT_FALSE(cursor.Next(&entry));
}

TEST(LaunchTemplateCache, ALaunchBecomesATemplateTheSecondTimeItIsSeen) {
  LaunchTemplateCache cache(1 << 20);
  const Command launch = Launch(200, {1, 2, 3});
  EXPECT_EQ(cache.Plan(launch).form, BatchEntryForm::kCommand);
  const LaunchPlan defined = cache.Plan(launch);
  EXPECT_EQ(defined.form, BatchEntryForm::kDefineTemplate);
  const LaunchPlan again = cache.Plan(launch);
  EXPECT_EQ(again.form, BatchEntryForm::kTemplatedLaunch);
  EXPECT_EQ(again.template_id, defined.template_id);
  EXPECT_TRUE(again.bindings.empty());
  EXPECT_EQ(cache.templates_created(), 1u);
  EXPECT_EQ(cache.launches_by_template(), 1u);
}

TEST(LaunchTemplateCache, OnlyChangedBuffersAreBound) {
  LaunchTemplateCache cache(1 << 20);
  Command launch = Launch(200, {1});
  cache.Plan(launch);
  cache.Plan(launch);
  launch.buffers[1] = {0x7000, 64};
  LaunchPlan plan = cache.Plan(launch);
  ASSERT_EQ(plan.form, BatchEntryForm::kTemplatedLaunch);
  ASSERT_EQ(plan.bindings.size(), 1u);
  EXPECT_EQ(plan.bindings[0].index, 1);
  EXPECT_EQ(plan.bindings[0].address_delta, 0x7000u - 0x2000u);  // from Launch's {0x2000, 64}
  EXPECT_FALSE(plan.bindings[0].size_changed);
  plan = cache.Plan(launch);  // the template remembers the new buffer
  EXPECT_TRUE(plan.bindings.empty());
}

TEST(LaunchTemplateCache, DifferentSettingsMakeDifferentTemplates) {
  LaunchTemplateCache cache(1 << 20);
  Command a = Launch(200, {1});
  Command smaller_batch = a;
  smaller_batch.descriptors = {1, 5, 16, 1};
  Command other_stream = a;
  other_stream.stream = 6;
  for (const Command* launch : {&a, &smaller_batch, &other_stream}) {
    cache.Plan(*launch);
    EXPECT_EQ(cache.Plan(*launch).form, BatchEntryForm::kDefineTemplate);
  }
  EXPECT_EQ(cache.size(), 3u);
}

TEST(LaunchTemplateCache, StaysWithinItsBudgetByEvictingTheLeastRecentlyUsed) {
  const Command probe = Launch(0, {0, 0});
  const uint64_t charge = wire::TemplateChargeBytes(probe);
  LaunchTemplateCache cache(4 * charge);  // four templates
  std::vector<uint32_t> ids;
  for (uint8_t kernel = 1; kernel <= 4; ++kernel) {
    cache.Plan(Launch(kernel, {0, 0}));
    ids.push_back(cache.Plan(Launch(kernel, {0, 0})).template_id);
  }
  EXPECT_EQ(cache.size(), 4u);
  cache.Plan(Launch(1, {0, 0}));  // kernel 1 is now the most recently used; 2 the least
  cache.Plan(Launch(5, {0, 0}));
  const LaunchPlan fifth = cache.Plan(Launch(5, {0, 0}));
  ASSERT_EQ(fifth.form, BatchEntryForm::kDefineTemplate);
  EXPECT_EQ(fifth.template_id, ids[1]);  // kernel 2's id, redefined
  EXPECT_LE(cache.bytes(), 4 * charge);
  EXPECT_EQ(cache.Plan(Launch(1, {0, 0})).form, BatchEntryForm::kTemplatedLaunch);
  cache.Plan(Launch(2, {0, 0}));
  EXPECT_EQ(cache.Plan(Launch(2, {0, 0})).form, BatchEntryForm::kDefineTemplate);
}

TEST(LaunchTemplateCache, NoBudgetOrNotALaunchGoesWhole) {
  LaunchTemplateCache none(0);
  const Command launch = Launch(200, {1});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(none.Plan(launch).form, BatchEntryForm::kCommand);
  LaunchTemplateCache cache(1 << 20);
  Command memset;
  memset.kind = CommandKind::kMemset;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cache.Plan(memset).form, BatchEntryForm::kCommand);
}

TEST(LaunchTemplateTable, DefinitionsAreCheckedOnceAndBindingsPerLaunch) {
  const Command launch = Launch(200, {1, 2});
  LaunchTemplateTable table(wire::TemplateChargeBytes(launch));
  EXPECT_FALSE(table.Instantiate(0, {}).ok());  // nothing defined yet
  ASSERT_TRUE(table.Define(0, launch).ok());
  absl::StatusOr<Command> rebuilt = table.Instantiate(0, {});
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_TRUE(SameLaunch(*rebuilt, launch));
  const std::vector<wire::TemplateBinding> out_of_range = {
      wire::BindingBetween(2, BufferArg{}, BufferArg{0x5000, 8})};
  EXPECT_FALSE(table.Instantiate(0, out_of_range).ok());
  EXPECT_FALSE(table.Instantiate(1, {}).ok());  // another id (another connection's, stale...)
  // Over the budget, not a launch, out of range: refused.
  EXPECT_FALSE(table.Define(1, launch).ok());
  Command memset;
  memset.kind = CommandKind::kMemset;
  EXPECT_FALSE(table.Define(0, memset).ok());
  EXPECT_FALSE(table.Define(wire::kMaxTemplates, launch).ok());
  // Redefining an id replaces it within the same budget.
  const Command other = Launch(201, {3, 4});
  ASSERT_TRUE(table.Define(0, other).ok());
  EXPECT_EQ(table.size(), 1u);
  rebuilt = table.Instantiate(0, {});
  ASSERT_TRUE(rebuilt.ok());
  EXPECT_TRUE(SameLaunch(*rebuilt, other));
}

// The client's cache and the server's table, joined by the wire as a connection joins them,
// rebuild every one of a long random sequence of launches exactly, under a budget small enough
// to evict all the time.
TEST(LaunchTemplates, BothEndsStayInStepThroughTheWire) {
  std::mt19937 rng(7);
  const uint64_t budget = 8 * wire::TemplateChargeBytes(Launch(0, {0}, {{0, 0}, {0, 0}}));
  LaunchTemplateCache cache(budget);
  LaunchTemplateTable table(budget);
  uint64_t sequence = 1;
  int templated = 0, releases = 0;
  for (int batch = 0; batch < 200; ++batch) {
    std::vector<Command> sent;
    std::vector<uint8_t> payload;
    wire::BatchWriter writer(&payload);
    for (int i = 0; i < 16; ++i) {
      // Parameter blocks of 1 or 200 bytes: templates of different charges, so that making
      // room for one may release several.
      std::vector<uint8_t> params(rng() % 2 ? 1 : 200, 0);
      Command launch = Launch(rng() % 3, params,
                              {{0x1000u * (1 + rng() % 2), 64}, {0x8000, 32u * (1 + rng() % 2)}});
      launch.stream = 1 + rng() % 2;
      const LaunchPlan plan = cache.Plan(launch);
      switch (plan.form) {
        case BatchEntryForm::kCommand:
          writer.AddCommand(sequence++, launch);
          break;
        case BatchEntryForm::kDefineTemplate:
          for (uint32_t id : plan.released) {
            writer.AddRelease(sequence, id);
            ++releases;
          }
          writer.AddDefinition(sequence++, plan.template_id, launch);
          break;
        case BatchEntryForm::kTemplatedLaunch:
          writer.AddTemplatedLaunch(sequence++, plan.template_id, plan.bindings);
          ++templated;
          break;
        default:
          FAIL() << "a plan is a command, a definition or a templated launch";
      }
      sent.push_back(launch);
      ASSERT_LE(cache.bytes(), budget);
    }
    ASSERT_TRUE(wire::CheckBatch(payload).ok());
    wire::BatchCursor cursor(payload);
    size_t received = 0;
    for (wire::BatchEntry entry; cursor.Next(&entry);) {
      if (entry.form == BatchEntryForm::kReleaseTemplate) {
        ASSERT_TRUE(table.Release(entry.template_id).ok());
        continue;
      }
      Command rebuilt;
      if (entry.form == BatchEntryForm::kTemplatedLaunch) {
        absl::StatusOr<Command> launch =
            table.Instantiate(entry.template_id, wire::DecodeBindings(entry));
        ASSERT_TRUE(launch.ok()) << launch.status();
        rebuilt = *launch;
      } else {
        auto decoded = wire::DecodeCommand(
            std::make_shared<std::vector<uint8_t>>(entry.command.begin(), entry.command.end()));
        ASSERT_TRUE(decoded.ok()) << decoded.status();
        rebuilt = decoded->command;
        if (entry.form == BatchEntryForm::kDefineTemplate) {
          ASSERT_TRUE(table.Define(entry.template_id, rebuilt).ok());
        }
      }
      ASSERT_LT(received, sent.size());
      ASSERT_TRUE(SameLaunch(rebuilt, sent[received])) << "batch " << batch << " entry " << received;
      ++received;
    }
    ASSERT_EQ(received, sent.size());
    EXPECT_EQ(table.size(), cache.size());
    EXPECT_EQ(table.bytes(), cache.bytes());
  }
  EXPECT_GT(templated, 1000);                 // most launches went as templates
  EXPECT_GT(cache.templates_created(), 10u);  // and the budget made it evict,
  EXPECT_GT(releases, 0);                     // sometimes more than the id it reused
}

}  // namespace
}  // namespace vgpu
