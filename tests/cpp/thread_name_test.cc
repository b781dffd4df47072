// Tests of the plugin's thread names (common/thread_name.h): a name is set on the calling thread
// only, cut to Linux's 15 characters, and the plugin's own worker threads carry "vgpu-" names.
#include <pthread.h>

#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "plugin/backend/stream_queue.h"
#include "plugin/common/thread_name.h"

namespace vgpu {
namespace {

std::string CurrentThreadName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

TEST(ThreadName, NamesOnlyTheCallingThreadAndCutsToFifteenCharacters) {
  const std::string before = CurrentThreadName();
  std::string seen;
  std::thread named([&seen] {
    NameCurrentThread("vgpu-a-rather-long-role-name");
    seen = CurrentThreadName();
  });
  named.join();
  EXPECT_EQ(seen, "vgpu-a-rather-l");
  EXPECT_EQ(CurrentThreadName(), before);
}

TEST(ThreadName, StreamWorkerIsNamedVgpuStream) {
  std::string worker_name;
  StreamQueue stream(3, 0, [&worker_name](StreamQueue::Work&, const absl::Status&) {
    worker_name = CurrentThreadName();
    return absl::OkStatus();
  });
  Command command;
  command.kind = CommandKind::kMemset;
  stream.WaitUntilCompleted(stream.Enqueue(std::move(command)));
  EXPECT_EQ(worker_name, "vgpu-stream");
}

}  // namespace
}  // namespace vgpu
