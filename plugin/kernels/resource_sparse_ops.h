// The sparse family's resource-variable ops (ResourceGather, ResourceGatherNd,
// ResourceScatter*, ResourceScatterNd*), written against TensorFlow's C++ API in
// resource_sparse_ops.cc; RegisterSparseOps (sparse_ops.cc) registers them.
#ifndef VGPU_KERNELS_RESOURCE_SPARSE_OPS_H_
#define VGPU_KERNELS_RESOURCE_SPARSE_OPS_H_

namespace vgpu {

// Registers the resource-variable gathers and scatters for `device_type`.
void RegisterResourceSparseOps(const char* device_type);

}  // namespace vgpu

#endif  // VGPU_KERNELS_RESOURCE_SPARSE_OPS_H_
