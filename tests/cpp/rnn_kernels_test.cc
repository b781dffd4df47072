// The recurrent kernels (protocol/kernels/rnn.h) and the reversal kernels of the data movement
// family, driven through the CPU executor's kernel table as a session would run them: a valid
// launch computes cuDNN's LSTM, and malformed launches from a hostile client (inconsistent
// descriptors, short buffers, bad sequence lengths, absurd sizes, a foreign reserve space, bad
// parameter blocks) are InvalidArgument errors, never crashes or out-of-bounds accesses.
#define EIGEN_USE_THREADS

#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "plugin/protocol/kernels/data_movement.h"
#include "plugin/protocol/kernels/rnn.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu {
namespace {

// One launch, built up like a client would, and run like the session does.
class TestLaunch {
 public:
  template <typename Settings>
  TestLaunch& Describe(const Settings& settings) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(&settings);
    descriptors_.push_back({DescriptorTraits<Settings>::kKind,
                            std::vector<uint8_t>(bytes, bytes + sizeof(Settings))});
    return *this;
  }
  TestLaunch& Tensor(std::vector<int64_t> dims, DType dtype = DType::kFloat32) {
    TensorDescriptorSettings t;
    t.dtype = dtype;
    t.rank = static_cast<int32_t>(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) t.dims[i] = dims[i];
    return Describe(t);
  }
  // A buffer of `count` floats (index returned for reading it back).
  size_t Floats(size_t count, float value = 0.0f) {
    std::vector<float> values(count, value);
    return Bytes(values.data(), count * sizeof(float));
  }
  size_t Bytes(const void* data, size_t size) {
    storage_.emplace_back(size);
    if (size > 0) std::memcpy(storage_.back().data(), data, size);
    return storage_.size() - 1;
  }
  std::vector<uint8_t>& buffer(size_t index) { return storage_[index]; }
  template <typename T>
  TestLaunch& Param(const T& value) {
    ParamWriter(&params_).Put(value);
    return *this;
  }
  template <typename T>
  TestLaunch& ParamArray(std::vector<T> values) {
    ParamWriter(&params_).PutArray<T>(values);
    return *this;
  }

  absl::Status Run(KernelId id) {
    static Eigen::ThreadPool pool(2);
    static Eigen::ThreadPoolDevice device(&pool, 2);
    const KernelInfo* kernel = Kernels().Find(static_cast<uint32_t>(id));
    if (kernel == nullptr) return absl::NotFoundError("no such kernel");
    std::vector<DescriptorView> views;
    for (const auto& [kind, bytes] : descriptors_) views.push_back({kind, bytes});
    std::vector<uint8_t*> pointers;
    std::vector<uint64_t> sizes;
    for (std::vector<uint8_t>& b : storage_) {
      pointers.push_back(b.empty() ? nullptr : b.data());
      sizes.push_back(b.size());
    }
    KernelContext context{pointers, sizes, params_, &device, views};
    return kernel->run(context);
  }

 private:
  std::vector<std::pair<DescriptorKind, std::vector<uint8_t>>> descriptors_;
  std::vector<std::vector<uint8_t>> storage_;
  ParamBlock params_;
};

// A one-layer unidirectional LSTM: T steps, batch B, input I, units H.
struct LstmCase {
  int64_t T = 3, B = 2, I = 2, H = 2;
  RnnDescriptorSettings rnn;
  rnn::Geometry g;

  LstmCase() {
    rnn.mode = RnnMode::kLstm;
    rnn.num_layers = 1;
    rnn.input_size = I;
    rnn.hidden_size = H;
    rnn.proj_size = H;
    g.mode = RnnMode::kLstm;
    g.input_size = I;
    g.hidden_size = H;
    g.proj_size = H;
    g.max_seq_length = T;
    g.batch_size = B;
  }
  int64_t params() const { return rnn::ParamsSize(g); }
  int64_t reserve_floats() const { return (rnn::ReserveBytes(g, 4) + 3) / 4; }

  // The descriptors [rnn, dropout, x, y, h, c, w].
  void Describe(TestLaunch& launch) const {
    launch.Describe(rnn)
        .Describe(DropoutDescriptorSettings{})
        .Tensor({T, B, I})
        .Tensor({T, B, H})
        .Tensor({1, B, H})
        .Tensor({1, B, H})
        .Tensor({params()});
  }
  // Buffers [x, hx, cx, w, y, hy, cy, reserve] with zero weights and cx = c0.
  void ForwardBuffers(TestLaunch& launch, float c0) const {
    launch.Floats(T * B * I, 0.5f);
    launch.Floats(B * H, 0.25f);
    launch.Floats(B * H, c0);
    launch.Floats(params(), 0.0f);
    launch.Floats(T * B * H);
    launch.Floats(B * H);
    launch.Floats(B * H);
    launch.Floats(reserve_floats());
  }
};

float ReadFloat(TestLaunch& launch, size_t buffer, size_t index) {
  float value;
  std::memcpy(&value, launch.buffer(buffer).data() + index * sizeof(float), sizeof(float));
  return value;
}

TEST(RnnKernels, ForwardComputesCudnnLstm) {
  LstmCase lstm;
  TestLaunch launch;
  lstm.Describe(launch);
  lstm.ForwardBuffers(launch, 0.8f);
  launch.Param<uint32_t>(1).Param<uint64_t>(0).ParamArray<int32_t>({});
  ASSERT_TRUE(launch.Run(rnn::kForward).ok());
  // Zero weights: i = f = o = 1/2, g = 0, so c_t = c_{t-1} / 2 and h_t = tanh(c_t) / 2.
  const float c3 = 0.8f / 8.0f;
  EXPECT_NEAR(ReadFloat(launch, 6, 0), c3, 1e-6);
  EXPECT_NEAR(ReadFloat(launch, 5, 3), std::tanh(c3) / 2.0f, 1e-6);
  EXPECT_NEAR(ReadFloat(launch, 4, 0), std::tanh(0.4f) / 2.0f, 1e-6);  // y at t = 0
}

TEST(RnnKernels, BackwardRunsOnItsForwardsReserveAndRejectsAForeignOne) {
  LstmCase lstm;
  TestLaunch forward;
  lstm.Describe(forward);
  lstm.ForwardBuffers(forward, 0.8f);
  forward.Param<uint32_t>(1).Param<uint64_t>(0).ParamArray<int32_t>({});
  ASSERT_TRUE(forward.Run(rnn::kForward).ok());
  auto backward = [&](std::vector<int32_t> lengths, bool tamper) {
    TestLaunch launch;
    lstm.Describe(launch);
    for (size_t i : {0, 1, 2, 3}) launch.Bytes(forward.buffer(i).data(), forward.buffer(i).size());
    launch.Floats(lstm.T * lstm.B * lstm.H, 1.0f);  // dy
    launch.Floats(lstm.B * lstm.H, 1.0f);           // dhy
    launch.Floats(lstm.B * lstm.H, 1.0f);           // dcy
    std::vector<uint8_t> reserve = forward.buffer(7);
    if (tamper) reserve[0] ^= 0xff;
    launch.Bytes(reserve.data(), reserve.size());
    for (int64_t n : {lstm.T * lstm.B * lstm.I, lstm.B * lstm.H, lstm.B * lstm.H, lstm.params()}) {
      launch.Floats(n);
    }
    launch.ParamArray<int32_t>(lengths);
    return launch.Run(rnn::kBackward);
  };
  EXPECT_TRUE(backward({}, false).ok());
  EXPECT_EQ(backward({}, true).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backward({3, 2}, false).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RnnKernels, RejectsInconsistentDescriptors) {
  LstmCase lstm;
  auto run = [&](auto&& describe) {
    TestLaunch launch;
    describe(launch);
    lstm.ForwardBuffers(launch, 0.0f);
    launch.Param<uint32_t>(1).Param<uint64_t>(0).ParamArray<int32_t>({});
    return launch.Run(rnn::kForward).code();
  };
  const auto invalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(run([&](TestLaunch& l) {  // x's features differ from input_size
              l.Describe(lstm.rnn).Describe(DropoutDescriptorSettings{}).Tensor({3, 2, 5})
                  .Tensor({3, 2, 2}).Tensor({1, 2, 2}).Tensor({1, 2, 2}).Tensor({lstm.params()});
            }), invalid);
  EXPECT_EQ(run([&](TestLaunch& l) {  // the weight space has the wrong size
              l.Describe(lstm.rnn).Describe(DropoutDescriptorSettings{}).Tensor({3, 2, 2})
                  .Tensor({3, 2, 2}).Tensor({1, 2, 2}).Tensor({1, 2, 2}).Tensor({7});
            }), invalid);
  EXPECT_EQ(run([&](TestLaunch& l) {  // descriptors in the wrong order
              l.Describe(DropoutDescriptorSettings{}).Describe(lstm.rnn).Tensor({3, 2, 2})
                  .Tensor({3, 2, 2}).Tensor({1, 2, 2}).Tensor({1, 2, 2}).Tensor({lstm.params()});
            }), invalid);
  EXPECT_EQ(run([&](TestLaunch& l) {  // a dtype that is not floating point
              RnnDescriptorSettings r = lstm.rnn;
              r.dtype = DType::kInt32;
              l.Describe(r).Describe(DropoutDescriptorSettings{}).Tensor({3, 2, 2})
                  .Tensor({3, 2, 2}).Tensor({1, 2, 2}).Tensor({1, 2, 2}).Tensor({lstm.params()});
            }), invalid);
  EXPECT_EQ(run([&](TestLaunch& l) {  // dropout outside [0, 1)
              DropoutDescriptorSettings d;
              d.dropout = 1.0f;
              l.Describe(lstm.rnn).Describe(d).Tensor({3, 2, 2}).Tensor({3, 2, 2})
                  .Tensor({1, 2, 2}).Tensor({1, 2, 2}).Tensor({lstm.params()});
            }), invalid);
  EXPECT_EQ(run([&](TestLaunch& l) {  // absurd sizes: rejected before anything is allocated
              RnnDescriptorSettings r = lstm.rnn;
              r.hidden_size = r.proj_size = int64_t{1} << 40;
              l.Describe(r).Describe(DropoutDescriptorSettings{}).Tensor({3, 2, 2})
                  .Tensor({3, 2, int64_t{1} << 40}).Tensor({1, 2, int64_t{1} << 40})
                  .Tensor({1, 2, int64_t{1} << 40}).Tensor({1});
            }), invalid);
  EXPECT_EQ(run([&](TestLaunch& l) {  // negative sequence length
              l.Describe(lstm.rnn).Describe(DropoutDescriptorSettings{}).Tensor({-3, 2, 2})
                  .Tensor({-3, 2, 2}).Tensor({1, 2, 2}).Tensor({1, 2, 2}).Tensor({lstm.params()});
            }), invalid);
  EXPECT_EQ(run([&](TestLaunch& l) {
              RnnDescriptorSettings r = lstm.rnn;
              r.input_mode = RnnInputMode::kSkip;
              l.Describe(r).Describe(DropoutDescriptorSettings{}).Tensor({3, 2, 2})
                  .Tensor({3, 2, 2}).Tensor({1, 2, 2}).Tensor({1, 2, 2}).Tensor({lstm.params()});
            }), absl::StatusCode::kUnimplemented);
}

TEST(RnnKernels, RejectsShortBuffersAndBadParameters) {
  LstmCase lstm;
  auto run = [&](size_t short_buffer, uint32_t flags, std::vector<int32_t> lengths,
                 bool truncate) {
    TestLaunch launch;
    lstm.Describe(launch);
    lstm.ForwardBuffers(launch, 0.0f);
    if (short_buffer < 8) launch.buffer(short_buffer).resize(launch.buffer(short_buffer).size() - 1);
    launch.Param<uint32_t>(flags).Param<uint64_t>(0);
    if (!truncate) launch.ParamArray<int32_t>(lengths);
    return launch.Run(rnn::kForward).code();
  };
  const auto invalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(run(8, 1, {}, false), absl::StatusCode::kOk);
  for (size_t buffer = 0; buffer < 8; ++buffer) {
    EXPECT_EQ(run(buffer, 1, {}, false), invalid) << "buffer " << buffer;
  }
  EXPECT_EQ(run(8, 1, {3}, false), invalid);       // one length for a batch of two
  EXPECT_EQ(run(8, 1, {3, 4}, false), invalid);    // longer than the sequence
  EXPECT_EQ(run(8, 1, {-1, 2}, false), invalid);   // negative
  EXPECT_EQ(run(8, 1, {}, true), invalid);         // truncated parameter block
  EXPECT_EQ(run(8, 2, {}, false), invalid);        // unknown flag
  EXPECT_EQ(run(8, 0, {}, false), invalid);        // inference names 7 buffers, not 8
}

TEST(ReverseKernels, ReverseSequenceClampsLengthsAndRejectsBadLaunches) {
  // x [3, 4] (batch 3, sequence 4), lengths {-2, 9, 2}.
  std::vector<float> x = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  std::vector<int32_t> lengths = {-2, 9, 2};
  auto make = [&](TestLaunch& launch) {
    launch.Bytes(x.data(), x.size() * 4);
    launch.Bytes(lengths.data(), lengths.size() * 4);
    launch.Floats(12);
  };
  TestLaunch ok;
  make(ok);
  ok.Param<uint32_t>(4).Param<uint32_t>(4).ParamArray<int64_t>({3, 4}).Param<int32_t>(0)
      .Param<int32_t>(1);
  ASSERT_TRUE(ok.Run(data_movement::kReverseSequence).ok());
  const float expected[12] = {0, 1, 2, 3, 7, 6, 5, 4, 9, 8, 10, 11};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(ReadFloat(ok, 2, i), expected[i]) << i;

  auto bad = [&](uint32_t esize, uint32_t lsize, std::vector<int64_t> dims, int32_t b,
                 int32_t s) {
    TestLaunch launch;
    make(launch);
    launch.Param<uint32_t>(esize).Param<uint32_t>(lsize).ParamArray<int64_t>(dims)
        .Param<int32_t>(b).Param<int32_t>(s);
    return launch.Run(data_movement::kReverseSequence).code();
  };
  const auto invalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(bad(3, 4, {3, 4}, 0, 1), invalid);     // element size
  EXPECT_EQ(bad(4, 2, {3, 4}, 0, 1), invalid);     // length size
  EXPECT_EQ(bad(4, 4, {12}, 0, 1), invalid);       // rank 1
  EXPECT_EQ(bad(4, 4, {3, 4}, 1, 1), invalid);     // batch_dim == seq_dim
  EXPECT_EQ(bad(4, 4, {3, 4}, 0, 5), invalid);     // out of range
  EXPECT_EQ(bad(4, 4, {4, 4}, 0, 1), invalid);     // x buffer too small
  EXPECT_EQ(bad(4, 4, {3, 8}, 1, 0), invalid);     // more lengths than the buffer holds
  EXPECT_EQ(bad(4, 4, {3, -4}, 0, 1), invalid);    // negative dimension
}

TEST(ReverseKernels, ReverseRejectsBadFlagsAndShapes) {
  std::vector<float> x = {0, 1, 2, 3, 4, 5};
  auto run = [&](std::vector<int64_t> dims, std::vector<uint8_t> flags) {
    TestLaunch launch;
    launch.Bytes(x.data(), x.size() * 4);
    launch.Floats(6);
    launch.Param<uint32_t>(4).ParamArray<int64_t>(dims).ParamArray<uint8_t>(flags);
    absl::Status status = launch.Run(data_movement::kReverse);
    if (status.ok()) EXPECT_EQ(ReadFloat(launch, 1, 0), 2.0f);  // [2, 3] reversed on dim 1
    return status.code();
  };
  EXPECT_EQ(run({2, 3}, {0, 1}), absl::StatusCode::kOk);
  EXPECT_EQ(run({2, 3}, {0, 2}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run({2, 3}, {1}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run({3, 3}, {0, 1}), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vgpu
