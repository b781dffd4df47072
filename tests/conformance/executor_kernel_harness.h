// The harness of the executor-kernel tests: one launch of a CPU executor kernel, built up as a
// client builds it (descriptor settings, buffers, a parameter block) and run through the kernel
// table as a session runs it. Every buffer the kernel sees is followed by canary bytes, and
// every run checks that they survived, so a kernel that writes past a buffer fails its test.
//
//   std::vector<float> x = {...}, y(4);
//   ASSERT_TRUE(ExecutorLaunch().Describe(pooling).Tensor({1, 3, 3, 1}).Tensor({1, 2, 2, 1})
//                   .Buffer(&x).Buffer(&y).Run(pooling::kForward).ok());  // y: the result
#ifndef VGPU_TESTS_CONFORMANCE_EXECUTOR_KERNEL_HARNESS_H_
#define VGPU_TESTS_CONFORMANCE_EXECUTOR_KERNEL_HARNESS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <initializer_list>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/protocol/launch_params.h"

namespace vgpu {
namespace executor_test {

// A buffer of device memory as a kernel sees it: size() bytes, followed by canary bytes no
// kernel may touch.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes);

  // A buffer holding a copy of `values` (or of `size` bytes at `data`).
  template <typename T>
  static GuardedBuffer Of(const std::vector<T>& values) {
    return OfBytes(values.data(), values.size() * sizeof(T));
  }
  static GuardedBuffer OfBytes(const void* data, size_t size);

  uint8_t* data() { return storage_.data(); }
  const uint8_t* data() const { return storage_.data(); }
  size_t size() const { return bytes_; }

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

// The thread pool device kernels run on in the tests (two threads, shared by all tests).
const Eigen::ThreadPoolDevice& TestDevice();

// One kernel launch. Descriptors, buffers and parameters are added in launch order; Run() runs
// the kernel on the test device and checks every buffer's canary (a gtest failure, not a status).
class ExecutorLaunch {
 public:
  ExecutorLaunch() = default;
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
  // A guarded buffer the test owns and reads back itself.
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

  // Runs kernel `id` (NotFound, and a test failure, if the table has none).
  absl::Status Run(KernelId id);

 private:
  GuardedBuffer* Own(GuardedBuffer buffer);

  std::vector<std::pair<DescriptorKind, std::vector<uint8_t>>> descriptors_;
  std::deque<GuardedBuffer> owned_;        // stable addresses
  std::vector<GuardedBuffer*> buffers_;    // in launch order
  std::vector<std::function<void()>> copy_in_, copy_back_;
  ParamBlock params_;
};

}  // namespace executor_test
}  // namespace vgpu

#endif  // VGPU_TESTS_CONFORMANCE_EXECUTOR_KERNEL_HARNESS_H_
