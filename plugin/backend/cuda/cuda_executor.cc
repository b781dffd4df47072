// The CUDA backing executor (see cuda_executor.h): device memory, streams, copies, memsets,
// launches and the pins that keep memory alive until the GPU has finished with it.
#include "plugin/backend/cuda/cuda_executor.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "plugin/backend/cuda/cuda_descriptors.h"
#include "plugin/backend/cuda/cuda_fill.h"
#include "plugin/backend/cuda/cuda_kernel_registry.h"
#include "plugin/backend/cuda/cuda_libraries.h"
#include "plugin/backend/cuda/cuda_status.h"
#include "plugin/backend/cuda/primitive_cache.h"
#include "plugin/common/log.h"
#include "plugin/common/status_macros.h"

namespace vgpu::cuda {
namespace {

// Host<->device copies go through pinned staging chunks of this size; a stream has
// kStagingChunks of them, so that filling one overlaps the GPU's copy of the other.
constexpr size_t kStagingChunkBytes = size_t{4} << 20;
constexpr int kStagingChunks = 2;

// A virtual device's memory: one cudaMalloc'd region. Zero scrubs on the device's scrub stream
// and waits, so a block is all zeros before the arena hands it out again (the arena calls Zero
// only once the block's last pin is released, i.e. after the GPU finished every operation that
// named it: see CudaStream's pending batches).
class CudaArenaStorage final : public ArenaStorage {
 public:
  static absl::StatusOr<std::unique_ptr<CudaArenaStorage>> Create(int ordinal, uint64_t bytes) {
    VGPU_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal), "cudaSetDevice");
    auto storage = std::unique_ptr<CudaArenaStorage>(new CudaArenaStorage(ordinal, bytes));
    void* base = nullptr;
    if (cudaError_t error = cudaMalloc(&base, bytes); error != cudaSuccess) {
      (void)cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat(
          "the CUDA executor cannot take ", bytes, " bytes of device memory on GPU ", ordinal,
          " (cudaMalloc: ", cudaGetErrorName(error), "); lower --memory_limit"));
    }
    storage->base_ = static_cast<uint8_t*>(base);
    VGPU_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&storage->scrub_stream_,
                                                        cudaStreamNonBlocking),
                              "cudaStreamCreateWithFlags (scrub stream)");
    VGPU_CUDA_RETURN_IF_ERROR(cudaMemset(base, 0, bytes), "cudaMemset (device arena)");
    VGPU_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "cudaDeviceSynchronize (device arena)");
    return storage;
  }

  ~CudaArenaStorage() override {
    if (scrub_stream_ != nullptr) (void)cudaStreamDestroy(scrub_stream_);
    if (base_ != nullptr) (void)cudaFree(base_);
  }

  uint8_t* base() const override { return base_; }
  uint64_t size() const override { return size_; }

  void Zero(uint64_t offset, uint64_t size) override {
    // Any thread: the current device is per thread.
    cudaError_t error = cudaSetDevice(ordinal_);
    if (error == cudaSuccess) error = cudaMemsetAsync(base_ + offset, 0, size, scrub_stream_);
    if (error == cudaSuccess) error = cudaStreamSynchronize(scrub_stream_);
    if (error != cudaSuccess) {
      // A scrub that failed leaves the GPU unusable (a sticky error); say so loudly.
      Log(LogLevel::kError, absl::StrCat("CUDA executor: scrubbing device memory failed: ",
                                         cudaGetErrorName(error), ": ",
                                         cudaGetErrorString(error)));
    }
  }

 private:
  CudaArenaStorage(int ordinal, uint64_t size) : ordinal_(ordinal), size_(size) {}
  const int ordinal_;
  const uint64_t size_;
  uint8_t* base_ = nullptr;
  cudaStream_t scrub_stream_ = nullptr;
};

// Pinned host memory (cudaHostAlloc), RAII.
class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(other.size_) {}
  PinnedHostBuffer& operator=(PinnedHostBuffer&&) = delete;
  ~PinnedHostBuffer() {
    if (data_ != nullptr) (void)cudaFreeHost(data_);
  }
  absl::Status Allocate(size_t size) {
    void* data = nullptr;
    VGPU_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&data, size, cudaHostAllocPortable),
                              "cudaHostAlloc (staging buffer)");
    data_ = static_cast<uint8_t*>(data);
    size_ = size;
    return absl::OkStatus();
  }
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

struct CudaExecutor::Device {
  int ordinal = 0;
  cudaDeviceProp properties{};
  // kMemcpyNow copies (not stream-ordered): each waits for itself on this stream.
  cudaStream_t utility_stream = nullptr;
  std::mutex utility_mu;  // one synchronous copy at a time on utility_stream
  ~Device() {
    if (utility_stream != nullptr) (void)cudaStreamDestroy(utility_stream);
  }
};

namespace {

// One virtual stream. Used only on the virtual stream's worker thread (the session's contract),
// so it needs no lock.
class CudaStream final : public ExecutorStream {
 public:
  CudaStream(int ordinal, const cudaDeviceProp* properties, PrimitiveCache* primitives)
      : ordinal_(ordinal) {
    launch_device_.ordinal = ordinal;
    launch_device_.properties = properties;
    launch_device_.primitives = primitives;
  }

  absl::Status Init() {
    VGPU_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_), "cudaSetDevice");
    VGPU_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                              "cudaStreamCreateWithFlags");
    absl::StatusOr<std::unique_ptr<CudaLibraries>> libraries =
        CudaLibraries::Create(ordinal_, stream_);
    if (!libraries.ok()) return libraries.status();
    libraries_ = *std::move(libraries);
    launch_device_.stream = stream_;
    launch_device_.libraries = libraries_.get();
    return absl::OkStatus();
  }

  // Waits for the stream, releases every pin, then destroys the handles (libraries before the
  // stream they are bound to), the events and the staging buffers.
  ~CudaStream() override {
    if (stream_ != nullptr) {
      (void)cudaSetDevice(ordinal_);
      (void)cudaStreamSynchronize(stream_);
    }
    pending_.clear();
    libraries_.reset();
    for (Staging& staging : staging_) {
      if (staging.ready != nullptr) (void)cudaEventDestroy(staging.ready);
    }
    for (cudaEvent_t event : free_events_) (void)cudaEventDestroy(event);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }

  cudaStream_t stream() const { return stream_; }
  int ordinal() const { return ordinal_; }
  const CudaLaunchDevice& launch_device() const { return launch_device_; }

  // Sets the calling thread's device and releases the pins of completed batches.
  absl::Status Begin() {
    VGPU_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_), "cudaSetDevice");
    ReleaseCompleted();
    return absl::OkStatus();
  }

  // Keeps `pins` (moved out) until the work enqueued on the stream so far has completed: an
  // event recorded now marks that point. If no event can be recorded, waits for the stream
  // instead (the pins are then released at once).
  void KeepUntilDone(PinnedRanges& pins) {
    if (pins.empty()) return;
    absl::StatusOr<cudaEvent_t> event = TakeEvent();
    cudaError_t error = event.ok() ? cudaEventRecord(*event, stream_) : cudaErrorUnknown;
    if (error != cudaSuccess) {
      if (event.ok()) free_events_.push_back(*event);
      Note(CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
      pins.clear();
      return;
    }
    pending_.push_back(Batch{*event, std::move(pins)});
    pins.clear();
  }

  // cudaStreamSynchronize, release everything, and the first error since the last call.
  absl::Status Synchronize() {
    absl::Status status = CudaStatus(cudaSetDevice(ordinal_), "cudaSetDevice");
    if (status.ok()) status = CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    Note(status);
    if (status.ok()) {
      while (!pending_.empty()) PopFront();
    }
    absl::Status first = std::move(first_error_);
    first_error_ = absl::OkStatus();
    return first;
  }

  // Remembers the first error of an operation whose caller could not be told (asynchronous).
  void Note(const absl::Status& status) {
    if (!status.ok() && first_error_.ok()) first_error_ = status;
  }

  // Host-to-device through the staging chunks: each chunk waits until the GPU has consumed its
  // previous contents (its `ready` event), is filled on the host and enqueued.
  absl::Status CopyToDevice(uint8_t* destination, const uint8_t* source, uint64_t size) {
    return ForEachStagedChunk(size, [&](Staging& staging, uint64_t offset, size_t chunk) {
      std::memcpy(staging.buffer.data(), source + offset, chunk);
      VGPU_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(destination + offset, staging.buffer.data(), chunk,
                                                cudaMemcpyHostToDevice, stream_),
                                "cudaMemcpyAsync (host to device)");
      return CudaStatus(cudaEventRecord(staging.ready, stream_), "cudaEventRecord");
    });
  }

  // Device-to-host, complete on return: each chunk is enqueued into staging (behind everything
  // queued before on the stream), waited for and copied out.
  absl::Status CopyToHost(uint8_t* destination, const uint8_t* source, uint64_t size) {
    return ForEachStagedChunk(size, [&](Staging& staging, uint64_t offset, size_t chunk) {
      VGPU_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(staging.buffer.data(), source + offset, chunk,
                                                cudaMemcpyDeviceToHost, stream_),
                                "cudaMemcpyAsync (device to host)");
      VGPU_CUDA_RETURN_IF_ERROR(cudaEventRecord(staging.ready, stream_), "cudaEventRecord");
      VGPU_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staging.ready),
                                "device-to-host copy (cudaEventSynchronize)");
      std::memcpy(destination + offset, staging.buffer.data(), chunk);
      return absl::OkStatus();
    });
  }

 private:
  struct Batch {
    cudaEvent_t done;
    PinnedRanges pins;
  };
  struct Staging {
    PinnedHostBuffer buffer;
    cudaEvent_t ready = nullptr;  // recorded after the GPU's last use of `buffer`
  };

  // Splits `size` bytes into staging-chunk pieces and runs copy_chunk(staging, offset, bytes)
  // for each in order, with the staging chunks in turn, each once the GPU has finished with its
  // previous contents (its `ready` event). copy_chunk returns absl::Status; stops at an error.
  template <typename CopyChunk>
  absl::Status ForEachStagedChunk(uint64_t size, CopyChunk copy_chunk) {
    VGPU_RETURN_IF_ERROR(EnsureStaging());
    for (uint64_t done = 0; done < size;) {
      Staging& staging = staging_[next_staging_];
      next_staging_ = (next_staging_ + 1) % kStagingChunks;
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(size - done, kStagingChunkBytes));
      VGPU_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staging.ready), "cudaEventSynchronize");
      VGPU_RETURN_IF_ERROR(copy_chunk(staging, done, chunk));
      done += chunk;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<cudaEvent_t> TakeEvent() {
    if (!free_events_.empty()) {
      cudaEvent_t event = free_events_.back();
      free_events_.pop_back();
      return event;
    }
    cudaEvent_t event = nullptr;
    VGPU_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                              "cudaEventCreateWithFlags");
    return event;
  }

  void PopFront() {
    free_events_.push_back(pending_.front().done);
    pending_.pop_front();  // releases the pins (may scrub and free blocks)
  }

  // Batches complete in stream order: release from the front while their event has passed.
  void ReleaseCompleted() {
    while (!pending_.empty()) {
      cudaError_t state = cudaEventQuery(pending_.front().done);
      if (state == cudaErrorNotReady) return;
      if (state != cudaSuccess) {
        // The stream failed: the work will never complete normally. Keep the pins until
        // Synchronize (the error is reported there).
        Note(CudaStatus(state, "stream work (cudaEventQuery)"));
        return;
      }
      PopFront();
    }
  }

  absl::Status EnsureStaging() {
    if (staging_ready_) return absl::OkStatus();
    for (Staging& staging : staging_) {
      VGPU_RETURN_IF_ERROR(staging.buffer.Allocate(kStagingChunkBytes));
      VGPU_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&staging.ready, cudaEventDisableTiming),
                                "cudaEventCreateWithFlags");
      // Recorded once so that the first wait returns at once.
      VGPU_CUDA_RETURN_IF_ERROR(cudaEventRecord(staging.ready, stream_), "cudaEventRecord");
    }
    staging_ready_ = true;
    return absl::OkStatus();
  }

  const int ordinal_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CudaLibraries> libraries_;
  CudaLaunchDevice launch_device_;
  std::deque<Batch> pending_;           // oldest first
  std::vector<cudaEvent_t> free_events_;
  Staging staging_[kStagingChunks];
  int next_staging_ = 0;
  bool staging_ready_ = false;
  absl::Status first_error_;
};

CudaStream& AsCudaStream(ExecutorStream* stream) { return *static_cast<CudaStream*>(stream); }

}  // namespace

absl::StatusOr<std::unique_ptr<CudaExecutor>> CudaExecutor::Create(const ExecutorOptions& options) {
  VGPU_RETURN_IF_ERROR(CheckDeviceCount(options));
  const SessionLimits& limits = options.session_limits;
  VGPU_RETURN_IF_ERROR(CheckSessionLimits(limits));
  int gpus = 0;
  if (cudaError_t error = cudaGetDeviceCount(&gpus); error != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "the CUDA executor found no usable GPU: cudaGetDeviceCount: ", cudaGetErrorName(error),
        ": ", cudaGetErrorString(error)));
  }
  if (gpus < 1) {
    return absl::FailedPreconditionError(
        "the CUDA executor found no usable GPU: cudaGetDeviceCount found no CUDA device");
  }
  const uint64_t bytes = DeviceArena::ChargedSize(options.memory_limit_per_device);
  auto executor = std::unique_ptr<CudaExecutor>(new CudaExecutor());
  executor->session_limits_ = limits;
  // A CUDA launch is already asynchronous; every launch goes through the stream's worker, the
  // one thread that uses that stream's CUDA state.
  executor->session_limits_.inline_launch_bytes = 0;
  for (int i = 0; i < options.device_count; ++i) {
    auto device = std::make_unique<Device>();
    device->ordinal = i % gpus;
    VGPU_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&device->properties, device->ordinal),
                              "cudaGetDeviceProperties");
    VGPU_CUDA_RETURN_IF_ERROR(cudaSetDevice(device->ordinal), "cudaSetDevice");
    VGPU_CUDA_RETURN_IF_ERROR(
        cudaStreamCreateWithFlags(&device->utility_stream, cudaStreamNonBlocking),
        "cudaStreamCreateWithFlags");
    absl::StatusOr<std::unique_ptr<CudaArenaStorage>> storage =
        CudaArenaStorage::Create(device->ordinal, bytes);
    if (!storage.ok()) return storage.status();
    absl::StatusOr<std::unique_ptr<DeviceArena>> arena =
        DeviceArena::Create(static_cast<uint32_t>(i), *std::move(storage));
    if (!arena.ok()) return arena.status();
    executor->devices_.push_back(std::move(device));
    executor->arenas_.push_back(*std::move(arena));
  }
  return executor;
}

CudaExecutor::CudaExecutor() : primitives_(std::make_unique<PrimitiveCache>()) {}

CudaExecutor::~CudaExecutor() {
  primitives_.reset();  // cuDNN/cuBLASLt objects first
  arenas_.clear();      // device memory
  devices_.clear();
}

absl::string_view CudaExecutor::KernelName(uint32_t kernel_id) const {
  return NameOf(CudaKernels().Find(kernel_id));
}

ExecutorStats CudaExecutor::stats() const {
  ExecutorStats stats = CountedStats();
  stats.primitives_created = primitives_->created();
  stats.primitives_reused = primitives_->reused();
  return stats;
}

absl::StatusOr<std::unique_ptr<ExecutorStream>> CudaExecutor::CreateStream(uint32_t device) {
  const Device& gpu = *devices_[device];
  auto stream = std::make_unique<CudaStream>(gpu.ordinal, &gpu.properties, primitives_.get());
  VGPU_RETURN_IF_ERROR(stream->Init());
  return std::unique_ptr<ExecutorStream>(std::move(stream));
}

absl::Status CudaExecutor::Copy(ExecutorStream* stream, uint64_t, const CopyRequest& request,
                                PinnedRanges& pins) {
  copies_.fetch_add(1, std::memory_order_relaxed);
  bytes_copied_.fetch_add(request.size, std::memory_order_relaxed);
  if (stream == nullptr) {
    // kMemcpyNow: synchronous, on the device's utility stream (pageable host memory is fine).
    Device& gpu = *devices_[request.device];
    std::lock_guard<std::mutex> lock(gpu.utility_mu);
    VGPU_CUDA_RETURN_IF_ERROR(cudaSetDevice(gpu.ordinal), "cudaSetDevice");
    VGPU_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(request.destination, request.source, request.size,
                                              cudaMemcpyDefault, gpu.utility_stream),
                              "cudaMemcpyAsync (synchronous copy)");
    return CudaStatus(cudaStreamSynchronize(gpu.utility_stream), "synchronous copy");
  }
  CudaStream& cuda_stream = AsCudaStream(stream);
  VGPU_RETURN_IF_ERROR(cuda_stream.Begin());
  absl::Status status;
  if (request.source_on_device && request.destination_on_device) {
    // Either end may be another virtual device's memory (unified addressing finds the GPUs).
    status = CudaStatus(cudaMemcpyAsync(request.destination, request.source, request.size,
                                        cudaMemcpyDefault, cuda_stream.stream()),
                        "cudaMemcpyAsync (device to device)");
  } else if (request.destination_on_device) {
    status = cuda_stream.CopyToDevice(request.destination, request.source, request.size);
  } else if (request.source_on_device) {
    status = cuda_stream.CopyToHost(request.destination, request.source, request.size);
  } else {
    std::memcpy(request.destination, request.source, request.size);
  }
  cuda_stream.KeepUntilDone(pins);
  return status;
}

absl::Status CudaExecutor::Memset(ExecutorStream* stream, uint64_t, const MemsetRequest& request,
                                  PinnedRanges& pins) {
  memsets_.fetch_add(1, std::memory_order_relaxed);
  if (stream == nullptr) return absl::InternalError("CUDA executor: a memset needs a stream");
  CudaStream& cuda_stream = AsCudaStream(stream);
  VGPU_RETURN_IF_ERROR(cuda_stream.Begin());
  absl::Status status;
  if (request.pattern_bytes == 1) {
    status = CudaStatus(cudaMemsetAsync(request.destination,
                                        static_cast<int>(request.pattern & 0xFF), request.size,
                                        cuda_stream.stream()),
                        "cudaMemsetAsync");
  } else if (request.pattern_bytes == 4) {
    status = FillPattern32(request.destination, request.size, request.pattern,
                           cuda_stream.launch_device());
  } else {
    status = absl::InvalidArgumentError(
        absl::StrCat("memset pattern of ", request.pattern_bytes, " bytes"));
  }
  cuda_stream.KeepUntilDone(pins);
  return status;
}

absl::Status CudaExecutor::Launch(ExecutorStream* stream, uint64_t, const LaunchRequest& request,
                                  PinnedRanges& pins) {
  launches_.fetch_add(1, std::memory_order_relaxed);
  const CudaKernelInfo* kernel = CudaKernels().Find(request.kernel_id);
  if (kernel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown kernel id ", request.kernel_id));
  }
  if (stream == nullptr) return absl::InternalError("CUDA executor: a launch needs a stream");
  CudaStream& cuda_stream = AsCudaStream(stream);
  VGPU_RETURN_IF_ERROR(cuda_stream.Begin());
  const CudaKernelContext context(request.launch, &cuda_stream.launch_device());
  absl::Status status = RunGuarded(kernel->name, [&] { return kernel->run(context); });
  // A launch error the kernel did not collect itself (a bad configuration) fails this launch.
  if (status.ok()) status = LastLaunchStatus(kernel->name);
  // Whatever the kernel enqueued before failing still names the pinned memory.
  cuda_stream.KeepUntilDone(pins);
  return status;
}

absl::Status CudaExecutor::SynchronizeStream(ExecutorStream* stream) {
  if (stream == nullptr) return absl::OkStatus();
  return AsCudaStream(stream).Synchronize();
}

absl::StatusOr<std::unique_ptr<ExecutorDescriptor>> CudaExecutor::CreateDescriptor(uint8_t kind) {
  absl::StatusOr<std::unique_ptr<ExecutorDescriptor>> descriptor = CreateDriverDescriptor(kind);
  if (descriptor.ok()) descriptors_created_.fetch_add(1, std::memory_order_relaxed);
  return descriptor;
}

absl::Status CudaExecutor::SetDescriptor(ExecutorDescriptor& descriptor,
                                         absl::Span<const uint8_t> settings) {
  return SetDriverDescriptor(descriptor, settings);
}

absl::StatusOr<std::unique_ptr<BackingExecutor>> CreateCudaExecutor(
    const ExecutorOptions& options) {
  absl::StatusOr<std::unique_ptr<CudaExecutor>> executor = CudaExecutor::Create(options);
  if (!executor.ok()) return executor.status();
  return std::unique_ptr<BackingExecutor>(*std::move(executor));
}

}  // namespace vgpu::cuda
