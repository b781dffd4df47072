// The configure-time probe of cmake/CpuTarget.cmake: compiled (not run) with the flags of the
// chosen CPU target, it includes the Eigen headers the CPU executor's kernels include (the
// tensor module, its thread pool, the spatial convolution) and instantiates the packet math of
// every floating type the kernels vectorise (float, double, half, bfloat16: element-wise maps
// and reductions on a thread-pool device), so that an ISA extension the compiler or
// TensorFlow's Eigen cannot build for fails here, at configure time, in seconds, instead of in
// the middle of the build. (scripts/compile_matrix.sh compiles the kernels themselves.)
#define EIGEN_USE_THREADS
#include <cstdint>

#include "unsupported/Eigen/CXX11/Tensor"
#include "unsupported/Eigen/CXX11/ThreadPool"
#include "xla/tsl/framework/convolution/eigen_spatial_convolutions.h"

namespace {

template <typename T>
void ElementwiseAndReductions(const Eigen::ThreadPoolDevice& device, T* a, T* b, T* out,
                              Eigen::Index n) {
  Eigen::TensorMap<Eigen::Tensor<T, 1, Eigen::RowMajor>> x(a, n), y(b, n), z(out, n);
  z.device(device) = (x * y + x.exp() - y.sqrt()).cwiseMax(x) / (y.abs() + T(1));
  z.device(device) = x.tanh() + x.log1p() + x.rsqrt() + x.sigmoid();
  Eigen::TensorMap<Eigen::Tensor<T, 2, Eigen::RowMajor>> m(a, n / 4, 4), r(out, n / 4, 1);
  Eigen::array<Eigen::Index, 1> columns{1};
  Eigen::array<Eigen::Index, 2> kept{n / 4, 1};
  r.device(device) = m.sum(columns).reshape(kept);
  r.device(device) = m.maximum(columns).reshape(kept);
}

}  // namespace

// Never called: the probe is only compiled. Exported so nothing is optimised away.
void VgpuCpuTargetProbe(const Eigen::ThreadPoolDevice& device, void* a, void* b, void* out,
                        Eigen::Index n) {
  ElementwiseAndReductions(device, static_cast<float*>(a), static_cast<float*>(b),
                           static_cast<float*>(out), n);
  ElementwiseAndReductions(device, static_cast<double*>(a), static_cast<double*>(b),
                           static_cast<double*>(out), n);
  ElementwiseAndReductions(device, static_cast<Eigen::half*>(a), static_cast<Eigen::half*>(b),
                           static_cast<Eigen::half*>(out), n);
  ElementwiseAndReductions(device, static_cast<Eigen::bfloat16*>(a),
                           static_cast<Eigen::bfloat16*>(b), static_cast<Eigen::bfloat16*>(out), n);
}
