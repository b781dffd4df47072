// The executor-kernel test harness (executor_kernel_harness.h): guarded buffers, the shared
// test thread pool, and running one launch through the CPU executor's kernel table.
#define EIGEN_USE_THREADS

#include "tests/conformance/executor_kernel_harness.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "unsupported/Eigen/CXX11/Tensor"
#include "unsupported/Eigen/CXX11/ThreadPool"

namespace vgpu {
namespace executor_test {
namespace {

constexpr uint8_t kCanary = 0xAB;
constexpr size_t kCanaryBytes = 64;

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

const Eigen::ThreadPoolDevice& TestDevice() {
  static Eigen::ThreadPool pool(2);
  static const Eigen::ThreadPoolDevice device(&pool, 2);
  return device;
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
  const KernelInfo* kernel = Kernels().Find(static_cast<uint32_t>(id));
  EXPECT_NE(kernel, nullptr) << "no kernel " << static_cast<uint32_t>(id);
  if (kernel == nullptr) return absl::NotFoundError("no such kernel");
  for (const auto& copy_in : copy_in_) copy_in();
  std::vector<DescriptorView> views;
  for (const auto& [kind, bytes] : descriptors_) views.push_back(DescriptorView{kind, bytes});
  std::vector<uint8_t*> pointers;
  std::vector<uint64_t> sizes;
  for (GuardedBuffer* buffer : buffers_) {
    pointers.push_back(buffer->data());
    sizes.push_back(buffer->size());
  }
  KernelContext context(LaunchView{pointers, sizes, params_, views}, &TestDevice());
  absl::Status status = RunKernel(*kernel, context);  // the dispatch sessions use
  for (size_t i = 0; i < buffers_.size(); ++i) {
    EXPECT_TRUE(buffers_[i]->CanaryIntact())
        << kernel->name << " wrote past the end of buffer " << i;
  }
  for (const auto& copy_back : copy_back_) copy_back();
  return status;
}

}  // namespace executor_test
}  // namespace vgpu
