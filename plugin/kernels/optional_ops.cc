// OptionalHasValue on the virtual GPU. Keras' `fit` asks each step whether the train function's
// Optional of logs has a value, eagerly; TensorFlow runs the op as a one-op function on the
// device that holds the Optional (GPU:0: the train function's outputs are there). Without a
// kernel here the op ran on the CPU inside that function, and its bool result went up to the
// device through TensorFlow's copy path (a multi-device function: send and receive, events),
// then down again for Python's `if`: ~130-400 µs a step where TensorFlow-CPU takes ~12 µs. As
// in TensorFlow's GPU build the Optional (a DT_VARIANT scalar) is read in host memory; unlike
// there, the bool is made in device memory by a one-byte memset on the op's stream, so the
// function stays on one device and returns what it made without a copy. Through a server a
// notification follows the memset, so that the read's synchronisation needs no round trip.
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/client/device_client.h"
#include "plugin/common/status_macros.h"
#include "plugin/kernels/kernel_support.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/op_registration.h"
#include "plugin/kernels/status_op_kernel.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/variant.h"
#include "tensorflow/core/kernels/data/optional_ops_util.h"

namespace vgpu {
namespace {

namespace tf = ::tensorflow;

class OptionalHasValueOp : public StatusOpKernel {
 public:
  explicit OptionalHasValueOp(tf::OpKernelConstruction* context) : StatusOpKernel(context) {}

 private:
  absl::Status ComputeWithStatus(tf::OpKernelContext* context) override {
    const tf::Tensor& optional = context->input(0);
    const tf::data::OptionalVariant* value =
        optional.dtype() == tf::DT_VARIANT && optional.dims() == 0
            ? optional.scalar<tf::Variant>()().get<tf::data::OptionalVariant>()
            : nullptr;
    if (value == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("Input tensor must be a scalar containing an OptionalVariant object, "
                       "but got ", optional.DebugString()));
    }
    tf::Tensor* has_value = nullptr;
    VGPU_RETURN_IF_ERROR(context->allocate_output(0, tf::TensorShape({}), &has_value));
    VGPU_ASSIGN_OR_RETURN(ClientStream * stream,
                          GetClientStream(reinterpret_cast<TF_OpKernelContext*>(context)));
    VGPU_RETURN_IF_ERROR(stream->device().Memset(
        *stream, reinterpret_cast<uint64_t>(has_value->data()), value->has_value() ? 1 : 0,
        /*pattern_bytes=*/1, /*size=*/1));
    // Python reads the bool next; through a server, its synchronisation is then answered by
    // this notification instead of a round trip.
    return stream->device().PostSettlingNotification(*stream);
  }
};

}  // namespace

void RegisterOptionalOps(const char* device_type) {
  // By hand rather than with REGISTER_KERNEL_BUILDER's static registrars: the device type is
  // configurable. Registrars live for the process. TensorFlow registers its own kernel for
  // "GPU" (the bool in host memory) at priority 1; this one outranks it.
  new tf::kernel_factory::OpKernelRegistrar(
      tf::KernelDefBuilder("OptionalHasValue")
          .Device(device_type)
          .Priority(2)
          .Build(),
      "VgpuOptionalHasValue", [](tf::OpKernelConstruction* context) -> tf::OpKernel* {
        return new OptionalHasValueOp(context);
      });
  CatalogKernel("OptionalHasValue", {}, {});
  DocumentOp("OptionalHasValue", "",
             "The Optional in host memory, the bool made on the device (one-byte memset), so "
             "Keras' per-step check is not a host-device round trip.");
}

}  // namespace vgpu
