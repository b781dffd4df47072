// The activity log (plugin/common/activity.h): nothing recorded outside a profile, records kept
// in order while one runs, the op a thread computes tagged and nested, names interned, the log
// bounded, each op's descriptor calls and round trips counted, remote sources asked.
#include "plugin/common/activity.h"

#include <thread>

#include "gtest/gtest.h"

namespace vgpu::activity {
namespace {

Record KernelRecord(NameId name, int64_t start) {
  Record record;
  record.kind = Kind::kKernel;
  record.name = name;
  record.op = CurrentOp();
  record.start_ns = start;
  record.end_ns = start + 10;
  return record;
}

TEST(ActivityTest, NothingIsRecordedOutsideAProfile) {
  Stop();
  Take();
  Add(KernelRecord(Intern("relu"), 1));
  { ScopedOp op(Intern("Relu"), Intern("model/relu"), 0); }
  EXPECT_FALSE(Enabled());
  EXPECT_TRUE(Take().empty());
}

TEST(ActivityTest, AProfileKeepsRecordsInOrderAndTakeEmptiesIt) {
  Start();
  EXPECT_TRUE(Enabled());
  Add(KernelRecord(Intern("a"), 5));
  Add(KernelRecord(Intern("b"), 3));
  Stop();
  Add(KernelRecord(Intern("c"), 1));  // after Stop: not kept
  uint64_t dropped = 99;
  std::vector<Record> records = Take(&dropped);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(NameOf(records[0].name), "a");
  EXPECT_EQ(NameOf(records[1].name), "b");
  EXPECT_EQ(dropped, 0u);
  EXPECT_TRUE(Take().empty());
}

TEST(ActivityTest, StartClearsWhatAnEarlierProfileLeft) {
  Start();
  Add(KernelRecord(Intern("old"), 1));
  Stop();
  Start();
  Add(KernelRecord(Intern("new"), 2));
  Stop();
  std::vector<Record> records = Take();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(NameOf(records[0].name), "new");
}

TEST(ActivityTest, ScopedOpTagsTheThreadsWorkAndRecordsItsSpanNestingRestoresTheOuterOp) {
  const NameId outer = Intern("Conv2D"), inner = Intern("Relu");
  const NameId outer_name = Intern("model/conv"), inner_name = Intern("model/conv/relu");
  Start();
  {
    ScopedOp op(outer, outer_name, /*device=*/1);
    EXPECT_EQ(CurrentOp(), outer);
    EXPECT_EQ(CurrentOpName(), outer_name);
    {
      ScopedOp nested(inner, inner_name, 1);
      EXPECT_EQ(CurrentOpName(), inner_name);
      Add(KernelRecord(Intern("relu_kernel"), NowNs()));
    }
    EXPECT_EQ(CurrentOp(), outer);
    EXPECT_EQ(CurrentOpName(), outer_name);
    std::thread other([&] { EXPECT_EQ(CurrentOp(), kNoName); });  // per thread
    other.join();
  }
  EXPECT_EQ(CurrentOp(), kNoName);
  EXPECT_EQ(CurrentOpName(), kNoName);
  Stop();
  std::vector<Record> records = Take();
  ASSERT_EQ(records.size(), 3u);  // the kernel, the inner op's span, the outer op's span
  EXPECT_EQ(records[0].kind, Kind::kKernel);
  EXPECT_EQ(records[0].op, inner);
  EXPECT_EQ(records[1].kind, Kind::kOp);
  EXPECT_EQ(records[1].name, inner);
  EXPECT_EQ(records[1].op_name, inner_name);
  EXPECT_EQ(records[2].name, outer);
  EXPECT_EQ(records[2].op_name, outer_name);
  EXPECT_EQ(records[2].device, 1u);
  EXPECT_LE(records[2].start_ns, records[1].start_ns);
  EXPECT_GE(records[2].end_ns, records[1].end_ns);
}

TEST(ActivityTest, AProfileStartingOrStoppingInsideAnOpLeavesTheThreadsTagConsistent) {
  Stop();
  Take();
  {
    ScopedOp untagged(Intern("MatMul"), Intern("dense"), 0);  // no profile: not even tagged
    EXPECT_EQ(CurrentOp(), kNoName);
    Start();
    {
      ScopedOp tagged(Intern("Relu"), Intern("relu"), 0);
      EXPECT_EQ(NameOf(CurrentOp()), "Relu");
    }
    EXPECT_EQ(CurrentOp(), kNoName);
  }
  EXPECT_EQ(CurrentOp(), kNoName);
  {
    ScopedOp stopped(Intern("Add"), Intern("add"), 0);
    Stop();  // stops inside the op: the tag is still taken off, the span not recorded
  }
  EXPECT_EQ(CurrentOp(), kNoName);
  std::vector<Record> records = Take();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(NameOf(records[0].op), "Relu");
}

TEST(ActivityTest, NamesAreInternedOnceAndTheEmptyNameIsNone) {
  const NameId id = Intern("MatMul");
  EXPECT_NE(id, kNoName);
  EXPECT_EQ(Intern("MatMul"), id);
  EXPECT_NE(Intern("MatMulGrad"), id);
  EXPECT_EQ(Intern(""), kNoName);
  EXPECT_EQ(NameOf(kNoName), "");
  EXPECT_EQ(NameOf(id), "MatMul");
  EXPECT_EQ(NameOf(1u << 30), "");
}

TEST(ActivityTest, TheLogIsBoundedAndCountsWhatItDropped) {
  Start(/*capacity=*/4);
  const Record record = KernelRecord(Intern("k"), 1);
  for (int i = 0; i < 7; ++i) Add(record);
  Stop();
  uint64_t dropped = 0;
  EXPECT_EQ(Take(&dropped).size(), 4u);
  EXPECT_EQ(dropped, 3u);
  Start();  // the next profile has the default capacity again
  for (int i = 0; i < 7; ++i) Add(record);
  Stop();
  EXPECT_EQ(Take(&dropped).size(), 7u);
  EXPECT_EQ(dropped, 0u);
}

TEST(ActivityTest, AnOpRecordCountsTheDescriptorCallsAndRoundTripsMadeWhileItRan) {
  CountRoundTrip();  // outside a profile: not counted anywhere
  Start();
  {
    ScopedOp outer(Intern("Conv2D"), Intern("conv"), 0);
    CountDescriptorCall(/*forwarded=*/false);
    CountDescriptorCall(/*forwarded=*/false);
    {
      ScopedOp inner(Intern("Cast"), Intern("cast"), 0);
      CountDescriptorCall(/*forwarded=*/true);
    }
    CountRoundTrip();
  }
  Stop();
  std::vector<Record> records = Take();
  ASSERT_EQ(records.size(), 2u);  // the inner op ends first
  EXPECT_EQ(NameOf(records[0].op), "Cast");
  EXPECT_EQ(records[0].descriptor_calls_forwarded, 1u);
  EXPECT_EQ(records[0].descriptor_calls_local, 0u);
  EXPECT_EQ(records[0].round_trips, 0u);
  EXPECT_EQ(NameOf(records[1].op), "Conv2D");  // the outer op's counts include the inner's
  EXPECT_EQ(records[1].descriptor_calls_local, 2u);
  EXPECT_EQ(records[1].descriptor_calls_forwarded, 1u);
  EXPECT_EQ(records[1].round_trips, 1u);
}

// A source standing for a server: it counts starts and hands over one record per collect.
class FakeSource : public Source {
 public:
  void OnProfileStart() override { ++starts; }
  void Collect(std::vector<Record>* records, uint64_t* dropped) override {
    records->push_back(KernelRecord(Intern("remote"), 42));
    *dropped += 5;
  }
  int starts = 0;
};

TEST(ActivityTest, CollectStopsTheProfileAndAddsEveryRegisteredSourcesRecords) {
  FakeSource source;
  RegisterSource(&source);
  Start();
  EXPECT_EQ(source.starts, 1);
  Add(KernelRecord(Intern("local"), 1));
  uint64_t dropped = 0;
  std::vector<Record> records = Collect(&dropped);
  EXPECT_FALSE(Enabled());
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(NameOf(records[0].name), "local");  // the in-process records first
  EXPECT_EQ(NameOf(records[1].name), "remote");
  EXPECT_EQ(dropped, 5u);
  UnregisterSource(&source);
  Start();
  EXPECT_EQ(source.starts, 1);  // unregistered: no longer told
  EXPECT_TRUE(Collect().empty());
}

}  // namespace
}  // namespace vgpu::activity
