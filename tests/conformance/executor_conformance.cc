// The executor conformance suite (executor_conformance.h): the executors' declarations of the
// tests they do not support, the suite's parameters, its fixture, and its environment (prints
// the declarations before the first test, destroys the shared executors after the last).
#include "tests/conformance/executor_conformance.h"

#include <cctype>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugin/backend/executor_registry.h"

namespace vgpu {
namespace executor_test {
namespace {

// The tests each executor does not support, with the reason. An executor absent here runs the
// whole suite. A new entry needs a reason a reader can check; one that names no test of the
// suite fails the run (ConformanceEnvironment checks the table).
const UnsupportedTest kUnsupportedTests[] = {
    {"cuda", "RnnKernels.*",
     "the CUDA executor has no recurrent kernels yet: rnn_forward and rnn_backward fail with "
     "Unimplemented (cuda/kernels/rnn_kernels.cu)"},
    {"cuda", "ConvolutionKernels.PatchesBeyondTheScratchBudgetAreRefused",
     "the scratch budget is the CPU executor's own limit on its im2col patch buffer; cuDNN "
     "convolves without one"},
};

constexpr char kInstantiation[] = "Conformance/";

// "Conformance/<Fixture>" -> "<Fixture>"; "<Test>/<executor>" -> "<Test>".
std::string FixtureOf(const std::string& test_suite_name) {
  return test_suite_name.substr(test_suite_name.rfind('/') + 1);
}
std::string TestOf(const std::string& test_name) {
  return test_name.substr(0, test_name.rfind('/'));
}

// The conformance suites gtest registered (Conformance/<Fixture>).
std::vector<const ::testing::TestSuite*> ConformanceSuites() {
  std::vector<const ::testing::TestSuite*> suites;
  const ::testing::UnitTest& unit_test = *::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit_test.total_test_suite_count(); ++i) {
    const ::testing::TestSuite* suite = unit_test.GetTestSuite(i);
    if (absl::StartsWith(suite->name(), kInstantiation)) suites.push_back(suite);
  }
  return suites;
}

// Whether `entry` names a test of the registered suites.
bool NamesATest(const UnsupportedTest& entry,
                const std::vector<const ::testing::TestSuite*>& suites) {
  const std::string name = entry.test;
  const size_t dot = name.find('.');
  if (dot == std::string::npos) return false;
  const std::string fixture = name.substr(0, dot), test = name.substr(dot + 1);
  for (const ::testing::TestSuite* suite : suites) {
    if (FixtureOf(suite->name()) != fixture) continue;
    if (test == "*") return true;
    for (int i = 0; i < suite->total_test_count(); ++i) {
      if (TestOf(suite->GetTestInfo(i)->name()) == test) return true;
    }
  }
  return false;
}

// Before the first test: when a conformance test is to run, checks that the table names only
// tests of the suite and prints the declarations of this build's executors. After the last
// test: destroys the executors the tests shared.
class ConformanceEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::vector<const ::testing::TestSuite*> suites = ConformanceSuites();
    bool runs = false;
    for (const ::testing::TestSuite* suite : suites) runs |= suite->should_run();
    if (!runs) return;
    for (const UnsupportedTest& entry : UnsupportedTests()) {
      EXPECT_TRUE(NamesATest(entry, suites))
          << "the conformance suite's table of unsupported tests names '" << entry.test
          << "' (" << entry.executor << "), which is no test of the suite";
    }
    const std::vector<std::string> executors = ConformanceExecutors();
    std::printf("[conformance] executors of this build: %s\n",
                absl::StrJoin(executors, ", ").c_str());
    int declared = 0;
    for (const std::string& executor : executors) {
      for (const UnsupportedTest& entry : UnsupportedTests()) {
        if (executor != entry.executor) continue;
        if (declared++ == 0) {
          std::printf("[conformance] tests an executor does not support (skipped there):\n");
        }
        std::printf("[conformance]   %s: %s: %s\n", entry.executor, entry.test, entry.reason);
      }
    }
    if (declared == 0) std::printf("[conformance] every executor supports every test\n");
    std::fflush(stdout);
  }

  void TearDown() override { TestExecutor::DestroyAll(); }
};

[[maybe_unused]] ::testing::Environment* const kConformanceEnvironment =
    ::testing::AddGlobalTestEnvironment(new ConformanceEnvironment());  // owned by gtest

}  // namespace

absl::Span<const UnsupportedTest> UnsupportedTests() { return kUnsupportedTests; }

const UnsupportedTest* FindUnsupported(const std::string& executor, const std::string& fixture,
                                       const std::string& test_name) {
  const std::string test = absl::StrCat(fixture, ".", test_name);
  const std::string whole_fixture = absl::StrCat(fixture, ".*");
  for (const UnsupportedTest& entry : UnsupportedTests()) {
    if (executor == entry.executor && (test == entry.test || whole_fixture == entry.test)) {
      return &entry;
    }
  }
  return nullptr;
}

std::vector<std::string> ConformanceExecutors() {
  std::vector<std::string> names;
  for (const ExecutorRegistration& registration : RegisteredExecutors()) {
    names.push_back(registration.name);
  }
  return names;
}

std::string ExecutorParamName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

void ExecutorConformanceTest::SetUp() {
  const ::testing::TestInfo& info = *::testing::UnitTest::GetInstance()->current_test_info();
  const std::string& name = GetParam();
  if (const UnsupportedTest* entry =
          FindUnsupported(name, FixtureOf(info.test_suite_name()), TestOf(info.name()))) {
    GTEST_SKIP() << "executor " << name << " does not support this test: " << entry->reason;
  }
  TestExecutor& executor = TestExecutor::Named(name);
  if (!executor.status().ok()) {
    if (absl::IsFailedPrecondition(executor.status())) {
      GTEST_SKIP() << "executor " << name
                   << " cannot be created here: " << executor.status().message();
    }
    FAIL() << "executor " << name << " cannot be created: " << executor.status();
  }
  executor_ = &executor;
}

}  // namespace executor_test
}  // namespace vgpu
