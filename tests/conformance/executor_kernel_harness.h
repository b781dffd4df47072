// The harness of the executor conformance suite: one kernel launch, built up as a client builds
// it (descriptor settings, buffers, a parameter block) and run through a real backing executor
// created by name from the executor registry, as a session runs it: every buffer is copied into
// device memory the executor allocated, followed there by canary bytes, the launch runs on the
// executor's stream, and after the stream is synchronized every buffer comes back with its
// canary, which must have survived (a kernel that writes past a buffer fails its test).
//
//   std::vector<float> x = {...}, y(4);
//   ASSERT_TRUE(ExecutorLaunch(TestExecutor::Named("cpu")).Describe(pooling).Tensor({1, 3, 3, 1})
//                   .Tensor({1, 2, 2, 1}).Buffer(&x).Buffer(&y).Run(pooling::kForward).ok());
//
// The kernel tests of the suite get their launches from ExecutorConformanceTest::Launch()
// (executor_conformance.h), on the executor the test is instantiated for. Nothing here depends
// on an executor's kernel table or on TensorFlow: the CPU test binary and the CUDA one both
// compile it.
#ifndef VGPU_TESTS_CONFORMANCE_EXECUTOR_KERNEL_HARNESS_H_
#define VGPU_TESTS_CONFORMANCE_EXECUTOR_KERNEL_HARNESS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "plugin/backend/backing_executor.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/protocol/launch_params.h"

namespace vgpu {
namespace executor_test {

// A buffer as the test sees it, in host memory: size() bytes, followed by canary bytes no
// kernel may touch. A launch copies all of it (canary included) to the device and back.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes);

  // A buffer holding a copy of `values` (or of `size` bytes at `data`).
  template <typename T>
  static GuardedBuffer Of(const std::vector<T>& values) {
    return OfBytes(values.data(), values.size() * sizeof(T));
  }
  static GuardedBuffer OfBytes(const void* data, size_t size);

  // The buffer's first byte; its canary follows at data() + size().
  uint8_t* data() { return storage_.data(); }
  const uint8_t* data() const { return storage_.data(); }
  size_t size() const { return bytes_; }
  // size() plus the canary's bytes: what a launch copies to the device and back.
  size_t guarded_size() const { return storage_.size(); }

  // The contents as values of T (size() / sizeof(T) of them).
  template <typename T>
  std::vector<T> As() const {
    std::vector<T> values(bytes_ / sizeof(T));
    if (!values.empty()) std::memcpy(values.data(), storage_.data(), values.size() * sizeof(T));
    return values;
  }

  // Keeps the first `bytes` bytes (zeros past the old size) and puts the canary after them.
  void Resize(size_t bytes);
  // Whether the canary bytes after the buffer are as they were written.
  bool CanaryIntact() const;

 private:
  size_t bytes_;
  std::vector<uint8_t> storage_;
};

// A buffer of `count` values of T, each `value`.
template <typename T>
GuardedBuffer Filled(size_t count, T value = T{}) {
  return GuardedBuffer::Of(std::vector<T>(count, value));
}

// Tensor descriptor settings of the given dims (dims past kMaxRank are dropped; rank still
// says how many were given) and dtype.
TensorDescriptorSettings TensorSettings(const std::vector<int64_t>& dims,
                                        DType dtype = DType::kFloat32);
// Filter descriptor settings of the given dims (likewise), the dtype left at its default.
FilterDescriptorSettings FilterSettings(const std::vector<int64_t>& dims);

// An executor the tests launch on: the one registered under a name, created on first use with
// small test options (one device, 256 MiB, two compute threads) and one stream, and kept for the
// rest of the process (creating a GPU executor per test would cost more than the tests), until
// DestroyAll(). Not thread-safe: the tests run on one thread.
class TestExecutor {
 public:
  // The executor registered as `name`. When it cannot be created here (no GPU for "cuda", a
  // name this build does not offer), status() says why, and launches on it fail.
  static TestExecutor& Named(const std::string& name);
  // Synchronizes and destroys every executor Named() made (the suite's environment, after the
  // last test); a later Named() creates a new one.
  static void DestroyAll();

  ~TestExecutor();
  TestExecutor(const TestExecutor&) = delete;
  TestExecutor& operator=(const TestExecutor&) = delete;

  const std::string& name() const { return name_; }
  // OK, or why the executor (or its stream) could not be created: the registry's error.
  const absl::Status& status() const { return status_; }
  // Null unless status() is OK.
  BackingExecutor* executor() const { return executor_.get(); }
  ExecutorStream* stream() const { return stream_.get(); }
  // A fresh owner for one launch's device memory (each launch frees what it allocated).
  uint64_t NewOwner() { return next_owner_++; }

 private:
  explicit TestExecutor(std::string name);

  const std::string name_;
  absl::Status status_;
  std::unique_ptr<BackingExecutor> executor_;
  std::unique_ptr<ExecutorStream> stream_;  // destroyed before executor_
  uint64_t next_owner_ = 1;
};

// One kernel launch on a TestExecutor. Descriptors, buffers and parameters are added in launch
// order; Run() copies the buffers to the device, launches, synchronizes, copies them back and
// checks every buffer's canary (a gtest failure, not a status). Buffers stay the test's: only
// Run() touches device memory, and it frees what it allocated before it returns.
class ExecutorLaunch {
 public:
  explicit ExecutorLaunch(TestExecutor& executor) : executor_(executor) {}
  ExecutorLaunch(const ExecutorLaunch&) = delete;
  ExecutorLaunch& operator=(const ExecutorLaunch&) = delete;

  // --- descriptors ---
  template <typename Settings>
  ExecutorLaunch& Describe(const Settings& settings) {
    std::vector<uint8_t> bytes(sizeof(Settings));
    std::memcpy(bytes.data(), &settings, sizeof(Settings));
    descriptors_.emplace_back(DescriptorTraits<Settings>::kKind, std::move(bytes));
    return *this;
  }
  // A tensor descriptor (TensorSettings(dims, dtype)).
  ExecutorLaunch& Tensor(const std::vector<int64_t>& dims, DType dtype = DType::kFloat32) {
    return Describe(TensorSettings(dims, dtype));
  }

  // --- buffers ---
  // A guarded buffer the test owns and reads back itself (after Run(), it holds what the
  // kernel left in device memory, also when the kernel failed). The same buffer named twice in
  // one launch is one allocation, as an in-place launch names it.
  ExecutorLaunch& Buffer(GuardedBuffer* buffer);
  ExecutorLaunch& Buffers(std::initializer_list<GuardedBuffer*> buffers);
  // A guarded copy of *values made when the launch runs; what the kernel wrote is copied back
  // into *values afterwards (also when the kernel fails).
  template <typename T>
  ExecutorLaunch& Buffer(std::vector<T>* values) {
    GuardedBuffer* buffer = Own(GuardedBuffer(0));
    buffers_.push_back(buffer);
    copy_in_.push_back([buffer, values] { *buffer = GuardedBuffer::Of(*values); });
    copy_back_.push_back([buffer, values] { *values = buffer->template As<T>(); });
    return *this;
  }
  // A buffer the launch owns; returns its index in the launch (for buffer()).
  size_t AddBuffer(GuardedBuffer buffer);
  // Buffer `index` of the launch (to read back, or to change before running).
  GuardedBuffer& buffer(size_t index) { return *buffers_[index]; }

  // --- parameter block ---
  template <typename T>
  ExecutorLaunch& Param(const T& value) {
    ParamWriter(&params_).Put(value);
    return *this;
  }
  template <typename T>
  ExecutorLaunch& ParamArray(const std::vector<T>& values) {
    ParamWriter(&params_).PutArray<T>(values);
    return *this;
  }
  // Appends a whole parameter block.
  ExecutorLaunch& Params(const ParamBlock& block) {
    params_.insert(params_.end(), block.begin(), block.end());
    return *this;
  }

  // Runs kernel `id` on the executor and returns the launch's status: the executor's error
  // for the launch, else the first error of its stream's synchronization. A test failure (and
  // NotFound) if the executor has no such kernel; a test failure (and that error) if the
  // executor is unavailable or its memory or copies fail.
  absl::Status Run(KernelId id);

 private:
  GuardedBuffer* Own(GuardedBuffer buffer);

  TestExecutor& executor_;
  std::vector<std::pair<DescriptorKind, std::vector<uint8_t>>> descriptors_;
  std::deque<GuardedBuffer> owned_;        // stable addresses
  std::vector<GuardedBuffer*> buffers_;    // in launch order
  std::vector<std::function<void()>> copy_in_, copy_back_;
  ParamBlock params_;
};

}  // namespace executor_test
}  // namespace vgpu

#endif  // VGPU_TESTS_CONFORMANCE_EXECUTOR_KERNEL_HARNESS_H_
