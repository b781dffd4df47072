// Tests of the transport factory (transport/transport_factory.h): schemes read from addresses,
// the in-process transport opened on a session of the caller's executor, an unknown scheme
// refused with the known ones listed, a server that does not answer refused with the opener's
// error, and a new scheme registered (and a taken one refused).
#include "plugin/transport/transport_factory.h"

#include <unistd.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "plugin/backend/executor_registry.h"
#include "test_executors.h"

namespace vgpu {
namespace {

TEST(TransportFactory, ReadsTheSchemeBeforeTheSeparator) {
  EXPECT_EQ(TransportScheme("inproc"), "inproc");
  EXPECT_EQ(TransportScheme("unix:///tmp/a.sock"), "unix");
  EXPECT_EQ(TransportScheme("tcp://127.0.0.1:7000"), "tcp");
  EXPECT_EQ(TransportScheme("shm://name"), "shm");
}

TEST(TransportFactory, OpensInprocOnASessionOfTheCallersExecutor) {
  absl::StatusOr<std::unique_ptr<BackingExecutor>> executor =
      vgpu_test::CreateCpuExecutor(2, 32ull << 20);
  ASSERT_TRUE(executor.ok()) << executor.status();
  TransportContext context;
  int sessions_opened = 0;
  context.open_inproc_session = [&](CompletionSink* sink)
      -> absl::StatusOr<std::unique_ptr<ExecutorSession>> {
    ++sessions_opened;
    return (*executor)->OpenSession(sink);
  };
  context.inproc_device_count = 2;
  context.inproc_memory_limit = 32ull << 20;
  absl::StatusOr<OpenedTransport> opened = OpenTransport("inproc", context);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(sessions_opened, 1);
  EXPECT_EQ(opened->device_count, 2u);
  EXPECT_EQ(opened->memory_limit, 32ull << 20);
  EXPECT_EQ(opened->transport->Describe(), "inproc");

  Command allocate;
  allocate.kind = CommandKind::kAllocate;
  allocate.device = 1;
  allocate.size = 1024;
  Reply reply = opened->transport->Call(allocate);
  EXPECT_TRUE(reply.status.ok()) << reply.status;
  EXPECT_GE((*executor)->DeviceMemoryInfo(1).bytes_in_use, 1024u);
  opened->transport.reset();  // the session goes, and with it what it held
  EXPECT_EQ((*executor)->DeviceMemoryInfo(1).bytes_in_use, 0u);
}

TEST(TransportFactory, RefusesInprocWithoutAnExecutor) {
  absl::StatusOr<OpenedTransport> opened = OpenTransport("inproc", TransportContext{});
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TransportFactory, RefusesAnUnknownSchemeListingTheKnownOnes) {
  absl::StatusOr<OpenedTransport> opened = OpenTransport("carrier-pigeon://gpu", {});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(opened.status().message());
  EXPECT_NE(message.find("inproc, unix, tcp"), std::string::npos) << message;
}

TEST(TransportFactory, ASocketWithNoServerIsTheOpenersError) {
  const std::string path = "/tmp/vgpu-factory-test-" + std::to_string(::getpid()) + ".sock";
  TransportContext context;
  context.handshake_timeout_ms = 500;
  absl::StatusOr<OpenedTransport> opened = OpenTransport("unix://" + path, context);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find(path), std::string::npos) << opened.status();
}

TEST(TransportFactory, RegistersANewSchemeAndRefusesATakenOne) {
  // Schemes stay registered for the process: a fresh scheme and a counter that outlives the
  // test keep it repeatable (--gtest_repeat).
  static int runs = 0;
  static int opened_count = 0;
  const std::string scheme = absl::StrCat("factorytest", runs++);
  const int opened_before = opened_count;
  TransportOpener opener = [](std::string_view endpoint, const TransportContext&)
      -> absl::StatusOr<OpenedTransport> {
    ++opened_count;
    return absl::UnavailableError(absl::StrCat("test scheme asked for ", endpoint));
  };
  ASSERT_TRUE(RegisterTransportScheme(scheme, opener).ok());
  absl::StatusOr<OpenedTransport> opened = OpenTransport(scheme + "://x", {});
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(opened_count, opened_before + 1);
  EXPECT_EQ(RegisterTransportScheme(scheme, opener).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(RegisterTransportScheme("tcp", opener).code(), absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace vgpu
