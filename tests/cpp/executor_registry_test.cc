// Tests of the executor registry (backend/executor_registry.h): the built-in CPU executor is
// offered under its name, an unknown name is refused with a message listing the known ones,
// registration of a new executor and refusal of a taken name, and that an executor created
// through the registry serves a session.
#include "plugin/backend/executor_registry.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "test_executors.h"

namespace vgpu {
namespace {

TEST(ExecutorRegistry, OffersTheCpuExecutorFirstAsTheDefault) {
  std::vector<ExecutorRegistration> executors = RegisteredExecutors();
  ASSERT_FALSE(executors.empty());
  EXPECT_EQ(executors.front().name, kDefaultExecutorName);
  EXPECT_FALSE(executors.front().description.empty());
}

TEST(ExecutorRegistry, CreatesTheCpuExecutorByNameAndItServesASession) {
  absl::StatusOr<std::unique_ptr<BackingExecutor>> executor =
      vgpu_test::CreateCpuExecutor(2, 64ull << 20);
  ASSERT_TRUE(executor.ok()) << executor.status();
  EXPECT_EQ((*executor)->name(), "cpu");
  EXPECT_EQ((*executor)->device_count(), 2);
  EXPECT_EQ((*executor)->DeviceMemoryInfo(1).limit_bytes, 64ull << 20);

  std::unique_ptr<ExecutorSession> session = (*executor)->OpenSession(nullptr);
  Command allocate;
  allocate.kind = CommandKind::kAllocate;
  allocate.device = 1;
  allocate.size = 4096;
  Reply reply = session->Handle(allocate);
  ASSERT_TRUE(reply.status.ok()) << reply.status;
  EXPECT_GE((*executor)->DeviceMemoryInfo(1).bytes_in_use, 4096u);
  EXPECT_EQ((*executor)->DeviceMemoryInfo(0).bytes_in_use, 0u);
  session.reset();  // releases what it held
  EXPECT_EQ((*executor)->DeviceMemoryInfo(1).bytes_in_use, 0u);
}

TEST(ExecutorRegistry, RefusesAnUnknownNameListingTheKnownOnes) {
  absl::StatusOr<std::unique_ptr<BackingExecutor>> executor =
      CreateExecutor("quantum", ExecutorOptions{});
  ASSERT_FALSE(executor.ok());
  EXPECT_EQ(executor.status().code(), absl::StatusCode::kNotFound);
  const std::string message(executor.status().message());
  EXPECT_NE(message.find("'quantum'"), std::string::npos) << message;
  EXPECT_NE(message.find("cpu"), std::string::npos) << message;
}

TEST(ExecutorRegistry, PassesTheFactorysErrorThrough) {
  ExecutorOptions options;
  options.device_count = 0;  // the CPU executor refuses it
  absl::StatusOr<std::unique_ptr<BackingExecutor>> executor = CreateExecutor("cpu", options);
  ASSERT_FALSE(executor.ok());
  EXPECT_EQ(executor.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ExecutorRegistry, RegistersANewExecutorAndRefusesATakenName) {
  // Registrations last for the process: a fresh name and a counter that outlives the test keep
  // the test repeatable (--gtest_repeat).
  static int runs = 0;
  static int created = 0;
  const std::string name = absl::StrCat("registry-test-fake-", runs++);
  const int created_before = created;
  ExecutorRegistration fake{name, "refuses to start, for this test",
                            [](const ExecutorOptions&)
                                -> absl::StatusOr<std::unique_ptr<BackingExecutor>> {
                              ++created;
                              return absl::UnavailableError("no such device here");
                            }};
  ASSERT_TRUE(RegisterExecutor(fake).ok());
  EXPECT_NE(RegisteredExecutorNames().find(name), std::string::npos);
  absl::StatusOr<std::unique_ptr<BackingExecutor>> executor =
      CreateExecutor(name, ExecutorOptions{});
  EXPECT_EQ(executor.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(created, created_before + 1);

  absl::Status again = RegisterExecutor(fake);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  absl::Status taken = RegisterExecutor({"cpu", "an impostor", fake.create});
  EXPECT_EQ(taken.code(), absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace vgpu
