// Names of the descriptor kinds (see descriptors.h).
#include "plugin/protocol/descriptors.h"

namespace vgpu {

const char* DescriptorKindName(DescriptorKind kind) {
  switch (kind) {
    case DescriptorKind::kTensor: return "tensor";
    case DescriptorKind::kFilter: return "filter";
    case DescriptorKind::kConvolution: return "convolution";
    case DescriptorKind::kPooling: return "pooling";
    case DescriptorKind::kActivation: return "activation";
    case DescriptorKind::kOpTensor: return "op_tensor";
    case DescriptorKind::kReduce: return "reduce";
    case DescriptorKind::kMatmul: return "matmul";
    case DescriptorKind::kRnn: return "rnn";
    case DescriptorKind::kDropout: return "dropout";
  }
  return "unknown";
}

}  // namespace vgpu
