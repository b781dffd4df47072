// The executor conformance suite: every kernel test of tests/conformance/ runs on each executor
// the build's executor registry offers ("cpu"; "cuda" in a VGPU_CUDA build). A test suite of it
// is a fixture derived from ExecutorConformanceTest, its tests are TEST_Ps that take their
// launches from Launch(), and VGPU_CONFORMANCE_SUITE(Fixture) instantiates it once per executor:
// the tests are named Conformance/<Fixture>.<Test>/<executor>, so
//   --gtest_filter='Conformance/*/cuda'
// runs the suite on one executor. A test is skipped, naming why, on an executor that cannot be
// created here (cuda without a GPU) and on one that declares it unsupported; the declarations
// are one table (executor_conformance.cc), printed once before the first test of the suite.
#ifndef VGPU_TESTS_CONFORMANCE_EXECUTOR_CONFORMANCE_H_
#define VGPU_TESTS_CONFORMANCE_EXECUTOR_CONFORMANCE_H_

#include <string>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "tests/conformance/executor_kernel_harness.h"

namespace vgpu {
namespace executor_test {

// A test an executor does not support, and why. `test` is "<Fixture>.<Test>", or "<Fixture>.*"
// for every test of a fixture.
struct UnsupportedTest {
  const char* executor;
  const char* test;
  const char* reason;
};

// Every executor's declarations (the table in executor_conformance.cc).
absl::Span<const UnsupportedTest> UnsupportedTests();

// The declaration that makes `executor` skip test `test_name` of `fixture`, or null.
const UnsupportedTest* FindUnsupported(const std::string& executor, const std::string& fixture,
                                       const std::string& test_name);

// The names of the executors this build's registry offers, in registration order: the suite's
// parameters. Evaluated when gtest registers the tests (before main's tests run), so executors
// a test registers later are not among them.
std::vector<std::string> ConformanceExecutors();

// The test name suffix for executor `info.param` (its name, with any character that is not a
// letter or a digit replaced by '_').
std::string ExecutorParamName(const ::testing::TestParamInfo<std::string>& info);

// The base of every conformance fixture: the executor under test (GetParam()), created on first
// use and shared by the tests (TestExecutor::Named).
class ExecutorConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Skips the test where the executor declares it unsupported or cannot be created here
  // (FailedPrecondition: no device); fails it where the executor cannot be created otherwise.
  void SetUp() override;

  // A new launch on the executor under test.
  ExecutorLaunch Launch() { return ExecutorLaunch(*executor_); }
  TestExecutor& executor() { return *executor_; }

 private:
  TestExecutor* executor_ = nullptr;
};

}  // namespace executor_test
}  // namespace vgpu

// Instantiates the conformance fixture `fixture` (derived from ExecutorConformanceTest) once per
// executor of the build (the test suite Conformance/<fixture>). Use at namespace scope, once per
// fixture.
#define VGPU_CONFORMANCE_SUITE(fixture)                                          \
  INSTANTIATE_TEST_SUITE_P(                                                      \
      Conformance, fixture,                                                      \
      ::testing::ValuesIn(::vgpu::executor_test::ConformanceExecutors()),        \
      ::vgpu::executor_test::ExecutorParamName)

#endif  // VGPU_TESTS_CONFORMANCE_EXECUTOR_CONFORMANCE_H_
