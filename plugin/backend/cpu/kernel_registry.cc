// The table of CPU kernels (see kernel_registry.h). Adding a kernel: give it an id in its
// family's protocol header, implement it under kernels/, and Add it in the family's function.
#include "plugin/backend/cpu/kernel_registry.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace vgpu {

namespace {

// The folder VGPU_RECORD_FUZZ_CORPUS names, or null (read once). A development aid: with it set,
// every launch small enough for the kernel-payload fuzzer is written there as a seed in the
// fuzzer's input layout (tests/fuzz/kernel_launch_fuzz.h), so that running the C++ and Python
// kernel tests yields valid launches of every kernel (scripts/fuzz.sh --seeds).
const char* SeedFolder() {
  static const char* const folder = [] {
    const char* value = std::getenv("VGPU_RECORD_FUZZ_CORPUS");
    return value != nullptr && *value != '\0' ? value : nullptr;
  }();
  return folder;
}

template <typename T>
void AppendBytes(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

void RecordSeed(const KernelInfo& kernel, const KernelContext& context) {
  constexpr size_t kMaxSeedBuffers = 16;             // the fuzzer's limits
  constexpr uint64_t kMaxSeedBufferBytes = 1u << 16;
  if (context.buffers.size() > kMaxSeedBuffers) return;
  uint32_t kernel_id = 0;
  for (uint32_t id : Kernels().Ids()) {
    if (Kernels().Find(id)->run == kernel.run) kernel_id = id;
  }
  if (kernel_id == 0) return;  // not a kernel of the table (a test's stand-in)
  std::string bytes;
  AppendBytes<uint32_t>(&bytes, kernel_id);
  AppendBytes<uint8_t>(&bytes, static_cast<uint8_t>(context.buffers.size()));
  for (uint64_t size : context.buffer_sizes) {
    if (size > kMaxSeedBufferBytes) return;
    AppendBytes<uint32_t>(&bytes, static_cast<uint32_t>(size));
  }
  std::string descriptors;
  if (!context.descriptors.empty()) {
    AppendBytes<uint8_t>(&descriptors, static_cast<uint8_t>(context.descriptors.size()));
    for (const DescriptorView& view : context.descriptors) {
      AppendBytes<uint8_t>(&descriptors, static_cast<uint8_t>(view.kind));
      AppendBytes<uint16_t>(&descriptors, static_cast<uint16_t>(view.settings.size()));
      descriptors.append(reinterpret_cast<const char*>(view.settings.data()), view.settings.size());
    }
  }
  AppendBytes<uint16_t>(&bytes, static_cast<uint16_t>(descriptors.size()));
  bytes += descriptors;
  bytes.append(reinterpret_cast<const char*>(context.params.data()), context.params.size());
  const size_t hash = std::hash<std::string>()(bytes);
  std::ofstream file(absl::StrCat(SeedFolder(), "/", kernel.name, "-", absl::Hex(hash)),
                     std::ios::binary);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

absl::Status RunKernel(const KernelInfo& kernel, const KernelContext& context) {
  if (SeedFolder() != nullptr) RecordSeed(kernel, context);
  return RunGuarded(kernel.name, [&] { return kernel.run(context); });
}

const KernelTable& Kernels() {
  using namespace cpu_kernels;  // NOLINT: the families' Add*Kernels
  static const KernelTable* table = NewKernelTable<KernelContext>(
      {AddActivationKernels, AddElementwiseKernels, AddConvolutionKernels, AddMatmulKernels,
       AddBiasKernels, AddRearrangeKernels, AddPoolingKernels, AddReductionKernels,
       AddSoftmaxKernels, AddScanAndTopKKernels, AddDataMovementKernels, AddReverseKernels,
       AddMirrorPadKernels, AddRandomKernels, AddNormalizationKernels, AddTrainingKernels,
       AddRnnKernels, AddSparseKernels, AddImageTransformKernels, AddImageColorKernels,
       AddImageResizeKernels});
  return *table;
}

}  // namespace vgpu
