// Tests of the VGPU_* configuration (common/config.h) and of the TensorFlow version check
// (device/tf_version.h): strict parsing, defaults, and errors that name the variable at fault.
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "gtest/gtest.h"
#include "plugin/common/config.h"
#include "plugin/common/cpu_count.h"
#include "plugin/device/tf_version.h"

namespace vgpu {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

// LoadConfig over a fixed environment.
absl::StatusOr<Config> LoadFrom(const std::map<std::string, std::string>& env) {
  return LoadConfig([&env](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

// The configuration `env` gives; one it refuses fails the test (the defaults are returned then).
Config Loaded(const std::map<std::string, std::string>& env) {
  absl::StatusOr<Config> config = LoadFrom(env);
  if (config.ok()) return *std::move(config);
  ADD_FAILURE() << config.status();
  return Config();
}

// Expects `result` to be an error of `code` whose message mentions `text`.
template <typename T>
void ExpectError(const absl::StatusOr<T>& result, absl::StatusCode code, const std::string& text) {
  ASSERT_FALSE(result.ok()) << "expected an error mentioning '" << text << "'";
  EXPECT_EQ(result.status().code(), code) << result.status();
  EXPECT_NE(result.status().message().find(text), std::string::npos) << result.status();
}

// Expects the configuration `env` to be refused as InvalidArgument with a message that mentions
// `text`.
void ExpectInvalid(const std::map<std::string, std::string>& env, const std::string& text) {
  ExpectError(LoadFrom(env), absl::StatusCode::kInvalidArgument, text);
}

TEST(ParseByteSize, ParsesBinaryUnits) {
  EXPECT_EQ(*ParseByteSize("512MiB"), 512 * kMiB);
  EXPECT_EQ(*ParseByteSize("4GiB"), 4 * kGiB);
  EXPECT_EQ(*ParseByteSize("3KiB"), 3 * 1024u);
  EXPECT_EQ(*ParseByteSize("2TiB"), 2 * 1024 * kGiB);
  EXPECT_EQ(*ParseByteSize("1.5KiB"), 1536u);
  EXPECT_EQ(*ParseByteSize("2G"), 2 * kGiB);  // a bare letter is binary
}

TEST(ParseByteSize, ParsesDecimalUnits) {
  EXPECT_EQ(*ParseByteSize("1.5GB"), 1500000000u);
  EXPECT_EQ(*ParseByteSize("10MB"), 10000000u);
  EXPECT_EQ(*ParseByteSize("7KB"), 7000u);
  EXPECT_EQ(*ParseByteSize("1TB"), 1000000000000u);
}

TEST(ParseByteSize, PlainNumbersAreBytes) {
  EXPECT_EQ(*ParseByteSize("100"), 100u);
  EXPECT_EQ(*ParseByteSize("100B"), 100u);
  EXPECT_EQ(*ParseByteSize("1000000"), 1000000u);
}

TEST(ParseByteSize, IsCaseInsensitiveAndIgnoresSurroundingSpace) {
  EXPECT_EQ(*ParseByteSize("4gib"), 4 * kGiB);
  EXPECT_EQ(*ParseByteSize("  512 MiB "), 512 * kMiB);
  EXPECT_EQ(*ParseByteSize("1.5gb"), 1500000000u);
}

TEST(ParseByteSize, RejectsUnknownUnits) {
  ExpectError(ParseByteSize("12XB"), absl::StatusCode::kInvalidArgument, "unknown unit");
  ExpectError(ParseByteSize("5 bytes"), absl::StatusCode::kInvalidArgument, "unknown unit");
  ExpectError(ParseByteSize("1e3"), absl::StatusCode::kInvalidArgument, "unknown unit");
}

TEST(ParseByteSize, RejectsZeroAndFractionsOfAByte) {
  EXPECT_FALSE(ParseByteSize("0").ok());
  EXPECT_FALSE(ParseByteSize("0MiB").ok());
  EXPECT_FALSE(ParseByteSize("0.5").ok());
}

TEST(ParseByteSize, RejectsGarbage) {
  for (const char* text : {"", " ", "abc", "MiB", ".", "1.2.3GiB", "-5MiB", "+5MiB", "inf", "nan",
                           "999999999999TiB"}) {
    EXPECT_FALSE(ParseByteSize(text).ok()) << "'" << text << "'";
  }
}

TEST(DefaultMemoryLimit, SplitsHalfOfHostMemoryBetweenDevices) {
  EXPECT_EQ(DefaultMemoryLimit(1, 16 * kGiB), 8 * kGiB);
  EXPECT_EQ(DefaultMemoryLimit(2, 16 * kGiB), 4 * kGiB);
  EXPECT_EQ(DefaultMemoryLimit(4, 1 * kGiB), 256 * kMiB);  // never below the 256MiB floor
  EXPECT_EQ(DefaultMemoryLimit(0, 16 * kGiB), 8 * kGiB);   // a bad count counts as one
}

TEST(LoadConfig, EmptyEnvironmentGivesTheDefaults) {
  absl::StatusOr<Config> config = LoadFrom({});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->device_count, 1);
  EXPECT_EQ(config->backends, std::vector<std::string>{"inproc"});
  EXPECT_EQ(config->descriptor_mode, DescriptorMode::kReuse);
  EXPECT_EQ(config->device_type, "GPU");
  EXPECT_EQ(config->executor, "cpu");
  EXPECT_GE(config->memory_limit_bytes, 256 * kMiB);
}

TEST(LoadConfig, ExecutorNameIsLowerCasedAndTrimmedAndEmptyMeansCpu) {
  // Whether it exists is the registry's judgement.
  EXPECT_EQ(Loaded({{"VGPU_EXECUTOR", " CUDA "}}).executor, "cuda");
  EXPECT_EQ(Loaded({{"VGPU_EXECUTOR", ""}}).executor, "cpu");
}

TEST(LoadConfig, EmptyBackendMeansInproc) {
  EXPECT_EQ(Loaded({{"VGPU_BACKEND", ""}}).backends, std::vector<std::string>{"inproc"});
}

TEST(LoadConfig, DeviceCountGivesOneBackendPerDevice) {
  absl::StatusOr<Config> config = LoadFrom({{"VGPU_DEVICE_COUNT", "3"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->device_count, 3);
  EXPECT_EQ(config->backends, (std::vector<std::string>{"inproc", "inproc", "inproc"}));
  EXPECT_TRUE(LoadFrom({{"VGPU_DEVICE_COUNT", "1"}}).ok());
  EXPECT_TRUE(LoadFrom({{"VGPU_DEVICE_COUNT", "16"}}).ok());
}

TEST(LoadConfig, RejectsDeviceCountOutsideOneToSixteen) {
  for (const char* count : {"0", "17", "-1", "two", "2x", "", "1.5"}) {
    SCOPED_TRACE(count);
    ExpectInvalid({{"VGPU_DEVICE_COUNT", count}}, "VGPU_DEVICE_COUNT");
  }
}

TEST(LoadConfig, BackendListSetsTheDeviceCount) {
  absl::StatusOr<Config> config = LoadFrom({{"VGPU_BACKEND", "inproc, inproc"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->device_count, 2);
  EXPECT_EQ(config->backends, (std::vector<std::string>{"inproc", "inproc"}));
}

TEST(LoadConfig, RejectsBackendListThatDisagreesWithDeviceCount) {
  ExpectInvalid({{"VGPU_BACKEND", "inproc,inproc"}, {"VGPU_DEVICE_COUNT", "3"}}, "VGPU_BACKEND");
}

TEST(LoadConfig, RejectsUnknownBackend) {
  ExpectInvalid({{"VGPU_BACKEND", "cuda"}}, "VGPU_BACKEND");
  ExpectInvalid({{"VGPU_BACKEND", "inproc,"}}, "VGPU_BACKEND");
}

TEST(LoadConfig, AcceptsRemoteBackends) {
  absl::StatusOr<Config> config =
      LoadFrom({{"VGPU_BACKEND", "unix:///tmp/vgpu.sock,tcp://localhost:7000?device=1"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->device_count, 2);
  EXPECT_EQ(config->backends[1], "tcp://localhost:7000?device=1");
}

TEST(LoadConfig, RejectsMalformedRemoteBackends) {
  for (const char* bad : {"unix://relative.sock", "unix://", "tcp://localhost", "tcp://:7000",
                          "tcp://localhost:99999", "tcp://localhost:0",
                          "unix:///tmp/a.sock?dev=1"}) {
    ExpectInvalid({{"VGPU_BACKEND", bad}}, "VGPU_BACKEND");
  }
}

TEST(LoadConfig, ReadsDescriptorMode) {
  EXPECT_EQ(LoadFrom({{"VGPU_DESCRIPTOR_MODE", "forward"}})->descriptor_mode,
            DescriptorMode::kForward);
  EXPECT_EQ(LoadFrom({{"VGPU_DESCRIPTOR_MODE", "FORWARD"}})->descriptor_mode,
            DescriptorMode::kForward);
  EXPECT_EQ(LoadFrom({{"VGPU_DESCRIPTOR_MODE", "reuse"}})->descriptor_mode,
            DescriptorMode::kReuse);
  ExpectInvalid({{"VGPU_DESCRIPTOR_MODE", "cache"}}, "VGPU_DESCRIPTOR_MODE");
  EXPECT_STREQ(DescriptorModeName(DescriptorMode::kReuse), "reuse");
  EXPECT_STREQ(DescriptorModeName(DescriptorMode::kForward), "forward");
}

TEST(LoadConfig, ReadsTheTenantNameAndRefusesOneThatIsNotAPlainName) {
  EXPECT_EQ(LoadFrom({})->tenant, "");
  EXPECT_EQ(LoadFrom({{"VGPU_TENANT", "team-a.prod_1"}})->tenant, "team-a.prod_1");
  ExpectInvalid({{"VGPU_TENANT", "team a"}}, "VGPU_TENANT");
  ExpectInvalid({{"VGPU_TENANT", ""}}, "1 to 64");
  ExpectInvalid({{"VGPU_TENANT", std::string(65, 'x')}}, "VGPU_TENANT");
  EXPECT_TRUE(ValidateTenantName(std::string(64, 'x')).ok());
  EXPECT_FALSE(ValidateTenantName("a\nb").ok());
}

TEST(LoadConfig, ReadsMemoryLimit) {
  absl::StatusOr<Config> config = LoadFrom({{"VGPU_MEMORY_LIMIT", "64MiB"}});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->memory_limit_bytes, 64 * kMiB);
  EXPECT_EQ(LoadFrom({{"VGPU_MEMORY_LIMIT", "1MiB"}})->memory_limit_bytes, kMiB);
}

TEST(LoadConfig, RejectsMemoryLimitBelowOneMiB) {
  ExpectInvalid({{"VGPU_MEMORY_LIMIT", "512KiB"}}, "VGPU_MEMORY_LIMIT");
  ExpectInvalid({{"VGPU_MEMORY_LIMIT", "100"}}, "VGPU_MEMORY_LIMIT");
}

TEST(LoadConfig, RejectsUnparsableMemoryLimit) {
  ExpectInvalid({{"VGPU_MEMORY_LIMIT", "lots"}}, "VGPU_MEMORY_LIMIT");
  ExpectInvalid({{"VGPU_MEMORY_LIMIT", "4XiB"}}, "VGPU_MEMORY_LIMIT");
}

TEST(LoadConfig, ValidatesDeviceType) {
  EXPECT_EQ(LoadFrom({{"VGPU_DEVICE_TYPE", "VGPU"}})->device_type, "VGPU");
  EXPECT_EQ(LoadFrom({{"VGPU_DEVICE_TYPE", "MY_GPU"}})->device_type, "MY_GPU");
  for (const char* type : {"gpu", "", "1GPU", "_GPU", "G-PU", "GPU2", "GPU "}) {
    SCOPED_TRACE(type);
    ExpectInvalid({{"VGPU_DEVICE_TYPE", type}}, "VGPU_DEVICE_TYPE");
  }
}

TEST(CheckTensorFlowVersion, AcceptsAnyPatchOfTheSameMinor) {
  EXPECT_TRUE(CheckTensorFlowVersion("2.21.0", "2.21.3").ok());
  EXPECT_TRUE(CheckTensorFlowVersion("2.21.0", "2.21.0").ok());
  EXPECT_TRUE(CheckTensorFlowVersion("2.21.1", "2.21.0rc1").ok());
}

TEST(CheckTensorFlowVersion, RejectsAnotherMinorOrMajor) {
  absl::Status older = CheckTensorFlowVersion("2.21.0", "2.20.0");
  EXPECT_EQ(older.code(), absl::StatusCode::kFailedPrecondition) << older;
  EXPECT_NE(older.message().find("2.20.0"), std::string::npos) << older;
  EXPECT_NE(older.message().find("tensorflow-cpu==2.21.*"), std::string::npos) << older;
  EXPECT_EQ(CheckTensorFlowVersion("2.21.0", "2.22.0").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CheckTensorFlowVersion("2.21.0", "3.21.0").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CheckTensorFlowVersion("2.21.0", "garbage").code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(RunningTensorFlowVersion, IsUnknownWithoutTensorFlowsCLibrary) {
  // The test binary links only libtensorflow_framework.so.2, which does not define TF_Version.
  EXPECT_EQ(RunningTensorFlowVersion(), std::nullopt);
}

TEST(LoadConfig, TimeoutDefaultsToSixtySecondsAndAcceptsDecimalsAndZero) {
  EXPECT_EQ(Loaded({}).timeout_seconds, 60);
  EXPECT_EQ(Loaded({{"VGPU_TIMEOUT", "2.5"}}).timeout_seconds, 2.5);
  EXPECT_EQ(Loaded({{"VGPU_TIMEOUT", "0"}}).timeout_seconds, 0);  // no deadline
}

TEST(LoadConfig, TraceIsOffByDefaultAndReadsThePath) {
  EXPECT_EQ(Loaded({}).trace_path, "");
  EXPECT_EQ(Loaded({{"VGPU_TRACE", " /tmp/run.vgtrace "}}).trace_path, "/tmp/run.vgtrace");
}

TEST(LoadConfig, TimeoutThatIsNotANumberOfSecondsIsAnErrorNamingTheVariable) {
  for (const char* bad : {"", "soon", "-1", "10s", "nan", "inf", "1e9"}) {
    ExpectInvalid({{"VGPU_TIMEOUT", bad}}, "VGPU_TIMEOUT");
  }
}

TEST(ComputeThreads, DefaultIsZeroMeaningTheUsableCpus) {
  EXPECT_EQ(Loaded({}).compute_threads, 0);
  EXPECT_EQ(Loaded({{"VGPU_THREADS", " 3 "}}).compute_threads, 3);
}

TEST(ComputeThreads, RejectsWhatIsNotAThreadCount) {
  for (const char* bad : {"-1", "two", "1.5", "", "100000"}) {
    ExpectInvalid({{"VGPU_THREADS", bad}}, "VGPU_THREADS");
  }
}

TEST(InlineLaunchBytes, UnsetLeavesTheExecutorsDefaultAndSizesParse) {
  EXPECT_FALSE(Loaded({}).inline_launch_bytes.has_value());
  EXPECT_EQ(Loaded({{"VGPU_INLINE_LAUNCH_BYTES", "0"}}).inline_launch_bytes, 0u);
  EXPECT_EQ(Loaded({{"VGPU_INLINE_LAUNCH_BYTES", " 16KiB "}}).inline_launch_bytes, 16u * 1024);
}

TEST(InlineLaunchBytes, RejectsWhatIsNotASizeAndHugeSizes) {
  for (const char* bad : {"-1", "lots", "", "1TiB"}) {
    ExpectInvalid({{"VGPU_INLINE_LAUNCH_BYTES", bad}}, "VGPU_INLINE_LAUNCH_BYTES");
  }
}

TEST(GraphFusions, OnByDefaultAndZeroTurnsThemOff) {
  EXPECT_TRUE(Loaded({}).graph_fusions);
  EXPECT_FALSE(Loaded({{"VGPU_GRAPH_FUSIONS", " 0 "}}).graph_fusions);
  EXPECT_TRUE(Loaded({{"VGPU_GRAPH_FUSIONS", "1"}}).graph_fusions);
}

TEST(GraphFusions, RejectsWhatIsNotZeroOrOne) {
  for (const char* bad : {"", "off", "2", "true"}) {
    ExpectInvalid({{"VGPU_GRAPH_FUSIONS", bad}}, "VGPU_GRAPH_FUSIONS");
  }
}

TEST(StreamQueues, OneQueuePerDeviceByDefaultAndStreamGivesEachItsOwn) {
  EXPECT_TRUE(Loaded({}).one_queue_per_device);
  EXPECT_TRUE(Loaded({{"VGPU_STREAM_QUEUES", " device "}}).one_queue_per_device);
  EXPECT_FALSE(Loaded({{"VGPU_STREAM_QUEUES", "stream"}}).one_queue_per_device);
  for (const char* bad : {"", "Device", "streams", "1"}) {
    ExpectInvalid({{"VGPU_STREAM_QUEUES", bad}}, "VGPU_STREAM_QUEUES");
  }
}

TEST(CpuIsaCap, AcceptsTheThreeLevelsAndRejectsAnythingElse) {
  for (const char* good : {"baseline", " avx2", "avx512 "}) {
    EXPECT_TRUE(LoadFrom({{"VGPU_CPU_ISA", good}}).ok()) << good;
  }
  for (const char* bad : {"", "AVX2", "avx", "sse4", "native"}) {
    ExpectInvalid({{"VGPU_CPU_ISA", bad}}, "VGPU_CPU_ISA");
  }
}

TEST(CpuCount, CgroupV2QuotaRoundsUpAndMaxMeansNoQuota) {
  EXPECT_EQ(CpuCountFromCgroupV2("max 100000\n"), std::nullopt);
  EXPECT_EQ(CpuCountFromCgroupV2("200000 100000\n"), 2);
  EXPECT_EQ(CpuCountFromCgroupV2("150000 100000"), 2);  // 1.5 CPUs: two threads
  EXPECT_EQ(CpuCountFromCgroupV2("5000 100000"), 1);
  EXPECT_EQ(CpuCountFromCgroupV2("garbage"), std::nullopt);
  EXPECT_EQ(CpuCountFromCgroupV2(""), std::nullopt);
}

TEST(CpuCount, UsableCpusArePositiveAndAtMostTheHostsCores) {
  const int cpus = UsableCpuCount();
  EXPECT_GE(cpus, 1);
  const unsigned host = std::thread::hardware_concurrency();
  if (host > 0) {
    EXPECT_LE(cpus, static_cast<int>(host));
  }
}

}  // namespace
}  // namespace vgpu
