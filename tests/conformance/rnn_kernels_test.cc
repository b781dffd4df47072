// The recurrent kernels (protocol/kernels/rnn.h) and the reversal kernels of the data movement
// family, run on every executor of the conformance suite (executor_conformance.h) as a session
// would run them: a valid launch computes cuDNN's LSTM, and malformed launches from a hostile
// client (inconsistent descriptors, short buffers, bad sequence lengths, absurd sizes, a
// foreign reserve space, bad parameter blocks) are InvalidArgument errors, never crashes or
// out-of-bounds accesses.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "plugin/protocol/kernels/data_movement.h"
#include "plugin/protocol/kernels/rnn.h"
#include "tests/conformance/executor_conformance.h"

namespace vgpu {
namespace {

using executor_test::ExecutorLaunch;
using executor_test::Filled;
using executor_test::GuardedBuffer;

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
  void Describe(ExecutorLaunch& launch) const {
    launch.Describe(rnn)
        .Describe(DropoutDescriptorSettings{})
        .Tensor({T, B, I})
        .Tensor({T, B, H})
        .Tensor({1, B, H})
        .Tensor({1, B, H})
        .Tensor({params()});
  }
  // Buffers [x, hx, cx, w, y, hy, cy, reserve] with zero weights and cx = c0.
  void ForwardBuffers(ExecutorLaunch& launch, float c0) const {
    launch.AddBuffer(Filled<float>(T * B * I, 0.5f));
    launch.AddBuffer(Filled<float>(B * H, 0.25f));
    launch.AddBuffer(Filled<float>(B * H, c0));
    launch.AddBuffer(Filled<float>(params(), 0.0f));
    launch.AddBuffer(Filled<float>(T * B * H));
    launch.AddBuffer(Filled<float>(B * H));
    launch.AddBuffer(Filled<float>(B * H));
    launch.AddBuffer(Filled<float>(reserve_floats()));
  }
  // A training forward launch of all sequences at full length (descriptors, buffers, params).
  void TrainingForward(ExecutorLaunch& launch, float c0) const {
    Describe(launch);
    ForwardBuffers(launch, c0);
    launch.Param<uint32_t>(1).Param<uint64_t>(0).ParamArray<int32_t>({});
  }
};

float ReadFloat(ExecutorLaunch& launch, size_t buffer, size_t index) {
  return launch.buffer(buffer).As<float>()[index];
}

class RnnKernels : public executor_test::ExecutorConformanceTest {};
VGPU_CONFORMANCE_SUITE(RnnKernels);
class ReverseKernels : public executor_test::ExecutorConformanceTest {};
VGPU_CONFORMANCE_SUITE(ReverseKernels);

TEST_P(RnnKernels, ForwardComputesCudnnLstm) {
  LstmCase lstm;
  ExecutorLaunch launch = Launch();
  lstm.TrainingForward(launch, 0.8f);
  ASSERT_TRUE(launch.Run(rnn::kForward).ok());
  // Zero weights: i = f = o = 1/2, g = 0, so c_t = c_{t-1} / 2 and h_t = tanh(c_t) / 2.
  const float c3 = 0.8f / 8.0f;
  EXPECT_NEAR(ReadFloat(launch, 6, 0), c3, 1e-6);
  EXPECT_NEAR(ReadFloat(launch, 5, 3), std::tanh(c3) / 2.0f, 1e-6);
  EXPECT_NEAR(ReadFloat(launch, 4, 0), std::tanh(0.4f) / 2.0f, 1e-6);  // y at t = 0
}

TEST_P(RnnKernels, BackwardRunsOnItsForwardsReserveAndRejectsAForeignOne) {
  LstmCase lstm;
  ExecutorLaunch forward = Launch();
  lstm.TrainingForward(forward, 0.8f);
  ASSERT_TRUE(forward.Run(rnn::kForward).ok());
  auto backward = [&](std::vector<int32_t> lengths, bool tamper) {
    ExecutorLaunch launch = Launch();
    lstm.Describe(launch);
    for (size_t i : {0, 1, 2, 3}) launch.AddBuffer(forward.buffer(i));
    launch.AddBuffer(Filled<float>(lstm.T * lstm.B * lstm.H, 1.0f));  // dy
    launch.AddBuffer(Filled<float>(lstm.B * lstm.H, 1.0f));           // dhy
    launch.AddBuffer(Filled<float>(lstm.B * lstm.H, 1.0f));           // dcy
    GuardedBuffer reserve = forward.buffer(7);
    if (tamper) reserve.data()[0] ^= 0xff;
    launch.AddBuffer(reserve);
    for (int64_t n : {lstm.T * lstm.B * lstm.I, lstm.B * lstm.H, lstm.B * lstm.H, lstm.params()}) {
      launch.AddBuffer(Filled<float>(n));
    }
    launch.ParamArray<int32_t>(lengths);
    return launch.Run(rnn::kBackward);
  };
  EXPECT_TRUE(backward({}, false).ok());
  EXPECT_EQ(backward({}, true).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backward({3, 2}, false).code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(RnnKernels, RejectsInconsistentDescriptors) {
  LstmCase lstm;
  auto run = [&](auto&& describe) {
    ExecutorLaunch launch = Launch();
    describe(launch);
    lstm.ForwardBuffers(launch, 0.0f);
    launch.Param<uint32_t>(1).Param<uint64_t>(0).ParamArray<int32_t>({});
    return launch.Run(rnn::kForward).code();
  };
  const auto invalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(run([&](ExecutorLaunch& l) {  // x's features differ from input_size
              l.Describe(lstm.rnn).Describe(DropoutDescriptorSettings{}).Tensor({3, 2, 5})
                  .Tensor({3, 2, 2}).Tensor({1, 2, 2}).Tensor({1, 2, 2}).Tensor({lstm.params()});
            }), invalid);
  EXPECT_EQ(run([&](ExecutorLaunch& l) {  // the weight space has the wrong size
              l.Describe(lstm.rnn).Describe(DropoutDescriptorSettings{}).Tensor({3, 2, 2})
                  .Tensor({3, 2, 2}).Tensor({1, 2, 2}).Tensor({1, 2, 2}).Tensor({7});
            }), invalid);
  EXPECT_EQ(run([&](ExecutorLaunch& l) {  // descriptors in the wrong order
              l.Describe(DropoutDescriptorSettings{}).Describe(lstm.rnn).Tensor({3, 2, 2})
                  .Tensor({3, 2, 2}).Tensor({1, 2, 2}).Tensor({1, 2, 2}).Tensor({lstm.params()});
            }), invalid);
  EXPECT_EQ(run([&](ExecutorLaunch& l) {  // a dtype that is not floating point
              RnnDescriptorSettings r = lstm.rnn;
              r.dtype = DType::kInt32;
              l.Describe(r).Describe(DropoutDescriptorSettings{}).Tensor({3, 2, 2})
                  .Tensor({3, 2, 2}).Tensor({1, 2, 2}).Tensor({1, 2, 2}).Tensor({lstm.params()});
            }), invalid);
  EXPECT_EQ(run([&](ExecutorLaunch& l) {  // dropout outside [0, 1)
              DropoutDescriptorSettings d;
              d.dropout = 1.0f;
              l.Describe(lstm.rnn).Describe(d).Tensor({3, 2, 2}).Tensor({3, 2, 2})
                  .Tensor({1, 2, 2}).Tensor({1, 2, 2}).Tensor({lstm.params()});
            }), invalid);
  EXPECT_EQ(run([&](ExecutorLaunch& l) {  // absurd sizes: rejected before anything is allocated
              RnnDescriptorSettings r = lstm.rnn;
              r.hidden_size = r.proj_size = int64_t{1} << 40;
              l.Describe(r).Describe(DropoutDescriptorSettings{}).Tensor({3, 2, 2})
                  .Tensor({3, 2, int64_t{1} << 40}).Tensor({1, 2, int64_t{1} << 40})
                  .Tensor({1, 2, int64_t{1} << 40}).Tensor({1});
            }), invalid);
  EXPECT_EQ(run([&](ExecutorLaunch& l) {  // negative sequence length
              l.Describe(lstm.rnn).Describe(DropoutDescriptorSettings{}).Tensor({-3, 2, 2})
                  .Tensor({-3, 2, 2}).Tensor({1, 2, 2}).Tensor({1, 2, 2}).Tensor({lstm.params()});
            }), invalid);
  EXPECT_EQ(run([&](ExecutorLaunch& l) {
              RnnDescriptorSettings r = lstm.rnn;
              r.input_mode = RnnInputMode::kSkip;
              l.Describe(r).Describe(DropoutDescriptorSettings{}).Tensor({3, 2, 2})
                  .Tensor({3, 2, 2}).Tensor({1, 2, 2}).Tensor({1, 2, 2}).Tensor({lstm.params()});
            }), absl::StatusCode::kUnimplemented);
}

TEST_P(RnnKernels, RejectsShortBuffersAndBadParameters) {
  LstmCase lstm;
  auto run = [&](size_t short_buffer, uint32_t flags, std::vector<int32_t> lengths,
                 bool truncate) {
    ExecutorLaunch launch = Launch();
    lstm.Describe(launch);
    lstm.ForwardBuffers(launch, 0.0f);
    if (short_buffer < 8) {
      GuardedBuffer& shortened = launch.buffer(short_buffer);
      shortened.Resize(shortened.size() - 1);
    }
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

TEST_P(ReverseKernels, ReverseSequenceClampsLengthsAndRejectsBadLaunches) {
  // x [3, 4] (batch 3, sequence 4), lengths {-2, 9, 2}.
  std::vector<float> x = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  std::vector<int32_t> lengths = {-2, 9, 2};
  auto make = [&](ExecutorLaunch& launch) {
    launch.AddBuffer(GuardedBuffer::Of(x));
    launch.AddBuffer(GuardedBuffer::Of(lengths));
    launch.AddBuffer(Filled<float>(12));
  };
  ExecutorLaunch ok = Launch();
  make(ok);
  ok.Param<uint32_t>(4).Param<uint32_t>(4).ParamArray<int64_t>({3, 4}).Param<int32_t>(0)
      .Param<int32_t>(1);
  ASSERT_TRUE(ok.Run(data_movement::kReverseSequence).ok());
  const float expected[12] = {0, 1, 2, 3, 7, 6, 5, 4, 9, 8, 10, 11};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(ReadFloat(ok, 2, i), expected[i]) << i;

  auto bad = [&](uint32_t esize, uint32_t lsize, std::vector<int64_t> dims, int32_t b,
                 int32_t s) {
    ExecutorLaunch launch = Launch();
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

TEST_P(ReverseKernels, ReverseRejectsBadFlagsAndShapes) {
  std::vector<float> x = {0, 1, 2, 3, 4, 5};
  auto run = [&](std::vector<int64_t> dims, std::vector<uint8_t> flags) {
    ExecutorLaunch launch = Launch();
    launch.AddBuffer(GuardedBuffer::Of(x));
    launch.AddBuffer(Filled<float>(6));
    launch.Param<uint32_t>(4).ParamArray<int64_t>(dims).ParamArray<uint8_t>(flags);
    absl::Status status = launch.Run(data_movement::kReverse);
    if (status.ok()) {
      EXPECT_EQ(ReadFloat(launch, 1, 0), 2.0f);  // [2, 3] reversed on dim 1
    }
    return status.code();
  };
  EXPECT_EQ(run({2, 3}, {0, 1}), absl::StatusCode::kOk);
  EXPECT_EQ(run({2, 3}, {0, 2}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run({2, 3}, {1}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run({3, 3}, {0, 1}), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vgpu
