// The executor conformance suite's harness (executor_kernel_harness.h): guarded buffers, the
// executors the tests share, and one launch run through an executor as a session runs it.
#include "tests/conformance/executor_kernel_harness.h"

#include <algorithm>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "plugin/backend/device_arena.h"
#include "plugin/backend/executor_registry.h"

namespace vgpu {
namespace executor_test {
namespace {

constexpr uint8_t kCanary = 0xAB;
constexpr size_t kCanaryBytes = 64;

// The test executors' options: small, and the same on every executor.
constexpr uint64_t kMemoryPerDevice = 256ull << 20;
// Three compute threads: more than two, so that on the CPU executor no launch takes the serial
// path (CpuExecutor::SerialLaunchBytes) and every kernel splits its work as on bigger machines.
constexpr int kComputeThreads = 3;
// The tenant every test launch is filed under (fair scheduling on a shared executor).
constexpr uint64_t kTenant = 1;

std::vector<std::unique_ptr<TestExecutor>>& MadeExecutors() {
  static auto* executors = new std::vector<std::unique_ptr<TestExecutor>>();  // never destroyed
  return *executors;
}

// The device memory of one launch on device 0 of `target`: one allocation per distinct guarded
// buffer, holding its bytes and its canary, all under a fresh owner and freed together when
// this goes out of scope (after the stream has been synchronized). Copies are stream-ordered,
// each with a pin of the range it names, as a session issues them.
class LaunchMemory {
 public:
  explicit LaunchMemory(TestExecutor& target)
      : target_(target),
        executor_(*target.executor()),
        arena_(executor_.arena(0)),
        owner_(target.NewOwner()) {}
  ~LaunchMemory() { arena_.FreeAllOwnedBy(owner_); }
  LaunchMemory(const LaunchMemory&) = delete;
  LaunchMemory& operator=(const LaunchMemory&) = delete;

  // The device copy of `buffer` (its bytes, then its canary): allocated and copied in on the
  // first call for `buffer`, the same address on later ones.
  absl::StatusOr<uint8_t*> Place(GuardedBuffer* buffer) {
    for (const Allocation& allocation : allocations_) {
      if (allocation.buffer == buffer) return allocation.device;
    }
    const uint64_t size = buffer->guarded_size();
    absl::StatusOr<uint64_t> address = arena_.Allocate(size, owner_);
    if (!address.ok()) return address.status();
    absl::StatusOr<uint8_t*> device = arena_.Translate(*address, size, owner_);
    if (!device.ok()) return device.status();
    allocations_.push_back(Allocation{buffer, *address, *device});
    if (absl::Status copied = Copy(CommandKind::kMemcpyHtoD, allocations_.back()); !copied.ok()) {
      return copied;
    }
    return *device;
  }

  // Pins of every allocation, for the launch that names them.
  absl::StatusOr<PinnedRanges> PinAll() {
    PinnedRanges pins;
    for (const Allocation& allocation : allocations_) {
      absl::StatusOr<DeviceArena::Pin> pin =
          arena_.PinRange(allocation.address, allocation.buffer->guarded_size(), owner_);
      if (!pin.ok()) return pin.status();
      pins.push_back(*std::move(pin));
    }
    return pins;
  }

  // Copies every allocation back into its guarded buffer (canary included).
  absl::Status CopyBackAll() {
    for (const Allocation& allocation : allocations_) {
      if (absl::Status copied = Copy(CommandKind::kMemcpyDtoH, allocation); !copied.ok()) {
        return copied;
      }
    }
    return absl::OkStatus();
  }

 private:
  struct Allocation {
    GuardedBuffer* buffer;
    uint64_t address;  // the arena's tagged address
    uint8_t* device;   // in the executor's address space
  };

  // Host to device (kMemcpyHtoD) or device to host (kMemcpyDtoH), the whole guarded buffer.
  absl::Status Copy(CommandKind kind, const Allocation& allocation) {
    const uint64_t size = allocation.buffer->guarded_size();
    absl::StatusOr<DeviceArena::Pin> pin = arena_.PinRange(allocation.address, size, owner_);
    if (!pin.ok()) return pin.status();
    PinnedRanges pins;
    pins.push_back(*std::move(pin));
    const bool to_device = kind == CommandKind::kMemcpyHtoD;
    CopyRequest request;
    request.kind = kind;
    request.device = 0;
    request.source = to_device ? allocation.buffer->data() : allocation.device;
    request.destination = to_device ? allocation.device : allocation.buffer->data();
    request.source_on_device = !to_device;
    request.destination_on_device = to_device;
    request.size = size;
    return executor_.Copy(target_.stream(), kTenant, request, pins);
  }

  TestExecutor& target_;
  BackingExecutor& executor_;
  DeviceArena& arena_;
  const uint64_t owner_;
  std::vector<Allocation> allocations_;
};

}  // namespace

GuardedBuffer::GuardedBuffer(size_t bytes)
    : bytes_(bytes), storage_(bytes + kCanaryBytes, kCanary) {}

GuardedBuffer GuardedBuffer::OfBytes(const void* data, size_t size) {
  GuardedBuffer buffer(size);
  if (size > 0) std::memcpy(buffer.data(), data, size);
  return buffer;
}

void GuardedBuffer::Resize(size_t bytes) {
  storage_.resize(bytes_);  // without the canary
  storage_.resize(bytes, 0);
  storage_.resize(bytes + kCanaryBytes, kCanary);
  bytes_ = bytes;
}

bool GuardedBuffer::CanaryIntact() const {
  return std::all_of(storage_.begin() + static_cast<std::ptrdiff_t>(bytes_), storage_.end(),
                     [](uint8_t byte) { return byte == kCanary; });
}

TensorDescriptorSettings TensorSettings(const std::vector<int64_t>& dims, DType dtype) {
  TensorDescriptorSettings tensor;
  tensor.dtype = dtype;
  tensor.rank = static_cast<int32_t>(dims.size());
  for (size_t i = 0; i < dims.size() && i < static_cast<size_t>(kMaxRank); ++i) {
    tensor.dims[i] = dims[i];
  }
  return tensor;
}

FilterDescriptorSettings FilterSettings(const std::vector<int64_t>& dims) {
  FilterDescriptorSettings filter;
  filter.rank = static_cast<int32_t>(dims.size());
  for (size_t i = 0; i < dims.size() && i < static_cast<size_t>(kMaxRank); ++i) {
    filter.dims[i] = dims[i];
  }
  return filter;
}

TestExecutor& TestExecutor::Named(const std::string& name) {
  for (const std::unique_ptr<TestExecutor>& made : MadeExecutors()) {
    if (made->name() == name) return *made;
  }
  MadeExecutors().push_back(std::unique_ptr<TestExecutor>(new TestExecutor(name)));
  return *MadeExecutors().back();
}

void TestExecutor::DestroyAll() { MadeExecutors().clear(); }

TestExecutor::TestExecutor(std::string name) : name_(std::move(name)) {
  ExecutorOptions options;
  options.device_count = 1;
  options.memory_limit_per_device = kMemoryPerDevice;
  options.compute_threads = kComputeThreads;
  absl::StatusOr<std::unique_ptr<BackingExecutor>> executor = CreateExecutor(name_, options);
  if (!executor.ok()) {
    status_ = executor.status();
    return;
  }
  absl::StatusOr<std::unique_ptr<ExecutorStream>> stream = (*executor)->CreateStream(0);
  if (!stream.ok()) {
    status_ = stream.status();
    return;
  }
  executor_ = *std::move(executor);
  stream_ = *std::move(stream);
}

TestExecutor::~TestExecutor() {
  if (executor_ == nullptr) return;
  // Every launch synchronized before it returned; this only releases what the stream holds.
  (void)executor_->SynchronizeStream(stream_.get());
  stream_.reset();
}

GuardedBuffer* ExecutorLaunch::Own(GuardedBuffer buffer) {
  owned_.push_back(std::move(buffer));
  return &owned_.back();
}

ExecutorLaunch& ExecutorLaunch::Buffer(GuardedBuffer* buffer) {
  buffers_.push_back(buffer);
  return *this;
}

ExecutorLaunch& ExecutorLaunch::Buffers(std::initializer_list<GuardedBuffer*> buffers) {
  buffers_.insert(buffers_.end(), buffers.begin(), buffers.end());
  return *this;
}

size_t ExecutorLaunch::AddBuffer(GuardedBuffer buffer) {
  buffers_.push_back(Own(std::move(buffer)));
  return buffers_.size() - 1;
}

absl::Status ExecutorLaunch::Run(KernelId id) {
  const uint32_t kernel_id = static_cast<uint32_t>(id);
  if (!executor_.status().ok()) {
    ADD_FAILURE() << "executor " << executor_.name() << " is unavailable: " << executor_.status();
    return executor_.status();
  }
  BackingExecutor& executor = *executor_.executor();
  const absl::string_view kernel_name = executor.KernelName(kernel_id);
  EXPECT_FALSE(kernel_name.empty()) << executor_.name() << " has no kernel " << kernel_id;
  if (kernel_name.empty()) return absl::NotFoundError("no such kernel");
  for (const auto& copy_in : copy_in_) copy_in();

  LaunchMemory memory(executor_);
  std::vector<uint8_t*> pointers;
  std::vector<uint64_t> sizes;
  for (GuardedBuffer* buffer : buffers_) {
    absl::StatusOr<uint8_t*> device = memory.Place(buffer);
    if (!device.ok()) {
      ADD_FAILURE() << executor_.name() << ": no device copy of buffer " << pointers.size()
                    << ": " << device.status();
      return device.status();
    }
    pointers.push_back(*device);
    sizes.push_back(buffer->size());
  }
  std::vector<DescriptorView> views;
  for (const auto& [kind, bytes] : descriptors_) views.push_back(DescriptorView{kind, bytes});
  LaunchRequest request;
  request.device = 0;
  request.kernel_id = kernel_id;
  request.launch = LaunchView{pointers, sizes, params_, views};

  absl::StatusOr<PinnedRanges> pins = memory.PinAll();
  if (!pins.ok()) {
    ADD_FAILURE() << executor_.name() << ": cannot pin the launch's memory: " << pins.status();
    return pins.status();
  }
  absl::Status status = executor.Launch(executor_.stream(), kTenant, request, *pins);
  pins->clear();  // the executor moved out what it keeps until the stream has done the work
  const absl::Status synchronized = executor.SynchronizeStream(executor_.stream());
  if (status.ok()) status = synchronized;

  const absl::Status copied_back = memory.CopyBackAll();
  EXPECT_TRUE(copied_back.ok()) << executor_.name() << " " << kernel_name
                                << ": copying the buffers back failed: " << copied_back;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    EXPECT_TRUE(buffers_[i]->CanaryIntact())
        << executor_.name() << " " << kernel_name << " wrote past the end of buffer " << i;
  }
  for (const auto& copy_back : copy_back_) copy_back();
  return status;
}

}  // namespace executor_test
}  // namespace vgpu
