// The kernel-payload fuzz target (kernel_launch_fuzz.h).
#define EIGEN_USE_THREADS

#include "tests/fuzz/kernel_launch_fuzz.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <sys/mman.h>
#include <unistd.h>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/cpu_executor.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu::fuzz {
namespace {

constexpr uint8_t kCanary = 0xCD;
constexpr size_t kCanaryBytes = 64;

// Reads little-endian integers from a byte span; past the end it reads zeros.
class ByteCursor {
 public:
  explicit ByteCursor(absl::Span<const uint8_t> data) : data_(data) {}
  template <typename T>
  T Take() {
    T value = 0;
    const size_t n = std::min(sizeof(T), data_.size() - offset_);
    std::memcpy(&value, data_.data() + offset_, n);
    offset_ += n;
    return value;
  }
  absl::Span<const uint8_t> TakeBytes(size_t size) {
    const size_t n = std::min(size, data_.size() - offset_);
    absl::Span<const uint8_t> out = data_.subspan(offset_, n);
    offset_ += n;
    return out;
  }
  absl::Span<const uint8_t> Rest() { return TakeBytes(data_.size() - offset_); }

 private:
  absl::Span<const uint8_t> data_;
  size_t offset_ = 0;
};

// One buffer slot of a launch: a mapping of kMaxFuzzBufferBytes (and canary room) followed by an
// inaccessible page. A buffer of `size` bytes is placed to end right before that page, so that a
// kernel reading or writing even one byte past it faults (also without a sanitizer); the bytes
// before it hold a canary, checked afterwards for writes before the buffer. The start is aligned
// as the size allows (8 bytes for multiples of 8). Slots are mapped once and reused.
class FencedSlot {
 public:
  FencedSlot() {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t pages = (kMaxFuzzBufferBytes + kCanaryBytes + page - 1) / page;
    void* region = mmap(nullptr, (pages + 1) * page, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) std::abort();
    fence_ = static_cast<uint8_t*>(region) + pages * page;
    if (mprotect(fence_, page, PROT_NONE) != 0) std::abort();
  }  // never unmapped: the slots live as long as the process

  // The start of a fenced buffer of `size` (<= kMaxFuzzBufferBytes) bytes, canary in front.
  uint8_t* Place(size_t size) {
    data_ = fence_ - size;
    std::memset(data_ - kCanaryBytes, kCanary, kCanaryBytes);
    return data_;
  }
  bool CanaryIntact() const {
    return std::all_of(data_ - kCanaryBytes, data_,
                       [](uint8_t byte) { return byte == kCanary; });
  }

 private:
  uint8_t* fence_ = nullptr;
  uint8_t* data_ = nullptr;
};

FencedSlot& Slot(size_t index) {
  static FencedSlot* const slots = new FencedSlot[kMaxFuzzBuffers];
  return slots[index];
}

template <typename T>
void Append(std::vector<uint8_t>* out, T value) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(&value);
  out->insert(out->end(), bytes, bytes + sizeof(T));
}

}  // namespace

FuzzedLaunch DecodeFuzzedLaunch(absl::Span<const uint8_t> data) {
  static const std::vector<uint32_t>* const ids = new std::vector<uint32_t>(Kernels().Ids());
  ByteCursor cursor(data);
  FuzzedLaunch launch;
  launch.kernel_id = cursor.Take<uint32_t>();
  if (Kernels().Find(launch.kernel_id) == nullptr) {
    launch.kernel_id = (*ids)[launch.kernel_id % ids->size()];
  }
  const size_t buffers = cursor.Take<uint8_t>() % (kMaxFuzzBuffers + 1);
  for (size_t i = 0; i < buffers; ++i) {
    launch.buffer_sizes.push_back(cursor.Take<uint32_t>() % (kMaxFuzzBufferBytes + 1));
  }
  const uint16_t descriptor_bytes = cursor.Take<uint16_t>();
  absl::Span<const uint8_t> descriptors = cursor.TakeBytes(descriptor_bytes);
  launch.descriptors.assign(descriptors.begin(), descriptors.end());
  absl::Span<const uint8_t> params = cursor.Rest();
  launch.params.assign(params.begin(), params.end());
  return launch;
}

std::vector<uint8_t> EncodeFuzzedLaunch(const FuzzedLaunch& launch) {
  std::vector<uint8_t> out;
  Append<uint32_t>(&out, launch.kernel_id);
  Append<uint8_t>(&out, static_cast<uint8_t>(launch.buffer_sizes.size()));
  for (uint32_t size : launch.buffer_sizes) Append<uint32_t>(&out, size);
  Append<uint16_t>(&out, static_cast<uint16_t>(launch.descriptors.size()));
  out.insert(out.end(), launch.descriptors.begin(), launch.descriptors.end());
  out.insert(out.end(), launch.params.begin(), launch.params.end());
  return out;
}

FuzzOutcome RunFuzzedLaunch(const FuzzedLaunch& launch, const Eigen::ThreadPoolDevice& device) {
  FuzzOutcome outcome;
  const KernelInfo* kernel = Kernels().Find(launch.kernel_id);
  if (kernel == nullptr) {
    outcome.status = absl::NotFoundError(absl::StrCat("no kernel ", launch.kernel_id));
    return outcome;
  }
  outcome.kernel_name = kernel->name;
  absl::InlinedVector<DescriptorView, 6> views;
  outcome.status = ParseLaunchDescriptors(launch.descriptors, &views);
  if (!outcome.status.ok()) return outcome;

  // Fenced buffers: a byte past one faults, a byte written before one breaks its canary. The
  // contents cycle through the parameter bytes, so indices stored in buffers vary too.
  std::vector<uint8_t*> pointers;
  std::vector<uint64_t> sizes;
  for (size_t b = 0; b < launch.buffer_sizes.size(); ++b) {
    const uint32_t size = std::min(launch.buffer_sizes[b], kMaxFuzzBufferBytes);
    uint8_t* bytes = Slot(b).Place(size);
    for (uint32_t i = 0; i < size; ++i) {
      bytes[i] = launch.params.empty() ? static_cast<uint8_t>(i + b)
                                       : launch.params[(i + b) % launch.params.size()];
    }
    pointers.push_back(size == 0 ? nullptr : bytes);  // as a session passes empty buffers
    sizes.push_back(size);
  }
  KernelContext context(LaunchView{pointers, sizes, launch.params, views}, &device);
  outcome.status = RunKernel(*kernel, context);
  for (size_t b = 0; b < launch.buffer_sizes.size(); ++b) {
    outcome.canaries_intact &= Slot(b).CanaryIntact();
  }
  return outcome;
}

const Eigen::ThreadPoolDevice& FuzzDevice() {
  static CpuExecutor* const executor = [] {
    CpuExecutor::Options options;
    options.memory_limit_per_device = 1 << 20;
    options.compute_threads = 2;
    return CpuExecutor::Create(options).value().release();
  }();
  return executor->compute_device();
}

}  // namespace vgpu::fuzz
