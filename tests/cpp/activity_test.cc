// The activity log (plugin/common/activity.h): nothing recorded outside a profile, records kept
// in order while one runs, the op a thread computes tagged and nested, names interned, the log
// bounded.
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

}  // namespace
}  // namespace vgpu::activity
