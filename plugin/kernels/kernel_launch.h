// KernelLaunch: the one way an op kernel puts work on the virtual GPU. After validating its
// inputs and allocating its outputs (as TensorFlow's own kernel would), an op builds one launch:
//
//   return KernelLaunch(context)
//       .Describe(pooling_settings)       // descriptors, in the kernel's documented order
//       .DescribeTensor(dtype, x_dims)
//       .Buffer(x).Buffer(y)              // device buffers: inputs first, outputs last
//       .Param(params)                    // the kernel's parameter block, if it has one
//       .Run(pooling::kForward);
//
// Each Describe creates and sets a descriptor through the device's virtual DNN API and destroys
// it when the launch object goes out of scope, exactly as TensorFlow's cuDNN kernels do around
// every call; the client runtime decides whether those calls cross to the executor
// (docs/method.md).
// Descriptor settings are encoded into the launch in one place (DnnApi::Launch) and parsed in one
// place on the executor (KernelContext::Descriptor).
//
// Errors are deferred: the first failing step (no stream, a descriptor the API refused) is
// what Run returns, and nothing is posted then. Not thread-safe; one launch per object.
#ifndef VGPU_KERNELS_KERNEL_LAUNCH_H_
#define VGPU_KERNELS_KERNEL_LAUNCH_H_

#include <cstdint>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "plugin/client/device_client.h"
#include "plugin/client/dnn_api.h"
#include "plugin/protocol/descriptors.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/protocol/launch_params.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/c/tf_tensor.h"

namespace vgpu {

class OpContext;

class KernelLaunch {
 public:
  // A launch on the stream of the op being computed (C API kernels).
  explicit KernelLaunch(const OpContext& context);
  // A launch on `stream` (kernels written against TensorFlow's C++ API find it themselves).
  explicit KernelLaunch(ClientStream& stream) : stream_(&stream) {}
  // A launch that fails with `error` (a stream that could not be found).
  explicit KernelLaunch(absl::Status error) : status_(std::move(error)) {}
  KernelLaunch(const KernelLaunch&) = delete;
  KernelLaunch& operator=(const KernelLaunch&) = delete;

  // Creates and sets a descriptor of Settings' kind (destroyed with this object).
  template <typename Settings>
  KernelLaunch& Describe(const Settings& settings) {
    if (!status_.ok()) return *this;
    absl::StatusOr<ScopedDescriptor> descriptor =
        ScopedDescriptor::Make(stream_->device().dnn(), *stream_, settings);
    if (!descriptor.ok()) {
      status_ = descriptor.status();
    } else {
      descriptors_.push_back(*std::move(descriptor));
    }
    return *this;
  }
  // A dense tensor descriptor of `dtype` and `dims` (rank <= kMaxRank).
  KernelLaunch& DescribeTensor(TF_DataType dtype, absl::Span<const int64_t> dims);
  // A dense tensor descriptor of `tensor`'s dtype and shape.
  KernelLaunch& DescribeTensor(const TF_Tensor* tensor);

  // Device buffers, in the kernel's order: inputs first, outputs last (iteration detection
  // reads the last buffer as the launch's output).
  KernelLaunch& Buffer(BufferArg buffer) {
    buffers_.push_back(buffer);
    return *this;
  }
  KernelLaunch& Buffer(const TF_Tensor* tensor);
  KernelLaunch& Buffers(absl::Span<const BufferArg> buffers) {
    buffers_.insert(buffers_.end(), buffers.begin(), buffers.end());
    return *this;
  }

  // Appends to the parameter block (launch_params.h).
  template <typename T>
  KernelLaunch& Param(const T& value) {
    ParamWriter(&params_).Put(value);
    return *this;
  }
  template <typename T>
  KernelLaunch& ParamArray(absl::Span<const T> values) {
    ParamWriter(&params_).PutArray(values);
    return *this;
  }
  KernelLaunch& Params(absl::Span<const uint8_t> bytes) {
    params_.insert(params_.end(), bytes.begin(), bytes.end());
    return *this;
  }

  // Posts the launch of `kernel` (returns at once) or returns the first deferred error.
  absl::Status Run(KernelId kernel);

 private:
  ClientStream* stream_ = nullptr;
  absl::Status status_;
  absl::InlinedVector<ScopedDescriptor, 6> descriptors_;
  absl::InlinedVector<BufferArg, 6> buffers_;
  ParamBlock params_;
};

}  // namespace vgpu

#endif  // VGPU_KERNELS_KERNEL_LAUNCH_H_
