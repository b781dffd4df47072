// ZerosLike of a DT_VARIANT scalar on the virtual GPU. TensorFlow differentiates a while loop
// (Keras' SimpleRNN, GRU and LSTM without cuDNN) through TensorLists and asks for zeros like
// them; its GPU build has a kernel for that (ZerosLikeOp<GPUDevice, Variant>), so without one
// here the op would leave the device. As in TensorFlow, the variant itself lives in host
// memory; each element tensor of the list gets a zero-filled device tensor of its dtype and
// shape (elementwise::kSetTensor), nested lists recursively, uninitialised elements stay
// uninitialised (TensorFlow's TensorListZerosLike walks the list). An Optional (the gradient of
// a tf.cond over an optional value, e.g. dynamic_rnn with sequence lengths) gets zeros like each
// of its values, none for an empty one (TensorFlow's OptionalZerosLike). Other variant types have
// no zeros-like function on this device: Internal, TensorFlow's error for a missing one.
#include "plugin/kernels/elementwise_variant_ops.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugin/kernels/dtype_map.h"
#include "plugin/kernels/kernel_launch.h"
#include "plugin/kernels/kernel_support.h"
#include "plugin/kernels/op_catalog.h"
#include "plugin/kernels/status_op_kernel.h"
#include "plugin/protocol/kernels/elementwise.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/variant.h"
#include "tensorflow/core/kernels/data/optional_ops_util.h"
#include "tensorflow/core/kernels/tensor_list.h"
#include "tensorflow/core/kernels/tensor_list_util.h"

namespace vgpu {
namespace {

namespace tf = ::tensorflow;

// The device type the kernel is registered for (for error messages).
std::string& RegisteredDeviceType() {
  static std::string* device_type = new std::string("GPU");
  return *device_type;
}

absl::Status ZerosLikeVariant(tf::OpKernelContext* context, ClientStream& stream,
                              const tf::Variant& value, tf::Variant* zeros);

// A zero tensor of `x`'s dtype and shape: device memory set to 0 on the op's stream, or for a
// variant scalar the zeros of its value in host memory.
absl::Status ZerosLikeTensor(tf::OpKernelContext* context, ClientStream& stream,
                             const tf::Tensor& x, tf::Tensor* out) {
  if (x.dtype() == tf::DT_INVALID) {  // an element never set
    *out = tf::Tensor(tf::DT_INVALID);
    return absl::OkStatus();
  }
  if (x.dtype() == tf::DT_VARIANT) {
    if (x.dims() != 0) {
      return absl::InvalidArgumentError(
          "ZerosLike non-scalar Tensor with dtype=DT_VARIANT is not supported.");
    }
    *out = tf::Tensor(tf::cpu_allocator(), tf::DT_VARIANT, tf::TensorShape({}));
    return ZerosLikeVariant(context, stream, x.scalar<tf::Variant>()(),
                            &out->scalar<tf::Variant>()());
  }
  const std::optional<DType> dtype = ToDType(static_cast<TF_DataType>(x.dtype()));
  if (!dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Trying to compute zeros_like for unsupported dtype ", tf::DataTypeString(x.dtype())));
  }
  VGPU_RETURN_IF_ERROR(context->allocate_temp(x.dtype(), x.shape(), out));
  if (out->NumElements() == 0) return absl::OkStatus();
  TensorDescriptorSettings flat;
  flat.dtype = *dtype;
  flat.rank = 1;
  flat.dims[0] = out->NumElements();
  return KernelLaunch(stream)
      .Describe(flat)
      .Buffer(BufferArg{reinterpret_cast<uint64_t>(out->data()),
                        static_cast<uint64_t>(out->TotalBytes())})
      .Param(0.0)
      .Run(elementwise::kSetTensor);
}

absl::Status ZerosLikeVariant(tf::OpKernelContext* context, ClientStream& stream,
                              const tf::Variant& value, tf::Variant* zeros) {
  auto zeros_like_tensor = [&stream](tf::OpKernelContext* c, const tf::Tensor& x,
                                     tf::Tensor* out) -> absl::Status {
    return ZerosLikeTensor(c, stream, x, out);
  };
  if (const auto* optional = value.get<tf::data::OptionalVariant>(); optional != nullptr) {
    tf::data::OptionalVariant result;
    VGPU_RETURN_IF_ERROR(
        tf::data::OptionalZerosLike(context, *optional, &result, zeros_like_tensor));
    *zeros = std::move(result);
    return absl::OkStatus();
  }
  const tf::TensorList* list = value.get<tf::TensorList>();
  if (list == nullptr) {
    return absl::InternalError(absl::StrCat(
        "No unary variant unary_op function found for op ZEROS_LIKE Variant type_name: ",
        value.TypeName(), " for device type: ", RegisteredDeviceType()));
  }
  tf::TensorList result;
  VGPU_RETURN_IF_ERROR(tf::TensorListZerosLike(context, *list, &result, zeros_like_tensor));
  *zeros = std::move(result);
  return absl::OkStatus();
}

class VariantZerosLikeOp : public StatusOpKernel {
 public:
  explicit VariantZerosLikeOp(tf::OpKernelConstruction* context) : StatusOpKernel(context) {}

 private:
  absl::Status ComputeWithStatus(tf::OpKernelContext* context) override {
    const tf::Tensor& input = context->input(0);
    if (input.dims() != 0) {
      return absl::InvalidArgumentError(
          "ZerosLike non-scalar Tensor with dtype=DT_VARIANT is not supported.");
    }
    VGPU_ASSIGN_OR_RETURN(ClientStream * stream,
                          GetClientStream(reinterpret_cast<TF_OpKernelContext*>(context)));
    // DT_VARIANT tensors wrap C++ objects: host memory, as on TensorFlow's GPUs.
    tf::Tensor out(tf::cpu_allocator(), tf::DT_VARIANT, tf::TensorShape({}));
    VGPU_RETURN_IF_ERROR(ZerosLikeVariant(context, *stream, input.scalar<tf::Variant>()(),
                                          &out.scalar<tf::Variant>()()));
    context->set_output(0, out);
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterVariantZerosLike(const char* device_type) {
  RegisteredDeviceType() = device_type;
  // Registered at TF_InitKernel time (the device type is configurable), hence by hand rather
  // than with REGISTER_KERNEL_BUILDER's static registrars. Registrars live for the process.
  new tf::kernel_factory::OpKernelRegistrar(
      tf::KernelDefBuilder("ZerosLike")
          .Device(device_type)
          .TypeConstraint("T", tf::DT_VARIANT)
          .Build(),
      "VgpuZerosLikeVariant",
      [](tf::OpKernelConstruction* context) -> tf::OpKernel* {
        return new VariantZerosLikeOp(context);
      });
  const CatalogConstraint constraint{"T", static_cast<TF_DataType>(tf::DT_VARIANT)};
  CatalogKernel("ZerosLike", {&constraint, 1}, {});
}

}  // namespace vgpu
