// StreamExecutor C API tests of registration, device memory and copies: the tables TensorFlow
// validates, allocation and its limit, allocator statistics, memcpy (async and sync, within and
// between devices), memset, and that the host faults on a device address.
#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/backend/device_address.h"
#include "se_test_support.h"

namespace vgpu_test {
namespace {

TEST(StreamExecutorRegistration, FillsThePlatformTensorFlowValidates) {
  RegisteredPlatform& r = RegisteredPlatform::Get();
  EXPECT_EQ(r.params.major_version, SE_MAJOR);
  EXPECT_EQ(r.params.minor_version, SE_MINOR);
  EXPECT_EQ(r.params.patch_version, SE_PATCH);
  EXPECT_NE(r.params.destroy_platform, nullptr);
  EXPECT_NE(r.params.destroy_platform_fns, nullptr);
  EXPECT_EQ(r.platform.struct_size, SP_PLATFORM_STRUCT_SIZE);
  EXPECT_STREQ(r.platform.name, "VGPU");
  EXPECT_STREQ(r.platform.type, "GPU");
  EXPECT_TRUE(r.platform.use_bfc_allocator);
  EXPECT_FALSE(r.platform.supports_unified_memory);

  const SP_PlatformFns& fns = r.platform_fns;
  EXPECT_EQ(fns.struct_size, SP_PLATFORM_FNS_STRUCT_SIZE);
  EXPECT_NE(fns.get_device_count, nullptr);
  EXPECT_NE(fns.create_device, nullptr);
  EXPECT_NE(fns.destroy_device, nullptr);
  EXPECT_NE(fns.create_device_fns, nullptr);
  EXPECT_NE(fns.destroy_device_fns, nullptr);
  EXPECT_NE(fns.create_stream_executor, nullptr);
  EXPECT_NE(fns.destroy_stream_executor, nullptr);
  EXPECT_NE(fns.create_timer_fns, nullptr);
  EXPECT_NE(fns.destroy_timer_fns, nullptr);
}

TEST(StreamExecutorRegistration, FillsEveryStreamExecutorCallback) {
  const SP_StreamExecutor& se = RegisteredPlatform::Get().executors[0];
  EXPECT_EQ(se.struct_size, SP_STREAMEXECUTOR_STRUCT_SIZE);
  const void* callbacks[] = {
      reinterpret_cast<const void*>(se.allocate),
      reinterpret_cast<const void*>(se.deallocate),
      reinterpret_cast<const void*>(se.host_memory_allocate),
      reinterpret_cast<const void*>(se.host_memory_deallocate),
      reinterpret_cast<const void*>(se.get_allocator_stats),
      reinterpret_cast<const void*>(se.device_memory_usage),
      reinterpret_cast<const void*>(se.create_stream),
      reinterpret_cast<const void*>(se.destroy_stream),
      reinterpret_cast<const void*>(se.create_stream_dependency),
      reinterpret_cast<const void*>(se.get_stream_status),
      reinterpret_cast<const void*>(se.create_event),
      reinterpret_cast<const void*>(se.destroy_event),
      reinterpret_cast<const void*>(se.get_event_status),
      reinterpret_cast<const void*>(se.record_event),
      reinterpret_cast<const void*>(se.wait_for_event),
      reinterpret_cast<const void*>(se.create_timer),
      reinterpret_cast<const void*>(se.destroy_timer),
      reinterpret_cast<const void*>(se.start_timer),
      reinterpret_cast<const void*>(se.stop_timer),
      reinterpret_cast<const void*>(se.memcpy_dtoh),
      reinterpret_cast<const void*>(se.memcpy_htod),
      reinterpret_cast<const void*>(se.memcpy_dtod),
      reinterpret_cast<const void*>(se.sync_memcpy_dtoh),
      reinterpret_cast<const void*>(se.sync_memcpy_htod),
      reinterpret_cast<const void*>(se.sync_memcpy_dtod),
      reinterpret_cast<const void*>(se.block_host_for_event),
      reinterpret_cast<const void*>(se.block_host_until_done),
      reinterpret_cast<const void*>(se.synchronize_all_activity),
      reinterpret_cast<const void*>(se.mem_zero),
      reinterpret_cast<const void*>(se.memset),
      reinterpret_cast<const void*>(se.memset32),
      reinterpret_cast<const void*>(se.host_callback),
  };
  for (size_t i = 0; i < sizeof(callbacks) / sizeof(callbacks[0]); ++i) {
    EXPECT_NE(callbacks[i], nullptr) << "callback #" << i;
  }
}

TEST(StreamExecutorRegistration, OffersTheConfiguredDevices) {
  RegisteredPlatform& r = RegisteredPlatform::Get();
  EXPECT_EQ(r.device_count, kDeviceCount);
  for (int i = 0; i < kDeviceCount; ++i) {
    EXPECT_EQ(r.devices[i].ordinal, i);
    EXPECT_NE(r.devices[i].device_handle, nullptr);
    EXPECT_NE(r.devices[i].hardware_name, nullptr);
  }
  EXPECT_NE(r.devices[0].device_handle, r.devices[1].device_handle);

  SP_DeviceFns device_fns{SP_DEVICE_FNS_STRUCT_SIZE};
  SE_CreateDeviceFnsParams params{SE_CREATE_DEVICE_FNS_PARAMS_STRUCT_SIZE};
  params.device_fns = &device_fns;
  TfStatus status;
  r.platform_fns.create_device_fns(&r.platform, &params, status);
  EXPECT_TF_OK(status);
  ASSERT_NE(device_fns.get_numa_node, nullptr);
  EXPECT_EQ(device_fns.get_numa_node(&r.devices[0]), -1);
}

TEST(StreamExecutorRegistration, CreateDeviceRejectsAnUnknownOrdinal) {
  RegisteredPlatform& r = RegisteredPlatform::Get();
  SP_Device device{SP_DEVICE_STRUCT_SIZE};
  SE_CreateDeviceParams params{SE_CREATE_DEVICE_PARAMS_STRUCT_SIZE};
  params.ordinal = kDeviceCount;
  params.device = &device;
  TfStatus status;
  r.platform_fns.create_device(&r.platform, &params, status);
  EXPECT_EQ(status.code(), TF_INVALID_ARGUMENT) << Describe(status);
}

using StreamExecutorMemory = StreamExecutorTest;

TEST_F(StreamExecutorMemory, AllocateReturnsAlignedTaggedDeviceAddresses) {
  for (uint64_t size : {1, 100, 4096, 1000000}) {
    SP_DeviceMemoryBase memory = Allocate(size);
    ASSERT_NE(memory.opaque, nullptr) << "size " << size;
    EXPECT_EQ(memory.size, size);
    const uint64_t address = reinterpret_cast<uint64_t>(memory.opaque);
    EXPECT_EQ(address & vgpu::kDeviceAddressTagMask, vgpu::kDeviceAddressTag);
    EXPECT_EQ(address % 256, 0u);
  }
  SP_DeviceMemoryBase on_device_1 = Allocate(256, 1);
  ASSERT_NE(on_device_1.opaque, nullptr);
  uint32_t backend_device = 0;
  uint64_t offset = 0;
  ASSERT_TRUE(vgpu::DecodeDeviceAddress(reinterpret_cast<uint64_t>(on_device_1.opaque),
                                        &backend_device, &offset));
  EXPECT_EQ(backend_device, 1u);
}

TEST_F(StreamExecutorMemory, AllocationPastTheLimitIsNullAndTheDeviceKeepsWorking) {
  SP_DeviceMemoryBase too_big = Allocate(kMemoryLimit + 1);
  EXPECT_EQ(too_big.opaque, nullptr);  // TensorFlow reports this as out of memory
  EXPECT_EQ(too_big.size, 0u);

  SP_DeviceMemoryBase most = Allocate(kMemoryLimit - (4ull << 20));
  ASSERT_NE(most.opaque, nullptr);
  EXPECT_EQ(Allocate(8ull << 20).opaque, nullptr);  // no longer fits
  Free(&most);

  // Everything still works afterwards.
  SP_DeviceMemoryBase memory = Allocate(8ull << 20);
  ASSERT_NE(memory.opaque, nullptr);
  const std::vector<uint8_t> data = Pattern(4096, 9);
  Upload(memory, data.data(), data.size());
  EXPECT_EQ(Download(memory, data.size()), data);
}

TEST_F(StreamExecutorMemory, AllocatorStatsTrackAllocationsHonestly) {
  SP_AllocatorStats before{SP_ALLOCATORSTATS_STRUCT_SIZE};
  ASSERT_TRUE(se().get_allocator_stats(device(), &before));
  EXPECT_TRUE(before.has_bytes_limit);
  EXPECT_EQ(before.bytes_limit, static_cast<int64_t>(kMemoryLimit));

  constexpr uint64_t kSize = 3ull << 20;
  SP_DeviceMemoryBase memory = Allocate(kSize);
  ASSERT_NE(memory.opaque, nullptr);
  SP_AllocatorStats during{SP_ALLOCATORSTATS_STRUCT_SIZE};
  ASSERT_TRUE(se().get_allocator_stats(device(), &during));
  EXPECT_EQ(during.bytes_in_use, before.bytes_in_use + static_cast<int64_t>(kSize));
  EXPECT_EQ(during.num_allocs, before.num_allocs + 1);
  EXPECT_GE(during.peak_bytes_in_use, during.bytes_in_use);
  EXPECT_GE(during.largest_alloc_size, static_cast<int64_t>(kSize));
  EXPECT_LE(during.largest_free_block_bytes,
            static_cast<int64_t>(kMemoryLimit) - during.bytes_in_use);

  Free(&memory);
  SP_AllocatorStats after{SP_ALLOCATORSTATS_STRUCT_SIZE};
  ASSERT_TRUE(se().get_allocator_stats(device(), &after));
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_GE(after.peak_bytes_in_use, before.bytes_in_use + static_cast<int64_t>(kSize));
}

TEST_F(StreamExecutorMemory, DeviceMemoryUsageTracksAllocations) {
  // `total` may include the headroom TensorFlow's device factory keeps back (see
  // stream_executor.cc); `free` must move by exactly what is allocated and freed.
  int64_t free_before = -1, total = -1;
  ASSERT_TRUE(se().device_memory_usage(device(), &free_before, &total));
  EXPECT_GE(total, static_cast<int64_t>(kMemoryLimit));
  EXPECT_LE(free_before, total);
  SP_AllocatorStats stats{SP_ALLOCATORSTATS_STRUCT_SIZE};
  ASSERT_TRUE(se().get_allocator_stats(device(), &stats));
  EXPECT_EQ(total - free_before, stats.bytes_in_use);

  SP_DeviceMemoryBase memory = Allocate(1ull << 20);
  ASSERT_NE(memory.opaque, nullptr);
  int64_t free_during = -1;
  ASSERT_TRUE(se().device_memory_usage(device(), &free_during, &total));
  EXPECT_EQ(free_during, free_before - (1 << 20));

  Free(&memory);
  int64_t free_after = -1;
  ASSERT_TRUE(se().device_memory_usage(device(), &free_after, &total));
  EXPECT_EQ(free_after, free_before);
}

TEST_F(StreamExecutorMemory, DevicesHaveSeparateMemory) {
  int64_t free0 = 0, free1 = 0, total = 0;
  ASSERT_TRUE(se(1).device_memory_usage(device(1), &free1, &total));
  SP_DeviceMemoryBase memory = Allocate(2ull << 20, 0);
  ASSERT_NE(memory.opaque, nullptr);
  int64_t free1_after = 0;
  ASSERT_TRUE(se(1).device_memory_usage(device(1), &free1_after, &total));
  EXPECT_EQ(free1_after, free1);  // device 0's allocation does not count on device 1
  ASSERT_TRUE(se(0).device_memory_usage(device(0), &free0, &total));
  SP_AllocatorStats stats0{SP_ALLOCATORSTATS_STRUCT_SIZE};
  ASSERT_TRUE(se(0).get_allocator_stats(device(0), &stats0));
  EXPECT_GE(stats0.bytes_in_use, 2 << 20);
}

TEST_F(StreamExecutorMemory, HostMemoryIsOrdinaryAlignedHostMemory) {
  void* host = se().host_memory_allocate(device(), 1000);
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(host) % 64, 0u);
  std::memset(host, 0x42, 1000);  // the host can use it directly
  EXPECT_EQ(static_cast<uint8_t*>(host)[999], 0x42);
  se().host_memory_deallocate(device(), host);
  EXPECT_EQ(se().unified_memory_allocate(device(), 1024), nullptr);
}

TEST_F(StreamExecutorMemory, DeallocateClearsTheHandle) {
  SP_DeviceMemoryBase memory = Allocate(1024);
  ASSERT_NE(memory.opaque, nullptr);
  Free(&memory);
  EXPECT_EQ(memory.opaque, nullptr);
  se().deallocate(device(), &memory);  // a second deallocate of a cleared handle is harmless
}

using StreamExecutorCopy = StreamExecutorTest;

TEST_F(StreamExecutorCopy, MemcpyRoundTripsHostToDeviceToDeviceToHost) {
  constexpr uint64_t kSize = 1 << 20;
  DeviceRoundTrip io = PrepareRoundTrip(kSize, 1);
  ASSERT_TRUE(io.a.opaque && io.b.opaque);
  SP_Stream stream = CreateStream();

  TfStatus status;
  se().memcpy_htod(device(), stream, &io.a, io.source, kSize, status);
  EXPECT_TF_OK(status);
  se().memcpy_dtod(device(), stream, &io.b, &io.a, kSize, status);
  EXPECT_TF_OK(status);
  se().memcpy_dtoh(device(), stream, io.result, &io.b, kSize, status);
  EXPECT_TF_OK(status);
  se().block_host_until_done(device(), stream, status);
  ASSERT_TF_OK(status);
  EXPECT_EQ(0, std::memcmp(io.result, io.data.data(), kSize));
}

TEST_F(StreamExecutorCopy, SyncMemcpysRoundTrip) {
  constexpr uint64_t kSize = 64 << 10;
  const std::vector<uint8_t> data = Pattern(kSize, 2);
  std::vector<uint8_t> result(kSize, 0);
  SP_DeviceMemoryBase a = Allocate(kSize);
  SP_DeviceMemoryBase b = Allocate(kSize);
  ASSERT_TRUE(a.opaque && b.opaque);
  TfStatus status;
  se().sync_memcpy_htod(device(), &a, data.data(), kSize, status);
  ASSERT_TF_OK(status);
  se().sync_memcpy_dtod(device(), &b, &a, kSize, status);
  ASSERT_TF_OK(status);
  se().sync_memcpy_dtoh(device(), result.data(), &b, kSize, status);
  ASSERT_TF_OK(status);
  EXPECT_EQ(result, data);
}

TEST_F(StreamExecutorCopy, CopiesAtOffsetsInsideAnAllocation) {
  // TensorFlow's BFC allocator carves sub-buffers by pointer arithmetic on device addresses.
  constexpr uint64_t kSize = 8192;
  const std::vector<uint8_t> zeros(kSize, 0);
  SP_DeviceMemoryBase memory = AllocateHolding(zeros.data(), kSize);
  ASSERT_NE(memory.opaque, nullptr);
  const std::vector<uint8_t> data = Pattern(100, 3);
  Upload(Slice(memory, 1000, 100), data.data(), 100);
  SP_Stream stream = CreateStream();
  TfStatus status;
  SP_DeviceMemoryBase from = Slice(memory, 1000, 100);
  SP_DeviceMemoryBase to = Slice(memory, 5001, 100);  // unaligned is fine for copies
  se().memcpy_dtod(device(), stream, &to, &from, 100, status);
  EXPECT_TF_OK(status);
  se().block_host_until_done(device(), stream, status);
  ASSERT_TF_OK(status);

  std::vector<uint8_t> expected(kSize, 0);
  std::memcpy(expected.data() + 1000, data.data(), 100);
  std::memcpy(expected.data() + 5001, data.data(), 100);
  EXPECT_EQ(Download(memory, kSize), expected);
}

TEST_F(StreamExecutorCopy, CopiesBetweenDevices) {
  constexpr uint64_t kSize = 256 << 10;
  const std::vector<uint8_t> data = Pattern(kSize, 4);
  SP_DeviceMemoryBase on0 = Allocate(kSize, 0);
  SP_DeviceMemoryBase on1 = Allocate(kSize, 1);
  SP_DeviceMemoryBase back_on0 = Allocate(kSize, 0);
  ASSERT_TRUE(on0.opaque && on1.opaque && back_on0.opaque);
  Upload(on0, data.data(), kSize, 0);

  // Device 0's stream copies into device 1's memory (TensorFlow's peer copy).
  SP_Stream stream0 = CreateStream(0);
  TfStatus status;
  se(0).memcpy_dtod(device(0), stream0, &on1, &on0, kSize, status);
  EXPECT_TF_OK(status);
  se(0).block_host_until_done(device(0), stream0, status);
  ASSERT_TF_OK(status);
  EXPECT_EQ(Download(on1, kSize, 1), data);

  // And a synchronous copy back, issued on device 1.
  se(1).sync_memcpy_dtod(device(1), &back_on0, &on1, kSize, status);
  ASSERT_TF_OK(status);
  EXPECT_EQ(Download(back_on0, kSize, 0), data);
}

TEST_F(StreamExecutorCopy, ZeroByteCopiesAreNoOps) {
  SP_DeviceMemoryBase memory = Allocate(256);
  ASSERT_NE(memory.opaque, nullptr);
  SP_DeviceMemoryBase null_memory{SP_DEVICE_MEMORY_BASE_STRUCT_SIZE};  // an empty tensor
  SP_Stream stream = CreateStream();
  uint8_t host = 0;
  TfStatus status;
  se().memcpy_htod(device(), stream, &null_memory, &host, 0, status);
  EXPECT_TF_OK(status);
  se().memcpy_dtoh(device(), stream, &host, &null_memory, 0, status);
  EXPECT_TF_OK(status);
  se().memcpy_dtod(device(), stream, &memory, &null_memory, 0, status);
  EXPECT_TF_OK(status);
  se().block_host_until_done(device(), stream, status);
  EXPECT_TF_OK(status);
  se().sync_memcpy_dtoh(device(), &host, &null_memory, 0, status);
  EXPECT_TF_OK(status);
}

using StreamExecutorMemset = StreamExecutorTest;

TEST_F(StreamExecutorMemset, MemsetMemset32AndMemZeroFillTheirRanges) {
  constexpr uint64_t kSize = 4096;
  const std::vector<uint8_t> ones(kSize, 0x11);
  SP_DeviceMemoryBase memory = AllocateHolding(ones.data(), kSize);
  ASSERT_NE(memory.opaque, nullptr);
  SP_Stream stream = CreateStream();
  TfStatus status;

  SP_DeviceMemoryBase bytes = Slice(memory, 0, 1000);
  se().memset(device(), stream, &bytes, 0xAB, 1000, status);
  EXPECT_TF_OK(status);
  SP_DeviceMemoryBase words = Slice(memory, 1024, 2048);
  se().memset32(device(), stream, &words, 0xDEADBEEF, 2048, status);
  EXPECT_TF_OK(status);
  SP_DeviceMemoryBase zeros = Slice(memory, 3072 + 16, 512);
  se().mem_zero(device(), stream, &zeros, 512, status);
  EXPECT_TF_OK(status);
  se().block_host_until_done(device(), stream, status);
  ASSERT_TF_OK(status);

  std::vector<uint8_t> expected(ones);
  std::memset(expected.data(), 0xAB, 1000);
  for (uint64_t i = 0; i < 2048 / 4; ++i) {
    const uint32_t word = 0xDEADBEEF;
    std::memcpy(expected.data() + 1024 + 4 * i, &word, 4);
  }
  std::memset(expected.data() + 3072 + 16, 0, 512);
  EXPECT_EQ(Download(memory, kSize), expected);  // and nothing outside the ranges changed
}

TEST_F(StreamExecutorMemset, ZeroByteMemsetIsANoOp) {
  // TensorFlow may zero an empty tensor, whose memory is a null address.
  SP_DeviceMemoryBase null_memory{SP_DEVICE_MEMORY_BASE_STRUCT_SIZE};
  SP_Stream stream = CreateStream();
  TfStatus status;
  se().mem_zero(device(), stream, &null_memory, 0, status);
  EXPECT_TF_OK(status);
  se().memset32(device(), stream, &null_memory, 7, 0, status);
  EXPECT_TF_OK(status);
  se().block_host_until_done(device(), stream, status);
  EXPECT_TF_OK(status);
}

// Reads one byte through a device address as if it were a host pointer.
uint8_t ReadThrough(const void* device_address) {
  return *static_cast<const volatile uint8_t*>(device_address);
}

using StreamExecutorDeathTest = StreamExecutorTest;

TEST_F(StreamExecutorDeathTest, HostDereferenceOfAllocatedDeviceMemoryFaults) {
  SP_DeviceMemoryBase memory = Allocate(4096);
  ASSERT_NE(memory.opaque, nullptr);
  const std::vector<uint8_t> data = Pattern(4096, 5);
  Upload(memory, data.data(), data.size());  // the memory is real and holds data...
  // ...but TensorFlow code that touched it on the host would crash, as it would on a real GPU.
  EXPECT_DEATH(ReadThrough(memory.opaque), "");
  EXPECT_DEATH(ReadThrough(Slice(memory, 128, 1).opaque), "");
}

}  // namespace
}  // namespace vgpu_test
