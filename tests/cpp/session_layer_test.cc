// Tests of the executor-independent session layer (backend/client_session.h) over a scripted
// executor that is not the CPU one: commands are validated once, in the session, and only
// validated work reaches the executor, as typed operations on resolved, pinned memory; streams
// get the executor's own state and are synchronised through it before a notification; forward-
// mode descriptors are the executor's objects; an arena carves a storage the executor provides.
#include <cstring>
#include <memory>
#include <utility>
#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/backend/backing_executor.h"
#include "plugin/backend/device_address.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/launch_params.h"

namespace vgpu {
namespace {

constexpr uint32_t kScaleKernel = 7;  // the scripted executor's one kernel: buffer[0] *= 2

// Storage over a plain vector, counting the bytes it was asked to zero (scrubbing).
class VectorStorage final : public ArenaStorage {
 public:
  explicit VectorStorage(uint64_t size) : bytes_(size, 0) {}
  uint8_t* base() const override { return const_cast<uint8_t*>(bytes_.data()); }
  uint64_t size() const override { return bytes_.size(); }
  void Zero(uint64_t offset, uint64_t size) override {
    std::memset(bytes_.data() + offset, 0, size);
    zeroed += size;
  }
  uint64_t zeroed = 0;

 private:
  std::vector<uint8_t> bytes_;
};

class ScriptedStream final : public ExecutorStream {
 public:
  explicit ScriptedStream(uint32_t device) : device(device) {}
  const uint32_t device;
  int synchronisations = 0;  // touched only on the stream's worker and by synchronisations
};

// An executor with one device whose every operation is logged; it trusts what the session hands
// it, as a real executor does.
class ScriptedExecutor final : public BackingExecutor {
 public:
  ScriptedExecutor() {
    auto storage = std::make_unique<VectorStorage>(1 << 20);
    storage_ = storage.get();
    arena_ = *DeviceArena::Create(0, std::move(storage));
  }

  absl::string_view name() const override { return "scripted"; }
  int device_count() const override { return 1; }
  SessionLimits session_limits() const override { return SessionLimits{}; }
  absl::string_view KernelName(uint32_t id) const override {
    return id == kScaleKernel ? "Scale" : absl::string_view();
  }
  ExecutorStats stats() const override {
    ExecutorStats stats;
    stats.descriptors_created = descriptors_created_.load();
    return stats;
  }
  DeviceArena& arena(uint32_t) override { return *arena_; }
  DeviceArena* ArenaForAddress(uint64_t address) override {
    uint32_t device;
    uint64_t offset;
    return DecodeDeviceAddress(address, &device, &offset) && device == 0 ? arena_.get() : nullptr;
  }
  absl::StatusOr<std::unique_ptr<ExecutorStream>> CreateStream(uint32_t device) override {
    Log("stream");
    auto stream = std::make_unique<ScriptedStream>(device);
    last_stream_ = stream.get();
    return stream;
  }
  absl::Status Copy(ExecutorStream* stream, uint64_t, const CopyRequest& request,
                    PinnedRanges&) override {
    Log(stream == nullptr ? "copy-now" : "copy");
    std::memcpy(request.destination, request.source, request.size);
    return absl::OkStatus();
  }
  absl::Status Memset(ExecutorStream*, uint64_t, const MemsetRequest& request,
                      PinnedRanges&) override {
    Log("memset");
    std::memset(request.destination, static_cast<int>(request.pattern), request.size);
    return absl::OkStatus();
  }
  absl::Status Launch(ExecutorStream*, uint64_t, const LaunchRequest& request,
                      PinnedRanges& pins) override {
    Log("launch");
    launched_descriptors_.clear();  // the session layer parsed the section: kind and settings
    for (const DescriptorView& view : request.launch.descriptors) {
      launched_descriptors_.push_back(
          {view.kind, std::vector<uint8_t>(view.settings.begin(), view.settings.end())});
    }
    kept_pins_ = std::move(pins);  // as an asynchronous executor keeps them until it is done
    float value;
    std::memcpy(&value, request.launch.buffers[0], sizeof(value));
    value *= 2;
    std::memcpy(request.launch.buffers[0], &value, sizeof(value));
    return absl::OkStatus();
  }
  absl::Status SynchronizeStream(ExecutorStream* stream) override {
    Log("sync");
    ++static_cast<ScriptedStream*>(stream)->synchronisations;
    kept_pins_.clear();
    return absl::OkStatus();
  }

  std::vector<std::string> log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  VectorStorage* storage_ = nullptr;
  ScriptedStream* last_stream_ = nullptr;
  std::vector<std::pair<DescriptorKind, std::vector<uint8_t>>> launched_descriptors_;

 private:
  void Log(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    log_.push_back(what);
  }
  std::unique_ptr<DeviceArena> arena_;
  PinnedRanges kept_pins_;
  std::mutex mu_;
  std::vector<std::string> log_;
};

Command Make(CommandKind kind, uint64_t stream = 0) {
  Command command;
  command.kind = kind;
  command.stream = stream;
  return command;
}

class SessionLayerTest : public ::testing::Test {
 protected:
  void SetUp() override { session_ = executor_.OpenSession(nullptr); }
  void TearDown() override { session_.reset(); }

  uint64_t Allocate(uint64_t size) {
    Command command = Make(CommandKind::kAllocate);
    command.size = size;
    Reply reply = session_->Handle(std::move(command));
    EXPECT_TRUE(reply.status.ok()) << reply.status;
    return reply.value;
  }
  absl::Status Handle(Command command) { return session_->Handle(std::move(command)).status; }
  absl::Status Synchronize(uint64_t stream) {
    return Handle(Make(CommandKind::kSynchronizeStream, stream));
  }
  absl::Status WriteFloat(uint64_t stream, uint64_t address, const float* value) {
    Command copy = Make(CommandKind::kMemcpyHtoD, stream);
    copy.dst = address;
    copy.size = sizeof(float);
    copy.host_src = value;
    return Handle(std::move(copy));
  }
  float ReadFloat(uint64_t address) {
    float value = 0;
    Command copy = Make(CommandKind::kMemcpyNow);
    copy.src = address;
    copy.size = sizeof(value);
    copy.host_dst = &value;
    EXPECT_TRUE(Handle(std::move(copy)).ok());
    return value;
  }
  Command Scale(uint64_t stream, uint64_t address) {
    Command launch = Make(CommandKind::kLaunch, stream);
    launch.object = kScaleKernel;
    launch.buffers.push_back({address, sizeof(float)});
    return launch;
  }

  ScriptedExecutor executor_;
  std::unique_ptr<ExecutorSession> session_;
};

TEST_F(SessionLayerTest, ValidatedWorkReachesTheExecutorAsTypedOperationsOnItsMemory) {
  ASSERT_TRUE(Handle(Make(CommandKind::kCreateStream, 1)).ok());
  const uint64_t address = Allocate(64);
  const float three = 3.0f;
  ASSERT_TRUE(WriteFloat(1, address, &three).ok());
  ASSERT_TRUE(Handle(Scale(1, address)).ok());
  ASSERT_TRUE(Synchronize(1).ok());
  EXPECT_EQ(ReadFloat(address), 6.0f);
  // The kernel ran on the executor's storage, at the arena's offset of the allocation.
  float in_storage;
  std::memcpy(&in_storage, executor_.storage_->base() + (address & kDeviceOffsetMask),
              sizeof(in_storage));
  EXPECT_EQ(in_storage, 6.0f);
  EXPECT_EQ(executor_.log(),
            (std::vector<std::string>{"stream", "copy", "launch", "sync", "copy-now"}));
}

TEST_F(SessionLayerTest, InvalidCommandsNeverReachTheExecutor) {
  ASSERT_TRUE(Handle(Make(CommandKind::kCreateStream, 1)).ok());
  const uint64_t address = Allocate(64);
  Command unknown_kernel = Scale(1, address);
  unknown_kernel.object = 12345;
  ASSERT_TRUE(Handle(std::move(unknown_kernel)).ok());  // queued: fails in its turn
  absl::Status status = Synchronize(1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("unknown kernel id 12345"), std::string::npos)
      << status;

  ASSERT_TRUE(Handle(Scale(1, address + 4096)).ok());  // outside the allocation
  status = Synchronize(1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("Scale"), std::string::npos) << status;

  Command bad_memset = Make(CommandKind::kMemset, 1);
  bad_memset.dst = address;
  bad_memset.size = 6;
  bad_memset.pattern_bytes = 4;  // 6 bytes are not whole words
  ASSERT_TRUE(Handle(std::move(bad_memset)).ok());
  EXPECT_EQ(Synchronize(1).code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(Handle(Scale(99, address)).code(), absl::StatusCode::kNotFound);  // no such stream
  // Only the stream creation and the synchronisations reached the executor.
  for (const std::string& call : executor_.log()) {
    EXPECT_TRUE(call == "stream" || call == "sync") << call;
  }
}

TEST_F(SessionLayerTest, ANotificationWaitsForTheExecutorToFinishTheStream) {
  ASSERT_TRUE(Handle(Make(CommandKind::kCreateStream, 1)).ok());
  const uint64_t address = Allocate(64);
  ASSERT_TRUE(Handle(Scale(1, address)).ok());
  Command notify = Make(CommandKind::kNotify, 1);
  notify.token = 5;
  ASSERT_TRUE(Handle(std::move(notify)).ok());
  ASSERT_TRUE(Synchronize(1).ok());
  const std::vector<std::string> log = executor_.log();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[1], "launch");
  EXPECT_EQ(log[2], "sync");  // before the notification was signalled
  EXPECT_EQ(executor_.last_stream_->synchronisations, 2);
}

TEST_F(SessionLayerTest, ForwardModeDescriptorsAreTheExecutorsObjectsAndResolveIntoTheLaunch) {
  ASSERT_TRUE(Handle(Make(CommandKind::kCreateStream, 1)).ok());
  Command create = Make(CommandKind::kDescriptorCreate);
  create.object = 40;
  create.params = {static_cast<uint8_t>(DescriptorKind::kActivation)};
  ASSERT_TRUE(Handle(std::move(create)).ok());
  EXPECT_EQ(executor_.stats().descriptors_created, 1u);
  Command set = Make(CommandKind::kDescriptorSet);
  set.object = 40;
  set.params = {1, 2, 3, 4};
  ASSERT_TRUE(Handle(std::move(set)).ok());

  // A launch naming descriptor 40 by reference carries its settings when it reaches the
  // executor, parsed by the session layer: one activation descriptor with the four bytes.
  const uint64_t address = Allocate(64);
  Command launch = Scale(1, address);
  ParamBlock section;
  ParamWriter writer(&section);
  const uint64_t id = 40;
  writer.Put(uint8_t{1})
      .Put(static_cast<uint8_t>(static_cast<uint8_t>(DescriptorKind::kActivation) |
                                kDescriptorReference))
      .Put(static_cast<uint16_t>(sizeof(id)))
      .PutBytes(&id, sizeof(id));
  launch.descriptors.assign(section.begin(), section.end());
  ASSERT_TRUE(Handle(std::move(launch)).ok());
  ASSERT_TRUE(Synchronize(1).ok());
  ASSERT_EQ(executor_.launched_descriptors_.size(), 1u);
  EXPECT_EQ(executor_.launched_descriptors_[0].first, DescriptorKind::kActivation);
  EXPECT_EQ(executor_.launched_descriptors_[0].second, (std::vector<uint8_t>{1, 2, 3, 4}));

  Command destroy = Make(CommandKind::kDescriptorDestroy);
  destroy.object = 40;
  ASSERT_TRUE(Handle(std::move(destroy)).ok());
  Command again = Make(CommandKind::kDescriptorDestroy);
  again.object = 40;
  EXPECT_EQ(Handle(std::move(again)).code(), absl::StatusCode::kNotFound);
}

TEST_F(SessionLayerTest, TheArenaScrubsTheExecutorsStorageWhenMemoryIsFreed) {
  const uint64_t address = Allocate(1000);
  Command free = Make(CommandKind::kFree);
  free.dst = address;
  ASSERT_TRUE(Handle(std::move(free)).ok());
  EXPECT_EQ(executor_.storage_->zeroed, DeviceArena::ChargedSize(1000));
  EXPECT_EQ(executor_.DeviceMemoryInfo(0).bytes_in_use, 0u);
}

TEST_F(SessionLayerTest, StatsCountLaunchesTheirTimeErrorsAndOpenStreams) {
  ASSERT_TRUE(Handle(Make(CommandKind::kCreateStream, 1)).ok());
  const uint64_t address = Allocate(64);
  ASSERT_TRUE(Handle(Scale(1, address)).ok());
  ASSERT_TRUE(Handle(Scale(1, address)).ok());
  ASSERT_TRUE(Synchronize(1).ok());
  EXPECT_EQ(Handle(Scale(42, address)).code(), absl::StatusCode::kNotFound);  // no stream 42
  ASSERT_TRUE(Handle(Scale(1, address + 4096)).ok());  // queued, refused in its turn
  EXPECT_FALSE(Synchronize(1).ok());
  const SessionStats stats = session_->Stats();
  EXPECT_EQ(stats.launches, 2u);
  EXPECT_GT(stats.kernel_ns, 0u);
  EXPECT_EQ(stats.errors, 2u);  // the unknown stream and the bad range (not its report)
  EXPECT_EQ(stats.streams, 1u);
  EXPECT_EQ(stats.queued, 0u);  // all of it ran
}

}  // namespace
}  // namespace vgpu
