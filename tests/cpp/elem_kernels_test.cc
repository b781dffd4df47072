// The CPU executor's activation, element-wise, random, reduction and mirror-pad kernels driven
// directly, as a hostile or buggy client could drive them: descriptors and parameters that do
// not fit the buffers, overflowing sizes, unknown modes and out-of-range values fail with
// InvalidArgument (or follow TensorFlow's semantics), and no kernel writes outside its buffers
// (each buffer is followed by canary bytes that must survive).
#define EIGEN_USE_THREADS

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernels/activation.h"
#include "plugin/protocol/kernels/data_movement.h"
#include "plugin/protocol/kernels/elementwise.h"
#include "plugin/protocol/kernels/random.h"
#include "plugin/protocol/kernels/reduction.h"
#include "plugin/protocol/launch_params.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu {
namespace {

constexpr uint8_t kCanary = 0xCD;
constexpr size_t kCanaryBytes = 64;

// A device buffer of `bytes` bytes followed by canary bytes.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes) : bytes_(bytes), storage_(bytes + kCanaryBytes, kCanary) {}
  template <typename T>
  static GuardedBuffer Of(const std::vector<T>& values) {
    GuardedBuffer buffer(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(buffer.data(), values.data(), buffer.bytes_);
    return buffer;
  }
  uint8_t* data() { return storage_.data(); }
  size_t size() const { return bytes_; }
  template <typename T>
  std::vector<T> As() const {
    std::vector<T> values(bytes_ / sizeof(T));
    if (!values.empty()) std::memcpy(values.data(), storage_.data(), values.size() * sizeof(T));
    return values;
  }
  bool CanaryIntact() const {
    for (size_t i = bytes_; i < storage_.size(); ++i) {
      if (storage_[i] != kCanary) return false;
    }
    return true;
  }

 private:
  size_t bytes_;
  std::vector<uint8_t> storage_;
};

// The settings of one descriptor of a launch, as the session hands them to a kernel.
struct Described {
  DescriptorKind kind;
  std::vector<uint8_t> bytes;
  template <typename Settings>
  static Described Of(const Settings& settings) {
    Described described{DescriptorTraits<Settings>::kKind,
                        std::vector<uint8_t>(sizeof(Settings))};
    std::memcpy(described.bytes.data(), &settings, sizeof(Settings));
    return described;
  }
};

TensorDescriptorSettings TensorOf(DType dtype, std::vector<int64_t> dims) {
  TensorDescriptorSettings tensor;
  tensor.dtype = dtype;
  tensor.rank = static_cast<int32_t>(dims.size());
  for (size_t i = 0; i < dims.size() && i < static_cast<size_t>(kMaxRank); ++i) {
    tensor.dims[i] = dims[i];
  }
  return tensor;
}

class ElemKernelsTest : public ::testing::Test {
 protected:
  ElemKernelsTest() : pool_(2), device_(&pool_, 2) {}

  // Runs kernel `id` with `descriptors` on `buffers` and the parameter block `params`; checks
  // the canaries.
  absl::Status Run(KernelId id, const std::vector<Described>& descriptors,
                   std::vector<GuardedBuffer*> buffers, const ParamBlock& params = {}) {
    const KernelInfo* kernel = Kernels().Find(static_cast<uint32_t>(id));
    EXPECT_NE(kernel, nullptr);
    if (kernel == nullptr) return absl::NotFoundError("no kernel");
    std::vector<uint8_t*> pointers;
    std::vector<uint64_t> sizes;
    for (GuardedBuffer* buffer : buffers) {
      pointers.push_back(buffer->data());
      sizes.push_back(buffer->size());
    }
    std::vector<DescriptorView> views;
    for (const Described& d : descriptors) views.push_back(DescriptorView{d.kind, d.bytes});
    KernelContext context{pointers, sizes, params, &device_, views};
    absl::Status status = kernel->run(context);
    for (GuardedBuffer* buffer : buffers) EXPECT_TRUE(buffer->CanaryIntact());
    return status;
  }

  template <typename... Fields>
  static ParamBlock Block(const Fields&... fields) {
    ParamBlock block;
    ParamWriter writer(&block);
    (writer.Put(fields), ...);
    return block;
  }

  Eigen::ThreadPool pool_;
  Eigen::ThreadPoolDevice device_;
};

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

ActivationDescriptorSettings Activation(ActivationMode mode, double coef = 0) {
  ActivationDescriptorSettings settings;
  settings.mode = mode;
  settings.coef = coef;
  return settings;
}

TEST_F(ElemKernelsTest, LeakyReluUsesTheDescriptorCoefficient) {
  GuardedBuffer x = GuardedBuffer::Of<float>({-2, -1, 0, 3});
  GuardedBuffer y(4 * sizeof(float));
  ASSERT_TRUE(Run(activation::kForward,
                  {Described::Of(Activation(ActivationMode::kLeakyRelu, 0.25)),
                   Described::Of(TensorOf(DType::kFloat32, {4}))},
                  {&x, &y})
                  .ok());
  EXPECT_EQ(y.As<float>(), (std::vector<float>{-0.5f, -0.25f, 0, 3}));
}

TEST_F(ElemKernelsTest, ActivationsRefuseBadModesDtypesAndSmallBuffers) {
  GuardedBuffer x(4 * sizeof(float)), y(4 * sizeof(float)), small(3 * sizeof(float));
  const Described tensor = Described::Of(TensorOf(DType::kFloat32, {4}));
  EXPECT_EQ(Run(activation::kForward,
                {Described::Of(Activation(static_cast<ActivationMode>(77))), tensor}, {&x, &y})
                .code(),
            kInvalid);
  ActivationDescriptorSettings half = Activation(ActivationMode::kElu);
  half.dtype = DType::kFloat16;
  EXPECT_EQ(Run(activation::kForward, {Described::Of(half), tensor}, {&x, &y}).code(), kInvalid);
  EXPECT_EQ(Run(activation::kForward, {Described::Of(Activation(ActivationMode::kSelu)), tensor},
                {&x, &small})
                .code(),
            kInvalid);
  EXPECT_EQ(Run(activation::kBackward,
                {Described::Of(Activation(ActivationMode::kSoftplus)), tensor}, {&x, &small, &y})
                .code(),
            kInvalid);
  TensorDescriptorSettings huge = TensorOf(DType::kFloat32, {int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_EQ(Run(activation::kForward,
                {Described::Of(Activation(ActivationMode::kSoftsign)), Described::Of(huge)},
                {&x, &y})
                .code(),
            kInvalid);
  TensorDescriptorSettings bad_rank = TensorOf(DType::kFloat32, {4});
  bad_rank.rank = 1000;
  EXPECT_EQ(Run(activation::kForward,
                {Described::Of(Activation(ActivationMode::kRelu)), Described::Of(bad_rank)},
                {&x, &y})
                .code(),
            kInvalid);
}

TEST_F(ElemKernelsTest, PredicatesWriteBoolsOfTheInputCount) {
  GuardedBuffer x = GuardedBuffer::Of<float>({1.0f, NAN, INFINITY, -INFINITY, 0.0f});
  GuardedBuffer y(5);
  OpTensorDescriptorSettings op;
  op.op = ElementwiseOp::kIsFinite;
  ASSERT_TRUE(Run(elementwise::kUnary,
                  {Described::Of(op), Described::Of(TensorOf(DType::kFloat32, {5}))}, {&x, &y})
                  .ok());
  EXPECT_EQ(y.As<uint8_t>(), (std::vector<uint8_t>{1, 0, 0, 0, 1}));
  GuardedBuffer short_y(4);
  EXPECT_EQ(Run(elementwise::kUnary,
                {Described::Of(op), Described::Of(TensorOf(DType::kFloat32, {5}))}, {&x, &short_y})
                .code(),
            kInvalid);
  op.dtype = DType::kInt64;  // predicates take floating dtypes only
  EXPECT_EQ(Run(elementwise::kUnary,
                {Described::Of(op), Described::Of(TensorOf(DType::kInt64, {5}))}, {&x, &y})
                .code(),
            kInvalid);
}

TEST_F(ElemKernelsTest, RangeRefusesBadShapesAndSmallBuffers) {
  GuardedBuffer out(5 * sizeof(int64_t));
  const ParamBlock params = Block(uint64_t{3}, uint64_t{2});
  ASSERT_TRUE(
      Run(elementwise::kRange, {Described::Of(TensorOf(DType::kInt64, {5}))}, {&out}, params)
          .ok());
  EXPECT_EQ(out.As<int64_t>(), (std::vector<int64_t>{3, 5, 7, 9, 11}));
  EXPECT_EQ(
      Run(elementwise::kRange, {Described::Of(TensorOf(DType::kInt64, {6}))}, {&out}, params)
          .code(),
      kInvalid);
  EXPECT_EQ(
      Run(elementwise::kRange, {Described::Of(TensorOf(DType::kInt64, {5, 1}))}, {&out}, params)
          .code(),
      kInvalid);
  EXPECT_EQ(Run(elementwise::kRange, {Described::Of(TensorOf(DType::kBool, {5}))}, {&out}, params)
                .code(),
            kInvalid);
  EXPECT_EQ(Run(elementwise::kRange, {Described::Of(TensorOf(DType::kInt64, {5}))}, {&out},
                Block(uint64_t{3}))
                .code(),
            kInvalid);
}

random::PhiloxParams Philox(DType dtype, uint64_t count) {
  random::PhiloxParams params;
  params.dtype = dtype;
  params.count = count;
  params.key = 0x0123456789ABCDEFull;
  params.counter[0] = 7;
  params.counter[1] = 9;
  return params;
}

TEST_F(ElemKernelsTest, RandomKernelsRefuseHugeCountsSmallBuffersAndWrongDtypes) {
  GuardedBuffer out(16 * sizeof(float));
  for (KernelId id : {random::kUniform, random::kNormal, random::kTruncatedNormal}) {
    EXPECT_TRUE(Run(id, {}, {&out}, Block(Philox(DType::kFloat32, 16))).ok());
    EXPECT_EQ(Run(id, {}, {&out}, Block(Philox(DType::kFloat32, 17))).code(), kInvalid);
    EXPECT_EQ(Run(id, {}, {&out}, Block(Philox(DType::kFloat32, uint64_t{1} << 60))).code(),
              kInvalid);
    EXPECT_EQ(Run(id, {}, {&out}, Block(Philox(DType::kInt32, 4))).code(), kInvalid);
  }
  EXPECT_EQ(Run(random::kUniformFullInt, {}, {&out}, Block(Philox(DType::kFloat32, 4))).code(),
            kInvalid);
  random::UniformIntParams ints;
  ints.philox = Philox(DType::kInt32, 16);
  ints.minval = 5;
  ints.maxval = 5;  // an empty range would divide by zero
  EXPECT_EQ(Run(random::kUniformInt, {}, {&out}, Block(ints)).code(), kInvalid);
  ints.maxval = int64_t{1} << 40;  // beyond int32
  EXPECT_EQ(Run(random::kUniformInt, {}, {&out}, Block(ints)).code(), kInvalid);
  ints.minval = -3;
  ints.maxval = 4;
  ASSERT_TRUE(Run(random::kUniformInt, {}, {&out}, Block(ints)).ok());
  for (int32_t v : out.As<int32_t>()) EXPECT_TRUE(v >= -3 && v < 4) << v;
}

TEST_F(ElemKernelsTest, TruncatedNormalsStayWithinTwoAndGroupsAreIndependent) {
  GuardedBuffer all(1001 * sizeof(double)), tail(1 * sizeof(double));
  ASSERT_TRUE(Run(random::kTruncatedNormal, {}, {&all}, Block(Philox(DType::kFloat64, 1001))).ok());
  for (double v : all.As<double>()) EXPECT_LT(std::abs(v), 2.0);
  // Group 500 (the last one, elements 1000..) starts at block 500 * 128, whatever came before.
  random::PhiloxParams shifted = Philox(DType::kFloat64, 1);
  shifted.counter[0] += 500 * 128;  // no carry: the counter starts at 7
  ASSERT_TRUE(Run(random::kTruncatedNormal, {}, {&tail}, Block(shifted)).ok());
  EXPECT_EQ(tail.As<double>()[0], all.As<double>()[1000]);
}

ParamBlock MirrorParams(uint32_t first, std::vector<int64_t> dims, std::vector<int64_t> before,
                        std::vector<int64_t> after, data_movement::MirrorPadMode mode) {
  ParamBlock block;
  ParamWriter(&block)
      .Put(first)
      .PutArray<int64_t>(dims)
      .PutArray<int64_t>(before)
      .PutArray<int64_t>(after)
      .Put(static_cast<uint32_t>(mode));
  return block;
}

TEST_F(ElemKernelsTest, MirrorPadMirrorsAndItsGradientFolds) {
  using data_movement::MirrorPadMode;
  GuardedBuffer x = GuardedBuffer::Of<float>({1, 2, 3});
  GuardedBuffer y(7 * sizeof(float));
  ASSERT_TRUE(Run(data_movement::kMirrorPad, {}, {&x, &y},
                  MirrorParams(4, {3}, {2}, {2}, MirrorPadMode::kReflect))
                  .ok());
  EXPECT_EQ(y.As<float>(), (std::vector<float>{3, 2, 1, 2, 3, 2, 1}));
  ASSERT_TRUE(Run(data_movement::kMirrorPad, {}, {&x, &y},
                  MirrorParams(4, {3}, {3}, {1}, MirrorPadMode::kSymmetric))
                  .ok());
  EXPECT_EQ(y.As<float>(), (std::vector<float>{3, 2, 1, 1, 2, 3, 3}));
  GuardedBuffer dy = GuardedBuffer::Of<float>({1, 10, 100, 1000, 10000, 100000, 1000000});
  GuardedBuffer dx(3 * sizeof(float));
  ASSERT_TRUE(Run(data_movement::kMirrorPadGrad, {}, {&dy, &dx},
                  MirrorParams(static_cast<uint32_t>(DType::kFloat32), {3}, {2}, {2},
                               MirrorPadMode::kReflect))
                  .ok());
  EXPECT_EQ(dx.As<float>(), (std::vector<float>{100 + 1000000, 10 + 1000 + 100000, 10000 + 1}));
}

TEST_F(ElemKernelsTest, MirrorPadRefusesPadsBeyondTheModeAndMalformedBlocks) {
  using data_movement::MirrorPadMode;
  GuardedBuffer x(3 * sizeof(float)), y(64 * sizeof(float));
  EXPECT_EQ(Run(data_movement::kMirrorPad, {}, {&x, &y},
                MirrorParams(4, {3}, {3}, {0}, MirrorPadMode::kReflect))
                .code(),
            kInvalid);
  EXPECT_EQ(Run(data_movement::kMirrorPad, {}, {&x, &y},
                MirrorParams(4, {3}, {0}, {4}, MirrorPadMode::kSymmetric))
                .code(),
            kInvalid);
  EXPECT_EQ(Run(data_movement::kMirrorPad, {}, {&x, &y},
                MirrorParams(4, {3}, {-1}, {0}, MirrorPadMode::kSymmetric))
                .code(),
            kInvalid);
  EXPECT_EQ(Run(data_movement::kMirrorPad, {}, {&x, &y},
                MirrorParams(4, {-3}, {0}, {0}, MirrorPadMode::kSymmetric))
                .code(),
            kInvalid);
  EXPECT_EQ(Run(data_movement::kMirrorPad, {}, {&x, &y},
                MirrorParams(4, {3}, {1}, {1}, static_cast<MirrorPadMode>(9)))
                .code(),
            kInvalid);
  EXPECT_EQ(Run(data_movement::kMirrorPad, {}, {&x, &y},
                MirrorParams(3, {3}, {1}, {1}, MirrorPadMode::kReflect))
                .code(),
            kInvalid);
  EXPECT_EQ(Run(data_movement::kMirrorPad, {}, {&x, &y},
                MirrorParams(4, {3, 1}, {1}, {1}, MirrorPadMode::kReflect))
                .code(),
            kInvalid);
  GuardedBuffer small_y(4 * sizeof(float));
  EXPECT_EQ(Run(data_movement::kMirrorPad, {}, {&x, &small_y},
                MirrorParams(4, {3}, {1}, {1}, MirrorPadMode::kReflect))
                .code(),
            kInvalid);
  const int64_t big = int64_t{1} << 30;
  EXPECT_EQ(Run(data_movement::kMirrorPad, {}, {&x, &y},
                MirrorParams(4, {big, big, big}, {1, 1, 1}, {1, 1, 1},
                             MirrorPadMode::kReflect))
                .code(),
            kInvalid);
  EXPECT_EQ(Run(data_movement::kMirrorPadGrad, {}, {&y, &x},
                MirrorParams(static_cast<uint32_t>(DType::kBool), {3}, {1}, {1},
                             MirrorPadMode::kReflect))
                .code(),
            kInvalid);
}

TEST_F(ElemKernelsTest, ScanTopKAndInTopKRefuseMalformedLaunches) {
  GuardedBuffer x = GuardedBuffer::Of<float>({3, 1, 2, 5, 4, 0});
  GuardedBuffer y(6 * sizeof(float));
  ReduceDescriptorSettings sum;
  sum.op = ReduceOp::kSum;
  const ParamBlock scan_params = Block(reduction::ScanParams{});
  ASSERT_TRUE(Run(reduction::kScan,
                  {Described::Of(sum), Described::Of(TensorOf(DType::kFloat32, {1, 6, 1}))},
                  {&x, &y}, scan_params)
                  .ok());
  EXPECT_EQ(y.As<float>(), (std::vector<float>{3, 4, 6, 11, 15, 15}));
  ReduceDescriptorSettings max;
  max.op = ReduceOp::kMax;
  EXPECT_EQ(Run(reduction::kScan,
                {Described::Of(max), Described::Of(TensorOf(DType::kFloat32, {1, 6, 1}))},
                {&x, &y}, scan_params)
                .code(),
            kInvalid);
  EXPECT_EQ(Run(reduction::kScan,
                {Described::Of(sum), Described::Of(TensorOf(DType::kFloat32, {1, 7, 1}))},
                {&x, &y}, scan_params)
                .code(),
            kInvalid);

  GuardedBuffer values(2 * 2 * sizeof(float)), indices(2 * 2 * sizeof(int32_t));
  ASSERT_TRUE(Run(reduction::kTopK,
                  {Described::Of(TensorOf(DType::kFloat32, {2, 3})),
                   Described::Of(TensorOf(DType::kInt32, {2, 2}))},
                  {&x, &values, &indices})
                  .ok());
  EXPECT_EQ(values.As<float>(), (std::vector<float>{3, 2, 5, 4}));
  EXPECT_EQ(indices.As<int32_t>(), (std::vector<int32_t>{0, 2, 0, 1}));
  EXPECT_EQ(Run(reduction::kTopK,
                {Described::Of(TensorOf(DType::kFloat32, {2, 3})),
                 Described::Of(TensorOf(DType::kInt32, {2, 4}))},  // k > cols
                {&x, &values, &indices})
                .code(),
            kInvalid);
  EXPECT_EQ(Run(reduction::kTopK,
                {Described::Of(TensorOf(DType::kFloat32, {2, 3})),
                 Described::Of(TensorOf(DType::kFloat32, {2, 2}))},  // float indices
                {&x, &values, &indices})
                .code(),
            kInvalid);

  GuardedBuffer targets = GuardedBuffer::Of<int32_t>({0, 7});  // 7 is out of range
  GuardedBuffer in_top(2);
  ASSERT_TRUE(Run(reduction::kInTopK,
                  {Described::Of(TensorOf(DType::kFloat32, {2, 3})),
                   Described::Of(TensorOf(DType::kInt32, {2}))},
                  {&x, &targets, &in_top}, Block(int64_t{1}))
                  .ok());
  EXPECT_EQ(in_top.As<uint8_t>(), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(Run(reduction::kInTopK,
                {Described::Of(TensorOf(DType::kFloat32, {2, 3})),
                 Described::Of(TensorOf(DType::kInt32, {3}))},
                {&x, &targets, &in_top}, Block(int64_t{1}))
                .code(),
            kInvalid);
}

TEST_F(ElemKernelsTest, ReductionsRefuseOverflowingLayouts) {
  GuardedBuffer x(64), y(64);
  ReduceDescriptorSettings sum;
  const int64_t big = int64_t{1} << 40;
  // An empty input whose kept dimensions multiply past 64 bits.
  EXPECT_EQ(Run(reduction::kReduce,
                {Described::Of(sum), Described::Of(TensorOf(DType::kFloat32, {0, big, 1, big})),
                 Described::Of(TensorOf(DType::kFloat32, {big, big}))},
                {&x, &y}, Block(reduction::ReduceLayoutParams{1}))
                .code(),
            kInvalid);
  EXPECT_EQ(Run(reduction::kSoftmax, {Described::Of(TensorOf(DType::kFloat32, {big, big}))},
                {&x, &y}, Block(reduction::SoftmaxParams{}))
                .code(),
            kInvalid);
}

}  // namespace
}  // namespace vgpu
